/* dev_cpu_attn.c - the cpu back end's causal attention (dev_attention
 * without full or ct2), split over the queue's pool by work: a prefill's
 * rows per (sequence, query head), kn_attention_window(_f16) as llama.cpp
 * computes them; a decode row (a sequence's one new token) per (KV head,
 * part of its keys: kn_dec_part's cut, parts of about equal size),
 * kn_attention_decode taking the KV head's g query heads together over
 * each part (in groups, when a batch has too few units for the threads),
 * the parts of a long cache merged after the pool's run
 * (kernels/kn_attn_dec.c). A sequence's parts depend only on its own
 * keys, so its answer is the same in any batch and on any number of
 * threads; a prompt's rows (dev_attn_seq's prompt), even one alone, are
 * prefill rows, so a prompt's answer does not depend on its cuts either.
 */
#include <stdbool.h>
#include <stdint.h>

#include "devices/dev.h"
#include "devices/dev_int.h"
#include "devices/dev_pool.h"
#include "kernels/kn_attn.h"

struct cpu_causal {
	const struct dev_attn *a;
	const struct dev_attn_seq *seqs;
	size_t n_seqs;
	float *scratch;	    /* nth regions of per floats */
	size_t per;
	float *parts, *lse; /* the parts of split decode rows, slot by slot */
	uint64_t total;	    /* the work of every unit */
	size_t hs;	    /* decode units per (KV head, part): its query heads in hs groups */
};

/* The first key a sequence's decode row sees (its window's start). */
static size_t cc_first(const struct dev_attn *a, const struct dev_attn_seq *sg)
{
	return a->window && sg->pos0 + 1 > a->window ? sg->pos0 + 1 - a->window : 0;
}

/* The keys a sequence's decode row sees. */
static size_t cc_keys(const struct dev_attn *a, const struct dev_attn_seq *sg)
{
	return sg->pos0 + 1 - cc_first(a, sg);
}

/* A decode row's parts (0: prefill rows, by query head). */
static size_t cc_parts(const struct dev_attn *a, const struct dev_attn_seq *sg)
{
	return sg->n == 1 && !sg->prompt ? kn_dec_parts(cc_keys(a, sg)) : 0;
}

/* A sequence's units: its prefill rows' query heads, or its decode
 * row's (KV head, part) pairs, each hs times (groups of query heads). */
static size_t cc_units(const struct dev_attn *a, size_t np, size_t hs)
{
	return np ? a->n_head_kv * np * hs : a->n_head;
}

/* Query heads [*h0, *h1) of a KV head's g: group j of hs. */
static void cc_group(const struct dev_attn *a, size_t hs, size_t j, size_t *h0, size_t *h1)
{
	size_t g = a->n_head / a->n_head_kv;
	*h0 = g * j / hs;
	*h1 = g * (j + 1) / hs;
}

/* The work of a sequence's unit u: a prefill head's rows times keys, or
 * a decode part's keys times the query heads that take them. */
static uint64_t cc_cost(const struct dev_attn *a, const struct dev_attn_seq *sg, size_t np,
			size_t hs, size_t u)
{
	if (np == 0)
		return (uint64_t)sg->n * (sg->pos0 + sg->n);
	size_t lo, hi, h0, h1;
	kn_dec_part(cc_keys(a, sg), u / hs % np, &lo, &hi);
	cc_group(a, hs, u % hs, &h0, &h1);
	return (uint64_t)(h1 - h0) * (hi - lo);
}

/* KV head kh's column 0 in a sequence's cache, in elements. */
static size_t cc_head(const struct dev_attn *a, const struct dev_attn_seq *sg, size_t kh)
{
	return kh * (sg->hs ? sg->hs : a->head_dim);
}

/* Parts p .. p + m - 1 of n_parts of KV head kh of sequence sg's decode
 * row, for its query heads [h0, h1) (m 1 unless they are all g): into its
 * row of out (one part), or into the places of slots slot .. slot + m - 1
 * in t->parts. */
