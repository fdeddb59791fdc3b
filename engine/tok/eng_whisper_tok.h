/* eng_whisper_tok.h - Whisper's tokenizer facts on top of the byte-level
 * BPE (engine/tok/eng_bpe.h): the special token ids, the language tokens, the
 * default suppressed tokens, and text decoding.
 *
 * Source followed: faster-whisper tokenizer.py (Tokenizer, its
 * non_speech_tokens) and transcribe.py get_suppressed_tokens, which the
 * project's reference outputs come from; openai/whisper tokenizer.py.
 */
#ifndef ENG_WHISPER_TOK_H
#define ENG_WHISPER_TOK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct eng_bpe;

struct eng_whisper_tok {
	struct eng_bpe *bpe;    /* owned */
	int32_t eot;            /* <|endoftext|> */
	int32_t sot;            /* <|startoftranscript|> */
	int32_t sot_prev;       /* <|startofprev|> */
	int32_t sot_lm;         /* <|startoflm|> */
	int32_t no_timestamps;  /* <|notimestamps|> */
	int32_t ts_begin;       /* <|0.00|> = no_timestamps + 1 */
	int32_t no_speech;      /* <|nospeech|> or <|nocaptions|> */
	int32_t transcribe, translate; /* task tokens */
	int32_t *lang_ids;      /* language tokens (config.json lang_ids), [n_langs] */
	size_t n_langs;
	bool multilingual;      /* more than the English-only vocabulary */
	int32_t *suppress;      /* sorted: non-speech tokens + task/sot/no-speech tokens */
	size_t n_suppress;
	int32_t *suppress_begin; /* config.json suppress_ids_begin ([" ", eot]) */
	size_t n_suppress_begin;
};

/* eng_whisper_tok_init - load tokenizer_json (HF format) and read
 * lang_ids / suppress_ids_begin from the model's config (borrowed).
 * n_vocab is the model's (multilingual when >= 51865). Returns 0 or a
 * negative ST_* with err set. */
int eng_whisper_tok_init(struct eng_whisper_tok *t, const char *tokenizer_json,
			 const json_t *config, int n_vocab, char *err, size_t errlen);
void eng_whisper_tok_fini(struct eng_whisper_tok *t);

/* eng_whisper_tok_lang - the language token for a code ("en"), or -1. */
int32_t eng_whisper_tok_lang(const struct eng_whisper_tok *t, const char *code);

/* eng_whisper_tok_lang_known - code ("de") names one of the vocabulary's
 * language tokens (English-only models have them too, unused). */
bool eng_whisper_tok_lang_known(const struct eng_whisper_tok *t, const char *code);

/* eng_whisper_tok_lang_code - the code of a language token ("en") into
 * out (cap bytes); false if id is not a language token. */
bool eng_whisper_tok_lang_code(const struct eng_whisper_tok *t, int32_t id, char *out,
			       size_t cap);

/* eng_whisper_tok_text - decode the text tokens (< eot) of ids to UTF-8,
 * invalid sequences replaced by U+FFFD (as HF's decoder does). Returns a
 * new NUL-terminated string (mem_free) or NULL (out of memory). */
char *eng_whisper_tok_text(const struct eng_whisper_tok *t, const int32_t *ids, size_t n);

/* eng_whisper_tok_encode - text to ids (new array, mem_free) in *ids, count
 * in *n. Returns 0 or -ST_NOMEM / -ST_TOOBIG. */
int eng_whisper_tok_encode(const struct eng_whisper_tok *t, const char *text, int32_t **ids,
			   size_t *n);

#endif /* ENG_WHISPER_TOK_H */
