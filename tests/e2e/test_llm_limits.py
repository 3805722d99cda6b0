"""Hostile requests and files for generate / bench --llm / perplexity, each crafted here from
the tiny checkpoints of tests/fixtures/make_llm_fixtures.py (max_position_embeddings 512):
counts out of range and positions past what the model declares are exit 2 naming the option
(before the weights load), --allow-long-context goes past the declared positions, a
tokenizer.json or generation_config.json with ids beyond config.json's vocab_size is exit 3
naming the file, and NaN weights are reported (a warning, stop "non_finite", perplexity
null and exit 1) instead of giving token 0 and "perplexity: -nan"."""

import json
import math
import os
import shutil
import struct

import e2e_common as e2e

LLM = os.path.join(os.environ.get("IPEX_FIXTURES", ""), "llm")
with open(os.path.join(LLM, "llm.json")) as f:
    MODELS = json.load(f)["models"]
LLAMA = MODELS["llama"]["dir"]
TEXT = os.path.join(LLM, "text.txt")
PROMPT = ",".join(str(i) for i in MODELS["llama"]["prompt"])  # 12 tokens
# bench --llm measures the machine's limits unless both are given: these tests time nothing.
NO_MEASURING = ("--bandwidth-gbs", "10", "--peak-gflops", "100")


def warnings(result):
    """The warnings of a run but the one a CPU without AVX-512 prints for --dtype bf16."""
    return [w for w in result.warnings() if "--dtype bf16" not in w]


class CraftedModel(e2e.ToolTestCase):
    def model_copy(self, name="model", src=LLAMA):
        dst = self.path(name)
        shutil.copytree(src, dst)
        return dst

    def edit_json(self, path, change):
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        change(data)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False)

    def with_config(self, name="model", **fields):
        d = self.model_copy(name)
        self.edit_json(os.path.join(d, "config.json"), lambda c: c.update(fields))
        return d


