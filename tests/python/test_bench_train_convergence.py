"""Smoke run of bench/train_convergence.py (issue 51) at a few steps: every task trains each
configuration from the same weights on the same batches and reports a finite held-out loss and
its curve; the split bf16 run starts from the fp32 run's weights, so their first losses are close;
bad use is exit 2, a missing text file exit 3. The convergence figure itself is the bench's
(hundreds of steps); no loss bound beyond finiteness is asserted at this length."""

import json
import math
import os
import subprocess
import tempfile

from py_common import TestCase, main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "train_convergence.py")


class TrainConvergenceBench(TestCase):
    def run_bench(self, *args, expect=0):
        proc = subprocess.run(["/usr/bin/python3", SCRIPT, *args], capture_output=True, text=True, timeout=600)
        self.assertEqual(proc.returncode, expect, proc.stderr)
        return proc

    def test_short_run_reports_every_configuration(self):
        with tempfile.TemporaryDirectory() as tmp:
            text = os.path.join(tmp, "text.txt")
            with open(text, "w") as f:
                f.write("the quick brown fox jumps over the lazy dog. " * 200)
            proc = self.run_bench("--steps", "4", "--eval-every", "2", "--text", text, "--json", "-")
        report = json.loads(proc.stdout.strip().splitlines()[-1])
        self.assertEqual([t["task"] for t in report["tasks"]], ["cnn", "lm"])
        for task in report["tasks"]:
            runs = {r["config"]: r for r in task["runs"]}
            self.assertEqual(set(runs), {"fp32", "split_bf16", "autocast"})
            for run in runs.values():
                self.assertTrue(math.isfinite(run["final_eval_loss"]), run)
                self.assertEqual([c["step"] for c in run["curve"]], [2, 4])
            first = {c: r["curve"][0]["eval_loss"] for c, r in runs.items()}
            # bf16 rounding of the same weights after two steps: a few percent at most
            self.assertLess(abs(first["split_bf16"] - first["fp32"]) / first["fp32"], 0.05, first)
            diff = abs(runs["split_bf16"]["final_eval_loss"] - runs["fp32"]["final_eval_loss"])
            self.assertAlmostEqual(task["split_bf16_vs_fp32_pct"], diff / runs["fp32"]["final_eval_loss"] * 100)
            self.assertIn(f"{task['task']} (4 steps, adamw)", proc.stdout)

    def test_bad_use(self):
        self.assertIn("--task: unknown", self.run_bench("--task", "gan", expect=2).stderr)
        self.assertIn("--steps", self.run_bench("--steps", "0", expect=2).stderr)
        missing = self.run_bench("--task", "lm", "--text", "/nonexistent/text", expect=3)
        self.assertIn("/nonexistent/text", missing.stderr)


if __name__ == "__main__":
    main()
