"""The speech-to-text HTTP endpoints against the real daemon, the real
Whisper model and real audio: OpenAI's POST /v1/audio/transcriptions
(multipart/form-data) and Deepgram's POST /v1/listen (audio body), driven
with raw HTTP and with the official `openai` and `deepgram-sdk` clients
(from the test virtualenv scripts/install-deps makes), good input and bad.
"""
import concurrent.futures
import csv
import hashlib
import io
import json
import os
import random
import re
import signal
import wave

import pytest

from conftest import (ROOT, Daemon, Reader, connect, make_config, model_stats,
                      read_deadline_answer, wait_submitted, wait_until)

AUDIO = os.path.join(ROOT, "tests", "data", "audio")
MODEL = "whisper-tiny.en"
JFK = ("And so my fellow Americans ask not what your country can do for you "
       "ask what you can do for your country")
BODY_LIMIT = 4 << 20
TEXT_PLAIN = "text/plain; charset=utf-8"
API_KEY = "sk-inferd-test-key"


def audio_config(**over):
    limits = {"max_body_bytes": BODY_LIMIT, "body_timeout_ms": 20000, "idle_timeout_ms": 20000}
    limits.update(over.pop("limits", {}))
    return make_config(limits=limits, **over)


def check_clean_exit(d):
    rc = d.stop()
    text = d.stderr_text()
    assert rc == 0, text
    assert "Sanitizer" not in text, text
    assert "runtime error" not in text, text


@pytest.fixture(scope="module")
def srv():
    d = Daemon(audio_config())
    yield d
    check_clean_exit(d)


@pytest.fixture(scope="module")
def keyed():
    """A daemon that requires an API key."""
    d = Daemon(audio_config(api_keys=[API_KEY]))
    yield d
    check_clean_exit(d)


# --- helpers ------------------------------------------------------------


def clip(name):
    with open(os.path.join(AUDIO, name), "rb") as f:
        return f.read()


def manifest():
    with open(os.path.join(AUDIO, "manifest.tsv")) as f:
        return {r["file"]: r for r in csv.DictReader(f, delimiter="\t")}


def norm(text):
    return " ".join(text.split())


def words(text):
    return re.sub(r"[^\w\s']", " ", text.lower()).replace("'", "").split()


def wer(ref, hyp):
    r, h = words(ref), words(hyp)
    prev = list(range(len(h) + 1))
    for i, a in enumerate(r, 1):
        cur = [i] + [0] * len(h)
        for j, b in enumerate(h, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a != b))
        prev = cur
    return prev[-1] / max(1, len(r))


