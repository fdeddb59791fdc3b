/* eng_sample.h - choosing the next token from logits: penalties, greedy,
 * top-k, top-p, min-p, temperature, a seeded random draw, and the
 * log-probabilities OpenAI's `logprobs` reports.
 *
 * Source followed: llama.cpp's sampler chain (common/sampling.cpp,
 * src/llama-sampling.cpp): penalties over the last penalty_last_n tokens,
 * then top-k, top-p, min-p, temperature, then the draw; OpenAI's
 * presence/frequency penalty definitions (API reference). Engine-internal.
 */
#ifndef ENG_SAMPLE_H
#define ENG_SAMPLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct eng_sample_params {
	float temperature;        /* <= 0: greedy (argmax) */
	int top_k;                /* <= 0: off */
	float top_p;              /* >= 1: off */
	float min_p;              /* <= 0: off */
	float repetition_penalty; /* 1: off (llama.cpp repeat_penalty) */
	float presence_penalty;   /* 0: off (OpenAI) */
	float frequency_penalty;  /* 0: off (OpenAI) */
	int penalty_last_n;       /* history window for penalties (llama.cpp default 64) */
};

/* A candidate (token, logit or probability). */
struct eng_cand {
	int32_t id;
	float v;
};

/* The sampler's state for one sequence: its RNG and scratch. */
struct eng_sampler {
	struct eng_sample_params p;
	uint64_t rng;            /* xorshift64* state, from the seed */
	struct eng_cand *cands;  /* [n_vocab] scratch */
	int n_vocab;
};

/* eng_sampler_init - scratch for n_vocab candidates; seed fixes the draws.
 * -ST_NOMEM. eng_sampler_fini frees. */
int eng_sampler_init(struct eng_sampler *s, const struct eng_sample_params *p, int n_vocab,
		     uint64_t seed);
void eng_sampler_fini(struct eng_sampler *s);

/* eng_sampler_penalize - apply the penalties to logits [n_vocab] in place
 * from the last penalty_last_n tokens of history [n_hist]. */
void eng_sampler_penalize(const struct eng_sampler *s, float *logits, const int32_t *history,
			  size_t n_hist);

/* eng_sampler_greedy - whether eng_sampler_pick is kn argmax of the
 * logits as the model gives them (temperature <= 0 and no penalty), so
 * that the forward pass may find it without writing the logits out
 * (eng_llm_seq greedy). */
bool eng_sampler_greedy(const struct eng_sampler *s);

/* eng_sampler_pick - the next token from (penalised) logits. */
int32_t eng_sampler_pick(struct eng_sampler *s, const float *logits);

/* eng_logprobs - log-softmax of logits at token `id`, and the n_top most
 * likely alternatives (sorted, most likely first) into top[n_top]. */
float eng_logprobs(const float *logits, int n_vocab, int32_t id, struct eng_cand *top, int n_top);

#endif /* ENG_SAMPLE_H */
