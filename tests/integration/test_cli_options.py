"""The server-less commands' options (`inferd transcribe`, `inferd
generate`): --help is a success with the usage on stdout; a value that
is not a number in range, or options that contradict each other, are
refused with exit status 2 and a message naming the option, before any
model is loaded - never read as 0 or silently ignored."""
import json
import os
import subprocess

import pytest

from conftest import BIN, MODELS, ROOT

JFK = os.path.join(ROOT, "tests", "data", "audio", "jfk.wav")


def run(*args):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("cmd,first", [("transcribe", "usage: inferd transcribe"),
                                       ("generate", "usage: inferd generate")])
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_is_a_success_on_stdout(cmd, first, flag):
    r = run(cmd, flag)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(first), r.stdout
    assert r.stderr == ""


@pytest.mark.parametrize("args,needle", [
    (["--threads", "abc"], "--threads: expected an integer from 1 to 1024, not 'abc'"),
    (["--threads", "0"], "--threads: expected an integer from 1 to 1024, not '0'"),
    (["--beam-size", "17"], "--beam-size: expected an integer from 1 to 16, not '17'"),
    (["--beam-size", "2x"], "--beam-size: expected an integer from 1 to 16, not '2x'"),
    (["--temperature", "hot"], "--temperature: expected a number from 0 to 1, not 'hot'"),
    (["--temperature", "nan"], "--temperature: expected a number from 0 to 1, not 'nan'"),
    (["--temperature", "1.5"], "--temperature: expected a number from 0 to 1, not '1.5'"),
    (["--timestamps", "--json"], "--timestamps and --json: choose one"),
])
def test_transcribe_bad_values_refused(args, needle):
    r = run("transcribe", *args, JFK)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert needle in r.stderr, r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize("args,needle", [
    (["--max-tokens", "many"], "--max-tokens: expected an integer from 1 to 1048576"),
    (["--max-tokens", "0"], "--max-tokens: expected an integer from 1 to 1048576, not '0'"),
    (["--temperature", "-1"], "--temperature: expected a number from 0 to 2, not '-1'"),
    (["--top-p", "2"], "--top-p: expected a number from 0 to 1, not '2'"),
    (["--top-k", "-3"], "--top-k: expected an integer from 0 to 1048576, not '-3'"),
    (["--seed", "x1"], "--seed: expected an integer from 0 to 18446744073709551615, not 'x1'"),
    (["--seed", "-1"], "--seed: expected an integer from 0 to 18446744073709551615, not '-1'"),
    (["--seed", "18446744073709551616"], "--seed: expected an integer from 0 to"),
    (["--top-p", "0"], "--top-p: expected a number above 0 and at most 1, not '0'"),
    (["--max-model-len", "15"], "--max-model-len: expected an integer from 16 to 1048576, "
                                "not '15'"),
    (["--threads", ""], "--threads: expected an integer from 1 to 1024, not ''"),
])
def test_generate_bad_values_refused(args, needle):
    r = run("generate", *args, "Hello")
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert needle in r.stderr, r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize("cmd,args,needle", [
    ("transcribe", ["--bogus", JFK], "inferd: --bogus: unknown option"),
    ("transcribe", ["--compute-type=int8", JFK],
     "inferd: --compute-type=int8: unknown option (the value goes after a space"),
    ("transcribe", ["--compute-type"], "inferd: --compute-type: unknown option, or its value "
                                        "is missing"),
    ("generate", ["--bogus", "x", "Hello"], "inferd: --bogus: unknown option"),
])
def test_unknown_options_named(cmd, args, needle):
    """An option not taken is named on stderr before the usage, not just
    the usage (exit status 2)."""
    r = run(cmd, *args)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr.startswith(needle), r.stderr
    assert "usage: inferd " + cmd in r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize("flag,cache", [([], "float32"), (["--kv-cache-f16"], "float16")])
def test_generate_kv_cache_f16_flag(flag, cache):
    """--kv-cache-f16 turns the float16 KV cache on for a model given by
    path (config kv_cache_f16); the closing line names the cache used."""
    model = os.path.join(MODELS, "gemma-3-270m-q4_k_m.gguf")
    r = run("generate", "--model", model, *flag, "--temperature", "0", "--max-tokens", "8",
            "The capital of France is")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip(), r.stdout
    assert "generated in" in r.stderr and ("KV cache " + cache) in r.stderr, r.stderr


