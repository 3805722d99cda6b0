"""ipex-tool import gguf IN.gguf OUT_DIR on the GGUF fixtures of make_llm_fixtures.py: the
directory it writes (safetensors, config, generation config, tokenizer.json, tokenizer_config.json)
loads in generate to the same greedy ids and prompt ids as the .gguf file; OUT_DIR is never
half-written, a directory holding files is refused without --force, bad input is exit 3."""

import json
import os
import shutil

import e2e_common as e2e

LLM = os.path.join(os.environ.get("IPEX_FIXTURES", ""), "llm")
with open(os.path.join(LLM, "llm.json")) as f:
    MANIFEST = json.load(f)
MODELS = MANIFEST["models"]
FILES = ["config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]
TEXTS = ["The quick brown fox", "  spaces  and caf\u00e9 \u4f60\u597d"]


def ids_arg(ids):
    return ",".join(str(i) for i in ids)


class ImportGgufTest(e2e.ToolTestCase):
    def greedy(self, model, prompt, steps):
        out = self.tool_json("generate", model, "--prompt-ids", ids_arg(prompt), "--greedy", "--dtype", "fp32",
                             "--max-new-tokens", steps, "--json")
        return out["sequences"][0]["ids"]

    def prompt_ids(self, model):
        args = ["generate", model, "--max-new-tokens", "0", "--json"]
        for t in TEXTS:
            args += ["--prompt", t]
        return [s["prompt_ids"] for s in self.tool_json(*args)["sequences"]]

    def test_imported_directory_generates_as_the_file(self):
        names = ["gguf_llama_f32", "gguf_llama_q8_0", "gguf_qwen2_f16", "gguf_llama3_f16"]
        if "skip" not in MANIFEST["spm"]:
            names.append("gguf_llama_spm_f32")
        for name in names:
            with self.subTest(model=name):
                m = MODELS[name]
                out = self.path(name)
                summary = self.tool_json("import", "gguf", m["dir"], out, "--json")
                self.assertEqual(sorted(os.listdir(out)), FILES)
                self.assertEqual(summary["files"], FILES)
                self.assertEqual(summary["dtype"], "fp32")
                with open(os.path.join(out, "config.json")) as f:
                    self.assertEqual(json.load(f)["torch_dtype"], "float32")
                self.assertEqual(self.greedy(out, m["prompt"], len(m["greedy"])),
                                 self.greedy(m["dir"], m["prompt"], len(m["greedy"])))
                self.assertEqual(self.prompt_ids(out), self.prompt_ids(m["dir"]))
        if "skip" not in MANIFEST["spm"]:  # the chat template travels to tokenizer_config.json
            with open(os.path.join(self.path("gguf_llama_spm_f32"), "tokenizer_config.json")) as f:
                tc = json.load(f)
            self.assertEqual(tc["chat_template"], MANIFEST["spm"]["chat_template"])
            self.assertEqual((tc["bos_token"], tc["eos_token"], tc["add_bos_token"]), ("<s>", "</s>", True))

    def test_bf16_and_the_output_directory_rules(self):
        src = MODELS["gguf_llama_f32"]["dir"]
        out = self.path("out")
        os.makedirs(out)  # an empty directory is taken
        s = self.tool_json("import", "gguf", src, out, "--dtype", "bf16", "--json")
        self.assertEqual(s["dtype"], "bf16")
        with open(os.path.join(out, "config.json")) as f:
            self.assertEqual(json.load(f)["torch_dtype"], "bfloat16")
        self.assertEqual(len(self.greedy(out, [1, 5, 9], 2)), 2)
        before = sorted(os.listdir(out))
        r = self.run_tool("import", "gguf", src, out)  # holds files: refused, untouched
        self.assert_error(r, e2e.EXIT_USAGE, out, "--force")
        self.assertEqual(sorted(os.listdir(out)), before)
        self.tool("import", "gguf", src, out, "--force")
        with open(os.path.join(out, "config.json")) as f:
            self.assertEqual(json.load(f)["torch_dtype"], "float32")
        self.assert_error(self.run_tool("import", "gguf", src, self.path("x"), "--bits", "4"), e2e.EXIT_USAGE, "--bits")
        self.assert_error(self.run_tool("import", "gptq", src, self.path("y"), "--force"), e2e.EXIT_USAGE, "--force")
        self.assertEqual([n for n in os.listdir(os.path.dirname(out)) if ".tmp-" in n], [])

    def test_bad_input_writes_nothing(self):
        bad = MANIFEST["bad"]
        for name, code in (("gguf_truncated", e2e.EXIT_BAD_INPUT), ("gguf_architecture", e2e.EXIT_UNSUPPORTED)):
            with self.subTest(case=name):
                parent = self.path("bad_" + name)
                os.makedirs(parent)
                out = os.path.join(parent, "out")
                r = self.run_tool("import", "gguf", bad[name]["dir"], out)
                self.assert_error(r, code, *bad[name]["words"])
                self.assertEqual(os.listdir(parent), [])
        text = self.path("not.gguf")
        shutil.copyfile(os.path.join(LLM, "text.txt"), text)
        r = self.run_tool("import", "gguf", text, self.path("z"))
        self.assert_error(r, e2e.EXIT_BAD_INPUT, "not.gguf", "GGUF")
        self.assertFalse(os.path.exists(self.path("z")))


if __name__ == "__main__":
    e2e.main()
