"""The gRPC-lite front end (KServe v2 GRPCInferenceService over h2c) driven
by the unmodified tritonclient.grpc from PyPI: health, metadata, ModelInfer
for both default models (typed and raw contents, FP32 samples, gzip), the
status codes of errors, message size limits, deadlines, and malformed
HTTP/2 and gRPC bytes on the wire (the daemon keeps serving)."""
import json
import os
import socket
import wave

import pytest

from conftest import (ROOT, Daemon, assert_stopped_clean, big_body_limits, default_models,
                      make_config, openai_transcript, request)

np = pytest.importorskip("numpy", reason="numpy comes with tritonclient in the test venv")
tg = pytest.importorskip("tritonclient.grpc", reason="tritonclient[grpc] is in the test venv "
                                                     "(scripts/install-deps)")
from tritonclient.utils import InferenceServerException  # noqa: E402

JFK = os.path.join(ROOT, "tests", "data", "audio", "jfk.wav")
PROMPT = "The capital of France is"
LIMIT = 2 << 20


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def daemon():
    port = free_port()
    d = Daemon(make_config(grpc_listen="127.0.0.1:%d" % port, limits=big_body_limits(LIMIT)))
    d.grpc_port = port
    yield d
    assert_stopped_clean(d)


@pytest.fixture(scope="module")
def client(daemon):
    c = tg.InferenceServerClient("127.0.0.1:%d" % daemon.grpc_port)
    yield c
    c.close()


def text_of(x):
    return x.decode() if isinstance(x, bytes) else x


def status_of(fn):
    with pytest.raises(InferenceServerException) as e:
        fn()
    return e.value.status(), e.value.message()


def test_health_and_metadata(client, daemon):
    assert "gRPC (KServe v2, h2c) port 127.0.0.1:%d" % daemon.grpc_port in daemon.stderr_text()
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("whisper-tiny.en") and client.is_model_ready("gemma-3-270m", "1")
    meta = client.get_server_metadata(as_json=True)
    assert meta["name"] == "inferd" and "binary_tensor_data" in meta["extensions"]
    m = client.get_model_metadata("whisper-tiny.en", as_json=True)
    assert [i["name"] for i in m["inputs"]] == ["AUDIO"]
    assert [o["name"] for o in m["outputs"]] == ["TRANSCRIPT", "SEGMENTS"]
    m = client.get_model_metadata("gemma-3-270m", as_json=True)
    assert m["inputs"][0] == {"name": "TEXT_INPUT", "datatype": "BYTES", "shape": ["1"]}
    assert status_of(lambda: client.is_model_ready("nope"))[0] == "StatusCode.NOT_FOUND"
    assert status_of(lambda: client.get_model_metadata("gemma-3-270m", "2"))[0] == \
        "StatusCode.NOT_FOUND"


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_transcription(client, daemon, compression):
    data = open(JFK, "rb").read()
    inp = tg.InferInput("AUDIO", [1], "BYTES")
    inp.set_data_from_numpy(np.array([data], dtype=np.object_))
    r = client.infer("whisper-tiny.en", [inp], request_id="g-1", compression_algorithm=compression)
    text = text_of(r.as_numpy("TRANSCRIPT")[0])
    assert text == openai_transcript(daemon.port, data)  # the same answer as the REST route
    segs = json.loads(text_of(r.as_numpy("SEGMENTS")[0]))
    assert segs and "".join(s["text"] for s in segs).strip() == text
    assert r.get_response().id == "g-1"


def test_transcription_fp32_samples_and_requested_output(client, daemon):
    with wave.open(JFK) as w:
        rate = w.getframerate()
        x = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16).astype(np.float32) / 32768.0
    inp = tg.InferInput("AUDIO", [len(x)], "FP32")
    inp.set_data_from_numpy(x)
    r = client.infer("whisper-tiny.en", [inp], parameters={"sample_rate": rate},
                     outputs=[tg.InferRequestedOutput("TRANSCRIPT")])
    assert text_of(r.as_numpy("TRANSCRIPT")[0]) == openai_transcript(daemon.port, open(JFK, "rb").read())
    assert r.as_numpy("SEGMENTS") is None


