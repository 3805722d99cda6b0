#!/usr/bin/python3
"""Hostile files and streams, built by the test: JSON nested far past the depth limit where the
tool copies or walks it, a 5 GB sparse index, wrong JSON types in the ipex-woq metadata, failed
writes to standard output, and device nodes named as outputs. Each gives its documented exit
code and one error line naming the file, field or limit; nothing is written, no input changes,
no device is replaced, and memory stays bounded."""

import json
import os
import resource
import shutil
import stat
import struct
import subprocess

import e2e_common as e2e
from woq_files import WOQ_FIXTURES, woq_manifest

LLM = os.path.join(os.environ.get("IPEX_FIXTURES", ""), "llm")
with open(os.path.join(LLM, "llm.json")) as f:
    LLM_MODELS = json.load(f)["models"]
WOQ = woq_manifest()
DEEP = 100000  # levels: about 600 KB of {"a":...}, under every size limit


def nested(levels: int) -> str:
    return '{"a":' * levels + "1" + "}" * levels


def write_json_text(path: str, prefix_obj: dict, key: str, raw: str):
    """path <- prefix_obj with `key` set to the raw JSON text `raw` (too deep for json.dumps)."""
    text = json.dumps(prefix_obj)
    assert text.endswith("}")
    with open(path, "w") as f:
        f.write(text[:-1] + (", " if prefix_obj else "") + json.dumps(key) + ": " + raw + "}")


def rewrite_safetensors_metadata(path: str, edit):
    """Rewrites a safetensors file with edit(metadata dict of str -> str) applied."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    edit(header["__metadata__"])
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + raw[8 + n:])


def children_max_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0


class DeepJson(e2e.ToolTestCase):
    """100,000 levels of nesting where the code copies or walks the subtree: exit 3 naming the
    file and the depth limit, never a stack overflow."""

    def llama(self) -> str:
        dst = self.path("llama")
        shutil.copytree(LLM_MODELS["llama"]["dir"], dst)
        return dst

    def generate_with_deep_config_key(self, key: str) -> e2e.Result:
        model = self.llama()
        with open(os.path.join(model, "config.json")) as f:
            config = json.load(f)
        write_json_text(os.path.join(model, "config.json"), config, key, nested(DEEP))
        return self.run_tool("generate", model, "--prompt-ids", "1,2,3", "--max-new-tokens", "1")

    def test_quantization_config_in_config_json(self):
        r = self.generate_with_deep_config_key("quantization_config")
        self.assert_error(r, e2e.EXIT_BAD_INPUT, "config.json", "100001 levels deep", "at most 128")
        # import auto reads the same config.json for its quantization_config.
        src = self.path("gptq")
        shutil.copytree(os.path.join(WOQ_FIXTURES, "gptq_v1_sym_g32"), src)
        cfg_path = os.path.join(src, "config.json")
        base = {"architectures": ["LlamaForCausalLM"], "model_type": "llama"}
        write_json_text(cfg_path, base, "quantization_config", nested(DEEP))
        for name in ("quantize_config.json", "quant_config.json"):
            if os.path.exists(os.path.join(src, name)):
                os.remove(os.path.join(src, name))
        before = e2e.sha256(src)
        out = self.path("out.safetensors")
        r = self.run_tool("import", "auto", src, out)
        self.assert_error(r, e2e.EXIT_BAD_INPUT, "config.json", "levels")
        self.assertFalse(os.path.exists(out))
        self.assertEqual(e2e.sha256(src), before)

    def test_tokenizer_nodes(self):
        for node in ("normalizer", "pre_tokenizer", "post_processor", "decoder"):
            with self.subTest(node=node):
                model = self.llama()
                path = os.path.join(model, "tokenizer.json")
                with open(path) as f:
                    tok = json.load(f)
                tok.pop(node, None)
                write_json_text(path, tok, node, nested(DEEP))
                r = self.run_tool("generate", model, "--prompt", "hello", "--max-new-tokens", "1")
                self.assert_error(r, e2e.EXIT_BAD_INPUT, "tokenizer.json", "levels")
                shutil.rmtree(model)

    def test_unused_key_too(self):
        # The limit holds wherever the nesting is: one rule at parse time, not per field.
        r = self.generate_with_deep_config_key("unused")
        self.assert_error(r, e2e.EXIT_BAD_INPUT, "config.json", "levels")


class WoqMetadata(e2e.ToolTestCase):
    """The ipex-woq checkpoint's metadata, read by optimize --low-precision-checkpoint."""

    def setUp(self):
        super().setUp()
        dec = WOQ["decoder"]
        self.fp = self.path("fp.pt")
        shutil.copyfile(os.path.join(WOQ_FIXTURES, dec["fp"]), self.fp)
        src = os.path.join(WOQ_FIXTURES, dec["checkpoint"])
        ckpt = self.path("ckpt")
        (shutil.copytree if os.path.isdir(src) else shutil.copyfile)(src, ckpt)
        self.normalized = self.path("decoder.woq.safetensors")
        self.pristine = self.path("pristine.safetensors")
        self.tool("import", "auto", ckpt, self.pristine)

    def optimize_with(self, edit, *words):
        """One edit of a fresh copy of the imported checkpoint: exit 3 naming `words`."""
        shutil.copyfile(self.pristine, self.normalized)
        rewrite_safetensors_metadata(self.normalized, edit)
        before = e2e.sha256(self.normalized)
        out = self.path("out.pt")
        r = self.run_tool("optimize", self.fp, out, "--low-precision-checkpoint", self.normalized)
        self.assert_error(r, e2e.EXIT_BAD_INPUT, "decoder.woq.safetensors", *words)
        self.assertFalse(os.path.exists(out))
        self.assertEqual(e2e.sha256(self.normalized), before)

    def test_wrong_types(self):
        def set_field(field, value):
            def edit(meta):
                layers = json.loads(meta["layers"])
                layers[0][field] = value
                meta["layers"] = json.dumps(layers)
            return edit
        self.optimize_with(set_field("act_order", "yes"), "layers[0].act_order", "true or false")
        self.optimize_with(set_field("bias", "yes"), "bias", "true or false")
        self.optimize_with(set_field("bits", "4"), "bits", "integer")
        self.optimize_with(set_field("in_features", 1.5), "in_features", "integer")

    def test_deep_source(self):
        def edit(meta):
            meta["source"] = nested(DEEP)
        self.optimize_with(edit, "source", "levels")


