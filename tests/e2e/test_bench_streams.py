"""bench --streams: throughput mode, one stream per share of the process's CPUs. The report
counts every stream's requests, each stream's thread stayed on its own CPUs with a team of
their number (seen from inside it), and misuse exits 2. Times are not judged here."""

import os

import e2e_common as e2e

CPUS = sorted(os.sched_getaffinity(0))
MODEL = "bottleneck_sum"


class BenchStreams(e2e.ToolTestCase):
    def setUp(self):
        super().setUp()
        self.model = self.copy_model(MODEL)
        self.input = self.copy_input(MODEL)

    def test_streams_split_the_cpus(self):
        streams = min(2, len(CPUS))
        out = self.tool_json("bench", self.model, "--input", self.input, "--streams", streams, "--iterations", 4,
                             "--warmup", 1, "--json", "-")
        self.assertEqual(out["mode"], "throughput")
        self.assertEqual(out["streams"], streams)
        self.assertEqual(out["requests"], [4] * streams)
        self.assertEqual(out["samples"], 4 * streams * out["batch"])
        self.assertEqual(out["latency_ms"]["samples"], 4 * streams)
        self.assertGreater(out["throughput_per_s"], 0)
        cpus = [c for text in out["stream_cpus"] for c in e2e_cpus(text)]
        self.assertEqual(cpus, CPUS, "the streams' pools cover the process's CPUs once, in order")
        for pool, seen in zip(out["stream_cpus"], out["stream_threads"]):
            self.assertEqual(seen["cpus"], pool)
            self.assertEqual(seen["omp_threads"], len(e2e_cpus(pool)))

    def test_duration_and_text(self):
        r = self.tool("bench", self.model, "--input", self.input, "--streams", 1, "--duration", 0.2, "--warmup", 0)
        self.assertIn("samples/s", r.stdout)
        self.assertIn("1 streams", r.stdout)

    def test_misuse_is_exit_2(self):
        self.assert_error(self.run_tool("bench", self.model, "--input", self.input, "--streams", len(CPUS) + 1),
                          e2e.EXIT_USAGE, f"{len(CPUS) + 1} streams on {len(CPUS)} CPUs")
        self.assert_error(self.run_tool("bench", self.model, "--input", self.input, "--streams", 0), e2e.EXIT_USAGE,
                          "--streams")
        for other in (["--baseline", "stock"], ["--profile"], ["--threads", "1"]):
            r = self.run_tool("bench", self.model, "--input", self.input, "--streams", 1, *other)
            self.assert_error(r, e2e.EXIT_USAGE, other[0])


def e2e_cpus(text):
    cpus = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


if __name__ == "__main__":
    e2e.main()
