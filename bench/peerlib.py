"""peerlib: what the side-by-side benchmarks (bench/serve-vs-peers,
bench/generate-serve-vs-peers, bench/transcribe-vs-peers,
bench/packing-wer) share: the machine's description, free ports, a pinned
server process waited for on an HTTP readiness path, CPU accounting from
/proc, inferd-bench runs against a server, and word error counting.

Standard library only; imported by scripts in this folder (they put it on
sys.path themselves).
"""
import hashlib
import http.client
import json
import os
import platform
import re
import signal
import socket
import subprocess
import sys
import tarfile
import time

TOP = os.path.abspath(os.path.join(os.path.dirname(os.path.realpath(__file__)), ".."))
BIN = os.environ.get("INFERD_BIN", os.path.join(TOP, "build", "inferd"))
BENCH_BIN = os.environ.get("INFERD_BENCH_BIN", os.path.join(TOP, "build", "inferd-bench"))
RESULTS = os.path.join(TOP, "bench", "results")
CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                     "inferd")


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for ln in f:
                if ln.startswith("model name"):
                    return ln.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_flags():
    """The SIMD features that matter to the kernels, as /proc/cpuinfo names them."""
    try:
        with open("/proc/cpuinfo") as f:
            for ln in f:
                if ln.startswith("flags"):
                    fl = set(ln.split(":", 1)[1].split())
                    want = ["avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
                            "avx512_bf16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16"]
                    return [x for x in want if x in fl]
    except OSError:
        pass
    return []


def words(text):
    """Words for WER: lower-case, "-" -> space, anything but a-z 0-9 ' -> space."""
    return re.sub(r"[^a-z0-9' ]+", " ", text.lower().replace("-", " ")).split()


def edits(hyp, ref):
    """Word edit distance (Levenshtein: substitutions + deletions + insertions)."""
    h, r = words(hyp), words(ref)
    prev = list(range(len(h) + 1))
    for i, rw in enumerate(r, 1):
        cur = [i] + [0] * len(h)
        for j, hw in enumerate(h, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (rw != hw))
        prev = cur
    return prev[-1]


def wer(pairs):
    """Corpus WER over [(hyp, ref)]: summed edits / summed reference words."""
    n = sum(len(words(r)) for _, r in pairs)
    return sum(edits(h, r) for h, r in pairs) / n if n else float("nan")


def machine_line():
    return "nproc %d, %s [%s], Linux %s" % (len(os.sched_getaffinity(0)), cpu_model(),
                                            " ".join(cpu_flags()), platform.release())


def machine():
    return {"nproc": len(os.sched_getaffinity(0)), "cpu": cpu_model(),
            "cpu_flags": cpu_flags(), "kernel": platform.release()}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def inferd_version(binary=BIN):
    v = "?"
    try:
        r = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10)
        if r.returncode == 0 and r.stdout.split():
            v = r.stdout.split()[-1]
        r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=TOP, capture_output=True,
                           text=True, timeout=10)
        if r.returncode == 0:
            v += " (" + r.stdout.strip() + ")"
    except (OSError, subprocess.TimeoutExpired):
        pass
    return v


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


