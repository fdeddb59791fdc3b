/* eng_whisper_gen.c - decode one window: prompt prefill, logits
 * processors, greedy / sampled / beam-search hypotheses.
 * See eng_whisper_gen.h for the source followed. */
#include "engine/models/eng_whisper_gen.h"

#include <math.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "engine/models/eng_whisper.h"
#include "engine/tok/eng_whisper_tok.h"
#include "devices/dev.h"

/* Everything one window's decoding needs. */
struct ewg {
	const struct eng_whisper *w;
	const struct eng_whisper_tok *tok;
	const struct eng_whisper_enc *e;
	struct dev_queue *q; /* the replica's queue: the caches live on its device */
	const struct eng_whisper_gen_opts *o;
	int n_vocab;
	size_t max_steps;   /* generated tokens allowed (EOT included) */
	float *logprobs;    /* [n_vocab] scratch */
	uint64_t rng;       /* xorshift64* state */
};

/* One hypothesis: its tokens, score and self-attention cache. */
struct ewg_hyp {
	int32_t *seq;      /* [max_steps] generated so far */
	size_t len;
	double sum_logprob;
	bool done;         /* EOT chosen */
	struct eng_whisper_kv *kv;
	float *logits;     /* [n_vocab] for the next step */
};

/* --- logits processors ----------------------------------------------- */

static double ewg_logsumexp(const float *x, size_t n)
{
	return dev_host_logsumexp(x, n);
}

static void ewg_disable(float *logits, int32_t from, int32_t to) /* [from, to) */
{
	for (int32_t i = from < 0 ? 0 : from; i < to; i++)
		logits[i] = -INFINITY;
}

/* CTranslate2's ApplyTimestampRules for one hypothesis at step len. */
static void ewg_timestamp_rules(const struct ewg *g, float *logits, const int32_t *seq,
				size_t len)
{
	const struct eng_whisper_tok *t = g->tok;
	int32_t tb = t->ts_begin, te = g->n_vocab; /* timestamps are [tb, te) */
	logits[t->no_timestamps] = -INFINITY;
	if (len == 0) {
		ewg_disable(logits, 0, tb);
		ewg_disable(logits, tb + g->o->max_initial_timestamp_index + 1, te);
		return;
	}
	int32_t last = seq[len - 1];
	int32_t penult = len >= 2 ? seq[len - 2] : last;
	bool check = true;
	if (last >= tb && penult >= tb) {
		ewg_disable(logits, tb, te); /* a pair closed: text must follow */
		check = false;
	} else if (last >= tb) {
		ewg_disable(logits, 0, t->eot); /* an open pair: a timestamp or EOT */
	}
	for (size_t i = len; i-- > 0;)
		if (seq[i] >= tb) {
			ewg_disable(logits, tb, seq[i]); /* never decreasing */
			break;
		}
	if (!check)
		return;
	/* If the timestamps together are likelier than any text token, a
	 * timestamp must come: compare in log space after the rules so far. */
	double lse = ewg_logsumexp(logits, (size_t)te);
	double ts = ewg_logsumexp(logits + tb, (size_t)(te - tb)) - lse;
	float max_text = -INFINITY;
	for (int32_t i = 0; i < tb; i++)
		max_text = logits[i] > max_text ? logits[i] : max_text;
	if (ts > (double)max_text - lse)
		ewg_disable(logits, 0, tb);
}

static void ewg_process(const struct ewg *g, float *logits, const int32_t *seq, size_t len)
{
	const struct eng_whisper_tok *t = g->tok;
	for (size_t i = 0; i < t->n_suppress; i++)
		if (t->suppress[i] < g->n_vocab)
			logits[t->suppress[i]] = -INFINITY;
	if (len == 0 && g->o->suppress_blank)
		for (size_t i = 0; i < t->n_suppress_begin; i++)
			if (t->suppress_begin[i] >= 0 && t->suppress_begin[i] < g->n_vocab)
				logits[t->suppress_begin[i]] = -INFINITY;
	if (g->o->timestamps)
		ewg_timestamp_rules(g, logits, seq, len);
}

