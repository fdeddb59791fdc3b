/* eng_bpe.h - a byte-level BPE tokenizer (GPT-2 / Whisper style, and
 * llama 3 / qwen2 with their own pre-tokenizers).
 *
 * Source followed: HF `tokenizers` (tokenizer.json format; the BPE model's
 * merge loop, models/bpe/word.rs merge_all; the ByteLevel pre-tokenizer and
 * decoder) and GPT-2's encoder.py (bytes_to_unicode, the split regex).
 *
 * Pipeline of eng_bpe_encode:
 *   1. pre-tokenize the UTF-8 text into words (enum eng_bpe_pretok);
 *   2. map each byte of a word to its byte-level token (GPT-2's
 *      bytes_to_unicode: 0x20 -> "Ġ", 0x0A -> "Ċ", printable ASCII itself);
 *   3. merge adjacent symbols by merge rank, lowest rank first, leftmost
 *      first among equal ranks (a binary heap: O(n log n) per word).
 * With the same tokenizer.json the ids equal HF's
 * `Tokenizer.encode(text, add_special_tokens=False)` with
 * `encode_special_tokens = True`: added tokens such as "<|endoftext|>" are
 * never recognised inside text (user text cannot inject control tokens);
 * callers insert special ids themselves (eng_bpe_token_id).
 *
 * Invalid UTF-8: encode never fails on it. A byte that does not start a
 * well-formed UTF-8 sequence (overlong, surrogate, > U+10FFFF, truncated,
 * stray continuation) is one code point of class "other" (neither letter,
 * number nor space) for pre-tokenization; its byte still maps to its
 * byte-level token, so decode(encode(x)) == x for every byte string x.
 *
 * Construction: eng_bpe_create builds from arrays (tokens, merges, special
 * ids: what tokenizer.json and GGUF metadata both provide); eng_bpe_load_hf
 * parses a tokenizer.json and calls it.
 *
 * Threads: create/load on one thread; afterwards the object is immutable
 * and every function may be called from any thread concurrently.
 * Allocation goes through common/mem.h.
 */
#ifndef ENG_BPE_H
#define ENG_BPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct eng_bpe;

#define ENG_BPE_MAX_FILE_BYTES (64u << 20) /* tokenizer.json ceiling (gemma's is 33 MB) */
#define ENG_BPE_MAX_TOKENS (1u << 21)      /* vocabulary ceiling (gemma 3: 262144) */
#define ENG_BPE_MAX_MERGES (1u << 21)      /* merges ceiling */
#define ENG_BPE_MAX_TOKEN_BYTES 4096u      /* one token string's ceiling */

/* Pre-tokenizers (how text is split into words before BPE). */
enum eng_bpe_pretok {
	/* GPT-2's regex, as HF's ByteLevel(use_regex=true) runs it:
	 * 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
	 * \p{L} = categories L*, \p{N} = N*, \s = Unicode White_Space
	 * (engine/tok/eng_unicode_tables.h). Used by GPT-2 and Whisper. */
	ENG_BPE_PRETOK_GPT2 = 0,
	/* llama 3's regex, as llama.cpp runs it for tokenizer.ggml.pre
	 * "llama-bpe" / "llama3" (src/llama-vocab.cpp, LLAMA_VOCAB_PRE_TYPE_LLAMA3):
	 * (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])
	 * |[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*
	 * |\s*[\r\n]+|\s+(?!\S)|\s+
	 * It also sets llama.cpp's (and HF's) ignore_merges: a word that is
	 * itself a token is emitted as that token without merging. */
	ENG_BPE_PRETOK_LLAMA3 = 1,
	/* qwen2's regex (tokenizer.ggml.pre "qwen2"): the llama 3 one with
	 * \p{N} (one digit per word) instead of \p{N}{1,3}; merges as usual. */
	ENG_BPE_PRETOK_QWEN2 = 2,
	/* SmolLM's (tokenizer.ggml.pre "smollm"; llama.cpp's
	 * LLAMA_VOCAB_PRE_TYPE_SMOLLM, like STARCODER and REFACT): every \p{N}
	 * character is a word of its own, and GPT-2's regex splits the text
	 * between them (each stretch apart: a space before a digit ends its
	 * stretch). */
	ENG_BPE_PRETOK_SMOLLM = 3,
	/* DBRX's (tokenizer.ggml.pre "dbrx", "smaug-bpe"; OLMo 2's files name
	 * "dbrx"): llama 3's regex, merges as usual (no ignore_merges). */
	ENG_BPE_PRETOK_DBRX = 4,
	ENG_BPE_PRETOK_COUNT
};

