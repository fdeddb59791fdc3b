#!/usr/bin/env python3
"""Write the small seed files for fuzz_gguf, fuzz_ct2 and fuzz_safetensors
(standard library only).

Run from anywhere:  python3 tests/fuzz/make-seeds.py
The unit tests (tests/unit/engine/format/test_gguf.c, test_ct2.c) also open these
files and check the values written here, so keep the two in step.

Formats followed: the GGUF specification (ggml docs/gguf.md),
CTranslate2's model.bin layout (python/ctranslate2/specs/model_spec.py) and
the safetensors format (huggingface/safetensors README: an 8-byte
little-endian header length, a JSON header of {name: {dtype, shape,
data_offsets}} and "__metadata__", then the data).
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

# GGUF value types
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i",
       F32: "<f", BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}


def g_str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def g_val(t, v):
    if t == STR:
        return g_str(v)
    if t == ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(g_val(et, x) for x in items)
    return struct.pack(FMT[t], v)


def gguf(version, kvs, tensors, alignment, data):
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for key, t, v in kvs:
        out += g_str(key) + struct.pack("<I", t) + g_val(t, v)
    for name, dims, gtype, off in tensors:
        out += g_str(name) + struct.pack("<I", len(dims))
        out += b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", gtype, off)
    out += b"\0" * (-len(out) % alignment)
    return out + data


def gguf_all_types(version):
    kvs = [
        ("general.architecture", STR, "tiny"),
        ("general.alignment", U32, 64),
        ("t.u8", U8, 200), ("t.i8", I8, -5), ("t.u16", U16, 60000),
        ("t.i16", I16, -30000), ("t.u32", U32, 4000000000),
        ("t.i32", I32, -2000000000), ("t.f32", F32, 0.5), ("t.bool", BOOL, True),
        ("t.str", STR, "héllo"), ("t.u64", U64, 2**63 + 5),
        ("t.i64", I64, -(2**40)), ("t.f64", F64, 2.25),
        ("t.arr_u8", ARR, (U8, [1, 2, 3])),
        ("t.arr_i32", ARR, (I32, [-1, 0, 7])),
        ("t.arr_str", ARR, (STR, ["a", "bc", ""])),
        ("t.arr_arr_str", ARR, (ARR, [(STR, ["x", "yz"]), (STR, []), (STR, ["w"])])),
        ("t.arr_empty", ARR, (F64, [])),
    ]
    # "a": F32 [4, 2] = 32 bytes at 0; "b": Q8_0 [32] = 34 bytes at 64.
    tensors = [("a", [4, 2], 0, 0), ("b", [32], 8, 64)]
    data = struct.pack("<8f", *range(8)) + b"\0" * 32 + bytes(range(34))
    return gguf(version, kvs, tensors, 64, data)


def c_str(s):
    b = s.encode("utf-8") + b"\0"
    return struct.pack("<H", len(b)) + b


def ct2(version, variables, aliases):
    """variables: (name, dims, dtype id, item size, data bytes)."""
    out = struct.pack("<I", version)
    out += c_str("WhisperSpec") + struct.pack("<I", 3)
    out += struct.pack("<I", len(variables))
    for name, dims, dtype, isz, data in variables:
        out += c_str(name) + struct.pack("<B", len(dims))
        out += b"".join(struct.pack("<I", d) for d in dims)
        if version >= 4:
            out += struct.pack("<BI", dtype, len(data))
        else:
            out += struct.pack("<BI", isz, len(data) // isz)
        out += data
    if version >= 3:
        out += struct.pack("<I", len(aliases))
        for a, t in aliases:
            out += c_str(a) + c_str(t)
    return out


def ct2_all_types():
    v = [
        ("decoder/embeddings/weight", [2, 2], 0, 4, struct.pack("<4f", 1, 2, 3, 4)),
        ("decoder/activation", [], 1, 1, b"\x03"),
        ("encoder/num_heads", [], 2, 2, struct.pack("<h", 6)),
        ("encoder/conv1/weight", [2, 1, 3], 4, 2, b"\x00\x3c" * 6),
        ("encoder/ids", [2], 3, 4, struct.pack("<2i", -1, 9)),
        ("encoder/bf", [2], 5, 2, b"\x80\x3f" * 2),
    ]
    return ct2(6, v, [("decoder/projection/weight", "decoder/embeddings/weight")])


def ct2_v3():
    v = [("w", [3], 0, 4, struct.pack("<3f", 1, 2, 3)), ("q", [2], 1, 1, b"\x01\x02")]
    return ct2(3, v, [])


def safetensors(tensors, metadata=None):
    """tensors: [(name, dtype, shape, raw bytes)] laid out in order."""
    header, data = {}, b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if metadata is not None:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def safetensors_types():
    return safetensors([
        ("w", "F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4)),
        ("h", "F16", [3], struct.pack("<3H", 0x3C00, 0x4000, 0xC000)),
        ("b", "BF16", [1], struct.pack("<H", 0x3F80)),
        ("i", "I64", [], struct.pack("<q", -5)),
        ("e", "U8", [0], b""),
    ], {"format": "pt"})


def safetensors_vad_shaped():
    """Silero VAD's tensor names (silero_vad_16k.safetensors) at tiny shapes."""
    names = ["stft_conv.weight", "conv1.weight", "conv1.bias", "lstm_cell.weight_ih",
             "lstm_cell.bias_hh", "final_conv.weight"]
    return safetensors([(n, "F32", [1, 2], struct.pack("<2f", 0.5, -0.5)) for n in names])


def main():
    files = {
        "gguf/all-types-v3.gguf": gguf_all_types(3),
        "gguf/all-types-v2.gguf": gguf_all_types(2),
        "ct2/all-types-v6.bin": ct2_all_types(),
        "ct2/item-size-v3.bin": ct2_v3(),
        "safetensors/types.safetensors": safetensors_types(),
        "safetensors/vad-shaped.safetensors": safetensors_vad_shaped(),
    }
    for rel, data in files.items():
        path = os.path.join(HERE, "corpus", rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        print(f"{rel}: {len(data)} bytes")


if __name__ == "__main__":
    main()