/* logprobs = log_softmax(logits). */
static void ewg_log_softmax(const float *logits, float *out, int n)
{
	double lse = ewg_logsumexp(logits, (size_t)n);
	for (int i = 0; i < n; i++)
		out[i] = (float)(logits[i] - lse);
}

/* --- choosing a token ------------------------------------------------- */

static double ewg_uniform(struct ewg *g)
{
	g->rng ^= g->rng >> 12;
	g->rng ^= g->rng << 25;
	g->rng ^= g->rng >> 27;
	return (double)((g->rng * 0x2545F4914F6CDD1DULL) >> 11) / 9007199254740992.0;
}

/* The first index of the largest (dev_host_argmax). */
static int32_t ewg_argmax(const float *x, int n)
{
	return (int32_t)dev_host_argmax(x, (size_t)n);
}

/* Sample from softmax(logprobs / T) (CTranslate2's RandomSampler, top-k 0). */
static int32_t ewg_sample(struct ewg *g, const float *lp, float temperature)
{
	int32_t best = ewg_argmax(lp, g->n_vocab);
	double sum = 0;
	for (int i = 0; i < g->n_vocab; i++)
		sum += exp((double)(lp[i] - lp[best]) / temperature);
	double r = ewg_uniform(g) * sum;
	for (int i = 0; i < g->n_vocab; i++) {
		r -= exp((double)(lp[i] - lp[best]) / temperature);
		if (r <= 0 && lp[i] > -INFINITY)
			return i;
	}
	return best;
}

/* --- hypotheses ------------------------------------------------------- */

static void ewg_hyp_free(struct ewg_hyp *h)
{
	mem_free(h->seq);
	mem_free(h->logits);
	eng_whisper_kv_destroy(h->kv);
	memset(h, 0, sizeof(*h));
}

static int ewg_hyp_alloc(const struct ewg *g, struct ewg_hyp *h)
{
	memset(h, 0, sizeof(*h));
	h->seq = mem_alloc((g->max_steps + 1) * sizeof(*h->seq));
	h->logits = mem_alloc((size_t)g->n_vocab * sizeof(float));
	if (!h->seq || !h->logits || eng_whisper_kv_create(g->w, dev_queue_device(g->q), &h->kv)) {
		ewg_hyp_free(h);
		return -ST_NOMEM;
	}
	return 0;
}

/* One decoder pass, unless the caller wants to stop. */
static int ewg_decode(const struct ewg *g, struct eng_whisper_kv *kv, const int32_t *tokens,
		      size_t n, float *logits, float *at, size_t at_index)
{
	int rc = g->o->stop ? g->o->stop(g->o->stop_arg) : 0;
	if (rc)
		return rc;
	const struct eng_whisper_runner *run = g->o->runner;
	if (run)
		return run->decode(run->ctx, g->e, kv, tokens, n, logits, at, at_index);
	return eng_whisper_decode(g->w, g->e, kv, g->q, tokens, n, logits, at, at_index);
}

/* Run one hypothesis to EOT or max_steps, greedy or sampled. */
static int ewg_run(struct ewg *g, struct ewg_hyp *h, float temperature)
{
	int rc = 0;
	while (!rc && !h->done && h->len < g->max_steps) {
		ewg_process(g, h->logits, h->seq, h->len);
		ewg_log_softmax(h->logits, g->logprobs, g->n_vocab);
		int32_t id = temperature > 0 ? ewg_sample(g, g->logprobs, temperature)
					     : ewg_argmax(g->logprobs, g->n_vocab);
		h->sum_logprob += g->logprobs[id];
		if (id == g->tok->eot) {
			h->done = true;
			break;
		}
		h->seq[h->len++] = id;
		if (h->len < g->max_steps)
			rc = ewg_decode(g, h->kv, &id, 1, h->logits, NULL, 0);
	}
	return rc;
}

