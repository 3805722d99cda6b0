"""ipex-tool generate / bench --llm / perplexity on the tiny Hugging Face checkpoints of
tests/fixtures/make_llm_fixtures.py: greedy ids equal the eager reference's, text streams,
batches, sampling is seeded, GPTQ/AWQ load as they are, and bad inputs give their exit
code with one error line."""

import json
import math
import os

import e2e_common as e2e

LLM = os.path.join(os.environ.get("IPEX_FIXTURES", ""), "llm")
with open(os.path.join(LLM, "llm.json")) as f:
    MANIFEST = json.load(f)
MODELS = MANIFEST["models"]


def ids_arg(ids):
    return ",".join(str(i) for i in ids)


class GenerateTest(e2e.ToolTestCase):
    def test_greedy_ids_equal_the_reference(self):
        # every family and variant, and GGUF files (a file where a directory goes)
        for name in ("llama", "mistral", "qwen2", "llama3", "qwen3", "phi3", "phi3_long", "gemma2", "gemma3",
                     "gemma3_mm", "mixtral", "qwen2_moe", "qwen3_moe", "olmoe", "qwen3_yarn", "llama_dynamic", "gguf_llama_f32",
                     "gguf_llama_q8_0", "gguf_llama_q4_0", "gguf_qwen2_f16", "gguf_qwen3_bf16", "gguf_llama_spm_f32",
                     "gguf_gemma2_f32", "gguf_gemma3_f32", "gguf_phi3_f32", "gguf_mixtral_f32", "gguf_mixtral_q8_0",
                     "gguf_qwen2_moe_f32", "gguf_qwen3_moe_f32"):
            with self.subTest(model=name):
                m = MODELS[name]
                out = self.tool_json("generate", m["dir"], "--prompt-ids", ids_arg(m["prompt"]), "--dtype", "fp32",
                                     "--greedy", "--max-new-tokens", len(m["greedy"]), "--json")
                seq = out["sequences"][0]
                # generation stops at EOS: compare up to it
                want = m["greedy"]
                for i, t in enumerate(want):
                    if t in m["eos"]:
                        want = want[:i]
                        break
                self.assertEqual(seq["ids"], want)
                self.assertEqual(seq["prompt_ids"], m["prompt"])
                self.assertGreater(out["timings"]["first_token_ms"], 0)

    def test_logits_file(self):
        """--logits writes the logits each token was picked from: [prompts, steps, vocab] float32, the
        greedy ids their argmax, the first step the reference's logits at the last prompt position;
        a path that cannot be written is exit 2 before anything loads, and writes nothing."""
        import numpy as np
        for name in ("llama", "gguf_llama_q4_0"):
            with self.subTest(model=name):
                m = MODELS[name]
                path = self.path(name + ".npy")
                out = self.tool_json("generate", m["dir"], "--prompt-ids", ids_arg(m["prompt"]), "--prompt-ids",
                                     ids_arg(m["prompt"][:5]), "--dtype", "fp32", "--greedy", "--max-new-tokens", "3",
                                     "--logits", path, "--json")
                logits = np.load(path)
                self.assertEqual(logits.dtype, np.float32)
                self.assertEqual(list(logits.shape), [2, 3, m["vocab"]])
                self.assertEqual(out["logits"], {"file": path, "shape": [2, 3, m["vocab"]]})
                for b in range(2):
                    ids = out["sequences"][b]["ids"]
                    self.assertEqual(list(logits[b, :len(ids)].argmax(-1)), ids)
                ref_file = m.get("ref_logits", os.path.join(m["dir"], "ref_logits.bin"))
                ref = np.fromfile(ref_file, dtype=np.float32).reshape(-1, m["vocab"])
                self.assertLess(float(np.abs(logits[0, 0] - ref[-1]).max()), 1e-3 * float(np.abs(ref[-1]).max()))
        m = MODELS["llama"]
        missing = os.path.join(self.path("no_such_dir"), "x.npy")
        r = self.run_tool("generate", m["dir"], "--prompt-ids", "1,2", "--logits", missing)
        self.assert_error(r, e2e.EXIT_USAGE, "no_such_dir")
        self.assertFalse(os.path.exists(missing))

    def test_gguf_tokenizer_equals_the_directory(self):
        """GGUF's byte-level BPE ("gpt2", its pre-tokenizer by name, BOS as the file says) splits
        text as the Hugging Face directory's tokenizer.json does."""
        text = "The quick brown fox, 42 times:\n über  café"
        for directory, gguf in (("qwen2", "gguf_qwen2_f16"), ("llama3", "gguf_llama3_f16")):
            with self.subTest(model=directory):
                ids = []
                for model in (MODELS[directory]["dir"], MODELS[gguf]["dir"]):
                    out = self.tool_json("generate", model, "--prompt", text, "--greedy", "--max-new-tokens", "1",
                                         "--dtype", "fp32", "--json")
                    ids.append(out["sequences"][0]["prompt_ids"])
                self.assertEqual(ids[0], ids[1])

    def test_gguf_sentencepiece_tokenizer_equals_sentencepiece(self):
        """GGUF's "llama" tokenizer (pieces, scores, byte tokens) and the tokenizer.json of the same
        SentencePiece model give sentencepiece's own ids; greedy text decodes as sentencepiece does."""
        spm = MANIFEST["spm"]
        if "skip" in spm:
            self.skipTest(spm["skip"])
        for model in (spm["dir"], spm["gguf"]):
            with self.subTest(model=model):
                args = ["generate", model, "--max-new-tokens", "0", "--json"]
                for t in spm["texts"]:
                    args += ["--prompt", t]
                got = [s["prompt_ids"] for s in self.tool_json(*args)["sequences"]]
                self.assertEqual(got, spm["ids"])
        m = MODELS["gguf_llama_spm_f32"]
        out = self.tool_json("generate", spm["gguf"], "--prompt-ids", ids_arg(m["prompt"]), "--greedy", "--dtype", "fp32",
                             "--max-new-tokens", len(m["greedy"]), "--json")
        want = m["greedy"][:m["greedy"].index(2)] if 2 in m["greedy"] else m["greedy"]
        self.assertEqual(out["sequences"][0]["ids"], want)
        self.assertEqual(out["sequences"][0]["text"], spm["greedy_text"])

    def test_chat_template_is_reported(self):
        """The chat template a GGUF file or tokenizer_config.json carries is in generate --json."""
        spm = MANIFEST["spm"]
        if "skip" in spm:
            self.skipTest(spm["skip"])
        for model in (spm["dir"], spm["gguf"]):
            out = self.tool_json("generate", model, "--prompt", "hi", "--max-new-tokens", "1", "--json")
            self.assertEqual(out["chat_template"], spm["chat_template"])
        out = self.tool_json("generate", MODELS["llama"]["dir"], "--prompt", "hi", "--max-new-tokens", "1", "--json")
        self.assertIsNone(out["chat_template"])
        bad = self.path("bad_template")
        os.makedirs(bad)
        for f in os.listdir(spm["dir"]):
            if f != "tokenizer_config.json":
                os.symlink(os.path.join(spm["dir"], f), os.path.join(bad, f))
        with open(os.path.join(bad, "tokenizer_config.json"), "w") as f:
            json.dump({"chat_template": 3}, f)
        r = self.run_tool("generate", bad, "--prompt", "hi", "--max-new-tokens", "1", "--json")
        self.assert_error(r, e2e.EXIT_BAD_INPUT, "tokenizer_config.json", "chat_template")

    def test_text_prompt_streams_utf8(self):
        for name in ("llama", "qwen2", "llama3", "mistral"):
            with self.subTest(model=name):
                r = self.tool("generate", MODELS[name]["dir"], "--prompt", "The quick brown fox",
                              "--max-new-tokens", "12")
                self.assertTrue(r.stdout.endswith("\n"))
                r.stdout.encode("utf-8")  # valid text

    def test_batch_file_and_json(self):
        batch = self.path("prompts.txt")
        with open(batch, "w") as f:
            f.write("Hello world\nThe cache holds keys and values\nx\n")
        out = self.tool_json("generate", MODELS["llama"]["dir"], "--batch-file", batch, "--max-new-tokens", "5",
                             "--json")
        self.assertEqual(len(out["sequences"]), 3)
        lengths = [len(s["prompt_ids"]) for s in out["sequences"]]
        self.assertEqual(len(set(lengths)), 3, "prompts of different lengths")
        # Each sequence alone gives the same ids (ragged batch, no padding effects).
        for i, line in enumerate(["Hello world", "The cache holds keys and values", "x"]):
            alone = self.tool_json("generate", MODELS["llama"]["dir"], "--prompt", line, "--max-new-tokens", "5",
                                   "--json")
            self.assertEqual(alone["sequences"][0]["ids"], out["sequences"][i]["ids"])

    def test_sampling_is_seeded(self):
        args = ["generate", MODELS["qwen2"]["dir"], "--prompt", "Hello", "--max-new-tokens", "16", "--temperature",
                "1.5", "--top-k", "50", "--top-p", "0.95", "--repetition-penalty", "1.1", "--json"]
        a = self.tool_json(*args, "--seed", "1")["sequences"][0]["ids"]
        b = self.tool_json(*args, "--seed", "1")["sequences"][0]["ids"]
        c = self.tool_json(*args, "--seed", "2")["sequences"][0]["ids"]
        self.assertEqual(a, b)
        self.assertNotEqual(a, c)

    def test_weight_only_and_imported_checkpoints(self):
        for name, extra in (("llama", ["--woq-dtype", "int4", "--group-size", "32"]),
                            ("qwen2", ["--woq-dtype", "int8", "--lowp-mode", "int8"]),
                            ("llama_gptq", []), ("mistral_awq", ["--lowp-mode", "fp32"])):
            with self.subTest(model=name):
                m = MODELS[name]
                out = self.tool_json("generate", m["dir"], "--prompt-ids", ids_arg(m["prompt"]),
                                     "--max-new-tokens", "4", "--json", *extra)
                self.assertEqual(len(out["sequences"][0]["ids"]) > 0, True)
        self.assert_error(self.run_tool("generate", MODELS["llama_gptq"]["dir"], "--prompt", "x", "--woq-dtype", "int4"),
                          e2e.EXIT_USAGE, "gptq")


