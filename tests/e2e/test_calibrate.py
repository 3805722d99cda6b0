#!/usr/bin/python3
"""ipex-tool calibrate: the qconfig it writes (ops, ids, identity, observers, SmoothQuant),
data given as .pt or .npy files or directories, progress only on a terminal, and bad data."""

import json
import os
import pty
import shutil
import subprocess

import numpy as np

import e2e_common as e2e
import quant_common as qc


class Calibrate(e2e.ToolTestCase):
    def setUp(self):
        super().setUp()
        self.model = qc.copy_quant(self, qc.DIGITS["model"])
        self.calib = qc.copy_quant(self, qc.DIGITS["calib"])

    def test_qconfig_lists_every_quantizable_op(self):
        out = self.path("q.json")
        digest = e2e.sha256(self.model)
        result = self.tool("calibrate", self.model, "--data", self.calib, "--out", out)
        self.assertIn("5 quantizable ops", result.stderr)
        self.assertEqual(e2e.sha256(self.model), digest, "calibrate modified the model")
        self.assert_no_stray_files(self.tmp, ["digits_cnn.pt", "digits_calib", "q.json"])
        with open(out) as f:
            q = json.load(f)
        self.assertEqual(q["format"], "ipex-qconfig")
        self.assertEqual(q["version"], 1)
        self.assertRegex(q["model"]["identity"], "^[0-9a-f]{16}$")
        ids = [op["id"] for op in q["ops"]]
        self.assertEqual(ids, ["conv1:conv2d:0", "conv2:conv2d:0", "conv3:conv2d:0", "fc1:linear:0",
                               "fc2:linear:0"])
        channels = {"conv1": 16, "conv2": 16, "conv3": 32, "fc1": 64, "fc2": 10}
        for op in q["ops"]:
            self.assertEqual(op["dtype"], "int8")
            self.assertEqual(op["module"], op["id"].split(":")[0])
            self.assertEqual(len(op["weight"]["scales"]), channels[op["module"]])
            self.assertEqual(op["weight"]["channels"], channels[op["module"]])
            for side in ("input", "output"):
                t = op[side]
                self.assertEqual(t["dtype"], "u8")
                self.assertGreater(t["scale"], 0)
                self.assertTrue(0 <= t["zero_point"] <= 255)
                self.assertEqual(t["observer"]["name"], "histogram_l2")
        by_id = {op["id"]: op for op in q["ops"]}
        # conv1 -> relu, conv2 -> add(x, .) -> relu: fused; the input of conv1 is in [0, 1].
        self.assertTrue(by_id["conv1:conv2d:0"]["relu"])
        self.assertTrue(by_id["conv2:conv2d:0"]["add"]["relu"])
        self.assertFalse(by_id["fc2:linear:0"]["relu"])
        self.assertNotIn("add", by_id["fc2:linear:0"])
        inp = by_id["conv1:conv2d:0"]["input"]
        self.assertEqual(inp["zero_point"], 0)
        self.assertAlmostEqual(inp["scale"] * 255, 1.0, delta=0.02)
        # The output of one op is the input of the next: observed once, the same numbers.
        self.assertEqual(by_id["fc1:linear:0"]["output"], by_id["fc2:linear:0"]["input"])

    def test_npy_and_pt_batches_agree_and_max_batches(self):
        npy = qc.copy_quant(self, "digits_calib_npy")
        a = qc.calibrate(self, self.model, self.calib, self.path("a.json"), "--max-batches", "3",
                         "--observer", "min_max")
        b = qc.calibrate(self, self.model, npy, self.path("b.json"), "--max-batches", "3",
                         "--observer", "min_max")
        c = qc.calibrate(self, self.model, self.calib, self.path("c.json"), "--observer", "min_max")
        self.assertEqual(a["model"]["identity"], b["model"]["identity"])
        for x, y in zip(a["ops"], b["ops"]):
            self.assertAlmostEqual(x["output"]["scale"], y["output"]["scale"], places=9)
        # Eight batches see at least the range of three.
        for x, y in zip(a["ops"], c["ops"]):
            self.assertGreaterEqual(y["output"]["scale"] * (1 + 1e-9), x["output"]["scale"])
        # A fourth batch of inputs twice as large: all batches see it, the first three do not.
        mixed = self.path("mixed")
        os.makedirs(mixed)
        names = sorted(os.listdir(npy))
        for name in names[:3]:
            shutil.copy(os.path.join(npy, name), os.path.join(mixed, name))
        big = np.load(os.path.join(npy, names[3])) * 2
        np.save(os.path.join(mixed, names[3]), big)
        d = qc.calibrate(self, self.model, mixed, self.path("d.json"), "--max-batches", "3",
                         "--observer", "min_max")
        e = qc.calibrate(self, self.model, mixed, self.path("e.json"), "--observer", "min_max")
        self.assertEqual([o["output"]["scale"] for o in d["ops"]], [o["output"]["scale"] for o in b["ops"]])
        self.assertAlmostEqual(e["ops"][0]["input"]["scale"], 2 * d["ops"][0]["input"]["scale"],
                               delta=0.1 * d["ops"][0]["input"]["scale"])

    def test_single_file_and_each_observer(self):
        one = os.path.join(self.calib, "batch_000.pt")
        for observer in ("min_max", "moving_average", "histogram_l2", "histogram_kl", "percentile"):
            q = qc.calibrate(self, self.model, one, self.path(f"{observer}.json"), "--observer", observer)
            self.assertEqual({op["input"]["observer"]["name"] for op in q["ops"]}, {observer})
            self.assertEqual(q["recipe"]["activation"]["observer"]["name"], observer)

    def test_no_progress_bar_in_a_pipe_but_on_a_terminal(self):
        piped = self.tool("calibrate", self.model, "--data", self.calib, "--out", self.path("p.json"))
        self.assertNotIn("calibrating [", piped.stderr)
        quiet = self.tool("calibrate", self.model, "--data", self.calib, "--out", self.path("q.json"), "-q")
        self.assertEqual(quiet.stderr, "")
        master, slave = pty.openpty()
        proc = subprocess.run([e2e.TOOL, "calibrate", self.model, "--data", self.calib, "--out",
                               self.path("t.json")], stderr=slave, stdout=subprocess.DEVNULL,
                              stdin=subprocess.DEVNULL, timeout=e2e.RUN_TIMEOUT)
        os.close(slave)
        text = b""
        try:
            while True:
                chunk = os.read(master, 4096)
                if not chunk:
                    break
                text += chunk
        except OSError:
            pass
        os.close(master)
        self.assertEqual(proc.returncode, 0)
        self.assertIn(b"calibrating [", text)
        self.assertIn(b"8/8", text)

    def test_smooth_quant_recipe_records_factors(self):
        model = qc.copy_quant(self, qc.LN_MLP["model"])
        data = qc.copy_quant(self, qc.LN_MLP["calib"])
        recipe = os.path.join(os.path.dirname(os.path.dirname(e2e.HERE)), "recipes", "int8-smoothquant.json")
        q = qc.calibrate(self, model, data, self.path("sq.json"), "--recipe", recipe)
        self.assertEqual(q["smooth_quant"]["alpha"], 0.5)
        by_id = {op["id"]: op for op in q["ops"]}
        self.assertEqual(len(by_id["fc1:linear:0"]["smooth_quant"]["factors"]), 24)
        self.assertEqual(len(by_id["fc2:linear:0"]["smooth_quant"]["factors"]), 48)
        # The outlier channel (5) gets the largest factor of fc1's input.
        factors = by_id["fc1:linear:0"]["smooth_quant"]["factors"]
        self.assertEqual(factors.index(max(factors)), 5)
        plain = qc.calibrate(self, model, data, self.path("plain.json"))
        self.assertNotIn("smooth_quant", plain["ops"][0])
        self.assertEqual(plain["model"]["identity"], q["model"]["identity"])