/* eng_bpe_create - build a tokenizer from arrays.
 * tokens: [n_tokens] NUL-terminated byte-level token strings, id = index
 *   (1 <= n_tokens <= ENG_BPE_MAX_TOKENS, each <= ENG_BPE_MAX_TOKEN_BYTES);
 *   a repeated string keeps its lowest id for eng_bpe_token_id. The 256
 *   single-byte tokens of bytes_to_unicode must all be present.
 * merges: [n_merges] "LEFT RIGHT" strings (exactly one space), rank =
 *   index; LEFT, RIGHT and LEFT+RIGHT must be tokens. A repeated pair takes
 *   the later rank, as HF does.
 * special_ids: [n_special] ids to mark special (added/control tokens);
 *   may be NULL when n_special is 0.
 * Everything is borrowed during the call only (copied).
 * On success *out is new (eng_bpe_destroy) and 0 is returned. Errors:
 * -ST_INVAL (NULL argument, unknown pretok), -ST_TOOBIG (a ceiling above),
 * -ST_CORRUPT (a merge or special id contradicts the vocabulary, a byte
 * token is missing), -ST_NOMEM; then *out is NULL and err holds one line. */
int eng_bpe_create(const char *const *tokens, size_t n_tokens, const char *const *merges,
		   size_t n_merges, const int32_t *special_ids, size_t n_special,
		   enum eng_bpe_pretok pretok, struct eng_bpe **out, char *err, size_t errlen);

/* eng_bpe_load_hf - parse a HF tokenizer.json (model.type "BPE", byte-level
 * pre-tokenizer with the GPT-2 regex and add_prefix_space false, no
 * normalizer) and build it: vocab from model.vocab, merges from
 * model.merges ("a b" strings or ["a", "b"] pairs), added_tokens appended
 * or matched by id and marked special when "special" is true.
 * The file is read once (<= ENG_BPE_MAX_FILE_BYTES) and not kept.
 * Errors: -ST_NOTFOUND, -ST_IO (cannot read), -ST_TOOBIG (file or count
 * ceiling), -ST_CORRUPT (not JSON, a field missing or of the wrong type,
 * ids with gaps, bad merges), -ST_UNSUPPORTED (another model type,
 * pre-tokenizer, normalizer or BPE option), -ST_NOMEM; *out NULL and err
 * one line "PATH: fault". */
int eng_bpe_load_hf(const char *path, struct eng_bpe **out, char *err, size_t errlen);

/* eng_bpe_destroy - free; NULL is a no-op. */
void eng_bpe_destroy(struct eng_bpe *b);

/* eng_bpe_n_vocab - number of ids (vocabulary plus added tokens); valid
 * ids are 0 .. n_vocab-1. */
size_t eng_bpe_n_vocab(const struct eng_bpe *b);

/* eng_bpe_token_id - the id of the exact token string `token` (vocabulary
 * or added token, e.g. "<|endoftext|>", or byte-level "Ġthe"), -1 if
 * absent. O(1) hash lookup. */
int32_t eng_bpe_token_id(const struct eng_bpe *b, const char *token);

/* eng_bpe_token_str - the raw token string of id (byte-level characters,
 * borrowed, lives as long as b), NULL if id is out of range. */
const char *eng_bpe_token_str(const struct eng_bpe *b, int32_t id);

/* eng_bpe_is_special - true when id is marked special (false if out of range). */
bool eng_bpe_is_special(const struct eng_bpe *b, int32_t id);

/* eng_bpe_token_bytes - the raw bytes id decodes to (a token may hold a
 * partial UTF-8 sequence). Copies min(length, cap) bytes to out (which may
 * be NULL when cap is 0), adds no NUL, and returns the full length
 * (snprintf-like); 0 if id is out of range. A token with a character
 * outside the byte-level alphabet (e.g. "<|endoftext|>" is inside it) decodes
 * to its own UTF-8 string, as HF's ByteLevel decoder does. */
size_t eng_bpe_token_bytes(const struct eng_bpe *b, int32_t id, char *out, size_t cap);

/* eng_bpe_encode - ids of len bytes of text (no NUL needed; any bytes,
 * see "Invalid UTF-8" above; text may be NULL when len is 0).
 * ids: [max_ids] out; *n_ids = number of ids the text has.
 * Returns 0, -ST_TOOBIG when that number exceeds max_ids (ids then holds
 * the first max_ids and *n_ids the full count, so a caller can size a
 * buffer), -ST_INVAL (NULL arguments), -ST_NOMEM (a word longer than 64
 * bytes needs scratch memory). */
int eng_bpe_encode(const struct eng_bpe *b, const char *text, size_t len, int32_t *ids,
		   size_t max_ids, size_t *n_ids);

/* eng_bpe_decode - concatenated raw bytes of n ids (eng_bpe_token_bytes),
 * skipping special ids when skip_special. No UTF-8 repair: the caller
 * deals with sequences split across calls.
 * out: [cap] bytes; on success *out_len = bytes written, out[*out_len] = 0.
 * Returns 0, -ST_TOOBIG when cap < length + 1 (nothing written; *out_len =
 * the cap needed, length + 1; out may be NULL with cap 0 to ask),
 * -ST_INVAL (an id out of range, NULL arguments). */
int eng_bpe_decode(const struct eng_bpe *b, const int32_t *ids, size_t n, bool skip_special,
		   char *out, size_t cap, size_t *out_len);

#endif /* ENG_BPE_H */
