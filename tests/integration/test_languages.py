"""Multilingual Whisper (base): language detection, a forced language,
and translation into English, against faster-whisper 1.2.1 on the same
model (tests/reference/language/faster_whisper.json, made by
tests/reference/make_language_reference.py from the espeak-ng clips in
tests/data/languages), then over HTTP.

Agreement (`inferd transcribe --json --temperature 0`, the way
test_transcribe.py compares tiny.en): on every clip the detected language
equals faster-whisper's, its probability is within 1e-3, and the greedy
tokens of the transcription, of the translation and of a transcription in
a forced language are faster-whisper's, token for token.

HTTP: Deepgram's detect_language=true (detected_language,
language_confidence within 1e-3), OpenAI verbose_json's language and
tokens, POST /v1/audio/translations through the official `openai` client,
a forced language on both protocols, on the clips whose temperature-0
result faster-whisper's fallback keeps (the reference's "t0_kept"): over
HTTP a temperature of 0 falls back to sampling when the result fails the
thresholds, and sampling is not comparable. Then the errors: an unknown
language code is a 400 in each protocol's shape, translation on the
English-only tiny.en a 400 that says so, and tiny.en's own answers
(English, probability 1) are what they were.

The daemon serves whisper-tiny.en and whisper-base (scripts/fetch-models
fetches both). About 25 greedy windows of 3-4 s clips on the base model,
none sampled: measured 64 s of CPU time in the release build (100 s of wall
time on a busy 2-core machine) and 4.4 minutes of CPU time in the
AddressSanitizer build (7.3 minutes of wall time there)."""
import csv
import json
import os
import subprocess

import pytest

from conftest import BIN, MODELS, ROOT, Daemon
from test_audio_endpoints import (API_KEY, assert_deepgram_error, assert_openai_error,
                                  audio_config, check_clean_exit, listen, openai_client,
                                  post, multipart, words)

CLIPS = os.path.join(ROOT, "tests", "data", "languages")
REF = os.path.join(ROOT, "tests", "reference", "language", "faster_whisper.json")
BASE = "whisper-base"
TINY = "whisper-tiny.en"
NAMES = {"en": "english", "de": "german", "fr": "french", "es": "spanish", "it": "italian"}
PROB_TOL = 1e-3
# openai 3.x flags client.audio.translations as deprecated; it still works
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def reference():
    with open(REF) as f:
        return json.load(f)


def clip_names():
    with open(os.path.join(CLIPS, "manifest.tsv")) as f:
        return [r["file"] for r in csv.DictReader(f, delimiter="\t")]


def clip(name):
    with open(os.path.join(CLIPS, name), "rb") as f:
        return f.read()


def tokens(segments):
    """Every segment's tokens, in order (timestamps included)."""
    out = []
    for s in segments:
        out += s["tokens"] if isinstance(s, dict) else s.tokens
    return out


@pytest.fixture(scope="module")
def base_path():
    path = os.path.join(MODELS, BASE)
    assert os.path.isfile(os.path.join(path, "model.bin")), \
        f"{path} is missing: run scripts/fetch-models"
    return path


@pytest.fixture(scope="module")
def srv(base_path):
    path = base_path
    cfg = audio_config(api_keys=[API_KEY])
    cfg["models"] = [{"name": TINY, "path": os.path.join(MODELS, TINY), "format": "ct2"},
                     {"name": BASE, "path": path, "format": "ct2"}]
    d = Daemon(cfg)
    yield d
    check_clean_exit(d)


def oa(srv):
    return openai_client(srv.port, API_KEY)


def audio_post(port, route, name, model=BASE, **fields):
    """POST /v1/audio/{route} (transcriptions, translations), raw."""
    f = [("model", model)] + [(k, str(v)) for k, v in fields.items()]
    ctype, body = multipart(f, [("file", name, clip(name), "audio/wav")])
    return post(port, f"/v1/audio/{route}", body,
                {"Content-Type": ctype, "Authorization": f"Bearer {API_KEY}"})


def dg(port, data, query):
    return listen(port, data, query, headers={"Authorization": f"Token {API_KEY}"})


# --- agreement with faster-whisper (CLI, temperature 0 only) ----------


