"""Helpers for the ipex-launch end-to-end tests: run the real binary, parse its output."""
import json
import os
import re
import subprocess
import tempfile
import unittest

LAUNCH = os.environ.get("IPEX_LAUNCH", "ipex-launch")
MATMUL = os.environ.get("IPEX_LAUNCH_BF16_MATMUL", "")
DATA = os.environ.get("IPEX_LAUNCH_TEST_DATA", os.path.join(os.path.dirname(__file__), "data"))
PYTHON = "/usr/bin/python3"


class Result:
    def __init__(self, proc):
        self.code = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr

    def json(self):
        return json.loads(self.out)

    def __repr__(self):
        return f"exit {self.code}\n--- stdout\n{self.out}\n--- stderr\n{self.err}"


def run(*args, env=None, timeout=120, cwd=None):
    """Runs ipex-launch with args; env entries are added to (or, as None, removed from) ours."""
    full_env = dict(os.environ)
    for key, value in (env or {}).items():
        if value is None:
            full_env.pop(key, None)
        else:
            full_env[key] = value
    proc = subprocess.run([LAUNCH, *args], capture_output=True, text=True, env=full_env,
                          timeout=timeout, cwd=cwd)
    return Result(proc)


def online_cpus():
    return sorted(os.sched_getaffinity(0))


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def prefixed_lines(text, index):
    """Console lines of one instance ("[i] ..."), without the prefix."""
    prefix = f"[{index}] "
    return [line[len(prefix):] for line in text.splitlines() if line.startswith(prefix)]


def parse_list(text):
    """'0-3,8' -> [0, 1, 2, 3, 8]"""
    out = []
    for part in text.strip().split(","):
        if "-" in part:
            lo, hi = part.split("-")
            out.extend(range(int(lo), int(hi) + 1))
        elif part:
            out.append(int(part))
    return out


class LaunchTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="ipex-launch-e2e-")
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def assertExit(self, result, code):
        self.assertEqual(result.code, code, repr(result))

    def assertError(self, result, code, *mentions):
        """Exit code `code`, one error line on stderr naming every item of `mentions`."""
        self.assertExit(result, code)
        self.assertEqual(result.out, "", repr(result))
        errors = [l for l in result.err.splitlines() if l.startswith("ipex-launch: error: ")]
        self.assertEqual(len(errors), 1, repr(result))
        for m in mentions:
            self.assertIn(m, errors[0])


def summary_rows(stderr):
    """Rows of the summary table as dicts keyed by column name."""
    lines = stderr.splitlines()
    try:
        start = lines.index("ipex-launch summary:")
    except ValueError:
        return []
    header = lines[start + 1]
    names = re.findall(r"\S+(?: \S+)?", header.strip())
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("  ") or not line.strip():
            break
        cells = re.split(r"\s{2,}", line.strip())
        rows.append(dict(zip(names, cells)))
    return rows
