"""HTTP/1.1 behaviour over raw sockets: keep-alive, pipelining, limits,
chunked bodies, Expect: 100-continue, timeouts, zstd in both directions."""
import re
import socket
import subprocess
import time

from conftest import Reader, connect, make_config, request, wait_until

LIVE = b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n"


def zstd(data, *args):
    return subprocess.run(["zstd", "-q", "-c", *args], input=data, capture_output=True,
                          check=True).stdout


def test_pipelined_requests_answered_in_order(daemon):
    with connect(daemon.port) as s:
        reqs = b"".join(
            f"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nX-Request-Id: p{i}\r\n\r\n".encode()
            for i in range(5))
        reqs += b"GET /v2/models/nope HTTP/1.1\r\nHost: x\r\nX-Request-Id: p5\r\n\r\n"
        s.sendall(reqs)
        rd = Reader(s)
        for i in range(5):
            r = rd.read_response()
            assert r.status == 200
            assert r.header("x-request-id") == f"p{i}"
        r = rd.read_response()
        assert r.status == 404 and r.header("x-request-id") == "p5"


def test_thousand_keepalive_requests_on_one_connection(daemon):
    with connect(daemon.port) as s:
        rd = Reader(s)
        for i in range(1000):
            s.sendall(LIVE)
            r = rd.read_response()
            assert r.status == 200, i
            assert r.header("connection") != "close"


def test_http10_closes_after_response(daemon):
    with connect(daemon.port) as s:
        s.sendall(b"GET /v2/health/live HTTP/1.0\r\n\r\n")
        rd = Reader(s)
        assert rd.read_response().status == 200
        assert rd.is_closed()


def test_oversized_headers_431(daemon):
    with connect(daemon.port) as s:
        s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 8000 + b"\r\n\r\n")
        rd = Reader(s)
        r = rd.read_response()
        assert r.status == 431
        assert "max_header_bytes" in r.json()["error"]  # KServe's shape: the path's
        assert rd.is_closed()


