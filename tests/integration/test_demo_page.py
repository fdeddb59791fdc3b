"""The live transcription page (GET / and /demo) in headless Chromium from
Debian: a fake microphone fed from jfk.wav (Chromium's
--use-file-for-fake-audio-capture), and the page's file picker streaming
the same clip at real-time pace. The page's final text is compared with
the clip's hand-checked transcript (tests/data/audio/manifest.tsv); a
screenshot of each run is saved beside the daemon binary, in
meson-logs/demo-page-*.png. The browser is driven over the Chrome DevTools
Protocol (Runtime.evaluate, DOM.setFileInputFiles, Page.captureScreenshot)
with the `websockets` client the test venv already holds."""
import base64
import contextlib
import csv
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request

import pytest
from websockets.sync.client import connect as ws_connect

from conftest import BIN, ROOT, Daemon, assert_stopped_clean, default_models, make_config, request
from test_live import wer, words

KEY = "sk-demo-page-key"
AUDIO = os.path.join(ROOT, "tests", "data", "audio")
JFK = os.path.join(AUDIO, "jfk.wav")
MAX_WER = 0.15  # whisper-tiny.en on audio the browser resampled twice (16 -> 48 -> 16 kHz)


def reference(name):
    with open(os.path.join(AUDIO, "manifest.tsv")) as f:
        return next(r["reference_transcript"] for r in csv.DictReader(f, delimiter="\t")
                    if r["file"] == name)


class Chromium(contextlib.ExitStack):
    """One headless Chromium, driven over the DevTools protocol's page
    target (one request at a time); a context manager."""

    def __init__(self, args):
        super().__init__()
        self.callback(self.close)
        exe = shutil.which("chromium")
        assert exe, "chromium is not installed (scripts/install-deps installs it)"
        self.dir = tempfile.mkdtemp(prefix="inferd-chromium-")
        self.err = open(os.path.join(self.dir, "stderr.log"), "w")
        self.proc = subprocess.Popen(
            [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--user-data-dir=" + self.dir, "--remote-debugging-port=0", *args, "about:blank"],
            stdout=subprocess.DEVNULL, stderr=self.err)
        port_file = os.path.join(self.dir, "DevToolsActivePort")
        deadline = time.monotonic() + 60
        while not (os.path.exists(port_file) and open(port_file).read().strip()):
            assert self.proc.poll() is None, "chromium exited:\n" + open(self.err.name).read()
            assert time.monotonic() < deadline, "chromium did not start"
            time.sleep(0.1)
        port = int(open(port_file).read().split()[0])
        targets = json.load(urllib.request.urlopen("http://127.0.0.1:%d/json/list" % port))
        page = next(t for t in targets if t["type"] == "page")
        self.ws = self.enter_context(ws_connect(page["webSocketDebuggerUrl"], max_size=None))
        self.n = 0

    def call(self, method, **params):
        self.n += 1
        self.ws.send(json.dumps({"id": self.n, "method": method, "params": params}))
        while True:  # events in between are dropped
            m = json.loads(self.ws.recv(timeout=60))
            if m.get("id") == self.n:
                assert "error" not in m, m["error"]
                return m["result"]

    def eval(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True,
                      awaitPromise=True, userGesture=True)
        assert "exceptionDetails" not in r, r["exceptionDetails"]
        return r["result"].get("value")

    def wait(self, expr, what, timeout=90):
        """Poll expr in the page until it is truthy; a hang guard."""
        deadline = time.monotonic() + timeout
        while True:
            v = self.eval(expr)
            if v:
                return v
            assert time.monotonic() < deadline, what
            time.sleep(0.25)

    def screenshot(self, name):
        png = base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])
        out = os.path.join(os.path.dirname(os.path.abspath(BIN)), "meson-logs", name)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out, "wb") as f:
            f.write(png)
        print("screenshot:", out)

    def close(self):
        self.proc.kill()
        self.proc.wait()
        self.err.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def srv():
    d = Daemon(make_config(models=[dict(default_models()[0], vad_filter=True)]),
               env={"INFERD_API_KEY": KEY})
    yield d
    assert_stopped_clean(d)


def test_page_served_without_a_key(srv):
    for path in ("/", "/demo"):
        r = request(srv.port, "GET", path)
        assert r.status == 200
        assert r.header("content-type") == "text/html; charset=utf-8"
        csp = r.header("content-security-policy")
        assert "connect-src 'self'" in csp and "default-src 'none'" in csp
        assert b"/v1/listen" in r.body and b"<script>" in r.body
        assert b"src=\"http" not in r.body  # nothing fetched from elsewhere
    assert request(srv.port, "HEAD", "/demo", head_only=True).status == 200
    r = request(srv.port, "POST", "/demo", body=b"x")
    assert r.status == 405 and r.header("allow") == "GET, HEAD"


def open_page(b, port):
    b.call("Page.navigate", url="http://127.0.0.1:%d/demo" % port)
    b.wait("document.readyState === 'complete'", "the page did not load")
    # the key goes in as a user would type it; the models list then loads
    b.eval("document.getElementById('key').value = %s; "
           "document.getElementById('key').dispatchEvent(new Event('change'))" % json.dumps(KEY))
    b.wait("[...document.getElementById('model').options].some(o => o.value === 'whisper-tiny.en')",
           "the page never listed whisper-tiny.en")


def check_run(b, name):
    """Wait for the stream to end (CloseStream, Metadata, close 1000), then
    compare the page's finals with the clip's transcript."""
    b.wait("document.body.dataset.state === 'closed'", "the stream never closed")
    status = b.eval("document.getElementById('status').textContent")
    assert status.startswith("Done:"), status  # the Metadata message arrived
    final = b.eval("document.getElementById('final').textContent")
    rows = b.eval("[...document.getElementById('lat').tBodies[0].rows].map(r => r.cells[1].textContent)")
    b.screenshot(name)
    ref = words(reference("jfk.wav"))
    assert wer(ref, words(final)) <= MAX_WER, final
    assert rows and all(float(x) >= 0 for x in rows), rows  # a latency per final


def test_microphone_in_chromium(srv):
    with Chromium(["--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream",
                   "--use-file-for-fake-audio-capture=%s%%noloop" % JFK,
                   "--autoplay-policy=no-user-gesture-required"]) as b:
        open_page(b, srv.port)
        b.eval("document.getElementById('mic').click()")
        b.wait("document.body.dataset.state === 'open'", "the WebSocket did not open")
        # the fake microphone plays the clip once, then silence; its last
        # words are final once the silence has lasted past the endpoint
        b.wait("document.getElementById('final').textContent.toLowerCase().includes('country can do for you')"
               " && document.getElementById('final').textContent.split(/\\s+/).length >= 20",
               "the clip's words never came back as finals")
        b.eval("document.getElementById('stop').click()")
        check_run(b, "demo-page-microphone.png")


def test_file_picker_in_chromium(srv):
    with Chromium(["--autoplay-policy=no-user-gesture-required"]) as b:
        open_page(b, srv.port)
        doc = b.call("DOM.getDocument")["root"]["nodeId"]
        node = b.call("DOM.querySelector", nodeId=doc, selector="#file")["nodeId"]
        b.call("DOM.setFileInputFiles", nodeId=node, files=[os.path.abspath(JFK)])
        b.eval("document.getElementById('file').dispatchEvent(new Event('change'))")
        b.eval("document.getElementById('play').click()")
        check_run(b, "demo-page-file.png")  # the page sends CloseStream at the file's end
