#!/usr/bin/python3
"""Every subcommand through the error classes of DESIGN.md: usage (2), bad input file (3),
unsupported (4), a failed check (1), an output that cannot be written (2, one wording) and
an internal error (5), each with one `ipex-tool: error:` line naming the culprit and no
output file left behind. Also the crafted and damaged int8 models of the reliability work:
every damaged field of a saved int8 op is exit 3 on load, never a crash."""

import os
import shutil
import subprocess
import zipfile

import e2e_common as e2e

HERE = os.path.dirname(os.path.abspath(__file__))
CRAFT = os.path.join(os.path.dirname(HERE), "fixtures", "craft_state.py")
MODEL = "conv_bn_relu_2d"
INPUT = "2x3x32x32"
WOQ = os.path.join(e2e.FIXTURES, "woq")

# A model that breaks an ipex op's contract: a linear context fusing an add, called through
# the op that passes no second tensor. Nothing about its inputs is wrong: exit 5.
MISUSE = r"""
import sys, torch
torch.ops.load_library(sys.argv[1])
class Misuse(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ctx = torch.ops.ipex.linear_prepack(torch.randn(4, 32), None, "fp32", ["add"], [1.0, 0.0], 0)
    def forward(self, x):
        return torch.ops.ipex.linear(x, self.ctx)
class NoQuantizableOp(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0
torch.jit.save(torch.jit.script(Misuse()), sys.argv[2])
torch.jit.save(torch.jit.script(NoQuantizableOp()), sys.argv[3])
"""


class ToolFiles(e2e.ToolTestCase):
    """Makes the files the table needs in the test's directory."""

    def setUp(self):
        super().setUp()
        self.model = self.copy_model(MODEL)
        self.misuse, self.plain = self.path("misuse.pt"), self.path("plain.pt")
        script = self.path("make_models.py")  # scripting needs the source in a file
        with open(script, "w") as f:
            f.write(MISUSE)
        subprocess.run([e2e.PYTHON, script, e2e.OPS_LIBRARY, self.misuse, self.plain], check=True,
                       timeout=e2e.RUN_TIMEOUT)
        os.remove(script)

    def int8_model(self) -> str:
        """conv_bn_relu_2d calibrated on two random batches and quantized."""
        calib = self.path("calib")
        os.mkdir(calib)
        subprocess.run([e2e.PYTHON, "-c",
                        "import sys, torch\ntorch.manual_seed(0)\n"
                        "for i in range(2): torch.save(torch.randn(2, 3, 32, 32), f'{sys.argv[1]}/b{i}.pt')",
                        calib], check=True)
        qconfig, out = self.path("q.json"), self.path("int8.pt")
        self.tool("calibrate", self.model, "--data", calib, "--out", qconfig)
        self.tool("quantize", self.model, out, "--qconfig", qconfig)
        return out

    def crafted(self, src: str, name: str, *args: str) -> str:
        dst = self.path(name)
        subprocess.run([e2e.PYTHON, CRAFT, src, dst, *args], check=True, timeout=120)
        return dst

    def unknown_op_model(self) -> str:
        """The misuse model with its op renamed to one no library defines."""
        dst = self.path("unknown_op.pt")
        with zipfile.ZipFile(self.misuse) as zin, zipfile.ZipFile(dst, "w") as zout:
            for info in zin.infolist():
                data = zin.read(info.filename)
                if info.filename.endswith(".py"):
                    data = data.replace(b"ops.ipex.linear(", b"ops.nosuch.linear(")
                zout.writestr(info, data)
        return dst


