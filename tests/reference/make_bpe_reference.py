#!/usr/bin/env python3
"""make_bpe_reference.py - reference token ids for tests/unit/engine/tok/test_bpe.c.

Runs the PyPI `tokenizers` package (HF's Rust tokenizer) on the real
Whisper tiny.en tokenizer.json and writes tests/reference/bpe/whisper_tiny_en.json:
  cases: [{"name", "text", "ids"}]  - Tokenizer.encode(text, add_special_tokens=False)
         with encode_special_tokens = True (added tokens such as <|endoftext|>
         are not recognised inside text, the documented eng_bpe_encode rule)
  special: {token: id or null}      - Tokenizer.token_to_id
  decode: ids with special tokens around a transcript and HF's decode of
         them with skip_special_tokens false / true
  n_vocab: Tokenizer.get_vocab_size(with_added_tokens=True)
Strings: the reference transcripts of ../shared/data/audio/manifest.tsv (last
column; the output JSON keeps them, so the C test does not need that folder)
plus hard cases.
Invalid UTF-8 cannot be passed to tokenizers (it takes str); the C test
covers it by round trip only.

Usage: python3 tests/reference/make_bpe_reference.py [MODELS_DIR]
"""
import json
import os
import sys

from tokenizers import Tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

HARD = [
    ("empty", ""),
    ("one_space", " "),
    ("leading_space", " hello"),
    ("leading_spaces", "   hello"),
    ("trailing_space", "hello "),
    ("trailing_spaces", "hello   "),
    ("inner_spaces", "hello    world"),
    ("only_spaces", "      "),
    ("tab", "a\tb"),
    ("tabs_newlines", "line one\n\nline two\r\n\tindented\n"),
    ("space_newline", "end. \n Next"),
    ("newline_space_word", "a\n b"),
    ("contractions", "it's don't we're they've I'm you'll he'd"),
    ("contractions_upper", "IT'S DON'T WE'RE THEY'VE I'M YOU'LL HE'D"),
    ("contraction_alone", "'s 't 're 've 'm 'll 'd"),
    ("quote_runs", "''s '''t rock'n'roll"),
    ("space_quote", "say 'hello' to ' s"),
    ("digits", "12345678901234567890 3.14159 1,000,000"),
    ("digits_letters", "abc123def 42nd 2024-01-01T10:20:30Z"),
    ("punct_runs", "Wait... what?!? (yes) [no] {maybe} <tag/> ---- ==== ****"),
    ("punct_space", " !!! ??? ... ,,,"),
    ("symbols", "$100 @user #tag 50% a&b x^2 ~home | back\\slash `code`"),
    ("emoji", "I love 🍕 and 🎉🎉! 👍🏽 family: 👨‍👩‍👧"),
    ("cjk", "你好，世界。日本語のテキスト。한국어 텍스트"),
    ("accented", "café naïve résumé Ångström São Paulo Łódź"),
    ("arabic", "مرحبا بالعالم ١٢٣"),
    ("hebrew", "שלום עולם"),
    ("cyrillic_greek", "Привет мир Καλημέρα κόσμε"),
    ("devanagari", "नमस्ते दुनिया"),
    ("combining", "e\u0301 a\u0300\u0301 n\u0303o Z\u0335\u0321a\u0336l\u0337g\u0338o"),
    ("nbsp", "a\u00a0b \u00a0c"),
    ("unicode_spaces", "a\u2003b\u3000c\u2028d\u0085e"),
    ("ctrl_1c_1f", "a\x1c\x1cb\x1f c"),
    ("ctrl_chars", "\x00\x01\x07\x7f\x1b[0m"),
    ("zero_width", "a\u200bb\u200dc\ufeffd"),
    ("fullwidth_digits", "１２３ ４５ Ⅻ ½ ²"),
    ("mixed_script", "Hello世界123!"),
    ("url", "https://example.com/path?q=1&r=two#frag"),
    ("email", "someone.name+tag@example.co.uk"),
    ("code", "int main(void) { return 0; }\n"),
    ("json", "{\"a\": [1, 2, {\"b\": null}]}"),
    ("special_text", "<|endoftext|> is not special here <|0.00|>"),
    ("caps", "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG"),
    ("long_word", "Pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism"),
    ("repeated_char", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
    ("repeated_pair", "abababababababababababababababab"),
    ("math", "∀x∈ℝ: x² ≥ 0 ∑ ∫ √2 ≠ π"),
    ("surrogate_plane", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝟙𝟚𝟛 𓀀"),
    ("thai", "สวัสดีชาวโลก"),
    ("whisper_like", " And so my fellow Americans, ask not what your country can do for you."),
]


def long_text():
    base = ("The quick brown fox jumps over the lazy dog; it's 1,234 times faster! "
            "Ünïcödé, 日本語, and emoji 🎉 too.\n")
    s = (base * (5000 // len(base) + 1))[:5000]
    return s


def transcripts():
    path = os.path.join(ROOT, "..", "shared", "data", "audio", "manifest.tsv")
    out = []
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            rows = f.read().splitlines()[1:]
        for i, row in enumerate(rows):
            cols = row.split("\t")
            if len(cols) >= 10 and cols[9]:
                out.append(("transcript_%02d" % i, cols[9]))
    return out


def main():
    models = sys.argv[1] if len(sys.argv) > 1 else os.environ.get(
        "INFERD_MODELS", os.path.join(ROOT, "models"))
    tok = Tokenizer.from_file(os.path.join(models, "whisper-tiny.en", "tokenizer.json"))
    tok.encode_special_tokens = True
    cases = transcripts() + HARD + [("long_5000", long_text())]
    out = {"source": "tokenizers %s on models/whisper-tiny.en/tokenizer.json"
           % __import__("tokenizers").__version__,
           "n_vocab": tok.get_vocab_size(with_added_tokens=True),
           "cases": []}
    for name, text in cases:
        ids = tok.encode(text, add_special_tokens=False).ids
        assert tok.decode(ids, skip_special_tokens=False) == text or "\ufffd" in text, name
        out["cases"].append({"name": name, "text": text, "ids": ids})
    specials = ["<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|transcribe|>",
                "<|notimestamps|>", "<|nocaptions|>", "<|0.00|>", "Ġthe", "hello"]
    out["special"] = {s: tok.token_to_id(s) for s in specials}
    text = cases[0][1]
    ids = ([tok.token_to_id("<|startoftranscript|>"), tok.token_to_id("<|notimestamps|>")]
           + tok.encode(" " + text, add_special_tokens=False).ids
           + [tok.token_to_id("<|endoftext|>")])
    out["decode"] = {"ids": ids,
                     "text": tok.decode(ids, skip_special_tokens=False),
                     "text_skip": tok.decode(ids, skip_special_tokens=True)}
    dst = os.path.join(ROOT, "tests", "reference", "bpe", "whisper_tiny_en.json")
    with open(dst, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=True, separators=(",", ":"))
        f.write("\n")
    print("%s: %d cases" % (dst, len(out["cases"])))


if __name__ == "__main__":
    main()
