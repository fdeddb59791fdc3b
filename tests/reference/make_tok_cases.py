#!/usr/bin/env python3
"""make_tok_cases.py - llama.cpp ids for the byte-level BPE ("gpt2") path of
engine/tok/eng_tok.c, written to tests/reference/llm/tokenizer_bpe_whisper.json.

For each tokenizer.ggml.pre in PRES it writes (python stdlib only) a
vocabulary-only GGUF made from models/whisper-tiny.en/tokenizer.json (GPT-2's
vocabulary and merges; added tokens as CONTROL, bos = eos = <|endoftext|>,
add_bos_token false) - the same GGUF tests/unit/engine/tok/test_tok.c builds in
memory - loads it into llama.cpp through llama-cpp-python (vocab_only) and
records, per text:
    ids          - llama_tokenize(text, add_special=False, parse_special=False)
    ids_special  - the same with parse_special=True
Optionally (--hf) it also prints how many agree with HF `tokenizers` running
the same split regex (Split, isolated) + ByteLevel + BPE(ignore_merges for
llama 3), as a cross-check; the JSON holds llama.cpp's ids only.

Usage:
  /root/.cache/inferd/ref-venv/bin/python tests/reference/make_tok_cases.py [--hf]
"""
import argparse
import json
import os
import struct
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PRES = ["qwen2", "llama-bpe", "gpt-2", "smollm",
        # names llama.cpp maps onto the same regexes, with their own flags
        "dbrx", "smaug-bpe", "olmo", "mpt", "refact", "codeshell", "command-r", "stablelm2"]

# llama.cpp src/llama-vocab.cpp, as adapted there (HF spells the contractions (?i:...))
REGEX = {
    "llama-bpe": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "qwen2": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "gpt-2": r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
}
# smollm (LLAMA_VOCAB_PRE_TYPE_SMOLLM): \p{N} alone first, then GPT-2's
# regex over every piece
SPLITS = {"smollm": [r"\p{N}", REGEX["gpt-2"]]}

TEXTS = [
    ("empty", ""), ("space", " "), ("spaces", "   "), ("hello", "Hello world"),
    ("prose", "The quick brown fox jumps over the lazy dog."),
    ("contractions", "I'm sure you're right, they've said it's what we'd do; we'll see."),
    ("contractions_upper", "I'M SURE YOU'RE RIGHT, THEY'VE SAID IT'S WHAT WE'D DO; WE'LL SEE."),
    ("apostrophes", "'tis the rock'n'roll 'sup ''s"),
    ("leading_spaces", "    indented"), ("trailing_spaces", "end    "),
    ("inner_spaces", "a     b"), ("tabs", "\tx\t\ty\t"),
    ("newlines", "one\ntwo\n\nthree\n\n\n"), ("crlf", "win\r\ndows\r\n\r\n"),
    ("mixed_ws", " \t \n  \n\t x  \t"), ("space_newline", " \n \n x"),
    ("punct_newline", "Hi!!\n\nOK?\n"), ("punct", "...!?;:,()[]{}<>@#$%^&*-_=+|\\/~`\""),
    ("space_punct", "a ... b !! c"),
    ("numbers", "0 1 12 123 1234 12345 123456 1234567 3.14159 -42 1e-9 0x1F"),
    ("digits_long", "31415926535897932384626433832795028841971"),
    ("digits_words", "abc123def4567ghi"), ("dates", "2024-01-31 23:59:59, 1/2/2025"),
    ("url", "https://example.com/path/to/page?query=1&lang=en#section"),
    ("email", "contact: first.last+tag@example.org"),
    ("french", "Café, crème brûlée et naïveté à Noël."),
    ("german", "Straße, Größe, Äpfel, Übermut, schön."),
    ("spanish", "¿Dónde está el niño? ¡Mañana!"),
    ("greek", "Καλημέρα κόσμε, η γλώσσα μου."),
    ("cyrillic", "Привет, мир! Съешь же ещё этих мягких французских булок."),
    ("arabic", "مرحبا بالعالم، كيف حالك اليوم؟"), ("hebrew", "שלום עולם, מה שלומך?"),
    ("hindi", "नमस्ते दुनिया, आप कैसे हैं?"), ("thai", "สวัสดีชาวโลก"),
    ("chinese", "你好，世界！今天天气很好。"), ("japanese", "東京は日本の首都です。カタカナ"),
    ("korean", "안녕하세요, 세계!"), ("emoji", "I love pizza 🍕 and cats 🐱!"),
    ("emoji_zwj", "👨‍👩‍👧‍👦 🏳️‍🌈"), ("flags", "🇩🇪🇫🇷"),
    ("math", "∀x∈ℝ: x² ≥ 0 ⇒ √(x²) = |x|"), ("roman_fractions", "Ⅻ ½ ¾ ²³"),
    ("python", "def add(a, b):\n    return a + b\n\nprint(add(2, 3))\n"),
    ("c_code", "#include <stdio.h>\nint main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n"),
    ("json", "{\"name\": \"inferd\", \"version\": [1, 2, 3], \"ok\": true}"),
    ("repeat_a", "a" * 40), ("repeat_bang", "!" * 12), ("repeat_dash", "-" * 32),
    ("nbsp", "non\u00a0breaking\u2003em\u3000ideographic"),
    ("zwsp", "zero\u200bwidth\u200djoin"), ("combining", "e\u0301 a\u0308 n\u0303"),
    ("controls", "a\x01b\x7fc\x1b[0m"), ("private_use", "\ue000\uf8ff"),
    ("special_text", "Hello<|endoftext|>World"),
    ("special_twice", "<|endoftext|><|endoftext|> x <|endoftext|>"),
    ("special_partial", "<|endoftext| <|endof"),
    ("whisper_specials", "<|startoftranscript|><|en|><|transcribe|><|notimestamps|> hi"),
    ("mixed", "English, Русский, 中文, العربية, हिन्दी, 🎉 123"),
    ("long_word", "Pneumonoultramicroscopicsilicovolcanoconiosis supercalifragilistic"),
    ("vertical_tab", "a\x0bb\x0cc\x85d"), ("unit_seps", "a\x1cb\x1fc"),
]


