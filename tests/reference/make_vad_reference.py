#!/usr/bin/env python3
"""Reference Silero VAD outputs for tests/unit/engine/vad/test_vad.c.

Run with ~/.cache/inferd/bench-venv/bin/python (faster-whisper 1.2.1,
onnxruntime, onnx) from the repository root, after scripts/fetch-models:
    python tests/reference/make_vad_reference.py /path/to/silero_vad-6.2.3.whl

The silero-vad 6.2.3 wheel carries the network twice with DIFFERENT
weights: silero_vad_16k.safetensors (what inferd loads) and the ONNX/JIT
files (the "v6" weights, which faster-whisper's own assets/silero_vad_v6.onnx
also holds). The architecture is the same (tinygrad_model.py in the wheel,
and the ONNX graph of silero_vad_16k_op15.onnx), so the reference runs the
wheel's silero_vad_16k_op15.onnx graph with onnxruntime after replacing its
initializers by the safetensors tensors: an independent implementation of
the same weights inferd runs. The wheel's own ONNX weights and faster-
whisper's model are run too, and their distance is recorded (info only).

Input preparation follows faster_whisper.vad.SileroVADModel.__call__
exactly: pad to a multiple of 512 with zeros (a whole extra window when the
length is already a multiple), zero the last window's final 64 samples (the
view assignment `context[-1] = 0` writes through), and prepend to each
window the previous window's last 64 samples (zeros for the first). Windows
run one at a time with the LSTM state carried.

Speech timestamps come from faster_whisper.vad.get_speech_timestamps with
its model swapped for the probabilities above (default VadOptions, and a
second option set that exercises max_speech_duration_s splitting), and
for the second set's spans collect_chunks (max_duration 5 s) and
SpeechTimestampsMap.get_original_time at a few times.

Synthetic: probability sequences (runs of speech and silence, jittered,
rounded to 1e-6) with their get_speech_timestamps under SYN_OPTIONS, to
exercise the splitting and padding branches that real clips rarely reach.

Clips: 16 kHz 16-bit mono WAVs from tests/data/audio (samples int16/32768,
as libsndfile reads them), 20 s of digital silence and NOISE(n): 5 s of
x[i] = ((s >> 33) % 19661 - 9830) / 32768 (int16-valued), with
s = s * 6364136223846793005 + 1442695040888963407 (mod 2^64), s0 = 1,
advanced before each sample; test_vad.c builds the same two signals.
Writes tests/reference/vad/reference.json.

    python tests/reference/make_vad_reference.py WHEEL --faster-whisper-model OUT
instead takes the probabilities from faster-whisper's own model and writes
OUT (not committed): with that model's weights converted to safetensors
(tests/reference/vad_fw_safetensors.py) test_vad can be run against it.
"""
import json
import struct
import sys
import wave
import zipfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

import faster_whisper
import faster_whisper.vad as fwvad

WIN, CTX, SR = 512, 64, 16000
CLIPS = ["jfk.wav", "sense_and_sensibility_01_austen_64kb-0870.wav",
         "sense_and_sensibility_01_austen_64kb-0930.wav"]
PROB_CLIPS = {"jfk.wav", "sense_and_sensibility_01_austen_64kb-0930.wav",
              "silence20", "noise"}
# safetensors name -> op15 ONNX initializer name
NAMES = {
    "stft_conv.weight": "model.stft.forward_basis_buffer",
    "conv1.weight": "model.encoder.0.reparam_conv.weight",
    "conv1.bias": "model.encoder.0.reparam_conv.bias",
    "conv2.weight": "model.encoder.1.reparam_conv.weight",
    "conv2.bias": "model.encoder.1.reparam_conv.bias",
    "conv3.weight": "model.encoder.2.reparam_conv.weight",
    "conv3.bias": "model.encoder.2.reparam_conv.bias",
    "conv4.weight": "model.encoder.3.reparam_conv.weight",
    "conv4.bias": "model.encoder.3.reparam_conv.bias",
    "lstm_cell.weight_ih": "model.decoder.rnn.weight_ih",
    "lstm_cell.weight_hh": "model.decoder.rnn.weight_hh",
    "lstm_cell.bias_ih": "model.decoder.rnn.bias_ih",
    "lstm_cell.bias_hh": "model.decoder.rnn.bias_hh",
    "final_conv.weight": "model.decoder.decoder.2.weight",
    "final_conv.bias": "model.decoder.decoder.2.bias",
}


