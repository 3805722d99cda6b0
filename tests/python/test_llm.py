"""ipex_tool.llm: the tiny Hugging Face checkpoints of tests/fixtures/make_llm_fixtures.py loaded
by the native runtime; greedy ids equal the eager reference's (the fixture manifest), one loaded
model serves repeated and batched calls, sampling is seeded, weight-only quantization on load,
and bad use is a Python exception naming the cause."""

import os
import subprocess
import sys
import tempfile

import torch

from py_common import TestCase, ipex, main

HERE = os.path.dirname(os.path.abspath(__file__))


def manifest() -> dict:
    """The fixture manifest: IPEX_FIXTURES/llm/llm.json when ctest made it, else written once
    into a temporary directory."""
    import json
    fixtures = os.environ.get("IPEX_FIXTURES")
    if not fixtures or not os.path.exists(os.path.join(fixtures, "llm", "llm.json")):
        fixtures = tempfile.mkdtemp(prefix="ipex_tool-llm-")
        subprocess.run([sys.executable, os.path.join(HERE, "..", "fixtures", "make_llm_fixtures.py"), fixtures],
                       check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(fixtures, "llm", "llm.json")) as f:
        return json.load(f)


MODELS = manifest()["models"]


def reference(m: dict) -> list:
    """The reference's greedy ids up to (not including) the first end-of-sequence token."""
    want = m["greedy"]
    for i, t in enumerate(want):
        if t in m["eos"]:
            return want[:i]
    return want


class Generate(TestCase):
    @classmethod
    def setUpClass(cls):
        cls.llama = ipex.llm.load(MODELS["llama"]["dir"], dtype=torch.float32)

    def test_greedy_ids_equal_the_reference(self):
        for name in ("llama", "mistral", "qwen2"):
            with self.subTest(model=name):
                m = MODELS[name]
                model = self.llama if name == "llama" else ipex.llm.load(m["dir"], dtype=torch.float32)
                out = model.generate(m["prompt"], max_new_tokens=len(m["greedy"]))
                self.assertEqual(out.ids, [reference(m)])
                self.assertEqual(out.prompt_ids, [m["prompt"]])
                self.assertEqual(out.sequences, [m["prompt"] + reference(m)])
                # a 2-D tensor of ids and the one-call form give the same
                again = ipex.llm.generate(model, torch.tensor([m["prompt"]]), max_new_tokens=len(m["greedy"]))
                self.assertEqual(again.ids, out.ids)

    def test_one_model_serves_batches_and_text(self):
        m = MODELS["llama"]
        prompts = ["Hello world", "The cache holds keys and values", "x"]
        batch = self.llama.generate(prompts, max_new_tokens=5)
        self.assertEqual(len(batch.text), 3)
        for i, p in enumerate(prompts):  # ragged batch: each sequence as it is alone
            alone = self.llama.generate(p, max_new_tokens=5)
            self.assertEqual(alone.ids[0], batch.ids[i])
            self.assertEqual(alone.text[0], batch.text[i])
        self.assertEqual(self.llama.generate([m["prompt"], m["prompt"][:5]], max_new_tokens=3).ids[0],
                         reference(m)[:3])

    def test_sampling_is_seeded(self):
        m = MODELS["llama"]
        a = self.llama.generate(m["prompt"], max_new_tokens=8, do_sample=True, temperature=1.5, seed=7)
        b = self.llama.generate(m["prompt"], max_new_tokens=8, temperature=1.5, seed=7)
        self.assertEqual(a.ids, b.ids)
        self.assertEqual(len(a.ids[0]) == 8, a.stop_reason[0] == "length")
        c = self.llama.generate(m["prompt"], max_new_tokens=8, greedy=False, temperature=1.5, seed=7)
        self.assertEqual(c.ids, a.ids)
        with self.assertRaisesRegex(ValueError, r"do_sample=False \(greedy\) with temperature"):
            self.llama.generate(m["prompt"], greedy=True, temperature=1.5)
        top1 = self.llama.generate(m["prompt"], max_new_tokens=len(m["greedy"]), top_k=1, seed=3)
        self.assertEqual(top1.ids, [reference(m)])

    def test_weight_only_on_load(self):
        m = MODELS["llama"]
        model = ipex.llm.load(m["dir"], dtype=torch.float32, woq_dtype="int8", group_size=32, lowp_mode="fp32")
        self.assertIn("int8", model.weights)
        out = model.generate(m["prompt"], max_new_tokens=4)
        self.assertEqual(len(out.ids[0]), 4)
        model.close()
        with self.assertRaisesRegex(RuntimeError, "closed"):
            model.generate(m["prompt"], max_new_tokens=1)

    def test_bad_use(self):
        m = MODELS["llama"]
        with self.assertRaisesRegex(ValueError, "nowhere"):
            ipex.llm.load(self.path("nowhere"))
        with self.assertRaisesRegex(ValueError, "dtype"):
            ipex.llm.load(m["dir"], dtype=torch.float16)
        with self.assertRaisesRegex(ValueError, "woq_dtype 'int3'"):
            ipex.llm.load(m["dir"], woq_dtype="int3")
        with self.assertRaisesRegex(ValueError, "do_sample=False"):
            self.llama.generate("Hello", do_sample=False, temperature=0.5)
        with self.assertRaisesRegex(ValueError, "vocab"):
            self.llama.generate([1, m["vocab"] + 5], max_new_tokens=2)
        with self.assertRaisesRegex(ValueError, "max-new-tokens"):
            self.llama.generate("Hello", max_new_tokens=-1)
        with self.assertRaises(TypeError):
            self.llama.generate(3.5)


if __name__ == "__main__":
    main()
