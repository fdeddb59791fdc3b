"""KServe v2 REST inference and Triton's generate extension, driven by the
unmodified tritonclient.http from PyPI (and raw requests for the cases a
client library will not send): health, metadata, infer for both default
models with JSON and binary tensor data, FP32 samples, generate and
generate_stream, and the errors. Answers are compared with the same work
done through the OpenAI routes of the same daemon."""
import json
import os
import wave

import pytest

from conftest import (ROOT, Daemon, assert_stopped_clean, big_body_limits, connect, make_config,
                      openai_transcript, read_to_close, request)

np = pytest.importorskip("numpy", reason="numpy comes with tritonclient in the test venv "
                                         "(scripts/install-deps)")
th = pytest.importorskip("tritonclient.http", reason="tritonclient[http] is in the test venv "
                                                     "(scripts/install-deps)")
from tritonclient.utils import InferenceServerException  # noqa: E402

JFK = os.path.join(ROOT, "tests", "data", "audio", "jfk.wav")
JFK_WORDS = "ask not what your country can do for you"
PROMPT = "The capital of France is"


BODY_LIMIT = 4 << 20


@pytest.fixture(scope="module")
def daemon():
    """Room for audio files in request bodies (conftest's daemon allows 64 KB)."""
    d = Daemon(make_config(limits=big_body_limits(BODY_LIMIT)))
    yield d
    assert_stopped_clean(d)


@pytest.fixture(scope="module")
def client(daemon):
    c = th.InferenceServerClient("127.0.0.1:%d" % daemon.port)
    yield c
    c.close()


def post(port, path, body, headers=None):
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    return request(port, "POST", path, headers=h, body=body if isinstance(body, bytes) else json.dumps(body).encode())


def test_health_and_metadata(client):
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("whisper-tiny.en") and client.is_model_ready("gemma-3-270m")
    assert not client.is_model_ready("nope")
    meta = client.get_server_metadata()
    assert meta["name"] == "inferd" and "binary_tensor_data" in meta["extensions"]
    assert "generate" in meta["extensions"]
    m = client.get_model_metadata("whisper-tiny.en")
    assert m["inputs"] == [{"name": "AUDIO", "datatype": "BYTES", "shape": [1]}]
    assert [o["name"] for o in m["outputs"]] == ["TRANSCRIPT", "SEGMENTS"]
    m = client.get_model_metadata("gemma-3-270m", model_version="1")
    assert m["inputs"][0]["name"] == "TEXT_INPUT" and m["outputs"][0]["name"] == "TEXT_OUTPUT"


def test_model_config_names_the_compute_type(client):
    """The compute type a transcription model runs in, its default resolved
    (tiny.en's folder stores float16: float32 products), is in Triton's
    backend parameters of the model configuration; a GGUF model has none."""
    cfg = client.get_model_config("whisper-tiny.en")
    assert cfg["parameters"] == {"compute_type": {"string_value": "float32"}}, cfg
    assert "parameters" not in client.get_model_config("gemma-3-270m")


def test_model_config_compute_type_int8():
    models = make_config()["models"]
    models[0]["compute_type"] = "int8"
    d = Daemon(make_config(models=models[:1]))
    try:
        r = request(d.port, "GET", "/v2/models/whisper-tiny.en/config")
        assert r.status == 200, r.body
        assert r.json()["parameters"]["compute_type"]["string_value"] == "int8"
    finally:
        assert_stopped_clean(d)


@pytest.mark.parametrize("binary_out", [False, True])
def test_transcription_infer_audio_bytes(client, daemon, binary_out):
    data = open(JFK, "rb").read()
    inp = th.InferInput("AUDIO", [1], "BYTES")
    inp.set_data_from_numpy(np.array([data], dtype=np.object_), binary_data=True)
    outs = [th.InferRequestedOutput("TRANSCRIPT", binary_data=binary_out),
            th.InferRequestedOutput("SEGMENTS", binary_data=binary_out)]
    r = client.infer("whisper-tiny.en", [inp], outputs=outs, request_id="req-7")
    text = r.as_numpy("TRANSCRIPT")[0]
    text = text.decode() if isinstance(text, bytes) else text
    assert text == openai_transcript(daemon.port, data)  # the same work, the same answer
    assert JFK_WORDS in text.lower()
    segs = r.as_numpy("SEGMENTS")[0]
    segs = json.loads(segs.decode() if isinstance(segs, bytes) else segs)
    assert segs and segs[0]["start"] == 0.0 and segs[-1]["end"] > 10.0
    assert "".join(s["text"] for s in segs).strip() == text
    assert r.get_response()["id"] == "req-7"


