/* kn_attn.h - attention and convolution built on kn_gemm and the row
 * kernels. Row-major float32 throughout.
 */
#ifndef KN_ATTN_H
#define KN_ATTN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* kn_attention_bf16 - kn_attention without a mask, both products in
 * bfloat16 (kn_bf16.h: q, k, the probabilities and v rounded to bfloat16,
 * sums in float32; the scaling and softmax in float32), for the
 * "bfloat16" compute type. Needs kn_bf16_ok(). scratch: at least
 * kn_attention_bf16_scratch(n_kv, head_dim) floats, any alignment. */
void kn_attention_bf16(size_t n_q, size_t n_kv, size_t n_heads, size_t head_dim,
		       const float *q, size_t ldq, const float *k, size_t ldk, const float *v,
		       size_t ldv, float *out, size_t ldo, float *scratch);
size_t kn_attention_bf16_scratch(size_t n_kv, size_t head_dim);

/* kn_attention_i8 - kn_attention without a mask, both products on the
 * int8 path of kn_i8.h (kn_i8_ops(), the "int8" compute types): per head,
 * the keys quantized per key and the values per head dimension (codes in
 * [-127, 127], as weights are), the queries per row at the variant's
 * x_max, the softmax probabilities per row at 127 (kn_ops softmax_i8,
 * then gemm_u8); scores and softmax in float32.
 * scratch: kn_attention_i8_scratch(n_kv, head_dim) bytes, any alignment. */
void kn_attention_i8(size_t n_q, size_t n_kv, size_t n_heads, size_t head_dim, const float *q,
		     size_t ldq, const float *k, size_t ldk, const float *v, size_t ldv,
		     float *out, size_t ldo, void *scratch);
size_t kn_attention_i8_scratch(size_t n_kv, size_t head_dim);

/* A bfloat16 cache of attention keys and values (a decode step's
 * cross-attention over the encoder output, kept in bfloat16 when the
 * encoder runs in it, as CTranslate2's bfloat16 compute types keep their
 * activations), laid out for reading each head in one sweep: first the
 * keys, per head in blocks of KN_KV16_BLOCK keys, each block [head_dim]
 * [KN_KV16_BLOCK] (key j of the block at column j; keys past n_kv zero),
 * then the values, per head [n_kv][head_dim]. kn_kv16_len - its uint16_t
 * elements. kn_kv16_pack - fill it from float32 keys kv[j * ldkv + c] and
 * values kv[j * ldkv + d + c] (c < d = n_heads * head_dim), rounded to
 * nearest even. */
#define KN_KV16_BLOCK 64
size_t kn_kv16_len(size_t n_kv, size_t n_heads, size_t head_dim);
/* kn_kv16_scratch - floats of scratch kn_attention_kv16 needs: n_kv
 * rounded up to KN_KV16_BLOCK. */
size_t kn_kv16_scratch(size_t n_kv);
void kn_kv16_pack(const float *kv, size_t ldkv, size_t n_kv, size_t n_heads, size_t head_dim,
		  uint16_t *cache);
/* kn_kv16_pack_heads - kn_kv16_pack of heads [h0, h1) only (the rest of
 * cache untouched): threads packing disjoint head ranges fill it all. */
void kn_kv16_pack_heads(const float *kv, size_t ldkv, size_t n_kv, size_t n_heads,
			size_t head_dim, size_t h0, size_t h1, uint16_t *cache);

/* kn_attention_kv16 - kn_attention without a mask, heads [h0, h1) of
 * n_heads, for a few query rows against such a cache: per head and query
 * row, scores = q k^T / sqrt(head_dim), softmax, out = p v, each product
 * a kn_ops gemv_t_bf16 (no horizontal sums), float32 throughout. q, out:
 * rows of n_heads * head_dim (head h at column h * head_dim), strides ldq,
 * ldo. scratch: kn_kv16_scratch(n_kv) floats. */
void kn_attention_kv16(size_t n_q, size_t n_kv, size_t n_heads, size_t head_dim, size_t h0,
		       size_t h1, const float *q, size_t ldq, const uint16_t *cache, float *out,
		       size_t ldo, float *scratch);

/* kn_attention_scores - one head's scores before the softmax, out[i][j] =
 * q_i k_j^T / sqrt(head_dim) for key j < n_cols: the numbers kn_attention
 * turns into probabilities (Whisper's word alignment reads them from its
 * cross-attention heads, as CTranslate2's align() does). q, k: column 0
 * of the head, strides ldq, ldk; out [n_q, n_cols], stride ldo. */