class Server:
    """One server process pinned to cpus; ready when GET ready_path is 200.
    say(msg) reports progress."""

    def __init__(self, name, argv, port, ready_path, cpus, logdir, env=None, say=print):
        self.name, self.argv, self.port, self.ready_path = name, argv, port, ready_path
        self.cpus, self.env, self.proc, self.say = set(cpus), env, None, say
        self.log_path = os.path.join(logdir, name + ".log")

    def start(self, timeout=300, poll_s=0.2):
        """Start and wait, asking ready_path every poll_s seconds; returns
        None, or why it did not come up."""
        log = open(self.log_path, "ab")
        cpus = self.cpus
        self.proc = subprocess.Popen(self.argv, cwd=TOP, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=self.env,
                                     start_new_session=True,
                                     preexec_fn=lambda: os.sched_setaffinity(0, cpus))
        log.close()
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if self.proc.poll() is not None:
                return "%s exited with %d before it was ready; its log (%s) ends:\n%s" % (
                    self.name, self.proc.returncode, self.log_path, self.log_tail())
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                c.request("GET", self.ready_path)
                r = c.getresponse()
                r.read()
                c.close()
                if r.status == 200:
                    self.say("%s ready in %.1f s (pid %d, port %d, cpus %s)" % (
                        self.name, time.monotonic() - t0, self.proc.pid, self.port,
                        sorted(self.cpus)))
                    return None
            except OSError:
                pass
            time.sleep(poll_s)
        self.stop()
        return "%s was not ready after %d s; its log ends:\n%s" % (self.name, timeout,
                                                                   self.log_tail())

    def log_tail(self, n=3000):
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    def cpu_ticks(self):
        try:
            with open("/proc/%d/stat" % self.proc.pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return int(fields[11]) + int(fields[12])  # utime + stime, all threads
        except (OSError, IndexError, ValueError):
            return 0

    def died(self):
        """None while it runs, else a line saying how it ended and its log's tail."""
        if self.proc.poll() is None:
            return None
        return "%s DIED during the run (exit %d); its log ends:\n%s" % (
            self.name, self.proc.returncode, self.log_tail())

    def stop(self):
        if not self.proc or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.say("%s did not exit 60 s after SIGTERM: SIGKILL" % self.name)
            self.proc.kill()
            self.proc.wait()


def cpu_busy_ticks(cpus):
    total = 0
    with open("/proc/stat") as f:
        for ln in f:
            m = re.match(r"cpu(\d+) (.*)", ln)
            if m and int(m.group(1)) in cpus:
                v = [int(x) for x in m.group(2).split()]
                total += v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0)
    return total


def child_ticks():
    t = os.times()
    return (t.children_user + t.children_system) * os.sysconf("SC_CLK_TCK")


def harness(bench_bin, server, harness_args, out_json):
    """inferd-bench against server (--url, --label, --json added to
    harness_args); returns (the last stage's summary with window_s and the
    CPU figures, None) or (None, why). server_cpu_cores = the server's CPU
    time over the harness run / its length; other_cpu_cores = the busy time
    of the server's CPUs that was neither the server's nor the harness's."""
    argv = [bench_bin, "--url", "http://127.0.0.1:%d" % server.port, "--label", server.name,
            "--no-progress", "--json", out_json, *harness_args]
    hz = os.sysconf("SC_CLK_TCK")
    b0, s0, c0, la0, t0 = (cpu_busy_ticks(server.cpus), server.cpu_ticks(), child_ticks(),
                           os.getloadavg()[0], time.monotonic())
    r = subprocess.run(argv, cwd=TOP, capture_output=True, text=True)
    b1, s1, c1, la1, t1 = (cpu_busy_ticks(server.cpus), server.cpu_ticks(), child_ticks(),
                           os.getloadavg()[0], time.monotonic())
    if r.returncode != 0 or not os.path.exists(out_json):
        return None, "inferd-bench exited %d:\n%s" % (r.returncode, (r.stderr + r.stdout)[-3000:])
    with open(out_json) as f:
        run = json.load(f)
    s = run["stages"][-1]["summary"]
    s["window_s"] = run["stages"][-1]["window_s"]
    span = t1 - t0  # warm-up + window + drain: CPU figures cover the whole run
    s["server_cpu_cores"] = (s1 - s0) / hz / span
    s["other_cpu_cores"] = max(0.0, (b1 - b0) - (s1 - s0) - (c1 - c0)) / hz / span
    s["loadavg"] = [la0, la1]
    s["harness_table"] = r.stdout.strip()
    return s, None


# ---------------------------------------------------------------- llama.cpp

LLAMA_CPP_VERSION = "0.3.36"
LLAMA_SDIST = "llama_cpp_python-%s.tar.gz" % LLAMA_CPP_VERSION
LLAMA_SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
LLAMA_DIR = os.path.join(CACHE, "llama-cpp-" + LLAMA_CPP_VERSION)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def _pip():
    """A pip that can download: the test venv's, else this Python's."""
    venv_pip = os.path.join(CACHE, "venv", "bin", "pip")
    return [venv_pip] if os.access(venv_pip, os.X_OK) else [sys.executable, "-m", "pip"]


