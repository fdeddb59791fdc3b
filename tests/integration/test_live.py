"""Deepgram's live streaming API (GET /v1/listen over a WebSocket), part 1:
the official deepgram-sdk 7.x live client and raw sockets against the real
daemon with Whisper tiny.en and its Silero VAD.

The jfk clip is streamed in 100 ms frames at real-time pace and faster; its
streamed finals must carry the words the REST route (POST /v1/listen)
gives for the same file. Handshake refusals, idle timeouts, KeepAlive,
Finalize, CloseStream, SIGTERM drain and bad input are checked one by one,
each followed by proof that the daemon still serves."""
import array
import base64
import hashlib
import json
import os
import random
import re
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
import wave

import pytest

from conftest import (ROOT, Daemon, Reader, assert_stopped_clean, connect, default_models,
                      make_config, request, wait_until)

MODEL = "whisper-tiny.en"
API_KEY = "sk-live-test-key"
AUDIO = os.path.join(ROOT, "tests", "data", "audio")
IDLE_MS = 1500
# With interim results, LocalAgreement-2 makes the words two consecutive
# interims agree on final before the segment ends; the whole segment's
# transcription (what REST hears) may hear one of them differently, so a
# stream with interims may differ from REST by this many words of jfk's 22
# (measured over the test clips, streamed at real-time pace on an idle
# machine: 8.3 % WER with the policy, 6.5 % without, REST 7.7 %).
LA_WORDS = 2


def live_config(**limits):
    lim = {"max_header_bytes": 16384, "max_body_bytes": 4 << 20, "live_idle_timeout_ms": IDLE_MS}
    lim.update(limits)
    return make_config(models=[default_models()[0]], limits=lim)


@pytest.fixture(scope="module")
def srv():
    d = Daemon(live_config(), env={"INFERD_API_KEY": API_KEY})
    yield d
    assert_stopped_clean(d)


@pytest.fixture(scope="module")
def default_srv():
    """Default limits (live_idle_timeout_ms 10000), no key."""
    cfg = make_config(models=[default_models()[0]])
    cfg["limits"] = {}
    d = Daemon(cfg)
    yield d
    assert_stopped_clean(d)


def jfk_pcm():
    with wave.open(os.path.join(AUDIO, "jfk.wav")) as w:
        assert w.getframerate() == 16000 and w.getnchannels() == 1
        return w.readframes(w.getnframes())


def sox_raw(args):
    """jfk.wav converted by sox to headerless audio (args: output options)."""
    return subprocess.run(["sox", os.path.join(AUDIO, "jfk.wav"), *args, "-"],
                          check=True, capture_output=True).stdout


def words(text):
    return re.sub(r"[^\w\s']", " ", text.lower()).replace("'", "").split()


def wer(ref, hyp):
    """Word error rate of the word lists hyp against ref."""
    prev = list(range(len(hyp) + 1))
    for i, a in enumerate(ref, 1):
        cur = [i] + [0] * len(hyp)
        for j, b in enumerate(hyp, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a != b))
        prev = cur
    return prev[-1] / max(len(ref), 1)


_REST = {}


def rest_words(d):
    """The words POST /v1/listen gives for jfk.wav (once per daemon)."""
    if d.port not in _REST:
        _REST[d.port] = _rest_words(d)
    return _REST[d.port]


def _rest_words(d):
    r = request(d.port, "POST", "/v1/listen?model=" + MODEL,
                headers={"Authorization": "Token " + API_KEY, "Content-Type": "audio/wav"},
                body=open(os.path.join(AUDIO, "jfk.wav"), "rb").read())
    assert r.status == 200, r.body
    return words(r.json()["results"]["channels"][0]["alternatives"][0]["transcript"])


def sdk_client(d, key=API_KEY):
    from deepgram import DeepgramClient
    from deepgram.environment import DeepgramClientEnvironment
    base = f"127.0.0.1:{d.port}"
    env = DeepgramClientEnvironment(base=f"http://{base}", production=f"ws://{base}",
                                    agent=f"ws://{base}", agent_rest=f"http://{base}")
    return DeepgramClient(api_key=key, environment=env, max_retries=0, timeout=120)


class Collector(threading.Thread):
    """Reads every message of an SDK socket until it closes, with arrival times."""

    def __init__(self, sock):
        super().__init__(daemon=True)
        self.sock, self.msgs, self.error = sock, [], None
        self.start()

    def run(self):
        try:
            for m in self.sock:
                self.msgs.append((time.monotonic(), m))
        except Exception as e:  # the socket's end, whatever its code
            self.error = e

    def of(self, kind):
        return [m for _, m in self.msgs if type(m).__name__ == kind]

    def wait(self, pred, what, timeout=60, keep_alive=None):
        """Poll pred; keep_alive (when given) runs every 0.5 s meanwhile, so
        that a slow build's transcription does not meet the idle timeout."""
        end = time.monotonic() + timeout
        last = time.monotonic()
        while time.monotonic() < end:
            if pred():
                return
            if keep_alive and time.monotonic() - last > 0.5:
                keep_alive()
                last = time.monotonic()
            time.sleep(0.05)
        raise AssertionError("timed out waiting for " + what + ": " + repr(self.msgs))


def stream(sock, pcm, frame_bytes, speed=1.0, frame_s=0.1):
    """Send pcm in frames of frame_bytes, frame_s / speed apart."""
    t0 = time.monotonic()
    for i, off in enumerate(range(0, len(pcm), frame_bytes)):
        sock.send_media(pcm[off:off + frame_bytes])
        delay = t0 + (i + 1) * frame_s / speed - time.monotonic()
        if delay > 0:
            time.sleep(delay)


def final_words(col):
    return [w for r in col.of("ListenV1Results") if r.is_final
            for w in words(r.channel.alternatives[0].transcript)]


def close_code(sock):
    return sock._websocket.close_code, sock._websocket.close_reason


def run_stream(d, pcm, frame_bytes, speed, **opts):
    """Stream pcm with the SDK, CloseStream, and return the collector and
    the socket's close code and reason."""
    client = sdk_client(d)
    with client.listen.v1.connect(model=MODEL, **opts) as sock:
        col = Collector(sock)
        stream(sock, pcm, frame_bytes, speed)
        sock.send_close_stream()
        col.join(120)
        assert not col.is_alive()
        return col, close_code(sock)


