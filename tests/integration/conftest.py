"""Fixtures for the integration tests: start the real inferd binary on a free
loopback port with the real default models, talk to it over raw sockets.

INFERD_BIN (set by meson) is the binary under test; INFERD_MODELS the folder
scripts/fetch-models filled. Every daemon is stopped (SIGTERM, then SIGKILL)
at the end of its test, and its exit status and stderr are checked."""
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time

import pytest

BIN = os.environ.get("INFERD_BIN", "build/inferd")
MODELS = os.environ.get("INFERD_MODELS", "models")
ROOT = os.environ.get("INFERD_SOURCE_ROOT", ".")


def default_models():
    return [
        {"name": "whisper-tiny.en", "path": os.path.join(MODELS, "whisper-tiny.en"), "format": "ct2"},
        {"name": "gemma-3-270m", "path": os.path.join(MODELS, "gemma-3-270m-q4_k_m.gguf"), "format": "gguf"},
        {"name": "smollm2-135m-instruct",
         "path": os.path.join(MODELS, "smollm2-135m-instruct-q4_1.gguf"), "format": "gguf"},
    ]


class Daemon:
    """One inferd process; .port, .stderr_text(), .stop()."""

    def __init__(self, config, args=(), env=None):
        self.dir = tempfile.mkdtemp(prefix="inferd-test-")
        self.config_path = os.path.join(self.dir, "config.json")
        # never the user's own Batch API store (its open batches would run here)
        config = dict(config)
        config["batch"] = dict(config.get("batch") or {})
        config["batch"].setdefault("store", os.path.join(self.dir, "batch.db"))
        with open(self.config_path, "w") as f:
            json.dump(config, f)
        self.err_path = os.path.join(self.dir, "stderr.log")
        self.err = open(self.err_path, "w+")
        e = dict(os.environ)
        for k in ("INFERD_API_KEY", "INFERD_CONFIG", "INFERD_LISTEN", "INFERD_GRPC_LISTEN"):
            e.pop(k, None)
        e.update(env or {})
        cmd = [BIN, "--config", self.config_path, *args]
        if "--listen" not in args:
            cmd += ["--listen", "127.0.0.1:0"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.err, env=e)
        self.port = self._wait_port()

    def _wait_port(self):
        deadline = time.time() + 60
        while time.time() < deadline:
            m = re.search(r"listening on .*:(\d+)", self.stderr_text())
            if m:
                return int(m.group(1))
            if self.proc.poll() is not None:
                raise RuntimeError("inferd exited at start-up:\n" + self.stderr_text())
            time.sleep(0.05)
        raise RuntimeError("inferd did not start:\n" + self.stderr_text())

    def stderr_text(self):
        with open(self.err_path) as f:
            return f.read()

    def stop(self, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("inferd did not stop on SIGTERM")
        return self.proc.returncode


def assert_stopped_clean(d):
    """Stop d: exit 0, no sanitizer report in its stderr."""
    assert d.stop() == 0, d.stderr_text()
    text = d.stderr_text()
    assert "Sanitizer" not in text and "runtime error" not in text, text


def big_body_limits(max_body_bytes):
    """Limits with room for audio files in request bodies."""
    return {"max_body_bytes": max_body_bytes, "body_timeout_ms": 20000, "idle_timeout_ms": 20000}


def openai_transcript(port, data):
    """The text /v1/audio/transcriptions answers for the WAV bytes data."""
    boundary = "inferdtest"
    body = (("--%s\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-tiny.en\r\n"
             "--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n"
             "Content-Type: audio/wav\r\n\r\n") % (boundary, boundary)).encode() + data + \
        ("\r\n--%s--\r\n" % boundary).encode()
    r = request(port, "POST", "/v1/audio/transcriptions",
                headers={"Content-Type": "multipart/form-data; boundary=" + boundary}, body=body)
    assert r.status == 200, r.body
    return r.json()["text"]


def make_config(**over):
    cfg = {"listen": "127.0.0.1:0", "models": default_models(),
           "limits": {"max_header_bytes": 4096, "max_body_bytes": 65536,
                      "header_timeout_ms": 2000, "idle_timeout_ms": 3000,
                      "body_timeout_ms": 3000, "drain_timeout_ms": 10000}}
    limits = over.pop("limits", {})
    cfg["limits"].update(limits)
    cfg.update(over)
    return cfg


@pytest.fixture(scope="module")
def daemon():
    d = Daemon(make_config())
    yield d
    rc = d.stop()
    assert rc == 0, d.stderr_text()
    assert "Sanitizer" not in d.stderr_text(), d.stderr_text()
    assert "runtime error" not in d.stderr_text()


@pytest.fixture
def fresh_daemon():
    """A daemon per test, for tests that change its state."""
    made = []

    def start(config=None, **kw):
        d = Daemon(config or make_config(), **kw)
        made.append(d)
        return d
    yield start
    for d in made:
        d.stop()
        text = d.stderr_text()
        assert "Sanitizer" not in text, text
        assert "runtime error" not in text, text


def read_deadline_answer(s, timeout):
    """The answer the drain deadline gives a request in progress on socket
    s (read to its close): 503 with Connection: close; its JSON body."""
    s.settimeout(timeout)
    got = read_to_close(s)
    s.close()
    head, _, body = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503"), got[:300]
    assert b"Connection: close" in head, head
    return json.loads(body)


def read_to_close(s):
    """Every byte the peer sends until it closes."""
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            return data
        data += b


def connect(port, timeout=120):
    """A TCP connection to the daemon. timeout (s) bounds every socket call:
    a hang guard, generous because a loaded machine may take many seconds
    to answer; tests that expect silence pass their own."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


class Response:
    def __init__(self, status, reason, headers, body):
        self.status, self.reason, self.headers, self.body = status, reason, headers, body

    def json(self):
        return json.loads(self.body)

    def header(self, name):
        return self.headers.get(name.lower())


class Reader:
    """Reads HTTP/1.1 responses (Content-Length framed) from a socket."""

    def __init__(self, sock):
        self.sock, self.buf = sock, b""

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise EOFError("connection closed")
        self.buf += chunk

    def read_response(self, head_only=False):
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        _, status, reason = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
        n = 0 if head_only else int(headers.get("content-length", "0"))
        while len(self.buf) < n:
            self._fill()
        body, self.buf = self.buf[:n], self.buf[n:]
        return Response(int(status), reason, headers, body)

    def is_closed(self, timeout=5):
        """True when the peer closes the connection within timeout."""
        self.sock.settimeout(timeout)
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return True
                self.buf += chunk
        except socket.timeout:
            return False
        except ConnectionResetError:
            return True


def request(port, method, path, headers=None, body=b"", head_only=False):
    """One request on a new connection; returns the Response."""
    h = {"Host": "localhost", "Connection": "close"}
    h.update(headers or {})
    if body:
        h["Content-Length"] = str(len(body))
    raw = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n"
    with connect(port) as s:
        s.sendall(raw.encode() + body)
        return Reader(s).read_response(head_only=head_only)


def model_stats(port, model):
    """The "inferd" part of GET /v2/models/{model}/stats: what the daemon
    itself recorded (requests by outcome, queue depth, replicas, the last
    ended requests with their replica and monotonic times)."""
    r = request(port, "GET", f"/v2/models/{model}/stats")
    assert r.status == 200, r.body
    return r.json()["model_stats"][0]["inferd"]


def wait_until(pred, what, timeout=120):
    """Poll pred (the daemon's state) until it is true; fail with `what`
    after timeout s - a hang guard far above what the wait should take,
    never the verdict itself."""
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def wait_submitted(port, model, before, n=1, timeout=120):
    """Wait until n requests more than `before` (a model_stats "submitted"
    count) reached the model's queue: the daemon has read them whole."""
    wait_until(lambda: model_stats(port, model)["requests"]["submitted"] >= before + n,
               f"{n} request(s) never reached {model}'s queue", timeout)
