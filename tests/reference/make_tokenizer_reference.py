#!/usr/bin/env python3
"""make_tokenizer_reference.py - llama.cpp tokenizer reference for Gemma 3 (SPM vocab).

Loads the GGUF with vocab_only=True through llama-cpp-python and writes
tests/reference/llm/tokenizer_gemma3.json:

  meta: versions, model file, n_vocab, bos/eos ids, the GGUF tokenizer flags
        llama.cpp reports (add_bos, add_eos, add_space_prefix as read from the file)
  cases[i]:
    name, text
    ids            - llm.tokenize(text.encode(), add_bos=False, special=False)
    detok          - llm.detokenize(ids) decoded as UTF-8 (errors="replace"; exact
                     bytes in detok_hex)
    detok_hex      - hex of the detokenized bytes
    pieces_hex     - hex of each token's piece (llama_token_to_piece, special=False)
    ids_special    - only for texts containing control-token text such as
                     <start_of_turn>, <end_of_turn>, <bos>: tokenize(..., special=True)
    detok_special  - detokenize(ids_special, special=True) (control tokens rendered)
  special_tokens: {text: id} for the control tokens used above

Usage:
  /root/.cache/inferd/ref-venv/bin/python tests/reference/make_tokenizer_reference.py \
      [MODEL.gguf] [--out OUT.json]
"""
import argparse
import ctypes
import json
import os
import sys

# ggml's CPU backend uses OpenMP; with busy-waiting threads a loaded machine slows
# decoding down ~50x. Passive waiting changes scheduling only, not results (every
# output element is computed by exactly one thread). Must be set before libgomp loads.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

import llama_cpp
from llama_cpp import Llama

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CASES = [
    ("empty", ""),
    ("one_space", " "),
    ("two_spaces", "  "),
    ("hello", "Hello"),
    ("hello_world", "Hello world"),
    ("prose", "The quick brown fox jumps over the lazy dog."),
    ("prose_long", "It was the best of times, it was the worst of times, it was the age "
                   "of wisdom, it was the age of foolishness."),
    ("leading_space", " hello"),
    ("leading_spaces", "    hello"),
    ("trailing_space", "hello "),
    ("trailing_spaces", "hello    "),
    ("inner_spaces", "hello     world"),
    ("only_spaces", "        "),
    ("tab", "a\tb"),
    ("tabs", "\t\tindented\ttext\t"),
    ("newline", "line one\nline two"),
    ("newlines", "para one\n\n\npara two\n"),
    ("crlf", "windows\r\nline\r\n"),
    ("mixed_ws", " \t \n  \n\t x  \t"),
    ("accents_fr", "Café, crème brûlée et naïveté à Noël."),
    ("german", "Straße, Größe, Äpfel, Übermut, schön."),
    ("nordic", "Håkon spiste blåbær på Ærø; Ångström."),
    ("spanish", "¿Dónde está el niño? ¡Mañana!"),
    ("greek", "Καλημέρα κόσμε, η γλώσσα μου έδωσαν ελληνική."),
    ("cyrillic", "Привет, мир! Съешь же ещё этих мягких французских булок."),
    ("arabic", "مرحبا بالعالم، كيف حالك اليوم؟"),
    ("hebrew", "שלום עולם, מה שלומך?"),
    ("hindi", "नमस्ते दुनिया, आप कैसे हैं?"),
    ("thai", "สวัสดีชาวโลก"),
    ("chinese", "你好，世界！今天天气很好。"),
    ("japanese_kana", "こんにちは、カタカナとひらがな。"),
    ("japanese_mixed", "東京は日本の首都です。"),
    ("korean", "안녕하세요, 세계! 한국어 텍스트입니다."),
    ("emoji", "I love pizza 🍕 and cats 🐱!"),
    ("emoji_only", "😀😃😄😁😆"),
    ("emoji_zwj_family", "👨‍👩‍👧‍👦"),
    ("emoji_zwj_misc", "🏳️‍🌈 👩‍💻 🧑‍🚀"),
    ("emoji_skin_tones", "👍🏻👍🏼👍🏽👍🏾👍🏿"),
    ("emoji_flags", "🇩🇪🇫🇷🇯🇵"),
    ("python", "def add(a, b):\n    return a + b\n\nprint(add(2, 3))\n"),
    ("c_code", "#include <stdio.h>\nint main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n"),
    ("json", "{\"name\": \"inferd\", \"version\": [1, 2, 3], \"ok\": true, \"x\": null}"),
    ("numbers", "0 1 12 123 1234 12345 123456 1234567 3.14159 -42 1e-9 0x1F"),
    ("digits_long", "31415926535897932384626433832795028841971"),
    ("dates", "2024-01-31 23:59:59, 1/2/2025"),
    ("url", "https://example.com/path/to/page?query=1&lang=en#section"),
    ("email", "contact: first.last+tag@example.org"),
    ("repeat_a", "a" * 40),
    ("repeat_bang", "!!!!!!!!!!!!"),
    ("repeat_dash", "-" * 32),
    ("repeat_space_newline", " \n" * 6),
    ("rare_cjk", "𠀀𠀁𪚥𰻞"),
    ("cjk_ext_b", "𡨸𤭢"),
    ("private_use", "\ue000\uf8ff"),
    ("supplementary_private", "\U000f0000\U0010fffd\U0010ffff"),
    ("math_symbols", "∀x∈ℝ: x² ≥ 0 ⇒ √(x²) = |x|"),
    ("byte_controls", "a\x01b\x7fc\x1b[0m"),
    ("nbsp_zwsp", "non\u00a0breaking\u200bzero\u200dwidth"),
    ("combining", "e\u0301 a\u0308 n\u0303"),
    ("mixed_scripts", "English, Русский, 中文, العربية, हिन्दी, 🎉"),
    # texts with control-token text: tokenized with special=False AND special=True
    ("chat_turn", "<start_of_turn>user\nHello!<end_of_turn>\n<start_of_turn>model\n"),
    ("bos_text", "<bos>Hello"),
    ("eot_inline", "text<end_of_turn>more"),
]

