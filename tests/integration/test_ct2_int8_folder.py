"""A CTranslate2 Whisper folder stored in int8 (as CTranslate2's converter
quantizes) loads and runs its own int8 codes and weight_scale: near the
float16 original's WER, and giving the text its dequantized copy gives."""
import json
import os
import shutil
import struct
import subprocess

import pytest

from conftest import BIN, MODELS
from test_compute_types import wer_clips
from test_transcribe import AUDIO, manifest, normalise, transcribe

# --- a CTranslate2 folder stored in int8 ---------------------------------
#
# No int8 Whisper folder is among the project's models, so the test makes
# one from the float16 tiny.en the way CTranslate2's converter quantizes
# (python/ctranslate2/specs/model_spec.py, _quantize for "int8"): every
# linear weight and the embeddings per row, amax = max |w| of the row
# (127 for an all-zero row), weight_scale = 127 / amax (float32), codes =
# rint(w * weight_scale) as int8; everything else float32. The file is the
# binary format model_spec.py's _serialize writes (version 6).

DTYPES = ("float32", "int8", "int16", "int32", "float16", "bfloat16")


def read_ct2(path):
    import numpy as np
    buf = open(path, "rb").read()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from(fmt, buf, pos)
        pos += struct.calcsize(fmt)
        return v

    def string():
        nonlocal pos
        (n,) = take("<H")
        s = buf[pos:pos + n - 1].decode()
        pos += n
        return s

    (version,) = take("<I")
    assert version >= 4
    spec = string()
    (revision,) = take("<I")
    (n,) = take("<I")
    variables = []
    for _ in range(n):
        name = string()
        (rank,) = take("<B")
        dims = take("<%dI" % rank) if rank else ()
        (dt,) = take("<B")
        (nbytes,) = take("<I")
        assert DTYPES[dt] != "bfloat16"  # not in tiny.en; numpy has no such type
        size = np.dtype(DTYPES[dt]).itemsize
        arr = np.frombuffer(buf, dtype=DTYPES[dt], count=nbytes // size, offset=pos)
        pos += nbytes
        variables.append((name, dims, DTYPES[dt], arr.reshape(dims) if dims else arr))
    (n_alias,) = take("<I")
    aliases = [(string(), string()) for _ in range(n_alias)]
    return version, spec, revision, variables, aliases


def write_ct2(path, version, spec, revision, variables, aliases):
    def string(s):
        b = s.encode()
        return struct.pack("<H", len(b) + 1) + b + b"\0"

    with open(path, "wb") as f:
        f.write(struct.pack("<I", version) + string(spec) + struct.pack("<II", revision,
                                                                       len(variables)))
        for name, arr in variables:
            f.write(string(name) + struct.pack("<B", arr.ndim))
            f.write(struct.pack("<%dI" % arr.ndim, *arr.shape))
            data = arr.tobytes()
            f.write(struct.pack("<BI", DTYPES.index(str(arr.dtype)), len(data)) + data)
        f.write(struct.pack("<I", len(aliases)))
        for a, t in aliases:
            f.write(string(a) + string(t))


@pytest.fixture(scope="module")
def int8_folder(tmp_path_factory):
    import numpy as np  # in the test venv (tritonclient's dependency)
    src = os.path.join(MODELS, "whisper-tiny.en")
    dst = tmp_path_factory.mktemp("whisper-tiny.en-int8")
    version, spec, revision, variables, aliases = read_ct2(os.path.join(src, "model.bin"))
    out = []
    for name, dims, dtype, arr in variables:
        if name.endswith("/weight") and len(dims) == 2 and dtype == "float16":
            w = arr.astype(np.float32)
            amax = np.amax(np.absolute(w), axis=1)
            amax[amax == 0] = 127.0
            scale = (127.0 / amax).astype(np.float32)
            out.append((name, np.rint(w * scale[:, None]).astype(np.int8)))
            out.append((name + "_scale", scale))
        elif dtype == "float16":
            out.append((name, arr.astype(np.float32)))
        else:
            out.append((name, arr))
    write_ct2(os.path.join(dst, "model.bin"), version, spec, revision, out, aliases)
    for f in os.listdir(src):
        if f != "model.bin":
            shutil.copy(os.path.join(src, f), dst)
    return str(dst), sum(1 for n, a in out if str(a.dtype) == "int8")


def run_folder(folder, clips, *args):
    r = subprocess.run([BIN, "transcribe", "--model", folder, "--json", "--temperature", "0",
                        "--threads", "2", *args, *clips],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    out = [json.loads(line) for line in r.stdout.splitlines()]
    return {os.path.basename(o["file"]): o for o in out}


def test_int8_stored_folder(int8_folder):
    """The folder's own codes and weight_scale (compute type default keeps
    them) against the same folder dequantized (float32): the int8 products
    must give the dequantized model's text on most clips (a wrong scale or
    layout gives garbage), and both stay near the float16 original's WER.
    The bound is looser than the 0.3 points of our own int8 mode: this is
    another model (CTranslate2 also quantizes the token embeddings), and
    one word is 0.5 points of these 190."""
    folder, n_int8 = int8_folder
    assert n_int8 >= 4 * 4 + 4 * 6 + 1  # every linear and the embeddings
    rows = manifest()
    clips = [os.path.join(AUDIO, c) for c in sorted(rows)]
    exact = transcribe(clips, "--compute-type", "float32")
    stored = run_folder(folder, clips)
    deq = run_folder(folder, clips, "--compute-type", "float32")
    wer_f, wer_s, wer_d = wer_clips(exact), wer_clips(stored), wer_clips(deq)
    print(f"WER float32 {wer_f:.2f} %, int8 folder {wer_s:.2f} %, dequantized {wer_d:.2f} %")
    same = [c for c in stored if normalise(stored[c]["text"]) == normalise(deq[c]["text"])]
    assert len(same) >= 0.7 * len(stored), same
    assert wer_s <= wer_f + 1.5
    assert wer_d <= wer_f + 1.5
    # the stored codes run int8 by default: "int8" names the same computation
    again = run_folder(folder, clips[:3], "--compute-type", "int8")
    for c in again:
        assert again[c]["segments"] and again[c]["text"] == stored[c]["text"]
