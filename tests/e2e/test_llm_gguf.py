"""ipex-tool import gguf IN.gguf OUT_DIR on the GGUF fixtures of make_llm_fixtures.py: the
directory it writes (safetensors, config, generation config, tokenizer.json, tokenizer_config.json)
loads in generate to the same greedy ids and prompt ids as the .gguf file; OUT_DIR is never
half-written, a directory holding files is refused without --force, bad input is exit 3. The
files of gemma2, gemma3, phi3 and the mixtures (llama with experts, qwen2moe, qwen3moe) give the
greedy ids of the Hugging Face checkpoint they were written from, and run in bench --llm and
perplexity."""

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
        names = ["gguf_llama_f32", "gguf_llama_q8_0", "gguf_qwen2_f16", "gguf_llama3_f16", "gguf_gemma3_f32",
                 "gguf_gemma2_f32", "gguf_phi3_f32", "gguf_mixtral_q8_0", "gguf_qwen2_moe_f32"]
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

    def test_architectures_give_the_hf_checkpoints_ids(self):
        for name, source in MANIFEST["gguf_pairs"].items():
            with self.subTest(model=name):
                m = MODELS[name]
                got = self.greedy(m["dir"], m["prompt"], len(m["greedy"]))
                self.assertEqual(got, self.greedy(MODELS[source]["dir"], m["prompt"], len(m["greedy"])))
                want = m["greedy"]
                for i, t in enumerate(want):
                    if t in m["eos"]:
                        want = want[:i]
                        break
                self.assertEqual(got, want)

    def test_bench_and_perplexity_take_the_files(self):
        text = os.path.join(LLM, "text.txt")
        ppl = [self.tool_json("perplexity", MODELS[n]["dir"], "--text", text, "--context", "32", "--json")["perplexity"]
               for n in ("gguf_qwen2_moe_f32", "qwen2_moe")]  # one tokenizer: the same tokens
        self.assertAlmostEqual(ppl[0], ppl[1], delta=1e-6 * ppl[1])
        for name in ("gguf_gemma3_f32", "gguf_mixtral_f32", "gguf_phi3_f32"):
            with self.subTest(model=name):
                out = self.tool_json("bench", MODELS[name]["dir"], "--llm", "--input-tokens", "4", "--output-tokens",
                                     "2", "--iterations", "1", "--dtype", "fp32", "--json")
                with open(os.path.join(MODELS[MANIFEST["gguf_pairs"][name]]["dir"], "config.json")) as f:
                    self.assertEqual(out["architecture"], json.load(f)["architectures"][0])

    def test_q4_0_runs_weight_only(self):
        """A q4_0 file's projections run as int4 g32: bench reports them and reads 3/8 of the
        bytes an fp16 file would (0.5 byte a weight, fp32 scale and zero a group of 32)."""
        def bench(name):
            return self.tool_json("bench", MODELS[name]["dir"], "--llm", "--input-tokens", "4", "--output-tokens", "2",
                                  "--iterations", "1", "--dtype", "fp32", "--json")
        q4, f32 = bench("gguf_llama_q4_0"), bench("gguf_llama_f32")
        self.assertTrue(q4["weights"].startswith("int4 g32 (lowp fp32; GGUF projections:"), q4["weights"])
        self.assertNotIn("dense", q4["weights"])
        self.assertLess(q4["weight_bytes_per_token"], 0.4 * f32["weight_bytes_per_token"] / 2)

    def test_q4_k_m_runs_weight_only(self):
        """A Q4_K_M-style file (q4_K, q6_K head and layers 0/3's v and down, one q5_K down): its
        q4_K projections run as int4 g32 and the q5_K one as int8 g32 straight from the blocks, the
        q6_K ones converted to int8 g32, so every projection runs weight-only (the q4_K q and k
        merged with a q6_K v too) and the resident weights are well under half the fp32
        checkpoint's. The logits against the dequantized run: llm_model_test."""
        def bench(path):
            return self.tool_json("bench", path, "--llm", "--input-tokens", "4", "--output-tokens", "2",
                                  "--iterations", "1", "--dtype", "fp32", "--json")
        k = bench(MODELS["gguf_llama_q4_k_m"]["dir"])
        hf = bench(os.path.join(LLM, "llama_k"))
        self.assertTrue(k["weights"].startswith("int4/int8 g32 (lowp fp32; GGUF projections:"), k["weights"])
        for part in ("23 int4 g32 (q4_K)", "1 int8 g32 (q5_K)", "5 int8 g32 (q6_K, converted)"):
            self.assertIn(part, k["weights"])
        self.assertNotIn("dense", k["weights"])
        self.assertLess(k["resident_weight_bytes"], 0.5 * hf["resident_weight_bytes"])
        ids = self.greedy(MODELS["gguf_llama_q4_k_m"]["dir"], MODELS["gguf_llama_q4_k_m"]["prompt"], 4)
        self.assertEqual(len(ids), 4)

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
        for name, code in (("gguf_truncated", e2e.EXIT_BAD_INPUT), ("gguf_architecture", e2e.EXIT_UNSUPPORTED),
                           ("gguf_expert_count", e2e.EXIT_BAD_INPUT), ("gguf_missing_shexp", e2e.EXIT_BAD_INPUT),
                           ("gguf_unknown_arch", e2e.EXIT_UNSUPPORTED), ("gguf_gemma3_vision", e2e.EXIT_UNSUPPORTED)):
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
