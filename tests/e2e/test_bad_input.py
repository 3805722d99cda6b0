#!/usr/bin/python3
"""Bad input files and bad output paths: exit codes of DESIGN.md, one error line naming the
file, no partial output, the input never touched."""

import os
import resource
import signal
import stat
import struct
import subprocess
import time
import zipfile

import e2e_common as e2e

GOOD_MODEL = "conv_bn_relu_2d"
GOOD_INPUT = "2x3x32x32"
CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz", "corpus", "model")


class BadModelFiles(e2e.ToolTestCase):
    """Every bad model file for inspect, optimize, verify and bench."""

    def _check_untouched(self, path: str, digest: str):
        self.assertTrue(os.path.exists(path), f"{path} was removed")
        self.assertEqual(e2e.sha256(path), digest, f"{path} was modified")

    def _inspect(self, name: str):
        path = self.copy_fixture(name)
        digest = e2e.sha256(path)
        result = self.run_tool("inspect", path, "--json")
        self.assert_error(result, e2e.EXIT_BAD_INPUT, name)
        self.assertEqual(result.stdout.strip(), "", "inspect printed output for a bad file")
        self._check_untouched(path, digest)

    def _optimize(self, name: str):
        path = self.copy_fixture(name)
        digest = e2e.sha256(path)
        out = self.path("out.pt")
        report = self.path("report.json")
        result = self.run_tool("optimize", path, out, "--report", report)
        self.assert_error(result, e2e.EXIT_BAD_INPUT, name)
        self.assertFalse(os.path.exists(out), "OUT created for a bad input")
        self._check_untouched(path, digest)
        self.assert_no_stray_files(self.tmp, [name, "report.json"])

    def _verify(self, name: str):
        good = self.copy_model(GOOD_MODEL)
        path = self.copy_fixture(name)
        for args in ((path, good), (good, path)):
            with self.subTest(order=os.path.basename(args[0])):
                result = self.run_tool("verify", *args, "--input", GOOD_INPUT)
                self.assert_error(result, e2e.EXIT_BAD_INPUT, name)

    def _bench(self, name: str):
        path = self.copy_fixture(name)
        result = self.run_tool("bench", path, "--input", GOOD_INPUT, "--iterations", "1")
        self.assert_error(result, e2e.EXIT_BAD_INPUT, name)

    # A torch.save'd tensor is a valid zip, but not TorchScript.
    def test_inspect_tensor_file(self):
        self._inspect("input.pt")

    def test_optimize_tensor_file(self):
        self._optimize("input.pt")

    # Damaged code records that made libtorch's loader crash (found by fuzz_model under the
    # sanitizers): rejected before libtorch reads them, by the records' CRC-32, exit 3 naming
    # the damaged record.
    def test_damaged_code_records(self):
        path = os.path.join(CORPUS, "loader_crash_damaged_code.pt")
        for cmd in (["inspect", path], ["optimize", path, self.path("out.pt")]):
            result = self.run_tool(*cmd)
            self.assert_error(result, e2e.EXIT_BAD_INPUT, "loader_crash_damaged_code.pt",
                              "record 'archive/code/__torch__/torch/nn/modules/conv/___torch_mangle_4.py' "
                              "does not match its CRC-32")
            self.assertFalse(os.path.exists(self.path("out.pt")))

    # One changed byte in a tensor's record: libtorch would load it (weights silently wrong).
    def test_damaged_tensor_record(self):
        path = self.copy_model(GOOD_MODEL)
        with zipfile.ZipFile(path) as z:
            info = next(i for i in z.infolist() if i.filename.endswith("/data/0"))
        with open(path, "r+b") as f:
            f.seek(info.header_offset + 26)
            name_len, extra_len = struct.unpack("<HH", f.read(4))
            f.seek(info.header_offset + 30 + name_len + extra_len)
            byte = f.read(1)
            f.seek(-1, os.SEEK_CUR)
            f.write(bytes([byte[0] ^ 0x10]))
        digest = e2e.sha256(path)
        out = self.path("out.pt")
        result = self.run_tool("optimize", path, out)
        self.assert_error(result, e2e.EXIT_BAD_INPUT, "record '" + info.filename + "' does not match its CRC-32")
        self.assertFalse(os.path.exists(out))
        self.assertEqual(e2e.sha256(path), digest)

    # A damaged pickle length (a string of 4 GB; the archive's CRC-32s recomputed, so the zip
    # is whole): under an address-space limit the request fails for certain, and the failure is
    # exit 3 naming memory. huge_pickle_length_28g.pt (found by fuzz_model) is a damaged zip.
    def test_damaged_length_asking_for_too_much_memory(self):
        for name, expected in (("huge_string_length_valid_crc.pt", "more memory"),
                               ("huge_pickle_length_28g.pt", "is a damaged TorchScript archive")):
            with self.subTest(name=name):
                path = os.path.join(CORPUS, name)
                digest = e2e.sha256(path)

                def limit_address_space():
                    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

                argv = [e2e.TOOL, "optimize", path, self.path("out.pt")]
                proc = subprocess.run(argv, cwd=self.tmp, capture_output=True, text=True, timeout=e2e.RUN_TIMEOUT,
                                      stdin=subprocess.DEVNULL, preexec_fn=limit_address_space)
                result = e2e.Result(argv, proc)
                self.assert_error(result, e2e.EXIT_BAD_INPUT, name, expected)
                self.assertFalse(os.path.exists(self.path("out.pt")))
                self.assertEqual(e2e.sha256(path), digest)

    def test_inspect_missing(self):
        result = self.run_tool("inspect", self.path("no_such_model.pt"))
        self.assert_error(result, e2e.EXIT_BAD_INPUT, "no_such_model.pt")

    def test_optimize_missing(self):
        out = self.path("out.pt")
        result = self.run_tool("optimize", self.path("no_such_model.pt"), out)
        self.assert_error(result, e2e.EXIT_BAD_INPUT, "no_such_model.pt")
        self.assertFalse(os.path.exists(out))
        self.assert_no_stray_files(self.tmp, [])

    def test_verify_missing(self):
        good = self.copy_model(GOOD_MODEL)
        result = self.run_tool("verify", good, self.path("no_such_model.pt"),
                               "--input", GOOD_INPUT)
        self.assert_error(result, e2e.EXIT_BAD_INPUT, "no_such_model.pt")

    def test_bench_missing(self):
        result = self.run_tool("bench", self.path("no_such_model.pt"),
                               "--input", GOOD_INPUT, "--iterations", "1")
        self.assert_error(result, e2e.EXIT_BAD_INPUT, "no_such_model.pt")

    def test_unreadable_model(self):
        path = self.copy_model(GOOD_MODEL)
        os.chmod(path, 0)
        if os.access(path, os.R_OK):
            self.skipTest("running as root: chmod 0 does not stop this process from reading")
        result = self.run_tool("inspect", path)
        self.assert_error(result, e2e.EXIT_BAD_INPUT, os.path.basename(path))


