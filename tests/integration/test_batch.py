"""The Batch API (issue 20) end to end with the official openai client and
raw HTTP: uploads, batches of chat, completions and audio transcription
lines, their output and error files in OpenAI's shapes, cancel, bad
files, the store's limits, and a daemon killed with SIGKILL again and
again in the middle of a job.

What a batch item answers is held to what the same request answers when
sent interactively (the reference is the server's own interactive answer:
the batch path must not change it)."""
import json
import os
import random
import signal
import subprocess
import tempfile
import time

import openai
import pytest

from conftest import (Daemon, MODELS, ROOT, assert_stopped_clean, make_config, request,
                      wait_until)

LLM = "smollm2-135m-instruct"
ASR = "whisper-tiny.en"
AUDIO_DIR = os.path.join(ROOT, "tests", "data", "audio")
ENDED = ("completed", "failed", "cancelled", "expired")


def batch_config(store, **over):
    models = [{"name": ASR, "path": os.path.join(MODELS, "whisper-tiny.en"), "format": "ct2"},
              {"name": LLM, "path": os.path.join(MODELS, "smollm2-135m-instruct-q4_1.gguf"),
               "format": "gguf"}]
    batch = {"store": store, "input_dir": AUDIO_DIR}
    batch.update(over.pop("batch", {}))
    return make_config(models=over.pop("models", models), batch=batch,
                       limits={"max_body_bytes": 8 << 20, "idle_timeout_ms": 60000}, **over)


def client_for(d):
    return openai.OpenAI(base_url=f"http://127.0.0.1:{d.port}/v1", api_key="unused",
                         max_retries=0, timeout=120)


def jsonl(lines):
    return ("\n".join(json.dumps(x) if not isinstance(x, str) else x for x in lines)
            + "\n").encode()


def chat_line(cid, content, max_tokens=8):
    return {"custom_id": cid, "method": "POST", "url": "/v1/chat/completions",
            "body": {"model": LLM, "max_tokens": max_tokens, "temperature": 0,
                     "messages": [{"role": "user", "content": content}]}}


def run_batch(c, lines, endpoint="/v1/chat/completions", timeout=300):
    f = c.files.create(file=("in.jsonl", jsonl(lines)), purpose="batch")
    b = c.batches.create(input_file_id=f.id, endpoint=endpoint, completion_window="24h")
    return wait_ended(c, b.id, timeout)


def wait_ended(c, bid, timeout=300):
    deadline = time.time() + timeout
    while time.time() < deadline:
        b = c.batches.retrieve(bid)
        if b.status in ENDED:
            return b
        time.sleep(0.2)
    raise AssertionError(f"batch {bid} did not end: {b}")


def results(c, file_id):
    if file_id is None:
        return {}
    out = {}
    for line in c.files.content(file_id).text.splitlines():
        o = json.loads(line)
        assert o["custom_id"] not in out, "a custom_id twice: " + line
        out[o["custom_id"]] = o
    return out


@pytest.fixture(scope="module")
def srv():
    store = os.path.join(tempfile.mkdtemp(prefix="inferd-batch-"), "state", "batch.db")
    d = Daemon(batch_config(store, price_per_hour=0.5))
    yield d
    assert_stopped_clean(d)


@pytest.fixture(scope="module")
def client(srv):
    return client_for(srv)