def post(port, path, body, headers=None, timeout=300):
    """One POST on its own connection, with a long read timeout (an ASan
    build transcribes several times slower)."""
    h = {"Host": "localhost", "Connection": "close", "Content-Length": str(len(body))}
    h.update(headers or {})
    raw = f"POST {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n"
    with connect(port, timeout=timeout) as s:
        try:
            s.sendall(raw.encode() + body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # answered (413) before the body was all sent
        return Reader(s).read_response()


def multipart(fields=(), files=(), boundary="inferdTestBoundary7MA4YWxkTrZu0gW"):
    """fields: (name, value) pairs; files: (name, filename, bytes, type)."""
    out = io.BytesIO()
    for name, value in fields:
        out.write(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'
                  .encode())
        out.write(value.encode() if isinstance(value, str) else value)
        out.write(b"\r\n")
    for name, filename, data, ctype in files:
        out.write(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; '
                  f'filename="{filename}"\r\nContent-Type: {ctype}\r\n\r\n'.encode())
        out.write(data + b"\r\n")
    out.write(f"--{boundary}--\r\n".encode())
    return f"multipart/form-data; boundary={boundary}", out.getvalue()


def transcribe(port, data=None, filename="jfk.wav", model=MODEL, headers=None, **fields):
    """POST /v1/audio/transcriptions with the given file bytes and fields."""
    data = clip("jfk.wav") if data is None else data
    f = [("model", model)] if model is not None else []
    f += [(k, v if isinstance(v, bytes) else str(v)) for k, v in fields.items()]
    ctype, body = multipart(f, [("file", filename, data, "application/octet-stream")])
    h = {"Content-Type": ctype}
    h.update(headers or {})
    return post(port, "/v1/audio/transcriptions", body, h)


def listen(port, data, query="", ctype="audio/wav", headers=None):
    h = {"Content-Type": ctype} if ctype else {}
    h.update(headers or {})
    return post(port, "/v1/listen" + (f"?{query}" if query else ""), data, h)


def assert_openai_error(r, status, needle=None):
    assert r.status == status, (r.status, r.body)
    assert r.header("content-type") == "application/json"
    err = r.json()["error"]
    assert set(err) >= {"message", "type", "param", "code"}, err
    if needle:
        assert needle in err["message"], err


def assert_deepgram_error(r, status, needle=None):
    assert r.status == status, (r.status, r.body)
    assert r.header("content-type") == "application/json"
    body = r.json()
    assert set(body) == {"err_code", "err_msg", "request_id"}, body
    assert body["request_id"] == r.header("x-request-id")
    if needle:
        assert needle in body["err_msg"], body


def assert_serving(port):
    """The daemon still answers (after a bad request)."""
    r = transcribe(port, response_format="text")
    assert r.status == 200, r.body
    assert norm(r.body.decode()) == JFK


def wav_bytes(frames=b"", rate=16000):
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(frames)
    return out.getvalue()


def float_wav(samples, rate=16000):
    """A 32-bit IEEE float WAV (format 3) of the given Python floats."""
    import struct
    data = struct.pack("<%df" % len(samples), *samples)
    fmt = struct.pack("<HHIIHH", 3, 1, rate, rate * 4, 4, 32)
    body = (b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" +
            struct.pack("<I", len(data)) + data)
    return b"RIFF" + struct.pack("<I", len(body)) + body


def jfk_floats():
    with wave.open(os.path.join(AUDIO, "jfk.wav")) as w:
        pcm = w.readframes(w.getnframes())
    import array
    return [v / 32768.0 for v in array.array("h", pcm)]


# --- out-of-range samples (issue 16) -------------------------------------


@pytest.mark.parametrize("value", [1e6, 3e38, -3.4e38])
def test_huge_float_sample_is_a_click(srv, value):
    """One huge but finite sample in a float WAV: clipped to full scale as
    faster-whisper's s16 decode clips it (its transcript of these files is
    jfk's), not a log-mel range that empties the answer."""
    x = jfk_floats()
    x[16000] = value
    r = transcribe(srv.port, data=float_wav(x), response_format="text")
    assert r.status == 200, r.body
    assert norm(r.body.decode()) == JFK


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")])
def test_non_finite_float_sample_400(srv, value):
    x = jfk_floats()
    x[24000] = value
    assert_openai_error(transcribe(srv.port, data=float_wav(x)), 400,
                        "audio sample at 1.500 s is not a finite number")
    assert_deepgram_error(listen(srv.port, float_wav(x)), 400, "not a finite number")
    import struct
    raw = struct.pack("<%df" % len(x), *x)
    assert_deepgram_error(listen(srv.port, raw, "encoding=linear32&sample_rate=16000",
                                 ctype=None), 400, "not a finite number")
    assert_serving(srv.port)


# --- OpenAI: response formats ------------------------------------------


def test_json_format(srv):
    r = transcribe(srv.port)
    assert r.status == 200, r.body
    assert r.header("content-type") == "application/json"
    body = r.json()
    assert norm(body["text"]) == JFK
    assert body["usage"] == {"type": "duration", "seconds": 11}


def test_json_is_default_and_explicit_json_is_same(srv):
    a = transcribe(srv.port).json()
    b = transcribe(srv.port, response_format="json").json()
    assert a == b


def test_text_format(srv):
    r = transcribe(srv.port, response_format="text")
    assert r.status == 200
    assert r.header("content-type") == TEXT_PLAIN
    assert r.body.endswith(b"\n")
    assert norm(r.body.decode()) == JFK


def parse_cues(text, sep):
    """Cue blocks separated by blank lines -> [(index line or None, start, end, text)]."""
    ts = r"(\d\d):(\d\d):(\d\d)" + re.escape(sep) + r"(\d\d\d)"
    cues = []
    for block in text.strip("\n").split("\n\n"):
        lines = block.split("\n")
        idx = lines.pop(0) if "-->" not in lines[0] else None
        m = re.fullmatch(ts + " --> " + ts, lines[0])
        assert m, lines
        g = [int(x) for x in m.groups()]
        start = g[0] * 3600 + g[1] * 60 + g[2] + g[3] / 1000
        end = g[4] * 3600 + g[5] * 60 + g[6] + g[7] / 1000
        assert len(lines) == 2 and lines[1] == lines[1].strip() and lines[1], lines
        cues.append((idx, start, end, lines[1]))
    return cues


def check_cue_times(cues):
    prev_end = 0.0
    for _, start, end, _ in cues:
        assert prev_end - 0.001 <= start <= end <= 11.0 + 0.001, cues
        prev_end = end


def test_srt_format(srv):
    r = transcribe(srv.port, response_format="srt")
    assert r.status == 200
    assert r.header("content-type") == TEXT_PLAIN
    text = r.body.decode()
    assert text.startswith("1\n00:00:00,000 --> ")
    assert text.endswith("\n\n")
    cues = parse_cues(text, ",")
    assert [c[0] for c in cues] == [str(i) for i in range(1, len(cues) + 1)]
    check_cue_times(cues)
    assert norm(" ".join(c[3] for c in cues)) == JFK
    # timestamps agree with verbose_json's segments
    segs = transcribe(srv.port, response_format="verbose_json").json()["segments"]
    assert [(round(s["start"], 3), round(s["end"], 3)) for s in segs] == \
           [(c[1], c[2]) for c in cues]


def test_vtt_format(srv):
    r = transcribe(srv.port, response_format="vtt")
    assert r.status == 200
    assert r.header("content-type") == TEXT_PLAIN
    text = r.body.decode()
    assert text.startswith("WEBVTT\n\n00:00:00.000 --> ")
    cues = parse_cues(text[len("WEBVTT\n\n"):], ".")
    assert all(c[0] is None for c in cues)
    check_cue_times(cues)
    assert norm(" ".join(c[3] for c in cues)) == JFK


def test_verbose_json_format(srv):
    r = transcribe(srv.port, response_format="verbose_json", timestamp_granularities="segment")
    assert r.status == 200
    assert r.header("content-type") == "application/json"
    body = r.json()
    assert set(body) == {"task", "language", "duration", "text", "segments", "usage"}
    assert body["task"] == "transcribe"
    assert body["language"] == "english"
    assert body["duration"] == pytest.approx(11.0, abs=0.01)
    assert norm(body["text"]) == JFK
    segs = body["segments"]
    assert len(segs) >= 1
    keys = {"id", "seek", "start", "end", "text", "tokens", "temperature", "avg_logprob",
            "compression_ratio", "no_speech_prob"}
    for i, s in enumerate(segs):
        assert set(s) == keys, s
        assert s["id"] == i
        assert isinstance(s["seek"], int)
        assert 0 <= s["start"] <= s["end"] <= 11.0
        assert all(isinstance(t, int) for t in s["tokens"]) and s["tokens"]
        assert s["temperature"] == 0.0
        assert s["avg_logprob"] < 0
        assert 0 <= s["no_speech_prob"] <= 1
    assert norm("".join(s["text"] for s in segs)) == JFK


def test_options_prompt_language_temperature_beam(srv):
    r = transcribe(srv.port, response_format="verbose_json", language="en",
                   prompt="A speech by President Kennedy.", temperature="0", beam_size="4")
    assert r.status == 200, r.body
    assert wer(JFK, r.json()["text"]) <= 0.1
    r = transcribe(srv.port, response_format="verbose_json", temperature="0.3")
    assert r.status == 200, r.body
    assert all(s["temperature"] == pytest.approx(0.3) for s in r.json()["segments"])


def test_unknown_fields_are_ignored(srv):
    r = transcribe(srv.port, chunking_strategy="auto", **{"include[]": "logprobs"})
    assert r.status == 200, r.body
    assert norm(r.json()["text"]) == JFK


@pytest.mark.parametrize("name,max_wer", [
    ("jfk.mp3", 0.1), ("LJ001-0004.flac", 0.1), ("LDC93S1_pcms16le_1_8000.wav", 0.4)])
def test_other_containers_and_rates(srv, name, max_wer):
    r = transcribe(srv.port, clip(name), filename=name, response_format="verbose_json")
    assert r.status == 200, r.body
    body = r.json()
    ref = manifest()[name]
    assert body["duration"] == pytest.approx(float(ref["duration_s"]), abs=0.1)
    assert wer(ref["reference_transcript"], body["text"]) <= max_wer, body["text"]


# tests/data/make-containers.sh: jfk.wav in the containers clients send
# (a browser's MediaRecorder WebM without duration or cues, Ogg Opus and
# Vorbis, AAC in M4A, MP3 behind an ID3 tag), each sent to both APIs.
CONTAINERS = ["jfk.webm", "jfk.opus", "jfk.ogg", "jfk.m4a", "jfk-id3.mp3"]


@pytest.mark.parametrize("name", CONTAINERS)
def test_browser_and_lossy_containers(srv, name):
    data = clip(os.path.join("containers", name))
    r = transcribe(srv.port, data, filename=name, response_format="verbose_json")
    assert r.status == 200, r.body
    assert r.json()["duration"] == pytest.approx(11.0, abs=0.1)
    assert wer(JFK, r.json()["text"]) <= 0.1, r.json()["text"]
    r = listen(srv.port, data, ctype="application/octet-stream")
    assert r.status == 200, r.body
    assert wer(JFK, dg_alt(r.json())["transcript"]) <= 0.1


@pytest.mark.parametrize("name", CONTAINERS + ["jfk-1s-51.mkv", "jfk-1s-ext24.wav"])
def test_damaged_containers_400_or_415(srv, name):
    """The first 64 bytes (a cut header), random bytes after the first
    kilobyte, and the first half: a 400 or 415 with a message, or (half a
    file) the audio that is there; never a 500."""
    data = clip(os.path.join("containers", name))
    rnd = random.Random(name)
    damaged = bytearray(data)
    for i in range(1024, len(damaged)):
        damaged[i] = rnd.randrange(256)
    for body in (data[:64], bytes(damaged), data[:len(data) // 2]):
        r = transcribe(srv.port, body, filename=name)
        assert r.status in (200, 400, 415), (r.status, r.body)
        if r.status != 200:
            assert r.json()["error"]["message"], r.body
    assert_serving(srv.port)


# --- OpenAI: the official client ----------------------------------------


def openai_client(port, key="unused"):
    from openai import OpenAI
    return OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=key, max_retries=0,
                  timeout=300)


def check_openai_client(client):
    path = os.path.join(AUDIO, "jfk.wav")
    with open(path, "rb") as f:
        t = client.audio.transcriptions.create(model=MODEL, file=f, response_format="json")
    assert norm(t.text) == JFK
    with open(path, "rb") as f:
        text = client.audio.transcriptions.create(model=MODEL, file=f, response_format="text")
    assert norm(text) == JFK
    with open(path, "rb") as f:
        v = client.audio.transcriptions.create(model=MODEL, file=f,
                                               response_format="verbose_json",
                                               timestamp_granularities=["segment"])
    assert v.language == "english" and v.duration == pytest.approx(11.0, abs=0.01)
    assert norm(v.text) == JFK and v.segments and v.segments[0].start == 0.0
    with open(path, "rb") as f:
        srt = client.audio.transcriptions.create(model=MODEL, file=f, response_format="srt")
    assert srt.startswith("1\n00:00:00,000 --> ")


def test_openai_client(srv):
    check_openai_client(openai_client(srv.port))


def test_openai_client_with_api_key(keyed):
    import openai
    check_openai_client(openai_client(keyed.port, API_KEY))
    with pytest.raises(openai.AuthenticationError):
        with open(os.path.join(AUDIO, "jfk.wav"), "rb") as f:
            openai_client(keyed.port, "wrong-key").audio.transcriptions.create(model=MODEL, file=f)


def test_openai_client_errors(srv):
    import openai
    client = openai_client(srv.port)
    with open(os.path.join(AUDIO, "jfk.wav"), "rb") as f:
        with pytest.raises(openai.NotFoundError) as e:
            client.audio.transcriptions.create(model="no-such-model", file=f)
    assert e.value.code == "model_not_found"
    with open(os.path.join(AUDIO, "jfk.wav"), "rb") as f:
        with pytest.raises(openai.BadRequestError, match="verbose_json"):
            client.audio.transcriptions.create(model=MODEL, file=f, response_format="json",
                                               timestamp_granularities=["word"])


# --- OpenAI: bad input --------------------------------------------------


@pytest.mark.parametrize("fields,needle,param", [
    ({"temperature": "abc"}, "temperature", "temperature"),
    ({"temperature": "1.5"}, "temperature", "temperature"),
    ({"temperature": "1e400"}, "temperature", "temperature"),
    ({"beam_size": "99"}, "beam_size", "beam_size"),
    ({"beam_size": "x"}, "beam_size", "beam_size"),
    ({"response_format": "xml"}, "response_format", "response_format"),
    ({"response_format": "verbose_json", "timestamp_granularities[]": "line"}, "'word' or",
     "timestamp_granularities[]"),
    ({"timestamp_granularities[]": "word"}, "verbose_json", "timestamp_granularities[]"),
    # the field as sent, without brackets too
    ({"response_format": "verbose_json", "timestamp_granularities": "line"},
     "'timestamp_granularities' must be", "timestamp_granularities"),
    ({"timestamp_granularities": "word"}, "'timestamp_granularities' needs response_format",
     "timestamp_granularities"),
    ({"prompt": "Ask not\x00 what"}, "NUL", "prompt"),
    ({"language": "e\x00n"}, "'language' must be text (it holds a NUL byte)", "language"),
    ({"model": MODEL + "\x00"}, "'model' must be text", "model"),
    ({"stream": "true"}, "stream", "stream"),
    ({"batched": "maybe"}, "batched", "batched"),
    ({"vad_filter": "maybe"}, "vad_filter", "vad_filter"),
    ({"language": "zz"}, "language", "language"),
    ({"language": "english"}, "language", "language"),
    ({"language": "x" * 20}, "language", "language"),
    ({"model": ""}, "model", "model"),
])
def test_openai_bad_params_400(srv, fields, needle, param):
    """A value a field cannot take is named, as the generation routes name
    theirs: {"param": the field, "code": "invalid_value"}."""
    r = transcribe(srv.port, **fields)
    assert_openai_error(r, 400, needle)
    err = r.json()["error"]
    assert (err["param"], err["code"], err["type"]) == (
        param, "invalid_value", "invalid_request_error"), err


def test_openai_indexed_timestamp_granularities(srv):
    """timestamp_granularities[0], [1], ... (PHP's http_build_query and
    qs-style "indices" encoders) are the [] field; they were ignored as
    unknown fields, bad values too."""
    r = transcribe(srv.port, response_format="verbose_json",
                   **{"timestamp_granularities[0]": "word",
                      "timestamp_granularities[1]": "segment"})
    assert r.status == 200, r.body
    body = r.json()
    assert body["words"] and body["segments"]
    r = transcribe(srv.port, response_format="verbose_json",
                   **{"timestamp_granularities[0]": "bogus"})
    assert_openai_error(r, 400, "'timestamp_granularities[0]' must be 'word' or 'segment'")
    assert r.json()["error"]["param"] == "timestamp_granularities[0]"


def test_errors_echoing_bad_utf8_stay_json(srv):
    """A message that echoes a value holding bytes that are not UTF-8 (a
    model name, a language) is still JSON in the protocol's shape, the
    bytes as U+FFFD: jansson refused the string, and the error went out as
    text/plain (a fresh user's finding)."""
    r = transcribe(srv.port, language=b"\xff\xfe")
    assert_openai_error(r, 400, "'\ufffd\ufffd' is not a language code")
    r = transcribe(srv.port, model=b"whisper\xff")
    assert_openai_error(r, 404, "The model 'whisper\ufffd' does not exist")
    r = listen(srv.port, clip("jfk.wav"), "language=%FF%FE")
    assert r.status == 400 and r.header("content-type") == "application/json", r.body
    assert "'\ufffd\ufffd' is not a language code" in r.json()["err_msg"]


@pytest.mark.parametrize("query,punctuated", [
    ("punctuate=true&punctuate=false", False),
    ("punctuate=false&punctuate=true", True),
    ("smart_format=true&smart_format=false", False),
    ("punctuate=false&smart_format=true", True),
])
def test_deepgram_repeated_key_last_value_wins(srv, query, punctuated):
    """A repeated query key's last value wins (README), punctuate and
    smart_format too (any true made them true); either one punctuates."""
    r = listen(srv.port, clip("jfk.wav"), query)
    assert r.status == 200, r.body
    t = dg_alt(r.json())["transcript"]
    assert t.lower().startswith("and so my fellow americans"), t
    assert (t[0] == "A") == punctuated, t  # punctuated: the model's capitals kept


@pytest.mark.parametrize("value", ["false", "False", "0"])
def test_openai_stream_false_spelled_as_python_sends_it(srv, value):
    """stream=false is taken as the boolean fields take it: Python's
    requests sends a False field as 'False'."""
    r = transcribe(srv.port, response_format="text", stream=value)
    assert r.status == 200, r.body
    assert norm(r.body.decode()) == JFK


def test_openai_errors_without_a_field_keep_param_null(srv):
    """A bad request no one field is at fault for keeps param null and its
    own code: a missing field, a body that is no form, undecodable audio."""
    ctype, body = multipart([("model", MODEL)])
    r = post(srv.port, "/v1/audio/transcriptions", body, {"Content-Type": ctype})
    cases = [
        (r, 400, "invalid_request"),
        (transcribe(srv.port, model=None), 400, "invalid_request"),
        (post(srv.port, "/v1/audio/transcriptions", b"--abc--\r\n",
              {"Content-Type": "multipart/form-data; boundary=abc"}), 400, "invalid_request"),
        (post(srv.port, "/v1/audio/transcriptions", b'{"model": "x"}',
              {"Content-Type": "application/json"}), 415, "unsupported_media_type"),
        (transcribe(srv.port, b""), 400, "invalid_request"),
        (transcribe(srv.port, b"this is plain text, not audio at all " * 20), 415,
         "unsupported_media_type"),
    ]
    for r, status, code in cases:
        assert_openai_error(r, status)
        err = r.json()["error"]
        assert (err["param"], err["code"]) == (None, code), err


def test_audio_field_errors_name_the_field_on_translations_too(srv):
    ctype, body = multipart([("model", MODEL), ("temperature", "1e400")],
                            [("file", "jfk.wav", clip("jfk.wav"), "audio/wav")])
    r = post(srv.port, "/v1/audio/translations", body, {"Content-Type": ctype})
    assert_openai_error(r, 400, "'temperature' must be a number from 0 to 1")
    err = r.json()["error"]
    assert (err["param"], err["code"]) == ("temperature", "invalid_value"), err


def test_invalid_utf8_prompt_400(srv):
    r = transcribe(srv.port, prompt=b"\xff\xfe\xc3 not text")
    assert_openai_error(r, 400, "UTF-8")
    assert (r.json()["error"]["param"], r.json()["error"]["code"]) == ("prompt", "invalid_value")
    r = listen(srv.port, clip("jfk.wav"), query="language=zz")
    assert_deepgram_error(r, 400, "language")
    assert_serving(srv.port)


def test_openai_missing_file_and_model_400(srv):
    ctype, body = multipart([("model", MODEL)])
    r = post(srv.port, "/v1/audio/transcriptions", body, {"Content-Type": ctype})
    assert_openai_error(r, 400, "'file'")
    assert_openai_error(transcribe(srv.port, model=None), 400, "'model'")


def test_openai_unknown_model_404_and_generation_model_400(srv):
    r = transcribe(srv.port, model="no-such-model")
    assert_openai_error(r, 404)
    assert r.json()["error"]["code"] == "model_not_found"
    assert r.json()["error"]["param"] == "model"
    r = transcribe(srv.port, model="gemma-3-270m")
    assert_openai_error(r, 400, "generation")
    err = r.json()["error"]
    assert (err["param"], err["code"]) == ("model", "invalid_value"), err


@pytest.mark.parametrize("ctype,body,status,needle", [
    ("multipart/form-data", b"--x\r\n", 400, "boundary"),
    ('multipart/form-data; boundary=""', b"--x\r\n", 400, "boundary"),
    ("multipart/form-data; boundary=abc", b"no delimiter here", 400, "delimiter"),
    ("multipart/form-data; boundary=abc",
     b'--abc\r\nContent-Disposition: form-data; name="model"\r\n\r\nm\r\n', 400, "closing"),
    ("multipart/form-data; boundary=abc",
     b"--abc\r\nContent-Type: text/plain\r\n\r\nm\r\n--abc--\r\n", 400, "Content-Disposition"),
    ("multipart/form-data; boundary=abc",
     b'--abc\nContent-Disposition: form-data; name="model"\n\nm\n--abc--\n', 400, "CRLF"),
    ("multipart/form-data; boundary=abc", b"--abc--\r\n", 400, "no parts"),
    ("multipart/form-data; boundary=abc",
     b'--abc\r\nContent-Disposition: attachment; name="x"\r\n\r\nm\r\n--abc--', 400, "form-data"),
    ("application/json", b'{"model": "x"}', 415, "multipart/form-data"),
])
def test_openai_malformed_multipart(srv, ctype, body, status, needle):
    r = post(srv.port, "/v1/audio/transcriptions", body, {"Content-Type": ctype})
    assert_openai_error(r, status, needle)


def test_openai_field_over_64k_400(srv):
    r = transcribe(srv.port, prompt="x" * 70000)
    assert_openai_error(r, 400, "('prompt'): a field value over 65536 bytes")


def test_openai_bad_audio(srv):
    wav = clip("jfk.wav")
    gz = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + bytes(500)
    png = (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10\x00\x00\x00\x10\x08\x02"
           b"\x00\x00\x00\x90\x91h6" + bytes(200))
    cases = [
        (b"", 400, "empty"),
        (b"this is plain text, not audio at all " * 20, 415, None),
        (png, 415, None),
        (gz, 415, None),
        (wav[:30], 415, None),             # truncated WAV header
        (wav_bytes(b""), 400, "no samples"),  # valid header, 0 frames
    ]
    for data, status, needle in cases:
        assert_openai_error(transcribe(srv.port, data), status, needle)
    assert_serving(srv.port)


def test_openai_body_over_limit_413(srv):
    r = transcribe(srv.port, bytes(BODY_LIMIT + 1))
    assert_openai_error(r, 413)
    assert r.json()["error"]["code"] == "body_too_large"
    assert_serving(srv.port)


def test_openai_missing_api_key_401(keyed):
    assert_openai_error(transcribe(keyed.port), 401)
    r = transcribe(keyed.port, headers={"Authorization": f"Bearer {API_KEY}"})
    assert r.status == 200 and norm(r.json()["text"]) == JFK


# --- Deepgram -----------------------------------------------------------


def dg_alt(body):
    return body["results"]["channels"][0]["alternatives"][0]


def test_deepgram_wav(srv):
    data = clip("jfk.wav")
    # other Deepgram parameters, however long, are ignored
    r = listen(srv.port, data, f"model={MODEL}&keyterm={'x' * 300}&tag=a%20b&smart_format=false")
    assert r.status == 200, r.body
    assert r.header("content-type") == "application/json"
    body = r.json()
    md = body["metadata"]
    assert md["transaction_key"] == "deprecated"
    assert md["request_id"] == r.header("x-request-id")
    assert md["sha256"] == hashlib.sha256(data).hexdigest()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", md["created"])
    assert md["duration"] == pytest.approx(11.0, abs=0.01)
    assert md["channels"] == 1
    assert md["models"] == [MODEL] and MODEL in md["model_info"]
    alt = dg_alt(body)
    # no punctuate: lowercase words without punctuation, no punctuated_word
    assert alt["transcript"] == JFK.lower()
    assert 0 < alt["confidence"] <= 1
    ws = alt["words"]
    assert [w["word"] for w in ws] == JFK.lower().split()
    assert all(set(w) == {"word", "start", "end", "confidence"} for w in ws)
    assert all(a["end"] == pytest.approx(b["start"]) or a["end"] <= b["start"]
               for a, b in zip(ws, ws[1:]))
    assert ws[0]["start"] == 0.0 and ws[-1]["end"] <= 11.0
    assert "utterances" not in body["results"]


def stereo_wav(left, right):
    """A 16 kHz 16-bit stereo WAV of two mono 16 kHz WAVs' frames, the
    shorter padded with silence."""
    import array
    chans = []
    for data in (left, right):
        with wave.open(io.BytesIO(data)) as w:
            assert w.getframerate() == 16000 and w.getnchannels() == 1
            chans.append(array.array("h", w.readframes(w.getnframes())))
    n = max(len(c) for c in chans)
    both = array.array("h", [0]) * (2 * n)
    for ch, c in enumerate(chans):
        both[ch:2 * len(c):2] = c
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(both.tobytes())
    return out.getvalue()


def test_deepgram_multichannel(srv):
    """multichannel=true: one results.channels entry per channel, each the
    transcript of that channel alone (as each sent mono), utterances
    tagged with their channel; without it, one channel (the mean)."""
    other = clip("sense_and_sensibility_01_austen_64kb-0870.wav")
    data = stereo_wav(clip("jfk.wav"), other)
    r = listen(srv.port, data, "multichannel=true&utterances=true")
    assert r.status == 200, r.body
    body = r.json()
    assert body["metadata"]["channels"] == 2
    chans = body["results"]["channels"]
    assert len(chans) == 2
    assert chans[0]["alternatives"][0]["transcript"] == JFK.lower()
    alone = listen(srv.port, other)
    assert alone.status == 200, alone.body
    assert chans[1]["alternatives"][0]["transcript"] == dg_alt(alone.json())["transcript"]
    assert chans[1]["alternatives"][0]["transcript"]
    utts = body["results"]["utterances"]
    assert {u["channel"] for u in utts} == {0, 1}
    for c in (0, 1):
        assert " ".join(u["transcript"] for u in utts if u["channel"] == c) == \
            chans[c]["alternatives"][0]["transcript"]
    assert len({u["id"] for u in utts}) == len(utts)
    # multichannel=false (the default): the channels' mean, one result
    for q in ("", "multichannel=false"):
        r = listen(srv.port, data, q)
        assert r.status == 200, r.body
        assert r.json()["metadata"]["channels"] == 1
        assert len(r.json()["results"]["channels"]) == 1
    # mono audio with multichannel=true: one channel
    r = listen(srv.port, clip("jfk.wav"), "multichannel=true&batched=true")
    assert r.status == 200, r.body
    assert [c["alternatives"][0]["transcript"] for c in r.json()["results"]["channels"]] == \
        [JFK.lower()]
    assert_deepgram_error(listen(srv.port, data, "multichannel=maybe"), 400, "multichannel")
    # each channel costs a full pass: more than 16 are refused with
    # multichannel; more than 64 in any container (libswresample's limit)
    many = io.BytesIO()
    with wave.open(many, "wb") as w:
        w.setnchannels(17)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(b"\0\0" * 17 * 160)
    assert_deepgram_error(listen(srv.port, many.getvalue(), "multichannel=true"), 400,
                          "the audio has 17 channels; at most 16")
    assert listen(srv.port, many.getvalue()).status == 200
    huge = bytearray(wav_bytes(b"\0\0" * 300 * 16))
    huge[22:24] = (300).to_bytes(2, "little")  # channels
    huge[28:32] = (16000 * 600).to_bytes(4, "little")  # byte rate
    huge[32:34] = (600).to_bytes(2, "little")  # block align
    assert_deepgram_error(listen(srv.port, bytes(huge), "multichannel=true"), 415, "300 channels")
    assert_serving(srv.port)


def test_deepgram_default_model_punctuate_utterances(srv):
    r = listen(srv.port, clip("LJ001-0004.flac"), "punctuate=true&utterances=true&diarize=false",
               ctype="audio/flac")
    assert r.status == 200, r.body
    body = r.json()
    alt = dg_alt(body)
    assert body["metadata"]["models"] == [MODEL]
    assert alt["transcript"].startswith("produced the block books,")
    assert all(w["punctuated_word"] for w in alt["words"])
    assert alt["words"][3]["punctuated_word"] == "books,"
    assert alt["words"][3]["word"] == "books"
    utts = body["results"]["utterances"]
    assert utts
    for u in utts:
        assert set(u) >= {"start", "end", "confidence", "channel", "transcript", "words", "id"}
        assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}",
                            u["id"])
        assert u["words"][0]["start"] == pytest.approx(u["start"])
        assert u["words"][-1]["end"] == pytest.approx(u["end"])
    assert " ".join(u["transcript"] for u in utts) == alt["transcript"]


