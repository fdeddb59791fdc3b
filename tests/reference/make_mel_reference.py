#!/usr/bin/env python3
"""Reference log-mel features for tests/unit/kernels/test_mel.c.

Computes Whisper's log-mel spectrogram with faster-whisper's FeatureExtractor
(faster-whisper 1.2.1, numpy 2.x: the implementation inferd compares
against) on float samples read straight from 16 kHz 16-bit WAV files with
the `wave` module (int16 / 32768, the scaling libsndfile uses), so both
sides see identical input and no resampler is involved.

Writes into tests/reference/mel/:
  <clip>.f32          raw little-endian float32, [80][n_frames] mel-major,
                      features of the whole clip computed with padding=160
                      (what WhisperModel.transcribe uses), first
                      MAX_FRAMES frames kept (all of them for these clips)
  edge_<n>.f32        [80][n/160] features of SYNTH(n) with padding=0, for
                      n in EDGE_NS (short inputs: reflect padding longer
                      than the signal, exactly one or two frames)
  filters_<m>.f32     [m][201] Slaney mel filterbank for m = 80 and 128,
                      librosa.filters.mel(sr=16000, n_fft=400, n_mels=m)
                      when librosa is importable, else faster-whisper's copy
                      of that formula (the JSON says which)
  reference.json      shapes, padding, sources and versions of the above

SYNTH(n)[i] = float32(0.5 sin(0.05 i) + 0.25 sin(1.3 i + 0.2)), computed in
double; test_mel.c builds the same signal.

Run: python3 tests/reference/make_mel_reference.py  (from the repo root)
"""
import json
import os
import sys
import wave

import numpy as np
import faster_whisper
from faster_whisper.feature_extractor import FeatureExtractor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AUDIO = os.path.join(ROOT, "tests", "data", "audio")
OUT = os.path.join(ROOT, "tests", "reference", "mel")
CLIPS = ["jfk.wav", "sense_and_sensibility_01_austen_64kb-0930.wav"]
PADDING = 160
MAX_FRAMES = 3000
EDGE_NS = [161, 170, 399, 400, 401]


def read_wav16(path):
    with wave.open(path, "rb") as w:
        assert w.getframerate() == 16000 and w.getnchannels() == 1, path
        assert w.getsampwidth() == 2, path
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    return pcm.astype(np.float32) / np.float32(32768.0)


def synth(n):
    i = np.arange(n, dtype=np.float64)
    return (0.5 * np.sin(0.05 * i) + 0.25 * np.sin(1.3 * i + 0.2)).astype(np.float32)


def save(name, arr):
    arr = np.ascontiguousarray(arr, dtype="<f4")
    arr.tofile(os.path.join(OUT, name))
    return list(arr.shape)


def filters(n_mels):
    try:
        import librosa  # noqa: PLC0415

        f = librosa.filters.mel(sr=16000, n_fft=400, n_mels=n_mels)
        return f, "librosa " + librosa.__version__
    except ImportError:
        f = FeatureExtractor.get_mel_filters(16000, 400, n_mels=n_mels)
        return f, "faster_whisper.FeatureExtractor.get_mel_filters (librosa formula)"


def main():
    os.makedirs(OUT, exist_ok=True)
    fe = FeatureExtractor(feature_size=80)
    meta = {
        "generator": "tests/reference/make_mel_reference.py",
        "faster_whisper": faster_whisper.__version__,
        "numpy": np.__version__,
        "layout": "raw little-endian float32, row-major [n_mels][n_frames]",
        "clips": {},
        "edge": {},
        "filters": {},
    }
    for clip in CLIPS:
        x = read_wav16(os.path.join(AUDIO, clip))
        feat = fe(x, padding=PADDING)
        kept = feat[:, :MAX_FRAMES]
        stem = os.path.splitext(clip)[0]
        shape = save(stem + ".f32", kept)
        meta["clips"][stem] = {
            "source": "tests/data/audio/" + clip,
            "samples": "int16 / 32768 via the wave module",
            "n_samples": int(x.size),
            "padding_zeros_appended": PADDING,
            "n_frames_total": int(feat.shape[1]),
            "shape_stored": shape,
        }
    for n in EDGE_NS:
        feat = fe(synth(n), padding=0)
        meta["edge"][str(n)] = {"padding_zeros_appended": 0,
                                "shape": save("edge_%d.f32" % n, feat)}
    for m in (80, 128):
        f, src = filters(m)
        meta["filters"][str(m)] = {"shape": save("filters_%d.f32" % m, f), "source": src}
    with open(os.path.join(OUT, "reference.json"), "w") as fh:
        json.dump(meta, fh, indent=1, sort_keys=True)
        fh.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
