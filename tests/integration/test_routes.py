"""Routes that work at this stage, against the real default models."""
import re

from conftest import request


def test_live(daemon):
    r = request(daemon.port, "GET", "/v2/health/live")
    assert r.status == 200
    assert r.json() == {"live": True}


def test_ready_lists_models_loaded(daemon):
    r = request(daemon.port, "GET", "/v2/health/ready")
    assert r.status == 200
    assert r.json() == {"ready": True}


def test_openai_models_list(daemon):
    r = request(daemon.port, "GET", "/v1/models")
    assert r.status == 200
    assert r.header("content-type") == "application/json"
    body = r.json()
    assert body["object"] == "list"
    ids = [m["id"] for m in body["data"]]
    assert ids == ["whisper-tiny.en", "gemma-3-270m", "smollm2-135m-instruct"]
    for m in body["data"]:
        assert m["object"] == "model"
        assert m["owned_by"] == "inferd"
        assert isinstance(m["created"], int) and m["created"] > 1_700_000_000


def test_kserve_model_metadata_from_real_files(daemon):
    r = request(daemon.port, "GET", "/v2/models/gemma-3-270m")
    assert r.status == 200
    m = r.json()
    assert m["name"] == "gemma-3-270m"
    assert m["versions"] == ["1"]
    # general.architecture of the GGUF file
    assert m["platform"] == "inferd_gguf_gemma3"
    assert m["inputs"] == [{"name": "TEXT_INPUT", "datatype": "BYTES", "shape": [1]}]
    assert m["outputs"] == [{"name": "TEXT_OUTPUT", "datatype": "BYTES", "shape": [1]}]
    r = request(daemon.port, "GET", "/v2/models/whisper-tiny.en")
    assert r.status == 200
    m = r.json()
    assert m["platform"] == "inferd_ct2_WhisperSpec"
    assert m["inputs"] == [{"name": "AUDIO", "datatype": "BYTES", "shape": [1]}]
    assert [o["name"] for o in m["outputs"]] == ["TRANSCRIPT", "SEGMENTS"]
    assert request(daemon.port, "GET", "/v2/models/whisper-tiny.en/versions/1").json() == m
    assert request(daemon.port, "GET", "/v2/models/whisper-tiny.en/versions/2").status == 404
    # a version other than 1 is named as not found (it was "no route"), as Triton does
    for method, path in (("GET", "/v2/models/whisper-tiny.en/versions/2"),
                         ("GET", "/v2/models/whisper-tiny.en/versions/7/ready"),
                         ("POST", "/v2/models/gemma-3-270m/versions/7/infer")):
        r = request(daemon.port, method, path, body=b"{}" if method == "POST" else b"")
        assert r.status == 404, r.body
        assert "has no version" in r.json()["error"] and "only version is 1" in r.json()["error"]


def test_kserve_model_ready(daemon):
    r = request(daemon.port, "GET", "/v2/models/whisper-tiny.en/ready")
    assert r.status == 200
    assert r.json()["ready"] is True


def test_unknown_model_is_404_in_kserve_shape(daemon):
    r = request(daemon.port, "GET", "/v2/models/nope")
    assert r.status == 404
    assert "nope" in r.json()["error"]


def test_unknown_route_is_404_json(daemon):
    r = request(daemon.port, "GET", "/v1/nothing-here")
    assert r.status == 404
    err = r.json()["error"]
    assert err["type"] == "not_found_error"
    assert "/v1/nothing-here" in err["message"]


def test_wrong_method_is_405_with_allow(daemon):
    r = request(daemon.port, "DELETE", "/v1/models")
    assert r.status == 405
    assert r.header("allow") == "GET, HEAD"
    assert r.json()["error"]["code"] == "method_not_allowed"
    r = request(daemon.port, "POST", "/v2/health/live", body=b"{}")
    assert r.status == 405
    assert "error" in r.json()


def test_head_has_length_but_no_body(daemon):
    full = request(daemon.port, "GET", "/v1/models")
    r = request(daemon.port, "HEAD", "/v1/models", head_only=True)
    assert r.status == 200
    assert int(r.header("content-length")) == len(full.body)
    assert r.body == b""