@pytest.mark.parametrize("name,words", [("1089-134686-0000.flac", ["flower-fattened"]),
                                        ("LJ001-0007.mp3", ["42-line"])])
def test_deepgram_hyphenated_words_stay_whole(srv, name, words):
    """Whisper's word split gives " flower" and "-fattened" (faster-whisper's words
    too); Deepgram's words and transcript join them as the segment's text
    does, so the transcript equals the OpenAI route's text (a fresh user
    saw "fat -mutten" and "flower -fattened")."""
    data = clip(name)
    r = listen(srv.port, data, "punctuate=true", ctype="application/octet-stream")
    assert r.status == 200, r.body
    alt = dg_alt(r.json())
    oa = transcribe(srv.port, data, filename=name)
    assert oa.status == 200, oa.body
    assert alt["transcript"] == oa.json()["text"].strip()
    got = [w for w in alt["words"] if w["punctuated_word"] in words]
    assert [w["punctuated_word"] for w in got] == words, alt["transcript"]
    assert [w["word"] for w in got] == words
    for w in got:
        assert 0 <= w["start"] < w["end"] and 0 <= w["confidence"] <= 1
    assert not [w for w in alt["words"] if w["punctuated_word"].startswith("-")]
    plain = dg_alt(listen(srv.port, data, ctype="application/octet-stream").json())
    assert all(w in plain["transcript"].split() for w in words)


