/* kernels/kn_attn.c - multi-head attention and 1-D convolution as GEMMs
 * (contract in kernels/kn_attn.h).
 *
 * Attention follows Vaswani et al. 2017, one head at a time: two sgemm
 * calls through kn_gemm with the row softmax of kn_ops() in between.
 * Convolution is im2col + one kn_linear (the Caffe/PyTorch CPU approach).
 */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "kernels/kn.h"
#include "kernels/kn_attn.h"
#include "kernels/kn_blas.h"

/* Row-wise softmax of S[n_q, n_kv]. With the causal mask, row i sees
 * keys 0..q_pos0+i only: softmax over that prefix and 0 after it, which is
 * exactly softmax with -INFINITY in the masked places (exp(-inf) = 0)
 * without spending exps on them. The precondition q_pos0 + n_q <= n_kv
 * keeps every row at least one key long. */
static void kn_attn_softmax_rows(float *S, size_t n_q, size_t n_kv, bool causal, size_t q_pos0)
{
	const struct kn_ops *ops = kn_ops();
	for (size_t i = 0; i < n_q; i++) {
		float *row = S + i * n_kv;
		size_t n_seen = causal ? q_pos0 + i + 1 : n_kv;
		if (n_seen > n_kv)
			n_seen = n_kv; /* only reachable if the precondition is broken */
		ops->softmax(row, n_seen);
		memset(row + n_seen, 0, (n_kv - n_seen) * sizeof(*row));
	}
}

void kn_attention(size_t n_q, size_t n_kv, size_t n_heads, size_t head_dim, const float *q,
		  size_t ldq, const float *k, size_t ldk, const float *v, size_t ldv, float *out,
		  size_t ldo, bool causal, size_t q_pos0, float *scratch)
{
	assert(!causal || q_pos0 + n_q <= n_kv);
	float scale = 1.0f / sqrtf((float)head_dim);
	for (size_t h = 0; h < n_heads; h++) {
		size_t off = h * head_dim;
		/* S[n_q, n_kv] = q_h k_h^T / sqrt(head_dim) */
		kn_gemm(true, n_q, n_kv, head_dim, scale, q + off, ldq, k + off, ldk, 0.0f, scratch,
			n_kv);
		kn_attn_softmax_rows(scratch, n_q, n_kv, causal, q_pos0);
		/* out_h[n_q, head_dim] = S v_h */
		kn_gemm(false, n_q, head_dim, n_kv, 1.0f, scratch, n_kv, v + off, ldv, 0.0f,
			out + off, ldo);
	}
}

size_t kn_conv1d_out_len(size_t t_in, size_t k, size_t stride, size_t pad)
{
	if (stride == 0 || t_in + 2 * pad < k)
		return 0;
	return (t_in + 2 * pad - k) / stride + 1;
}

/* cols[t - t0, ci*k + kk] = x[t*stride + kk - pad, ci] for t in [t0, t1),
 * 0 outside [0, t_in). */
static void kn_im2col(size_t t_in, size_t c_in, size_t k, size_t stride, size_t pad, size_t t0,
		      size_t t1, const float *x, float *cols)
{
	size_t width = c_in * k;
	for (size_t t = t0; t < t1; t++) {
		float *row = cols + (t - t0) * width;
		for (size_t kk = 0; kk < k; kk++) {
			size_t src = t * stride + kk; /* position in the padded input */
			bool inside = src >= pad && src - pad < t_in;
			const float *xr = inside ? x + (src - pad) * c_in : NULL;
			for (size_t ci = 0; ci < c_in; ci++)
				row[ci * k + kk] = inside ? xr[ci] : 0.0f;
		}
	}
}

void kn_conv1d(size_t t_in, size_t c_in, size_t c_out, size_t k, size_t stride, size_t pad,
	       const float *x, const float *w, const float *bias, float *y, float *scratch)
{
	kn_conv1d_rows(t_in, c_in, c_out, k, stride, pad, 0, kn_conv1d_out_len(t_in, k, stride, pad),
		       x, w, bias, y, scratch);
}

void kn_conv1d_rows(size_t t_in, size_t c_in, size_t c_out, size_t k, size_t stride, size_t pad,
		    size_t t0, size_t t1, const float *x, const float *w, const float *bias,
		    float *y, float *scratch)
{
	if (t1 <= t0)
		return;
	kn_im2col(t_in, c_in, k, stride, pad, t0, t1, x, scratch);
	/* y[t0:t1, c_out] = cols[t1-t0, c_in*k] * w[c_out, c_in*k]^T + bias */
	kn_linear(t1 - t0, c_out, c_in * k, scratch, w, bias, y + t0 * c_out);
}