def test_batch_chat_matches_interactive(client):
    prompts = ["Name a colour.", "Count to three.", "Say hello.", "What is 2+2?",
               "Name a fruit.", "Name a city."]
    lines = [chat_line(f"c{i}", p) for i, p in enumerate(prompts)]
    b = run_batch(client, lines)
    assert b.status == "completed" and b.error_file_id is None, b
    assert (b.request_counts.total, b.request_counts.completed, b.request_counts.failed) == \
        (6, 6, 0)
    assert b.completed_at >= b.in_progress_at >= b.created_at
    out = results(client, b.output_file_id)
    assert sorted(out) == [f"c{i}" for i in range(6)]
    for i, p in enumerate(prompts):
        o = out[f"c{i}"]
        assert o["error"] is None and o["response"]["status_code"] == 200
        assert o["id"].startswith("batch_req_")
        body = o["response"]["body"]
        assert body["object"] == "chat.completion" and 0 < body["usage"]["completion_tokens"] <= 8
        ref = client.chat.completions.create(model=LLM, max_tokens=8, temperature=0,
                                             messages=[{"role": "user", "content": p}])
        assert body["choices"][0]["message"]["content"] == ref.choices[0].message.content
    f = client.files.retrieve(b.output_file_id)
    assert f.purpose == "batch_output" and f.bytes == len(
        client.files.content(b.output_file_id).content)
    # usage: the sums of the answers' own; inferd's figures and the cost
    # from price_per_hour (0.5 in this daemon's config)
    bodies = [out[k]["response"]["body"] for k in out]
    assert b.usage.output_tokens == sum(x["usage"]["completion_tokens"] for x in bodies)
    assert b.usage.input_tokens == sum(x["usage"]["prompt_tokens"] for x in bodies)
    assert b.usage.total_tokens == b.usage.input_tokens + b.usage.output_tokens
    fig = b.model_extra["x_inferd"]
    assert fig["price_per_hour"] == 0.5 and fig["audio_seconds"] == 0
    assert fig["cost"] == pytest.approx(0.5 * fig["elapsed_s"] / 3600)
    if fig["elapsed_s"] > 0:
        assert fig["cost_per_million_tokens"] == pytest.approx(
            fig["cost"] / (b.usage.total_tokens / 1e6))
    m = request(client._client.base_url.port, "GET", "/metrics").body.decode()
    done = float(m.split('inferd_batch_items_total{state="done"} ')[1].split()[0])
    assert done >= 6 and "inferd_batch_runners " in m


def test_batch_completions_bad_lines_go_to_the_error_file(client):
    good = {"custom_id": "ok", "method": "POST", "url": "/v1/completions",
            "body": {"model": LLM, "prompt": "The sky is", "max_tokens": 4, "temperature": 0}}
    lines = [good,
             dict(good, custom_id="no-model", body={"model": "nope", "prompt": "x"}),
             dict(good, custom_id="stream", body=dict(good["body"], stream=True)),
             dict(good, custom_id="wrong-url", url="/v1/chat/completions"),
             dict(good, custom_id="ok"),  # a custom_id seen before
             "this is not json",
             dict(good, custom_id="get", method="GET"),
             dict(good, custom_id="bad-temp", body=dict(good["body"], temperature="hot"))]
    b = run_batch(client, lines, endpoint="/v1/completions")
    assert b.status == "completed"
    assert (b.request_counts.total, b.request_counts.completed, b.request_counts.failed) == \
        (8, 1, 7)
    out = results(client, b.output_file_id)
    assert list(out) == ["ok"]
    assert out["ok"]["response"]["body"]["object"] == "text_completion"
    errs = [json.loads(x) for x in client.files.content(b.error_file_id).text.splitlines()]
    assert len(errs) == 7
    by_line = {int(e["id"].rsplit("_", 1)[1]): e for e in errs}
    # an answer of the endpoint: the response, as OpenAI's error file has it
    assert by_line[2]["response"]["status_code"] == 404 and by_line[2]["error"] is None
    assert by_line[2]["response"]["body"]["error"]["code"] == "model_not_found"
    assert by_line[8]["response"]["status_code"] == 400
    # refused before any request: an error with the reason
    assert by_line[3]["response"] is None and "stream" in by_line[3]["error"]["message"]
    assert "url must be" in by_line[4]["error"]["message"]
    assert "custom_id" in by_line[5]["error"]["message"] or "line 5" in \
        by_line[5]["error"]["message"]
    assert "line 6 is not JSON" in by_line[6]["error"]["message"]
    assert "method" in by_line[7]["error"]["message"]