/* --- entry ------------------------------------------------------------ */

static int ewg_find_sot(const struct eng_whisper_tok *t, const int32_t *p, size_t n, size_t *at)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] == t->sot) {
			*at = i;
			return 0;
		}
	return -ST_INVAL;
}

static float ewg_no_speech(const struct ewg *g, const float *logits)
{
	ewg_log_softmax(logits, g->logprobs, g->n_vocab);
	return g->tok->no_speech >= 0 ? expf(g->logprobs[g->tok->no_speech]) : 0.0f;
}

static int ewg_result(const struct ewg_hyp *h, struct eng_whisper_gen_result *res)
{
	res->tokens = mem_alloc((h->len + 1) * sizeof(*res->tokens));
	if (!res->tokens)
		return -ST_NOMEM;
	memcpy(res->tokens, h->seq, h->len * sizeof(*h->seq));
	res->n_tokens = h->len;
	res->sum_logprob = h->sum_logprob;
	res->avg_logprob = h->sum_logprob / (double)(h->len + 1);
	return 0;
}

/* Copy hypothesis src (tokens, score, cache, next logits) into dst. */
static int ewg_hyp_copy(const struct ewg *g, struct ewg_hyp *dst, const struct ewg_hyp *src)
{
	memcpy(dst->seq, src->seq, src->len * sizeof(*src->seq));
	dst->len = src->len;
	dst->sum_logprob = src->sum_logprob;
	dst->done = src->done;
	memcpy(dst->logits, src->logits, (size_t)g->n_vocab * sizeof(float));
	return eng_whisper_kv_copy(g->w, g->q, dst->kv, src->kv);
}

/* Length-normalised score (length penalty 1, EOT counted). */
static double ewg_norm_score(const struct ewg_hyp *h)
{
	return h->sum_logprob / (double)(h->len + 1);
}

/* best_of sampled candidates from the same prefill; the best normalised
 * score wins (CTranslate2 num_hypotheses with sampling). */
static int ewg_best_of(struct ewg *g, struct ewg_hyp *h0, struct eng_whisper_gen_result *res)
{
	struct ewg_hyp h, best;
	int rc = ewg_hyp_alloc(g, &h);
	if (!rc && (rc = ewg_hyp_alloc(g, &best)))
		ewg_hyp_free(&h);
	if (rc)
		return rc;
	bool have = false;
	for (int k = 0; !rc && k < g->o->best_of; k++) {
		rc = ewg_hyp_copy(g, &h, h0);
		if (!rc)
			rc = ewg_run(g, &h, g->o->temperature);
		if (!rc && (!have || ewg_norm_score(&h) > ewg_norm_score(&best))) {
			rc = ewg_hyp_copy(g, &best, &h);
			have = true;
		}
	}
	if (!rc)
		rc = ewg_result(&best, res);
	ewg_hyp_free(&h);
	ewg_hyp_free(&best);
	return rc;
}

/* --- beam search (openai/whisper BeamSearchDecoder) --------------------- */

#define EWG_MAX_BEAM 16

struct ewg_cand {
	double score; /* parent's sum_logprob + the token's log-probability */
	int parent;   /* beam index */
	int32_t token;
};

/* The beam state: live beams, the next generation, finished hypotheses. */
struct ewg_beams {
	int n;                               /* live beams */
	struct ewg_hyp cur[EWG_MAX_BEAM], next[EWG_MAX_BEAM];
	struct ewg_hyp fin[EWG_MAX_BEAM];    /* finished: seq, len, sum_logprob */
	int n_fin, max_fin;
	struct ewg_cand *cand;               /* [beam * (beam + 1)] */
};