@pytest.mark.parametrize("name,ctype", [("jfk.mp3", "audio/mpeg"), ("jfk.wav", None),
                                        ("jfk.wav", "application/octet-stream"),
                                        ("jfk.wav", "audio/*")])
def test_deepgram_content_types(srv, name, ctype):
    r = listen(srv.port, clip(name), "language=en-US", ctype=ctype)
    assert r.status == 200, r.body
    assert wer(JFK, dg_alt(r.json())["transcript"]) <= 0.1


def test_deepgram_raw_linear16(srv):
    with wave.open(os.path.join(AUDIO, "LDC93S1_pcms16le_1_8000.wav")) as w:
        rate, pcm = w.getframerate(), w.readframes(w.getnframes())
    r = listen(srv.port, pcm, f"encoding=linear16&sample_rate={rate}&channels=1",
               ctype="application/octet-stream")
    assert r.status == 200, r.body
    body = r.json()
    assert body["metadata"]["duration"] == pytest.approx(len(pcm) / 2 / rate, abs=0.01)
    ref = manifest()["LDC93S1_pcms16le_1_8000.wav"]["reference_transcript"]
    assert wer(ref, dg_alt(body)["transcript"]) <= 0.4


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_deepgram_client(srv, keyed):
    from deepgram import DeepgramClient
    from deepgram.environment import DeepgramClientEnvironment
    data = clip("jfk.wav")
    for d, key in ((srv, "any-key"), (keyed, API_KEY)):
        base = f"127.0.0.1:{d.port}"
        env = DeepgramClientEnvironment(base=f"http://{base}", production=f"ws://{base}",
                                        agent=f"ws://{base}", agent_rest=f"http://{base}")
        client = DeepgramClient(api_key=key, environment=env, max_retries=0, timeout=300)
        resp = client.listen.v1.media.transcribe_file(request=data, model=MODEL,
                                                      punctuate=True, utterances=True)
        assert resp.metadata.sha256 == hashlib.sha256(data).hexdigest()
        assert resp.metadata.duration == pytest.approx(11.0, abs=0.01)
        alt = resp.results.channels[0].alternatives[0]
        assert norm(alt.transcript) == JFK
        assert alt.words[0].word == "and" and alt.words[0].punctuated_word == "And"
        assert resp.results.utterances and resp.results.utterances[0].transcript