def test_transcription_word_timestamps(client):
    """parameters {"word_timestamps": true}: SEGMENTS carry their words,
    which spell out each segment's text."""
    inp = th.InferInput("AUDIO", [1], "BYTES")
    inp.set_data_from_numpy(np.array([open(JFK, "rb").read()], dtype=np.object_))
    r = client.infer("whisper-tiny.en", [inp], parameters={"word_timestamps": True})
    segs = json.loads(r.as_numpy("SEGMENTS")[0])
    assert [w["word"] for w in segs[0]["words"]][:3] == [" And", " so", " my"]
    for s in segs:
        assert "".join(w["word"] for w in s["words"]) == s["text"], s
    plain = client.infer("whisper-tiny.en", [inp])
    assert all("words" not in s for s in json.loads(plain.as_numpy("SEGMENTS")[0]))


def test_transcription_infer_only_requested_output(client):
    inp = th.InferInput("AUDIO", [1], "BYTES")
    inp.set_data_from_numpy(np.array([open(JFK, "rb").read()], dtype=np.object_))
    r = client.infer("whisper-tiny.en", [inp], outputs=[th.InferRequestedOutput("TRANSCRIPT")])
    assert [o["name"] for o in r.get_response()["outputs"]] == ["TRANSCRIPT"]
    assert r.as_numpy("SEGMENTS") is None


@pytest.mark.parametrize("binary_in", [False, True])
def test_transcription_infer_fp32_samples(client, daemon, binary_in):
    with wave.open(JFK) as w:
        rate = w.getframerate()
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16)
    x = pcm.astype(np.float32) / 32768.0
    if not binary_in:
        x = x[: rate * 4]  # JSON numbers: keep the body small
    inp = th.InferInput("AUDIO", [len(x)], "FP32")
    inp.set_data_from_numpy(x, binary_data=binary_in)
    r = client.infer("whisper-tiny.en", [inp], parameters={"sample_rate": rate})
    text = r.as_numpy("TRANSCRIPT")[0]
    text = text.decode() if isinstance(text, bytes) else text
    if binary_in:
        assert text == openai_transcript(daemon.port, open(JFK, "rb").read())
    else:
        assert text.lower().startswith("and so my fellow americans"), text


@pytest.mark.parametrize("binary", [False, True])
def test_generation_infer_matches_completions(client, daemon, binary):
    inp = th.InferInput("TEXT_INPUT", [1], "BYTES")
    inp.set_data_from_numpy(np.array([PROMPT], dtype=np.object_), binary_data=binary)
    r = client.infer("gemma-3-270m", [inp],
                     outputs=[th.InferRequestedOutput("TEXT_OUTPUT", binary_data=binary)],
                     parameters={"max_tokens": 12, "temperature": 0})
    out = r.as_numpy("TEXT_OUTPUT")[0]
    out = out.decode() if isinstance(out, bytes) else out
    c = post(daemon.port, "/v1/completions", {"model": "gemma-3-270m", "prompt": PROMPT,
                                              "max_tokens": 12, "temperature": 0})
    assert c.status == 200
    assert out == c.json()["choices"][0]["text"] and out.strip()


def sse_events(port, path, body):
    data = json.dumps(body).encode()
    raw = ("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
           "Connection: close\r\n\r\n" % (path, len(data))).encode() + data
    with connect(port, timeout=60) as s:
        s.sendall(raw)
        buf = read_to_close(s)
    head, _, body = buf.partition(b"\r\n\r\n")
    assert b" 200 " in head.split(b"\r\n")[0] and b"text/event-stream" in head.lower()
    # de-chunk
    out, rest = b"", body
    while rest:
        size, _, rest = rest.partition(b"\r\n")
        n = int(size, 16)
        if n == 0:
            break
        out, rest = out + rest[:n], rest[n + 2:]
    return [json.loads(e[6:]) for e in out.decode().split("\n\n") if e.startswith("data: ")]


def test_generate_and_generate_stream(daemon):
    body = {"text_input": PROMPT, "parameters": {"max_tokens": 10, "temperature": 0}}
    r = post(daemon.port, "/v2/models/gemma-3-270m/generate", body)
    assert r.status == 200, r.body
    g = r.json()
    assert g["model_name"] == "gemma-3-270m" and g["text_output"].strip()
    ev = sse_events(daemon.port, "/v2/models/gemma-3-270m/generate_stream", body)
    assert len(ev) >= 2 and all(e["model_name"] == "gemma-3-270m" for e in ev)
    assert "".join(e["text_output"] for e in ev) == g["text_output"]
    # top-level sampling fields (Triton treats them as inputs) work too
    r = post(daemon.port, "/v2/models/gemma-3-270m/generate",
             {"text_input": PROMPT, "max_tokens": 10, "temperature": 0})
    assert r.json()["text_output"] == g["text_output"]


