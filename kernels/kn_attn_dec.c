/* kernels/kn_attn_dec.c - one decode step's attention for a group of
 * query heads sharing one KV head, over a part of its keys, and the merge
 * of such parts (contract in kernels/kn_attn.h).
 *
 * Grouped-query attention (Ainslie et al. 2023) gives g query heads one
 * KV head. A decode step's attention is bound by reading that head's keys
 * and values, so the g heads take a part of them in turn while it is in
 * the caches (up to KN_DEC_PART keys: Gemma 3's 256-wide head makes a
 * part 128 KiB of float32 keys, inside a 1 MiB L2), instead of each head sweeping
 * the whole cache. A long cache is split into parts that threads run at
 * once, each part normalized on its own with its log-sum-exp kept and the
 * parts merged by those weights: flash-decoding's split of the keys (Dao
 * et al. 2023, "Flash-Decoding for long-context inference"), exact up to
 * float rounding. One part computes what kn_attention_window computes for
 * its one row, bit for bit.
 */
#include <math.h>
#include <string.h>

#include "kernels/kn.h"
#include "kernels/kn_attn.h"
#include "kernels/kn_blas.h"

size_t kn_attention_decode_scratch(size_t g)
{
	return g * KN_DEC_PART;
}

void kn_attention_decode(const struct kn_dec *d, size_t lo, size_t hi, float *out, float *lse,
			 float *scratch)
{
	const struct kn_ops *ops = kn_ops();
	size_t n = hi - lo, hd = d->head_dim;
	for (size_t h = 0; h < d->g; h++) {
		float *row = scratch + h * n;
		if (d->k16) {
			ops->gemv_f16(d->k16 + lo * d->ldk, d->ldk, d->q + h * hd, row, n, hd);
			ops->scale_add(row, d->scale, NULL, n);
		} else {
			ops->dot_rows(d->q + h * hd, d->k + lo * d->ldk, d->ldk, n, hd, d->scale, row);
		}
		if (d->softcap > 0.0f)
			kn_softcap(row, n, d->softcap);
		if (lse)
			lse[h] = (float)ops->logsumexp(row, n);
		ops->softmax(row, n);
	}
	for (size_t h = 0; h < d->g; h++) {
		const float *p = scratch + h * n;
		if (d->v16)
			ops->gemv_t_f16(d->v16 + lo * d->ldv, d->ldv, p, out + h * hd, n, hd);
		else
			kn_gemm(false, 1, hd, n, 1.0f, p, n, d->v + lo * d->ldv, d->ldv, 0.0f,
				out + h * hd, hd);
	}
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