class BenchPerplexityTest(e2e.ToolTestCase):
    def test_weights_read_in_place_or_copied(self):
        """Dense weights are read in place from the mapped checkpoint by default and copied with
        --no-mmap: the same greedy ids (bf16 through the decode kernel, fp32 through oneDNN), the
        bench JSON says which, and the checkpoint is left as it was."""
        import hashlib
        for name, dtype in (("mistral", "bf16"), ("llama", "fp32")):
            with self.subTest(model=name, dtype=dtype):
                m = MODELS[name]
                st = os.path.join(m["dir"], "model.safetensors")
                before = (os.stat(st).st_mtime_ns, hashlib.sha256(open(st, "rb").read()).hexdigest())
                runs = [self.tool_json("generate", m["dir"], "--prompt-ids", ids_arg(m["prompt"]), "--dtype", dtype,
                                       "--greedy", "--max-new-tokens", "8", "--json", *extra)
                        for extra in ((), ("--no-mmap",))]
                self.assertEqual(runs[0]["sequences"][0]["ids"], runs[1]["sequences"][0]["ids"])
                for extra, mapped in (((), True), (("--no-mmap",), False)):
                    out = self.tool_json("bench", m["dir"], "--llm", "--dtype", dtype, "--input-tokens", "8",
                                         "--output-tokens", "2", "--iterations", "1", "--bandwidth-gbs", "50",
                                         "--peak-gflops", "500", "--json", *extra)
                    self.assertIs(out["weights_mapped"], mapped)
                verbose = self.tool("generate", m["dir"], "--prompt-ids", ids_arg(m["prompt"]), "--dtype", dtype,
                                    "--greedy", "--max-new-tokens", "1", "--verbose")
                self.assertIn("(3 parts)", verbose.stderr)  # q/k/v apart in the file, read where they lie
                self.assertEqual((os.stat(st).st_mtime_ns, hashlib.sha256(open(st, "rb").read()).hexdigest()), before)

    def test_bench_llm_json(self):
        out = self.tool_json("bench", MODELS["llama"]["dir"], "--llm", "--input-tokens", "16", "--output-tokens", "4",
                             "--batch", "2", "--iterations", "2", "--bandwidth-gbs", "50", "--json")
        for key in ("first_token_ms", "next_token_ms"):
            for stat in ("mean", "p50", "p90", "p99"):
                self.assertGreater(out[key][stat], 0)
        self.assertGreater(out["tokens_per_second"], 0)
        self.assertGreater(out["peak_rss_bytes"], 0)
        self.assertGreater(out["load_peak_rss_bytes"], 0)
        self.assertLessEqual(out["load_peak_rss_bytes"], out["peak_rss_bytes"])
        self.assertGreater(out["load_ms"], 0)
        # The fixture's fp32-held weights: embedding, norms and projections, each held once.
        with open(os.path.join(MODELS["llama"]["dir"], "config.json")) as f:
            cfg = json.load(f)
        h, inter, layers, vocab = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
        kv = cfg.get("num_key_value_heads", cfg["num_attention_heads"]) * h // cfg["num_attention_heads"]
        self.assertGreaterEqual(out["resident_weight_bytes"], 2 * (layers * (h * (h + 2 * kv) + h * h + 3 * h * inter) + vocab * h))
        self.assertAlmostEqual(out["peak_rss_over_resident_weights"], out["peak_rss_bytes"] / out["resident_weight_bytes"])
        self.assertGreater(out["next_token_over_floor"], 0)
        # The given bandwidth is used as is; the peak is measured at start-up on the run's threads.
        limits = out["limits"]
        self.assertEqual((limits["bandwidth_gbs"], limits["bandwidth_source"]), (50, "given"))
        self.assertEqual(limits["peak_source"], "measured")
        self.assertTrue(limits["measured"])
        self.assertEqual(limits["threads"], out["threads"])
        self.assertGreater(limits["peak_gflops"], 0)
        self.assertAlmostEqual(out["prefill_share_of_peak"], out["prefill_gflops"] / limits["peak_gflops"])
        given = self.tool_json("bench", MODELS["llama"]["dir"], "--llm", "--input-tokens", "8", "--output-tokens", "2",
                               "--iterations", "1", "--bandwidth-gbs", "40", "--peak-gflops", "500", "--json")
        self.assertEqual(given["limits"]["measured"], False)
        self.assertEqual((given["limits"]["peak_gflops"], given["limits"]["peak_source"]), (500, "given"))
        self.assertAlmostEqual(given["prefill_share_of_peak"], given["prefill_gflops"] / 500)
        text = self.tool("bench", MODELS["llama"]["dir"], "--llm", "--input-tokens", "8", "--output-tokens", "3")
        self.assertIn("next token", text.stdout)

    def test_perplexity_and_gate(self):
        text = os.path.join(LLM, "text.txt")
        out = self.tool_json("perplexity", MODELS["llama"]["dir"], "--text", text, "--context", "64", "--stride", "32",
                             "--json")
        self.assertTrue(math.isfinite(out["perplexity"]) and out["perplexity"] > 1)
        self.assertEqual(out["scored"], out["tokens"] - 1)
        r = self.run_tool("perplexity", MODELS["llama"]["dir"], "--text", text, "--context", "64", "--max-ppl", "1.0")
        self.assert_error(r, e2e.EXIT_CHECK_FAILED, "--max-ppl")
        # int8 weights stay within a few percent of the dense perplexity
        q = self.tool_json("perplexity", MODELS["llama"]["dir"], "--text", text, "--context", "64", "--json",
                           "--woq-dtype", "int8", "--dtype", "fp32")
        d = self.tool_json("perplexity", MODELS["llama"]["dir"], "--text", text, "--context", "64", "--json",
                           "--dtype", "fp32")
        self.assertLess(abs(q["perplexity"] / d["perplexity"] - 1), 0.05)
        # --baseline: the same two runs in one, the dense figure the separate run's
        b = self.tool_json("perplexity", MODELS["llama"]["dir"], "--text", text, "--context", "64", "--json",
                           "--woq-dtype", "int8", "--dtype", "fp32", "--baseline")
        self.assertEqual((b["perplexity"], b["baseline"]["perplexity"]), (q["perplexity"], d["perplexity"]))
        # a GGUF file of quantized weights holds no unquantized model to compare with
        r = self.run_tool("perplexity", MODELS["gguf_llama_q4_0"]["dir"], "--text", text, "--woq-dtype", "int4",
                          "--baseline")
        self.assert_error(r, e2e.EXIT_USAGE, "--baseline", "q4_0")


class BadInputTest(e2e.ToolTestCase):
    def test_bad_checkpoints(self):
        for name, case in MANIFEST["bad"].items():
            with self.subTest(case=name):
                r = self.run_tool("generate", case["dir"], "--prompt-ids", "1,2,3")
                self.assert_error(r, case["code"], *case["words"])

    def test_prompt_longer_than_max_length(self):
        r = self.run_tool("generate", MODELS["llama"]["dir"], "--prompt-ids", "1,2,3,4,5,6", "--max-length", "4")
        self.assert_error(r, e2e.EXIT_USAGE, "--max-length")

    def test_invalid_utf8_prompt_file(self):
        r = self.run_tool("generate", MODELS["llama"]["dir"], "--prompt-file", os.path.join(LLM, "invalid_utf8.txt"))
        self.assert_error(r, e2e.EXIT_BAD_INPUT, "invalid_utf8.txt", "UTF-8")

    def test_not_a_model_directory(self):
        self.assert_error(self.run_tool("generate", self.tmp, "--prompt", "x"), e2e.EXIT_BAD_INPUT, "config.json")


if __name__ == "__main__":
    e2e.main()