def test_request_id_generated_and_echoed(daemon):
    a = request(daemon.port, "GET", "/v2/health/live").header("x-request-id")
    b = request(daemon.port, "GET", "/v2/health/live").header("x-request-id")
    assert a and b and a != b
    r = request(daemon.port, "GET", "/v2/health/live", headers={"X-Request-Id": "client-42"})
    assert r.header("x-request-id") == "client-42"
    # an unprintable or oversized id is replaced, never echoed
    r = request(daemon.port, "GET", "/v2/health/live", headers={"X-Request-Id": "x" * 500})
    assert r.header("x-request-id") != "x" * 500


def test_access_log_line_per_request(daemon):
    request(daemon.port, "GET", "/v2/health/live", headers={"X-Request-Id": "log-me-7"})
    lines = [l for l in daemon.stderr_text().splitlines() if "request_id=log-me-7" in l]
    assert len(lines) == 1
    assert 'method=GET path="/v2/health/live" status=200' in lines[0]
    assert re.search(r"bytes=\d+ duration_ms=[0-9.]+", lines[0])


def parse_metrics(text):
    """Prometheus text format: every non-comment line is NAME{LABELS} VALUE."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r'([a-zA-Z_:][a-zA-Z0-9_:]*)'
                         r'(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*",?)*\})? (\S+)', line)
        assert m, f"bad exposition line: {line!r}"
        out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


def test_metrics_prometheus_text(daemon):
    key = 'inferd_http_requests_total{route="/v2/health/live",method="GET",code="200"}'
    before = parse_metrics(request(daemon.port, "GET", "/metrics").body.decode()).get(key, 0)
    for _ in range(3):
        request(daemon.port, "GET", "/v2/health/live")
    r = request(daemon.port, "GET", "/metrics")
    assert r.status == 200
    assert r.header("content-type").startswith("text/plain; version=0.0.4")
    m = parse_metrics(r.body.decode())
    assert m[key] == before + 3
    assert m['inferd_http_request_duration_seconds_count{route="/v2/health/live"}'] >= 3
    assert m["inferd_http_open_connections"] >= 1
    assert m["inferd_http_received_bytes_total"] > 0
    assert m["inferd_http_sent_bytes_total"] > 0
    assert m['inferd_model_ready{model="gemma-3-270m",task="generation"}'] == 1
    assert m['inferd_model_ready{model="whisper-tiny.en",task="transcription"}'] == 1


def test_metrics_allocator(daemon):
    """The allocator's own account beside the HTTP figures: one series each,
    labelled with the allocator the build links (jemalloc unless a sanitizer
    brings its own malloc); the loaded models' weights are in what is
    allocated, and what it keeps freed is no more than the process's RSS."""
    m = parse_metrics(request(daemon.port, "GET", "/metrics").body.decode())
    alloc = {k: v for k, v in m.items() if k.startswith("inferd_memory_allocated_bytes{")}
    kept = {k: v for k, v in m.items() if k.startswith("inferd_memory_allocator_kept_bytes{")}
    assert len(alloc) == 1 and len(kept) == 1, (alloc, kept)
    (key, allocated), = alloc.items()
    label = re.fullmatch(r'inferd_memory_allocated_bytes\{allocator="(\w*)"\}', key).group(1)
    assert label in ("jemalloc", "glibc", ""), key
    (kept_b,) = kept.values()
    with open("/proc/%d/status" % daemon.proc.pid) as f:
        rss = int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1)) * 1024
    if label == "jemalloc":
        assert allocated > 50e6 and 0 <= kept_b <= rss, (allocated, kept_b, rss)


def test_metrics_count_unmatched_routes(daemon):
    request(daemon.port, "GET", "/no/such/route")
    m = parse_metrics(request(daemon.port, "GET", "/metrics").body.decode())
    assert m['inferd_http_requests_total{route="unmatched",method="GET",code="404"}'] >= 1