def test_batch_audio_transcriptions(client, srv):
    names = ["jfk.wav", "LJ001-0001.wav", "1089-134686-0000.flac", "LJ001-0007.mp3"]
    lines = [{"custom_id": n, "method": "POST", "url": "/v1/audio/transcriptions",
              "body": {"model": ASR, "file": n}} for n in names]
    outside = os.path.relpath("/etc/hostname", AUDIO_DIR)
    lines += [{"custom_id": "outside", "method": "POST", "url": "/v1/audio/transcriptions",
               "body": {"model": ASR, "file": outside}},
              {"custom_id": "missing", "method": "POST", "url": "/v1/audio/transcriptions",
               "body": {"model": ASR, "file": "no-such-file.wav"}},
              {"custom_id": "text", "method": "POST", "url": "/v1/audio/transcriptions",
               "body": {"model": ASR, "file": "jfk.wav", "response_format": "text"}},
              {"custom_id": "verbose", "method": "POST", "url": "/v1/audio/transcriptions",
               "body": {"model": ASR, "file": "jfk.wav", "response_format": "verbose_json",
                        "timestamp_granularities": ["word", "segment"]}}]
    b = run_batch(client, lines, endpoint="/v1/audio/transcriptions")
    assert b.status == "completed"
    assert (b.request_counts.completed, b.request_counts.failed) == (6, 2), b
    out = results(client, b.output_file_id)
    secs = {}
    for n in names:
        with open(os.path.join(AUDIO_DIR, n), "rb") as f:
            ref = client.audio.transcriptions.create(model=ASR, file=(n, f.read()),
                                                     response_format="verbose_json")
        assert out[n]["response"]["body"]["text"] == ref.text, n
        secs[n] = ref.duration
    jfk = out["jfk.wav"]["response"]["body"]["text"]
    assert out["text"]["response"]["body"].strip() == jfk.strip()
    v = out["verbose"]["response"]["body"]
    assert v["words"] and v["segments"] and v["text"] == jfk
    # numbers as the endpoint wrote them (not re-encoded with 17 digits)
    raw = [x for x in client.files.content(b.output_file_id).text.splitlines()
           if '"verbose"' in x][0]
    assert '"duration":%s' % json.dumps(v["duration"]) in raw.replace(" ", "")
    # the audio done, exact (not usage's whole seconds): what verbose_json
    # reports of each file
    fig = b.model_extra["x_inferd"]
    want = sum(secs.values()) + 2 * secs["jfk.wav"]
    assert fig["audio_seconds"] == pytest.approx(want, abs=0.01)
    errs = results(client, b.error_file_id)
    assert errs["outside"]["error"]["message"].endswith("is outside batch.input_dir")
    assert errs["missing"]["error"]["code"] == "file_not_found"


def test_batch_cancel(client):
    lines = [chat_line(f"k{i}", f"Write a story about the number {i}.", 64) for i in range(60)]
    f = client.files.create(file=("in.jsonl", jsonl(lines)), purpose="batch")
    b = client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions",
                              completion_window="24h")
    c = client.batches.cancel(b.id)
    assert c.status in ("cancelling", "cancelled") and c.cancelling_at
    b = wait_ended(client, b.id)
    assert b.status == "cancelled" and b.cancelled_at >= b.cancelling_at
    n = b.request_counts
    assert n.total == 60 and n.completed + n.failed < 60
    assert len(results(client, b.output_file_id)) == n.completed
    # an ended batch cannot be cancelled; cancelling twice is not an error
    r = request(client._client.base_url.port, "POST", f"/v1/batches/{b.id}/cancel")
    assert r.status == 200 and r.json()["status"] == "cancelled"
    done = run_batch(client, [chat_line("one", "Hi.")])
    r = request(client._client.base_url.port, "POST", f"/v1/batches/{done.id}/cancel")
    assert r.status == 409 and "only an in_progress batch" in r.json()["error"]["message"]