class CraftedInt8Models(ToolFiles):
    """A damaged saved int8 op: exit 3 naming the field, from every command that loads it."""

    CASES = [
        ("stride_zero", ["--list", "ints", "--set", "9=0"], "stride value 0"),
        ("second_op_stride_zero", ["--index", "1", "--list", "ints", "--set", "10=0"], "stride value 0"),
        ("groups_zero", ["--list", "ints", "--set", "0=0"], "groups is 0"),
        ("groups_not_dividing", ["--list", "ints", "--set", "0=3"], "groups"),
        ("three_spatial_params", ["--list", "ints", "--items", "1,0,0,0,0,0,0,0,3,1,1,1,1,1,1,1,1,1"],
         "stride has 3 values"),
        ("weight_rank_mismatch", ["--string", "conv2d=conv1d"], "the weight is 4-D"),
        ("negative_scale", ["--list", "doubles", "--set", "0=-0.5"], "input scale"),
        ("nan_scale", ["--list", "doubles", "--set", "1=nan"], "output scale"),
        ("nan_weight_scale", ["--list", "weight_scales", "--set", "2=nan"], "weight scales[2]"),
        ("zero_point_out_of_range", ["--list", "ints", "--set", "1=300"], "zero point 300"),
        ("too_few_weight_scales", ["--list", "weight_scales", "--items", "0.01"], "weight scales"),
        ("bad_activation_dtype", ["--list", "dtypes", "--set", "0=5"], "activation dtype"),
    ]

    def test_every_damaged_field_is_bad_input(self):
        good = self.int8_model()
        # The good model runs: the failures below are the damage, not the model.
        self.tool("verify", self.model, good, "--input", INPUT, "--min-cosine", "0.9")
        for name, args, words in self.CASES:
            with self.subTest(case=name):
                bad = self.crafted(good, name + ".pt", *args)
                digest = e2e.sha256(bad)
                for command in (["inspect", bad], ["verify", self.model, bad, "--input", INPUT],
                                ["bench", bad, "--input", INPUT, "--iterations", "1"]):
                    result = self.run_tool(*command)
                    self.assert_error(result, e2e.EXIT_BAD_INPUT, name + ".pt", words)
                out = self.path(name + ".out.pt")
                result = self.run_tool("optimize", bad, out)
                self.assert_error(result, e2e.EXIT_BAD_INPUT, words)
                self.assertFalse(os.path.exists(out))
                self.assertEqual(e2e.sha256(bad), digest, "the input was modified")

    def test_a_valid_but_different_int8_model_fails_verify_only(self):
        good = self.int8_model()
        # Far larger weight scales: a well-formed model whose outputs are wrong.
        scales = ",".join(["1.0"] * 8)
        wrong = self.crafted(good, "wrong.pt", "--list", "weight_scales", "--items", scales)
        result = self.run_tool("verify", self.model, wrong, "--input", INPUT, "--min-cosine", "0.999")
        self.assert_error(result, e2e.EXIT_CHECK_FAILED)


class ErrorClassTable(ToolFiles):
    """(command line, exit code, words the one error line must hold, output that must not exist)."""

    def table(self):
        m, out = self.model, self.path("out.pt")
        q = self.path("q.json")
        gptq = os.path.join(WOQ, "gptq_v1_sym_g32")
        return [
            # usage: 2
            (["info", "--bogus"], e2e.EXIT_USAGE, ["--bogus"], None),
            (["inspect"], e2e.EXIT_USAGE, ["MODEL"], None),
            (["optimize", m, out, "--dtype", "fp8"], e2e.EXIT_USAGE, ["--dtype"], out),
            (["calibrate", m, "--data", INPUT], e2e.EXIT_USAGE, ["--out"], None),
            (["quantize", m, out], e2e.EXIT_USAGE, ["--qconfig"], out),
            (["import", "exl2", gptq, out], e2e.EXIT_USAGE, ["exl2"], out),
            (["bench", m, "--input", INPUT, "--iterations", "0"], e2e.EXIT_USAGE, ["--iterations"], None),
            (["verify", m, m, "--input", INPUT, "--min-cosine", "abc"], e2e.EXIT_USAGE, ["--min-cosine"], None),
            # bad input file: 3
            (["inspect", self.path("absent.pt")], e2e.EXIT_BAD_INPUT, ["absent.pt"], None),
            (["optimize", self.path("absent.pt"), out], e2e.EXIT_BAD_INPUT, ["absent.pt"], out),
            (["calibrate", m, "--data", self.path("absent"), "--out", q], e2e.EXIT_BAD_INPUT, ["absent"], q),
            (["quantize", m, out, "--qconfig", self.path("absent.json")], e2e.EXIT_BAD_INPUT, ["absent.json"],
             out),
            (["import", "auto", os.path.join(WOQ, "bad", "truncated"), out], e2e.EXIT_BAD_INPUT, ["truncated"],
             out),
            (["bench", self.path("absent.pt"), "--input", INPUT], e2e.EXIT_BAD_INPUT, ["absent.pt"], None),
            (["verify", m, m, "--input", "2x5x32x32"], e2e.EXIT_BAD_INPUT, ["rejected the inputs"], None),
            (["optimize", m, out, "--sample-input", "2x5x32x32"], e2e.EXIT_BAD_INPUT, ["rejected the inputs"], out),
            # unsupported: 4
            (["inspect", self.unknown_op_model()], e2e.EXIT_UNSUPPORTED, ["nosuch"], None),
            (["optimize", self.unknown_op_model(), out], e2e.EXIT_UNSUPPORTED, ["nosuch"], out),
            (["verify", m, self.unknown_op_model(), "--input", "2x32"], e2e.EXIT_UNSUPPORTED, ["nosuch"], None),
            (["bench", self.unknown_op_model(), "--input", "2x32"], e2e.EXIT_UNSUPPORTED, ["nosuch"], None),
            (["calibrate", self.plain, "--data", self.path("calib"), "--out", q], e2e.EXIT_UNSUPPORTED,
             ["quantizable"], q),
            (["import", "auto", os.path.join(WOQ, "bad", "unsupported_bits"), out], e2e.EXIT_UNSUPPORTED,
             ["bits"], out),
            # a failed check: 1
            (["verify", m, self.path("other.pt"), "--input", INPUT], e2e.EXIT_CHECK_FAILED, [], None),
            # internal: 5 (our op failed, not the model or its inputs)
            (["verify", self.misuse, self.misuse, "--input", "2x32"], e2e.EXIT_INTERNAL, ["internal"], None),
            (["bench", self.misuse, "--input", "2x32", "--iterations", "1"], e2e.EXIT_INTERNAL, ["internal"],
             None),
            (["optimize", self.misuse, out, "--sample-input", "2x32"], e2e.EXIT_INTERNAL, ["internal"], out),
        ]

    def test_every_subcommand_through_its_error_classes(self):
        os.mkdir(self.path("calib"))
        subprocess.run([e2e.PYTHON, "-c", "import sys, torch\ntorch.save(torch.randn(2, 3, 32, 32), sys.argv[1])",
                        self.path("calib/b0.pt")], check=True)
        # A model of the same interface with other weights: verify's tolerance fails.
        subprocess.run([e2e.PYTHON, "-c",
                        "import sys, torch\nm = torch.jit.load(sys.argv[1])\n"
                        "with torch.no_grad():\n    [p.mul_(-1.0) for p in m.parameters()]\n"
                        "torch.jit.save(m, sys.argv[2])", self.model, self.path("other.pt")], check=True)
        commands = set()
        for args, code, words, absent in self.table():
            commands.add(args[0])
            with self.subTest(args=" ".join(os.path.basename(a) for a in args)):
                result = self.run_tool(*args)
                self.assert_error(result, code, *words)
                if absent:
                    self.assertFalse(os.path.exists(absent), f"{absent} written on error")
        self.assertEqual(commands, {"info", "inspect", "optimize", "calibrate", "quantize", "import", "bench",
                                    "verify"})

    def test_bench_check_isa_not_met_is_1(self):
        info = self.tool_json("info", "--json")
        if info["features"]["amx_tile"]:
            self.skipTest("this CPU has AMX: --check-isa amx is met here")
        result = self.run_tool("bench", self.model, "--input", INPUT, "--iterations", "1", "--check-isa", "amx")
        self.assert_error(result, e2e.EXIT_CHECK_FAILED, "amx")


