#!/usr/bin/env python3
"""test_check_src.py - scripts/check-src finds each kind of violation.

usage: INFERD_SOURCE_ROOT=. [CC=cc] python3 tests/unit/scripts/test_check_src.py

Copies the tree's module folders into a temporary root, checks that the
clean copy passes (with the real allow-list), then adds one violation of
each kind to a fresh copy and checks that check-src reports it (rule and
file) and exits 1. The call-graph checks compile two tiny objects that
call each other ($CC, default cc; skipped without a compiler or nm).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

SRC = os.environ.get("INFERD_SOURCE_ROOT") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", "..", ".."))
CHECK = os.path.join(SRC, "scripts", "check-src")
ALLOW = os.path.join(SRC, "scripts", "check-src.allow")
MODULES = ["common", "kernels", "devices", "config", "engine", "server", "cli",
           "bench/harness"]


class CheckSrcTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="check-src-")
        self.root = os.path.join(self.tmp, "root")
        for m in MODULES:
            shutil.copytree(os.path.join(SRC, m), os.path.join(self.root, m),
                            ignore=shutil.ignore_patterns("*.md", "*.json", "*.proto",
                                                          "meson.build", "*.py"))

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_check(self, *args, allow=ALLOW):
        cmd = [sys.executable, CHECK, "--root", self.root]
        cmd += ["--allow", allow] if allow else ["--no-allow"]
        r = subprocess.run(cmd + list(args), capture_output=True, text=True)
        return r.returncode, r.stdout, r.stderr

    def path(self, rel):
        return os.path.join(self.root, rel)

    def append(self, rel, text):
        with open(self.path(rel), "a") as f:
            f.write(text)

    def write(self, rel, text):
        os.makedirs(os.path.dirname(self.path(rel)), exist_ok=True)
        with open(self.path(rel), "w") as f:
            f.write(text)

    def insert_include(self, rel, inc):
        """inc as the file's first line (it then sits on line 1)."""
        with open(self.path(rel)) as f:
            text = f.read()
        self.write(rel, f"#include {inc}\n" + text)

    def assert_reports(self, rule, rel, *args, line=None, allow=ALLOW):
        rc, out, err = self.run_check(*args, allow=allow)
        self.assertEqual(rc, 1, f"expected exit 1\n{out}{err}")
        want = f"{rel}:{line}: {rule}:" if line else None
        hits = [ln for ln in out.splitlines()
                if ln.startswith(rel + ":") and f": {rule}: " in ln]
        self.assertTrue(hits, f"no {rule} for {rel} in:\n{out}")
        if want:
            self.assertTrue(any(h.startswith(want) for h in hits), f"want {want}:\n{out}")
        bad = [ln for ln in out.splitlines() if not ln.startswith("    ") and ln not in hits]
        self.assertEqual(bad, [], "reported more than the violation added")
        return out

    # -- the clean copy --

    def test_clean_copy_passes(self):
        rc, out, err = self.run_check()
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(out, "")

    # -- includes --

    def test_upward_include(self):
        self.insert_include("kernels/kn_init.c", '"engine/eng.h"')
        self.assert_reports("include-layer", "kernels/kn_init.c", line=1)

    def test_config_includes_only_common(self):
        self.insert_include("config/cfg.c", '"devices/dev.h"')
        self.assert_reports("include-layer", "config/cfg.c", line=1)

    def test_engine_private_header_from_server(self):
        self.insert_include("server/srv_buf.c", '"engine/sched/eng_sched.h"')
        self.assert_reports("include-public", "server/srv_buf.c", line=1)

    def test_int_header_from_a_sibling_folder(self):
        # models/ may include tok/'s headers, but not its internal one
        self.insert_include("engine/models/eng_llm_fwd.c", '"engine/tok/eng_tok_int.h"')
        out = self.assert_reports("include-private", "engine/models/eng_llm_fwd.c", line=1)
        self.assertIn("engine/tok/eng_tok_int.h", out)

    def test_folder_includes_upwards(self):
        self.insert_include("engine/sched/eng_stats.c", '"engine/gen/eng_sample.h"')
        self.assert_reports("include-folder", "engine/sched/eng_stats.c", line=1)

    def test_unplaced_folder(self):
        self.write("engine/newthing/eng_new.c", '#include "engine/eng.h"\n')
        self.assert_reports("include-folder", "engine/newthing/eng_new.c", line=1)

    def test_library_header(self):
        self.insert_include("engine/audio/eng_audio.c", "<uv.h>")
        self.assert_reports("include-library", "engine/audio/eng_audio.c", line=1)

    def test_include_cycle(self):
        self.write("common/cyc_a.h", '#include "common/cyc_b.h"\n')
        self.write("common/cyc_b.h", "/* b */\n#include \"common/cyc_a.h\"\n")
        out = self.assert_reports("include-cycle", "common/cyc_a.h", line=1)
        self.assertIn("common/cyc_a.h -> common/cyc_b.h -> common/cyc_a.h", out)

    def test_commented_include_is_not_an_include(self):
        self.append("kernels/kn_init.c", '/* #include "engine/eng.h" */\n// #include "server/srv.h"\n')
        rc, out, err = self.run_check()
        self.assertEqual(rc, 0, out + err)

    def test_declared_in_a_lower_folder(self):
        # a sched/ header declares what gen/ defines: sched/ would call up
        self.append("engine/sched/eng_stats.h", "\nint eng__t_up(void);\n")
        self.append("engine/gen/eng_sample.c", "\nint eng__t_up(void)\n{\n\treturn 0;\n}\n")
        out = self.assert_reports("decl-folder", "engine/gen/eng_sample.c")
        self.assertIn("eng__t_up() is declared in engine/sched/eng_stats.h", out)

    def test_declared_at_the_top(self):
        # a module's top header may declare what any of its folders defines
        self.append("engine/eng_int.h", "\nint eng__t_top(void);\n")
        self.append("engine/gen/eng_sample.c", "\nint eng__t_top(void)\n{\n\treturn 0;\n}\n")
        rc, out, err = self.run_check()
        self.assertEqual(rc, 0, out + err)

    # -- banned functions --

    def test_banned_function(self):
        self.append("common/st.c", "\nvoid st__t(char *b)\n{\n\tsprintf(b, \"x\");\n}\n")
        out = self.assert_reports("banned", "common/st.c")
        self.assertIn("sprintf(): use snprintf", out)

    def test_raw_malloc(self):
        self.append("engine/audio/eng_audio.c",
                    "\nvoid *eng__t(void)\n{\n\treturn malloc(4);\n}\n")
        self.assert_reports("banned", "engine/audio/eng_audio.c")

    def test_not_calls(self):
        # comments, strings, members, a free() that says why, the allocator itself
        self.append("common/st.c",
                    "\n/* strcpy(a, b) */\nstruct st__o { void (*free)(void *); };\n"
                    "void st__t2(struct st__o *o, char *s)\n{\n"
                    "\to->free(s); /* atoi( */\n\tconst char *t = \"gets(x)\";\n"
                    "\t(void)t;\n\tfree(s); /* jansson's allocator */\n}\n")
        rc, out, err = self.run_check()
        self.assertEqual(rc, 0, out + err)

    # -- sizes --

    def func(self, name, body_lines):
        return f"\nint {name}(void)\n{{\n" + "\tst__n++;\n" * (body_lines - 2) + "}\n"

    def test_long_function(self):
        self.append("common/st.c", "\nstatic int st__n;\n" + self.func("st__long", 61)
                    + self.func("st__ok", 60))
        out = self.assert_reports("func-size", "common/st.c")
        self.assertIn("st__long() is 61 lines", out)
        self.assertNotIn("st__ok", out)

    def test_big_file(self):
        self.append("common/st.c", "\n" * 1000)
        self.assert_reports("file-size", "common/st.c", line=1001)

    # -- the allow-list --

    def test_allow_list(self):
        self.append("common/st.c", "\nvoid st__t(char *b)\n{\n\tsprintf(b, \"x\");\n}\n")
        allow = os.path.join(self.tmp, "allow")
        with open(ALLOW) as f:
            text = f.read()
        with open(allow, "w") as f:
            f.write(text + "banned common/st.c sprintf  # test\n"
                    "banned common/st.c strcat  # test: stale\n")
        rc, out, err = self.run_check(allow=allow)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("stale: banned common/st.c strcat", err)
        with open(allow, "w") as f:
            f.write("banned common/st.c sprintf\n")  # no reason
        rc, out, err = self.run_check(allow=allow)
        self.assertEqual(rc, 2, out + err)

    # -- the objects --

    def compile(self, sources):
        cc = os.environ.get("CC", "cc").split()
        if not shutil.which(cc[0]) or not shutil.which(os.environ.get("NM", "nm")):
            self.skipTest("no C compiler or nm")
        build = os.path.join(self.tmp, "build")
        os.makedirs(build, exist_ok=True)
        cmds = []
        for rel in sources:
            obj = rel.replace("/", "_") + ".o"
            subprocess.run(cc + ["-c", "-o", os.path.join(build, obj), self.path(rel)],
                           check=True)
            cmds.append({"directory": build, "file": self.path(rel), "output": obj})
        with open(os.path.join(build, "compile_commands.json"), "w") as f:
            json.dump(cmds, f)
        return build

    def test_call_cycle(self):
        self.write("common/cc_a.c", "int cc_b(int);\nint cc_a(int x) { return x ? cc_b(x - 1) : 0; }\n")
        self.write("common/cc_b.c", "int cc_a(int);\nint cc_b(int x) { return cc_a(x); }\n")
        self.write("common/cc_c.c", "int cc_a(int);\nint cc_c(int x) { return cc_a(x); }\n")
        build = self.compile(["common/cc_a.c", "common/cc_b.c", "common/cc_c.c"])
        out = self.assert_reports("call-cycle", "common/cc_a.c", "--build", build)
        self.assertIn("2 files of common/ call each other: common/cc_a.c common/cc_b.c", out)
        self.assertIn("common/cc_b.c -> common/cc_a.c: cc_a", out)
        # allowed by a line listing its files (and one more, to drop)
        rc, out, err = self.run_check("--build", build, "--suggest-allow")
        self.assertIn("call-cycle common/cc_a.c common/cc_b.c  # <reason it stays>", out)
        allow = os.path.join(self.tmp, "allow")
        with open(ALLOW) as f:
            text = f.read()
        with open(allow, "w") as f:
            f.write(text + "call-cycle common/cc_a.c common/cc_b.c common/cc_c.c  # test\n")
        rc, out, err = self.run_check("--build", build, allow=allow)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("shrink: no longer in a cycle: common/cc_c.c", err)
        # a file joining the cycle is not allowed by the shorter line
        self.write("common/cc_c.c", "int cc_a(int);\nint cc_c(int x) { return cc_a(x); }\n"
                   "int cc_c2(int x) { return x; }\n")
        self.write("common/cc_b.c", "int cc_a(int);\nint cc_c2(int);\n"
                   "int cc_b(int x) { return cc_a(x) + cc_c2(x); }\n")
        self.append("common/cc_c.c", "int cc_b(int);\nint cc_c3(int x) { return cc_b(x); }\n")
        build = self.compile(["common/cc_a.c", "common/cc_b.c", "common/cc_c.c"])
        with open(allow, "w") as f:
            f.write(text + "call-cycle common/cc_a.c common/cc_b.c  # test\n")
        self.assert_reports("call-cycle", "common/cc_a.c", "--build", build, allow=allow)
        # one way only: no cycle
        self.write("common/cc_b.c", "int cc_b(int x) { return x; }\n")
        build = self.compile(["common/cc_a.c", "common/cc_b.c", "common/cc_c.c"])
        rc, out, err = self.run_check("--build", build)
        self.assertEqual(rc, 0, out + err)

    def test_call_layer(self):
        self.write("kernels/kn_up.c", "int eng_up(void);\nint kn_up(void) { return eng_up(); }\n")
        self.write("engine/eng_up.c", "int eng_up(void) { return 1; }\n")
        build = self.compile(["kernels/kn_up.c", "engine/eng_up.c"])
        self.assert_reports("call-layer", "kernels/kn_up.c", "--build", build)


if __name__ == "__main__":
    unittest.main(verbosity=2)
