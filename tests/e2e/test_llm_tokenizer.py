"""tokenizer.json encode/decode against an independent implementation: the JavaScript one of
Hugging Face (npm @huggingface/tokenizers), on the fixture tokenizers (SentencePiece-style
with byte fallback, Metaspace, byte-level with the Llama 3 and Qwen2 split patterns) and
probe texts with spaces, newlines, contractions, digits, accents, CJK, emoji and special
tokens. The package is installed into IPEX_NPM_DIR on first use; without node/npm or the
registry the test is skipped with the reason."""

import json
import os
import shutil
import subprocess
import unittest

import e2e_common as e2e

LLM = os.path.join(os.environ.get("IPEX_FIXTURES", ""), "llm")
NPM_DIR = os.environ.get("IPEX_NPM_DIR", "")
PACKAGE = "@huggingface/tokenizers@0.2.0"
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "llm_tokenizer", "encode.mjs")
NAMES = ("llama", "mistral", "qwen2", "llama3")


def javascript_ready():
    if not shutil.which("node") or not shutil.which("npm"):
        return "node/npm not installed"
    if not NPM_DIR:
        return "IPEX_NPM_DIR not set"
    if not os.path.isdir(os.path.join(NPM_DIR, "node_modules", "@huggingface", "tokenizers")):
        os.makedirs(NPM_DIR, exist_ok=True)
        r = subprocess.run(["npm", "install", "--prefix", NPM_DIR, "--no-audit", "--no-fund", PACKAGE],
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            return "npm install failed: " + r.stderr.strip()[-300:]
    shutil.copyfile(SCRIPT, os.path.join(NPM_DIR, "encode.mjs"))
    return None


class TokenizerTest(e2e.ToolTestCase):
    @classmethod
    def setUpClass(cls):
        with open(os.path.join(LLM, "llm.json")) as f:
            cls.manifest = json.load(f)
        cls.skip_reason = javascript_ready()

    def javascript(self, texts, decode):
        req = {"tokenizers": {n: self.manifest["models"][n]["dir"] for n in NAMES}, "texts": texts, "decode": decode}
        path = self.path("request.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(req, f, ensure_ascii=False)
        r = subprocess.run(["node", os.path.join(NPM_DIR, "encode.mjs"), path], capture_output=True, text=True,
                           timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def test_encode_and_decode_match_javascript(self):
        if self.skip_reason:
            self.skipTest(self.skip_reason)
        probes = self.manifest["probes"]
        ours, generated = {}, {}
        for name in NAMES:
            d = self.manifest["models"][name]["dir"]
            args = ["generate", d, "--max-new-tokens", "0", "--json"]
            for p in probes:
                args += ["--prompt", p]
            ours[name] = [s["prompt_ids"] for s in self.tool_json(*args)["sequences"]]
            out = self.tool_json("generate", d, "--prompt", "The quick", "--prompt", "caf\u00e9", "--max-new-tokens",
                                 "24", "--temperature", "2", "--seed", "3", "--json")
            generated[name] = out["sequences"]
        js = self.javascript(probes, {n: [s["ids"] for s in generated[n]] for n in NAMES})
        for name in NAMES:
            for text, mine, theirs in zip(probes, ours[name], js[name]["encoded"]):
                with self.subTest(tokenizer=name, text=text):
                    self.assertEqual(mine, theirs)
            for seq, theirs in zip(generated[name], js[name]["decoded"]):
                with self.subTest(tokenizer=name, ids=seq["ids"]):
                    self.assertEqual(seq["text"], theirs)


if __name__ == "__main__":
    e2e.main()
