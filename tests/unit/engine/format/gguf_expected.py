#!/usr/bin/env python3
"""Print facts about a GGUF file with the Python standard library only.

An independent second reading of the file that test_gguf.c checks against:
the expected values hard-coded in test_gguf.c came from running
    python3 tests/unit/engine/format/gguf_expected.py models/gemma-3-270m-q4_k_m.gguf
Follows the GGUF specification (ggml docs/gguf.md), little-endian, v2/v3.
"""
import struct
import sys

# ggml type -> (name, block size, bytes per block), as in the GGUF spec / ggml.
GGML = {0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18),
        3: ("Q4_1", 32, 20), 6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24),
        8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 36), 10: ("Q2_K", 256, 84),
        11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144),
        13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210),
        15: ("Q8_K", 256, 292), 30: ("BF16", 1, 2)}
SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f",
          7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


class Reader:
    def __init__(self, data):
        self.b, self.p = data, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.b, self.p)[0]
        self.p += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.take("<Q")
        s = self.b[self.p:self.p + n].decode("utf-8", "replace")
        self.p += n
        return s

    def value(self, t):
        if t in SCALAR:
            return self.take(SCALAR[t])
        if t == 8:
            return self.string()
        et, n = self.take("<I"), self.take("<Q")
        return [self.value(et) for _ in range(n)], et


def main(path):
    with open(path, "rb") as f:
        data = f.read()
    r = Reader(data)
    magic, version = r.take("<4s"), r.take("<I")
    n_tensors, n_kv = r.take("<Q"), r.take("<Q")
    print(f"magic {magic} version {version} tensors {n_tensors} kv {n_kv}")
    align = 32
    for _ in range(n_kv):
        key, t = r.string(), r.take("<I")
        v = r.value(t)
        if t == 9:
            items, et = v
            print(f"kv {key} array type {et} n {len(items)} first {items[:3]}")
        else:
            print(f"kv {key} type {t} = {v!r}")
        if key == "general.alignment":
            align = v
    total = 0
    for i in range(n_tensors):
        name, nd = r.string(), r.take("<I")
        dims = [r.take("<Q") for _ in range(nd)]
        t, off = r.take("<I"), r.take("<Q")
        tname, blk, tsz = GGML[t]
        n = 1
        for d in dims:
            n *= d
        size = n // blk * tsz
        total += size
        print(f"tensor {i} {name} {tname}({t}) {dims} off {off} bytes {size}")
    start = (r.p + align - 1) // align * align
    print(f"data start {start} total tensor bytes {total} file {len(data)}")


if __name__ == "__main__":
    main(sys.argv[1])