e2e.add_per_model_tests(BadModelFiles, e2e.BAD_MODELS, "_inspect", "test_inspect_")
e2e.add_per_model_tests(BadModelFiles, e2e.BAD_MODELS, "_optimize", "test_optimize_")
e2e.add_per_model_tests(BadModelFiles, ["empty.pt", "truncated.pt", "pickled_module.pt"],
                        "_verify", "test_verify_")
e2e.add_per_model_tests(BadModelFiles, ["dir.pt", "not_torchscript.zip"], "_bench",
                        "test_bench_")


class BadTensorFiles(e2e.ToolTestCase):
    """SPEC files that are missing or corrupt are bad input (exit 3) naming the file."""

    def _spec(self, name: str):
        model = self.copy_model(GOOD_MODEL)
        path = self.copy_fixture(name)
        with self.subTest(command="verify"):
            result = self.run_tool("verify", model, model, "--input", path)
            self.assert_error(result, e2e.EXIT_BAD_INPUT, name)
        with self.subTest(command="bench"):
            result = self.run_tool("bench", model, "--input", path, "--iterations", "1")
            self.assert_error(result, e2e.EXIT_BAD_INPUT, name)
        with self.subTest(command="optimize"):
            out = self.path("out.pt")
            result = self.run_tool("optimize", model, out, "--sample-input", path)
            self.assert_error(result, e2e.EXIT_BAD_INPUT, name)
            self.assertFalse(os.path.exists(out))

    def test_missing_spec_file(self):
        model = self.copy_model(GOOD_MODEL)
        result = self.run_tool("verify", model, model, "--input", self.path("absent.npy"))
        self.assert_error(result, e2e.EXIT_BAD_INPUT, "absent.npy")

    def test_spec_is_model_file(self):
        model = self.copy_model(GOOD_MODEL)
        other = self.copy_model("linear_bn")
        result = self.run_tool("verify", model, model, "--input", other)
        self.assert_error(result, e2e.EXIT_BAD_INPUT, "linear_bn.pt")


