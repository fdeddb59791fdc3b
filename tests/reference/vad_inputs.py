"""The made inputs of the VAD checks (standard library only), shared by
make_vad_transcripts.py (faster-whisper's outputs on them) and
tests/integration/test_vad_filter.py (inferd's): digital silence of 20, 30
and 60 s, 30 s of Gaussian white noise (random.Random(7), sigma 0.05),
jfk.wav with 10 s of silence before it, and jfk.wav + 10 s of silence +
sense_and_sensibility-0870.wav, as 16-bit mono 16 kHz frames."""
import array
import os
import random
import wave

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AUDIO = os.path.join(ROOT, "tests", "data", "audio")
RATE = 16000
SECOND_CLIP = "sense_and_sensibility_01_austen_64kb-0870.wav"


def pcm(name):
    """The 16-bit mono 16 kHz frames of a test clip."""
    with wave.open(os.path.join(AUDIO, name)) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (RATE, 1, 2), name
        return w.readframes(w.getnframes())


def silence(seconds):
    return b"\0\0" * int(seconds * RATE)


def noise(seconds, seed=7, sigma=0.05):
    rnd = random.Random(seed)
    v = [max(-32768, min(32767, round(rnd.gauss(0.0, sigma) * 32768)))
         for _ in range(int(seconds * RATE))]
    return array.array("h", v).tobytes()


def made_inputs():
    """{name: 16-bit frames} of the made inputs."""
    jfk = pcm("jfk.wav")
    return {
        "silence-20s": silence(20), "silence-30s": silence(30), "silence-60s": silence(60),
        "noise-30s": noise(30),
        "jfk-after-10s-silence": silence(10) + jfk,
        "speech-silence-speech": jfk + silence(10) + pcm(SECOND_CLIP),
    }