def read_safetensors(blob):
    n = struct.unpack("<Q", blob[:8])[0]
    head = json.loads(blob[8:8 + n])
    out = {}
    for k, v in head.items():
        if k == "__metadata__":
            continue
        s, e = v["data_offsets"]
        out[k] = np.frombuffer(blob[8 + n + s:8 + n + e], "<f4").reshape(v["shape"])
    return out


def sessions(whl):
    z = zipfile.ZipFile(whl)
    st = read_safetensors(z.read("silero_vad/data/silero_vad_16k.safetensors"))
    m = onnx.load_from_string(z.read("silero_vad/data/silero_vad_16k_op15.onnx"))
    own = ort.InferenceSession(m.SerializeToString())
    for init in m.graph.initializer:
        for k, v in NAMES.items():
            if v == init.name:
                init.CopyFrom(numpy_helper.from_array(st[k].astype(np.float32), v))
    return ort.InferenceSession(m.SerializeToString()), own


def fw_windows(audio):
    """The (n_windows, 576) inputs faster-whisper builds (see docstring)."""
    padded = np.pad(audio, (0, WIN - audio.shape[0] % WIN))
    batched = padded.reshape(-1, WIN)
    context = batched[..., -CTX:]
    context[-1] = 0
    context = np.roll(context, 1, 0)
    return np.concatenate([context, batched], 1)


def run_probs(sess, audio):
    state = np.zeros((2, 1, 128), np.float32)
    sr = np.array(SR, np.int64)
    out = []
    for x in fw_windows(audio.copy()):
        p, state = sess.run(None, {"input": x[None].astype(np.float32),
                                   "state": state, "sr": sr})
        out.append(p[0, 0])
    return np.array(out, np.float32)


def fw_own_probs(audio):
    padded = np.pad(audio, (0, WIN - audio.shape[0] % WIN))
    return np.asarray(fwvad.get_vad_model()(padded)).reshape(-1)


def timestamps(audio, probs, **opts):
    class Fixed:
        def __call__(self, padded):
            assert padded.shape[0] // WIN == probs.shape[0]
            return probs
    saved = fwvad.get_vad_model
    fwvad.get_vad_model = lambda: Fixed()
    try:
        sp = fwvad.get_speech_timestamps(audio, fwvad.VadOptions(**opts))
    finally:
        fwvad.get_vad_model = saved
    return [[int(s["start"]), int(s["end"])] for s in sp]


def read_wav(path):
    with wave.open(path) as w:
        assert w.getframerate() == SR and w.getnchannels() == 1
        assert w.getsampwidth() == 2
        raw = w.readframes(w.getnframes())
    return np.frombuffer(raw, "<i2").astype(np.float32) / 32768.0


