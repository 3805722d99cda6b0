"""SIGINT/SIGTERM sent to ipex-launch reach every instance (and what they started)."""
import os
import signal
import subprocess
import time
import unittest

from launch_e2e import LaunchTest, LAUNCH, online_cpus, summary_rows


def wait_for(predicate, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purpose.
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(") ", 1)[1][0] != "Z"


class Signals(LaunchTest):
    def start(self, script, n=2):
        self.logs = os.path.join(self.tmp, "logs")
        proc = subprocess.Popen([LAUNCH, "--ninstances", str(n), "--log-dir", self.logs, "--",
                                 "/bin/sh", "-c", script],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        return proc

    def log(self, i):
        for name in os.listdir(self.logs):
            if name.startswith(f"run_instance{i}_"):
                with open(os.path.join(self.logs, name)) as f:
                    return f.read()
        return ""

    def all_ready(self, n):
        return os.path.isdir(self.logs) and all("ready" in self.log(i) for i in range(n))

    def forwarded(self, sig, name):
        n = min(2, len(online_cpus()))
        script = (f'trap "echo got {name}; exit 3" {name}; '
                  'sleep 300 & echo "child $!"; echo ready; wait')
        proc = self.start(script, n)
        self.assertTrue(wait_for(lambda: self.all_ready(n)), "instances did not start")
        children = [int(line.split()[1]) for i in range(n) for line in self.log(i).splitlines()
                    if line.startswith("child ")]
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
        self.assertEqual(proc.returncode, 1, err)
        self.assertIn(f"received SIG{name}", err)
        for i in range(n):
            self.assertIn(f"got {name}", self.log(i))
        # The whole process group of each instance got the signal, so the background
        # sleep the shell started is gone too.
        self.assertEqual(len(children), n)
        self.assertTrue(wait_for(lambda: not any(alive(p) for p in children), 5))
        self.assertEqual([row["status"] for row in summary_rows(err)], ["exit 3"] * n)

    def test_sigterm_is_forwarded(self):
        self.forwarded(signal.SIGTERM, "TERM")

    def test_sigint_is_forwarded(self):
        self.forwarded(signal.SIGINT, "INT")

    def test_second_signal_kills(self):
        n = min(2, len(online_cpus()))
        proc = self.start('trap "" TERM; echo ready; while :; do sleep 0.1; done', n)
        self.assertTrue(wait_for(lambda: self.all_ready(n)))
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        self.assertIsNone(proc.poll(), "instances ignoring SIGTERM should still run")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("sending SIGKILL", err)
        self.assertEqual([row["status"] for row in summary_rows(err)], ["signal 9 (SIGKILL)"] * n)

    def test_instances_stop_when_the_launcher_is_killed(self):
        n = min(2, len(online_cpus()))
        marks = os.path.join(self.tmp, "marks")
        os.mkdir(marks)
        proc = self.start(f'trap "touch {marks}/$IPEX_LAUNCH_INSTANCE; exit 3" TERM; echo "pid $$"; '
                          'echo ready; while :; do sleep 0.1; done', n)
        self.assertTrue(wait_for(lambda: self.all_ready(n)))
        pids = [int(line.split()[1]) for i in range(n) for line in self.log(i).splitlines()
                if line.startswith("pid ")]
        proc.kill()
        proc.wait(timeout=10)
        self.assertTrue(wait_for(lambda: not any(alive(p) for p in pids), 10))
        self.assertEqual(sorted(os.listdir(marks)), [str(i) for i in range(n)])


if __name__ == "__main__":
    unittest.main()
