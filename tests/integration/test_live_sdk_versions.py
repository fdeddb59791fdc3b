"""The live WebSocket with three releases of the official deepgram-sdk:
4.8.1 (listen.websocket.v("1"), LiveOptions, event handlers: a different
client code path), 6.1.1 (listen.v1.connect with Python booleans, which
6.0 to 7.1 put in the query as "True") and the venv's own 7.17.0. Each
streams jfk.wav in 100 ms frames at real-time pace and at 8x through
tests/integration/dg_sdk_client.py, run with that release on PYTHONPATH
(scripts/install-deps installs the older ones beside the venv). The finals
must give the words POST /v1/listen gives for the same file, within
test_live.LA_WORDS (LocalAgreement-2's early finals)."""
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, Daemon, assert_stopped_clean, default_models, make_config, request
from test_live import LA_WORDS, wer

KEY = "sk-sdk-versions"
MODEL = "whisper-tiny.en"
JFK = os.path.join(ROOT, "tests", "data", "audio", "jfk.wav")
CLIENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dg_sdk_client.py")
VENV = os.environ.get("INFERD_VENV") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.join(os.environ.get("HOME", "/tmp"), ".cache"),
    "inferd", "venv")
NEWEST = "7.17.0"  # the venv's (scripts/install-deps)


def words(text):
    return "".join(c if c.isalnum() or c.isspace() or c == "'" else " "
                   for c in text.lower()).replace("'", "").split()


@pytest.fixture(scope="module")
def srv():
    d = Daemon(make_config(models=[dict(default_models()[0], vad_filter=True)],
                           limits={"max_body_bytes": 4 << 20}),
               env={"INFERD_API_KEY": KEY})
    yield d
    assert_stopped_clean(d)


@pytest.fixture(scope="module")
def rest_words(srv):
    r = request(srv.port, "POST", "/v1/listen?model=" + MODEL,
                headers={"Authorization": "Token " + KEY, "Content-Type": "audio/wav"},
                body=open(JFK, "rb").read())
    assert r.status == 200, r.body
    return words(r.json()["results"]["channels"][0]["alternatives"][0]["transcript"])


def run_client(port, version, speed):
    env = dict(os.environ)
    if version != NEWEST:
        path = VENV + "-deepgram-sdk-" + version
        assert os.path.isdir(path), path + " is missing: run scripts/install-deps"
        env["PYTHONPATH"] = path
    p = subprocess.run([sys.executable, CLIENT, str(port), KEY, JFK, str(speed), MODEL, version],
                       env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    return [json.loads(ln) for ln in p.stdout.splitlines()]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("speed", [1.0, 8.0])
@pytest.mark.parametrize("version", ["4.8.1", "6.1.1", NEWEST])
def test_sdk_release_streams_jfk(srv, rest_words, version, speed):
    msgs = run_client(srv.port, version, speed)
    assert msgs[0] == {"type": "sdk", "version": version}
    assert msgs[-1]["type"] == "end" and msgs[-1]["close"] == 1000, msgs
    assert not [m for m in msgs if m["type"] == "Error"], msgs
    results = [m for m in msgs if m["type"] == "Results"]
    finals = [m for m in results if m["is_final"]]
    got = [w for m in finals for w in words(m["transcript"])]
    # LocalAgreement-2 (test_live.LA_WORDS): interim words made final early
    assert finals and wer(rest_words, got) * len(rest_words) <= LA_WORDS, got
    if speed == 1.0:  # interims come between the finals at real-time pace
        first = results.index(finals[0])
        assert any(not m["is_final"] for m in results[:first]), results
    assert any(m["speech_final"] for m in finals)
    assert [m for m in msgs if m["type"] == "SpeechStarted"]  # vad_events=True
    meta = [m for m in msgs if m["type"] == "Metadata"]
    assert meta and meta[-1]["duration"] == pytest.approx(11.0, abs=0.01)
    if version == "4.8.1":  # it flushes with Finalize before finish()
        assert finals[-1]["from_finalize"]
