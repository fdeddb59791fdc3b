"""Batched long-form transcription over HTTP: the `batched` extension
field of OpenAI's /v1/audio/transcriptions and query parameter of
Deepgram's /v1/listen. The daemon decodes the upload on libuv's thread
pool, cuts it at quiet moments into chunks of at most 30 s and runs the
chunks together (eng_transcribe_params.batched). Checked: the text is
the CLI's `inferd transcribe --batched` text for the same file (the same
samples, the same cuts), it differs from the sequential text, the
chunks' encoder windows ran batched (the daemon's own batch_stats, not a
clock), and bad values and bad audio get the protocol's error while the
daemon keeps serving."""
import pytest

from conftest import Daemon, make_config, request
from test_audio_endpoints import (assert_deepgram_error, assert_openai_error, assert_serving,
                                  check_clean_exit, listen, transcribe, words)
from test_transcribe import transcribe as cli_transcribe
from test_transcribe import write_long_file


@pytest.fixture(scope="module")
def srv():
    d = Daemon(make_config(limits={"max_body_bytes": 16 << 20, "body_timeout_ms": 60000,
                                   "idle_timeout_ms": 60000}))
    yield d
    check_clean_exit(d)


@pytest.fixture(scope="module")
def long_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("long") / "long.wav"
    write_long_file(path)
    with open(path, "rb") as f:
        return str(path), f.read()


def batch_sizes(port):
    """{batch size: steps} from the daemon's Triton-style batch_stats."""
    r = request(port, "GET", "/v2/models/whisper-tiny.en/stats")
    assert r.status == 200, r.body
    stats = r.json()["model_stats"][0]["batch_stats"]
    return {b["batch_size"]: b["compute_infer"]["count"] for b in stats}


def test_openai_batched_is_the_cli_batched(srv, long_file):
    path, data = long_file
    before = batch_sizes(srv.port)
    r = transcribe(srv.port, data, filename="long.wav", batched="true",
                   response_format="verbose_json", temperature="0")
    assert r.status == 200, r.body
    got = r.json()
    after = batch_sizes(srv.port)
    cli = cli_transcribe([path], "--batched")["long.wav"]
    assert got["text"].strip() == cli["text"].strip()
    assert len(got["segments"]) == len(cli["segments"])
    for a, b in zip(got["segments"], cli["segments"]):
        assert abs(a["start"] - b["start"]) < 0.01 and abs(a["end"] - b["end"]) < 0.01, (a, b)
    # windows of several chunks in one encoder pass: a step of more than
    # one window, which one sequential request never makes
    grew = {b: n - before.get(b, 0) for b, n in after.items() if n > before.get(b, 0)}
    assert any(b >= 2 for b in grew), (before, after)
    # and not the sequential mode under another name
    seq = transcribe(srv.port, data, filename="long.wav", batched="false", temperature="0")
    assert seq.status == 200, seq.body
    assert seq.json()["text"].strip() != got["text"].strip()


def test_deepgram_batched(srv, long_file):
    _, data = long_file
    r = listen(srv.port, data, "batched=true&punctuate=true")
    assert r.status == 200, r.body
    dg = r.json()["results"]["channels"][0]["alternatives"][0]["transcript"]
    oa = transcribe(srv.port, data, filename="long.wav", batched="true", temperature="0")
    assert oa.status == 200, oa.body
    assert words(dg) == words(oa.json()["text"])


def test_batched_short_clip_is_the_plain_transcript(srv):
    """Audio of one window is not cut: batched or not, the same text."""
    a = transcribe(srv.port, batched="true")
    b = transcribe(srv.port)
    assert a.status == 200 and b.status == 200, (a.body, b.body)
    assert a.json()["text"] == b.json()["text"]


@pytest.mark.parametrize("value", ["yes", "", "2", "truee"])
def test_openai_bad_batched_value_400(srv, value):
    r = transcribe(srv.port, batched=value)
    assert_openai_error(r, 400, "'batched' must be true or false")


@pytest.mark.parametrize("value", ["True", "TRUE", "1", "False", "0"])
def test_openai_batched_spellings(srv, value):
    """Python's str(True) and form libraries' 1 / 0 read as Deepgram's query does."""
    r = transcribe(srv.port, batched=value)
    assert r.status == 200, r.body


def test_deepgram_bad_batched_value_400(srv):
    r = listen(srv.port, b"RIFF", "batched=maybe")
    assert_deepgram_error(r, 400, "batched")


@pytest.mark.parametrize("data,status", [(b"this is not audio at all" * 40, 415),
                                         (b"", 400)])
def test_batched_bad_audio(srv, data, status):
    """Decoding errors of the pool-thread decoder are the replica's."""
    plain = transcribe(srv.port, data, filename="x.wav")
    r = transcribe(srv.port, data, filename="x.wav", batched="true")
    assert r.status == plain.status == status, (r.status, r.body, plain.status, plain.body)
    assert r.json()["error"]["message"] == plain.json()["error"]["message"]
    assert_serving(srv.port)
