/* kernels/kn_attn_dec.c - one decode step's attention for a group of
 * query heads sharing one KV head, over a part of its keys, and the merge
 * of such parts (contract in kernels/kn_attn.h).
 *
 * Grouped-query attention (Ainslie et al. 2023) gives g query heads one
 * KV head. A decode step's attention is bound by reading that head's keys
 * and values, so the g heads take a part of them together (up to
 * KN_DEC_PART keys): with a float32 cache each key and each value row is
 * loaded once for all g heads (kn_ops dot_rows_g, gemv_t_g), so the
 * memory streams while the heads compute; a head at a time (the first
 * form) read the part from memory for the first head and from L2 for the
 * others, the memory idle meanwhile (SmolLM2's 3 heads over 128 keys of
 * 64: 42 ns a key from memory, 17.5 from L2). A float16 cache takes its
 * scores so too (kn_ops dot_rows_g_f16, each head's numbers gemv_f16's
 * bits) and its values a head at a time while the part is in the caches
 * (gemv_t_f16: a form that widened each value row once for 3 heads ran
 * slower, one thread, 62 against 60 us a layer of SmolLM2 after 650 keys,
 * 130 against 104 for Gemma 3, from memory; the scores grouped gave 2 %
 * in a decode at depth 600). A long cache is split into parts that
 * threads run at once, each part normalized on its own with its
 * log-sum-exp kept and the parts merged by those weights:
 * flash-decoding's split of the keys (Dao et al. 2023, "Flash-Decoding
 * for long-context inference"), exact up to float rounding. One part
 * computes kn_attention_window(_f16)'s numbers for its one row within
 * float rounding (the scores summed in another order, the values' sums
 * without the GEMM's packing).
 * A thread with several parts of one KV head in a row takes them together
 * (kn_attention_decode_parts): every part's keys, then every part's
 * values, so that each is one stream from memory instead of a switch
 * between the two every part (SmolLM2's 3 heads after 650 keys, one
 * thread, the cache from memory: about 80 against 100 us a layer).
 */
#include <math.h>
#include <string.h>

#include "kernels/kn.h"
#include "kernels/kn_attn.h"

size_t kn_attention_decode_scratch(size_t g)
{
	return g * KN_DEC_PART * KN_DEC_GROUP;
}

/* The g heads' scaled scores over keys [lo, hi) into S [g, hi - lo]. */
static void ad_scores(const struct kn_dec *d, size_t lo, size_t hi, float *S)
{
	const struct kn_ops *ops = kn_ops();
	size_t n = hi - lo, hd = d->head_dim;
	if (d->k16) { /* gemv_f16's scores of each head, then their scale */
		ops->dot_rows_g_f16(d->q, hd, d->g, d->k16 + lo * d->ldk, d->ldk, n, hd, S, n);
		for (size_t h = 0; h < d->g; h++)
			ops->scale_add(S + h * n, d->scale, NULL, n);
	} else { /* the g heads' scores, each key read once for all */
		ops->dot_rows_g(d->q, hd, d->g, d->k + lo * d->ldk, d->ldk, n, hd, d->scale, S, n);
	}
}

/* S's g rows of n scores soft-capped, then turned into weights, their
 * log-sum-exps into lse (or not: NULL) from the same exps (kn_ops
 * softmax_lse: a logsumexp, then a softmax, took the exps twice and the
 * row's tail in scalar libm calls: 155 against 70 ns a row of 120 scores
 * at AVX-512, and a SmolLM2 step at depth 600 has 1350 such rows, about
 * 60 of its 3900 us on two threads). */
static void ad_weights(const struct kn_dec *d, size_t n, float *S, float *lse)
{
	const struct kn_ops *ops = kn_ops();
	for (size_t h = 0; h < d->g; h++) {
		float *row = S + h * n;
		if (d->softcap > 0.0f)
			kn_softcap(row, n, d->softcap);
		float l = ops->softmax_lse(row, n);
		if (lse)
			lse[h] = l;
	}
}

/* out [g, head_dim] = the weights S [g, hi - lo] times values [lo, hi). */
static void ad_values(const struct kn_dec *d, size_t lo, size_t hi, const float *S, float *out)
{
	const struct kn_ops *ops = kn_ops();
	size_t n = hi - lo, hd = d->head_dim;
	if (d->v16) { /* the values a head at a time */
		for (size_t h = 0; h < d->g; h++)
			ops->gemv_t_f16(d->v16 + lo * d->ldv, d->ldv, S + h * n, out + h * hd, n, hd);
	} else { /* each value row read once for the g heads */
		ops->gemv_t_g(S, n, d->g, d->v + lo * d->ldv, d->ldv, n, hd, out, hd);
	}
}

void kn_attention_decode(const struct kn_dec *d, size_t lo, size_t hi, float *out, float *lse,
			 float *scratch)
{
	ad_scores(d, lo, hi, scratch);
	ad_weights(d, hi - lo, scratch, lse);
	ad_values(d, lo, hi, scratch, out);
}

void kn_attention_decode_parts(const struct kn_dec *d, size_t first, size_t n, size_t p0,
			       size_t m, float *out, float *lse, float *scratch)
{
	size_t lo[KN_DEC_GROUP], hi[KN_DEC_GROUP], g = d->g;
	for (size_t i = 0; i < m; i++) {
		kn_dec_part(n, p0 + i, &lo[i], &hi[i]);
		lo[i] += first;
		hi[i] += first;
		ad_scores(d, lo[i], hi[i], scratch + i * g * KN_DEC_PART);
	}
	for (size_t i = 0; i < m; i++)
		ad_weights(d, hi[i] - lo[i], scratch + i * g * KN_DEC_PART, lse ? lse + i * g : NULL);
	for (size_t i = 0; i < m; i++)
		ad_values(d, lo[i], hi[i], scratch + i * g * KN_DEC_PART, out + i * g * d->head_dim);
}

void kn_attention_decode_merge(size_t g, size_t head_dim, size_t n_parts, const float *parts,
			       const float *lse, float *out)
{
	for (size_t h = 0; h < g; h++) {
		float top = -INFINITY, sum = 0.0f, *o = out + h * head_dim;
		for (size_t p = 0; p < n_parts; p++)
			top = lse[p * g + h] > top ? lse[p * g + h] : top;
		memset(o, 0, head_dim * sizeof(*o));
		for (size_t p = 0; p < n_parts; p++) {
			/* every part has a key, so the largest weight is 1 */
			float w = isinf(top) ? 1.0f : expf(lse[p * g + h] - top);
			const float *x = parts + (p * g + h) * head_dim;
			sum += w;
			for (size_t i = 0; i < head_dim; i++)
				o[i] += w * x[i];
		}
		for (size_t i = 0; i < head_dim; i++)
			o[i] /= sum;
	}
}