e2e.add_per_model_tests(BadTensorFiles, e2e.BAD_TENSORS, "_spec", "test_spec_")


class WrongInputs(e2e.ToolTestCase):
    """Inputs the model rejects: the model's error relayed on one readable line."""

    def _assert_model_error(self, result):
        self.assertNotEqual(result.code, e2e.EXIT_OK, result.describe())
        self.assertNotEqual(result.code, e2e.EXIT_INTERNAL,
                            f"model error reported as internal\n{result.describe()}")
        self.assert_error(result, (e2e.EXIT_BAD_INPUT, e2e.EXIT_UNSUPPORTED))

    def test_verify_wrong_rank(self):
        model = self.copy_model(GOOD_MODEL)
        self._assert_model_error(self.run_tool("verify", model, model, "--input", "2x3x32"))

    def test_verify_wrong_channels(self):
        model = self.copy_model(GOOD_MODEL)
        self._assert_model_error(self.run_tool("verify", model, model, "--input", "2x5x32x32"))

    def test_verify_too_few_inputs(self):
        model = self.copy_model("two_in_two_out")
        self._assert_model_error(self.run_tool("verify", model, model, "--input", "2x3x16x16"))

    def test_verify_wrong_dtype(self):
        model = self.copy_model("tiny_transformer")
        self._assert_model_error(self.run_tool("verify", model, model, "--input", "2x16"))

    def test_bench_wrong_rank(self):
        model = self.copy_model(GOOD_MODEL)
        self._assert_model_error(self.run_tool("bench", model, "--input", "2x3x32",
                                               "--iterations", "1"))

    def test_optimize_sample_input_wrong_rank(self):
        model = self.copy_model(GOOD_MODEL)
        out = self.path("out.pt")
        self._assert_model_error(self.run_tool("optimize", model, out,
                                               "--sample-input", "2x3x32"))
        self.assertFalse(os.path.exists(out))