# --- the SDK, jfk.wav ---------------------------------------------------------


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_sdk_real_time_interim_then_final(srv):
    pcm = jfk_pcm()
    col, (code, _) = run_stream(srv, pcm, 3200, 1.0, encoding="linear16", sample_rate=16000,
                                interim_results="true", punctuate="true", vad_events="true")
    assert code == 1000
    results = col.of("ListenV1Results")
    finals = [r for r in results if r.is_final]
    assert finals and any(not r.is_final for r in results)
    first_final = results.index(finals[0])
    assert any(not r.is_final for r in results[:first_final]), "an interim before the first final"
    assert wer(rest_words(srv), final_words(col)) * len(rest_words(srv)) <= LA_WORDS, \
        final_words(col)
    assert col.of("ListenV1SpeechStarted")
    last = col.msgs[-1][1]
    assert type(last).__name__ == "ListenV1Metadata"
    assert last.duration == pytest.approx(11.0, abs=0.01)
    assert last.sha256 == hashlib.sha256(pcm).hexdigest()
    for r in results:  # every field the SDK knows, with sane values
        assert r.type == "Results" and r.channel_index == [0, 1]
        assert r.metadata.request_id and r.metadata.model_uuid
        assert r.metadata.model_info.name == MODEL and r.metadata.model_info.arch
        assert 0 <= r.start and r.start + r.duration <= 11.0 + 1e-6
        alt = r.channel.alternatives[0]
        assert 0 <= alt.confidence <= 1
        for w in alt.words:
            assert r.start - 1e-6 <= w.start <= w.end <= r.start + r.duration + 0.05
            assert w.punctuated_word and 0 <= w.confidence <= 1
    starts = [r.start for r in finals]
    assert starts == sorted(starts)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_sdk_faster_than_real_time(srv):
    col, (code, _) = run_stream(srv, jfk_pcm(), 3200, 20.0, encoding="linear16",
                                sample_rate="16000")
    assert code == 1000
    assert all(r.is_final for r in col.of("ListenV1Results"))
    assert final_words(col) == rest_words(srv)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_speech_final_after_pause_and_utterance_end(srv):
    pcm = jfk_pcm()
    pause = b"\0\0" * 16000 * 2  # 2 s of silence
    col, (code, _) = run_stream(srv, pcm[:16000 * 2 * 5] + pause + pcm[16000 * 2 * 5:], 3200,
                                4.0, encoding="linear16", sample_rate=16000,
                                interim_results="true", utterance_end_ms="1000",
                                endpointing="300")
    assert code == 1000
    finals = [r for r in col.of("ListenV1Results") if r.is_final]
    assert any(r.speech_final for r in finals[:-1]), "speech_final at the pause"
    ends = col.of("ListenV1UtteranceEnd")
    assert ends and all(e.channel == [0, 1] for e in ends)
    # the inserted pause follows the words before 5 s; the clip's own pause
    # after "Americans" (about 2.1 s) may end an utterance too when the VAD
    # hears more than utterance_end_ms of silence there
    assert any(3.0 < e.last_word_end < 7.0 for e in ends), [e.last_word_end for e in ends]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_finalize_keeps_the_socket_open(srv):
    pcm = jfk_pcm()
    client = sdk_client(srv)
    with client.listen.v1.connect(model=MODEL, encoding="linear16", sample_rate=16000) as sock:
        col = Collector(sock)
        stream(sock, pcm[:16000 * 2 * 3], 3200, 10.0)
        sock.send_finalize()
        col.wait(lambda: any(r.from_finalize for r in col.of("ListenV1Results")), "from_finalize",
                 keep_alive=sock.send_keep_alive)
        flushed = [r for r in col.of("ListenV1Results") if r.from_finalize][0]
        assert flushed.is_final and col.is_alive()
        stream(sock, pcm[16000 * 2 * 3:], 3200, 10.0)
        sock.send_close_stream()
        col.join(120)
        assert close_code(sock)[0] == 1000
    assert len(final_words(col)) >= len(rest_words(srv)) - 2
    assert type(col.msgs[-1][1]).__name__ == "ListenV1Metadata"


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("enc,rate,args,width,max_wer", [
    # 8 kHz telephone band: tiny.en hears it a little differently (REST on the
    # same mu-law bytes says "american"), so two words in 22 may differ
    ("mulaw", 8000, ["-r", "8000", "-e", "mu-law", "-t", "raw"], 1, 0.1),
    ("linear16", 48000, ["-r", "48000", "-e", "signed", "-b", "16", "-t", "raw"], 2, 0),
    ("alaw", 16000, ["-r", "16000", "-e", "a-law", "-t", "raw"], 1, 0),
    ("linear32", 22050, ["-r", "22050", "-e", "floating-point", "-b", "32", "-t", "raw"], 4, 0),
    # two channels (the same speech in both) mixed to one
    ("linear16", 16000, ["-c", "2", "-e", "signed", "-b", "16", "-t", "raw"], 4, 0),
])
def test_other_encodings_same_words(srv, enc, rate, args, width, max_wer):
    raw = sox_raw(args)
    extra = {"channels": "2"} if "-c" in args else {}
    col, (code, _) = run_stream(srv, raw, rate * width // 10, 20.0, encoding=enc,
                                sample_rate=str(rate), **extra)
    assert code == 1000
    assert wer(rest_words(srv), final_words(col)) <= max_wer, final_words(col)
    assert col.msgs[-1][1].duration == pytest.approx(11.0, abs=0.02)


# --- timeouts and KeepAlive -------------------------------------------------------