static void ewg_beams_free(struct ewg_beams *b, int beam)
{
	for (int i = 0; i < beam; i++) {
		ewg_hyp_free(&b->cur[i]);
		ewg_hyp_free(&b->next[i]);
		ewg_hyp_free(&b->fin[i]);
	}
	mem_free(b->cand);
}

static int ewg_beams_alloc(const struct ewg *g, struct ewg_beams *b, int beam)
{
	memset(b, 0, sizeof(*b));
	b->cand = mem_calloc((size_t)beam * (size_t)(beam + 1), sizeof(*b->cand));
	int rc = b->cand ? 0 : -ST_NOMEM;
	for (int i = 0; !rc && i < beam; i++) {
		rc = ewg_hyp_alloc(g, &b->cur[i]);
		if (!rc)
			rc = ewg_hyp_alloc(g, &b->next[i]);
		if (!rc)
			rc = ewg_hyp_alloc(g, &b->fin[i]);
	}
	if (rc)
		ewg_beams_free(b, beam);
	return rc;
}

static int ewg_cand_cmp(const void *a, const void *b)
{
	double x = ((const struct ewg_cand *)a)->score, y = ((const struct ewg_cand *)b)->score;
	return (x < y) - (x > y); /* descending */
}

/* Each live beam proposes its beam+1 best next tokens. */
static size_t ewg_beam_expand(struct ewg *g, struct ewg_beams *b, int beam)
{
	size_t nc = 0;
	for (int i = 0; i < b->n; i++) {
		struct ewg_hyp *h = &b->cur[i];
		ewg_process(g, h->logits, h->seq, h->len);
		ewg_log_softmax(h->logits, g->logprobs, g->n_vocab);
		for (int k = 0; k <= beam; k++) {
			int32_t id = ewg_argmax(g->logprobs, g->n_vocab);
			if (g->logprobs[id] == -INFINITY)
				break;
			b->cand[nc++] = (struct ewg_cand){ h->sum_logprob + g->logprobs[id], i, id };
			g->logprobs[id] = -INFINITY;
		}
	}
	qsort(b->cand, nc, sizeof(*b->cand), ewg_cand_cmp);
	return nc;
}

/* Take candidates in score order: EOT finishes a hypothesis, others fill
 * the next generation (decoded one token further). */
static int ewg_beam_select(struct ewg *g, struct ewg_beams *b, int beam, size_t nc)
{
	int n_next = 0, rc = 0;
	for (size_t c = 0; c < nc && n_next < beam && !rc; c++) {
		const struct ewg_cand *k = &b->cand[c];
		const struct ewg_hyp *p = &b->cur[k->parent];
		if (k->token == g->tok->eot) {
			if (b->n_fin < b->max_fin) {
				struct ewg_hyp *f = &b->fin[b->n_fin++];
				memcpy(f->seq, p->seq, p->len * sizeof(*p->seq));
				f->len = p->len;
				f->sum_logprob = k->score;
			}
			continue;
		}
		struct ewg_hyp *h = &b->next[n_next++];
		rc = ewg_hyp_copy(g, h, p);
		h->sum_logprob = k->score;
		h->seq[h->len++] = k->token;
		if (!rc && h->len < g->max_steps)
			rc = ewg_decode(g, h->kv, &k->token, 1, h->logits, NULL, 0);
	}
	for (int i = 0; i < n_next; i++) { /* swap generations */
		struct ewg_hyp t = b->cur[i];
		b->cur[i] = b->next[i];
		b->next[i] = t;
	}
	b->n = n_next;
	return rc;
}