def test_generation_matches_rest_infer(client, daemon):
    inp = tg.InferInput("TEXT_INPUT", [1], "BYTES")
    inp.set_data_from_numpy(np.array([PROMPT], dtype=np.object_))
    r = client.infer("gemma-3-270m", [inp], parameters={"max_tokens": 12, "temperature": 0})
    out = text_of(r.as_numpy("TEXT_OUTPUT")[0])
    body = json.dumps({"inputs": [{"name": "TEXT_INPUT", "datatype": "BYTES", "shape": [1],
                                   "data": [PROMPT]}],
                       "parameters": {"max_tokens": 12, "temperature": 0}}).encode()
    rest = request(daemon.port, "POST", "/v2/models/gemma-3-270m/infer",
                   headers={"Content-Type": "application/json"}, body=body)
    assert rest.status == 200
    assert out == rest.json()["outputs"][0]["data"][0] and out.strip()


def test_transcription_parameters(client, daemon):
    """word_timestamps, language and task as REST reads them: SEGMENTS with
    the words REST gives; bad values and translation on the English-only
    model are INVALID_ARGUMENT."""
    data = open(JFK, "rb").read()
    inp = tg.InferInput("AUDIO", [1], "BYTES")
    inp.set_data_from_numpy(np.array([data], dtype=np.object_))
    r = client.infer("whisper-tiny.en", [inp], parameters={"word_timestamps": True,
                                                           "language": "en"})
    segs = json.loads(text_of(r.as_numpy("SEGMENTS")[0]))
    assert [w["word"] for w in segs[0]["words"]][:3] == [" And", " so", " my"]
    for seg in segs:
        assert "".join(w["word"] for w in seg["words"]) == seg["text"], seg
    for params, needle in (({"word_timestamps": "yes"}, "word_timestamps"),
                           ({"language": 7}, "language"), ({"language": "zz"}, "language"),
                           ({"task": "summarize"}, "task"), ({"task": "translate"}, "multilingual")):
        code, msg = status_of(lambda: client.infer("whisper-tiny.en", [inp], parameters=params))
        assert code == "StatusCode.INVALID_ARGUMENT" and needle in msg, (params, msg)


def test_error_status_codes(client):
    text = tg.InferInput("TEXT_INPUT", [1], "BYTES")
    text.set_data_from_numpy(np.array(["hi"], dtype=np.object_))
    assert status_of(lambda: client.infer("nope", [text]))[0] == "StatusCode.NOT_FOUND"
    code, msg = status_of(lambda: client.infer("whisper-tiny.en", [text]))
    assert code == "StatusCode.INVALID_ARGUMENT" and "AUDIO" in msg
    two = tg.InferInput("TEXT_INPUT", [2], "BYTES")
    two.set_data_from_numpy(np.array(["a", "b"], dtype=np.object_))
    assert status_of(lambda: client.infer("gemma-3-270m", [two]))[0] == "StatusCode.INVALID_ARGUMENT"
    code, msg = status_of(lambda: client.infer("gemma-3-270m", [text], parameters={"temperature": 5}))
    assert code == "StatusCode.INVALID_ARGUMENT" and "temperature" in msg
    assert status_of(lambda: client.infer("gemma-3-270m", [text],
                                          outputs=[tg.InferRequestedOutput("LOGITS")]))[0] == \
        "StatusCode.INVALID_ARGUMENT"
    x = tg.InferInput("AUDIO", [16000], "FP32")
    x.set_data_from_numpy(np.zeros(16000, dtype=np.float32))
    code, msg = status_of(lambda: client.infer("whisper-tiny.en", [x]))
    assert code == "StatusCode.INVALID_ARGUMENT" and "sample_rate" in msg
    junk = tg.InferInput("AUDIO", [1], "BYTES")
    junk.set_data_from_numpy(np.array([b"not audio" * 10], dtype=np.object_))
    assert status_of(lambda: client.infer("whisper-tiny.en", [junk]))[0] == \
        "StatusCode.INVALID_ARGUMENT"
    big = tg.InferInput("AUDIO", [1], "BYTES")
    big.set_data_from_numpy(np.array([b"\0" * (LIMIT + 10)], dtype=np.object_))
    assert status_of(lambda: client.infer("whisper-tiny.en", [big]))[0] == \
        "StatusCode.RESOURCE_EXHAUSTED"


def test_deadline_exceeded(client):
    text = tg.InferInput("TEXT_INPUT", [1], "BYTES")
    text.set_data_from_numpy(np.array([PROMPT], dtype=np.object_))
    code, _ = status_of(lambda: client.infer("gemma-3-270m", [text], client_timeout=0.05,
                                             parameters={"max_tokens": 400}))
    assert code == "StatusCode.DEADLINE_EXCEEDED"
    # and the server still answers
    assert client.is_server_live()


