"""SmoothQuant W8A8 (calibrate-llm, --qconfig) on the fixtures of tests/fixtures/make_w8a8_fixtures.py:
the qconfig round trip, perplexity of the outlier model with alpha 0.5 within 2% of fp32 and
alpha 0 visibly worse, bad qconfig files exit 3 naming the field, and the CLI's exit codes."""

import json
import math
import os

import e2e_common as e2e

W8A8 = os.path.join(os.environ.get("IPEX_FIXTURES", ""), "w8a8")
OUTLIER = os.path.join(W8A8, "outlier")
PLAIN = os.path.join(W8A8, "plain")
TEXT = os.path.join(W8A8, "text.txt")


class W8A8Test(e2e.ToolTestCase):
    def calibrate(self, alpha, model=OUTLIER):
        out = self.path(f"q{alpha}.json")
        self.tool("calibrate-llm", model, "--text", TEXT, "--alpha", alpha, "-o", out, "-q")
        with open(out) as f:
            return out, json.load(f)

    def ppl(self, *extra):
        return self.tool_json("perplexity", OUTLIER, "--text", TEXT, "--dtype", "fp32", "--context", "128", "--json",
                              *extra)

    def test_round_trip_and_factors(self):
        path, q = self.calibrate(0.5)
        self.assertEqual((q["format"], q["version"], q["alpha"]), ("ipex-tool-smoothquant", 1, 0.5))
        self.assertEqual(len(q["layers"]), 8)
        qkv = q["layers"]["model.layers.0.self_attn.qkv_proj"]
        self.assertEqual(qkv["in_features"], 128)
        for j in range(128):  # s_j = (max|X_j| + eps)^a / (max|W_j| + eps)^(1-a), stored as fp32
            s = (qkv["act_max"][j] + 1e-6) ** 0.5 / (qkv["weight_max"][j] + 1e-6) ** 0.5
            self.assertAlmostEqual(qkv["smooth"][j] / s, 1, places=6)
        top = max(a / s for a, s in zip(qkv["act_max"], qkv["smooth"]))
        self.assertAlmostEqual(qkv["act_scale"] * 127 / top, 1, places=9)
        # the outlier channels are the largest activations
        order = sorted(range(128), key=lambda j: -qkv["act_max"][j])
        self.assertEqual(sorted(order[:3]), [3, 17, 42])
        # the file loads: what the loader reads is what was written (the same perplexity twice)
        a = self.ppl("--qconfig", path)["perplexity"]
        self.assertEqual(a, self.ppl("--qconfig", path)["perplexity"])

    def test_smoothing_keeps_perplexity_and_alpha0_does_not(self):
        fp32 = self.ppl()["perplexity"]
        q05, _ = self.calibrate(0.5)
        q0, _ = self.calibrate(0)
        r05 = self.ppl("--qconfig", q05)
        r0 = self.ppl("--qconfig", q0)
        self.assertIn("w8a8", r05["weights"])
        p05, p0 = r05["perplexity"], r0["perplexity"]
        self.assertLess(abs(p05 / fp32 - 1), 0.02, (fp32, p05, p0))
        self.assertGreater(p0 / fp32 - 1, 0.04, (fp32, p05, p0))  # visibly worse
        self.assertLess(p05, p0)

    def test_generate_and_bench_take_the_qconfig(self):
        q, _ = self.calibrate(0.5)
        out = self.tool_json("generate", OUTLIER, "--prompt-ids", "1,5,9", "--max-new-tokens", "3", "--greedy",
                             "--qconfig", q, "--json")
        self.assertIn("w8a8", out["weights"] if "weights" in out else "w8a8")
        self.tool("bench", OUTLIER, "--llm", "--input-tokens", "8", "--output-tokens", "2", "--iterations", "1",
                  "--qconfig", q)

    def bad(self, mutate):
        _, q = self.calibrate(0.5)
        mutate(q)
        path = self.path("bad.json")
        with open(path, "w") as f:
            f.write(json.dumps(q, allow_nan=True))  # NaN as Python writes it: not JSON, a parse error there
        return path

    def test_bad_qconfig_files(self):
        cases = {
            "missing layer": (lambda q: q["layers"].pop("model.layers.1.mlp.down_proj"), "model.layers.1.mlp.down_proj"),
            "wrong channel count": (lambda q: q["layers"]["model.layers.0.self_attn.o_proj"].update(in_features=64),
                                    "in_features"),
            "short smooth": (lambda q: q["layers"]["model.layers.0.mlp.gate_up_proj"]["smooth"].pop(), "smooth"),
            "NaN": (lambda q: q["layers"]["model.layers.0.self_attn.qkv_proj"]["smooth"].__setitem__(5, math.nan),
                    "invalid literal"),
            "infinite as fp32": (lambda q: q["layers"]["model.layers.0.self_attn.qkv_proj"]["smooth"].__setitem__(
                7, 1e300), "smooth[7]"),
            "zero factor": (lambda q: q["layers"]["model.layers.0.self_attn.qkv_proj"]["smooth"].__setitem__(5, 0),
                            "smooth[5]"),
            "bad scale": (lambda q: q["layers"]["model.layers.1.self_attn.o_proj"].update(act_scale=-1), "act_scale"),
            "other format": (lambda q: q.update(format="x"), "format"),
        }
        for name, (mutate, field) in cases.items():
            with self.subTest(case=name):
                path = self.bad(mutate)
                r = self.run_tool("perplexity", OUTLIER, "--text", TEXT, "--context", "64", "--qconfig", path)
                self.assert_error(r, e2e.EXIT_BAD_INPUT, field)
        r = self.run_tool("perplexity", OUTLIER, "--text", TEXT, "--qconfig", self.path("absent.json"))
        self.assert_error(r, e2e.EXIT_BAD_INPUT, "absent.json")

    def test_cli_exit_codes(self):
        out = self.path("q.json")
        r = self.run_tool("calibrate-llm", OUTLIER, "--text", TEXT, "--alpha", "1.5", "-o", out)
        self.assertEqual(r.code, e2e.EXIT_USAGE, r.describe())
        r = self.run_tool("calibrate-llm", OUTLIER, "--text", TEXT)
        self.assertEqual(r.code, e2e.EXIT_USAGE, r.describe())
        r = self.run_tool("calibrate-llm", OUTLIER, "--text", TEXT, "--tokens", "1", "-o", out)
        self.assert_error(r, e2e.EXIT_USAGE, "--tokens")
        r = self.run_tool("calibrate-llm", OUTLIER, "--text", self.path("none.txt"), "-o", out)
        self.assertEqual(r.code, e2e.EXIT_BAD_INPUT, r.describe())
        self.assertFalse(os.path.exists(out))
        r = self.run_tool("calibrate-llm", self.path("nodir"), "--text", TEXT, "-o", out)
        self.assertEqual(r.code, e2e.EXIT_BAD_INPUT, r.describe())
        q, _ = self.calibrate(0.5)
        r = self.run_tool("perplexity", OUTLIER, "--text", TEXT, "--qconfig", q, "--woq-dtype", "int8")
        self.assert_error(r, e2e.EXIT_USAGE, "--woq-dtype")
        # a qconfig of another model: the channel counts differ
        llm = os.path.join(os.environ.get("IPEX_FIXTURES", ""), "llm", "llama")
        if os.path.isdir(llm):
            r = self.run_tool("perplexity", llm, "--text", TEXT, "--qconfig", q)
            self.assert_error(r, e2e.EXIT_BAD_INPUT, "in_features")


if __name__ == "__main__":
    e2e.main()
