"""ipex_tool.cpu.runtime: CPU pools, pin, Task and MultiStreamModule. Outputs equal the model's
own (the batch split across streams and concatenated back); every stream runs on its own CPUs
with an OpenMP team of its size, seen from inside the stream (sched_getaffinity,
/proc/thread-self/status, torch.get_num_threads). On this 2-CPU host: 2 streams of 1 CPU."""

import os
import warnings

import torch

from py_common import TestCase, ipex, main
from ipex_tool.cpu import runtime

CPUS = sorted(os.sched_getaffinity(0))


def allowed_list() -> str:
    with open("/proc/thread-self/status") as f:
        for line in f:
            if line.startswith("Cpus_allowed_list:"):
                return line.split()[1]
    return ""


def where_am_i():
    """What the calling thread runs on, as the kernel and ATen see it."""
    return {"affinity": sorted(os.sched_getaffinity(0)), "status": allowed_list(), "threads": torch.get_num_threads()}


class Probe(torch.nn.Module):
    """Runs a TorchScript model and reports where it ran."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x), where_am_i()


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        y = torch.relu(self.conv(x)).mean((2, 3))
        return self.fc(y), y


def traced():
    model = Net().eval()
    return torch.jit.freeze(torch.jit.trace(model, torch.randn(2, 3, 8, 8)))


class Pools(TestCase):
    def test_pools(self):
        self.assertEqual(runtime.CPUPool().core_ids, CPUS)
        self.assertEqual(runtime.CPUPool(range(len(CPUS))).core_ids, list(range(len(CPUS))))
        if os.path.exists("/sys/devices/system/node/node0"):
            self.assertEqual(runtime.CPUPool(node_id=0).core_ids, runtime.get_core_list_of_node_id(0))
        with self.assertRaisesRegex(ValueError, "CPU 1000 is not one this process may use"):
            runtime.CPUPool([CPUS[0], 1000])
        with self.assertRaisesRegex(ValueError, "NUMA node 77 does not exist"):
            runtime.CPUPool(node_id=77)
        with self.assertRaisesRegex(ValueError, "at least one CPU"):
            runtime.CPUPool([])
        with self.assertRaises(TypeError):
            runtime.CPUPool(["0"])

    def test_pin_restores(self):
        before = where_am_i()
        with runtime.pin(runtime.CPUPool([CPUS[-1]])):
            inside = where_am_i()
        self.assertEqual(inside, {"affinity": [CPUS[-1]], "status": str(CPUS[-1]), "threads": 1})
        self.assertEqual(where_am_i(), before)

        @runtime.pin(runtime.CPUPool([CPUS[0]]))
        def pinned():
            return where_am_i()["affinity"]

        self.assertEqual(pinned(), [CPUS[0]])
        self.assertEqual(where_am_i(), before)


class Tasks(TestCase):
    def test_task_runs_on_its_pool(self):
        model = traced()
        x = torch.randn(3, 3, 8, 8)
        task = runtime.Task(Probe(model), runtime.CPUPool([CPUS[-1]]))
        future = task(x)
        (out, _), info = future.get()
        self.assertTrue(torch.equal(out, model(x)[0]))
        self.assertEqual(info, {"affinity": [CPUS[-1]], "status": str(CPUS[-1]), "threads": 1})
        (out2, _), _ = task.run_sync(x)
        self.assertTrue(torch.equal(out2, out))
        # the caller's thread is untouched
        self.assertEqual(sorted(os.sched_getaffinity(0)), CPUS)

    def test_task_team_has_the_pool_size(self):
        task = runtime.Task(lambda: where_am_i()["threads"], runtime.CPUPool(CPUS))
        self.assertEqual(task().get(), len(CPUS))

    def test_errors_arrive_through_the_future(self):
        def broken(x):
            raise KeyError("no such input")

        future = runtime.Task(broken, runtime.CPUPool([CPUS[0]]))(1)
        with self.assertRaisesRegex(KeyError, "no such input"):
            future.get()
        with self.assertRaises(TypeError):
            runtime.Task(traced(), "0-1")


class MultiStream(TestCase):
    def setUp(self):
        super().setUp()
        self.model = traced()
        self.pool = runtime.CPUPool(CPUS)

    def test_outputs_equal_the_model(self):
        streams = min(2, len(CPUS))
        ms = runtime.MultiStreamModule(self.model, num_streams=streams, cpu_pool=self.pool,
                                       output_concat_hint=runtime.MultiStreamModuleHint((0, 0)))
        self.assertEqual(ms.get_stream_number(), streams)
        for batch in (5, 4, 1):  # uneven, even, fewer samples than streams
            x = torch.randn(batch, 3, 8, 8)
            with torch.no_grad():
                got, want = ms(x), self.model(x)
            self.assertIsInstance(got, tuple)
            for g, w in zip(got, want):
                self.assertEqual(g.shape, w.shape)
                torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)

    def test_auto_and_raw_outputs(self):
        ms = runtime.MultiStreamModule(self.model, cpu_pool=self.pool, concat_output=False)
        self.assertEqual(ms.get_stream_number(), len(CPUS))
        x = torch.randn(2 * len(CPUS), 3, 8, 8)
        outs = ms(x)
        self.assertEqual(len(outs), len(CPUS))
        torch.testing.assert_close(torch.cat([o[0] for o in outs]), self.model(x)[0], rtol=1e-5, atol=1e-5)

    def test_each_stream_stays_on_its_cpus(self):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the probe is an eager wrapper (the GIL warning)
            ms = runtime.MultiStreamModule(Probe(self.model), num_streams=len(CPUS), cpu_pool=self.pool,
                                           concat_output=False)
        x = torch.randn(4 * len(CPUS), 3, 8, 8)
        for _ in range(3):
            seen = [info for _, info in ms(x)]
            self.assertEqual(seen, [{"affinity": [c], "status": str(c), "threads": 1} for c in CPUS])
        self.assertEqual(sorted(os.sched_getaffinity(0)), CPUS)

    def test_keyword_inputs_and_hints(self):
        class Add(torch.nn.Module):
            def forward(self, a, b, scale: float = 1.0):
                return {"sum": (a + b) * scale}

        model = torch.jit.script(Add())
        ms = runtime.MultiStreamModule(model, num_streams=len(CPUS), cpu_pool=self.pool,
                                       input_split_hint=runtime.MultiStreamModuleHint(0, b=0),
                                       output_concat_hint=runtime.MultiStreamModuleHint(sum=0))
        a, b = torch.randn(6, 3), torch.randn(6, 3)
        torch.testing.assert_close(ms(a, b=b)["sum"], a + b)

    def test_bad_use(self):
        with self.assertRaisesRegex(ValueError, "num_streams 'many'"):
            runtime.MultiStreamModule(self.model, num_streams="many", cpu_pool=self.pool)
        with self.assertRaises(TypeError):
            runtime.MultiStreamModule(self.model, cpu_pool=CPUS)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ms = runtime.MultiStreamModule(self.model, num_streams=len(CPUS) + 1, cpu_pool=self.pool)
            runtime.MultiStreamModule(Net().eval(), num_streams=1, cpu_pool=self.pool)
        self.assertEqual(ms.get_stream_number(), len(CPUS))
        texts = self.ipex_warnings(caught)
        self.assertTrue(any("streams on" in t for t in texts), texts)
        self.assertTrue(any("GIL" in t for t in texts), texts)
        with self.assertRaisesRegex(ValueError, "splits no input"):
            runtime.MultiStreamModule(self.model, num_streams=1, cpu_pool=self.pool,
                                      input_split_hint=runtime.MultiStreamModuleHint(None))(torch.randn(2, 3, 8, 8))


class ExampleNet1(torch.nn.Module):
    def __init__(self):
        super(ExampleNet1, self).__init__()
        self.conv = torch.nn.Conv2d(64, 128, (3, 3), stride=(2, 2), padding=(1, 1), bias=False)

    def forward(self, x):
        x1 = self.conv(x)
        y = torch.flatten(x1, start_dim=1)
        return y


class ExampleNet2(torch.nn.Module):
    def __init__(self):
        super(ExampleNet2, self).__init__()
        self.conv = torch.nn.Conv2d(64, 128, (3, 3), stride=(2, 2), padding=(1, 1), bias=False)
        self.conv2 = torch.nn.Conv2d(64, 128, (3, 3), stride=(2, 2), padding=(1, 1), bias=False)

    def forward(self, x1, x2):
        y1 = self.conv(x1)
        y2 = self.conv2(x2)
        y = torch.flatten(y1, start_dim=1)
        return y1, y


class PublishedExamples(TestCase):
    """IPEX's runtime extension tutorial, with only the import line changed (and the Task
    example's pools [0-3] and [4-7] cut to this host's CPUs)."""

    def setUp(self):
        super().setUp()
        model1 = ExampleNet1()
        model1.eval()
        self.x = torch.rand(16, 64, 3, 3)
        with torch.no_grad():
            traced_model1 = torch.jit.trace(model1, self.x)
            self.traced_model1 = torch.jit.freeze(traced_model1)
        model2 = ExampleNet2()
        model2.eval()
        self.x2 = torch.rand(16, 64, 3, 3)
        with torch.no_grad():
            traced_model2 = torch.jit.trace(model2, (self.x, self.x2))
            self.traced_model2 = torch.jit.freeze(traced_model2)

    def test_basic_usage(self):
        x, traced_model1 = self.x, self.traced_model1
        cpu_pool = ipex.cpu.runtime.CPUPool(node_id=0)
        multi_Stream_model = ipex.cpu.runtime.MultiStreamModule(traced_model1, num_streams=2, cpu_pool=cpu_pool)
        with torch.no_grad():
            y = multi_Stream_model(x)
            torch.testing.assert_close(y, traced_model1(x), rtol=1e-5, atol=1e-5)

    def test_auto(self):
        x, traced_model1 = self.x, self.traced_model1
        multi_Stream_model = ipex.cpu.runtime.MultiStreamModule(traced_model1)
        with torch.no_grad():
            y = multi_Stream_model(x)
            torch.testing.assert_close(y, traced_model1(x), rtol=1e-5, atol=1e-5)

    def test_structured_inputs_and_outputs(self):
        x, x2, traced_model2 = self.x, self.x2, self.traced_model2
        cpu_pool = ipex.cpu.runtime.CPUPool(node_id=0)
        input_hint = ipex.cpu.runtime.MultiStreamModuleHint(0, 0)
        output_hint = ipex.cpu.runtime.MultiStreamModuleHint((0, 0))
        multi_Stream_model = ipex.cpu.runtime.MultiStreamModule(traced_model2,
                                                                num_streams=2,
                                                                cpu_pool=cpu_pool,
                                                                input_split_hint=input_hint,
                                                                output_concat_hint=output_hint)
        with torch.no_grad():
            y = multi_Stream_model(x, x2)
            for got, want in zip(y, traced_model2(x, x2)):
                torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)

    def test_asynchronous_tasks(self):
        x, traced_model1 = self.x, self.traced_model1
        cpu_pool1 = ipex.cpu.runtime.CPUPool([CPUS[0]])
        cpu_pool2 = ipex.cpu.runtime.CPUPool([CPUS[-1]])
        task1 = ipex.cpu.runtime.Task(traced_model1, cpu_pool1)
        task2 = ipex.cpu.runtime.Task(traced_model1, cpu_pool2)
        y1_future = task1(x)
        y2_future = task2(x)
        y1 = y1_future.get()
        y2 = y2_future.get()
        with torch.no_grad():
            want = traced_model1(x)
        torch.testing.assert_close(y1, want, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(y2, want, rtol=1e-5, atol=1e-5)

    def test_pin(self):
        x, traced_model1 = self.x, self.traced_model1
        cpu_pool = ipex.cpu.runtime.CPUPool(node_id=0)
        with ipex.cpu.runtime.pin(cpu_pool):
            y_runtime = traced_model1(x)
        torch.testing.assert_close(y_runtime, traced_model1(x))

    def test_optimized_model_on_streams(self):
        x = self.x
        optimized = ipex.optimize(ExampleNet1().eval(), sample_input=x)
        with torch.no_grad():
            want = optimized(x)
            got = ipex.cpu.runtime.MultiStreamModule(optimized, num_streams=2)(x)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


class DefaultThreads(TestCase):
    """The import gives torch one thread per allowed physical core (the CLI's default) unless
    OMP_NUM_THREADS is set or the script chose more; counted here from sysfs independently."""

    def threads_after_import(self, env_threads=None, before=None):
        import subprocess
        import sys
        env = dict(os.environ)
        env.pop("OMP_NUM_THREADS", None)
        if env_threads is not None:
            env["OMP_NUM_THREADS"] = str(env_threads)
        pre = f"torch.set_num_threads({before}); " if before else ""
        code = f"import torch, torchvision; {pre}import ipex_tool; print(torch.get_num_threads())"
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        return int(out.stdout.split()[-1])

    def test_physical_cores_by_default(self):
        cores = set()
        for cpu in CPUS:
            with open(f"/sys/devices/system/cpu/cpu{cpu}/topology/core_id") as f:
                core = f.read()
            with open(f"/sys/devices/system/cpu/cpu{cpu}/topology/physical_package_id") as f:
                cores.add((f.read(), core))
        self.assertEqual(self.threads_after_import(), len(cores))

    def test_omp_num_threads_is_kept(self):
        self.assertEqual(self.threads_after_import(env_threads=1), 1)

    def test_a_larger_choice_is_kept(self):
        self.assertEqual(self.threads_after_import(before=len(CPUS) + 3), len(CPUS) + 3)


if __name__ == "__main__":
    main()
