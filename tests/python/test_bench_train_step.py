"""Smoke run of bench/train_step.py at its tiny size (issue 51): every configuration runs in its
own process and reports its fields; the split bf16 step holds fewer bytes per parameter than
fp32 (2 + 2 weight, 2 gradient vs 4 + 4), and the bytes the fused step moves are counted from the
optimizer's real state. No timing is asserted."""

import json
import os
import subprocess

from py_common import TestCase, main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "train_step.py")


class TrainStepBench(TestCase):
    def run_bench(self, *args):
        proc = subprocess.run(["/usr/bin/python3", SCRIPT, "--size", "tiny", "--steps", "2", "--warmup", "1",
                               "--rounds", "1", "--json", "-", *args], capture_output=True, text=True, timeout=600)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return json.loads(proc.stdout), proc.stderr

    def test_tiny_run_reports_every_configuration(self):
        report, table = self.run_bench("--model", "mlp,transformer", "--optimizer", "adamw", "--read-gbs", "10")
        self.assertEqual(report["read_gbs"], 10)
        rows = {(r["model"], r["config"]): r for r in report["results"]}
        self.assertEqual(set(rows), {(m, c) for m in ("mlp", "transformer")
                                     for c in ("stock_fp32", "stock_autocast", "fused_fp32", "split_bf16")})
        for (model, config), row in rows.items():
            self.assertGreater(row["step_s"], 0)
            self.assertGreater(row["step_s"], row["optimizer_step_s"])
            self.assertGreater(row["peak_rss_bytes"], 0)
            self.assertAlmostEqual(row["bandwidth_share"], row["optimizer_step_gbs"] / 10)
            self.assertIn(f"{model:<12} {config:<15} step", table)
        for model in ("mlp", "transformer"):
            fp32, split = rows[(model, "fused_fp32")], rows[(model, "split_bf16")]
            self.assertEqual(fp32["bytes_per_parameter"], 4 + 4 + 8)  # AdamW: weight, gradient, exp_avg(_sq)
            self.assertLess(split["bytes_per_parameter"], fp32["bytes_per_parameter"])
            self.assertLess(split["optimizer_step_bytes"], fp32["optimizer_step_bytes"])
        # the transformer's LayerNorms stay fp32, so its split bytes lie between the two forms
        self.assertGreater(rows[("transformer", "split_bf16")]["bytes_per_parameter"], 2 + 2 + 2 + 8)
        self.assertEqual(rows[("mlp", "split_bf16")]["bytes_per_parameter"], 2 + 2 + 2 + 8)

    def test_no_limits_and_usage(self):
        report, _ = self.run_bench("--model", "cnn", "--optimizer", "sgd", "--no-limits")
        self.assertIsNone(report["read_gbs"])
        self.assertTrue(all(r["bandwidth_share"] is None for r in report["results"]))
        bad = subprocess.run(["/usr/bin/python3", SCRIPT, "--model", "resnet"], capture_output=True, text=True)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("--model takes mlp,cnn,transformer,step", bad.stderr)

    def test_step_alone(self):
        # the optimizer step without forward/backward: no autocast configuration, the step is the
        # whole time, the bytes the same as the MLP's (its parameters)
        report, _ = self.run_bench("--model", "step,mlp", "--optimizer", "sgd", "--read-gbs", "10")
        rows = {(r["model"], r["config"]): r for r in report["results"]}
        self.assertEqual({c for m, c in rows if m == "step"}, {"stock_fp32", "fused_fp32", "split_bf16"})
        for config in ("stock_fp32", "fused_fp32", "split_bf16"):
            step, mlp = rows[("step", config)], rows[("mlp", config)]
            self.assertEqual(step["step_s"], step["optimizer_step_s"])
            self.assertEqual(step["parameters"], mlp["parameters"])
            self.assertEqual(step["optimizer_step_bytes"], mlp["optimizer_step_bytes"])


if __name__ == "__main__":
    main()
