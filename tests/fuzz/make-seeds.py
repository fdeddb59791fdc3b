#!/usr/bin/env python3
"""Write the small seed files for fuzz_gguf, fuzz_ct2, fuzz_safetensors and
fuzz_multipart (standard library only).

Besides well-formed files, it writes structure-aware hostile ones (issue 17):
valid headers around the size fields that overflow, the class behind
llama.cpp's GGUF heap-overflow advisories (dimensions whose product wraps
2^64, element and tensor counts near 2^63, strings and arrays declaring
gigabytes, offsets that wrap), CTranslate2 variable tables with the same
traps, and multipart bodies with valid boundaries that push every limit.
Plain byte mutation rarely gets past a magic number and a count; from these
seeds libFuzzer starts deep in the tables. Each must be refused cleanly.

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


def gguf_hostile():
    """Valid GGUF v3 headers around hostile size fields: name -> bytes."""
    arch = [("general.architecture", STR, "llama")]
    q8 = 8  # GGML_TYPE_Q8_0: 34 bytes per 32 elements

    def raw_header(n_tensors, n_kv, body):
        return b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_kv) + body

    out = {
        # element count wraps: 2^32 * 2^32 = 2^64 = 0 in 64 bits
        "hostile-dims-wrap.gguf": gguf(3, arch, [("w", [2**32, 2**32], 0, 0)], 32, b"\0" * 64),
        # three dims whose product wraps to a small number (2^22 * 2^21 * 2^21 + 4)
        "hostile-dims-wrap3.gguf": gguf(3, arch, [("w", [2**22, 2**21, 2**21 + 1], 0, 0)], 32,
                                        b"\0" * 64),
        # one dimension near 2^63, another 2: bytes = 4 * 2^64 wraps
        "hostile-dim-2e63.gguf": gguf(3, arch, [("w", [2**63 - 1, 2], 0, 0)], 32, b"\0" * 64),
        # Q8_0 with a row that is not a whole number of blocks
        "hostile-q8-partial-block.gguf": gguf(3, arch, [("w", [33, 2], q8, 0)], 32, b"\0" * 96),
        # the bytes a block type needs overflow before the division by 32
        "hostile-q8-bytes-wrap.gguf": gguf(3, arch, [("w", [2**60, 32], q8, 0)], 32,
                                           b"\0" * 64),
        # data offset near 2^64: offset + size wraps back into the file
        "hostile-offset-wrap.gguf": gguf(3, arch, [("w", [8], 0, 2**64 - 32)], 32, b"\0" * 64),
        # five dimensions (GGML_MAX_DIMS is 4) and a zero one
        "hostile-ndims.gguf": gguf(3, arch, [("w", [1, 1, 1, 1, 1], 0, 0),
                                             ("z", [0, 4], 0, 0)], 32, b"\0" * 64),
        # an unknown type id and an overlapping second tensor
        "hostile-type-overlap.gguf": gguf(3, arch, [("w", [8], 99, 0), ("v", [8], 0, 0),
                                                    ("u", [8], 0, 16)], 32, b"\0" * 64),
        # duplicate tensor names
        "hostile-dup-names.gguf": gguf(3, arch, [("w", [8], 0, 0), ("w", [8], 0, 32)], 32,
                                       b"\0" * 64),
        # alignment 0 and not a power of two
        "hostile-align0.gguf": gguf(3, [("general.alignment", U32, 0)] + arch,
                                    [("w", [8], 0, 0)], 32, b"\0" * 64),
        "hostile-align3.gguf": gguf(3, [("general.alignment", U32, 3)] + arch,
                                    [("w", [8], 0, 0)], 32, b"\0" * 64),
        # counts near 2^63 in the header, nothing behind them
        "hostile-n-tensors.gguf": raw_header(2**63 - 1, 0, b""),
        "hostile-n-kv.gguf": raw_header(0, 2**63 - 1, b""),
        # a key string declaring 2^31 and 2^63 bytes
        "hostile-key-2g.gguf": raw_header(0, 1, struct.pack("<Q", 2**31) + b"k" * 16),
        "hostile-key-2e63.gguf": raw_header(0, 1, struct.pack("<Q", 2**63 + 7) + b"k" * 16),
        # a string value declaring 4 GB
        "hostile-str-4g.gguf": raw_header(0, 1, g_str("s") + struct.pack("<IQ", STR, 2**32) +
                                          b"x" * 16),
        # arrays: 2^61 u64 elements (count * 8 wraps 2^64), 2^63 strings,
        # nesting 64 deep
        "hostile-arr-u64-wrap.gguf": raw_header(0, 1, g_str("a") + struct.pack("<IIQ", ARR, U64,
                                                                            2**61) + b"\0" * 16),
        "hostile-arr-str-2e63.gguf": raw_header(0, 1, g_str("a") + struct.pack("<IIQ", ARR, STR,
                                                                            2**63) + g_str("x")),
        "hostile-arr-nested.gguf": raw_header(0, 1, g_str("a") +
                                              struct.pack("<II", ARR, ARR) +
                                              b"".join(struct.pack("<QI", 1, ARR)
                                                       for _ in range(63)) +
                                              struct.pack("<QIQ", 1, U8, 1) + b"\1"),
        # an unknown value type
        "hostile-vtype.gguf": raw_header(0, 1, g_str("v") + struct.pack("<IQ", 77, 1)),
        # a tensor name declaring 2^40 bytes
        "hostile-tname.gguf": raw_header(1, 0, struct.pack("<Q", 2**40) + b"n" * 16),
    }
    return out


def ct2_hostile():
    """CTranslate2 model.bin variable tables with hostile sizes."""
    f32 = 0
    return {
        # four u32 dims of 2^16: the product 2^64 wraps to 0
        "hostile-dims-wrap.bin": ct2(6, [("w", [2**16] * 4, f32, 4, b"")], []),
        # dims product 2^32 * 4 bytes, data declared 16 bytes
        "hostile-bytes-mismatch.bin": ct2(6, [("w", [2**16, 2**16], f32, 4, b"\0" * 16)], []),
        # a declared byte count far past the end of the file
        "hostile-nbytes-past-end.bin": (struct.pack("<I", 6) + c_str("WhisperSpec") +
                                        struct.pack("<II", 3, 1) + c_str("w") +
                                        struct.pack("<BIBI", 1, 4, f32, 2**32 - 1) + b"\0" * 16),
        # an unknown dtype, 255 dims, an item size of 0 (version 3)
        "hostile-dtype.bin": ct2(6, [("w", [1], 99, 4, b"\0" * 4)], []),
        "hostile-rank255.bin": (struct.pack("<I", 6) + c_str("WhisperSpec") +
                                struct.pack("<II", 3, 1) + c_str("w") + struct.pack("<B", 255) +
                                struct.pack("<I", 1) * 255 + struct.pack("<BI", f32, 4) +
                                b"\0" * 4),
        "hostile-item0-v3.bin": (struct.pack("<I", 3) + c_str("WhisperSpec") +
                                 struct.pack("<II", 3, 1) + c_str("w") +
                                 struct.pack("<BIBI", 1, 4, 0, 4) + b"\0" * 4 +
                                 struct.pack("<I", 0)),
        # 2^32 - 1 variables declared, one present; aliases naming each other
        # (a cycle), which must name variables
        "hostile-nvars.bin": (struct.pack("<I", 6) + c_str("WhisperSpec") +
                              struct.pack("<II", 3, 2**32 - 1) + c_str("w") +
                              struct.pack("<BIBI", 1, 1, f32, 4) + b"\0" * 4),
        "hostile-alias-cycle.bin": ct2(6, [("w", [1], f32, 4, b"\0" * 4)],
                                       [("a", "b"), ("b", "a"), ("w", "a")]),
        # a name declaring 65535 bytes with 8 present
        "hostile-name-len.bin": (struct.pack("<I", 6) + c_str("WhisperSpec") +
                                 struct.pack("<II", 3, 1) + struct.pack("<H", 65535) +
                                 b"name\0\0\0\0"),
    }


def multipart_hostile():
    """Content-Type line, newline, body: valid boundaries, hostile bodies."""
    ct = b"multipart/form-data; boundary=B\n"

    def part(name, data, extra=b"", filename=None):
        disp = b'form-data; name="' + name + b'"'
        if filename is not None:
            disp += b'; filename="' + filename + b'"'
        return b"--B\r\nContent-Disposition: " + disp + b"\r\n" + extra + b"\r\n" + data + b"\r\n"

    many = b"".join(part(b"f%d" % i, b"v") for i in range(12)) + b"--B--\r\n"
    big_field = part(b"model", b"x" * 2000) + b"--B--\r\n"
    long_hdr = (b"--B\r\nContent-Disposition: form-data; name=\"" + b"n" * 600 + b"\"\r\n\r\nv\r\n"
                b"--B--\r\n")
    in_data = part(b"file", b"a\r\n--Bx\r\n--B-\r\nb", filename=b"a.wav") + b"--B--\r\n"
    no_close = part(b"file", b"data", filename=b"a.wav")
    quoted = (b'multipart/form-data; boundary="B;\\"q"\n--B;"q\r\n'
              b'Content-Disposition: form-data; name="a"\r\n\r\nv\r\n--B;"q--\r\n')
    dup = part(b"model", b"a") + part(b"model", b"b") + part(b"file", b"", filename=b"") + b"--B--\r\n"
    params = (b"--B\r\nContent-Disposition: form-data; name=a; name*=UTF-8''x; filename=\r\n"
              b"Content-Type: audio/wav; charset=\"x\"\r\n\r\nv\r\n--B--\r\n")
    return {
        "hostile-many-parts": ct + many,
        "hostile-big-field": ct + big_field,
        "hostile-long-header": ct + long_hdr,
        "hostile-boundary-in-data": ct + in_data,
        "hostile-no-close": ct + no_close,
        "hostile-quoted-boundary": quoted,
        "hostile-duplicates": ct + dup,
        "hostile-params": ct + params,
    }


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
    for name, data in gguf_hostile().items():
        files["gguf/" + name] = data
    for name, data in ct2_hostile().items():
        files["ct2/" + name] = data
    for name, data in multipart_hostile().items():
        files["multipart/" + name] = data
    for rel, data in files.items():
        path = os.path.join(HERE, "corpus", rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        print(f"{rel}: {len(data)} bytes")


if __name__ == "__main__":
    main()