class CountsAndPositions(CraftedModel):
    def test_bench_counts_are_checked_before_anything_is_allocated(self):
        r = self.run_tool("bench", LLAMA, "--llm", "--input-tokens", "2000000000", *NO_MEASURING)
        self.assert_error(r, e2e.EXIT_USAGE, "--input-tokens", "[1, 16777216]", "2000000000")
        self.assert_error(self.run_tool("bench", LLAMA, "--llm", "--batch", "5000", *NO_MEASURING),
                          e2e.EXIT_USAGE, "--batch", "[1, 4096]")
        self.assert_error(self.run_tool("bench", LLAMA, "--llm", "--output-tokens", "0", *NO_MEASURING),
                          e2e.EXIT_USAGE, "--output-tokens")
        self.assert_error(self.run_tool("bench", LLAMA, "--llm", "--iterations", "2000000", *NO_MEASURING),
                          e2e.EXIT_USAGE, "--iterations", "1000000")
        self.assert_error(self.run_tool("bench", LLAMA, "--llm", "--threads", "100000", *NO_MEASURING),
                          e2e.EXIT_USAGE, "--threads", "4096")

    def test_bench_positions_past_the_model(self):
        r = self.run_tool("bench", LLAMA, "--llm", "--input-tokens", "500", "--output-tokens", "100", *NO_MEASURING)
        self.assert_error(r, e2e.EXIT_USAGE, "--input-tokens 500 + --output-tokens 100 needs 600 positions",
                          "max_position_embeddings 512", "config.json", "--allow-long-context")
        # Even with the override, a run the machine cannot hold is refused before it starts.
        r = self.run_tool("bench", LLAMA, "--llm", "--allow-long-context", "--batch", "4096", "--input-tokens",
                          "16000000", "--output-tokens", "1", *NO_MEASURING)
        self.assert_error(r, e2e.EXIT_USAGE, "memory", "4096")

    def test_generate_past_the_declared_positions(self):
        r = self.run_tool("generate", LLAMA, "--prompt-ids", PROMPT, "--max-new-tokens", "10000000")
        self.assert_error(r, e2e.EXIT_USAGE, "prompt (12 tokens) + --max-new-tokens 10000000 needs 10000012 positions",
                          "max_position_embeddings 512", "--allow-long-context")
        # Beyond the hard bound the message names the option the user gave, not --max-length.
        r = self.run_tool("generate", LLAMA, "--prompt-ids", PROMPT, "--max-new-tokens", "100000000")
        line = self.assert_error(r, e2e.EXIT_USAGE, "--max-new-tokens", "16777216")
        self.assertNotIn("--max-length", line)
        r = self.run_tool("generate", LLAMA, "--prompt-ids", PROMPT, "--max-new-tokens", "10", "--max-length", "0")
        self.assert_error(r, e2e.EXIT_USAGE, "--max-length", "[1, 16777216]")
        r = self.run_tool("generate", LLAMA, "--prompt-ids", PROMPT, "--max-new-tokens", "600", "--max-length", "513")
        self.assert_error(r, e2e.EXIT_USAGE, "--max-length 513 needs 513 positions", "512")
        # A --max-length past the model is no error when the run needs less: the cache holds what it uses.
        out = self.tool_json("generate", LLAMA, "--prompt-ids", PROMPT, "--max-new-tokens", "3", "--max-length",
                             "100000", "--json")
        self.assertLessEqual(len(out["sequences"][0]["ids"]), 3)
        r = self.run_tool("generate", LLAMA, "--prompt-ids", "1,2,999999", "--max-new-tokens", "3")
        self.assert_error(r, e2e.EXIT_USAGE, "--prompt-ids", "999999", "vocabulary")

    def test_allow_long_context(self):
        r = self.tool("generate", LLAMA, "--prompt-ids", PROMPT, "--max-new-tokens", "520", "--allow-long-context",
                      "--json")
        self.assertEqual(len(warnings(r)), 1, r.describe())
        self.assertIn("--allow-long-context", warnings(r)[0])
        self.assertIn("532 positions", warnings(r)[0])
        seq = r.json()["sequences"][0]
        self.assertIn(seq["stop"], ("eos", "length"))
        r = self.run_tool("perplexity", LLAMA, "--text", TEXT, "--context", "2048")
        self.assert_error(r, e2e.EXIT_USAGE, "--context 2048 needs 2048 positions", "max_position_embeddings 512",
                          "--allow-long-context")
        out = self.tool_json("perplexity", LLAMA, "--text", TEXT, "--context", "2048", "--allow-long-context", "--json")
        self.assertTrue(out["finite"] and math.isfinite(out["perplexity"]))
        self.assertEqual(out["scored"], out["tokens"] - 1)

    def test_perplexity_default_context_follows_the_model(self):
        d = self.with_config(max_position_embeddings=128)
        out = self.tool_json("perplexity", d, "--text", TEXT, "--json")
        self.assertEqual((out["context"], out["stride"]), (128, 64))
        self.assert_error(self.run_tool("perplexity", d, "--text", TEXT, "--context", "129"), e2e.EXIT_USAGE,
                          "--context 129", "max_position_embeddings 128")
        self.assert_error(self.run_tool("perplexity", d, "--text", TEXT, "--context", "64", "--stride", "65"),
                          e2e.EXIT_USAGE, "--stride 65", "--context 64")

    def test_linear_rope_scaling_extends_the_declared_positions(self):
        d = self.with_config(max_position_embeddings=128, rope_scaling={"type": "linear", "factor": 4.0})
        self.tool("generate", d, "--prompt-ids", PROMPT, "--max-new-tokens", "400")
        r = self.run_tool("generate", d, "--prompt-ids", PROMPT, "--max-new-tokens", "501")
        self.assert_error(r, e2e.EXIT_USAGE, "needs 513 positions", "max_position_embeddings 128 x rope_scaling.factor 4")

    def test_sliding_window_does_not_lift_the_limit(self):
        mistral = MODELS["mistral"]  # sliding_window 8, max_position_embeddings 512
        prompt = ",".join(str(i) for i in mistral["prompt"])
        r = self.run_tool("generate", mistral["dir"], "--prompt-ids", prompt, "--max-new-tokens", "501")
        self.assert_error(r, e2e.EXIT_USAGE, "needs 513 positions", "max_position_embeddings 512")
        # Past the window, the greedy ids still equal the eager reference's (positions > 8).
        out = self.tool_json("generate", mistral["dir"], "--prompt-ids", prompt, "--dtype", "fp32", "--greedy",
                             "--max-new-tokens", "16", "--json")
        want = mistral["greedy"][:16]
        for i, t in enumerate(want):
            if t in mistral["eos"]:
                want = want[:i]
                break
        self.assertEqual(out["sequences"][0]["ids"], want)

    def test_too_many_prompts(self):
        batch = self.path("prompts.txt")
        with open(batch, "w") as f:
            f.write("hello\n" * 5000)
        r = self.run_tool("generate", LLAMA, "--batch-file", batch, "--max-new-tokens", "1")
        self.assert_error(r, e2e.EXIT_USAGE, "--batch-file", "[1, 4096]", "5000")