static void cc_decode(const struct cpu_causal *t, const struct dev_attn_seq *sg, size_t kh,
		      size_t p, size_t m, size_t n_parts, size_t slot, size_t h0, size_t h1,
		      float *scratch)
{
	const struct dev_attn *a = t->a;
	size_t hd = a->head_dim, g = a->n_head / a->n_head_kv, at = cc_head(a, sg, kh);
	size_t qh = kh * g + h0; /* the group's first query head */
	struct kn_dec d = { .g = h1 - h0, .head_dim = hd, .q = a->q + sg->r0 * a->ldq + qh * hd,
			    .ldk = a->ldk, .ldv = a->ldv, .scale = a->scale,
			    .softcap = a->softcap };
	if (a->kv_type == 1) {
		d.k16 = (const uint16_t *)sg->k + at;
		d.v16 = (const uint16_t *)sg->v + at;
	} else {
		d.k = (const float *)sg->k + at;
		d.v = (const float *)sg->v + at;
	}
	if (n_parts == 1)
		kn_attention_decode_parts(&d, cc_first(a, sg), cc_keys(a, sg), 0, 1,
					  a->out + sg->r0 * a->ldo + qh * hd, NULL, scratch);
	else
		kn_attention_decode_parts(&d, cc_first(a, sg), cc_keys(a, sg), p, m,
					  t->parts + (slot * g + h0) * hd, t->lse + slot * g + h0,
					  scratch);
}

/* Query head h of sequence sg's prefill rows. */
static void cc_prefill(const struct cpu_causal *t, const struct dev_attn_seq *sg, size_t h,
		       float *scratch)
{
	const struct dev_attn *a = t->a;
	size_t hd = a->head_dim, at = cc_head(a, sg, h / (a->n_head / a->n_head_kv));
	const float *qr = a->q + sg->r0 * a->ldq + h * hd;
	float *o = a->out + sg->r0 * a->ldo + h * hd;
	if (a->kv_type == 1)
		kn_attention_window_f16(sg->n, sg->pos0 + sg->n, 1, hd, qr, a->ldq,
					(const uint16_t *)sg->k + at, a->ldk,
					(const uint16_t *)sg->v + at, a->ldv, o, a->ldo, sg->pos0,
					a->window, a->scale, a->softcap, scratch);
	else
		kn_attention_window(sg->n, sg->pos0 + sg->n, 1, hd, qr, a->ldq,
				    (const float *)sg->k + at, a->ldk, (const float *)sg->v + at,
				    a->ldv, o, a->ldo, sg->pos0, a->window, a->scale, a->softcap,
				    scratch);
}

/* The units in one fixed order, each taken by the thread whose share of
 * the total work its start falls in (a decode batch mixes sequences of a
 * few and of thousands of keys: an even count of units left one thread
 * waiting); a thread's parts of one KV head in a row, up to KN_DEC_GROUP,
 * in one call (kn_attention_decode_parts: their keys, then their
 * values). A decode batch of fewer units than twice the threads (one
 * short sequence: Gemma 3's one KV head is one unit below 128 keys, and
 * the second thread waited through it) splits each KV head's query heads
 * into t->hs groups, each its own unit: a head's numbers do not depend
 * on the others in its call (kn_ops dot_rows_g, gemv_t_g), so the bits
 * are the same. */
static void cc_run(void *arg, int ith, int nth)
{
	const struct cpu_causal *t = arg;
	const struct dev_attn *a = t->a;
	float *scratch = t->scratch + (size_t)ith * t->per;
	uint64_t lo = t->total * (unsigned)ith / (unsigned)nth;
	uint64_t hi = t->total * (unsigned)(ith + 1) / (unsigned)nth, at = 0;
	size_t slot = 0;
	for (size_t s = 0; s < t->n_seqs; s++) {
		const struct dev_attn_seq *sg = &t->seqs[s];
		size_t np = cc_parts(a, sg), hs = t->hs, n_units = cc_units(a, np, hs);
		for (size_t u = 0; u < n_units;) {
			bool mine = at >= lo && at < hi;
			size_t m = 1, h0, h1;
			at += cc_cost(a, sg, np, hs, u);
			if (mine && np == 0) {
				cc_prefill(t, sg, u, scratch);
			} else if (mine) {
				while (hs == 1 && m < KN_DEC_GROUP && u + m < n_units &&
				       (u + m) / np == u / np && at < hi)
					at += cc_cost(a, sg, np, hs, u + m++);
				cc_group(a, hs, u % hs, &h0, &h1);
				cc_decode(t, sg, u / hs / np, u / hs % np, m, np, slot + u / hs, h0, h1,
					  scratch);
			}
			u += m;
		}
		if (np > 1)
			slot += a->n_head_kv * np;
	}
}

