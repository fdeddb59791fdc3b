#!/usr/bin/env python3
"""Regenerate tests/reference/audio/decoded.tsv: what faster-whisper 1.2.1's
decode_audio (PyAV's bundled FFmpeg: the first audio stream, resampled to
s16 mono 16 kHz by libswresample) gives for every clip in tests/data/audio
(manifest.tsv) and tests/data/audio/containers: the sample count and the
64-bit FNV-1a hash of the int16 samples (little-endian bytes), plus their
sum of squares (to tell near from far when a hash differs).
tests/unit/engine/audio/test_audio.c decodes the same files and compares:
the same libswresample algorithm gives the same samples.
Needs: pip install faster-whisper==1.2.1 (numpy, av).

    python3 tests/reference/make_audio_reference.py
"""
import csv
import os

import numpy as np
from faster_whisper.audio import decode_audio

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AUDIO = os.path.join(ROOT, "tests", "data", "audio")
OUT = os.path.join(ROOT, "tests", "reference", "audio", "decoded.tsv")


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return h


def main():
    with open(os.path.join(AUDIO, "manifest.tsv")) as f:
        files = sorted(row["file"] for row in csv.DictReader(f, delimiter="\t"))
    files += sorted("containers/" + n for n in os.listdir(os.path.join(AUDIO, "containers")))
    rows = []
    for name in files:
        x = decode_audio(os.path.join(AUDIO, name))
        s16 = np.round(x * 32768.0).astype("<i2")
        assert np.array_equal(s16.astype(np.float32) / 32768.0, x), name
        sumsq = int(np.sum(s16.astype(np.int64) ** 2))
        rows.append((name, len(s16), "%016x" % fnv1a64(s16.tobytes()), sumsq))
        print("%-48s %8d %s" % rows[-1][:3])
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        f.write("file\tn_samples\tfnv1a64_s16\tsum_sq_s16\n")
        for r in rows:
            f.write("%s\t%d\t%s\t%d\n" % r)


if __name__ == "__main__":
    main()
