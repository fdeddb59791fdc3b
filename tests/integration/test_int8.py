"""compute_type int8 (CTranslate2's int8 compute type: int8 linears with
per-row dynamically quantized activations) against the float (exact) mode
on the same clips: the word error rate against the human transcripts of
tests/data/audio/manifest.tsv may not grow by more than 0.3 points."""
import os
import subprocess

from conftest import BIN, MODELS
from test_transcribe import AUDIO, manifest, normalise, transcribe, word_errors


def wer(out, rows):
    errs = words = 0
    for clip, row in rows.items():
        truth = normalise(row["reference_transcript"])
        words += len(truth)
        errs += word_errors(truth, normalise(out[clip]["text"]))
    return 100.0 * errs / words


def test_int8_wer_within_0_3_points_of_float():
    rows = manifest()
    clips = [os.path.join(AUDIO, c) for c in sorted(rows)]
    exact = transcribe(clips, "--compute-type", "float32")
    int8 = transcribe(clips, "--compute-type", "int8")
    wer_f, wer_8 = wer(exact, rows), wer(int8, rows)
    print(f"WER float32 {wer_f:.2f} %, int8 {wer_8:.2f} % over {len(clips)} clips")
    assert wer_8 <= wer_f + 0.3
    # int8 is a different computation, not the float one relabelled: at
    # least one clip's token sequence differs somewhere
    toks = lambda o, c: [t for s in o[c]["segments"] for t in s["tokens"]]
    assert any(toks(exact, c) != toks(int8, c) for c in exact)


def test_unknown_compute_type_refused():
    r = subprocess.run([BIN, "transcribe", "--model", os.path.join(MODELS, "whisper-tiny.en"),
                        "--compute-type", "int4", os.path.join(AUDIO, "jfk.wav")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "--compute-type: expected default, float32, int8 or int8_float32" in r.stderr