def noise(n):
    s, out = 1, np.empty(n, np.float32)
    for i in range(n):
        s = (s * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        out[i] = ((s >> 33) % 19661 - 9830) / 32768.0
    return out


MAP_TIMES = [0.0, 0.5, 1.234, 2.0, 2.6, 3.5, 4.005, 10.0]
COLLECT_MAX_S = 5.0


def chunks_and_map(audio, spans):
    """collect_chunks(max_duration=COLLECT_MAX_S) and SpeechTimestampsMap
    [time, get_original_time(time), the same with is_end=True] for the
    times MAP_TIMES and each span's end in the concatenated audio."""
    sp = [{"start": a, "end": b} for a, b in spans]
    audios, meta = fwvad.collect_chunks(audio, sp, max_duration=COLLECT_MAX_S)
    coll = [{"offset": m["offset"], "duration": m["duration"],
             "segments": [[g["start"], g["end"]] for g in m["segments"]],
             "n_audio": int(a.shape[0])} for a, m in zip(audios, meta)]
    mp = fwvad.SpeechTimestampsMap(sp, SR)
    ts = MAP_TIMES + [e / SR for e in mp.chunk_end_sample]
    times = [[t, mp.get_original_time(t), mp.get_original_time(t, is_end=True)]
             for t in ts]
    return coll, times


SPLIT = {"max_speech_duration_s": 3.0, "min_silence_duration_ms": 100,
         "min_speech_duration_ms": 250, "speech_pad_ms": 30}


SYN_OPTIONS = [
    {},
    {"max_speech_duration_s": 1.0, "min_silence_duration_ms": 100},
    {"max_speech_duration_s": 2.5, "min_silence_duration_ms": 500,
     "min_speech_duration_ms": 250, "speech_pad_ms": 30},
    {"max_speech_duration_s": 1.5, "min_silence_duration_ms": 0,
     "speech_pad_ms": 0, "threshold": 0.3, "neg_threshold": 0.2},
    {"min_silence_duration_ms": 300, "speech_pad_ms": 200,
     "min_speech_duration_ms": 500},
]


def synthetic(rng, n_windows):
    """Probabilities in runs of speech and silence with jitter around the
    thresholds, rounded to 1e-6 (so both sides read the same float32), and
    an input length with that many windows."""
    p, speech = [], rng.random() < 0.5
    while len(p) < n_windows:
        run = int(rng.integers(1, 60))
        centre = 0.8 if speech else 0.15
        p += list(np.clip(centre + rng.normal(0, 0.25, run), 0, 1))
        speech = not speech
    probs = np.array([round(float(x), 6) for x in p[:n_windows]], np.float32)
    n = (n_windows - 1) * WIN + int(rng.integers(0, WIN))
    return probs, n


def synthetic_cases():
    rng = np.random.default_rng(7)
    out = []
    for nw in (200, 300, 400):
        probs, n = synthetic(rng, nw)
        audio = np.zeros(n, np.float32)
        cases = [{"options": o, "speech": timestamps(audio, probs, **o)}
                 for o in SYN_OPTIONS]
        out.append({"n_samples": n, "probs": [float(x) for x in probs],
                    "cases": cases})
    return out


def main():
    sess, own = sessions(sys.argv[1])
    inputs = [(c, read_wav("tests/data/audio/" + c)) for c in CLIPS]
    inputs += [("silence20", np.zeros(20 * SR, np.float32)),
               ("noise", noise(5 * SR))]
    ref = {"source": "silero-vad 6.2.3 wheel: silero_vad_16k.safetensors weights "
                     "in its silero_vad_16k_op15.onnx graph, onnxruntime "
                     + ort.__version__ + "; faster-whisper "
                     + faster_whisper.__version__ + " get_speech_timestamps",
           "split_options": SPLIT, "collect_max_s": COLLECT_MAX_S,
           "clips": []}
    fw_mode = len(sys.argv) > 2 and sys.argv[2] == "--faster-whisper-model"
    for name, audio in inputs:
        p = fw_own_probs(audio) if fw_mode else run_probs(sess, audio)
        d_own = float(np.abs(run_probs(own, audio) - p).max())
        d_fw = float(np.abs(fw_own_probs(audio) - p).max())
        ts_fw = timestamps(audio, fw_own_probs(audio))
        margin = float(min(np.abs(p - 0.5).min(), np.abs(p - 0.35).min()))
        clip = {"name": name, "n_samples": int(audio.shape[0]),
                "n_windows": int(p.shape[0]),
                "speech": timestamps(audio, p),
                "speech_split": timestamps(audio, p, **SPLIT),
                "info_speech_fw_v6_model": ts_fw,
                "info_max_diff_wheel_onnx_weights": round(d_own, 6),
                "info_max_diff_fw_v6_model": round(d_fw, 6),
                "info_min_margin_to_thresholds": round(margin, 6)}
        if clip["speech_split"]:
            clip["collect_split"], clip["map_split"] = chunks_and_map(
                audio, clip["speech_split"])
        if name in PROB_CLIPS:
            clip["probs"] = [round(float(x), 6) for x in p]
        ref["clips"].append(clip)
        print(name, clip["speech"], "fw-v6:", ts_fw, "diff", d_own, d_fw,
              "margin", margin, file=sys.stderr)
    ref["synthetic"] = synthetic_cases()
    if fw_mode:
        ref["source"] = ("faster-whisper " + faster_whisper.__version__ +
                         ": its assets/silero_vad_v6.onnx and get_speech_timestamps")
    out = sys.argv[3] if fw_mode else "tests/reference/vad/reference.json"
    with open(out, "w") as f:
        # one clip or sequence per line: small, and diffs stay readable
        f.write("{\n")
        keys = list(ref)
        for i, k in enumerate(keys):
            v = ref[k]
            end = ",\n" if i < len(keys) - 1 else "\n"
            if isinstance(v, list):
                rows = ",\n  ".join(json.dumps(x, separators=(",", ":")) for x in v)
                f.write(f" {json.dumps(k)}: [\n  {rows}\n ]{end}")
            else:
                f.write(f" {json.dumps(k)}: {json.dumps(v)}{end}")
        f.write("}\n")


if __name__ == "__main__":
    main()
