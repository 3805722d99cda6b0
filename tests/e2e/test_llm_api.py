"""The LLM runtime as a library: install the build into a temporary prefix, build a small
program against it with find_package(ipex-tool) / ipex-tool::llm, and check that its greedy
ids equal the eager reference's."""

import json
import os
import subprocess

import e2e_common as e2e

BUILD = os.environ.get("IPEX_BUILD_DIR", "")
LLM = os.path.join(os.environ.get("IPEX_FIXTURES", ""), "llm")


class InstalledApiTest(e2e.ToolTestCase):
    def run_checked(self, *args, **kw):
        r = subprocess.run([str(a) for a in args], capture_output=True, text=True, **kw)
        self.assertEqual(r.returncode, 0, f"{' '.join(map(str, args))}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
        return r

    def test_program_built_against_the_installed_package(self):
        prefix = self.path("prefix")
        self.run_checked("cmake", "--install", BUILD, "--prefix", prefix)
        for f in ("include/ipex-tool/llm/model.h", "lib/cmake/ipex-tool/ipex-toolConfig.cmake"):
            self.assertTrue(os.path.exists(os.path.join(prefix, f)), f)
        app = self.path("app")
        src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "llm_api")
        self.run_checked("cmake", "-S", src, "-B", app, "-DCMAKE_BUILD_TYPE=Release",
                         f"-DCMAKE_PREFIX_PATH={prefix}")
        self.run_checked("cmake", "--build", app, "-j", "2")
        with open(os.path.join(LLM, "llm.json")) as f:
            m = json.load(f)["models"]["llama"]
        n = 8
        out = self.run_checked(os.path.join(app, "greedy"), m["dir"], n, ",".join(map(str, m["prompt"])))
        self.assertEqual([int(t) for t in out.stdout.strip().split(",")], m["greedy"][:n])


if __name__ == "__main__":
    e2e.main()