class FailedWrites(ToolFiles):
    """An output that cannot be written, whoever writes it: exit 2, "cannot write 'OUT': why",
    no partial file. A 16 KiB tmpfs makes every write fail with 'No space left on device'."""

    def setUp(self):
        super().setUp()
        self.full = self.path("full")
        os.mkdir(self.full)
        mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", self.full],
                               capture_output=True, text=True)
        if mount.returncode != 0:
            self.skipTest(f"cannot mount a small tmpfs here ({mount.stderr.strip()}); needs root")
        self.addCleanup(subprocess.run, ["umount", self.full], check=False)

    def test_every_writer_fails_the_same_way(self):
        os.mkdir(self.path("calib"))
        subprocess.run([e2e.PYTHON, "-c", "import sys, torch\ntorch.save(torch.randn(2, 3, 32, 32), sys.argv[1])",
                        self.path("calib/b0.pt")], check=True)
        qconfig = self.path("q.json")
        self.tool("calibrate", self.model, "--data", self.path("calib"), "--out", qconfig)
        # Fill the file system: every output then fails, however small.
        fd = os.open(os.path.join(self.full, "filler"), os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            while os.write(fd, b"\0" * 4096) > 0:
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        full = lambda name: os.path.join(self.full, name)  # noqa: E731
        cases = [
            ("model", ["optimize", self.model, full("out.pt")], full("out.pt")),
            ("report", ["optimize", self.model, self.path("ok.pt"), "--report", full("report.json")],
             full("report.json")),
            ("qconfig", ["calibrate", self.model, "--data", self.path("calib"), "--out", full("q.json")],
             full("q.json")),
            ("int8 model", ["quantize", self.model, full("int8.pt"), "--qconfig", qconfig], full("int8.pt")),
            ("checkpoint", ["import", "auto", os.path.join(WOQ, "gptq_v1_sym_g32"), full("w.safetensors")],
             full("w.safetensors")),
            ("bench json", ["bench", self.model, "--input", INPUT, "--iterations", "1", "--json",
                            full("bench.json")], full("bench.json")),
        ]
        for what, args, out in cases:
            with self.subTest(writer=what):
                result = self.run_tool(*args)
                self.assert_error(result, e2e.EXIT_USAGE, f"cannot write '{out}'", "No space left on device")
                self.assertFalse(os.path.exists(out), f"{what}: partial output")
                self.assertEqual(os.listdir(self.full), ["filler"], f"{what}: temporary files left")


if __name__ == "__main__":
    e2e.main()