def test_batch_list_and_files(client):
    f = client.files.create(file=("in.jsonl", jsonl([chat_line("a", "Hi.")])), purpose="batch")
    ids = [client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions",
                                 completion_window="24h").id for _ in range(3)]
    page = client.batches.list(limit=2)
    assert [x.id for x in page.data] == ids[::-1][:2] and page.has_more
    nxt = client.batches.list(limit=2, after=page.data[-1].id)
    assert nxt.data[0].id == ids[0]
    listed = [x.id for x in client.files.list(purpose="batch").data]
    assert f.id in listed
    for bid in ids:  # three jobs at once: each ends with its own answer
        b = wait_ended(client, bid)
        assert b.status == "completed" and b.request_counts.completed == 1
        assert list(results(client, b.output_file_id)) == ["a"]
    assert client.files.delete(f.id).deleted
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve(f.id)
    with pytest.raises(openai.NotFoundError):
        client.files.content(f.id)
    with pytest.raises(openai.NotFoundError):
        client.batches.retrieve("batch_nope")


def test_a_long_batch_does_not_hold_back_a_later_one(client):
    """Runners go to the open batch with the fewest items in flight: a
    small audio batch made after a long chat batch ends while the chat
    batch still runs."""
    long = [chat_line(f"l{i}", f"Write a long story about the number {i}.", 48)
            for i in range(150)]
    f = client.files.create(file=("long.jsonl", jsonl(long)), purpose="batch")
    first = client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions",
                                  completion_window="24h")
    lines = [{"custom_id": f"a{i}", "method": "POST", "url": "/v1/audio/transcriptions",
              "body": {"model": ASR, "file": "jfk.wav"}} for i in range(2)]
    b = run_batch(client, lines, endpoint="/v1/audio/transcriptions")
    assert b.status == "completed" and b.request_counts.completed == 2
    assert client.batches.retrieve(first.id).status == "in_progress"
    client.batches.cancel(first.id)
    assert wait_ended(client, first.id).status == "cancelled"


def test_bad_files_and_batches(client, srv):
    port = srv.port
    with pytest.raises(openai.BadRequestError, match="purpose must be"):
        client.files.create(file=("in.jsonl", b"{}\n"), purpose="fine-tune")
    r = request(port, "POST", "/v1/files", headers={"Content-Type": "application/json"},
                body=b"{}")
    assert r.status == 415 and r.json()["error"]["type"] == "invalid_request_error"
    bnd = "xyz"
    body = (f"--{bnd}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n"
            f"--{bnd}--\r\n").encode()
    r = request(port, "POST", "/v1/files",
                headers={"Content-Type": f"multipart/form-data; boundary={bnd}"}, body=body)
    assert r.status == 400 and "missing the \"file\" field" in r.json()["error"]["message"]
    with pytest.raises(openai.NotFoundError):
        client.batches.create(input_file_id="file-none", endpoint="/v1/chat/completions",
                              completion_window="24h")
    f = client.files.create(file=("in.jsonl", jsonl([chat_line("a", "Hi.")])), purpose="batch")
    for kw, msg in [(dict(endpoint="/v1/embeddings"), "endpoint must be"),
                    (dict(completion_window="1h"), "completion_window"),
                    (dict(metadata={"k": "v" * 600}), "metadata")]:
        args = dict(input_file_id=f.id, endpoint="/v1/chat/completions",
                    completion_window="24h")
        args.update(kw)
        with pytest.raises(openai.BadRequestError, match=msg):
            client.batches.create(**args)
    empty = client.files.create(file=("e.jsonl", b"\n\n"), purpose="batch")
    with pytest.raises(openai.BadRequestError):
        client.batches.create(input_file_id=empty.id, endpoint="/v1/chat/completions",
                              completion_window="24h")
    r = request(port, "POST", "/v1/batches", headers={"Content-Type": "application/json"},
                body=b"not json")
    assert r.status == 400 and r.json()["error"]["type"] == "invalid_request_error"
    r = request(port, "GET", "/v1/batches?limit=0")
    assert r.status == 400
    r = request(port, "PUT", "/v1/batches")
    assert r.status == 405
    # an output file cannot be a batch's input
    done = run_batch(client, [chat_line("x", "Hi.")])
    with pytest.raises(openai.BadRequestError, match="purpose"):
        client.batches.create(input_file_id=done.output_file_id,
                              endpoint="/v1/chat/completions", completion_window="24h")


