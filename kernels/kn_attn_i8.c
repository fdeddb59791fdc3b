/* kernels/kn_attn_i8.c - encoder self-attention on the int8 products of
 * kn_i8.h (contract in kernels/kn_attn.h).
 *
 * The same blocks as kn_attention (Vaswani et al. 2017, one head at a
 * time, KN_ATTN_ROWS query rows per block so that the block's scores stay
 * in cache), with both matrix products dynamically quantized the way
 * kn_i8.h quantizes a linear: the first product takes the head's keys as
 * its "weights" (one scale per key), the second the head's values
 * transposed (one scale per head dimension, over all keys). Queries are
 * quantized per row at the variant's x_max; probabilities, never
 * negative, per row at 127 as the softmax computes them (kn_ops
 * softmax_i8) into gemm_u8 (on AVX2: u8 codes, no sign trick), since with
 * both at 7 bits (avx2-x7) the test clips lost two words and with either
 * at 8 bits none. The scaling by 1 / sqrt(head_dim) rides on the query
 * scales; softmax is float32.
 */
#include <math.h>
#include <string.h>

#include "kernels/kn.h"
#include "kernels/kn_attn.h"
#include "kernels/kn_i8.h"
#include "kernels/kn_int.h"

/* Bytes of each part of the scratch, in order, each rounded up to 64. */
struct kn_ai8_parts {
	size_t kp, kf, vp, vf, stage, wq, qq, qs, S, pq, ps;
};

static size_t kn_ai8_r64(size_t n)
{
	return (n + 63) & ~(size_t)63;
}

static struct kn_ai8_parts kn_ai8_sizes(size_t n_kv, size_t hd)
{
	size_t kn = kn_i8_npad(n_kv), kk = kn_i8_kpad(hd);
	size_t vn = kn_i8_npad(hd), vk = kn_i8_kpad(n_kv), R = KN_ATTN_ROWS;
	struct kn_ai8_parts s = {
		.kp = kn_ai8_r64(kn * kk),
		.kf = kn_ai8_r64(kn * (sizeof(float) + sizeof(int32_t))),
		.vp = kn_ai8_r64(vn * vk),
		.vf = kn_ai8_r64(vn * (sizeof(float) + sizeof(int32_t))),
		.stage = kn_ai8_r64(n_kv * hd * sizeof(float)),
		.wq = kn_ai8_r64(kk > vk ? kk : vk),
		.qq = kn_ai8_r64(R * kk),
		.qs = kn_ai8_r64(R * sizeof(float)),
		.S = kn_ai8_r64(R * n_kv * sizeof(float)),
		.pq = kn_ai8_r64(R * vk),
		.ps = kn_ai8_r64(R * sizeof(float)),
	};
	return s;
}

size_t kn_attention_i8_scratch(size_t n_kv, size_t head_dim)
{
	struct kn_ai8_parts s = kn_ai8_sizes(n_kv, head_dim);
	return s.kp + s.kf + s.vp + s.vf + s.stage + s.wq + s.qq + s.qs + s.S + s.pq + s.ps + 64;
}

void kn_attention_i8(size_t n_q, size_t n_kv, size_t n_heads, size_t head_dim, const float *q,
		     size_t ldq, const float *k, size_t ldk, const float *v, size_t ldv,
		     float *out, size_t ldo, void *scratch)
{
	const struct kn_ops *ops = kn_ops();
	const struct kn_i8_ops *i8 = kn_i8_ops();
	struct kn_ai8_parts s = kn_ai8_sizes(n_kv, head_dim);
	size_t kn = kn_i8_npad(n_kv), vn = kn_i8_npad(head_dim);
	size_t kk = kn_i8_kpad(head_dim), vk = kn_i8_kpad(n_kv);
	uint8_t *p = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
	int8_t *kp = (int8_t *)p;
	float *ksc = (float *)(p += s.kp);
	int32_t *kcomp = (int32_t *)(ksc + kn);
	int8_t *vp = (int8_t *)(p += s.kf);
	float *vsc = (float *)(p += s.vp);
	int32_t *vcomp = (int32_t *)(vsc + vn);
	float *stage = (float *)(p += s.vf);
	int8_t *wq = (int8_t *)(p += s.stage);
	int8_t *qq = (int8_t *)(p += s.wq);
	float *qs = (float *)(p += s.qq);
	float *S = (float *)(p += s.qs);
	int8_t *pq = (int8_t *)(p += s.S);
	float *ps = (float *)(p += s.pq);
	float scale = 1.0f / sqrtf((float)head_dim);
	const struct kn_i8w kw = { kp, ksc, kcomp, n_kv, head_dim };
	const struct kn_i8w vw = { vp, vsc, vcomp, head_dim, n_kv };

	for (size_t h = 0; h < n_heads; h++) {
		size_t off = h * head_dim;
		/* keys [n_kv, hd] and values transposed [hd, n_kv] as weights */
		for (size_t j = 0; j < n_kv; j++)
			memcpy(stage + j * head_dim, k + j * ldk + off, head_dim * sizeof(float));
		kn_i8_quantize_w(stage, n_kv, head_dim, kp, ksc, kcomp, wq);
		for (size_t j = 0; j < n_kv; j++)
			for (size_t c = 0; c < head_dim; c++)
				stage[c * n_kv + j] = v[j * ldv + off + c];
		kn_i8_quantize_w(stage, head_dim, n_kv, vp, vsc, vcomp, wq);
		for (size_t i0 = 0; i0 < n_q; i0 += KN_ATTN_ROWS) {
			size_t rows = n_q - i0 < KN_ATTN_ROWS ? n_q - i0 : KN_ATTN_ROWS;
			/* S = q k^T / sqrt(hd), the scale folded into the query's */
			i8->quantize_rows(q + i0 * ldq + off, ldq, rows, head_dim, qq, kk, qs);
			for (size_t i = 0; i < rows; i++)
				qs[i] *= scale;
			i8->gemm(rows, 0, n_kv, qq, kk, qs, &kw, NULL, S, n_kv);
			/* out_h = P v, P quantized as the softmax computes it */
			for (size_t i = 0; i < rows; i++)
				ops->softmax_i8(S + i * n_kv, n_kv, pq + i * vk, vk, &ps[i]);
			i8->gemm_u8(rows, 0, head_dim, pq, vk, ps, &vw, NULL, out + i0 * ldo + off,
				    ldo);
		}
	}
}
