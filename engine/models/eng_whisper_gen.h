/* eng_whisper_gen.h - decoding one 30-second window: the prompt, the
 * logits processors, greedy / sampling / beam search, and the scores the
 * temperature fallback needs.
 *
 * Source followed: CTranslate2's WhisperReplica::generate (whisper.cc) and
 * its decoding.cc, which faster-whisper (the project's reference) calls:
 *   - processors in order: the no-speech probability (raw logits at
 *     <|startoftranscript|>), suppress_tokens (every step),
 *     suppress_ids_begin (first step, "suppress blank"), then the
 *     timestamp rules (ApplyTimestampRules);
 *   - log-softmax over the processed logits; the score of a hypothesis is
 *     the sum of its tokens' log-probabilities, <|endoftext|> included;
 *   - at most min(n_text_ctx / 2, n_text_ctx - prompt length + 1) steps.
 */
#ifndef ENG_WHISPER_GEN_H
#define ENG_WHISPER_GEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct eng_whisper;
struct eng_whisper_enc;
struct eng_whisper_tok;
struct dev_queue;
struct eng_whisper_runner;

struct eng_whisper_gen_opts {
	int beam_size;              /* 1: greedy or sampling; > 1 beam search */
	float patience;             /* beam search: stop after beam_size*patience finished */
	float temperature;          /* 0: argmax; > 0 sample from softmax(logprobs / T) */
	int best_of;                /* sampling: candidates, the best score wins */
	bool timestamps;            /* false: the prompt ends with <|notimestamps|> */
	int max_initial_timestamp_index; /* 50 = 1.0 s */
	bool suppress_blank;        /* suppress_ids_begin at the first step */
	uint64_t seed;              /* sampling RNG seed */
	/* stop - asked before every decoder pass; non-zero (a negative ST_*,
	 * e.g. -ST_CANCELED) ends the search with that status. NULL: never. */
	int (*stop)(void *arg);
	void *stop_arg;
	/* runner - how the decoder passes run (eng_whisper.h); NULL: directly
	 * on the queue given to eng_whisper_generate. */
	const struct eng_whisper_runner *runner;
};

struct eng_whisper_gen_result {
	int32_t *tokens;        /* generated tokens, no <|endoftext|> (mem_free) */
	size_t n_tokens;
	double sum_logprob;     /* including the <|endoftext|> step when reached */
	double avg_logprob;     /* sum_logprob / (n_tokens + 1), faster-whisper's */
	float no_speech_prob;   /* P(<|nospeech|>) at <|startoftranscript|> */
};

/* eng_whisper_generate - decode one window whose encoder output is in e.
 * prompt [n_prompt]: optional <|startofprev|> + previous tokens, then the
 * SOT sequence (+ <|notimestamps|> when !timestamps). Returns 0, or
 * -ST_NOMEM / -ST_INVAL (prompt without <|startoftranscript|>, or not
 * shorter than n_text_ctx), or what o->stop returned, with res zeroed. */
int eng_whisper_generate(const struct eng_whisper *w, const struct eng_whisper_tok *tok,
			 const struct eng_whisper_enc *e, struct dev_queue *q,
			 const int32_t *prompt, size_t n_prompt,
			 const struct eng_whisper_gen_opts *o, struct eng_whisper_gen_result *res);

void eng_whisper_gen_result_fini(struct eng_whisper_gen_result *res);

#endif /* ENG_WHISPER_GEN_H */