def test_batch_store_limits(fresh_daemon, tmp_path):
    d = fresh_daemon(batch_config(str(tmp_path / "b.db"),
                                  batch={"max_file_bytes": 2000, "max_lines": 3, "max_jobs": 1,
                                         "concurrency": 1}))
    c = client_for(d)
    with pytest.raises(openai.APIStatusError) as e:
        c.files.create(file=("big.jsonl", b"x" * 2001), purpose="batch")
    assert e.value.status_code == 413 and "batch.max_file_bytes" in str(e.value)
    four = c.files.create(file=("4.jsonl", jsonl([chat_line(f"{i}", "Hi.") for i in range(4)])),
                          purpose="batch")
    with pytest.raises(openai.BadRequestError, match="3"):
        c.batches.create(input_file_id=four.id, endpoint="/v1/chat/completions",
                         completion_window="24h")
    slow = c.files.create(file=("s.jsonl", jsonl([chat_line(f"{i}", "Tell a story.", 200)
                                                  for i in range(3)])), purpose="batch")
    b = c.batches.create(input_file_id=slow.id, endpoint="/v1/chat/completions",
                         completion_window="24h")
    with pytest.raises(openai.RateLimitError, match="batch.max_jobs"):
        c.batches.create(input_file_id=slow.id, endpoint="/v1/chat/completions",
                         completion_window="24h")
    c.batches.cancel(b.id)
    wait_ended(c, b.id)
    c.batches.create(input_file_id=slow.id, endpoint="/v1/chat/completions",
                     completion_window="24h")


def test_batch_store_size_and_expiry(fresh_daemon, tmp_path):
    d = fresh_daemon(batch_config(str(tmp_path / "b.db"),
                                  batch={"max_store_bytes": 65536, "file_ttl_s": 2}))
    c = client_for(d)
    small = c.files.create(file=("s.jsonl", jsonl([chat_line("a", "Hi.")])), purpose="batch")
    assert small.expires_at - small.created_at == 2
    with pytest.raises(openai.APIStatusError) as e:
        c.files.create(file=("big.jsonl", os.urandom(70000)), purpose="batch")
    assert e.value.status_code == 507 and "batch.max_store_bytes" in str(e.value)
    # what deleted files held is room again
    kept = []
    with pytest.raises(openai.APIStatusError) as e:
        for i in range(100):
            kept.append(c.files.create(file=(f"{i}.jsonl", os.urandom(900)), purpose="batch"))
    assert e.value.status_code == 507 and len(kept) > 3
    for f in kept:
        c.files.delete(f.id)
    c.files.create(file=("again.jsonl", os.urandom(900)), purpose="batch")
    b = run_batch(c, [chat_line("a", "Hi.")])
    assert b.status == "completed"
    # the files expire (swept every file_ttl_s here), then the ended batch goes too
    wait_until(lambda: request(d.port, "GET", f"/v1/files/{small.id}").status == 404,
               "the input file expired", timeout=60)
    wait_until(lambda: request(d.port, "GET", f"/v1/batches/{b.id}").status == 404,
               "the ended batch went with its files", timeout=60)
    assert request(d.port, "GET", f"/v1/files/{b.output_file_id}").status == 404


def test_audio_batches_need_an_input_dir(fresh_daemon, tmp_path):
    cfg = batch_config(str(tmp_path / "b.db"))
    del cfg["batch"]["input_dir"]
    c = client_for(fresh_daemon(cfg))
    f = c.files.create(file=("a.jsonl", jsonl([{"custom_id": "a", "method": "POST",
                                                "url": "/v1/audio/transcriptions",
                                                "body": {"model": ASR, "file": "jfk.wav"}}])),
                       purpose="batch")
    with pytest.raises(openai.BadRequestError, match="batch.input_dir"):
        c.batches.create(input_file_id=f.id, endpoint="/v1/audio/transcriptions",
                         completion_window="24h")