class BoundedReads(e2e.ToolTestCase):
    def test_huge_index_is_refused_before_reading(self):
        src = self.path("gptq_sharded")
        shutil.copytree(os.path.join(WOQ_FIXTURES, "gptq_sharded"), src)
        index = os.path.join(src, "model.safetensors.index.json")
        with open(index, "r+b") as f:
            f.truncate(5 << 30)  # sparse: no disk, but 5 GiB to anyone who reads it
        out = self.path("out.safetensors")
        r = self.run_tool("import", "auto", src, out)
        self.assert_error(r, e2e.EXIT_BAD_INPUT, "model.safetensors.index.json", "5 GiB", "64 MiB")
        self.assertFalse(os.path.exists(out))
        self.assertLess(children_max_rss_mib(), 1024, "the index was read before its size was checked")


class CountOptions(e2e.ToolTestCase):
    """Counts outside their documented ranges are usage errors before anything runs (a thread
    count of 100000 once hung bench and crashed info --limits)."""

    def test_bench_and_info_ranges(self):
        model = self.copy_model("conv_bn_relu_2d")
        bench = ["bench", model, "--input", "1x3x8x8"]
        for flags, word in ((["--threads", "100000"], "--threads"), (["--threads", "0"], "--threads"),
                            (["--iterations", "0"], "--iterations"), (["--iterations", "20000000"], "--iterations"),
                            (["--warmup", "-1"], "--warmup"), (["--duration", "1e9"], "--duration")):
            with self.subTest(flags=flags):
                self.assert_error(self.run_tool(*bench, *flags, timeout=60), e2e.EXIT_USAGE, word)
        self.assert_error(self.run_tool("info", "--limits", "--threads", "100000", timeout=60), e2e.EXIT_USAGE,
                          "--threads")


