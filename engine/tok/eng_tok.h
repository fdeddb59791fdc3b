/* eng_tok.h - the tokenizer of a GGUF language model, with llama.cpp's
 * token ids.
 *
 * Source followed: llama.cpp src/llama-vocab.cpp (llama_vocab::impl::load,
 * tokenize, tokenizer_st_partition, token_to_piece, detokenize, the EOG
 * logic) and src/unicode.cpp (the pre-tokenizer regexes). Facts only; the
 * code is ours.
 *
 * tokenizer.ggml.model selects the algorithm:
 *   "llama" - SentencePiece-style BPE (llm_tokenizer_spm): spaces become
 *             U+2581, an optional space prefix (tokenizer.ggml.add_space_prefix,
 *             default true), greedy bigram merging by tokenizer.ggml.scores
 *             (highest score first, leftmost among ties) where the merged
 *             string is a token, byte fallback "<0xXX>" for the rest.
 *             gemma, gemma 3, llama 1/2, mistral.
 *   "gpt2"  - byte-level BPE with tokenizer.ggml.merges (eng_bpe.h); the
 *             pre-tokenizer comes from tokenizer.ggml.pre: "gpt-2" (alias
 *             "gpt2") the GPT-2 regex, "llama-bpe" / "llama3" / "llama-v3"
 *             the llama 3 regex, "qwen2" the qwen2 regex, "smollm" SmolLM's,
 *             and the names llama.cpp maps onto those regexes: "dbrx",
 *             "smaug-bpe" (llama 3's, without ignore_merges), "olmo", "mpt",
 *             "refact", "codeshell", "command-r", "stablelm2". Others, including
 *             "default" and a missing key (llama.cpp's DEFAULT chain of four
 *             regexes with \p{P}) give -ST_UNSUPPORTED.
 * Special tokens: ids whose tokenizer.ggml.token_type is CONTROL (3) or
 * USER_DEFINED (4) (and UNKNOWN, 2). Before tokenizing, the text is cut at
 * exact occurrences of their strings, longest string first (ties: lower
 * id), leftmost first, as tokenizer_st_partition does; USER_DEFINED tokens
 * are always cut out, CONTROL/UNKNOWN only with parse_special.
 * End of generation (llama.cpp's special_eog_ids): eos, eot, eom, the FIM
 * pad/repo/sep ids and every token named like "<end_of_turn>",
 * "<|eot_id|>", "<|im_end|>", "<|endoftext|>", "<eos>", "</s>" ...
 *
 * Known differences from llama.cpp (all on input llama.cpp itself treats
 * as degenerate): BPE text that is not valid UTF-8 keeps its bytes
 * (llama.cpp substitutes U+FFFD); BPE merges must name vocabulary tokens
 * (llama.cpp ignores bad ones); the per-model LSTRIP/RSTRIP attributes
 * (phi-3, jina, modern-bert) and add_eos/add_sep are not applied.
 *
 * Threads: create on one thread; the object is then immutable and every
 * function may be called from any thread concurrently.
 * Allocation goes through common/mem.h.
 */
#ifndef ENG_TOK_H
#define ENG_TOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct eng_gguf;
struct eng_tok;

/* eng_tok_from_gguf - build the tokenizer from g's tokenizer.ggml.* keys.
 * g is borrowed during the call only (everything needed is copied).
 * On success *out is new (eng_tok_destroy) and 0 is returned. Errors:
 * -ST_INVAL (NULL argument), -ST_NOTFOUND (no tokenizer.ggml.model or
 * .tokens, or merges for "gpt2"), -ST_UNSUPPORTED (another model or pre
 * name), -ST_CORRUPT (a key of the wrong type, an array shorter than the
 * vocabulary, a duplicate token, add_bos without a bos id, bad merges),
 * -ST_TOOBIG (more than ENG_BPE_MAX_TOKENS tokens or a token over
 * ENG_BPE_MAX_TOKEN_BYTES), -ST_NOMEM; then *out is NULL and err (errlen
 * bytes, may be NULL when errlen is 0) holds one line. */
int eng_tok_from_gguf(const struct eng_gguf *g, struct eng_tok **out, char *err, size_t errlen);

/* eng_tok_destroy - free; NULL is a no-op. */
void eng_tok_destroy(struct eng_tok *t);

/* eng_tok_n_vocab - number of ids; valid ids are 0 .. n_vocab-1. */
size_t eng_tok_n_vocab(const struct eng_tok *t);