def test_oversized_request_target_414(daemon):
    """A request target longer than limits.max_header_bytes gets 414 URI
    Too Long (nginx's answer), not 431; a header over it still gets 431."""
    with connect(daemon.port) as s:
        s.sendall(b"GET /v1/models?" + b"a" * 20000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        rd = Reader(s)
        r = rd.read_response()
        assert r.status == 414, r.body
        err = r.json()["error"]
        assert err["code"] == "uri_too_long", err
        assert "request target" in err["message"] and "max_header_bytes" in err["message"], err
        assert rd.is_closed()
    # in the shape of the API the target's first bytes name, as a 431
    for target, shape in ((b"/v1/listen?x=", "deepgram"), (b"/v2/health/live?", "kserve")):
        with connect(daemon.port) as s:
            s.sendall(b"POST " + target + b"a" * 20000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
            r = Reader(s).read_response()
            assert r.status == 414, r.body
            body = r.json()
            if shape == "deepgram":
                assert body["err_code"] == "uri_too_long" and body["request_id"], body
                assert "max_header_bytes" in body["err_msg"], body
            else:
                assert isinstance(body["error"], str) and "max_header_bytes" in body["error"], body
    # the target's first bytes in one read, the rest in another
    with connect(daemon.port) as s:
        s.sendall(b"POST /v1/li")
        time.sleep(0.2)
        s.sendall(b"sten?x=" + b"a" * 20000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        r = Reader(s).read_response()
        assert r.status == 414 and r.json()["err_code"] == "uri_too_long", r.body
    with connect(daemon.port) as s:
        s.sendall(b"GET /v2/health/live?" + b"a" * 1000 + b" HTTP/1.1\r\nHost: x\r\nX-Big: "
                  + b"a" * 20000 + b"\r\n\r\n")
        assert Reader(s).read_response().status == 431


def test_errors_within_the_headers_in_the_paths_protocol_shape(daemon):
    """A request stopped within its headers (a malformed Content-Length,
    headers over the limit) is answered in the error shape of the protocol
    its path names, as every later error is: Deepgram's on /v1/listen,
    OpenAI's on /v1/audio/transcriptions."""
    cases = [
        (b"POST /v1/listen HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n", 400),
        (b"POST /v1/listen HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 8000 + b"\r\n\r\n", 431),
        (b"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
         400),
    ]
    for raw, status in cases:
        with connect(daemon.port) as s:
            s.sendall(raw)
            r = Reader(s).read_response()
            assert r.status == status, raw[:40]
            body = r.json()
            code = {400: "invalid_request", 431: "headers_too_large"}[status]
            if raw.startswith(b"POST /v1/listen"):
                assert set(body) == {"err_code", "err_msg", "request_id"}, body
                assert body["request_id"], body
                assert body["err_code"] == code, body
                msg = body["err_msg"]
            else:
                assert body["error"]["code"] == code, body
                msg = body["error"]["message"]
            assert ("malformed HTTP request" in msg if status == 400
                    else "max_header_bytes" in msg), body


def test_too_many_header_lines_431(daemon):
    """At most 100 header fields (SRV_MAX_HEADERS, fixed): the 100th is
    still read (X-Request-Id comes back), one more gets a 431 whose message
    names the count rather than limits.max_header_bytes."""
    def send(n):
        hdrs = b"".join(b"X-%d: 1\r\n" % i for i in range(n - 1)) + b"X-Request-Id: last\r\n"
        with connect(daemon.port) as s:
            s.sendall(b"GET /v1/models HTTP/1.1\r\n" + hdrs + b"\r\n")
            return Reader(s).read_response()
    r = send(100)
    assert r.status == 200 and r.header("x-request-id") == "last"
    for n in (101, 150):
        r = send(n)
        assert r.status == 431, n
        err = r.json()["error"]  # OpenAI's shape on /v1/models
        assert err["code"] == "headers_too_large", err
        assert "more than 100 header fields" in err["message"], err
        assert "max_header_bytes" not in err["message"], err


def test_oversized_body_413_by_content_length(daemon):
    with connect(daemon.port) as s:
        # Rejected from the header alone: the body is never sent.
        s.sendall(b"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n")
        rd = Reader(s)
        r = rd.read_response()
        assert r.status == 413
        assert rd.is_closed()


def test_oversized_chunked_body_413(daemon):
    chunk = b"%x\r\n" % 40000 + b"a" * 40000 + b"\r\n"
    with connect(daemon.port) as s:
        s.sendall(b"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        try:
            s.sendall(chunk * 3 + b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert Reader(s).read_response().status == 413


def test_chunked_body_accepted(daemon):
    with connect(daemon.port) as s:
        s.sendall(b"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                  b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n" + LIVE)
        rd = Reader(s)
        # the body was read in full (415: not multipart/form-data), and the
        # connection stays usable for the next request
        assert rd.read_response().status == 415
        assert rd.read_response().status == 200


def test_bad_chunk_size_400(daemon):
    with connect(daemon.port) as s:
        s.sendall(b"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                  b"zz\r\nhello\r\n0\r\n\r\n")
        rd = Reader(s)
        r = rd.read_response()
        assert r.status == 400
        assert "chunk" in r.json()["error"]["message"].lower()
        assert rd.is_closed()


def test_garbage_request_line_400(daemon):
    with connect(daemon.port) as s:
        s.sendall(b"\x16\x03\x01 hello there\r\n\r\n")
        rd = Reader(s)
        assert rd.read_response().status == 400
        assert rd.is_closed()


def test_expect_100_continue(daemon):
    with connect(daemon.port) as s:
        s.sendall(b"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                  b"Expect: 100-continue\r\n\r\n")
        rd = Reader(s)
        interim = rd.read_response(head_only=True)
        assert interim.status == 100
        s.sendall(b"hello")
        assert rd.read_response().status == 415


def test_expect_100_continue_refused_when_too_big(daemon):
    with connect(daemon.port) as s:
        s.sendall(b"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n"
                  b"Expect: 100-continue\r\n\r\n")
        assert Reader(s).read_response().status == 413


def test_slow_headers_closed_at_header_timeout(daemon):
    """One byte a second: the 2 s header timeout closes it, with a 408."""
    with connect(daemon.port) as s:
        rd = Reader(s)
        closed_at = None
        for b in b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n":
            try:
                s.sendall(bytes([b]))
            except (BrokenPipeError, ConnectionResetError):
                closed_at = time.time()
                break
            if rd.is_closed(timeout=1):
                closed_at = time.time()
                break
        # cut off before its last byte (about 40 s at this pace), by the
        # header timeout: the 408 is the daemon saying which limit it was
        assert closed_at is not None, "a slowloris client was never cut off"
        assert b" 408 " in rd.buf.split(b"\r\n")[0]


def test_idle_keepalive_closed_at_idle_timeout(daemon):
    with connect(daemon.port) as s:
        # timed from before the request: the daemon's 3 s idle timer starts
        # after it, so a busy machine can only make this later, never
        # earlier; more than the 2 s header timeout shows which limit it was
        start = time.monotonic()
        s.sendall(LIVE)
        rd = Reader(s)
        assert rd.read_response().status == 200
        assert rd.is_closed(timeout=60)  # a hang guard
        assert time.monotonic() - start > 2.5


def test_zstd_response_when_accepted(daemon):
    plain = request(daemon.port, "GET", "/metrics")
    r = request(daemon.port, "GET", "/metrics", headers={"Accept-Encoding": "gzip, zstd"})
    assert r.status == 200
    assert r.header("content-encoding") == "zstd"
    assert "accept-encoding" in r.header("vary").lower()
    text = zstd(r.body, "-d").decode()
    assert text.startswith("# HELP")
    assert len(text) > 0.5 * len(plain.body)
    r = request(daemon.port, "GET", "/metrics", headers={"Accept-Encoding": "zstd;q=0"})
    assert r.header("content-encoding") is None


def test_zstd_request_body_decoded(daemon):
    body = zstd(b"x" * 1000)
    r = request(daemon.port, "POST", "/v1/audio/transcriptions", body=body,
                headers={"Content-Encoding": "zstd"})
    assert r.status == 415  # decoded fine, then handled: not multipart


def test_corrupt_zstd_request_body_400(daemon):
    r = request(daemon.port, "POST", "/v1/audio/transcriptions", body=b"\x28\xb5\x2f\xfd garbage",
                headers={"Content-Encoding": "zstd"})
    assert r.status == 400
    assert "zstd" in r.json()["error"]["message"]


def test_zstd_bomb_413(daemon):
    """A small compressed body that expands past max_body_bytes (64 KiB)."""
    body = zstd(b"\0" * 10_000_000, "-19")
    assert len(body) < 65536
    r = request(daemon.port, "POST", "/v1/audio/transcriptions", body=body,
                headers={"Content-Encoding": "zstd"})
    assert r.status == 413


def test_unknown_content_encoding_415(daemon):
    r = request(daemon.port, "POST", "/v1/audio/transcriptions", body=b"abc",
                headers={"Content-Encoding": "br"})
    assert r.status == 415


def test_daemon_still_serves_after_bad_clients(daemon):
    assert request(daemon.port, "GET", "/v2/health/live").status == 200


# --- regressions from hostile testing ---------------------------------------

def test_chunked_trailers_do_not_corrupt_the_request(daemon):
    """Trailers arrive after routing has looked at the path: they are
    counted against the header limit but never stored."""
    with connect(daemon.port) as s:
        s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                  b"0\r\nX-Trailer: " + b"a" * 1000 + b"\r\n\r\n")
        r = Reader(s).read_response()
        assert r.status == 200 and r.json() == {"live": True}
    with connect(daemon.port) as s:
        s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                  b"0\r\n" + b"X: y\r\n" * 2000 + b"\r\n")
        assert Reader(s).read_response().status == 431


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(next(l for l in f if l.startswith("VmRSS")).split()[1])


def test_pipelining_without_reading_is_bounded(daemon):
    """A client that pipelines and never reads stops being read from once
    about 1 MiB of its responses are queued."""
    before = rss_kb(daemon.proc.pid)
    with connect(daemon.port) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.settimeout(0.5)
        req = b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n" * 1000
        sent = 0
        try:
            for _ in range(20):
                s.sendall(req)
                sent += len(req)
        except socket.timeout:
            pass
        time.sleep(0.5)
        grown = rss_kb(daemon.proc.pid) - before
        assert grown < 40_000, f"RSS grew {grown} kB"
    assert request(daemon.port, "GET", "/v2/health/live").status == 200


def tcp_send_queue(local_port, peer_port):
    """The kernel's unsent bytes (tx_queue, /proc/net/tcp) of the
    established socket local_port -> peer_port on 127.0.0.1, or None."""
    with open("/proc/net/tcp") as f:
        for ln in f.readlines()[1:]:
            x = ln.split()
            if (int(x[1].split(":")[1], 16) == local_port and
                    int(x[2].split(":")[1], 16) == peer_port and x[3] == "01"):
                return int(x[4].split(":")[0], 16)
    return None


def send_timeouts(port):
    m = re.search(r"^inferd_http_send_timeouts_total (\d+)$",
                  request(port, "GET", "/metrics").body.decode(), re.M)
    return int(m.group(1))


def test_client_that_stops_reading_is_closed_at_send_timeout(fresh_daemon):
    """A client that asks for answers larger than the socket buffers hold,
    the last with Connection: close, and never reads them. Its connection
    waits to write: no header, body or idle timer runs then, so without
    limits.send_timeout_ms it would hold its fd and queued bytes for ever.
    The requests go 8 at a time until the daemon's kernel send queue stops
    growing (full), so that libuv's own queue stays under the 1 MiB that
    pauses parsing (the idle timer's case, test_pipelining_...) and the
    close request is read."""
    d = fresh_daemon(make_config(limits={"send_timeout_ms": 2000}))
    before = send_timeouts(d.port)
    req = b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n"
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", d.port))
    try:
        me = s.getsockname()[1]
        fill_send_queue(s, d.port, req)
        s.sendall(req[:-2] + b"Connection: close\r\n\r\n")
        wait_until(lambda: send_timeouts(d.port) == before + 1,
                   "the stalled connection was never closed", timeout=60)
        assert tcp_send_queue(d.port, me) is None
    finally:
        s.close()
    assert request(d.port, "GET", "/v2/health/live").status == 200


def fill_send_queue(s, port, req, batch=8):
    """Pipeline req `batch` at a time on s (never reading) until the
    daemon's kernel send queue for it stops growing; returns how many were
    sent. Each batch is answered before the next goes (the queue settles),
    so libuv's own queue stays under the 1 MiB that pauses parsing."""
    me, last, sent = s.getsockname()[1], -1, 0
    for _ in range(1000):
        s.sendall(req * batch)
        sent += batch
        q, settled = None, 0
        while settled < 3:
            time.sleep(0.05)
            now = tcp_send_queue(port, me)
            settled = settled + 1 if now == q else 0
            q = now
        if q is not None and q == last:
            return sent
        last = q
    raise AssertionError("the kernel's send queue never filled")


def test_idle_timer_waits_for_the_answers_to_be_written(fresh_daemon):
    """A client reading pipelined answers more slowly than the idle timeout
    (1 s here) gets every one of them: the idle time starts when the last
    answer is written (nginx's keepalive_timeout), not while libuv still
    holds answers the kernel could not take yet."""
    d = fresh_daemon(make_config(limits={"idle_timeout_ms": 1000, "send_timeout_ms": 30000}))
    req = b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n"
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", d.port))
    try:
        n = fill_send_queue(s, d.port, req)
        s.sendall(req * 8)  # these wait in libuv's queue
        n += 8
        time.sleep(2.5)  # past the idle timeout, the answers still queued
        rd = Reader(s)
        got = 0
        for _ in range(n):
            assert rd.read_response().status == 200
            got += 1
    finally:
        s.close()
    assert got == n


def test_header_whitespace_rules(daemon):
    # trailing whitespace in a value is not part of it (RFC 9110 5.5)
    r = request(daemon.port, "GET", "/v2/health/live", headers={"X-Request-Id": "ows-1 \t"})
    assert r.header("x-request-id") == "ows-1"
    # whitespace before the colon is an error (RFC 9112 5.1)
    with connect(daemon.port) as s:
        s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost : a\r\n\r\n")
        assert Reader(s).read_response().status == 400


def test_accept_encoding_q_values(daemon):
    def enc(value):
        return request(daemon.port, "GET", "/metrics",
                       headers={"Accept-Encoding": value}).header("content-encoding")
    assert enc("zstd;q=0.0") is None
    assert enc("zstd;q=1, br;q=0") == "zstd"
    assert enc("gzip;q=1, zstd;q=0.5") == "zstd"
    assert enc("*") == "zstd"
    assert enc("*, zstd;q=0") is None
    assert enc("gzip") is None


def test_expect_and_version_and_transfer_encoding(daemon):
    with connect(daemon.port) as s:
        s.sendall(b"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n"
                  b"Expect: teapot\r\n\r\nabc")
        assert Reader(s).read_response().status == 417
    with connect(daemon.port) as s:  # HTTP/1.0: Expect is ignored, no 100
        s.sendall(b"POST /v1/audio/transcriptions HTTP/1.0\r\nContent-Length: 3\r\n"
                  b"Expect: 100-continue\r\n\r\nabc")
        assert Reader(s).read_response().status == 415
    with connect(daemon.port) as s:
        s.sendall(b"GET /v2/health/live HTTP/2.0\r\nHost: a\r\n\r\n")
        assert Reader(s).read_response().status == 505
    with connect(daemon.port) as s:
        s.sendall(b"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
                  b"0\r\n\r\n")
        assert Reader(s).read_response().status == 501


def test_oversized_chunk_refused_at_its_header(daemon):
    with connect(daemon.port) as s:
        s.sendall(b"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                  b"6400001\r\n")
        # answered with none of the chunk's data sent: refused at its header
        # (waiting for the data would end in the body timeout's 408)
        assert Reader(s).read_response().status == 413


def test_malformed_request_logged_without_a_method(daemon):
    with connect(daemon.port) as s:
        s.sendall(b"\x00garbage\r\n\r\n")
        assert Reader(s).read_response().status == 400
    with connect(daemon.port) as s:
        s.sendall(b'GET /v2/models/a"b\\c HTTP/1.1\r\nHost: a\r\nX-Request-Id: esc-9\r\n\r\n')
        Reader(s).read_response()
    text = daemon.stderr_text()
    assert "method=DELETE" not in text
    line = next(l for l in text.splitlines() if "request_id=esc-9" in l)
    assert 'path="/v2/models/a\\x22b\\x5cc"' in line


def test_route_and_key_checked_before_the_body(daemon, fresh_daemon):
    """A request that cannot succeed is answered from its headers: the body
    is never read or decompressed (a zstd bomb to a wrong route is a 404)."""
    bomb = zstd(b"\0" * 10_000_000, "-19")
    r = request(daemon.port, "POST", "/nope", body=bomb, headers={"Content-Encoding": "zstd"})
    assert r.status == 404
    r = request(daemon.port, "POST", "/v1/models", body=b"x" * 100)
    assert r.status == 405 and r.header("allow") == "GET, HEAD"
    d = fresh_daemon(make_config(api_keys=["k1"]))
    r = request(d.port, "POST", "/v1/audio/transcriptions", body=bomb,
                headers={"Content-Encoding": "zstd"})
    assert r.status == 401
    # without a body a 404 keeps the connection open
    with connect(daemon.port) as s:
        s.sendall(b"GET /nope HTTP/1.1\r\nHost: a\r\n\r\n" + LIVE)
        rd = Reader(s)
        assert rd.read_response().status == 404
        assert rd.read_response().status == 200