def gguf_bytes(kvs):
    """A GGUF v3 file with no tensors: kvs = [(key, type, value)]."""
    def s(x):
        b = x.encode("utf-8") if isinstance(x, str) else x
        return struct.pack("<Q", len(b)) + b

    def val(t, v):
        if t == 8:
            return s(v)
        if t == 9:
            et, items = v
            return struct.pack("<IQ", et, len(items)) + b"".join(val(et, i) for i in items)
        return struct.pack("<" + {4: "I", 5: "i", 6: "f", 7: "?"}[t], v)

    out = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs))
    for k, t, v in kvs:
        out += s(k) + struct.pack("<I", t) + val(t, v)
    return out


def whisper_vocab():
    tj = json.load(open(os.path.join(ROOT, "models", "whisper-tiny.en", "tokenizer.json")))
    vocab = tj["model"]["vocab"]
    n = 1 + max(max(vocab.values()), max(a["id"] for a in tj["added_tokens"]))
    toks, types = [None] * n, [1] * n
    for k, i in vocab.items():
        toks[i] = k
    for a in tj["added_tokens"]:
        toks[a["id"]], types[a["id"]] = a["content"], 3
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    return tj, toks, types, merges, vocab["<|endoftext|>"]


def write_gguf(path, pre, toks, types, merges, eot):
    kvs = [
        ("general.architecture", 8, "llama"),
        ("llama.context_length", 4, 2048), ("llama.embedding_length", 4, 64),
        ("llama.block_count", 4, 1), ("llama.feed_forward_length", 4, 128),
        ("llama.attention.head_count", 4, 1), ("llama.attention.head_count_kv", 4, 1),
        ("llama.attention.layer_norm_rms_epsilon", 6, 1e-5),
        ("llama.rope.dimension_count", 4, 64),
        ("tokenizer.ggml.model", 8, "gpt2"), ("tokenizer.ggml.pre", 8, pre),
        ("tokenizer.ggml.tokens", 9, (8, toks)),
        ("tokenizer.ggml.token_type", 9, (5, types)),
        ("tokenizer.ggml.merges", 9, (8, merges)),
        ("tokenizer.ggml.bos_token_id", 4, eot), ("tokenizer.ggml.eos_token_id", 4, eot),
        ("tokenizer.ggml.add_bos_token", 7, False),
    ]
    with open(path, "wb") as f:
        f.write(gguf_bytes(kvs))


def hf_tokenizer(tj, pre):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    bpe = models.BPE(vocab=tj["model"]["vocab"],
                     merges=[tuple(m.split(" ")) if isinstance(m, str) else tuple(m)
                             for m in tj["model"]["merges"]],
                     ignore_merges=(pre == "llama-bpe"))
    t = Tokenizer(bpe)
    t.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(r), behavior="isolated") for r in SPLITS.get(pre, [REGEX.get(pre)])]
        + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    t.decoder = decoders.ByteLevel()
    return t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hf", action="store_true", help="cross-check with HF tokenizers")
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "reference", "llm",
                                                  "tokenizer_bpe_whisper.json"))
    args = ap.parse_args()
    import llama_cpp
    from llama_cpp import Llama

    tj, toks, types, merges, eot = whisper_vocab()
    out = {"source": "llama-cpp-python %s (llama.cpp), vocab-only GGUFs from "
                     "models/whisper-tiny.en/tokenizer.json" % llama_cpp.__version__,
           "n_vocab": len(toks), "pre": {}}
    for pre in PRES:
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "vocab.gguf")
            write_gguf(path, pre, toks, types, merges, eot)
            llm = Llama(model_path=path, vocab_only=True, verbose=False)
            cases = []
            for name, text in TEXTS:
                b = text.encode("utf-8")
                cases.append({"name": name, "text": text,
                              "ids": llm.tokenize(b, add_bos=False, special=False),
                              "ids_special": llm.tokenize(b, add_bos=False, special=True)})
            del llm
        if args.hf:
            hf = hf_tokenizer(tj, pre)
            same = sum(hf.encode(c["text"], add_special_tokens=False).ids == c["ids"]
                       for c in cases)
            print("%s: HF tokenizers agrees with llama.cpp on %d of %d texts"
                  % (pre, same, len(cases)), file=sys.stderr)
        out["pre"][pre] = {"cases": cases}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=0)
        f.write("\n")
    print("wrote", args.out, file=sys.stderr)


if __name__ == "__main__":
    main()
