"""Word-level timestamps (eng_transcribe_params.word_timestamps): the
alignment heads' cross-attention, dynamic time warping and faster-whisper's
word grouping, checked against faster-whisper 1.2.1 word_timestamps=True on
the same model (tests/reference/make_word_reference.py), through
`inferd transcribe --word-timestamps`, OpenAI's timestamp_granularities
(the official client) and Deepgram's words; and words of requests batched
together on one replica equal those of the same requests one at a time
(the batching proven by the daemon's batch_stats, not a clock)."""
import json
import os
import threading

import pytest

from test_audio_endpoints import (MODEL, assert_openai_error, assert_serving, clip, listen,
                                  openai_client, transcribe, wav_bytes)
from test_batched_http import batch_sizes, srv  # noqa: F401 (srv: a daemon for 16 MB bodies)
from test_transcribe import AUDIO, MODELS, ROOT, tokens_of, write_jfk_x4
from test_transcribe import transcribe as cli_transcribe

REF = os.path.join(ROOT, "tests", "reference", "transcripts", "faster_whisper_words.json")
TOL = 0.02 + 1e-9  # seconds: one encoder frame


@pytest.fixture(scope="module")
def reference():
    with open(REF) as f:
        return json.load(f)


def words_of(t):
    return [w for s in t["segments"] for w in s.get("words", [])]


def check_words(ours, ref, who):
    """Same words; start and end within 20 ms for at least 95 % of them
    (the issue's bar; all of them on this machine); probabilities within
    1e-3 (float32 means of float32 softmaxes, here and there)."""
    a, b = words_of(ours), words_of(ref)
    assert [w["word"] for w in a] == [w["word"] for w in b], who
    close = sum(abs(x["start"] - y["start"]) <= TOL and abs(x["end"] - y["end"]) <= TOL
                for x, y in zip(a, b))
    assert close >= 0.95 * len(b), (who, close, len(b))
    for x, y in zip(a, b):
        assert abs(x["probability"] - y["probability"]) <= 1e-3, (who, x, y)
        assert x["start"] <= x["end"], (who, x)


def test_cli_words_match_faster_whisper(reference, tmp_path):
    """Every clip has faster-whisper's greedy tokens, words and times; so
    has jfk.wav four times over, where with word timestamps the second
    window resumes at the first's last word (2998 frames) instead of its
    last timestamp."""
    ref = reference["clips"]
    x4 = str(tmp_path / "jfk_x4.wav")
    write_jfk_x4(x4)
    ours = cli_transcribe([os.path.join(AUDIO, c) for c in sorted(ref)] + [x4],
                          "--word-timestamps")
    for c in ref:
        assert tokens_of(ours[c]) == tokens_of(ref[c]), c
        check_words(ours[c], ref[c], c)
        for a, b in zip(ours[c]["segments"], ref[c]["segments"]):
            # segment bounds move to their words' as faster-whisper moves them
            assert abs(a["start"] - b["start"]) <= TOL and abs(a["end"] - b["end"]) <= TOL, c
    assert tokens_of(ours["jfk_x4.wav"]) == tokens_of(reference["jfk_x4"])
    check_words(ours["jfk_x4.wav"], reference["jfk_x4"], "jfk_x4")


def test_words_off_by_default(tmp_path):
    t = cli_transcribe([os.path.join(AUDIO, "jfk.wav")])["jfk.wav"]
    assert all("words" not in s for s in t["segments"])




def test_openai_client_words(srv, reference):
    """The official client: word and segment granularities together."""
    client = openai_client(srv.port)
    with open(os.path.join(AUDIO, "jfk.wav"), "rb") as f:
        v = client.audio.transcriptions.create(model=MODEL, file=f, temperature=0,
                                               response_format="verbose_json",
                                               timestamp_granularities=["word", "segment"])
    ref = words_of(reference["clips"]["jfk.wav"])
    assert [w.word for w in v.words] == [w["word"].strip() for w in ref]
    for a, b in zip(v.words, ref):
        assert abs(a.start - b["start"]) <= TOL and abs(a.end - b["end"]) <= TOL, (a, b)
    assert v.segments and v.segments[0].start == 0.0
    assert v.words[-1].end == pytest.approx(v.segments[-1].end, abs=1e-6)