# CMake flags per instruction-set ceiling: "native" is what a user building
# llama.cpp on the machine gets; "avx2" is ggml's own AVX2 variant (AVX2, FMA,
# F16C, BMI2; no AVX-512, no VNNI), the code an AVX2-only CPU runs, built
# into its own folder so that both can be compared on one AVX-512 machine.
LLAMA_ISA_FLAGS = {
    "native": ["-DGGML_NATIVE=ON"],
    "avx2": ["-DGGML_NATIVE=OFF", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON",
             "-DGGML_F16C=ON", "-DGGML_BMI2=ON", "-DGGML_AVX512=OFF", "-DGGML_AVX_VNNI=OFF"],
}


def ensure_llama_cpp(tool, say, isa="native"):
    """(path of llama.cpp's `tool` (llama-server, llama-bench), None), built
    the first time with CMake from the llama.cpp sources inside the
    llama-cpp-python LLAMA_CPP_VERSION source distribution (pip download,
    sha256 checked) into LLAMA_DIR/build (isa "native": GGML_NATIVE, the
    machine's own ISA, as a user building it gets) or LLAMA_DIR/build-avx2
    (isa "avx2": LLAMA_ISA_FLAGS), Release, no curl or OpenSSL; (None, why)
    when it cannot be."""
    bdir = "build" if isa == "native" else "build-" + isa
    exe = os.path.join(LLAMA_DIR, bdir, "bin", tool)
    if os.access(exe, os.X_OK):
        return exe, None
    os.makedirs(LLAMA_DIR, exist_ok=True)
    sdist = os.path.join(LLAMA_DIR, LLAMA_SDIST)
    if not os.path.exists(sdist):
        say("downloading the llama-cpp-python %s source distribution" % LLAMA_CPP_VERSION)
        r = subprocess.run(_pip() + ["download", "-q", "--no-binary", "llama-cpp-python", "--no-deps",
                                     "llama-cpp-python==" + LLAMA_CPP_VERSION, "-d", LLAMA_DIR],
                           capture_output=True, text=True)
        if r.returncode != 0 or not os.path.exists(sdist):
            return None, "pip download failed: " + (r.stderr or r.stdout).strip()[-1500:]
    got = sha256(sdist)
    if got != LLAMA_SDIST_SHA256:
        return None, "%s: sha256 %s, expected %s" % (sdist, got, LLAMA_SDIST_SHA256)
    src = os.path.join(LLAMA_DIR, "llama_cpp_python-" + LLAMA_CPP_VERSION, "vendor", "llama.cpp")
    if not os.path.isdir(src):
        with tarfile.open(sdist) as t:
            try:
                t.extractall(LLAMA_DIR, filter="data")
            except TypeError:  # Python before 3.11.4 has no extraction filters
                t.extractall(LLAMA_DIR)
    build = os.path.join(LLAMA_DIR, bdir)
    say("building llama-server and llama-bench in %s (about 10 minutes on 2 cores)" % build)
    for argv in (["cmake", "-S", src, "-B", build, "-DCMAKE_BUILD_TYPE=Release"]
                 + LLAMA_ISA_FLAGS[isa] + ["-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF",
                  "-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_BUILD_TESTS=OFF",
                  "-DLLAMA_BUILD_EXAMPLES=OFF"],
                 ["cmake", "--build", build, "-j", str(os.cpu_count() or 2),
                  "--target", "llama-server", "llama-bench"]):
        r = subprocess.run(argv, capture_output=True, text=True)
        if r.returncode != 0:
            return None, "%s failed (%d):\n%s" % (" ".join(argv[:2]), r.returncode,
                                                 (r.stderr + r.stdout)[-2000:])
    if not os.access(exe, os.X_OK):
        return None, "%s is not there after the build" % exe
    return exe, None


def llama_cpp_version(exe):
    r = subprocess.run([exe, "--version"], capture_output=True, text=True)
    for ln in (r.stdout + r.stderr).splitlines():
        if ln.startswith("version"):
            return "llama.cpp %s (llama-cpp-python %s sdist)" % (ln.split(":", 1)[1].strip(),
                                                                 LLAMA_CPP_VERSION)
    return "llama.cpp ? (llama-cpp-python %s sdist)" % LLAMA_CPP_VERSION