def test_deepgram_client_errors(keyed):
    from deepgram import DeepgramClient
    from deepgram.core.api_error import ApiError
    from deepgram.environment import DeepgramClientEnvironment
    base = f"127.0.0.1:{keyed.port}"
    env = DeepgramClientEnvironment(base=f"http://{base}", production=f"ws://{base}",
                                    agent=f"ws://{base}", agent_rest=f"http://{base}")
    bad = DeepgramClient(api_key="wrong", environment=env, max_retries=0)
    with pytest.raises(ApiError) as e:
        bad.listen.v1.media.transcribe_file(request=clip("jfk.wav"))
    assert e.value.status_code == 401
    good = DeepgramClient(api_key=API_KEY, environment=env, max_retries=0)
    with pytest.raises(ApiError) as e:
        good.listen.v1.media.transcribe_url(url="https://example.invalid/a.wav")
    assert e.value.status_code == 400 and "URL" in e.value.body["err_msg"]


def test_deepgram_bad_input(srv):
    wav = clip("jfk.wav")
    cases = [
        (b"", "audio/wav", "", 400, "empty"),
        (b"not audio " * 100, "audio/wav", "", 415, None),
        (wav[:30], "audio/wav", "", 415, None),
        (wav_bytes(b""), "audio/wav", "", 400, "no samples"),
        (b"\x89PNG\r\n\x1a\n" + bytes(300), "image/png", "", 415, "Content-Type"),
        (b"\x89PNG\r\n\x1a\n" + bytes(300), "application/octet-stream", "", 415, None),
        (b'{"url": "https://example.com/a.wav"}', "application/json", "", 400, "URL"),
        (b"{not json", "application/json", "", 400, "url"),
        (wav, "audio/wav", "model=nope", 404, "nope"),
        (wav, "audio/wav", "model=gemma-3-270m", 400, "generation"),
        (wav, "audio/wav", "encoding=linear16", 400, "sample_rate"),
        (wav, "audio/wav", "encoding=amr-nb&sample_rate=8000", 400, "encoding"),
        (wav, "audio/wav", "encoding=linear16&sample_rate=5", 400, "sample_rate"),
        (wav, "audio/wav", "punctuate=maybe", 400, "punctuate"),
        (wav, "audio/wav", "model=%zz", 400, "query"),
    ]
    for data, ctype, query, status, needle in cases:
        assert_deepgram_error(listen(srv.port, data, query, ctype=ctype), status, needle)
    assert_serving(srv.port)