def test_openai_word_only_has_no_segments(srv):
    r = transcribe(srv.port, response_format="verbose_json", temperature="0",
                   **{"timestamp_granularities[]": "word"})
    assert r.status == 200, r.body
    body = r.json()
    assert "segments" not in body and body["words"][0]["word"] == "And"
    assert set(body["words"][0]) == {"word", "start", "end", "probability"}
    # the bare field name (a client that drops the brackets) is read too
    r = transcribe(srv.port, response_format="verbose_json", temperature="0",
                   timestamp_granularities="word")
    assert r.status == 200 and r.json()["words"] == body["words"], r.body
    # segment alone (or nothing): segments, no words
    r = transcribe(srv.port, response_format="verbose_json", timestamp_granularities="segment")
    assert r.status == 200 and "words" not in r.json() and r.json()["segments"], r.body


@pytest.mark.parametrize("fields,needle", [
    ({"timestamp_granularities[]": "word"}, "verbose_json"),
    ({"timestamp_granularities[]": "segment", "response_format": "srt"}, "verbose_json"),
    ({"timestamp_granularities[]": "char", "response_format": "verbose_json"}, "'word'"),
])
def test_openai_granularity_errors_400(srv, fields, needle):
    assert_openai_error(transcribe(srv.port, **fields), 400, needle)
    assert_serving(srv.port)


def test_deepgram_words_are_timed(srv, reference):
    """Deepgram's words: the word times and probabilities (as confidence),
    not the segment's span split evenly."""
    r = listen(srv.port, clip("jfk.wav"), "punctuate=true")
    assert r.status == 200, r.body
    alt = r.json()["results"]["channels"][0]["alternatives"][0]
    ref = words_of(reference["clips"]["jfk.wav"])
    assert [w["punctuated_word"] for w in alt["words"]] == [w["word"].strip() for w in ref]
    for a, b in zip(alt["words"], ref):
        assert abs(a["start"] - b["start"]) <= TOL and abs(a["end"] - b["end"]) <= TOL, (a, b)
        assert a["confidence"] == pytest.approx(b["probability"], abs=0.01)
    # words of unequal length: not an even split of the segment
    spans = {round(w["end"] - w["start"], 2) for w in alt["words"]}
    assert len(spans) > 3, spans


def test_batched_requests_have_the_same_words(srv):
    """Four clips at once on one replica (their passes batched together)
    give each the words it gets alone."""
    names = ["jfk.wav", "LJ001-0001.wav", "sense_and_sensibility_01_austen_64kb-0870.wav",
             "sense_and_sensibility_01_austen_64kb-0930.wav"]
    data = {n: clip(n) for n in names}

    def words(name):
        r = transcribe(srv.port, data[name], filename=name, response_format="verbose_json",
                       temperature="0", **{"timestamp_granularities[]": "word"})
        assert r.status == 200, r.body
        return r.json()["words"]

    alone = {n: words(n) for n in names}
    before = batch_sizes(srv.port)
    together, threads = {}, []
    for n in names:
        threads.append(threading.Thread(target=lambda n=n: together.__setitem__(n, words(n))))
        threads[-1].start()
    for t in threads:
        t.join()
    after = batch_sizes(srv.port)
    grew = {b: c - before.get(b, 0) for b, c in after.items() if c > before.get(b, 0)}
    assert any(b >= 2 for b in grew), (before, after)
    assert together == alone


@pytest.mark.parametrize("frames", [b"\x10\x00", b"\x10\x00" * 16, b"\x10\x00" * 480,
                                    b"\x00\x00" * 16000])
def test_words_of_next_to_nothing(srv, frames):
    """One sample, 1 ms, 30 ms (three mel frames: one encoder position) and a second
    of silence: a transcript (maybe with no words), not an error."""
    r = transcribe(srv.port, wav_bytes(frames), filename="short.wav", temperature="0",
                   response_format="verbose_json", **{"timestamp_granularities[]": "word"})
    assert r.status == 200, r.body
    body = r.json()
    assert body["words"] == [] or all(w["start"] <= w["end"] for w in body["words"])
    assert_serving(srv.port)


def test_words_in_other_languages(reference):
    """Whisper base on the espeak-ng clips (German, French, ...): the
    language faster-whisper detects, its tokens and its words."""
    ref = reference["languages"]
    langs = os.path.join(ROOT, "tests", "data", "languages")
    ours = cli_transcribe([os.path.join(langs, c) for c in sorted(ref)], "--word-timestamps",
                          "--model", os.path.join(MODELS, "whisper-base"))
    for c in ref:
        assert tokens_of(ours[c]) == tokens_of(ref[c]), c
        check_words(ours[c], ref[c], c)
