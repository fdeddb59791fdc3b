"""Start-up, command line, auth, connection limits and graceful shutdown."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile

import pytest

from conftest import (BIN, MODELS, Daemon, Reader, connect, default_models, make_config,
                      model_stats, read_deadline_answer, read_to_close, request, wait_submitted,
                      wait_until)


def run(*args, env=None, timeout=60):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=timeout, env=env)


def test_version_and_help():
    r = run("--version")
    assert r.returncode == 0 and r.stdout.startswith("inferd ")
    r = run("--help")
    assert r.returncode == 0
    for word in ("--config", "--listen", "inspect", "limits.max_body_bytes", "models[].replicas"):
        assert word in r.stdout, word


def test_bad_argument_exit_2():
    r = run("--frobnicate")
    assert r.returncode == 2
    assert "--frobnicate" in r.stderr


def write_config(cfg):
    d = tempfile.mkdtemp(prefix="inferd-cfg-")
    p = os.path.join(d, "c.json")
    with open(p, "w") as f:
        f.write(cfg if isinstance(cfg, str) else json.dumps(cfg))
    return p


def test_config_error_names_json_path():
    cfg = make_config()
    cfg["models"][1]["replicas"] = 0
    p = write_config(cfg)
    r = run("--config", p)
    assert r.returncode == 1
    assert "models[1].replicas: expected an integer >= 1" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_config_and_listen_from_environment():
    """INFERD_CONFIG / INFERD_LISTEN stand in for --config / --listen (the
    container image sets them); the flags win over them."""
    bad = write_config({"listen": "127.0.0.1:0", "models": [{"name": "g", "path": "/nonexistent/env.gguf"}]})
    env = dict(os.environ, INFERD_CONFIG=bad)
    r = run(env=env)
    assert r.returncode == 1 and "/nonexistent/env.gguf" in r.stderr, r.stderr
    good = write_config(make_config(models=[default_models()[0]]))
    r = run("--config", good, "--listen", "256.0.0.1:1", env=env)  # --config wins over INFERD_CONFIG
    assert r.returncode != 0 and "/nonexistent/env.gguf" not in r.stderr, r.stderr
    assert "256.0.0.1" in r.stderr, r.stderr
    env = dict(os.environ, INFERD_CONFIG=good, INFERD_LISTEN="256.0.0.2:1")
    r = run(env=env)  # INFERD_LISTEN is used
    assert r.returncode != 0 and "256.0.0.2" in r.stderr, r.stderr
    r = run("--listen", "256.0.0.3:1", env=env)  # --listen wins over INFERD_LISTEN
    assert r.returncode != 0 and "256.0.0.3" in r.stderr and "256.0.0.2" not in r.stderr, r.stderr


def test_missing_model_file_stops_startup():
    cfg = make_config(models=[{"name": "g", "path": "/nonexistent/x.gguf", "format": "gguf"}])
    r = run("--config", write_config(cfg))
    assert r.returncode == 1
    assert "/nonexistent/x.gguf" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_corrupt_model_file_stops_startup(tmp_path):
    src = os.path.join(MODELS, "gemma-3-270m-q4_k_m.gguf")
    bad = tmp_path / "truncated.gguf"
    with open(src, "rb") as f:
        bad.write_bytes(f.read(100_000))
    cfg = make_config(models=[{"name": "g", "path": str(bad)}])
    r = run("--config", write_config(cfg))
    assert r.returncode == 1
    assert str(bad) in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_inspect_prints_real_metadata():
    r = run("inspect", os.path.join(MODELS, "gemma-3-270m-q4_k_m.gguf"))
    assert r.returncode == 0, r.stderr
    assert "gemma3" in r.stdout
    assert "token_embd.weight" in r.stdout
    r = run("inspect", os.path.join(MODELS, "whisper-tiny.en"))
    assert r.returncode == 0, r.stderr
    assert "WhisperSpec" in r.stdout
    r = run("inspect", "/nonexistent")
    assert r.returncode == 1


def test_api_keys(fresh_daemon):
    d = fresh_daemon(make_config(api_keys=["sekret-1"]))
    r = request(d.port, "GET", "/v1/models")
    assert r.status == 401
    assert r.json()["error"]["type"] == "authentication_error"
    r = request(d.port, "GET", "/v2/models/gemma-3-270m")
    assert r.status == 401
    assert isinstance(r.json()["error"], str)  # KServe shape
    r = request(d.port, "GET", "/v1/models", headers={"Authorization": "Bearer wrong"})
    assert r.status == 401
    r = request(d.port, "GET", "/v1/models", headers={"Authorization": "Bearer sekret-1"})
    assert r.status == 200
    r = request(d.port, "GET", "/v1/models", headers={"Authorization": "Token sekret-1"})
    assert r.status == 200
    # probes and metrics need no key
    for path in ("/v2/health/live", "/v2/health/ready", "/metrics"):
        assert request(d.port, "GET", path).status == 200, path


def test_api_key_from_environment(fresh_daemon):
    d = fresh_daemon(make_config(), env={"INFERD_API_KEY": "from-env"})
    assert request(d.port, "GET", "/v1/models").status == 401
    r = request(d.port, "GET", "/v1/models", headers={"Authorization": "Bearer from-env"})
    assert r.status == 200


def test_loud_warning_without_key_on_public_address(fresh_daemon):
    d = fresh_daemon(make_config(), args=("--listen", "0.0.0.0:0"))
    assert "NO API KEY" in d.stderr_text()
    d2 = fresh_daemon(make_config())
    assert "NO API KEY" not in d2.stderr_text()


def received_since(port):
    """A function: how many bytes the daemon has read from clients since
    now (GET /metrics, inferd_http_received_bytes_total), less its own
    /metrics requests - to wait until the daemon has read what a test sent,
    instead of sleeping."""
    def total():
        text = request(port, "GET", "/metrics").body.decode()
        return int(re.search(r"^inferd_http_received_bytes_total (\d+)$", text, re.M).group(1))
    first = total()
    per = total() - first  # one /metrics request
    asked = [1]

    def since():
        asked[0] += 1
        return total() - first - asked[0] * per
    return since


def test_max_connections(fresh_daemon):
    # timeouts long enough that nothing but the limit closes a connection
    d = fresh_daemon(make_config(limits={"max_connections": 2, "header_timeout_ms": 60000,
                                         "idle_timeout_ms": 60000}))
    a, b = connect(d.port), connect(d.port)
    for s in (a, b):  # both accepted and counted: each has had an answer
        s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        assert Reader(s).read_response().status == 200
    with connect(d.port) as c:
        r = Reader(c).read_response()
        assert r.status == 503
        assert r.header("retry-after") == "1"
    a.close()
    b.close()
    # served again once the daemon has seen them go
    wait_until(lambda: request(d.port, "GET", "/v2/health/live").status == 200,
               "a closed connection still counts against max_connections", timeout=60)


def test_sigterm_lets_in_flight_request_complete(fresh_daemon):
    # header and idle timeouts long enough that only the drain closes these
    d = fresh_daemon(make_config(limits={"header_timeout_ms": 60000, "idle_timeout_ms": 60000}))
    idle = connect(d.port)
    s = connect(d.port)
    read = received_since(d.port)
    head = b"GET /v1/models HTTP/1.1\r\nHost: x\r\n"  # headers not finished
    s.sendall(head)
    wait_until(lambda: read() >= len(head), "the daemon never read the partial request")
    d.proc.send_signal(signal.SIGTERM)
    # the idle connection is closed, no new connection is accepted
    assert Reader(idle).is_closed(timeout=30)
    with pytest.raises(OSError):
        connect(d.port, timeout=2).recv(1)
    # the in-flight request completes, then the daemon exits 0
    s.sendall(b"\r\n")
    r = Reader(s).read_response()
    assert r.status == 200
    assert [m["id"] for m in r.json()["data"]] == ["whisper-tiny.en", "gemma-3-270m", "smollm2-135m-instruct"]
    assert r.header("connection") == "close"
    s.close()
    assert d.proc.wait(timeout=30) == 0
    assert "draining" in d.stderr_text()


def test_drain_timeout_bounds_shutdown(fresh_daemon):
    d = fresh_daemon(make_config(limits={"drain_timeout_ms": 500, "header_timeout_ms": 60000}))
    s = connect(d.port)
    read = received_since(d.port)
    head = b"GET /v1/models HTTP/1.1\r\n"  # never finished
    s.sendall(head)
    wait_until(lambda: read() >= len(head), "the daemon never read the partial request")
    d.proc.send_signal(signal.SIGTERM)
    # the daemon says the 500 ms drain ran out, and it exits long before the
    # 60 s header timeout would have ended that connection (a hang guard)
    assert d.proc.wait(timeout=30) == 0
    assert "drain timeout" in d.stderr_text()
    s.close()


def test_drain_deadline_answers_a_generation_in_progress(fresh_daemon):
    """A request still generating when limits.drain_timeout_ms runs out gets
    503 in OpenAI's error shape (not a closed socket), and the daemon exits."""
    d = fresh_daemon(make_config(limits={"drain_timeout_ms": 500}))
    # 4000 tokens with <eos> and <end_of_turn> banned take far longer than 500 ms
    body = json.dumps({"model": "gemma-3-270m", "prompt": "Once upon a time", "max_tokens": 4000,
                       "logit_bias": {"1": -100, "106": -100}}).encode()
    before = model_stats(d.port, "gemma-3-270m")["requests"]["submitted"]
    s = connect(d.port)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body) + body)
    wait_submitted(d.port, "gemma-3-270m", before)
    d.proc.send_signal(signal.SIGTERM)
    err = read_deadline_answer(s, 30)["error"]
    assert err["code"] == "shutting_down", err
    assert "limits.drain_timeout_ms (500 ms)" in err["message"], err
    assert d.proc.wait(timeout=60) == 0
    assert "drain timeout" in d.stderr_text()
    assert d.stderr_text().count("status=503") == 1  # logged once, not again as 499