/* Each split decode row's parts into its rows of out. */
static void cc_merge(const struct cpu_causal *t)
{
	const struct dev_attn *a = t->a;
	size_t hd = a->head_dim, g = a->n_head / a->n_head_kv, slot = 0;
	for (size_t s = 0; s < t->n_seqs; s++) {
		const struct dev_attn_seq *sg = &t->seqs[s];
		size_t np = cc_parts(a, sg);
		if (np < 2)
			continue;
		for (size_t kh = 0; kh < a->n_head_kv; kh++, slot += np)
			kn_attention_decode_merge(g, hd, np, t->parts + slot * g * hd,
						  t->lse + slot * g,
						  a->out + sg->r0 * a->ldo + kh * g * hd);
	}
}

/* Per-thread scratch floats, and the slots of split decode rows. */
static size_t cc_sizes(const struct dev_attn *a, const struct dev_attn_seq *seqs, size_t n_seqs,
		       size_t *slots)
{
	size_t per = kn_attention_decode_scratch(a->n_head / a->n_head_kv);
	*slots = 0;
	for (size_t s = 0; s < n_seqs; s++) {
		size_t np = cc_parts(a, &seqs[s]);
		/* kn_attention_window(_f16)'s scratch */
		size_t need = seqs[s].n * (seqs[s].pos0 + seqs[s].n) + KN_WIN16_CHUNK * a->head_dim;
		if (np == 0 && need > per)
			per = need;
		if (np > 1)
			*slots += a->n_head_kv * np;
	}
	return per;
}

size_t dev__cpu_causal_floats(int nth, const struct dev_attn *a, const struct dev_attn_seq *seqs,
			      size_t n_seqs)
{
	size_t slots, per = cc_sizes(a, seqs, n_seqs, &slots);
	return per * (size_t)nth + slots * (a->n_head / a->n_head_kv) * (a->head_dim + 1);
}

void dev__cpu_causal(struct dev_pool *p, const struct dev_attn *a,
		     const struct dev_attn_seq *seqs, size_t n_seqs, float *buf)
{
	size_t slots, per = cc_sizes(a, seqs, n_seqs, &slots);
	size_t nth = (size_t)dev_pool_size(p), g = a->n_head / a->n_head_kv;
	struct cpu_causal t = { .a = a, .seqs = seqs, .n_seqs = n_seqs, .scratch = buf,
				.per = per, .parts = buf + per * nth };
	t.lse = t.parts + slots * g * a->head_dim;
	size_t units = 0;
	for (size_t s = 0; s < n_seqs; s++) {
		size_t np = cc_parts(a, &seqs[s]);
		units += np ? cc_units(a, np, 1) : 2 * nth; /* a prefill: never split */
	}
	t.hs = nth > 1 && units && units < 2 * nth ? (4 * nth + units - 1) / units : 1;
	t.hs = t.hs < g ? t.hs : g;
	for (size_t s = 0; s < n_seqs; s++) {
		size_t np = cc_parts(a, &seqs[s]), n_units = cc_units(a, np, t.hs);
		for (size_t u = 0; u < n_units; u++)
			t.total += cc_cost(a, &seqs[s], np, t.hs, u);
	}
	dev_pool_run(p, cc_run, &t);
	if (slots)
		cc_merge(&t);
}