class CalibrateBadInput(e2e.ToolTestCase):
    def setUp(self):
        super().setUp()
        self.model = qc.copy_quant(self, qc.DIGITS["model"])
        self.out = self.path("q.json")

    def _bad(self, code, data, *mentions, extra=()):
        result = self.run_tool("calibrate", self.model, "--data", data, "--out", self.out, *extra)
        self.assert_error(result, code, *mentions)
        self.assertFalse(os.path.exists(self.out), "qconfig written on error")

    def test_empty_directory(self):
        os.mkdir(self.path("empty"))
        self._bad(e2e.EXIT_BAD_INPUT, self.path("empty"), "empty", "no .pt or .npy")

    def test_missing_data(self):
        self._bad(e2e.EXIT_BAD_INPUT, self.path("nowhere"), "nowhere")

    def test_wrong_dtype(self):
        self._bad(e2e.EXIT_BAD_INPUT, qc.copy_quant(self, "digits_calib_int"), "batch_000.pt")

    def test_wrong_shape(self):
        self._bad(e2e.EXIT_BAD_INPUT, qc.copy_quant(self, "digits_calib_shape"), "batch_000.pt", "shape")

    def test_not_a_tensor_file(self):
        os.mkdir(self.path("junk"))
        with open(self.path("junk/batch_000.pt"), "wb") as f:
            f.write(b"not a pickle")
        self._bad(e2e.EXIT_BAD_INPUT, self.path("junk"), "batch_000.pt")

    def test_bad_recipe(self):
        qc.write_json(self.path("r.json"), {"format": "ipex-quant-recipe", "version": 1,
                                            "activation": {"dtype": "u8", "observer": {"name": "nope"}}})
        self._bad(e2e.EXIT_BAD_INPUT, qc.copy_quant(self, qc.DIGITS["calib"]), "r.json",
                  "activation.observer.name", extra=("--recipe", self.path("r.json")))

    def test_usage_errors(self):
        calib = qc.copy_quant(self, qc.DIGITS["calib"])
        self._bad(e2e.EXIT_USAGE, calib, "smooth-quant", extra=("--smooth-quant", "1.5"))
        self._bad(e2e.EXIT_USAGE, calib, "observer", extra=("--observer", "minmax"))


if __name__ == "__main__":
    e2e.main()