def test_deepgram_body_over_limit_413(srv):
    r = listen(srv.port, bytes(BODY_LIMIT + 1))
    assert_deepgram_error(r, 413)
    assert r.json()["err_code"] == "body_too_large"
    assert_serving(srv.port)


def test_deepgram_token_auth(keyed):
    assert_deepgram_error(listen(keyed.port, clip("jfk.wav")), 401)
    r = listen(keyed.port, clip("jfk.wav"), headers={"Authorization": f"Token {API_KEY}"})
    assert r.status == 200 and dg_alt(r.json())["transcript"] == JFK.lower()


# --- concurrency and lifecycle -------------------------------------------


def test_concurrent_requests(srv):
    """Several transcriptions in flight at once, over both protocols."""
    def one(i):
        if i % 2:
            r = listen(srv.port, clip("jfk.wav"))
            return r.status, dg_alt(r.json())["transcript"] if r.status == 200 else r.body
        r = transcribe(srv.port, response_format="text")
        return r.status, r.body.decode().lower().strip()
    with concurrent.futures.ThreadPoolExecutor(6) as ex:
        results = list(ex.map(one, range(6)))
    for status, text in results:
        assert status == 200, text
        assert norm(text) == JFK.lower()


def test_client_gone_mid_transcription(srv):
    """A client that hangs up while its job runs: the job finishes, its
    response is dropped, and the daemon keeps serving (ASan checks the
    connection is not freed under the job)."""
    ctype, body = multipart([("model", MODEL)],
                            [("file", "a.flac", clip("1089-134686-0000.flac"), "audio/flac")])
    for _ in range(3):
        s = connect(srv.port)
        s.sendall(f"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\n"
                  f"Content-Type: {ctype}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        s.close()
    assert_serving(srv.port)


def test_sigterm_lets_a_transcription_finish(fresh_daemon):
    """Drain: a request whose job is on the thread pool when SIGTERM comes
    still gets its answer (with Connection: close), then the daemon exits 0.
    The drain timeout is far longer than the transcription, however slow."""
    d = fresh_daemon(audio_config(limits={"drain_timeout_ms": 600000}))
    ctype, body = multipart([("model", MODEL), ("response_format", "text")],
                            [("file", "a.flac", clip("1089-134686-0000.flac"), "audio/flac")])
    before = model_stats(d.port, MODEL)["requests"]["submitted"]
    with connect(d.port, timeout=300) as s:
        s.sendall(f"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\n"
                  f"Content-Type: {ctype}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                  + body)
        wait_submitted(d.port, MODEL, before)  # in the engine, not still being read
        d.proc.send_signal(signal.SIGTERM)
        r = Reader(s).read_response()
    assert r.status == 200 and r.header("connection") == "close"
    ref = manifest()["1089-134686-0000.flac"]["reference_transcript"]
    assert wer(ref, r.body.decode()) <= 0.3
    assert d.proc.wait(120) == 0


def test_keep_alive_after_transcription(srv):
    ctype, body = multipart([("model", MODEL), ("response_format", "text")],
                            [("file", "jfk.wav", clip("jfk.wav"), "audio/wav")])
    req = (f"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nContent-Type: {ctype}\r\n"
           f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    with connect(srv.port, timeout=300) as s:
        s.sendall(req + req)  # pipelined
        rd = Reader(s)
        for _ in range(2):
            r = rd.read_response()
            assert r.status == 200 and norm(r.body.decode()) == JFK
        s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        assert rd.read_response().status == 200


def test_metrics_count_audio_routes(srv):
    transcribe(srv.port)
    with connect(srv.port) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        text = Reader(s).read_response().body.decode()
    assert 'route="/v1/audio/transcriptions"' in text
    assert 'route="/v1/listen"' in text


# --- cancellation ----------------------------------------------------------

def long_wav(repeats):
    with wave.open(os.path.join(AUDIO, "jfk.wav")) as w:
        frames = w.readframes(w.getnframes())
    return wav_bytes(frames * repeats)


def abandon(port, body, n):
    """n clients that post body to /v1/listen and hang up once the daemon
    has queued all n."""
    before = model_stats(port, MODEL)["requests"]["submitted"]
    socks = []
    for _ in range(n):
        s = connect(port)
        s.sendall(b"POST /v1/listen HTTP/1.1\r\nHost: a\r\nContent-Type: audio/wav\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + body)
        socks.append(s)
    wait_submitted(port, MODEL, before, n)
    for s in socks:
        s.close()


def test_disconnect_cancels_transcription(fresh_daemon):
    d = fresh_daemon(audio_config(limits={"max_body_bytes": 64 << 20}))
    abandon(d.port, long_wav(30), 5)   # 5 x 330 s of audio, nobody listening
    # the daemon's record: all five cancelled (not run to the end, which
    # would count them "completed"), nothing left running or waiting
    idle = lambda st: (st["requests"]["cancelled"] == 5 and st["queue_depth"] == 0
                       and sum(x["running"] for x in st["replicas"]) == 0)
    wait_until(lambda: idle(model_stats(d.port, MODEL)), "abandoned jobs kept the workers busy")
    st = model_stats(d.port, MODEL)
    assert st["requests"]["completed"] == 0, st["requests"]
    # (those still waiting were ended in the queue: no replica record)
    assert all(x["outcome"] == "cancelled" for x in st["recent_requests"]), st
    r = transcribe(d.port)
    assert r.status == 200
    wait_until(lambda: d.stderr_text().count("status=499") >= 5, "no 499 logged", timeout=60)
    assert d.stderr_text().count("status=499") == 5


def test_sigterm_stops_a_long_transcription(fresh_daemon):
    d = fresh_daemon(audio_config(limits={"drain_timeout_ms": 1000, "max_body_bytes": 64 << 20}))
    s = connect(d.port)
    body = long_wav(60)
    before = model_stats(d.port, MODEL)["requests"]["submitted"]
    s.sendall(b"POST /v1/listen HTTP/1.1\r\nHost: a\r\nContent-Type: audio/wav\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body) + body)
    wait_submitted(d.port, MODEL, before)
    d.proc.send_signal(signal.SIGTERM)
    # 660 s of audio take minutes; the 1 s drain stops it (a hang guard here)
    assert d.proc.wait(timeout=60) == 0
    assert "drain timeout" in d.stderr_text()  # it was still transcribing
    err = read_deadline_answer(s, 10)  # in Deepgram's error shape
    assert err["err_code"] == "shutting_down", err
    assert "limits.drain_timeout_ms (1000 ms)" in err["err_msg"], err