def ws_open(port, query, headers=None):
    """A raw WebSocket handshake; returns (socket, Reader, response)."""
    key = base64.b64encode(os.urandom(16)).decode()
    h = {"Host": "localhost", "Upgrade": "websocket", "Connection": "Upgrade",
         "Sec-WebSocket-Key": key, "Sec-WebSocket-Version": "13",
         "Authorization": "Token " + API_KEY}
    h.update(headers or {})
    h = {k: v for k, v in h.items() if v is not None}
    s = connect(port, timeout=30)
    s.sendall((f"GET /v1/listen?{query} HTTP/1.1\r\n" +
               "".join(f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n").encode())
    rd = Reader(s)
    r = rd.read_response(head_only=True)
    if r.status == 101:
        want = base64.b64encode(hashlib.sha1(
            (key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
        assert r.header("sec-websocket-accept") == want
    else:
        n = int(r.header("content-length") or 0)
        while len(rd.buf) < n:
            rd._fill()
        r.body = rd.buf[:n]
    return s, rd, r


def frame(opcode, payload, fin=True, mask=True):
    head = bytes([(0x80 if fin else 0) | opcode])
    n = len(payload)
    mbit = 0x80 if mask else 0
    if n < 126:
        head += bytes([mbit | n])
    elif n < 65536:
        head += bytes([mbit | 126]) + struct.pack(">H", n)
    else:
        head += bytes([mbit | 127]) + struct.pack(">Q", n)
    if not mask:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def read_frames(s, rd, timeout=60):
    """Server frames until the close frame: [(opcode, payload)], with the
    close frame last (or an EOF)."""
    s.settimeout(timeout)
    out = []
    buf = rd.buf
    while True:
        while len(buf) < 2 or len(buf) < 2 + (buf[1] & 0x7f if buf[1] & 0x7f < 126 else 0):
            chunk = s.recv(65536)
            if not chunk:
                return out
            buf += chunk
        n, off = buf[1] & 0x7f, 2
        if n == 126:
            while len(buf) < 4:
                buf += s.recv(65536)
            n, off = struct.unpack(">H", buf[2:4])[0], 4
        elif n == 127:
            while len(buf) < 10:
                buf += s.recv(65536)
            n, off = struct.unpack(">Q", buf[2:10])[0], 10
        while len(buf) < off + n:
            chunk = s.recv(65536)
            if not chunk:
                return out
            buf += chunk
        op, payload, buf = buf[0] & 0x0f, buf[off:off + n], buf[off + n:]
        out.append((op, payload))
        if op == 8:
            return out


def close_of(frames):
    assert frames and frames[-1][0] == 8, frames
    p = frames[-1][1]
    return struct.unpack(">H", p[:2])[0], p[2:].decode()


def test_idle_timeout_closes_1011_net0001(srv):
    s, rd, r = ws_open(srv.port, "encoding=linear16&sample_rate=16000")
    assert r.status == 101
    t0 = time.monotonic()
    code, reason = close_of(read_frames(s, rd))
    assert code == 1011 and reason.startswith("NET-0001")
    assert IDLE_MS / 1000 - 0.2 < time.monotonic() - t0 < IDLE_MS / 1000 + 3
    s.close()


def test_audio_then_silence_times_out(srv):
    s, rd, r = ws_open(srv.port, "encoding=linear16&sample_rate=16000")
    s.sendall(frame(2, jfk_pcm()[:32000]))
    code, reason = close_of(read_frames(s, rd))
    assert code == 1011 and "NET-0001" in reason
    s.close()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_keepalive_only_12s_stays_open_at_default_timeout(default_srv):
    client = sdk_client(default_srv, key="unused")
    with client.listen.v1.connect(model=MODEL, encoding="linear16", sample_rate=16000) as sock:
        col = Collector(sock)
        for _ in range(6):
            sock.send_keep_alive()
            time.sleep(2.0)
        assert col.is_alive(), col.error
        sock.send_close_stream()
        col.join(60)
        assert close_code(sock)[0] == 1000
        assert [type(m).__name__ for _, m in col.msgs] == ["ListenV1Metadata"]


def test_default_idle_timeout_is_10s(default_srv):
    s, rd, r = ws_open(default_srv.port, "encoding=linear16&sample_rate=16000")
    assert r.status == 101
    t0 = time.monotonic()
    code, reason = close_of(read_frames(s, rd, timeout=30))
    assert code == 1011 and reason.startswith("NET-0001")
    assert 9.8 < time.monotonic() - t0 < 13
    s.close()


# --- handshake ------------------------------------------------------------------------


@pytest.mark.parametrize("query,status,needle", [
    ("encoding=foo&sample_rate=16000", 400, "encoding"),
    ("encoding=linear16", 400, "sample_rate"),
    ("encoding=linear16&sample_rate=16000&interim_results=maybe", 400, "interim_results"),
    ("encoding=linear16&sample_rate=12", 400, "sample_rate"),
    ("encoding=linear16&sample_rate=16000&endpointing=soon", 400, "endpointing"),
    ("encoding=linear16&sample_rate=16000&interim_results=true&utterance_end_ms=500", 400,
     "utterance_end_ms"),
    ("encoding=linear16&sample_rate=16000&utterance_end_ms=1000", 400, "interim_results"),
    ("encoding=linear16&sample_rate=16000&language=xx", 400, "language"),
    ("encoding=opus&sample_rate=48000&channels=3", 400, "channels"),
    ("multichannel=true", 400, "containerised"),
    ("encoding=linear16&sample_rate=16000&channels=9&multichannel=true", 400,
     "at most 8 channels"),
    ("encoding=linear16&sample_rate=16000&model=nope", 404, "nope"),
])
def test_bad_query_refused_at_handshake(srv, query, status, needle):
    s, rd, r = ws_open(srv.port, query)
    s.close()
    assert r.status == status, r.body
    assert needle in r.header("dg-error")
    body = json.loads(r.body)
    assert needle in body["err_msg"] and body["request_id"]


def test_lenient_query_values(srv):
    q = ("encoding=linear16&sample_rate=8000&sample_rate=16000&interim_results=True"
         "&punctuate=1&smart_format=False&vad_events=0&endpointing=false&keywords=a%3A2"
         "&keyterm=" + "x" * 500 + "&tier=nova&language=en-US&channels=1")
    s, rd, r = ws_open(srv.port, q)
    assert r.status == 101
    s.sendall(frame(8, struct.pack(">H", 1000)))
    assert close_of(read_frames(s, rd))[0] == 1000
    s.close()


def test_auth(srv):
    for headers in ({"Authorization": None}, {"Authorization": "Token wrong"},
                    {"Authorization": None, "Sec-WebSocket-Protocol": "token, wrong"}):
        s, rd, r = ws_open(srv.port, "encoding=linear16&sample_rate=16000", headers)
        s.close()
        assert r.status == 401 and r.header("dg-error"), r.body
        assert json.loads(r.body)["err_msg"]
    for headers in ({"Authorization": "token " + API_KEY}, {"Authorization": "BEARER " + API_KEY},
                    {"Authorization": None, "Sec-WebSocket-Protocol": "token, " + API_KEY}):
        s, rd, r = ws_open(srv.port, "encoding=linear16&sample_rate=16000", headers)
        assert r.status == 101
        if "Sec-WebSocket-Protocol" in headers:
            assert r.header("sec-websocket-protocol") == "token"
        else:
            assert r.header("sec-websocket-protocol") is None
        assert r.header("dg-request-id")
        s.close()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_sdk_bad_key_refused(srv):
    client = sdk_client(srv, key="wrong")
    with pytest.raises(Exception) as e:
        with client.listen.v1.connect(model=MODEL, encoding="linear16", sample_rate=16000):
            pass
    assert "401" in str(e.value)


def test_not_a_websocket(srv):
    r = request(srv.port, "GET", "/v1/listen?encoding=linear16&sample_rate=16000",
                headers={"Authorization": "Token " + API_KEY})
    assert r.status == 426 and r.header("dg-error")
    s, rd, r = ws_open(srv.port, "encoding=linear16&sample_rate=16000",
                       {"Sec-WebSocket-Version": "8"})
    s.close()
    assert r.status == 426 and r.header("sec-websocket-version") == "13"
    assert r.reason == "Upgrade Required" and r.json()["err_code"] == "Upgrade Required"
    s, rd, r = ws_open(srv.port, "encoding=linear16&sample_rate=16000",
                       {"Sec-WebSocket-Key": "short"})
    s.close()
    assert r.status == 400


def encoder_counters(d):
    """The model's Whisper encoder windows and positions computed so far
    (/metrics)."""
    text = request(d.port, "GET", "/metrics").body.decode()
    got = []
    for name in ("inferd_model_encoder_windows_total", "inferd_model_encoder_positions_total"):
        m = re.search(r'^%s\{model="%s"\} (\S+)$' % (name, MODEL), text, re.M)
        assert m, name
        got.append(int(float(m.group(1))))
    return got


@pytest.fixture(scope="module")
def trim_srv():
    """A model with live_window_ms 10000 (the default, 0, keeps 30 s)."""
    cfg = live_config()
    cfg["models"] = [dict(cfg["models"][0], live_window_ms=10000)]
    d = Daemon(cfg, env={"INFERD_API_KEY": API_KEY})
    yield d
    assert_stopped_clean(d)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_live_windows_are_trimmed_and_finals_urgent(srv, trim_srv):
    """What the daemon records of a live stream's transcriptions: with
    models[].live_window_ms 10000 their encoder windows are trimmed (the
    audio plus 2 s, at least 10 s = 500 positions, a multiple of 16; jfk's
    segments are under 11 s, so at most 13 s = 656), an upload's is the
    full 30 s (1500 positions), as are a stream's at the default 0; finals
    are scheduled urgent, interims high, the upload normal (the recent
    requests' priorities)."""
    w0, p0 = encoder_counters(srv)
    col, (code, _) = run_stream(srv, jfk_pcm(), 3200, 20.0, encoding="linear16",
                                sample_rate=16000)
    assert code == 1000
    w1, p1 = encoder_counters(srv)
    assert w1 - w0 >= 1 and p1 - p0 == 1500 * (w1 - w0), (w1 - w0, p1 - p0)
    srv = trim_srv
    w0, p0 = encoder_counters(srv)
    col, (code, _) = run_stream(srv, jfk_pcm(), 3200, 4.0, encoding="linear16",
                                sample_rate=16000, interim_results="true")
    assert code == 1000
    w1, p1 = encoder_counters(srv)
    n = w1 - w0
    assert n >= 2 and (p1 - p0) % 16 == 0, (n, p1 - p0)
    assert 500 * n <= p1 - p0 <= 656 * n, (n, p1 - p0)
    _rest_words(srv)
    w2, p2 = encoder_counters(srv)
    assert w2 - w1 >= 1 and p2 - p1 == 1500 * (w2 - w1), (w2 - w1, p2 - p1)
    r = request(srv.port, "GET", "/v2/models/%s/stats" % MODEL,
                headers={"Authorization": "Token " + API_KEY})
    assert r.status == 200, r.body
    prio = [e["priority"] for e in r.json()["model_stats"][0]["inferd"]["recent_requests"]]
    assert prio[-1] == "normal", prio
    assert "urgent" in prio and "high" in prio, prio


# --- bad input --------------------------------------------------------------------


def open_connections(d):
    r = request(d.port, "GET", "/metrics")
    return int(re.search(rb"^inferd_http_open_connections (\d+)", r.body, re.M).group(1))


def whole_stream(d):
    """jfk.wav in 1 s messages as fast as they go, then CloseStream: the
    handshake's response and the server's frames to the close."""
    s, rd, r = ws_open(d.port, "encoding=linear16&sample_rate=16000")
    pcm = jfk_pcm()
    for off in range(0, len(pcm), 32000):
        s.sendall(frame(2, pcm[off:off + 32000]))
    s.sendall(frame(1, b'{"type":"CloseStream"}'))
    frames = read_frames(s, rd, timeout=120)
    s.close()
    return r, frames


def assert_still_serves(d):
    """A whole stream still works (fast), and nothing was left open."""
    r, frames = whole_stream(d)
    assert close_of(frames)[0] == 1000
    texts = [json.loads(p) for op, p in frames if op == 1]
    got = [w for m in texts if m["type"] == "Results" and m["is_final"]
           for w in words(m["channel"]["alternatives"][0]["transcript"])]
    assert got == rest_words(d)
    wait_until(lambda: open_connections(d) == 1, "the streams' connections to close", 30)


def test_access_log_has_the_stream_end(srv):
    """Besides the handshake's 101 line, the access log gets one line when
    the stream ends: audio seconds, finals sent, the close code, duration."""
    r, frames = whole_stream(srv)
    rid = r.header("dg-request-id")
    n_finals = sum(1 for op, p in frames if op == 1 and json.loads(p).get("is_final"))
    def end_line():
        return next((ln for ln in srv.stderr_text().splitlines()
                     if "live_end=1" in ln and ln.endswith("request_id=" + rid)), None)
    wait_until(end_line, "the stream's end line", 30)
    line = end_line()
    assert "audio_s=11.000 " in line and " close=1000 " in line, line
    assert " finals=%d " % n_finals in line and n_finals >= 1, line


def test_oversized_message_closes_1009(srv):
    s, rd, r = ws_open(srv.port, "encoding=linear16&sample_rate=16000")
    s.sendall(frame(2, b"\0" * ((1 << 20) + 2)))
    assert close_of(read_frames(s, rd))[0] == 1009
    s.close()
    assert_still_serves(srv)
    # the access log's end line has the code the WebSocket layer sent (it
    # said close=0 for the closes of protocol errors: a fresh user's finding)
    rid = r.header("dg-request-id")
    def end_line():
        return next((ln for ln in srv.stderr_text().splitlines()
                     if "live_end=1" in ln and ln.endswith("request_id=" + rid)), None)
    wait_until(end_line, "the stream's end line", 30)
    assert " close=1009 " in end_line(), end_line()


def test_text_and_control_frames_are_handled(srv):
    s, rd, r = ws_open(srv.port, "encoding=linear16&sample_rate=16000&punctuate=false")
    pcm = jfk_pcm()
    s.sendall(frame(1, b"hello, not JSON") + frame(1, b'{"type":"Bogus"}') + frame(1, b"[1,2]"))
    s.sendall(frame(9, b"are you there"))  # a ping: answered with a pong
    half = len(pcm) // 2
    s.sendall(frame(2, pcm[:half], fin=False) + frame(9, b"mid") + frame(0, pcm[half:]))
    s.sendall(frame(2, b""))  # old clients' CloseStream
    frames = read_frames(s, rd, timeout=120)
    s.close()
    assert (10, b"are you there") in frames and (10, b"mid") in frames
    assert close_of(frames)[0] == 1000
    texts = [json.loads(p) for op, p in frames if op == 1]
    assert texts[-1]["type"] == "Metadata"
    got = [w for m in texts if m["type"] == "Results" and m["is_final"]
           for w in words(m["channel"]["alternatives"][0]["transcript"])]
    assert got == rest_words(srv)


@pytest.mark.parametrize("query,punctuated", [
    ("punctuate=true&punctuate=false", False),
    ("smart_format=false&smart_format=true", True),
])
def test_repeated_punctuate_key_last_value_wins(srv, query, punctuated):
    # as on the REST route: any true made punctuate true
    s, rd, r = ws_open(srv.port, "encoding=linear16&sample_rate=16000&" + query)
    s.sendall(frame(2, jfk_pcm()) + frame(1, b'{"type":"CloseStream"}'))
    frames = read_frames(s, rd, timeout=120)
    s.close()
    texts = [json.loads(p) for op, p in frames if op == 1]
    t = " ".join(m["channel"]["alternatives"][0]["transcript"] for m in texts
                 if m["type"] == "Results" and m["is_final"])
    t = t.strip()
    assert t.lower().startswith("and so my fellow americans"), t
    assert (t[0] == "A") == punctuated, t  # punctuated: the model's capitals kept


def test_unmasked_frame_is_a_protocol_error(srv):
    s, rd, r = ws_open(srv.port, "encoding=linear16&sample_rate=16000")
    s.sendall(frame(2, b"\0" * 640, mask=False))
    assert close_of(read_frames(s, rd))[0] == 1002
    s.close()


def test_abrupt_disconnects(srv):
    pcm = jfk_pcm()
    # mid-frame, before any result
    s, rd, r = ws_open(srv.port, "encoding=linear16&sample_rate=16000")
    s.sendall(frame(2, pcm[:64000])[:30000])
    s.close()
    # while a transcription is in flight
    s, rd, r = ws_open(srv.port, "encoding=linear16&sample_rate=16000&interim_results=true")
    s.sendall(frame(2, pcm))
    s.sendall(frame(1, b'{"type":"Finalize"}'))
    time.sleep(0.3)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # reset
    s.close()
    wait_until(lambda: open_connections(srv) == 1, "the vanished streams to be freed", 30)
    assert_still_serves(srv)


@pytest.mark.parametrize("kind,synth", [
    ("silence", []),
    ("white noise", ["synth", "60", "whitenoise", "vol", "0.3"]),
])
def test_sixty_seconds_of_silence_or_noise_give_no_words(srv, kind, synth):
    """60 s of digital silence, and of white noise (sox -R: the same noise
    each run), at 20x real time with interim results: no word, interim or
    final; the stream ends with Metadata of 60 s and close 1000."""
    pcm = subprocess.run(["sox", "-R", "-D", "-n", "-r", "16000", "-c", "1", "-b", "16",
                          "-e", "signed-integer", "-t", "raw", "-", *(synth or ["trim", "0", "60"])],
                         check=True, capture_output=True).stdout
    assert len(pcm) == 60 * 32000
    s, rd, r = ws_open(srv.port, "encoding=linear16&sample_rate=16000&interim_results=true"
                       "&vad_events=true")
    assert r.status == 101
    for off in range(0, len(pcm), 3200):  # 100 ms frames, 5 ms apart
        s.sendall(frame(2, pcm[off:off + 3200]))
        time.sleep(0.005)
    s.sendall(frame(1, b'{"type":"CloseStream"}'))
    frames = read_frames(s, rd, timeout=120)
    s.close()
    assert close_of(frames)[0] == 1000
    msgs = [json.loads(p) for op, p in frames if op == 1]
    said = [m["channel"]["alternatives"][0]["transcript"] for m in msgs if m["type"] == "Results"]
    assert not any(said), f"{kind} gave words: {said}"
    assert msgs[-1]["type"] == "Metadata" and msgs[-1]["duration"] == pytest.approx(60.0, abs=0.01)


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(next(ln for ln in f if ln.startswith("VmRSS")).split()[1]) / 1024


def test_flood_faster_than_real_time_is_bounded(srv):
    """A client that sends speech as fast as the socket takes it for 30 s
    (hundreds of times real time): the daemon either keeps up or closes it
    with 1011 and a reason naming the limit it reached, its memory stays
    bounded (the stream's limits: 5 minutes of audio held, 8 MiB not yet
    decoded, 64 finals waiting), and it serves a whole stream afterwards."""
    pcm = jfk_pcm()
    before = rss_mb(srv.proc.pid)
    peak = before
    s, rd, r = ws_open(srv.port, "encoding=linear16&sample_rate=16000&interim_results=true")
    assert r.status == 101
    s.settimeout(1.0)
    sent, end = 0, time.monotonic() + 30
    closed = False
    while time.monotonic() < end and not closed:
        try:
            s.sendall(frame(2, pcm))
            sent += len(pcm)
        except socket.timeout:  # back-pressure: the daemon is not reading
            pass
        except (BrokenPipeError, ConnectionResetError):
            closed = True
        peak = max(peak, rss_mb(srv.proc.pid))
    if not closed:
        try:
            s.sendall(frame(1, b'{"type":"CloseStream"}'))
        except OSError:
            pass
    frames = read_frames(s, rd, timeout=300)
    s.close()
    print("flood: sent %.1f MB, closed %s, frames %s, RSS +%.0f MB" % (sent / 1e6, closed, [(op, p[:80]) for op, p in frames if op == 8], peak - before))
    assert sent > 11 * 32000 * 10, "not a flood: %d bytes" % sent
    if frames and frames[-1][0] == 8:
        code, reason = close_of(frames)
        assert code == 1000 or (code == 1011 and reason), (code, reason)
    assert peak - before < 512, "RSS grew %.0f MB during the flood" % (peak - before)
    wait_until(lambda: open_connections(srv) == 1, "the flooding stream to be freed", 60)
    assert_still_serves(srv)


def test_undecodable_audio_closes_1002(srv):
    s, rd, r = ws_open(srv.port, "encoding=linear32&sample_rate=16000")
    s.sendall(frame(2, struct.pack("<4f", 0.0, float("nan"), 0.1, 0.2)))
    code, reason = close_of(read_frames(s, rd))
    assert code == 1002 and reason.startswith("DATA-0000")
    s.close()


# --- shutdown ---------------------------------------------------------------------


def test_sigterm_drains_live_streams():
    d = Daemon(live_config(live_idle_timeout_ms=30000))
    try:
        s, rd, r = ws_open(d.port, "encoding=linear16&sample_rate=16000")
        pcm = jfk_pcm()
        s.sendall(frame(2, pcm[:16000 * 2 * 3]))  # "And so my fellow Americans", still open
        time.sleep(1.0)
        d.proc.send_signal(signal.SIGTERM)
        frames = read_frames(s, rd, timeout=60)
        s.close()
        assert close_of(frames)[0] == 1001
        texts = [json.loads(p) for op, p in frames if op == 1]
        finals = [m for m in texts if m["type"] == "Results" and m["is_final"]]
        assert finals and "americans" in words(finals[-1]["channel"]["alternatives"][0]["transcript"])
        assert texts[-1]["type"] == "Metadata"
        assert d.proc.wait(30) == 0
    finally:
        assert_stopped_clean(d)


def test_drain_deadline_closes_live_streams_1001():
    """A stream still owed results when limits.drain_timeout_ms runs out (its
    pass takes longer than the 1 ms allowed) gets its close frame, 1001,
    without them; the daemon exits."""
    d = Daemon(live_config(live_idle_timeout_ms=30000, drain_timeout_ms=1))
    try:
        s, rd, r = ws_open(d.port, "encoding=linear16&sample_rate=16000")
        s.sendall(frame(2, jfk_pcm()))  # 11 s of speech at once: passes still to run
        time.sleep(0.2)
        d.proc.send_signal(signal.SIGTERM)
        frames = read_frames(s, rd, timeout=60)
        s.close()
        assert close_of(frames) == (1001, "server shutting down"), frames[-3:]
        assert not [p for op, p in frames if op == 1 and b'"Metadata"' in p], frames
        assert d.proc.wait(60) == 0
        assert "drain timeout" in d.stderr_text()
    finally:
        assert_stopped_clean(d)


# --- containerised audio and raw Opus ------------------------------------------------


def ffmpeg_jfk(*args):
    """jfk.wav encoded by ffmpeg (args: output options, ending in -f FORMAT)."""
    return subprocess.run(["ffmpeg", "-v", "error", "-i", os.path.join(AUDIO, "jfk.wav"),
                           *args, "-"], capture_output=True, check=True).stdout


def ogg_packets(data):
    """The packets of a one-stream Ogg file (RFC 3533 pages, lacing values)."""
    out, cur, off = [], b"", 0
    while off < len(data):
        assert data[off:off + 4] == b"OggS"
        n_seg = data[off + 26]
        lacing = data[off + 27:off + 27 + n_seg]
        body = off + 27 + n_seg
        for v in lacing:
            cur += data[body:body + v]
            body += v
            if v < 255:
                out.append(cur)
                cur = b""
        off = body
    return out


def stream_raw(d, query, messages, close=True):
    """Send the binary messages (as fast as they go), then CloseStream: the
    server's frames to its close."""
    s, rd, r = ws_open(d.port, query)
    assert r.status == 101, r.body
    for m in messages:
        s.sendall(frame(2, m))
    if close:
        s.sendall(frame(1, b'{"type":"CloseStream"}'))
    frames = read_frames(s, rd, timeout=120)
    s.close()
    return frames


def frames_final_words(frames):
    texts = [json.loads(p) for op, p in frames if op == 1]
    return [w for m in texts if m["type"] == "Results" and m["is_final"]
            for w in words(m["channel"]["alternatives"][0]["transcript"])]


OPUS = ["-c:a", "libopus", "-b:a", "32k"]


@pytest.mark.parametrize("name,query,args,chunk", [
    ("ogg-opus", "", [*OPUS, "-f", "ogg"], 3000),
    ("ogg-opus-param", "encoding=ogg-opus", [*OPUS, "-f", "ogg"], 1777),
    ("webm-opus", "", [*OPUS, "-f", "webm"], 3000),
    ("wav-16k", "sample_rate=8000", ["-ar", "16000", "-c:a", "pcm_s16le", "-f", "wav"], 3200),
    ("mp3", "", ["-c:a", "libmp3lame", "-b:a", "64k", "-f", "mp3"], 1000),
    ("flac", "encoding=flac", ["-c:a", "flac", "-f", "flac"], 5000),
])
def test_containers_same_words(srv, name, query, args, chunk):
    """Containers, detected or named by encoding (sample_rate then ignored),
    in odd-sized messages faster than real time: the linear16 stream's
    words (REST's), within LA_WORDS for the lossy codecs."""
    data = ffmpeg_jfk(*args)
    frames = stream_raw(srv, query, [data[o:o + chunk] for o in range(0, len(data), chunk)])
    assert close_of(frames)[0] == 1000, frames[-1]
    got = frames_final_words(frames)
    assert wer(rest_words(srv), got) * len(rest_words(srv)) <= LA_WORDS, got
    meta = json.loads([p for op, p in frames if op == 1][-1])
    # 11.088 s for MP3: a stream cannot trim the encoder's padding at the
    # end (the whole-file decode reads it from the LAME header's end)
    assert meta["type"] == "Metadata" and meta["duration"] == pytest.approx(11.0, abs=0.1)


def test_mp4_with_its_index_last_is_refused_saying_how_to_fix_it(srv):
    """An MP4 whose moov box follows the audio (ffmpeg's default) cannot be
    demuxed as it arrives: libavformat seeks to the index first. The close
    reason says so and how to remux it (it said the audio "stops being
    readable": a fresh user's finding); a faststart one streams."""
    path = os.path.join(AUDIO, "containers", "jfk.m4a")  # make-containers.sh's
    with open(path, "rb") as f:
        data = f.read()
    assert data.find(b"moov") > data.find(b"mdat")
    frames = stream_raw(srv, "", [data])
    code, reason = close_of(frames)
    assert code == 1002 and "moov box follows its audio" in reason, reason
    assert "-movflags +faststart" in reason, reason
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "fast.m4a")
        subprocess.run(["ffmpeg", "-v", "error", "-i", path, "-c", "copy", "-movflags",
                        "+faststart", out], check=True)
        with open(out, "rb") as f:
            fast = f.read()
    assert fast.find(b"moov") < fast.find(b"mdat")
    frames = stream_raw(srv, "", [fast[o:o + 4000] for o in range(0, len(fast), 4000)])
    assert close_of(frames)[0] == 1000 and frames_final_words(frames)


def test_wav_header_is_no_click(srv):
    """A WAV stream's first samples are the file's, not its header read as
    PCM: the 44-byte header as linear16 would be 22 samples of noise."""
    data = ffmpeg_jfk("-ar", "16000", "-c:a", "pcm_s16le", "-f", "wav")
    frames = stream_raw(srv, "", [data[o:o + 3200] for o in range(0, len(data), 3200)])
    assert close_of(frames)[0] == 1000
    assert frames_final_words(frames) == rest_words(srv)


def test_raw_opus_packets_same_words(srv):
    """encoding=opus: one raw Opus packet per message (taken from an Ogg
    file's pages), 48 kHz."""
    pkts = ogg_packets(ffmpeg_jfk(*OPUS, "-ar", "48000", "-ac", "1", "-f", "ogg"))
    assert pkts[0].startswith(b"OpusHead") and pkts[1].startswith(b"OpusTags")
    frames = stream_raw(srv, "encoding=opus&sample_rate=48000", pkts[2:])
    assert close_of(frames)[0] == 1000, frames[-1]
    got = frames_final_words(frames)
    assert wer(rest_words(srv), got) * len(rest_words(srv)) <= LA_WORDS, got


def test_container_garbage_closes_1002(srv):
    """Random bytes with no encoding: no container is recognised within the
    probe's 16 KiB, the socket closes 1002 DATA-0000 at once."""
    junk = bytes(random.Random(7).getrandbits(8) for _ in range(64000))
    t0 = time.monotonic()
    frames = stream_raw(srv, "", [junk[o:o + 4000] for o in range(0, len(junk), 4000)],
                        close=False)
    code, reason = close_of(frames)
    assert code == 1002 and "DATA-0000" in reason, reason
    assert time.monotonic() - t0 < 10
    assert_still_serves(srv)


@pytest.mark.parametrize("query,first", [
    ("", b""),                                # CloseStream before any byte
    ("", None),                               # an empty binary message (old clients)
    ("encoding=ogg-opus", "ogg-header"),      # the container's header alone
])
def test_container_closed_before_audio_is_empty(srv, query, first):
    """A container stream closed before any audio (a browser stopped before
    MediaRecorder's first chunk) is an empty stream, as a linear16 one:
    Metadata with duration 0 and close 1000, not an error."""
    msgs = []
    if first == "ogg-header":
        msgs = [ogg_header()]
    elif first is None:
        msgs = [b""]
    s, rd, r = ws_open(srv.port, query)
    assert r.status == 101, r.body
    for m in msgs:
        s.sendall(frame(2, m))
    if first is not None:
        s.sendall(frame(1, b'{"type":"CloseStream"}'))
    frames = read_frames(s, rd, timeout=60)
    s.close()
    assert close_of(frames)[0] == 1000, frames[-1]
    texts = [json.loads(p) for op, p in frames if op == 1]
    assert [m["type"] for m in texts] == ["Metadata"] and texts[0]["duration"] == 0


def ogg_header():
    """The first two pages of jfk's Ogg Opus file (OpusHead, OpusTags): no audio."""
    data = ffmpeg_jfk(*OPUS, "-f", "ogg")
    off = 0
    for _ in range(2):
        n_seg = data[off + 26]
        off += 27 + n_seg + sum(data[off + 27:off + 27 + n_seg])
    return data[:off]


def test_raw_opus_garbage_closes_1002(srv):
    """encoding=opus messages the Opus decoder refuses close 1002 DATA-0000
    once 50 in a row are refused, instead of an empty transcript. (Ogg
    bytes sent as raw Opus are not caught: most byte strings are valid Opus
    packets, decoded to noise.)"""
    frames = stream_raw(srv, "encoding=opus&sample_rate=48000", [b"\xff" * 1000] * 80,
                        close=False)
    code, reason = close_of(frames)
    assert code == 1002 and "DATA-0000" in reason and "cannot be decoded" in reason, reason
    assert_still_serves(srv)


def test_client_vanishes_mid_ogg_page(srv):
    """A client that goes away mid-page (its decoder thread waiting in the
    read): the stream is freed, its thread joined, the daemon serves on."""
    data = ffmpeg_jfk(*OPUS, "-f", "ogg")
    for cut in (100, len(data) // 2 + 33):
        s, rd, r = ws_open(srv.port, "")
        assert r.status == 101
        s.sendall(frame(2, data[:cut]))
        time.sleep(0.5)
        s.close()
    assert_still_serves(srv)


# --- multichannel ----------------------------------------------------------------


def clip_pcm16k(name):
    """A test clip as 16 kHz mono s16le (ffmpeg), and the same as WAV."""
    path = os.path.join(AUDIO, name)
    pcm = subprocess.run(["ffmpeg", "-v", "error", "-i", path, "-ar", "16000", "-ac", "1",
                          "-f", "s16le", "-"], capture_output=True, check=True).stdout
    wav = subprocess.run(["ffmpeg", "-v", "error", "-i", path, "-ar", "16000", "-ac", "1",
                          "-c:a", "pcm_s16le", "-f", "wav", "-"],
                         capture_output=True, check=True).stdout
    return pcm, wav


def rest_words_of(d, wav):
    r = request(d.port, "POST", "/v1/listen?model=" + MODEL,
                headers={"Authorization": "Token " + API_KEY, "Content-Type": "audio/wav"},
                body=wav)
    assert r.status == 200, r.body
    return words(r.json()["results"]["channels"][0]["alternatives"][0]["transcript"])


def interleave(*chans):
    """s16le mono byte strings -> one interleaved s16le stream (the shorter
    ones padded with silence)."""
    n = max(len(c) for c in chans) // 2
    arrs = []
    for c in chans:
        a = array.array("h")
        a.frombytes(c)
        a.extend([0] * (n - len(a)))
        arrs.append(a)
    out = array.array("h", [0] * (n * len(chans)))
    for i, a in enumerate(arrs):
        out[i::len(chans)] = a
    return out.tobytes()


def test_multichannel_one_result_stream_per_channel(srv):
    """Stereo linear16 with multichannel=true, jfk on the left and another
    clip on the right: each channel's finals (channel_index [c, 2]) are
    the words REST gives for that channel's audio alone, exactly (the same
    samples; no interims), SpeechStarted comes for both channels, and one
    Metadata (channels 2) precedes the close 1000. Without multichannel the
    channels are mixed into one result stream (channel_index [0, 1])."""
    left = jfk_pcm()
    right, right_wav = clip_pcm16k("LJ001-0004.flac")
    data = interleave(left, right)
    msgs = [data[o:o + 6400] for o in range(0, len(data), 6400)]  # 100 ms
    frames = stream_raw(srv, "encoding=linear16&sample_rate=16000&channels=2&multichannel=true"
                             "&vad_events=true", msgs)
    assert close_of(frames)[0] == 1000, frames[-1]
    texts = [json.loads(p) for op, p in frames if op == 1]
    results = [m for m in texts if m["type"] == "Results"]
    assert {tuple(m["channel_index"]) for m in results} == {(0, 2), (1, 2)}
    by_chan = {c: [w for m in results if m["is_final"] and m["channel_index"][0] == c
                   for w in words(m["channel"]["alternatives"][0]["transcript"])]
               for c in (0, 1)}
    assert by_chan[0] == rest_words(srv)
    assert by_chan[1] == rest_words_of(srv, right_wav)
    started = {tuple(m["channel"]) for m in texts if m["type"] == "SpeechStarted"}
    assert started == {(0, 2), (1, 2)}
    metas = [m for m in texts if m["type"] == "Metadata"]
    assert len(metas) == 1 and metas[0]["channels"] == 2 and texts[-1]["type"] == "Metadata"
    assert metas[0]["duration"] == pytest.approx(len(left) / 32000, abs=0.05)
    mixed = stream_raw(srv, "encoding=linear16&sample_rate=16000&channels=2", msgs)
    assert close_of(mixed)[0] == 1000
    mres = [json.loads(p) for op, p in mixed if op == 1]
    assert {tuple(m["channel_index"]) for m in mres if m["type"] == "Results"} == {(0, 1)}
    assert [m["channels"] for m in mres if m["type"] == "Metadata"] == [1]


def test_multichannel_finalize_and_vanish(srv):
    """Finalize flushes every channel (from_finalize finals on both, the
    socket stays open for the rest of the audio), and a client gone
    mid-stream frees every channel."""
    left = jfk_pcm()
    right, _ = clip_pcm16k("LJ001-0004.flac")
    data = interleave(left, right)
    half = len(data) // 2 // 4 * 4
    query = "encoding=linear16&sample_rate=16000&channels=2&multichannel=true"
    s, rd, r = ws_open(srv.port, query)
    assert r.status == 101, r.body
    s.sendall(frame(2, data[:half]))
    s.sendall(frame(1, b'{"type":"Finalize"}'))
    s.sendall(frame(2, data[half:]))
    s.sendall(frame(1, b'{"type":"CloseStream"}'))
    frames = read_frames(s, rd, timeout=120)
    s.close()
    assert close_of(frames)[0] == 1000, frames[-1]
    texts = [json.loads(p) for op, p in frames if op == 1]
    fin = {m["channel_index"][0] for m in texts
           if m["type"] == "Results" and m["from_finalize"]}
    assert fin == {0, 1}, texts
    assert [m["channels"] for m in texts if m["type"] == "Metadata"] == [2]
    s, rd, r = ws_open(srv.port, query)
    assert r.status == 101
    s.sendall(frame(2, data[:half]))
    time.sleep(0.5)
    s.close()  # gone mid-stream, both channels' state in place
    assert_still_serves(srv)
