"""A GGUF whose tensors disagree with its tokenizer is refused at load with
one line naming both (instead of loading and failing every request): the
tiny llama model of tests/reference/llm/tiny with its embedding and output
cut to one row fewer than the tokenizer's tokens, by rewriting the row
counts in the file's tensor table (the data is left as it is)."""
import os
import shutil
import struct
import subprocess

from conftest import BIN, ROOT

TINY = os.path.join(ROOT, "tests", "reference", "llm", "tiny", "llama_f32.gguf")

# GGUF value types -> fixed size in bytes (8: string, 9: array handled apart)
FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def skip_value(buf, at, vtype):
    if vtype in FIXED:
        return at + FIXED[vtype]
    if vtype == 8:
        (n,) = struct.unpack_from("<Q", buf, at)
        return at + 8 + n
    assert vtype == 9, vtype
    etype, n = struct.unpack_from("<IQ", buf, at)
    at += 12
    for _ in range(n):
        at = skip_value(buf, at, etype)
    return at


def tensor_dims_offsets(buf):
    """{tensor name: file offset of its dims array} from a GGUF v3 header."""
    magic, version, n_tensors, n_kv = struct.unpack_from("<4sIQQ", buf, 0)
    assert magic == b"GGUF" and version == 3
    at = 24
    for _ in range(n_kv):
        (n,) = struct.unpack_from("<Q", buf, at)
        at += 8 + n
        (vtype,) = struct.unpack_from("<I", buf, at)
        at = skip_value(buf, at + 4, vtype)
    out = {}
    for _ in range(n_tensors):
        (n,) = struct.unpack_from("<Q", buf, at)
        name = buf[at + 8:at + 8 + n].decode()
        at += 8 + n
        (n_dims,) = struct.unpack_from("<I", buf, at)
        out[name] = (at + 4, n_dims)
        at += 4 + 8 * n_dims + 4 + 8
    return out


def test_embedding_with_fewer_rows_than_tokens_refused(tmp_path):
    path = tmp_path / "short_embedding.gguf"
    shutil.copy(TINY, path)
    buf = bytearray(path.read_bytes())
    dims = tensor_dims_offsets(buf)
    for name in ("token_embd.weight", "output.weight"):
        at, n_dims = dims[name]
        assert n_dims == 2
        cols, rows = struct.unpack_from("<QQ", buf, at)
        assert rows == 272, rows
        struct.pack_into("<Q", buf, at + 8, rows - 1)
    path.write_bytes(bytes(buf))
    r = subprocess.run([BIN, "generate", "--model", str(path), "--max-tokens", "1", "hi"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert ("the tokenizer has 272 tokens, but token_embd.weight has 271 rows "
            "(one per token)") in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1, r.stderr  # one line
    # the unpatched file loads and generates (a random model: any bytes)
    r = subprocess.run([BIN, "generate", "--model", TINY, "--max-tokens", "1", "hi"],
                       capture_output=True, text=True, errors="replace", timeout=60)
    assert r.returncode == 0, r.stderr


def test_kv_cache_f16_is_for_gguf_models_only(tmp_path):
    """kv_cache_f16 on a CTranslate2 Whisper model is refused at load,
    naming the key (as compute_type int8 on a GGUF model is)."""
    cfg = tmp_path / "c.json"
    cfg.write_text('{"listen": "127.0.0.1:0", "grpc_listen": "", "models": [{"name": "w", '
                   '"path": "%s", "kv_cache_f16": true}]}'
                   % os.path.join(ROOT, "models", "whisper-tiny.en"))
    r = subprocess.run([BIN, "--config", str(cfg)], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0, r.stderr
    assert "kv_cache_f16 applies to GGUF generation models only" in r.stderr, r.stderr
