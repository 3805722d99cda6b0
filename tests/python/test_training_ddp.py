"""Data-parallel training of a split-bf16 model under ipex-launch (issue 51): docs/examples/train_ddp.py
run as 2 ranks on this host and as 2 hosts x 2 ranks in two network namespaces (the launcher
tests' machinery, tests/launch/netns_hosts.py). After N fused steps every rank's bf16 tops and
int16 trails are bitwise identical, and equal to one process that computes each rank's gradient
on its slice and applies the rule ipex_tool.distributed documents:

    g = round_to_dtype((((fp32(g_0) + fp32(g_1)) + fp32(g_2)) + ...) / world)   (fp32 ops, rank order)

which is exact to reproduce because it fixes the order of every addition (the reference is
written here, not taken from the package). Bad use of data_parallel is an exception."""

import datetime
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import torch
import torch.distributed as dist

from py_common import TestCase, ipex, main
import ipex_tool.distributed
from ipex_tool.optim import combine_master

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EXAMPLE = os.path.join(ROOT, "docs", "examples", "train_ddp.py")
LAUNCH = os.environ.get("IPEX_LAUNCH", "")
PYTHON = "/usr/bin/python3"
sys.path.insert(0, os.path.join(ROOT, "tests", "launch"))
from netns_hosts import IFNAME, SUBNET, NetnsHosts, unavailable  # noqa: E402

STEPS = 6
GLOBAL_BATCH = 16