def expect_error(client, status, fn):
    with pytest.raises(InferenceServerException) as e:
        fn()
    assert e.value.status() == str(status) or e.value.status() == status, (e.value.status(), e.value)
    return str(e.value)


def test_infer_errors_through_the_client(client):
    audio = th.InferInput("AUDIO", [1], "BYTES")
    audio.set_data_from_numpy(np.array([b"x" * 100], dtype=np.object_))
    expect_error(client, 404, lambda: client.infer("nope", [audio]))
    two = th.InferInput("AUDIO", [2], "BYTES")
    two.set_data_from_numpy(np.array([b"a", b"b"], dtype=np.object_))
    assert "one element" in expect_error(client, 400, lambda: client.infer("whisper-tiny.en", [two]))
    ints = th.InferInput("AUDIO", [4], "INT32")
    ints.set_data_from_numpy(np.zeros(4, dtype=np.int32))
    expect_error(client, 400, lambda: client.infer("whisper-tiny.en", [ints]))
    wrong = th.InferInput("TEXT", [1], "BYTES")
    wrong.set_data_from_numpy(np.array(["hi"], dtype=np.object_))
    assert "TEXT_INPUT" in expect_error(client, 400, lambda: client.infer("gemma-3-270m", [wrong]))
    text = th.InferInput("TEXT_INPUT", [1], "BYTES")
    text.set_data_from_numpy(np.array(["hi"], dtype=np.object_))
    expect_error(client, 400, lambda: client.infer("gemma-3-270m", [text],
                                                   outputs=[th.InferRequestedOutput("LOGITS")]))
    expect_error(client, 400, lambda: client.infer("gemma-3-270m", [text],
                                                   parameters={"temperature": -1}))
    x = th.InferInput("AUDIO", [16000], "FP32")
    x.set_data_from_numpy(np.zeros(16000, dtype=np.float32))
    assert "sample_rate" in expect_error(client, 400, lambda: client.infer("whisper-tiny.en", [x]))
    # the transcription's parameters: language, task, word_timestamps
    for params, needle in (({"language": "zz"}, "language"), ({"language": 7}, "language"),
                           ({"task": "summarize"}, "task"), ({"task": "translate"}, "multilingual"),
                           ({"word_timestamps": "yes"}, "word_timestamps")):
        wav = th.InferInput("AUDIO", [1], "BYTES")
        wav.set_data_from_numpy(np.array([open(JFK, "rb").read()], dtype=np.object_))
        assert needle in expect_error(client, 400, lambda: client.infer(
            "whisper-tiny.en", [wav], parameters=params)), params
    # bytes that are no audio format: 415, in KServe's shape
    assert "audio" in expect_error(client, 415, lambda: client.infer("whisper-tiny.en", [audio])).lower()
    big = th.InferInput("AUDIO", [1], "BYTES")
    big.set_data_from_numpy(np.array([b"\0" * (BODY_LIMIT + 1)], dtype=np.object_))
    expect_error(client, 413, lambda: client.infer("whisper-tiny.en", [big]))


def test_fp32_samples_out_of_range(client, daemon):
    """A huge finite sample (1e30) is clipped to full scale, as
    faster-whisper's s16 decode clips it: the transcript is jfk's, not an
    empty one. A JSON number past float32's range is a 400 naming it."""
    with wave.open(JFK) as w:
        rate = w.getframerate()
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16)
    x = pcm.astype(np.float32) / 32768.0
    x[rate] = 1e30
    inp = th.InferInput("AUDIO", [len(x)], "FP32")
    inp.set_data_from_numpy(x, binary_data=True)
    r = client.infer("whisper-tiny.en", [inp], parameters={"sample_rate": rate})
    text = r.as_numpy("TRANSCRIPT")[0]
    text = text.decode() if isinstance(text, bytes) else text
    assert text == openai_transcript(daemon.port, open(JFK, "rb").read())
    body = ('{"inputs": [{"name": "AUDIO", "datatype": "FP32", "shape": [4], '
            '"data": [0.1, 1e39, 0.0, 0.2]}], "parameters": {"sample_rate": 16000}}').encode()
    r = post(daemon.port, "/v2/models/whisper-tiny.en/infer", body)
    assert r.status == 400, r.body
    assert "element 1 (1e+39) overflows FP32" in r.json()["error"], r.body
    # float32's largest value as numpy prints it is in range; null is no number
    ok = body.replace(b"1e39", b"3.4028235e38") + b""
    ok = ok.replace(b'"shape": [4]', b'"shape": [1600]').replace(
        b"0.2]", b"0.2" + b", 0.0" * 1596 + b"]")
    r = post(daemon.port, "/v2/models/whisper-tiny.en/infer", ok)
    assert r.status == 200, r.body
    r = post(daemon.port, "/v2/models/whisper-tiny.en/infer", body.replace(b"1e39", b"null"))
    assert r.status == 400 and "element 1 is not a number" in r.json()["error"], r.body