class StandardOutput(e2e.ToolTestCase):
    """A failed write to stdout is exit 2 "cannot write standard output", never exit 0."""

    def run_redirected(self, args, stdout):
        argv = [e2e.TOOL] + [str(a) for a in args]
        proc = subprocess.run(argv, cwd=self.tmp, stdout=stdout, stderr=subprocess.PIPE, text=True,
                              timeout=e2e.RUN_TIMEOUT, stdin=subprocess.DEVNULL)
        return e2e.Result(argv, subprocess.CompletedProcess(argv, proc.returncode, "", proc.stderr))

    def run_stdout_closed(self, args):
        argv = [e2e.TOOL] + [str(a) for a in args]
        proc = subprocess.run(["/bin/sh", "-c", '"$@" >&-', "sh"] + argv, cwd=self.tmp, stderr=subprocess.PIPE,
                              text=True, timeout=e2e.RUN_TIMEOUT, stdin=subprocess.DEVNULL)
        return e2e.Result(argv, subprocess.CompletedProcess(argv, proc.returncode, "", proc.stderr))

    def commands(self):
        llama = LLM_MODELS["llama"]["dir"]
        text = self.path("text.txt")
        with open(text, "w") as f:
            f.write("the quick brown fox jumps over the lazy dog. " * 8)
        src = self.path("gptq")
        shutil.copytree(os.path.join(WOQ_FIXTURES, "gptq_v1_sym_g32"), src)
        return {
            "generate": ["generate", llama, "--prompt-ids", "1,2,3", "--max-new-tokens", "2", "--greedy"],
            "perplexity": ["perplexity", llama, "--text", text, "--context", "32"],
            "import": ["import", "auto", src, self.path("imported.safetensors")],
            "info": ["info"],
            "help": ["--help"],
        }

    def test_full_device(self):
        with open("/dev/full", "w") as full:
            for name, args in self.commands().items():
                with self.subTest(command=name):
                    r = self.run_redirected(args, full)
                    self.assert_error(r, e2e.EXIT_USAGE, "cannot write standard output")

    def test_closed(self):
        for name, args in self.commands().items():
            with self.subTest(command=name):
                r = self.run_stdout_closed(args)
                self.assert_error(r, e2e.EXIT_USAGE, "standard output", "closed")


class DeviceOutputs(e2e.ToolTestCase):
    """As root a device node named as an output is written in place, never replaced by a file."""

    def mknod(self, name: str, minor: int) -> str:
        path = self.path(name)
        try:
            os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
        except PermissionError as e:
            self.skipTest(f"mknod needs root (CAP_MKNOD): {e}")
        return path

    def assert_device(self, path: str):
        self.assertTrue(stat.S_ISCHR(os.lstat(path).st_mode), f"{path} is no longer a character device")

    def test_bench_llm_json(self):
        llama = LLM_MODELS["llama"]["dir"]
        args = ["bench", llama, "--llm", "--input-tokens", "4", "--output-tokens", "2", "--iterations", "1"]
        null = self.mknod("null", 3)
        self.tool(*args, "--json", null)
        self.assert_device(null)
        full = self.mknod("full", 7)
        self.assert_error(self.run_tool(*args, "--json", full), e2e.EXIT_USAGE, "cannot write", "full")
        self.assert_device(full)
        # /dev/stdout is the process's own stdout: the report arrives there.
        r = self.tool(*args, "--json", "/dev/stdout")
        self.assertGreater(json.loads(r.stdout)["tokens_per_second"], 0)
        self.assert_no_stray_files(self.tmp, ["null", "full"])

    def test_import_to_devices(self):
        src = self.path("gptq")
        shutil.copytree(os.path.join(WOQ_FIXTURES, "gptq_v1_sym_g32"), src)
        null = self.mknod("null", 3)
        self.tool("import", "auto", src, null)
        self.assert_device(null)
        full = self.mknod("full", 7)
        self.assert_error(self.run_tool("import", "auto", src, full), e2e.EXIT_USAGE, "cannot write")
        self.assert_device(full)
        # A directory is refused, and so is a socket.
        self.assert_error(self.run_tool("import", "auto", src, self.tmp), e2e.EXIT_USAGE, "directory")
        self.assert_no_stray_files(self.tmp, ["gptq", "null", "full"])


if __name__ == "__main__":
    e2e.main()