void kn_attention_scores(size_t n_q, size_t n_cols, size_t head_dim, const float *q,
			 size_t ldq, const float *k, size_t ldk, float *out, size_t ldo);

/* kn_attention_scores_kv16 - kn_attention_scores of head h against a
 * kn_kv16_pack cache of n_kv keys (keys j < n_cols <= n_kv), the products
 * kn_attention_kv16 computes. q: query rows (head h at column h *
 * head_dim), stride ldq. */
void kn_attention_scores_kv16(size_t n_q, size_t n_kv, size_t n_cols,
			      size_t head_dim, size_t h, const float *q, size_t ldq,
			      const uint16_t *cache, float *out, size_t ldo);

/* kn_attention_window - kn_attention where causal query row i (absolute
 * position q_pos0 + i) sees only keys in [q_pos0 + i + 1 - window,
 * q_pos0 + i] (sliding-window attention as llama.cpp's
 * LLAMA_SWA_TYPE_STANDARD: key position k is masked when
 * (q_pos0 + i) - k >= window); window 0 means no window. Keys are at
 * absolute positions 0 .. n_kv-1. Requires causal semantics. softcap > 0
 * caps the scaled scores before the softmax as gemma2 does (llama.cpp's
 * attn_soft_cap: s = softcap tanh(s / softcap)); 0: no cap.
 * scratch: at least n_q * n_kv floats, as for kn_attention. */
void kn_attention_window(size_t n_q, size_t n_kv, size_t n_heads, size_t head_dim,
			 const float *q, size_t ldq, const float *k, size_t ldk,
			 const float *v, size_t ldv, float *out, size_t ldo,
			 size_t q_pos0, size_t window, float scale, float softcap, float *scratch);

/* One decode step's attention (a single query row at position p) for
 * the g query heads that share one KV head (grouped-query attention;
 * g = 1 without it), over the keys [lo, hi) it sees or a part of them:
 * q: the g heads' rows, head_dim floats apart (a token's query row from
 * the group's first head); keys and values: float32 (k, v; k16, v16 NULL)
 * or IEEE binary16 (k16, v16; k, v NULL), column 0 of the KV head, key j
 * at row j, rows ldk / ldv apart; scale and softcap as for
 * kn_attention_window. */
struct kn_dec {
	size_t g, head_dim;
	const float *q;
	const float *k, *v;
	const uint16_t *k16, *v16;
	size_t ldk, ldv;
	float scale, softcap;
};

/* The most keys in a part of a long cache. A caller splitting the keys
 * over threads cuts the n keys a row sees into kn_dec_parts(n) parts of
 * about equal size (kn_dec_part), whatever else it runs, so that a
 * sequence's answer does not depend on its batch or the thread count,
 * and a part's work is about any other's (parts of 256, the last one
 * shorter, left one of two threads waiting on the other for a third of
 * SmolLM2's attention after a 600-token prompt: 3 KV heads, 9 parts). */
#define KN_DEC_PART 128

/* kn_dec_parts - the parts n keys (n >= 1) are cut into. */
static inline size_t kn_dec_parts(size_t n)
{
	return (n + KN_DEC_PART - 1) / KN_DEC_PART;
}

/* kn_dec_part - part p of kn_dec_parts(n): keys [*lo, *hi) of the n,
 * counted from the row's first key; 1 .. KN_DEC_PART of them. */
static inline void kn_dec_part(size_t n, size_t p, size_t *lo, size_t *hi)
{
	size_t np = kn_dec_parts(n);
	*lo = n * p / np;
	*hi = n * (p + 1) / np;
}

/* kn_attention_decode - out [g, head_dim] (rows head_dim apart) = each
 * head's softmax(scale q k^T) v over keys [lo, hi) (hi - lo in 1 ..
 * KN_DEC_PART); lse: NULL, or g floats: each head's log sum exp of its
 * scores (soft-capped), the part's weight in kn_attention_decode_merge.
 * kn_attention_window(_f16)'s numbers for the one row over those keys
 * within float rounding (another order of sums). scratch:
 * kn_attention_decode_scratch(g) floats. */
