"""SmoothQuant W8A8 (calibrate-llm, --qconfig) on the fixtures of tests/fixtures/make_w8a8_fixtures.py:
the qconfig round trip, perplexity of the outlier model with alpha 0.5 within 2% of fp32 and
alpha 0 visibly worse, bad qconfig files exit 3 naming the field, and the CLI's exit codes. IPEX's
qconfig summary (as save_qconf_summary writes it for ipex.llm.optimize's reference decoder layers,
made here from our calibration: ipex_summary) loads to the same perplexity as our file, and its
malformed forms exit 3 / 4 naming the entry and field."""

import json
import math
import os

import e2e_common as e2e

W8A8 = os.path.join(os.environ.get("IPEX_FIXTURES", ""), "w8a8")
OUTLIER = os.path.join(W8A8, "outlier")
PLAIN = os.path.join(W8A8, "plain")
TEXT = os.path.join(W8A8, "text.txt")


LINEAR = "<class 'torch.nn.modules.linear.Linear'>"


def ipex_summary(q, dtype="torch.quint8", weight_factors=True):
    """Our qconfig `q` as IPEX's qconfig summary of the same calibration: per decoder layer a module
    entry whose q_op_infos list the linears by the fqns of IPEX's reference layers (q/k/v_proj,
    mha_linear_add.linear, linear_silu_mul.linear_s/_m, mlp_linear_add.linear) and an attention
    matmul; lm_head under " ". The input's scale and factors are keyed "<op>_0" as IPEX keys an
    input shared by several linears; activation factors are 1/s, weight factors s. quint8 with
    zero point 128 or qint8 with 0 keep our step exactly."""
    zp = 128 if dtype == "torch.quint8" else 0
    layers = sorted({int(n.split(".")[2]) for n in q["layers"]})
    out = {}
    tensor = 0

    def linear(fqn, spec, key, first_key, in_id):
        nonlocal tensor
        tensor += 1
        k = spec["in_features"]
        inp = {"id": in_id, "orig_dtype": "torch.float32", "inf_dtype": dtype, "force_dtype": dtype,
               "scale": {first_key: [spec["act_scale"]]}, "zero_point": {first_key: [zp]},
               "smooth_quant_scaling_factor": {first_key: [1.0 / x for x in spec["smooth"]]}}
        weight = {"orig_dtype": "torch.float32", "inf_dtype": "torch.qint8", "scale": [0.01], "zero_point": [0]}
        if weight_factors:
            weight["smooth_quant_scaling_factor"] = list(spec["smooth"])
        return {"op_type": LINEAR, "op_type_is_module": True, "fqn": fqn, "input_tensor_infos": [inp],
                "weight_tensor_infos": [weight],
                "output_tensor_infos": [{"id": tensor + 1000, "orig_dtype": "torch.float32",
                                         "inf_dtype": "torch.float32"}],
                "activation_observer": {"name": "SmoothQuantActivationObserver", "alpha": q["alpha"],
                                        "smooth_quant_enabled": True},
                "share_weight_observers": True}

    for l in layers:
        p = f"model.layers.{l}."
        ops = {}
        parts = [("self_attn.qkv_proj", ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"]),
                 ("self_attn.o_proj", ["mha_linear_add.linear"]),
                 ("mlp.gate_up_proj", ["linear_silu_mul.linear_s", "linear_silu_mul.linear_m"]),
                 ("mlp.down_proj", ["mlp_linear_add.linear"])]
        for ours, modules in parts:
            first = f"{len(ops)}_0"
            tensor += 1
            in_id = tensor
            for m in modules:
                ops[str(len(ops))] = linear(p + m, q["layers"][p + ours], f"{len(ops)}_0", first, in_id)
            if ours == "self_attn.qkv_proj":
                ops[str(len(ops))] = {"op_type": "<built-in method matmul of type object at 0x7f>",
                                      "op_type_is_module": False, "fqn": p + "self_attn",
                                      "input_tensor_infos": [{"id": 9000 + l, "orig_dtype": "torch.float32",
                                                              "inf_dtype": "torch.float32"}],
                                      "weight_tensor_infos": [], "output_tensor_infos": []}
        out[f"model:layers:{l}"] = {"q_op_infos": ops, "nonq_op_infos": {}}
    out[" "] = {"q_op_infos": {"0": {"op_type": LINEAR, "op_type_is_module": True, "fqn": "lm_head",
                                     "input_tensor_infos": [{"id": 1, "orig_dtype": "torch.float32",
                                                             "inf_dtype": "torch.float32",
                                                             "force_dtype": "torch.float32"}],
                                     "weight_tensor_infos": [{}], "output_tensor_infos": []}},
                "nonq_op_infos": {}}
    return out


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
        # --baseline scores the model without the qconfig in the same run: the plain run's figure
        r05 = self.ppl("--qconfig", q05, "--baseline", "--max-increase", "2")
        self.assertIn("w8a8", r05["weights"])
        self.assertNotIn("w8a8", r05["baseline"]["weights"])
        self.assertEqual(r05["baseline"]["perplexity"], fp32)
        # alpha 0 is visibly worse: --max-increase 4 fails (exit 1), the report still printed
        result = self.tool("perplexity", OUTLIER, "--text", TEXT, "--dtype", "fp32", "--context", "128", "--json",
                           "--qconfig", q0, "--max-increase", "4", expect=e2e.EXIT_CHECK_FAILED)
        self.assert_error(result, e2e.EXIT_CHECK_FAILED, "--max-increase", "baseline")
        r0 = result.json()
        self.assertEqual(r0["baseline"]["perplexity"], fp32)
        self.assertFalse(r0["ok"])
        p05, p0 = r05["perplexity"], r0["perplexity"]
        self.assertLess(abs(p05 / fp32 - 1), 0.02, (fp32, p05, p0))
        self.assertGreater(p0 / fp32 - 1, 0.04, (fp32, p05, p0))  # visibly worse
        self.assertLess(p05, p0)
        for r, p in ((r05, p05), (r0, p0)):
            self.assertAlmostEqual(r["increase_percent"], (p / fp32 - 1) * 100, places=9)
        # nothing to compare without a quantization
        self.assert_error(self.run_tool("perplexity", OUTLIER, "--text", TEXT, "--baseline"), e2e.EXIT_USAGE,
                          "--baseline", "--qconfig")

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

    def write(self, name, obj):
        path = self.path(name)
        with open(path, "w") as f:
            json.dump(obj, f)
        return path

    def test_ipex_summary_gives_our_perplexity(self):
        path, q = self.calibrate(0.5)
        ours = self.ppl("--qconfig", path)
        for name, summary in (("u8", ipex_summary(q)), ("s8_act_factors", ipex_summary(q, "torch.qint8", False))):
            with self.subTest(summary=name):
                got = self.ppl("--qconfig", self.write(name + ".json", summary))
                self.assertIn("w8a8", got["weights"])
                self.assertEqual(got["perplexity"], ours["perplexity"])
        # a skewed zero point widens the step so the summary's range stays representable
        skewed = ipex_summary(q)
        for entry in skewed.values():
            for op in entry["q_op_infos"].values():
                inp = op["input_tensor_infos"][0]
                if "zero_point" in inp:
                    inp["zero_point"] = {k: [10] for k in inp["zero_point"]}
        self.assertNotEqual(self.ppl("--qconfig", self.write("skewed.json", skewed))["perplexity"], ours["perplexity"])

    def test_bad_ipex_summaries(self):
        _, q = self.calibrate(0.5)

        def op(s, layer, index):
            return s[f"model:layers:{layer}"]["q_op_infos"][str(index)]

        def drop_scale(s):
            del op(s, 1, 7)["input_tensor_infos"][0]["scale"]

        def float_input(s):
            op(s, 0, 4)["input_tensor_infos"][0]["force_dtype"] = "torch.float32"

        def other_factors(s):
            w = op(s, 0, 1)["weight_tensor_infos"][0]
            w["smooth_quant_scaling_factor"] = [x * 2 for x in w["smooth_quant_scaling_factor"]]

        def short_factors(s):
            op(s, 0, 5)["weight_tensor_infos"][0]["smooth_quant_scaling_factor"].pop()

        def no_k(s):
            del op(s, 1, 1)["fqn"]

        def bad_zp(s):
            op(s, 0, 0)["input_tensor_infos"][0]["zero_point"] = {"0_0": [300]}

        cases = {
            "missing scale": (drop_scale, e2e.EXIT_BAD_INPUT, ["q_op_infos['7']", "scale", "is missing"]),
            "projection kept in float": (float_input, e2e.EXIT_UNSUPPORTED, ["mha_linear_add.linear", "torch.float32"]),
            "q and k smoothed differently": (other_factors, e2e.EXIT_UNSUPPORTED, ["share_weight_observers"]),
            "wrong channel count": (short_factors, e2e.EXIT_BAD_INPUT, ["smooth_quant_scaling_factor", "channels"]),
            "no entry for k_proj": (no_k, e2e.EXIT_BAD_INPUT, ["model.layers.1.self_attn.k_proj"]),
            "zero point out of range": (bad_zp, e2e.EXIT_BAD_INPUT, ["zero_point", "300"]),
        }
        for name, (mutate, code, words) in cases.items():
            with self.subTest(case=name):
                s = ipex_summary(q)
                mutate(s)
                r = self.run_tool("perplexity", OUTLIER, "--text", TEXT, "--context", "64", "--qconfig",
                                  self.write("bad_summary.json", s))
                self.assert_error(r, code, *words)
        r = self.run_tool("perplexity", OUTLIER, "--text", TEXT, "--qconfig", self.write("neither.json", {"a": 1}))
        self.assert_error(r, e2e.EXIT_BAD_INPUT, "format", "q_op_infos")

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