LONG_PROMPT = ("The capital of France is a city that has been home to many people over "
               "many centuries and")


@pytest.mark.parametrize("args,needle", [
    (["--temperature", "0", "--max-model-len"], "--max-model-len: unknown option, or its value "
                                                "is missing"),
    (["--chat"], "PROMPT is missing"),
    (["--max-model-len", "32", "--chat"], "PROMPT is missing"),
    (["one", "two"], "one PROMPT after the options"),
])
def test_generate_option_is_never_taken_as_the_prompt(args, needle):
    """An option whose value is missing, or options with no PROMPT after
    them, are refused (exit status 2) - never generated from as if the
    option's name were the prompt."""
    r = run("generate", *args)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert needle in r.stderr, r.stderr
    assert r.stdout == ""


def test_generate_prompt_after_double_dash():
    """After '--' the prompt may start with '--'; a model given by path is
    named by its path in messages."""
    model = os.path.join(MODELS, "gemma-3-270m-q4_k_m.gguf")
    r = run("generate", "--model", model, "--temperature", "0", "--max-tokens", "2", "--",
            "--verbose mode")
    assert r.returncode == 0 and "2 generated in" in r.stderr, r.stderr
    whisper = os.path.join(MODELS, "whisper-tiny.en")
    r = run("generate", "--model", whisper, "Hello")
    assert r.returncode == 1, r.stderr
    assert f"model '{whisper}' is not a generation model" in r.stderr, r.stderr


def test_generate_max_model_len_flag():
    """--max-model-len caps the context (config max_model_len): a prompt
    longer than it is refused naming the cap, one that fits runs, and a cap
    past the model's trained context (Gemma 3 270M: 32768) is refused at
    load naming both numbers."""
    model = os.path.join(MODELS, "gemma-3-270m-q4_k_m.gguf")
    r = run("generate", "--model", model, "--max-model-len", "16", "--temperature", "0",
            "--max-tokens", "4", LONG_PROMPT)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "this model's context is 16 tokens" in r.stderr, r.stderr
    r = run("generate", "--model", model, "--max-model-len", "16", "--temperature", "0",
            "--max-tokens", "4", "The capital of France is")
    assert r.returncode == 0, r.stderr
    assert "4 generated in" in r.stderr, r.stderr
    r = run("generate", "--model", model, "--max-model-len", "65536", "--max-tokens", "4", "Hi")
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "max_model_len is 65536 tokens" in r.stderr and "32768" in r.stderr, r.stderr


def test_generate_takes_the_configs_max_model_len(tmp_path):
    """A model named from --config runs with its entry's max_model_len
    (here 16), as the daemon does, unless --max-model-len says otherwise."""
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"models": [{
        "name": "g", "path": os.path.join(MODELS, "gemma-3-270m-q4_k_m.gguf"),
        "max_model_len": 16}]}))
    r = run("generate", "--config", str(cfg), "--model", "g", "--max-tokens", "4", LONG_PROMPT)
    assert r.returncode == 1 and "this model's context is 16 tokens" in r.stderr, r.stderr
    r = run("generate", "--config", str(cfg), "--model", "g", "--max-model-len", "64",
            "--temperature", "0", "--max-tokens", "4", LONG_PROMPT)
    assert r.returncode == 0 and "4 generated in" in r.stderr, r.stderr


def test_devices_lists_cpu_and_opencl():
    """`inferd devices`: a header, the cpu device, then the OpenCL devices
    (PoCL's CPU device at least: scripts/install-deps installs it)."""
    r = run("devices")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["DEVICE", "KIND", "UNITS", "MEMORY", "SIMD", "MODEL"]
    assert lines[1].startswith("cpu:") and lines[1].split()[1] == "cpu", lines
    ocl = [ln.split() for ln in lines[2:] if ln.startswith("opencl:")]
    assert ocl and ocl[0][0] == "opencl:0.0" and ocl[0][1] == "opencl", lines
    assert int(ocl[0][2]) >= 1 and ocl[0][4] == "GiB" and ocl[0][5] == "opencl", lines
    r = run("devices", "--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: inferd devices")
    r = run("devices", "extra")
    assert r.returncode == 2 and "usage: inferd devices" in r.stderr