class BadOutputPaths(e2e.ToolTestCase):
    def setUp(self):
        super().setUp()
        self.model = self.copy_model(GOOD_MODEL)
        self.digest = e2e.sha256(self.model)

    def tearDown(self):
        self.assertEqual(e2e.sha256(self.model), self.digest, "IN was modified")

    def test_out_in_missing_directory(self):
        out = self.path("missing_dir/out.pt")
        result = self.run_tool("optimize", self.model, out)
        self.assert_error(result, e2e.EXIT_USAGE, "missing_dir")
        self.assertFalse(os.path.exists(self.path("missing_dir")))

    def test_out_equals_in(self):
        result = self.run_tool("optimize", self.model, self.model)
        self.assert_error(result, e2e.EXIT_USAGE, os.path.basename(self.model))
        self.assert_no_stray_files(self.tmp, [os.path.basename(self.model)])

    def test_out_equals_in_other_spelling(self):
        name = os.path.basename(self.model)
        result = self.run_tool("optimize", name, f"./{name}")
        self.assert_error(result, e2e.EXIT_USAGE, name)
        self.assert_no_stray_files(self.tmp, [name])

    def test_out_is_directory(self):
        os.mkdir(self.path("outdir.pt"))
        result = self.run_tool("optimize", self.model, self.path("outdir.pt"))
        self.assert_error(result, e2e.EXIT_USAGE, "outdir.pt")
        self.assertTrue(os.path.isdir(self.path("outdir.pt")))
        self.assertEqual(os.listdir(self.path("outdir.pt")), [])

    def test_unwritable_out_directory(self):
        locked = self.path("locked")
        os.mkdir(locked)
        os.chmod(locked, stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP
                 | stat.S_IROTH | stat.S_IXOTH)  # 0555
        out = os.path.join(locked, "out.pt")
        result = self.run_tool("optimize", self.model, out)
        if os.geteuid() == 0 and result.code == e2e.EXIT_OK:
            self.skipTest("running as root: a 0555 directory does not block writes, "
                          "so there is no unwritable OUT to test")
        self.assert_error(result, e2e.EXIT_USAGE, "locked")
        self.assertEqual(os.listdir(locked), [], "files left in the unwritable directory")

    def test_unwritable_out_read_only_filesystem(self):
        # procfs refuses new files even to root, unlike a 0555 directory.
        if not os.path.isdir("/proc/self"):
            self.skipTest("/proc is not mounted")
        out = "/proc/ipex-tool-e2e-out.pt"
        result = self.run_tool("optimize", self.model, out)
        self.assert_error(result, e2e.EXIT_USAGE, "/proc")
        self.assertFalse(os.path.exists(out))

    def test_unwritable_report(self):
        out = self.path("out.pt")
        result = self.run_tool("optimize", self.model, out, "--report",
                               self.path("missing_dir/report.json"))
        self.assert_error(result, e2e.EXIT_USAGE, "missing_dir")
        self.assertFalse(os.path.exists(out), "OUT written although the report cannot be")

    def test_report_naming_the_output(self):
        out = self.path("out.pt")
        result = self.run_tool("optimize", self.model, out, "--report",
                               os.path.join(self.tmp, ".", "out.pt"))
        self.assert_error(result, e2e.EXIT_USAGE, "--report")
        self.assertFalse(os.path.exists(out))


class Interrupted(e2e.ToolTestCase):
    def test_interrupted_optimize_leaves_nothing(self):
        """SIGINT/SIGTERM at various points: either a complete OUT or none, never a
        temporary file left behind, IN untouched."""
        src = self.copy_model("mobilenet_v2")
        digest = e2e.sha256(src)
        out = self.path("out.pt")
        for sig, delay in ((signal.SIGINT, 0.3), (signal.SIGTERM, 0.8), (signal.SIGINT, 1.3),
                           (signal.SIGTERM, 1.8)):
            with self.subTest(signal=sig.name, delay=delay):
                if os.path.exists(out):
                    os.remove(out)
                proc = subprocess.Popen([e2e.TOOL, "optimize", src, out, "--quiet"],
                                        cwd=self.tmp, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, text=True)
                time.sleep(delay)
                proc.send_signal(sig)
                _, stderr = proc.communicate(timeout=e2e.RUN_TIMEOUT)
                if proc.returncode == 0 or os.path.exists(out):
                    # The signal came after the rename (or the run had finished): OUT must
                    # then be complete. Before the rename, OUT must not exist at all.
                    self.inspect(out)
                    expected = [os.path.basename(src), "out.pt"]
                else:
                    expected = [os.path.basename(src)]
                self.assert_no_stray_files(self.tmp, expected)
                self.assertEqual(e2e.sha256(src), digest)


if __name__ == "__main__":
    e2e.main()
