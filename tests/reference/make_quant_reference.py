#!/usr/bin/env python3
"""make_quant_reference.py - dequantized blocks of every quantized type the
kernels implement, from an implementation that is not ours: the `gguf`
package (PyPI, llama.cpp's own Python GGUF library; gguf.quants.dequantize,
numpy, float32 arithmetic).

For each type T: N random blocks (random bytes; every fp16 scale field set
to a random finite value of moderate size so products stay normal), written
as tests/reference/quant/<T>.blocks (the raw block bytes, back to back) and
tests/reference/quant/<T>.f32 (the dequantized values, float32 little-endian,
block after block). reference.json records the gguf version, the seed and
the counts. tests/unit/kernels/test_quant_ref.c checks kernels/ref/quant.c's
dequant against these values.

Usage:
  python -m venv /tmp/gv && /tmp/gv/bin/pip install gguf==0.19.0 numpy
  /tmp/gv/bin/python tests/reference/make_quant_reference.py
"""
import json
import os

import gguf
import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "quant")
SEED = 20261203
N_BLOCKS = 32

# type -> byte offsets of its fp16 scale fields (ggml-common.h)
TYPES = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
    T.IQ4_NL: [0], T.IQ4_XS: [0],
}


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(SEED)
    index = {"source": "gguf %s (PyPI) gguf.quants.dequantize" % gguf_version(),
             "seed": SEED, "types": {}}
    for t, halves in TYPES.items():
        _, tsize = gguf.GGML_QUANT_SIZES[t]
        raw = rng.integers(0, 256, size=(N_BLOCKS, tsize), dtype=np.uint8)
        for off in halves:
            # |scale| in [2^-10, 2^2): normal fp16, products normal in float32
            mag = np.exp2(rng.uniform(-10, 2, size=N_BLOCKS))
            sign = rng.choice([-1.0, 1.0], size=N_BLOCKS)
            h = (mag * sign).astype(np.float16)
            raw[:, off:off + 2] = np.frombuffer(h.tobytes(), dtype=np.uint8).reshape(N_BLOCKS, 2)
        vals = quants.dequantize(raw.reshape(-1), t).astype(np.float32).reshape(-1)
        assert np.all(np.isfinite(vals))
        with open(os.path.join(OUT, t.name + ".blocks"), "wb") as f:
            f.write(raw.tobytes())
        with open(os.path.join(OUT, t.name + ".f32"), "wb") as f:
            f.write(vals.astype("<f4").tobytes())
        index["types"][t.name] = {"blocks": N_BLOCKS, "block_bytes": tsize,
                                  "values": int(vals.size)}
    with open(os.path.join(OUT, "reference.json"), "w") as f:
        json.dump(index, f, indent=1)
        f.write("\n")


def gguf_version():
    from importlib.metadata import version
    return version("gguf")


if __name__ == "__main__":
    main()
