// Encodes and decodes with the JavaScript implementation of tokenizer.json
// (@huggingface/tokenizers). node encode.mjs REQUEST.json where REQUEST is
// {"tokenizers": {name: model_dir}, "texts": [...], "decode": {name: [[ids], ...]}}.
import { Tokenizer } from "@huggingface/tokenizers";
import fs from "fs";

const req = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const out = {};
for (const [name, dir] of Object.entries(req.tokenizers)) {
  const tok = new Tokenizer(JSON.parse(fs.readFileSync(dir + "/tokenizer.json", "utf8")), {});
  out[name] = {
    encoded: req.texts.map((t) => tok.encode(t).ids),
    decoded: (req.decode[name] || []).map((ids) => tok.decode(ids, { skip_special_tokens: true })),
  };
}
console.log(JSON.stringify(out));
