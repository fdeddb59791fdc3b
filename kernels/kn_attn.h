/* kn_attn.h - attention and convolution built on kn_gemm and the row
 * kernels. Row-major float32 throughout.
 */
#ifndef KN_ATTN_H
#define KN_ATTN_H

#include <stdbool.h>
#include <stddef.h>

/* kn_attention - multi-head scaled dot-product attention, one sequence
 * (Vaswani et al. 2017): for each head h,
 *   out_h = softmax(q_h k_h^T / sqrt(head_dim) [+ causal mask]) v_h
 * q: [n_q, n_heads*head_dim], row stride ldq; k, v: [n_kv, n_heads*head_dim],
 * strides ldk, ldv; out: [n_q, n_heads*head_dim], stride ldo (may not alias
 * q, k or v). causal: query row i is at absolute position q_pos0 + i and
 * sees keys 0..q_pos0+i only (requires q_pos0 + n_q <= n_kv).
 * scratch: at least n_q * n_kv floats. */
void kn_attention(size_t n_q, size_t n_kv, size_t n_heads, size_t head_dim,
		  const float *q, size_t ldq, const float *k, size_t ldk,
		  const float *v, size_t ldv, float *out, size_t ldo,
		  bool causal, size_t q_pos0, float *scratch);

/* kn_conv1d - 1-D convolution with zero padding (torch.nn.Conv1d):
 * x: [t_in, c_in] time-major; w: [c_out, c_in, k] (PyTorch/CTranslate2
 * layout); bias: [c_out] or NULL; y: [t_out, c_out] with
 * t_out = (t_in + 2*pad - k) / stride + 1. scratch: t_out * c_in * k floats
 * (im2col). */
void kn_conv1d(size_t t_in, size_t c_in, size_t c_out, size_t k, size_t stride, size_t pad,
	       const float *x, const float *w, const float *bias, float *y, float *scratch);

/* kn_conv1d_rows - kn_conv1d for output rows [t0, t1) only (t1 <=
 * t_out): writes y[t0:t1, :]; scratch holds (t1 - t0) * c_in * k floats.
 * Threads split the rows of one convolution this way. */
void kn_conv1d_rows(size_t t_in, size_t c_in, size_t c_out, size_t k, size_t stride, size_t pad,
		    size_t t0, size_t t1, const float *x, const float *w, const float *bias,
		    float *y, float *scratch);

/* kn_conv1d_out_len - t_out for the arguments above. */
size_t kn_conv1d_out_len(size_t t_in, size_t k, size_t stride, size_t pad);

#endif /* KN_ATTN_H */
