/* eng_sample.c - token sampling (see eng_sample.h for the sources). */
#include "engine/gen/eng_sample.h"

#include <math.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "devices/dev.h"

int eng_sampler_init(struct eng_sampler *s, const struct eng_sample_params *p, int n_vocab,
		     uint64_t seed)
{
	memset(s, 0, sizeof(*s));
	s->p = *p;
	s->n_vocab = n_vocab;
	/* splitmix64 of the seed: never the all-zero xorshift state */
	uint64_t z = seed + 0x9E3779B97F4A7C15ULL;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	s->rng = (z ^ (z >> 31)) | 1;
	s->cands = mem_alloc((size_t)n_vocab * sizeof(*s->cands));
	return s->cands ? 0 : -ST_NOMEM;
}

void eng_sampler_fini(struct eng_sampler *s)
{
	mem_free(s->cands);
	s->cands = NULL;
}

static double es_uniform(struct eng_sampler *s)
{
	s->rng ^= s->rng >> 12;
	s->rng ^= s->rng << 25;
	s->rng ^= s->rng >> 27;
	return (double)((s->rng * 0x2545F4914F6CDD1DULL) >> 11) / 9007199254740992.0;
}

/* Whether p leaves the logits as they are (no penalty of any kind). */
static bool es_no_penalty(const struct eng_sample_params *p)
{
	return p->repetition_penalty == 1.0f && p->presence_penalty == 0.0f &&
	       p->frequency_penalty == 0.0f;
}

void eng_sampler_penalize(const struct eng_sampler *s, float *logits, const int32_t *history,
			  size_t n_hist)
{
	const struct eng_sample_params *p = &s->p;
	if (es_no_penalty(p))
		return;
	size_t from = p->penalty_last_n > 0 && n_hist > (size_t)p->penalty_last_n
			      ? n_hist - (size_t)p->penalty_last_n : 0;
	for (size_t i = from; i < n_hist; i++) {
		int32_t id = history[i];
		bool first = true; /* penalise each distinct token once, by its count */
		for (size_t j = from; j < i && first; j++)
			first = history[j] != id;
		if (!first || id < 0 || id >= s->n_vocab)
			continue;
		int count = 0;
		for (size_t j = i; j < n_hist; j++)
			count += history[j] == id;
		float *l = &logits[id];
		if (p->repetition_penalty != 1.0f)
			*l = *l > 0 ? *l / p->repetition_penalty : *l * p->repetition_penalty;
		*l -= (float)count * p->frequency_penalty + p->presence_penalty;
	}
}

static int32_t es_argmax(const float *x, int n)
{
	return (int32_t)dev_host_argmax(x, (size_t)n);
}

static int es_cand_desc(const void *a, const void *b)
{
	float x = ((const struct eng_cand *)a)->v, y = ((const struct eng_cand *)b)->v;
	return (x < y) - (x > y);
}

/* Move the k largest of c[0..n) to the front, in no order (Hoare's
 * quickselect, expected O(n)). */
static void es_select(struct eng_cand *c, int n, int k)
{
	int lo = 0, hi = n - 1;
	while (lo < hi) {
		float pivot = c[lo + (hi - lo) / 2].v;
		int i = lo, j = hi;
		while (i <= j) {
			while (c[i].v > pivot)
				i++;
			while (c[j].v < pivot)
				j--;
			if (i <= j) {
				struct eng_cand t = c[i];
				c[i++] = c[j];
				c[j--] = t;
			}
		}
		if (k - 1 <= j)
			hi = j;
		else if (k - 1 >= i)
			lo = i;
		else
			return;
	}
}

/* How many of the sorted candidates c[0..k) top-p and min-p keep, given
 * the full distribution's max logit and normalising sum; -1 when the
 * answer may lie beyond k (the caller widens k). */
static int es_truncate(const struct eng_sample_params *p, const struct eng_cand *c, int k,
		       int n, double mx, double sum)
{
	double cum = 0, p0 = exp((double)c[0].v - mx) / sum;
	for (int i = 0; i < k; i++) {
		double pi = exp((double)c[i].v - mx) / sum;
		if (p->min_p > 0 && i > 0 && pi < p0 * p->min_p)
			return i;
		cum += pi;
		if (p->top_p < 1.0f && cum >= p->top_p)
			return i + 1;
	}
	return k == n ? n : -1;
}

/* Draw from softmax(logit / T) over c[0..n). */
static int32_t es_draw(struct eng_sampler *s, const struct eng_cand *c, int n, float temp)
{
	double mx = c[0].v, sum = 0;
	for (int i = 1; i < n; i++)
		mx = c[i].v > mx ? c[i].v : mx;
	for (int i = 0; i < n; i++)
		sum += exp(((double)c[i].v - mx) / temp);
	double r = es_uniform(s) * sum;
	for (int i = 0; i < n; i++) {
		r -= exp(((double)c[i].v - mx) / temp);
		if (r <= 0)
			return c[i].id;
	}
	return c[n - 1].id;
}

bool eng_sampler_greedy(const struct eng_sampler *s)
{
	return s->p.temperature <= 0.0f && es_no_penalty(&s->p);
}

int32_t eng_sampler_pick(struct eng_sampler *s, const float *logits)
{
	const struct eng_sample_params *p = &s->p;
	if (p->temperature <= 0.0f)
		return es_argmax(logits, s->n_vocab);
	struct eng_cand *c = s->cands;
	int n = 0;
	for (int i = 0; i < s->n_vocab; i++)
		if (logits[i] > -INFINITY)
			c[n++] = (struct eng_cand){ i, logits[i] };
	if (n == 0)
		return es_argmax(logits, s->n_vocab);
	if (p->top_k > 0 && p->top_k < n) {
		es_select(c, n, p->top_k);
		n = p->top_k;
	}
	if (p->top_p < 1.0f || p->min_p > 0.0f) {
		double mx = -INFINITY, sum = 0;
		for (int i = 0; i < n; i++)
			mx = c[i].v > mx ? c[i].v : mx;
		for (int i = 0; i < n; i++)
			sum += exp((double)c[i].v - mx);
		int keep = -1;
		for (int k = n < 64 ? n : 64; keep < 0; k = k * 4 < n ? k * 4 : n) {
			if (k < n)
				es_select(c, n, k);
			qsort(c, (size_t)k, sizeof(*c), es_cand_desc);
			keep = es_truncate(p, c, k, n, mx, sum);
		}
		n = keep;
	}
	return es_draw(s, c, n, p->temperature);
}

float eng_logprobs(const float *logits, int n_vocab, int32_t id, struct eng_cand *top, int n_top)
{
	float mx = logits[es_argmax(logits, n_vocab)];
	double sum = 0;
	for (int i = 0; i < n_vocab; i++)
		sum += exp((double)(logits[i] - mx));
	float lse = mx + (float)log(sum);
	for (int k = 0; k < n_top; k++) {
		top[k] = (struct eng_cand){ -1, -INFINITY };
		for (int i = 0; i < n_vocab; i++) {
			bool taken = false;
			for (int j = 0; j < k && !taken; j++)
				taken = top[j].id == i;
			if (!taken && logits[i] > top[k].v)
				top[k] = (struct eng_cand){ i, logits[i] };
		}
		top[k].v -= lse;
	}
	return logits[id] - lse;
}