def test_batch_survives_sigkill_loop(tmp_path):
    """SIGKILL the daemon at random points of a job, 20 times and more;
    after the last start every item has ended exactly once, with the
    answer an uninterrupted run gives."""
    store = str(tmp_path / "state" / "batch.db")
    cfg = batch_config(store, models=[{"name": LLM, "format": "gguf", "path": os.path.join(
        MODELS, "smollm2-135m-instruct-q4_1.gguf")}])
    n = 400
    lines = [chat_line(f"s{i}", f"Give a word that rhymes with number {i}.", 16)
             for i in range(n)]
    d = Daemon(cfg)
    c = client_for(d)
    f = c.files.create(file=("in.jsonl", jsonl(lines)), purpose="batch")
    bid = c.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions",
                           completion_window="24h").id
    rng = random.Random(20)
    kills, progress, longest = 0, [0], 0.6
    while True:
        # a slower machine gets longer runs: no progress since the last
        # kill lengthens the next
        if len(progress) >= 2 and progress[-1] == progress[-2]:
            longest *= 1.5
        time.sleep(rng.uniform(0.05, longest))
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait()
        kills += 1
        d = Daemon(cfg)
        c = client_for(d)
        b = c.batches.retrieve(bid)
        progress.append(b.request_counts.completed)
        if kills >= 20 and b.status in ENDED:
            break
        assert kills < 300, progress
    b = wait_ended(c, bid)
    assert b.status == "completed", b
    assert (b.request_counts.completed, b.request_counts.failed) == (n, 0), b
    out = results(c, b.output_file_id)
    assert sorted(out) == sorted(x["custom_id"] for x in lines)
    # the kills landed while the job ran, not only before or after it
    assert sum(0 < p < n for p in progress) >= 10, progress
    assert progress == sorted(progress), progress  # nothing ended is ever lost
    # the same answers as a run never interrupted: the same lines again
    again = results(c, run_batch(c, lines).output_file_id)
    for x in lines:
        cid = x["custom_id"]
        assert out[cid]["response"]["body"]["choices"] == \
            again[cid]["response"]["body"]["choices"], cid
    assert_stopped_clean(d)


def model_stats(port, model):
    return request(port, "GET", f"/v2/models/{model}/stats").json()["model_stats"][0]["inferd"]


def test_interactive_requests_park_running_batch_work(srv, client):
    """While batch items run, an interactive request of the same model
    runs alone: the batch sequences are parked (the daemon counts the
    steps it computed so), and its answer is the one it gets with no
    batch running."""
    msgs = [{"role": "user", "content": "Name three colours."}]
    ref = client.chat.completions.create(model=LLM, messages=msgs, max_tokens=24,
                                         temperature=0).choices[0].message.content
    lines = [chat_line(f"p{i}", f"Write a long poem about the sea, part {i}.", 200)
             for i in range(12)]
    f = client.files.create(file=("in.jsonl", jsonl(lines)), purpose="batch")
    before = model_stats(srv.port, LLM)["batch_parked_steps"]
    b = client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions",
                              completion_window="24h")
    # the batch items are running (admitted by the replica) before we ask
    wait_until(lambda: model_stats(srv.port, LLM)["replicas"][0]["running"] >= 2,
               "batch items running")
    got = client.chat.completions.create(model=LLM, messages=msgs, max_tokens=24,
                                         temperature=0).choices[0].message.content
    assert got == ref
    st = model_stats(srv.port, LLM)
    assert st["batch_parked_steps"] > before, st
    client.batches.cancel(b.id)
    assert wait_ended(client, b.id).status == "cancelled"


def run_cli(args, **kw):
    from conftest import BIN
    return subprocess.run([BIN, "batch", "run", *args], capture_output=True, text=True,
                          timeout=600, **kw)