static int ewg_beam_search(struct ewg *g, struct ewg_hyp *h0, struct eng_whisper_gen_result *res)
{
	int beam = g->o->beam_size > EWG_MAX_BEAM ? EWG_MAX_BEAM : g->o->beam_size;
	struct ewg_beams b;
	int rc = ewg_beams_alloc(g, &b, beam);
	if (rc)
		return rc;
	int max_fin = (int)lround(beam * (g->o->patience > 0 ? g->o->patience : 1.0f));
	b.max_fin = max_fin < 1 ? 1 : max_fin > beam ? beam : max_fin;
	rc = ewg_hyp_copy(g, &b.cur[0], h0);
	b.n = 1;
	for (size_t step = 0; !rc && step < g->max_steps && b.n > 0 && b.n_fin < b.max_fin; step++)
		rc = ewg_beam_select(g, &b, beam, ewg_beam_expand(g, &b, beam));
	/* Unfinished beams compete too when too few finished (max length). */
	const struct ewg_hyp *best = NULL;
	for (int i = 0; i < b.n_fin; i++)
		if (!best || ewg_norm_score(&b.fin[i]) > ewg_norm_score(best))
			best = &b.fin[i];
	bool any_finished = best != NULL;
	for (int i = 0; !any_finished && i < b.n; i++)
		if (!best || ewg_norm_score(&b.cur[i]) > ewg_norm_score(best))
			best = &b.cur[i];
	if (!rc)
		rc = best ? ewg_result(best, res) : ewg_result(h0, res);
	ewg_beams_free(&b, beam);
	return rc;
}

static int ewg_search(struct ewg *g, struct ewg_hyp *h0, struct eng_whisper_gen_result *res)
{
	const struct eng_whisper_gen_opts *o = g->o;
	if (o->temperature <= 0 && o->beam_size > 1)
		return ewg_beam_search(g, h0, res);
	if (o->temperature > 0 && o->best_of > 1)
		return ewg_best_of(g, h0, res);
	int rc = ewg_run(g, h0, o->temperature);
	return rc ? rc : ewg_result(h0, res);
}

int eng_whisper_generate(const struct eng_whisper *w, const struct eng_whisper_tok *tok,
			 const struct eng_whisper_enc *e, struct dev_queue *q,
			 const int32_t *prompt, size_t n_prompt,
			 const struct eng_whisper_gen_opts *o, struct eng_whisper_gen_result *res)
{
	const struct eng_whisper_hp *hp = eng_whisper_hp(w);
	struct ewg g = { .w = w, .tok = tok, .e = e, .q = q, .o = o, .n_vocab = hp->n_vocab,
			 .rng = o->seed ? o->seed : 0x9E3779B97F4A7C15ULL };
	size_t sot_at, ctx = (size_t)hp->n_text_ctx;
	memset(res, 0, sizeof(*res));
	if (n_prompt == 0 || n_prompt >= ctx || ewg_find_sot(tok, prompt, n_prompt, &sot_at))
		return -ST_INVAL;
	/* CTranslate2: max_length = min(ctx / 2, ctx - start_step), start_step
	 * being the prompt minus its last (start) token. The last generated
	 * token is never fed back, so the cache ends at position ctx - 1. */
	g.max_steps = ctx - (n_prompt - 1) < ctx / 2 ? ctx - (n_prompt - 1) : ctx / 2;
	struct ewg_hyp h0;
	float *at = mem_alloc((size_t)g.n_vocab * sizeof(float));
	g.logprobs = mem_alloc((size_t)g.n_vocab * sizeof(float));
	int rc = (!at || !g.logprobs) ? -ST_NOMEM : ewg_hyp_alloc(&g, &h0);
	if (rc)
		goto out_free;
	rc = ewg_decode(&g, h0.kv, prompt, n_prompt, h0.logits, at, sot_at);
	if (rc)
		goto out_hyp;
	float nsp = ewg_no_speech(&g, at);
	rc = ewg_search(&g, &h0, res);
	res->no_speech_prob = nsp;
out_hyp:
	ewg_hyp_free(&h0);
out_free:
	mem_free(at);
	mem_free(g.logprobs);
	return rc;
}

void eng_whisper_gen_result_fini(struct eng_whisper_gen_result *res)
{
	mem_free(res->tokens);
	memset(res, 0, sizeof(*res));
}