void kn_attention_decode(const struct kn_dec *d, size_t lo, size_t hi, float *out, float *lse,
			 float *scratch);
size_t kn_attention_decode_scratch(size_t g);

/* The most parts kn_attention_decode_parts takes at once. */
#define KN_DEC_GROUP 8

/* kn_attention_decode_parts - kn_attention_decode for parts p0 .. p0 + m
 * - 1 (m in 1 .. KN_DEC_GROUP) of the n keys from key first (part i
 * over kn_dec_part(n, p0 + i)'s keys, offset by first): part i's out at
 * out + i g head_dim, its lse (unless NULL) at lse + i g, the same bits
 * as m calls of kn_attention_decode. Every part's keys are read before
 * any part's values. scratch: kn_attention_decode_scratch(g) floats. */
void kn_attention_decode_parts(const struct kn_dec *d, size_t first, size_t n, size_t p0,
			       size_t m, float *out, float *lse, float *scratch);

/* kn_attention_decode_merge - out [g, head_dim] from n_parts parts of
 * one step's keys, each kn_attention_decode's out (parts: n_parts * g
 * rows of head_dim, part p's head h at row p * g + h) and lse (n_parts *
 * g floats, likewise): each part weighted by exp(lse - the largest),
 * normalized by the weights' sum. */
void kn_attention_decode_merge(size_t g, size_t head_dim, size_t n_parts, const float *parts,
			       const float *lse, float *out);

/* kn_attention_window_f16 - kn_attention_window over keys and values
 * stored as IEEE binary16 (an LLM's float16 KV cache, llama.cpp's default
 * cache type): q, out and every product and sum float32, the cached values
 * widened exactly (kn_half.h), KN_WIN16_CHUNK keys at a time for GEMMs
 * (the values' products summed chunk by chunk); a row's bits do not
 * depend on how many rows are computed together. scratch: n_q * n_kv + KN_WIN16_CHUNK * head_dim floats. */
#define KN_WIN16_CHUNK 256
void kn_attention_window_f16(size_t n_q, size_t n_kv, size_t n_heads, size_t head_dim,
			     const float *q, size_t ldq, const uint16_t *k, size_t ldk,
			     const uint16_t *v, size_t ldv, float *out, size_t ldo,
			     size_t q_pos0, size_t window, float scale, float softcap,
			     float *scratch);

/* kn_softcap - x[i] = cap tanh(x[i] / cap) for i < n (cap > 0), in
 * ggml's operations (scale by 1 / cap, tanh, scale by cap): gemma2's
 * soft-capped attention scores and logits. Scalar (tanhf). */
void kn_softcap(float *x, size_t n, float cap);

/* kn_rope_angles, kn_rope_apply - rotary position embedding (Su et al.
 * 2021, RoFormer) in place on x [n_tok, ld] holding n_head heads of
 * head_dim floats at column h * head_dim; token t is at position pos[t].
 * The first n_rot dims of each head rotate with theta_j = pos *
 * base^(-2j / n_rot):
 *   neox false (llama.cpp LLAMA_ROPE_TYPE_NORM): pairs (2j, 2j+1);
 *   neox true  (LLAMA_ROPE_TYPE_NEOX, gemma, qwen2): pairs (j, j + n_rot/2).
 * freq_scale multiplies positions (1 = none); freq_factors, when not
 * NULL, divides theta_j by freq_factors[j] (j < n_rot / 2: llama 3's
 * rope_freqs.weight, ggml_rope_ext's freq_factors). The angles are computed
 * once (kn_rope_angles) for rows that several tensors rotate by (q and k
 * of every layer with the same base), then applied to each
 * (kn_rope_apply). Scalar: cheap next to the matrix products.
 *
 * kn_rope_angles: cs[t * n_rot + 2j] = cos theta_j(pos[t]),
 * cs[t * n_rot + 2j + 1] = its sine, for j < n_rot / 2 (n_rot even);
 * cs holds n_tok * n_rot floats. */
void kn_rope_angles(float *cs, size_t n_tok, size_t n_rot, const int32_t *pos, float base,
		    float freq_scale, const float *freq_factors);

/* kn_rope_apply: rotates x by the angles cs of kn_rope_angles (the same
 * n_tok and n_rot). */
void kn_rope_apply(float *x, size_t n_tok, size_t ld, size_t n_head, size_t head_dim,
		   size_t n_rot, const float *cs, bool neox);

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
