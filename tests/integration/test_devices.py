"""Replicas on other devices than the cpu (devices/dev.h): a generation
model served by one replica on a cpu core and one on the OpenCL device
(PoCL here: the CPU as an OpenCL device, what runs in CI without a GPU),
the scheduler giving work to both, and the placements that are refused at
start-up with one line (a device that is not there, a speech model off the
cpu). Which replica ran what comes from the daemon's own record
(GET /v2/models/{name}/stats), not from timings."""
import json
import os
import subprocess
import threading
import time


from conftest import BIN, MODELS, Daemon, assert_stopped_clean, make_config
from test_scheduling import cpus, post_json, stats

SMOLLM = "smollm2-135m-instruct"
SMOLLM_PATH = os.path.join(MODELS, "smollm2-135m-instruct-q4_1.gguf")


def smollm_on(replicas, **extra):
    return make_config(models=[dict({"name": SMOLLM, "path": SMOLLM_PATH, "format": "gguf",
                                     "replicas": replicas}, **extra)])


def four_at_once(port):
    """Four greedy completions of one prompt sent together; their texts."""
    out = [None] * 4

    def run(i):
        out[i] = post_json(port, "/v1/completions",
                           {"model": SMOLLM, "prompt": "The capital of France is",
                            "max_tokens": 8, "temperature": 0})

    ts = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(600)
    assert all(r is not None and r.status == 200 for r in out), [r and r.body for r in out]
    return [r.json()["choices"][0]["text"] for r in out]


def test_cpu_and_opencl_replicas_serve_one_model():
    a, _ = cpus()
    d = Daemon(smollm_on([{"device": f"cpu:{a}", "threads": 1}, {"device": "opencl:0"}],
                         max_num_seqs=2))
    try:
        before = stats(d.port, SMOLLM)["inferd"]["replicas"]
        assert [r["device"] for r in before] == [f"cpu:{a}", "opencl:0.0"], before
        # Rounds of four requests at once (two sequences per replica) until
        # both replicas have taken some: the opencl one starts taking work
        # once its weights are on the device, the cpu one may take a whole
        # round before that.
        texts = []
        deadline = time.monotonic() + 300
        while True:
            texts += four_at_once(d.port)
            after = stats(d.port, SMOLLM)["inferd"]["replicas"]
            done = [q["requests"] - p["requests"] for p, q in zip(before, after)]
            if all(n > 0 for n in done) or time.monotonic() > deadline:
                break
        assert sum(done) == len(texts) and all(n > 0 for n in done), (before, after)
        assert all(q["batches"] > p["batches"] for p, q in zip(before, after)), (before, after)
        # Each replica answers the same prompt the same way; the two may
        # differ a few tokens in: the cpu's AVX kernels sum in another
        # order than opencl's (which follow the scalar reference), and
        # SmolLM2's int8-quantized activations turn last-bit differences
        # into logit differences of ~0.03 (llama.cpp against itself with
        # flash attention differs by 0.16 on average). test_llm holds
        # opencl to llama.cpp's own floor (llm_opencl).
        assert all(t.startswith(" Paris.") for t in texts), texts
        assert len(set(texts)) <= 2, texts
    finally:
        assert_stopped_clean(d)


def start_fails(config, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    r = subprocess.run([BIN, "--config", str(path), "--listen", "127.0.0.1:0"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0, r.stderr
    return r.stderr


def test_absent_opencl_device_refused_with_what_exists(tmp_path):
    err = start_fails(smollm_on([{"device": "opencl:7"}]), tmp_path)
    assert 'device "opencl:7": no such OpenCL device (present: opencl:0.0' in err, err


def test_speech_model_off_the_cpu_refused(tmp_path):
    cfg = make_config(models=[{"name": "whisper-tiny.en",
                               "path": os.path.join(MODELS, "whisper-tiny.en"), "format": "ct2",
                               "replicas": [{"device": "opencl:0"}]}])
    err = start_fails(cfg, tmp_path)
    assert "speech models run on cpu devices only so far" in err, err


def test_opencl_replica_with_two_threads_refused(tmp_path):
    err = start_fails(smollm_on([{"device": "opencl:0", "threads": 2}]), tmp_path)
    assert "a queue of this device has one host thread" in err, err