/* eng_tok_encode - ids of len bytes of text (any bytes; text may be NULL
 * when len is 0), as llama_tokenize(text, add_special = add_bos,
 * parse_special). add_bos: prepend the BOS id (pass eng_tok_add_bos(t) to
 * follow the model). parse_special: control tokens written in the text
 * ("<start_of_turn>") become their ids; otherwise they are tokenized as
 * plain text (user-defined tokens are matched either way).
 * ids: [max_ids] out; *n_ids = number of ids the text has.
 * Returns 0, -ST_TOOBIG when that number exceeds max_ids (ids holds the
 * first max_ids, *n_ids the full count; or, for a text longer than max_ids
 * times the longest token's bytes, refused before encoding: nothing in ids,
 * *n_ids a lower bound), -ST_INVAL (NULL arguments, add_bos
 * when the model has no BOS), -ST_TOOBIG (len >= 4 GiB), -ST_NOMEM
 * (scratch memory: about 80 bytes per text byte, freed before return). */
int eng_tok_encode(const struct eng_tok *t, const char *text, size_t len, bool add_bos,
		   bool parse_special, int32_t *ids, size_t max_ids, size_t *n_ids);

/* eng_tok_encode_marked - eng_tok_encode with parse_special, except that
 * control tokens are parsed only where no byte they would cover is marked
 * plain (plain[i] != 0: text a chat message brought, which stays text -
 * "<end_of_turn>" typed by a user is its characters, not the token);
 * plain NULL marks nothing. Same results, errors and limits. */
int eng_tok_encode_marked(const struct eng_tok *t, const char *text, size_t len, bool add_bos,
			  const uint8_t *plain, int32_t *ids, size_t max_ids, size_t *n_ids);

/* eng_tok_piece - the bytes of id as llama_token_to_piece(lstrip 0)
 * gives them: "▁" as " " (SPM), byte-level characters as their bytes
 * (BPE), "<0xXX>" byte tokens as that byte, control/unknown tokens as their
 * text only when render_special (else nothing), user-defined tokens as
 * their text, unused/undefined tokens as nothing. A piece may be part of a
 * UTF-8 sequence: streaming callers hold bytes back until one completes.
 * Copies min(length, cap) bytes to out (may be NULL when cap is 0), adds no
 * NUL, returns the full length (snprintf-like); 0 for an invalid id. */
size_t eng_tok_piece(const struct eng_tok *t, int32_t id, bool render_special, char *out,
		     size_t cap);

/* eng_tok_detokenize - text of n ids as llama_detokenize does it: pieces
 * concatenated; with remove_special a leading BOS is dropped; the first
 * piece loses one leading space when the model adds a space prefix (and no
 * BOS was dropped); "gpt2" models with clean_spaces (all but qwen2) undo
 * " ," " ." " 's" ... spacing. unparse_special renders control tokens.
 * out: [cap]; on success *out_len = bytes written and out[*out_len] = 0.
 * Returns 0, -ST_TOOBIG when cap < length + 1 (*out_len = the cap needed;
 * out may be NULL with cap 0 to ask), -ST_INVAL (NULL arguments; invalid
 * ids render as nothing). */
int eng_tok_detokenize(const struct eng_tok *t, const int32_t *ids, size_t n, bool remove_special,
		       bool unparse_special, char *out, size_t cap, size_t *out_len);

/* Special ids, -1 when the model has none. */
int32_t eng_tok_bos(const struct eng_tok *t);
int32_t eng_tok_eos(const struct eng_tok *t);
int32_t eng_tok_eot(const struct eng_tok *t);
int32_t eng_tok_unk(const struct eng_tok *t);
int32_t eng_tok_pad(const struct eng_tok *t);

/* eng_tok_add_bos - whether prompts start with BOS (tokenizer.ggml.add_bos_token;
 * default true for "llama", true for llama-3 pre, false otherwise). */
bool eng_tok_add_bos(const struct eng_tok *t);

/* eng_tok_is_eog - id ends generation (see above); false when out of range. */
bool eng_tok_is_eog(const struct eng_tok *t, int32_t id);

/* eng_tok_is_control - id is a control token (never shown to users unless
 * rendered on purpose); false when out of range. */
bool eng_tok_is_control(const struct eng_tok *t, int32_t id);

/* eng_tok_find - id of the token whose text is exactly token_text (the raw
 * vocabulary string, e.g. "<end_of_turn>" or "▁the"), -1 if none. */
int32_t eng_tok_find(const struct eng_tok *t, const char *token_text);

/* eng_tok_text - the raw vocabulary string of id (borrowed, NUL-terminated,
 * lives as long as t), NULL when out of range. */
const char *eng_tok_text(const struct eng_tok *t, int32_t id);

#endif /* ENG_TOK_H */