def h2_frame(ftype, flags, stream, payload=b""):
    return len(payload).to_bytes(3, "big") + bytes([ftype, flags]) + stream.to_bytes(4, "big") + payload


def raw_exchange(port, data):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        out = b""
        try:
            while True:
                b = s.recv(65536)
                if not b:
                    break
                out += b
        except OSError:
            pass
    return out


def test_malformed_http2_and_grpc_bytes(client, daemon):
    pre = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + h2_frame(4, 0, 0)
    cases = [
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",          # HTTP/1.1 on the gRPC port
        b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n",           # a broken preface
        pre + h2_frame(0, 1, 1, b"\0\0\0\0\5abc"),    # DATA on an idle stream
        pre + b"\xff" * 64,                             # frame garbage
        pre + h2_frame(1, 4, 1, b"\x88\x82"),         # HEADERS with junk HPACK
        os.urandom(4096),
    ]
    for data in cases:
        out = raw_exchange(daemon.grpc_port, data)
        assert len(out) < 1 << 20
    assert client.is_server_live()
    text = tg.InferInput("TEXT_INPUT", [1], "BYTES")
    text.set_data_from_numpy(np.array([PROMPT], dtype=np.object_))
    r = client.infer("gemma-3-270m", [text], parameters={"max_tokens": 3, "temperature": 0})
    assert text_of(r.as_numpy("TEXT_OUTPUT")[0])


def recv_until_closed(s, hang_guard=60):
    """Every byte s receives until the daemon closes it (EOF or reset)."""
    s.settimeout(hang_guard)
    out = b""
    while True:
        try:
            b = s.recv(65536)
        except ConnectionResetError:
            return out
        if not b:
            return out
        out += b


def h2_frames(data):
    """[(type, flags, stream, payload)] of the server's bytes."""
    out = []
    while len(data) >= 9:
        n = int.from_bytes(data[:3], "big")
        out.append((data[3], data[4], int.from_bytes(data[5:9], "big") & 0x7fffffff,
                    data[9:9 + n]))
        data = data[9 + n:]
    return out


PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + h2_frame(4, 0, 0)


def test_silent_connection_closed_at_header_timeout(daemon):
    """A connection that sends nothing is closed at limits.header_timeout_ms
    (2 s here), as a silent HTTP one is: it cannot hold max_connections."""
    with socket.create_connection(("127.0.0.1", daemon.grpc_port)) as s:
        recv_until_closed(s)


def test_idle_session_gets_goaway_then_close(fresh_daemon):
    """A session with no call for limits.idle_timeout_ms gets GOAWAY
    (NO_ERROR) and is closed; one that breaks the protocol gets GOAWAY with
    its error and is closed too, without waiting for the client."""
    port = free_port()
    d = fresh_daemon(make_config(grpc_listen="127.0.0.1:%d" % port,
                                 limits={"idle_timeout_ms": 1000}))
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(PREFACE)
        goaways = [f for f in h2_frames(recv_until_closed(s)) if f[0] == 7]
        assert goaways and int.from_bytes(goaways[-1][3][4:8], "big") == 0  # NO_ERROR
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(PREFACE + b"\xff" * 64)
        goaways = [f for f in h2_frames(recv_until_closed(s)) if f[0] == 7]
        assert goaways and int.from_bytes(goaways[-1][3][4:8], "big") != 0


def test_sigterm_does_not_wait_for_idle_grpc_sessions(fresh_daemon):
    """Idle sessions get GOAWAY at SIGTERM and close: the daemon exits
    without its drain timer firing (it would log "drain timeout")."""
    port = free_port()
    d = fresh_daemon(make_config(models=[default_models()[0]], grpc_listen="127.0.0.1:%d" % port,
                                 limits={"drain_timeout_ms": 60000, "idle_timeout_ms": 60000}))
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(2)]
    for s in socks:
        s.sendall(PREFACE)
    try:
        assert d.stop(timeout=50) == 0
        assert "drain timeout" not in d.stderr_text(), d.stderr_text()
    finally:
        for s in socks:
            s.close()


def test_no_grpc_port_by_default():
    d = Daemon(make_config(models=[default_models()[0]]))
    try:
        assert "gRPC" not in d.stderr_text()
    finally:
        assert d.stop() == 0