def test_cli_batch_run_resumes_after_sigkill(tmp_path):
    """inferd batch run: killed with SIGKILL at three points of its job and
    run again, it ends every item once, with the answers of a run never
    interrupted; run once more it only writes the results again."""
    from conftest import BIN
    import sqlite3
    cfg = batch_config("unused", models=[{"name": LLM, "format": "gguf", "path": os.path.join(
        MODELS, "smollm2-135m-instruct-q4_1.gguf")}])
    del cfg["batch"]
    (tmp_path / "c.json").write_text(json.dumps(cfg))
    n = 120
    lines = [chat_line(f"m{i}", f"Name an animal that starts with the letter {chr(65 + i % 26)}.",
                       12) for i in range(n)]
    (tmp_path / "in.jsonl").write_bytes(jsonl(lines))
    args = [str(tmp_path / "in.jsonl"), "--out", str(tmp_path / "out.jsonl"),
            "--config", str(tmp_path / "c.json")]
    store = tmp_path / "out.jsonl.db"

    def ended():
        if not store.exists():
            return 0
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=5) as db:
            try:
                return db.execute("SELECT count(*) FROM items WHERE state != 0").fetchone()[0]
            except sqlite3.OperationalError:  # the tables are being made
                return 0

    seen = []
    for k, at in enumerate((10, 40, 80)):
        p = subprocess.Popen([BIN, "batch", "run", *args], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        wait_until(lambda: ended() >= at or p.poll() is not None, f"{at} items ended")
        p.send_signal(signal.SIGKILL)
        p.wait()
        seen.append(ended())
    assert seen == sorted(seen) and 0 < seen[0] < n, seen
    r = run_cli(args)
    assert r.returncode == 0, r.stderr
    assert f"{n}/{n} items (0 failed)" in r.stderr and "completed" in r.stderr
    out = {json.loads(x)["custom_id"]: json.loads(x) for x in
           (tmp_path / "out.jsonl").read_text().splitlines()}
    assert sorted(out) == sorted(x["custom_id"] for x in lines)
    assert not (tmp_path / "out.jsonl.errors.jsonl").exists()
    # a run never interrupted, in its own store
    r = run_cli([str(tmp_path / "in.jsonl"), "--out", str(tmp_path / "ref.jsonl"),
                 "--config", str(tmp_path / "c.json")])
    assert r.returncode == 0, r.stderr
    ref = {json.loads(x)["custom_id"]: json.loads(x) for x in
           (tmp_path / "ref.jsonl").read_text().splitlines()}
    for cid in ref:
        assert out[cid]["response"]["body"]["choices"] == ref[cid]["response"]["body"]["choices"]
    before = (tmp_path / "out.jsonl").read_bytes()
    r = run_cli(args)
    assert r.returncode == 0 and "had ended already" in r.stderr, r.stderr
    assert (tmp_path / "out.jsonl").read_bytes() == before


def test_cli_batch_run_bad_manifests(tmp_path):
    cfg = batch_config("unused", models=[{"name": LLM, "format": "gguf", "path": os.path.join(
        MODELS, "smollm2-135m-instruct-q4_1.gguf")}])
    del cfg["batch"]
    (tmp_path / "c.json").write_text(json.dumps(cfg))
    (tmp_path / "nourl.jsonl").write_text('{"custom_id": "a"}\n')
    r = run_cli([str(tmp_path / "nourl.jsonl"), "--out", str(tmp_path / "o"), "--config",
                 str(tmp_path / "c.json")])
    assert r.returncode == 1 and "no line with a \"url\"" in r.stderr, r.stderr
    r = run_cli([str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "o"), "--config",
                 str(tmp_path / "c.json")])
    assert r.returncode == 1 and "No such file" in r.stderr
    r = run_cli([str(tmp_path / "nourl.jsonl")])
    assert r.returncode == 2 and "--out RESULTS are required" in r.stderr
    # a bad line fails its item; the job goes on
    (tmp_path / "mixed.jsonl").write_bytes(jsonl([chat_line("ok", "Hi."), "not json"]))
    r = run_cli([str(tmp_path / "mixed.jsonl"), "--out", str(tmp_path / "m.jsonl"), "--config",
                 str(tmp_path / "c.json")])
    assert r.returncode == 0 and "2/2 items (1 failed)" in r.stderr, r.stderr
    errs = (tmp_path / "m.jsonl.errors.jsonl").read_text()
    assert "line 2 is not JSON" in errs