def test_infer_errors_on_the_wire(daemon):
    p = daemon.port
    url = "/v2/models/whisper-tiny.en/infer"
    cases = [
        (b"{not json", {}, 400),
        (b'{"inputs": []}', {}, 400),
        (b'{"inputs": [{"name": "AUDIO", "datatype": "BYTES", "shape": [1], "data": ["abc"]}]}',
         {}, 400),  # an audio file cannot be a JSON string
        (b'{"inputs": [{"name": "AUDIO", "datatype": "BYTES", "shape": [1], '
         b'"parameters": {"binary_data_size": 100}}]}xx', {"Inference-Header-Content-Length": "86"},
         400),  # binary_data_size past the body
        (b'{"inputs": []}', {"Inference-Header-Content-Length": "999"}, 400),
        (b'{"inputs": []}', {"Inference-Header-Content-Length": "-1"}, 400),
        (b'{"inputs": [{"name": "AUDIO", "datatype": "BYTES", "shape": [0], "data": []}]}', {}, 400),
    ]
    for body, headers, status in cases:
        r = post(p, url, body, headers)
        assert r.status == status, (body, r.status, r.body)
        assert isinstance(r.json()["error"], str) and r.json()["error"], r.body
    r = post(p, "/v2/models/whisper-tiny.en/generate", {"text_input": "x"})
    assert r.status == 400 and "infer" in r.json()["error"]
    r = post(p, "/v2/models/gemma-3-270m/generate", {"prompt": "x"})
    assert r.status == 400 and "text_input" in r.json()["error"]
    # a body jansson refuses gets its reason, not "must have text_input" (it has)
    for body, reason in ((b'{"text_input": "Hi", "parameters": {"max_tokens": 99999999999999999999}}',
                          "too big integer"),
                         (b'{"text_input": "Hi", "parameters": {"temperature": 1e400}}',
                          "real number overflow"),
                         (b'{"text_input": "Hi\\u0000"}', "(NUL)"),
                         (b'{"text_input": "Hi",', "not valid JSON")):
        r = post(p, "/v2/models/gemma-3-270m/generate", body)
        err = r.json()["error"]
        assert r.status == 400 and reason in err and "must be" not in err, (body, err)
        assert "JSON_ALLOW_NUL" not in err
    # /infer too: jansson's reason, or our words for \u0000, and no "not a JSON object"
    for body, reason in ((b'{"inputs": [{"name": "TEXT_INPUT", "datatype": "BYTES", "shape": [1], '
                          b'"data": ["h\\u0000i"]}]}', "(NUL)"),
                         (b'{"inputs": [], "parameters": {"max_tokens": 99999999999999999999}}',
                          "too big integer"),
                         (b"[1, 2]", "not a JSON object")):
        r = post(p, "/v2/models/gemma-3-270m/infer", body)
        err = r.json()["error"]
        assert r.status == 400 and reason in err and "JSON_ALLOW_NUL" not in err, (body, err)
        assert reason == "not a JSON object" or "not a JSON object" not in err, err
    r = request(p, "GET", "/v2/models/gemma-3-270m/infer")
    assert r.status == 405


def test_binary_request_by_hand(daemon):
    """The binary tensor data extension as the protocol describes it,
    without a client library: JSON part, then a 4-byte length and the
    element's bytes; the answer's TEXT_OUTPUT comes back as binary."""
    text = PROMPT.encode()
    head = json.dumps({"inputs": [{"name": "TEXT_INPUT", "datatype": "BYTES", "shape": [1],
                                   "parameters": {"binary_data_size": len(text) + 4}}],
                       "outputs": [{"name": "TEXT_OUTPUT", "parameters": {"binary_data": True}}],
                       "parameters": {"max_tokens": 6, "temperature": 0}}).encode()
    body = head + len(text).to_bytes(4, "little") + text
    r = post(daemon.port, "/v2/models/gemma-3-270m/infer", body,
             {"Inference-Header-Content-Length": str(len(head)),
              "Content-Type": "application/octet-stream"})
    assert r.status == 200, r.body
    n = int(r.header("Inference-Header-Content-Length"))
    meta = json.loads(r.body[:n])
    out = meta["outputs"][0]
    assert out["name"] == "TEXT_OUTPUT" and "data" not in out
    blob = r.body[n:]
    assert len(blob) == out["parameters"]["binary_data_size"]
    size = int.from_bytes(blob[:4], "little")
    assert size == len(blob) - 4 and blob[4:].decode().strip()