def test_model_config_and_statistics(client, daemon):
    """Triton's extensions perf_analyzer reads before it measures."""
    cfg = client.get_model_config("whisper-tiny.en", as_json=True)["config"]
    assert cfg["name"] == "whisper-tiny.en" and cfg.get("max_batch_size", 0) == 0
    assert cfg["input"][0]["name"] == "AUDIO" and cfg["input"][0]["data_type"] == "TYPE_STRING"
    assert [o["name"] for o in cfg["output"]] == ["TRANSCRIPT", "SEGMENTS"]
    rest = request(daemon.port, "GET", "/v2/models/whisper-tiny.en/config").json()
    assert rest["input"][0]["name"] == "AUDIO" and rest["output"][1]["name"] == "SEGMENTS"
    text = tg.InferInput("TEXT_INPUT", [1], "BYTES")
    text.set_data_from_numpy(np.array([PROMPT], dtype=np.object_))
    client.infer("gemma-3-270m", [text], parameters={"max_tokens": 2})
    st = client.get_inference_statistics("gemma-3-270m", as_json=True)["model_stats"][0]
    assert st["name"] == "gemma-3-270m" and int(st["inference_count"]) >= 1
    inf = st["inference_stats"]
    counts = {k: int(inf[k].get("count", 0)) for k in ("compute_input", "compute_infer", "compute_output")}
    assert len(set(counts.values())) == 1 and counts["compute_infer"] >= 1, counts
    every = client.get_inference_statistics(as_json=True)["model_stats"]
    assert {m["name"] for m in every} == {"whisper-tiny.en", "gemma-3-270m", "smollm2-135m-instruct"}
    assert status_of(lambda: client.get_model_config("nope"))[0] == "StatusCode.NOT_FOUND"


def stream_collect(client, sends, want_finals, timeout=60):
    """Run ModelStreamInfer with the (model, inputs, kwargs) in sends;
    collect text per request id until want_finals final responses."""
    import queue
    import time
    q = queue.Queue()
    client.start_stream(callback=lambda result, error: q.put((result, error)))
    try:
        for model, inputs, kw in sends:
            client.async_stream_infer(model, inputs, **kw)
        texts, errors, finals, pieces = {}, [], 0, 0
        deadline = time.time() + timeout
        while finals < want_finals and time.time() < deadline:
            r, e = q.get(timeout=max(0.1, deadline - time.time()))
            if e:
                errors.append(str(e))
                continue
            resp = r.get_response()
            texts.setdefault(resp.id, "")
            texts[resp.id] += text_of(r.as_numpy("TEXT_OUTPUT")[0])
            pieces += 1
            finals += resp.parameters["triton_final_response"].bool_param
        return texts, errors, pieces
    finally:
        client.stop_stream()


def test_stream_infer_streams_generated_text(client):
    inp = tg.InferInput("TEXT_INPUT", [1], "BYTES")
    inp.set_data_from_numpy(np.array([PROMPT], dtype=np.object_))
    p = {"max_tokens": 10, "temperature": 0}
    texts, errors, pieces = stream_collect(client, [
        ("gemma-3-270m", [inp], {"parameters": p, "request_id": "a"}),
        ("nope", [inp], {"request_id": "x"}),
        ("gemma-3-270m", [inp], {"parameters": {"max_tokens": 4, "temperature": 0},
                                 "request_id": "b"}),
    ], want_finals=2)
    unary = text_of(client.infer("gemma-3-270m", [inp], parameters=p).as_numpy("TEXT_OUTPUT")[0])
    assert texts["a"] == unary  # the pieces make up the same completion
    assert unary.startswith(texts["b"]) and texts["b"]
    assert pieces > 2  # streamed, not one answer per request
    assert any("unknown model 'nope'" in e for e in errors), errors


def test_stream_infer_cancel_stops_the_work(client, daemon):
    def cancelled():
        st = request(daemon.port, "GET", "/v2/models/gemma-3-270m/stats").json()
        return st["model_stats"][0]["inferd"]["requests"]["cancelled"]
    before = cancelled()
    import queue
    import time
    q = queue.Queue()
    client.start_stream(callback=lambda result, error: q.put((result, error)))
    inp = tg.InferInput("TEXT_INPUT", [1], "BYTES")
    inp.set_data_from_numpy(np.array([PROMPT], dtype=np.object_))
    client.async_stream_infer("gemma-3-270m", [inp], parameters={"max_tokens": 2000})
    q.get(timeout=30)  # generation has begun
    client.stop_stream(cancel_requests=True)  # RST_STREAM
    # a hang guard: not cancelled, the 2000 tokens would end "completed"
    deadline = time.time() + 120
    while cancelled() == before and time.time() < deadline:
        time.sleep(0.1)
    assert cancelled() == before + 1
    assert client.is_server_live()
