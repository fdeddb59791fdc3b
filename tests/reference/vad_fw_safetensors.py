#!/usr/bin/env python3
"""Convert faster-whisper 1.2.1's own Silero VAD (assets/silero_vad_v6.onnx)
to the safetensors layout eng_vad_load reads (the silero-vad wheel's
tinygrad_model.py names), for checking engine/vad against the model
faster-whisper really runs. Not used by the build or the committed tests.

The ONNX model runs the LSTM as an ONNX LSTM node: W, R [1, 512, 128] and
B [1, 1024] (input bias then recurrent bias) with gates ordered i, o, f, c;
LSTMCell's order is i, f, g(=c), o, so rows are regrouped.

Run with ~/.cache/inferd/bench-venv/bin/python:
    python tests/reference/vad_fw_safetensors.py DIR/silero-vad/silero_vad_16k.safetensors
    python tests/reference/make_vad_reference.py WHEEL --faster-whisper-model \\
        ROOT/tests/reference/vad/reference.json
    (ROOT/tests/data/audio -> the repository's tests/data/audio)
    INFERD_SOURCE_ROOT=ROOT INFERD_MODELS=DIR build/tests/unit/engine/vad/test_vad
"""
import json
import os
import struct
import sys

import numpy as np
import onnx
from onnx import numpy_helper

import faster_whisper.vad as fwvad
from faster_whisper.utils import get_assets_path

H = 128


def gates(w):
    """ONNX LSTM rows (i, o, f, c) -> LSTMCell rows (i, f, g, o)."""
    return np.concatenate([w[0:H], w[2 * H:3 * H], w[3 * H:4 * H], w[H:2 * H]])


def main():
    assert fwvad.get_vad_model  # the module whose model this is
    m = onnx.load(os.path.join(get_assets_path(), "silero_vad_v6.onnx"))
    ini = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    w = {"stft_conv.weight": ini["encoder.feature_extractor.forward_basis_buffer"]}
    for k in range(4):
        w[f"conv{k + 1}.weight"] = ini[f"encoder.conv_layers.{k}.weight"]
        w[f"conv{k + 1}.bias"] = ini[f"encoder.conv_layers.{k}.bias"]
    lstm = [n for n in m.graph.node if n.op_type == "LSTM"][0]
    wi, ri, bi = (ini[lstm.input[j]] for j in (1, 2, 3))
    w["lstm_cell.weight_ih"] = gates(wi[0])
    w["lstm_cell.weight_hh"] = gates(ri[0])
    w["lstm_cell.bias_ih"] = gates(bi[0][:4 * H])
    w["lstm_cell.bias_hh"] = gates(bi[0][4 * H:])
    w["final_conv.weight"] = ini["decoder.conv1d.weight"]
    w["final_conv.bias"] = ini["decoder.conv1d.bias"]
    head, blobs, off = {}, [], 0
    for k, v in w.items():
        v = np.ascontiguousarray(v, dtype="<f4")
        head[k] = {"dtype": "F32", "shape": list(v.shape),
                   "data_offsets": [off, off + v.nbytes]}
        off += v.nbytes
        blobs.append(v.tobytes())
    h = json.dumps(head).encode()
    h += b" " * (-len(h) % 8)
    os.makedirs(os.path.dirname(os.path.abspath(sys.argv[1])), exist_ok=True)
    with open(sys.argv[1], "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


if __name__ == "__main__":
    main()