class FilesBeyondTheVocabulary(CraftedModel):
    def test_tokenizer_ids_beyond_vocab_size(self):
        vocab = MODELS["llama"]["vocab"]
        d = self.model_copy()
        bad_id = vocab + 2
        self.edit_json(os.path.join(d, "tokenizer.json"), lambda t: t["added_tokens"].append(
            {"id": bad_id, "content": "<extra_0>", "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True}))
        words = ("tokenizer.json", str(bad_id), "<extra_0>", "added_tokens", f"vocab_size {vocab}")
        # At load time: a text prompt, ids only (the tokenizer decodes), perplexity.
        self.assert_error(self.run_tool("generate", d, "--prompt", "hello", "--max-new-tokens", "1"),
                          e2e.EXIT_BAD_INPUT, *words)
        self.assert_error(self.run_tool("generate", d, "--prompt-ids", PROMPT, "--max-new-tokens", "1"),
                          e2e.EXIT_BAD_INPUT, *words)
        self.assert_error(self.run_tool("perplexity", d, "--text", TEXT), e2e.EXIT_BAD_INPUT, *words)
        d2 = self.model_copy("model2")
        self.edit_json(os.path.join(d2, "tokenizer.json"), lambda t: t["model"]["vocab"].update({"zz_extra": vocab}))
        self.assert_error(self.run_tool("generate", d2, "--prompt", "hello", "--max-new-tokens", "1"),
                          e2e.EXIT_BAD_INPUT, "tokenizer.json", str(vocab), "zz_extra", "model.vocab")

    def test_special_ids_beyond_vocab_size(self):
        vocab = MODELS["llama"]["vocab"]
        d = self.model_copy()
        self.edit_json(os.path.join(d, "generation_config.json"), lambda g: g.update(eos_token_id=[2, vocab + 5]))
        self.assert_error(self.run_tool("generate", d, "--prompt-ids", PROMPT, "--max-new-tokens", "1"),
                          e2e.EXIT_BAD_INPUT, "generation_config.json", "eos_token_id", str(vocab + 5), str(vocab))
        d = self.with_config("model2", eos_token_id=vocab)
        self.assert_error(self.run_tool("generate", d, "--prompt-ids", PROMPT, "--max-new-tokens", "1"),
                          e2e.EXIT_BAD_INPUT, "config.json", "eos_token_id")


def poison(safetensors, tensor):
    """Overwrites one tensor of a safetensors file with NaN."""
    with open(safetensors, "r+b") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
        info = header[tensor]
        begin, end = info["data_offsets"]
        nan = {"F32": struct.pack("<f", float("nan")), "BF16": b"\xc0\x7f", "F16": b"\x00\x7e"}[info["dtype"]]
        f.seek(8 + size + begin)
        f.write(nan * ((end - begin) // len(nan)))


class NaNWeights(CraftedModel):
    def setUp(self):
        super().setUp()
        self.model = self.model_copy()
        poison(os.path.join(self.model, "model.safetensors"), "model.norm.weight")

    def test_generate_stops_and_says_so_once(self):
        r = self.tool("generate", self.model, "--prompt-ids", PROMPT, "--max-new-tokens", "8", "--json")
        self.assertEqual(len(warnings(r)), 1, r.describe())
        self.assertIn("non-finite logits at step 1 (position 11)", warnings(r)[0])
        out = r.json()
        seq = out["sequences"][0]
        self.assertEqual((seq["ids"], seq["stop"], seq["non_finite_logits"]), ([], "non_finite", True))
        self.assertEqual(out["non_finite_logits"], {"sequence": 0, "step": 1, "position": 11})
        # A batch: one warning for the run, every sequence stopped.
        r = self.tool("generate", self.model, "--prompt-ids", PROMPT, "--prompt-ids", "1,5,9", "--max-new-tokens", "4",
                      "--json")
        self.assertEqual(len(warnings(r)), 1, r.describe())
        self.assertEqual([s["stop"] for s in r.json()["sequences"]], ["non_finite", "non_finite"])
        r = self.tool("generate", self.model, "--prompt", "hello", "--max-new-tokens", "4")
        self.assertEqual(len(warnings(r)), 1, r.describe())

    def test_bench_warns_once(self):
        r = self.tool("bench", self.model, "--llm", "--input-tokens", "4", "--output-tokens", "3", "--iterations", "2",
                      "--json", *NO_MEASURING)
        self.assertEqual(len(warnings(r)), 1, r.describe())
        self.assertIn("non-finite logits at step 1 (position 3)", warnings(r)[0])
        self.assertTrue(r.json()["non_finite_logits"])

    def test_perplexity_is_not_finite(self):
        r = self.run_tool("perplexity", self.model, "--text", TEXT, "--context", "64", "--json")
        self.assert_error(r, e2e.EXIT_CHECK_FAILED, "not finite")
        self.assertEqual(len(warnings(r)), 1, r.describe())
        self.assertIn("non-finite loss", warnings(r)[0])
        out = r.json()
        self.assertEqual((out["perplexity"], out["finite"], out["ok"]), (None, False, False))
        r = self.run_tool("perplexity", self.model, "--text", TEXT, "--context", "64")
        self.assert_error(r, e2e.EXIT_CHECK_FAILED, "not finite")
        self.assertIn("perplexity not finite", r.stdout)
        self.assertNotIn("nan", r.stdout.lower().replace("nan/inf", ""))


if __name__ == "__main__":
    e2e.main()