def cli(paths, *args):
    """`inferd transcribe --json --temperature 0` on the base model:
    {file name: its JSON}."""
    r = subprocess.run([BIN, "transcribe", "--model", os.path.join(MODELS, BASE), "--json",
                        "--temperature", "0", "--threads", "2", *args,
                        *[os.path.join(CLIPS, p) for p in paths]],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    assert "Sanitizer" not in r.stderr, r.stderr
    out = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(out) == len(paths)
    return {os.path.basename(o["file"]): o for o in out}


def test_cli_detection_and_transcription(base_path):
    ref = reference()["clips"]
    got = cli(clip_names())
    for name, r in ref.items():
        g = got[name]
        assert g["language"] == r["language"], (name, g["language"], r["top"])
        assert abs(g["language_probability"] - r["language_probability"]) <= PROB_TOL, \
            (name, g["language_probability"], r["language_probability"])
        assert tokens(g["segments"]) == tokens(r["transcribe"]["segments"]), name


def test_cli_translation(base_path):
    ref = reference()["clips"]
    got = cli(clip_names(), "--task", "translate")
    for name, r in ref.items():
        assert got[name]["language"] == r["language"], name
        assert tokens(got[name]["segments"]) == tokens(r["translate"]["segments"]), name


def test_cli_forced_language(base_path):
    for name, r in reference()["forced"].items():
        g = cli([name], "--language", r["language"])[name]
        assert g["language"] == r["language"] and g["language_probability"] == 1.0
        assert tokens(g["segments"]) == tokens(r["segments"]), (name, r["language"])


# --- HTTP ---------------------------------------------------------------


def kept(mode, names=None):
    """The clips (of names, default all) whose temperature-0 result (mode:
    transcribe, translate) faster-whisper's fallback keeps."""
    return [n for n, r in reference()["clips"].items()
            if r[mode]["t0_kept"] and (names is None or n in names)]


# The CLI above compares every clip; over HTTP (the same engine path) a few
# suffice, which keeps the AddressSanitizer build's run short.
@pytest.mark.parametrize("name", kept("transcribe", ("de.wav", "it.wav")))
def test_detected_language_and_probability(srv, name):
    ref = reference()["clips"][name]
    r = dg(srv.port, clip(name), f"model={BASE}&detect_language=true&punctuate=true")
    assert r.status == 200, r.body
    ch = r.json()["results"]["channels"][0]
    assert ch["detected_language"] == ref["language"], (ch["detected_language"], ref["top"])
    assert abs(ch["language_confidence"] - ref["language_probability"]) <= PROB_TOL, \
        (ch["language_confidence"], ref["language_probability"])
    assert words(ch["alternatives"][0]["transcript"]) == words(ref["transcribe"]["text"])


@pytest.mark.parametrize("name", kept("transcribe", ("es.wav", "it.wav")))
def test_transcription_tokens(srv, name):
    ref = reference()["clips"][name]
    r = audio_post(srv.port, "transcriptions", name, response_format="verbose_json",
                   temperature=0)
    assert r.status == 200, r.body
    body = r.json()
    assert body["task"] == "transcribe"
    assert body["language"] == NAMES[ref["language"]]
    assert tokens(body["segments"]) == tokens(ref["transcribe"]["segments"])
    assert body["text"] == ref["transcribe"]["text"]


@pytest.mark.parametrize("name", kept("translate", ("de.wav", "es.wav")))
def test_translation_tokens_openai_client(srv, name):
    ref = reference()["clips"][name]["translate"]
    with open(os.path.join(CLIPS, name), "rb") as f:
        v = oa(srv).audio.translations.create(model=BASE, file=f, temperature=0,
                                              response_format="verbose_json")
    assert v.task == "translate"
    assert v.language == "english"  # OpenAI: the output's language, always english
    assert tokens(v.segments) == tokens(ref["segments"])
    assert v.text == ref["text"]


def test_translation_text_with_language_given(srv):
    """response_format=text; the spoken language given (an inferd extension
    on this route): no detection, the same translation."""
    ref = reference()["clips"]["de.wav"]["translate"]
    r = audio_post(srv.port, "translations", "de.wav", language="de", response_format="text",
                   temperature=0)
    assert r.status == 200 and r.body.decode() == ref["text"] + "\n", r.body


def test_forced_language(srv):
    forced = reference()["forced"]
    assert forced["de.wav"]["t0_kept"] and forced["it.wav"]["t0_kept"]
    r = audio_post(srv.port, "transcriptions", "de.wav", language="en",
                   response_format="verbose_json", temperature=0)
    assert r.status == 200, r.body
    body = r.json()
    assert body["language"] == "english"
    assert tokens(body["segments"]) == tokens(forced["de.wav"]["segments"])
    # Deepgram: a BCP-47 tag's primary subtag, and no detected_language unasked
    r = dg(srv.port, clip("it.wav"), f"model={BASE}&language=es-419&punctuate=true")
    assert r.status == 200, r.body
    ch = r.json()["results"]["channels"][0]
    assert "detected_language" not in ch
    assert words(ch["alternatives"][0]["transcript"]) == words(forced["it.wav"]["text"])


def test_deepgram_default_language_is_english(srv):
    """Deepgram's language defaults to en: no detection unless asked."""
    ref = reference()["forced"]["de.wav"]  # de.wav with language=en
    r = dg(srv.port, clip("de.wav"), f"model={BASE}&punctuate=true")
    assert r.status == 200, r.body
    ch = r.json()["results"]["channels"][0]
    assert "detected_language" not in ch
    assert words(ch["alternatives"][0]["transcript"]) == words(ref["text"])


def test_deepgram_client_detect_language(srv):
    from deepgram import DeepgramClient
    from deepgram.environment import DeepgramClientEnvironment
    ref = reference()["clips"]["es.wav"]
    base = f"127.0.0.1:{srv.port}"
    env = DeepgramClientEnvironment(base=f"http://{base}", production=f"ws://{base}",
                                    agent=f"ws://{base}", agent_rest=f"http://{base}")
    client = DeepgramClient(api_key=API_KEY, environment=env, max_retries=0, timeout=300)
    resp = client.listen.v1.media.transcribe_file(request=clip("es.wav"), model=BASE,
                                                  detect_language=True, punctuate=True)
    ch = resp.results.channels[0]
    assert ch.detected_language == "es"
    assert abs(ch.language_confidence - ref["language_probability"]) <= PROB_TOL
    # the words with their own times: faster-whisper's word timestamps
    # (tests/reference/transcripts/faster_whisper_words.json)
    with open(os.path.join(ROOT, "tests", "reference", "transcripts",
                           "faster_whisper_words.json")) as f:
        fw = json.load(f)["languages"]["es.wav"]
    want = [w for seg in fw["segments"] for w in seg["words"]]
    got = ch.alternatives[0].words
    assert [w.punctuated_word for w in got] == [w["word"].strip() for w in want]
    for a, b in zip(got, want):
        assert abs(a.start - b["start"]) <= 0.02 + 1e-9 and abs(a.end - b["end"]) <= 0.02 + 1e-9
        assert abs(a.confidence - b["probability"]) <= 1e-3


# --- errors and the English-only model ---------------------------------


@pytest.mark.parametrize("code", ["zz", "english", "yue"])  # yue: large-v3's, not base's
def test_unknown_language_400(srv, code):
    for route in ("transcriptions", "translations"):
        r = audio_post(srv.port, route, "en.wav", language=code)
        assert_openai_error(r, 400, "language")
    r = dg(srv.port, clip("en.wav"), f"model={BASE}&language={code}")
    assert_deepgram_error(r, 400, "language")


def test_translate_on_english_only_model_400(srv):
    import openai
    with open(os.path.join(CLIPS, "de.wav"), "rb") as f:
        with pytest.raises(openai.BadRequestError, match="English-only") as e:
            oa(srv).audio.translations.create(model=TINY, file=f)
    assert e.value.status_code == 400
    assert_openai_error(audio_post(srv.port, "translations", "de.wav", model=TINY), 400,
                        "multilingual model")


def test_english_only_model_unchanged(srv):
    r = dg(srv.port, clip("en.wav"), f"model={TINY}&detect_language=true")
    assert r.status == 200, r.body
    ch = r.json()["results"]["channels"][0]
    assert ch["detected_language"] == "en" and ch["language_confidence"] == 1.0
    r = audio_post(srv.port, "transcriptions", "en.wav", model=TINY,
                   response_format="verbose_json")
    assert r.status == 200, r.body
    assert r.json()["language"] == "english" and r.json()["task"] == "transcribe"


@pytest.mark.parametrize("name", kept("translate", ("de.wav",)))
def test_tritonclient_translation_with_words(srv, name):
    """KServe through the unmodified tritonclient: task=translate and
    word_timestamps as request parameters; the translation is faster-
    whisper's and the words spell out each segment's text."""
    th = pytest.importorskip("tritonclient.http")
    np = pytest.importorskip("numpy")
    ref = reference()["clips"][name]["translate"]
    c = th.InferenceServerClient(f"127.0.0.1:{srv.port}")
    inp = th.InferInput("AUDIO", [1], "BYTES")
    inp.set_data_from_numpy(np.array([clip(name)], dtype=np.object_), binary_data=True)
    r = c.infer(BASE, [inp], parameters={"task": "translate", "word_timestamps": True},
                headers={"Authorization": f"Bearer {API_KEY}"})
    text = r.as_numpy("TRANSCRIPT")[0]
    assert (text.decode() if isinstance(text, bytes) else text) == ref["text"]
    segs = r.as_numpy("SEGMENTS")[0]
    segs = json.loads(segs.decode() if isinstance(segs, bytes) else segs)
    for s in segs:
        assert s["words"] and "".join(w["word"] for w in s["words"]) == s["text"], s
        assert all(s["start"] <= w["start"] <= w["end"] for w in s["words"]), s
    c.close()