def test_drain_deadline_cuts_a_stream_and_says_so(fresh_daemon):
    """A response already streaming when limits.drain_timeout_ms runs out is
    cut (its status line went out long ago), and the access log says 503,
    not the 499 of a client that left."""
    d = fresh_daemon(make_config(limits={"drain_timeout_ms": 500}))
    body = json.dumps({"model": "gemma-3-270m", "prompt": "Once upon a time", "max_tokens": 4000,
                       "stream": True, "logit_bias": {"1": -100, "106": -100}}).encode()
    s = connect(d.port)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body) + body)
    s.settimeout(30)
    got = s.recv(65536)
    while b"data: " not in got:  # the stream has begun
        got += s.recv(65536)
    assert got.startswith(b"HTTP/1.1 200"), got[:300]
    d.proc.send_signal(signal.SIGTERM)
    got += read_to_close(s)
    s.close()
    assert b"[DONE]" not in got
    assert d.proc.wait(timeout=60) == 0
    log = d.stderr_text()
    assert "drain timeout" in log
    assert 'path="/v1/completions" status=503' in log, log
    assert "status=499" not in log, log


def test_busy_port_reported_before_loading_models(fresh_daemon):
    d = fresh_daemon()
    p = write_config(make_config())
    r = run("--config", p, "--listen", f"127.0.0.1:{d.port}")
    assert r.returncode == 1
    assert "address already in use" in r.stderr
    assert "loaded" not in r.stderr
