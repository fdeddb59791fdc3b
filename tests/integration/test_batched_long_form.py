"""Batched long-form transcription (`inferd transcribe --batched`, the
engine's eng_transcribe_params.batched): a 3-minute file made of the test
clips is cut into chunks of at most 30 s that are transcribed
independently and together. Its word error rate against the clips' human
transcripts may not be more than 0.3 points above the sequential
(exact) long-form mode's, and its segments come back in order, inside
the audio, numbered from 1. (That the chunks' passes are batched is
checked from the scheduler's records in tests/unit/engine/asr.)"""
import pytest

from test_transcribe import normalise, transcribe, word_errors, write_long_file


@pytest.fixture(scope="module")
def long_file(tmp_path_factory):
    """The 16 kHz mono WAV clips, cyclically, to >= 180 s; and the words
    of their references in the same order."""
    path = tmp_path_factory.mktemp("long") / "long.wav"
    words, duration = write_long_file(path)
    return str(path), words, duration


def test_batched_wer_and_segments(long_file):
    path, truth, duration = long_file
    seq = transcribe([path])["long.wav"]
    bat = transcribe([path], "--batched")["long.wav"]
    wer_s = 100.0 * word_errors(truth, normalise(seq["text"])) / len(truth)
    wer_b = 100.0 * word_errors(truth, normalise(bat["text"])) / len(truth)
    print(f"WER sequential {wer_s:.2f} %, batched {wer_b:.2f} % over {len(truth)} words")
    assert wer_b <= wer_s + 0.3
    assert abs(bat["duration"] - duration) < 0.01
    segs = bat["segments"]
    assert len(segs) >= 6  # more than one chunk's worth
    for a, b in zip(segs, segs[1:]):
        assert a["start"] <= b["start"]
    for s in segs:
        assert 0 <= s["start"] <= s["end"] <= duration + 1e-6, s
    # the chunks' segments were shifted to their place in the file
    assert segs[-1]["end"] > duration - 30
