#!/usr/bin/python3
"""--optimize-lstm on the fixtures of tests/fixtures/make_rnn_fixtures.py: traced and scripted
LSTM/GRU modules and a conv1d + LSTM speech model become ipex::lstm / ipex::gru (fp32 and
bf16), counted with inspect, reported by the optimize_lstm pass entry and checked with
verify; proj_size stays aten and is named in `skipped`; --portable and --no-optimize-lstm
leave them; a damaged saved RnnContext is exit 3."""

import json
import os
import subprocess

import e2e_common as e2e

RNN_DIR = os.path.join(e2e.FIXTURES, "rnn")
CRAFT = os.path.join(os.path.dirname(e2e.HERE), "fixtures", "craft_state.py")
FP32_MIN_COSINE = "0.99999"
BF16_MIN_COSINE = "0.999"


def rnn_models() -> dict:
    with open(os.path.join(RNN_DIR, "rnn_fixtures.json")) as f:
        return json.load(f)["models"]


MODELS = rnn_models()
REPLACED = sorted(name for name, m in MODELS.items() if m["replaced"])


class OptimizeRnn(e2e.ToolTestCase):
    def model(self, name: str):
        """(model path, input file) of a fixture."""
        entry = MODELS[name]
        return os.path.join(RNN_DIR, entry["file"]), os.path.join(RNN_DIR, entry["input_file"])

    def rnn_ops(self, path: str) -> dict:
        histogram = self.inspect(path)["op_histogram"]
        return {kind: histogram.get(kind, 0) for kind in ("aten::lstm", "aten::gru", "ipex::lstm", "ipex::gru")}

    def _optimized(self, name: str, dtype: str):
        src, inputs = self.model(name)
        entry = MODELS[name]
        before = self.rnn_ops(src)
        self.assertEqual((before["aten::lstm"], before["aten::gru"]), (entry["lstm"], entry["gru"]))
        out = self.path(f"{name}.{dtype}.pt")
        _, report = self.optimize(src, out, "--dtype", dtype)
        lstm_entry = self.pass_entry(report, "optimize_lstm")
        self.assertEqual(lstm_entry["status"], "applied", lstm_entry)
        self.assertEqual(lstm_entry["count"], entry["replaced"], lstm_entry)
        self.assertEqual(len(lstm_entry["modules"]), entry["replaced"], lstm_entry)
        self.assertEqual(lstm_entry["skipped"], [], lstm_entry)
        after = self.rnn_ops(out)
        self.assertEqual(after, {"aten::lstm": 0, "aten::gru": 0, "ipex::lstm": entry["lstm"],
                                 "ipex::gru": entry["gru"]})
        self.assertTrue(self.inspect(out)["needs_ops_library"])
        min_cosine = FP32_MIN_COSINE if dtype == "fp32" else BF16_MIN_COSINE
        self.tool("verify", src, out, "--input", inputs, "--min-cosine", min_cosine)
        return out

    def _fp32(self, name: str):
        self._optimized(name, "fp32")

    def _bf16(self, name: str):
        if e2e.ONEDNN_BF16:
            self._optimized(name, "bf16")
            return
        # No oneDNN bf16 RNN on this CPU: every layer stays aten, named with oneDNN's reason, and
        # the bf16 model still verifies.
        src, inputs = self.model(name)
        out = self.path(f"{name}.bf16.pt")
        _, report = self.optimize(src, out, "--dtype", "bf16")
        lstm_entry = self.pass_entry(report, "optimize_lstm")
        self.assertEqual(lstm_entry["count"], 0, lstm_entry)
        self.assertEqual(len(lstm_entry["skipped"]), MODELS[name]["replaced"], lstm_entry)
        for reason in lstm_entry["skipped"]:
            self.assertIn("oneDNN has no bf16", reason)
        self.tool("verify", src, out, "--input", inputs, "--min-cosine", BF16_MIN_COSINE)

    def test_optimized_model_runs_in_python(self):
        src, inputs = self.model("speech_lstm")
        out = self._optimized("speech_lstm", "fp32")
        self.check_in_python(src, out, inputs)

    def test_proj_size_stays_aten_and_is_reported(self):
        src, inputs = self.model("lstm_proj")
        out = self.path("proj.pt")
        _, report = self.optimize(src, out)
        entry = self.pass_entry(report, "optimize_lstm")
        self.assertEqual((entry["status"], entry["count"]), ("applied", 0), entry)
        self.assertEqual(len(entry["skipped"]), 1, entry)
        self.assertIn("proj_size", entry["skipped"][0])
        self.assertIn("aten::lstm kept", entry["skipped"][0])
        self.assertEqual(self.rnn_ops(out)["aten::lstm"], 1)
        self.tool("verify", src, out, "--input", inputs, "--min-cosine", FP32_MIN_COSINE)

    def test_portable_and_knob_off_leave_aten(self):
        src, _ = self.model("lstm_traced")
        for flags, warns in ((["--portable"], False), (["--portable", "--optimize-lstm"], True),
                             (["--no-optimize-lstm"], False), (["--no-weights-prepack"], False)):
            with self.subTest(flags=flags):
                out = self.path("off.pt")
                result, report = self.optimize(src, out, *flags)
                self.assertEqual(self.pass_entry(report, "optimize_lstm")["status"], "disabled")
                self.assertEqual(self.rnn_ops(out)["aten::lstm"], 1)
                named = [w for w in result.warnings() if "--optimize-lstm" in w]
                self.assertEqual(bool(named), warns, result.describe())

    def test_damaged_saved_state_is_bad_input(self):
        src, inputs = self.model("lstm_traced")
        good = self.path("good.pt")
        self.optimize(src, good)
        cases = [("hidden_zero", "1=0", "hidden_size is 0"), ("layers_huge", "2=1000", "num_layers is 1000"),
                 ("flag_two", "3=2", "saved flag 3 is 2"), ("input_size", "0=21", "weight 0 has shape")]
        for name, change, words in cases:
            with self.subTest(case=name):
                bad = self.path(name + ".pt")
                subprocess.run([e2e.PYTHON, CRAFT, good, bad, "--class", "RnnContext", "--list", "ints",
                                "--set", change], check=True, timeout=120)
                for command in (["inspect", bad], ["verify", src, bad, "--input", inputs]):
                    self.assert_error(self.run_tool(*command), e2e.EXIT_BAD_INPUT, name + ".pt", words)
        bad = self.path("mode.pt")
        subprocess.run([e2e.PYTHON, CRAFT, good, bad, "--class", "RnnContext", "--string", "lstm=rnn_relu"],
                       check=True, timeout=120)
        self.assert_error(self.run_tool("inspect", bad), e2e.EXIT_BAD_INPUT, "unknown recurrent mode")


e2e.add_per_model_tests(OptimizeRnn, REPLACED, "_fp32", prefix="test_fp32_")
e2e.add_per_model_tests(OptimizeRnn, REPLACED, "_bf16", prefix="test_bf16_")

if __name__ == "__main__":
    e2e.main()