SPECIAL_MARKERS = ("<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>")


def detok(llm, ids, special):
    """llama_detokenize with remove_special=False, unparse_special=special."""
    vocab = llm._model.vocab
    n = len(ids)
    arr = (llama_cpp.llama_token * max(n, 1))(*ids)
    cap = 64 + 32 * n
    buf = ctypes.create_string_buffer(cap)
    k = llama_cpp.llama_detokenize(vocab, arr, n, buf, cap, False, special)
    if k < 0:
        cap = -k
        buf = ctypes.create_string_buffer(cap)
        k = llama_cpp.llama_detokenize(vocab, arr, n, buf, cap, False, special)
    return buf.raw[:k]


def piece(llm, t):
    vocab = llm._model.vocab
    buf = ctypes.create_string_buffer(256)
    k = llama_cpp.llama_token_to_piece(vocab, t, buf, 256, 0, False)
    return buf.raw[:k]


def ggml_build():
    """(ggml_version, ggml_commit) of the libggml bundled with llama-cpp-python;
    the commit is llama.cpp's vendored checkout (git short hash)."""
    try:
        lib = ctypes.CDLL(os.path.join(os.path.dirname(llama_cpp.__file__), "lib",
                                       "libggml-base.so"))
        lib.ggml_version.restype = ctypes.c_char_p
        lib.ggml_commit.restype = ctypes.c_char_p
        return lib.ggml_version().decode(), lib.ggml_commit().decode()
    except (OSError, AttributeError):
        return "unknown", "unknown"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?",
                    default=os.path.join(ROOT, "models", "gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "reference", "llm",
                                                  "tokenizer_gemma3.json"))
    args = ap.parse_args()

    llm = Llama(model_path=args.model, vocab_only=True, verbose=False)
    vocab = llm._model.vocab
    cases = []
    for name, text in CASES:
        ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)
        d = detok(llm, ids, False)
        c = {
            "name": name,
            "text": text,
            "ids": ids,
            "detok": d.decode("utf-8", errors="replace"),
            "detok_hex": d.hex(),
            "pieces_hex": [piece(llm, t).hex() for t in ids],
        }
        # python's own wrapper must agree with the raw C call
        assert llm.detokenize(ids) == d, name
        if any(m in text for m in SPECIAL_MARKERS):
            ids_s = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
            c["ids_special"] = ids_s
            c["detok_special"] = detok(llm, ids_s, True).decode("utf-8", errors="replace")
        cases.append(c)

    special = {}
    for m in SPECIAL_MARKERS:
        ids = llm.tokenize(m.encode(), add_bos=False, special=True)
        special[m] = ids[0] if len(ids) == 1 else ids

    meta = {
        "generator": "tests/reference/make_tokenizer_reference.py",
        "reference": "llama.cpp via llama-cpp-python (vocab_only=True)",
        "llama_cpp_python_version": llama_cpp.__version__,
        "llama_cpp_commit": {"0.3.36": "0c1e57098bba43ac29e6e3b677cdceebdd22334f"}.get(
            llama_cpp.__version__, "unknown"),
        "ggml_version": ggml_build()[0],
        "ggml_commit": ggml_build()[1],
        "model_file": os.path.basename(args.model),
        "n_vocab": llm.n_vocab(),
        "vocab_type": int(llama_cpp.llama_vocab_type(vocab)),
        "bos_id": llm.token_bos(),
        "eos_id": llm.token_eos(),
        "add_bos": bool(llama_cpp.llama_vocab_get_add_bos(vocab)),
        "add_eos": bool(llama_cpp.llama_vocab_get_add_eos(vocab)),
        "tokenize_call": "tokenize(text.encode('utf-8'), add_bos=False, special=False|True)",
        "detokenize_call": "llama_detokenize(remove_special=False, unparse_special=False|True)",
    }
    out = {"meta": meta, "special_tokens": special, "cases": cases}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {args.out}: {len(cases)} cases, {os.path.getsize(args.out)} bytes",
          file=sys.stderr)


if __name__ == "__main__":
    main()