def load_example():
    spec = importlib.util.spec_from_file_location("train_ddp", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def launch_unavailable():
    if not LAUNCH or not os.path.exists(LAUNCH):
        return "IPEX_LAUNCH (the ipex-launch binary) is not set; run through ctest"
    if not shutil.which("mpirun.openmpi"):
        return "needs Open MPI (openmpi-bin) for multi-rank runs of ipex-launch"
    if len(os.sched_getaffinity(0)) < 2:
        return "needs two CPUs (one per rank)"
    return None


def reference(example, world, optimizer_name, seed=0):
    """One process: each rank's gradient on its slice, reduced by the documented rule, one fused
    step. The ranks run one thread each (ipex-launch gives each its own CPU); so does this."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = example.make_model(seed)
        model, opt = ipex.optimize(model, optimizer=example.make_optimizer(optimizer_name, model.parameters()),
                                   dtype=torch.bfloat16)
        params = dict(model.named_parameters())
        for step in range(STEPS):
            images, labels = example.global_batch(step, GLOBAL_BATCH, seed)
            per_rank = []
            for rank in range(world):
                opt.zero_grad(set_to_none=True)
                example.loss_of(model, example.shard(images, rank, world), example.shard(labels, rank, world)).backward()
                per_rank.append({name: p.grad.clone() for name, p in params.items()})
            for name, param in params.items():
                acc = per_rank[0][name].float().clone()
                for grads in per_rank[1:]:
                    acc = acc + grads[name].float()
                param.grad = (acc / world).to(param.dtype)
            opt.step()
        tops = {name: p.detach().clone() for name, p in params.items()}
        trails = {name: opt.state[p]["trail"].clone() for name, p in params.items() if "trail" in opt.state[p]}
        return tops, trails
    finally:
        torch.set_num_threads(threads)


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.view(torch.uint8), b.view(torch.uint8))


class DdpRuns(TestCase):
    def run_ranks(self, launcher_args, world, optimizer_name, prefix=(), env=None):
        out = os.path.join(self.tmp, f"out-{optimizer_name}")
        port = str(20000 + (os.getpid() * 7 + len(optimizer_name)) % 20000)
        cmd = [*prefix, LAUNCH, *launcher_args, "--master-port", port, "--", PYTHON, EXAMPLE, "--steps", str(STEPS),
               "--global-batch", str(GLOBAL_BATCH), "--optimizer", optimizer_name, "--save", out]
        # ipex-launch plans one thread per rank (one CPU each) as the reference computes, unless
        # OMP_NUM_THREADS is set (ctest sets it): aten's reductions (LayerNorm's weight gradient)
        # split by thread count, so the bits would follow it.
        environ = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env={**environ, **(env or {})})
        detail = f"{' '.join(cmd)}\nexit {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
        self.assertEqual(proc.returncode, 0, detail)
        ranks = [torch.load(os.path.join(out, f"rank{r}.pt")) for r in range(world)]
        for saved in ranks:
            self.assertEqual(saved["world"], world)
        return ranks, detail

    def check(self, ranks, world, optimizer_name):
        example = load_example()
        tops, trails = reference(example, world, optimizer_name)
        self.assertTrue(trails, "the model has split parameters")
        self.assertEqual(set(ranks[0]["trails"]), set(trails))
        initial = example.make_model(0)
        for rank, saved in enumerate(ranks):
            for name, top in saved["tops"].items():
                self.assertTrue(same_bits(top, ranks[0]["tops"][name]), f"rank {rank}: {name} differs from rank 0's")
                self.assertTrue(same_bits(top, tops[name]), f"rank {rank}: {name} differs from the reference")
            for name, trail in saved["trails"].items():
                self.assertEqual(trail.dtype, torch.int16)
                # model.state_dict() (DDP's module) saved the fp32 master of top and trail
                self.assertTrue(same_bits(saved["state_dict"][name], combine_master(saved["tops"][name], trail)), name)
                self.assertTrue(same_bits(trail, ranks[0]["trails"][name]), f"rank {rank}: trail of {name} differs")
                self.assertTrue(same_bits(trail, trails[name]), f"rank {rank}: trail of {name} differs from reference")
        # the run trained: the masters moved away from the initial weights
        moved = combine_master(ranks[0]["tops"]["fc1.weight"], ranks[0]["trails"]["fc1.weight"])
        self.assertFalse(torch.equal(moved, initial.fc1.weight.detach()))

    @unittest.skipIf(launch_unavailable(), launch_unavailable())
    def test_two_ranks_on_this_host(self):
        for optimizer_name in ("adamw", "lamb"):
            with self.subTest(optimizer=optimizer_name):
                ranks, _ = self.run_ranks(["--nnodes", "1", "--nprocs-per-node", "2"], 2, optimizer_name)
                self.check(ranks, 2, optimizer_name)

    @unittest.skipIf(launch_unavailable() or unavailable(), launch_unavailable() or unavailable())
    def test_two_hosts_two_ranks_each(self):
        hosts = NetnsHosts(self.tmp)
        self.addCleanup(hosts.close)
        hostfile = os.path.join(self.tmp, "hosts")
        with open(hostfile, "w") as f:
            f.write(f"{hosts.addresses[0]} slots=2\n{hosts.addresses[1]} slots=2\n")
        mpi = (f"--mca plm_rsh_agent {hosts.agent} --mca oob_tcp_if_include {SUBNET}.0/24 "
               f"--mca btl_tcp_if_include {SUBNET}.0/24")
        ranks, _ = self.run_ranks(["--nnodes", "2", "--nprocs-per-node", "2", "--hostfile", hostfile,
                                   "--extra-mpi-params", mpi], 4, "sgd", prefix=hosts.exec_prefix(0),
                                  env={"GLOO_SOCKET_IFNAME": IFNAME})
        self.check(ranks, 4, "sgd")


class BadUse(TestCase):
    @classmethod
    def setUpClass(cls):
        store = os.path.join(tempfile.mkdtemp(prefix="ipex-ddp-store-"), "store")
        dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1,
                                timeout=datetime.timedelta(seconds=30))

    @classmethod
    def tearDownClass(cls):
        dist.destroy_process_group()

    def test_refusals(self):
        example = load_example()
        model = example.make_model(0)
        plain = torch.optim.SGD(model.parameters(), lr=0.1)
        with self.assertRaisesRegex(ValueError, "pass the optimizer that ipex_tool.optimize"):
            ipex_tool.distributed.data_parallel(model, plain)
        model, opt = ipex.optimize(model, optimizer=plain, dtype=torch.bfloat16)
        with self.assertRaisesRegex(NotImplementedError, "keep deterministic=True"):
            ipex_tool.distributed.data_parallel(model, opt, deterministic=False)
        other = example.make_model(0)
        other, other_opt = ipex.optimize(other, optimizer=torch.optim.SGD(other.parameters(), lr=0.1),
                                         dtype=torch.bfloat16)
        with self.assertRaisesRegex(ValueError, "holds no trail for it"):
            ipex_tool.distributed.data_parallel(model, other_opt)
        bag = torch.nn.EmbeddingBag(10, 4, sparse=True)
        bag, bag_opt = ipex.optimize(bag, optimizer=torch.optim.SGD(bag.parameters(), lr=0.1))
        with self.assertRaisesRegex(NotImplementedError, "sparse gradients"):
            ipex_tool.distributed.data_parallel(bag, bag_opt)

    def test_one_rank_equals_local_training(self):
        """World size 1 through DDP and the hook: the same bits as training without DDP."""
        example = load_example()
        runs = []
        for wrap in (False, True):
            model = example.make_model(0)
            model, opt = ipex.optimize(model, optimizer=example.make_optimizer("sgd", model.parameters()),
                                       dtype=torch.bfloat16)
            net = ipex_tool.distributed.data_parallel(model, opt) if wrap else model
            for step in range(3):
                images, labels = example.global_batch(step, 8, 0)
                opt.zero_grad(set_to_none=True)
                example.loss_of(net, images, labels).backward()
                opt.step()
            runs.append({name: combine_master(p, opt.state[p]["trail"]) for name, p in model.named_parameters()
                         if "trail" in opt.state[p]})
            del net
        for name, master in runs[0].items():
            self.assertTrue(same_bits(master, runs[1][name]), name)


if __name__ == "__main__":
    main()
