/* kernels/kn_attn.c - multi-head attention and 1-D convolution as GEMMs
 * (contract in kernels/kn_attn.h).
 *
 * Attention follows Vaswani et al. 2017, one head at a time: two sgemm
 * calls through kn_gemm with the row softmax of kn_ops() in between.
 * Sliding-window attention runs the same two GEMMs per block of query
 * rows, restricted to the keys that block can see. RoPE is a scalar loop
 * with its angles in double.
 * Convolution is im2col + one kn_linear (the Caffe/PyTorch CPU approach).
 */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "kernels/kn.h"
#include "kernels/kn_attn.h"
#include "kernels/kn_bf16.h"
#include "kernels/kn_blas.h"
#include "kernels/kn_int.h"

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
		/* Query rows in blocks, so that a block's scores stay in cache
		 * from the first product through the softmax to the second (a
		 * 1500 x 1500 encoder head is 9 MB); each row's result is the
		 * same whatever the block. */
		for (size_t i0 = 0; i0 < n_q; i0 += KN_ATTN_ROWS) {
			size_t rows = n_q - i0 < KN_ATTN_ROWS ? n_q - i0 : KN_ATTN_ROWS;
			/* S[rows, n_kv] = q_h k_h^T / sqrt(head_dim) */
			kn_gemm(true, rows, n_kv, head_dim, scale, q + i0 * ldq + off, ldq, k + off,
				ldk, 0.0f, scratch, n_kv);
			kn_attn_softmax_rows(scratch, rows, n_kv, causal, q_pos0 + i0);
			/* out_h[rows, head_dim] = S v_h */
			kn_gemm(false, rows, head_dim, n_kv, 1.0f, scratch, n_kv, v + off, ldv, 0.0f,
				out + i0 * ldo + off, ldo);
		}
	}
}

/* kn_attention_bf16's scratch: one block of scores, the head's keys and
 * values packed, the bfloat16 rows of the first product, the block's
 * probabilities in bfloat16 (uint16_t counted in halves of a float,
 * rounded up). */
static size_t kn_attn_halves(size_t n)
{
	return (n + 1) / 2;
}

size_t kn_attention_bf16_scratch(size_t n_kv, size_t head_dim)
{
	return KN_ATTN_ROWS * n_kv + kn_attn_halves(kn_bf16_packed_len(n_kv, head_dim)) +
	       kn_attn_halves(kn_bf16_packed_len(head_dim, n_kv)) +
	       kn_attn_halves(kn_bf16_scratch_len(head_dim)) +
	       kn_attn_halves(KN_ATTN_ROWS * kn_bf16_lda(n_kv)) + 16;
}

void kn_attention_bf16(size_t n_q, size_t n_kv, size_t n_heads, size_t head_dim,
		       const float *q, size_t ldq, const float *k, size_t ldk, const float *v,
		       size_t ldv, float *out, size_t ldo, float *scratch)
{
	const struct kn_ops *ops = kn_ops();
	float scale = 1.0f / sqrtf((float)head_dim), *S = scratch;
	uint16_t *kp = (uint16_t *)(S + KN_ATTN_ROWS * n_kv);
	uint16_t *vp = kp + 2 * kn_attn_halves(kn_bf16_packed_len(n_kv, head_dim));
	uint16_t *ab = vp + 2 * kn_attn_halves(kn_bf16_packed_len(head_dim, n_kv));
	uint16_t *pb = ab + 2 * kn_attn_halves(kn_bf16_scratch_len(head_dim));
	size_t ldp = kn_bf16_lda(n_kv);
	for (size_t h = 0; h < n_heads; h++) {
		size_t off = h * head_dim;
		kn_bf16_pack_rows(k + off, ldk, n_kv, head_dim, kp);  /* S = q k^T */
		kn_bf16_pack_cols(v + off, ldv, head_dim, n_kv, vp);  /* out = P v */
		for (size_t i0 = 0; i0 < n_q; i0 += KN_ATTN_ROWS) {
			size_t rows = n_q - i0 < KN_ATTN_ROWS ? n_q - i0 : KN_ATTN_ROWS;
			kn_bf16_linear(rows, n_kv, head_dim, q + i0 * ldq + off, ldq, kp, NULL, S,
				       n_kv, ab);
			/* P = bf16(softmax(scale S)) straight into the rows the
			 * second product reads; rows up to the next 32 zeroed */
			for (size_t i = 0; i < rows; i++)
				ops->softmax_bf16(S + i * n_kv, n_kv, scale, pb + i * ldp, ldp);
			size_t padded = (rows + 31) / 32 * 32;
			memset(pb + rows * ldp, 0, (padded - rows) * ldp * sizeof(*pb));
			kn_bf16_linear_b16(rows, head_dim, n_kv, pb, ldp, vp, NULL,
					   out + i0 * ldo + off, ldo);
		}
	}
}

static size_t kn_kv16_blocks(size_t n_kv)
{
	return (n_kv + KN_KV16_BLOCK - 1) / KN_KV16_BLOCK;
}

size_t kn_kv16_scratch(size_t n_kv)
{
	return kn_kv16_blocks(n_kv) * KN_KV16_BLOCK;
}

size_t kn_kv16_len(size_t n_kv, size_t n_heads, size_t head_dim)
{
	return n_heads * head_dim * (kn_kv16_scratch(n_kv) + n_kv);
}

void kn_kv16_pack(const float *kv, size_t ldkv, size_t n_kv, size_t n_heads, size_t head_dim,
		  uint16_t *cache)
{
	kn_kv16_pack_heads(kv, ldkv, n_kv, n_heads, head_dim, 0, n_heads, cache);
}

void kn_kv16_pack_heads(const float *kv, size_t ldkv, size_t n_kv, size_t n_heads,
			size_t head_dim, size_t h0, size_t h1, uint16_t *cache)
{
	size_t nb = kn_kv16_blocks(n_kv), d = n_heads * head_dim, blk = head_dim * KN_KV16_BLOCK;
	uint16_t *vals = cache + n_heads * nb * blk;
	for (size_t h = h0; h < h1; h++) {
		for (size_t b = 0; b < nb; b++) {
			uint16_t *dst = cache + (h * nb + b) * blk;
			size_t j0 = b * KN_KV16_BLOCK;
			size_t rows = n_kv - j0 < KN_KV16_BLOCK ? n_kv - j0 : KN_KV16_BLOCK;
			if (rows < KN_KV16_BLOCK)
				memset(dst, 0, blk * sizeof(*dst));
			kn_bf16_from_f32_t(kv + j0 * ldkv + h * head_dim, ldkv, rows, head_dim, dst,
					   KN_KV16_BLOCK);
		}
		for (size_t j = 0; j < n_kv; j++)
			kn_bf16_from_f32(kv + j * ldkv + d + h * head_dim,
					 vals + (h * n_kv + j) * head_dim, head_dim);
	}
}

void kn_attention_kv16(size_t n_q, size_t n_kv, size_t n_heads, size_t head_dim, size_t h0,
		       size_t h1, const float *q, size_t ldq, const uint16_t *cache, float *out,
		       size_t ldo, float *scratch)
{
	const struct kn_ops *ops = kn_ops();
	float scale = 1.0f / sqrtf((float)head_dim);
	size_t nb = kn_kv16_blocks(n_kv), blk = head_dim * KN_KV16_BLOCK;
	const uint16_t *vals = cache + n_heads * nb * blk;
	for (size_t h = h0; h < h1; h++) {
		size_t off = h * head_dim;
		const uint16_t *keys = cache + h * nb * blk, *v = vals + h * n_kv * head_dim;
		for (size_t i = 0; i < n_q; i++) {
			const float *qi = q + i * ldq + off;
			/* scores[j] = sum_c q[c] k[j][c], one block of keys at a time */
			for (size_t b = 0; b < nb; b++) {
				size_t j0 = b * KN_KV16_BLOCK;
				size_t n = n_kv - j0 < KN_KV16_BLOCK ? n_kv - j0 : KN_KV16_BLOCK;
				ops->gemv_t_bf16(keys + b * blk, KN_KV16_BLOCK, qi, scratch + j0,
						 head_dim, n);
			}
			ops->scale_add(scratch, scale, NULL, n_kv);
			ops->softmax(scratch, n_kv);
			ops->gemv_t_bf16(v, head_dim, scratch, out + i * ldo + off, n_kv, head_dim);
		}
	}
}

void kn_attention_scores(size_t n_q, size_t n_cols, size_t head_dim, const float *q,
			 size_t ldq, const float *k, size_t ldk, float *out, size_t ldo)
{
	kn_gemm(true, n_q, n_cols, head_dim, 1.0f / sqrtf((float)head_dim), q, ldq, k, ldk, 0.0f,
		out, ldo);
}

void kn_attention_scores_kv16(size_t n_q, size_t n_kv, size_t n_cols,
			      size_t head_dim, size_t h, const float *q, size_t ldq,
			      const uint16_t *cache, float *out, size_t ldo)
{
	const struct kn_ops *ops = kn_ops();
	size_t nb = kn_kv16_blocks(n_kv), blk = head_dim * KN_KV16_BLOCK;
	const uint16_t *keys = cache + h * nb * blk;
	assert(n_cols <= n_kv);
	for (size_t i = 0; i < n_q; i++) {
		const float *qi = q + i * ldq + h * head_dim;
		for (size_t j0 = 0; j0 < n_cols; j0 += KN_KV16_BLOCK) {
			size_t n = n_cols - j0 < KN_KV16_BLOCK ? n_cols - j0 : KN_KV16_BLOCK;
			ops->gemv_t_bf16(keys + (j0 / KN_KV16_BLOCK) * blk, KN_KV16_BLOCK, qi,
					 out + i * ldo + j0, head_dim, n);
		}
		ops->scale_add(out + i * ldo, 1.0f / sqrtf((float)head_dim), NULL, n_cols);
	}
}

/* The arguments of one kn_attention_window call that its blocks share. */
struct kn_win {
	const float *q, *k, *v; /* column 0 of head 0; k, v NULL when k16, v16 */
	float *out;		/* likewise */
	const uint16_t *k16, *v16; /* binary16 keys and values (likewise), or NULL */
	float *stage;		/* k16: KN_WIN16_CHUNK * head_dim floats */
	size_t ldq, ldk, ldv, ldo;
	size_t head_dim;
	size_t q_pos0; /* absolute position of query row 0 */
	size_t window; /* 0: no window */
	float scale;   /* applied to q k^T */
	float softcap; /* 0, or the cap of the scaled scores */
};

void kn_softcap(float *x, size_t n, float cap)
{
	float inv = 1.0f / cap;
	for (size_t i = 0; i < n; i++)
		x[i] = tanhf(x[i] * inv) * cap;
}

/* Query rows per GEMM block: at least the window, so that a block's key
 * span (rows + window - 1) wastes at most about half its scores, and at
 * least this many so that small windows still make GEMM-sized calls. */
#define KN_WIN_MIN_ROWS 32

static_assert(KN_WIN16_CHUNK == KN__SGEMM_KC, "kn_win_block aligns spans to both");

/* First key position visible from query position p. */
static size_t kn_win_lo(size_t p, size_t window)
{
	return window && p + 1 > window ? p + 1 - window : 0;
}

/* Binary16 keys [j0, j0 + n) of the head at column off, widened into
 * w->stage as rows of head_dim floats (a chunk of a prefill's span). */
static const float *kn_win_stage(const struct kn_win *w, const uint16_t *kv, size_t ld,
				 size_t off, size_t j0, size_t n)
{
	const struct kn_ops *ops = kn_ops();
	for (size_t j = 0; j < n; j++)
		ops->f16_to_f32(kv + (j0 + j) * ld + off, w->stage + j * w->head_dim, w->head_dim);
	return w->stage;
}

/* S [rows, span] = scale q[i0 .. i0 + rows) k[lo .. lo + span)^T,
 * through a GEMM for any number of rows (kn_gemm_rows, so a row's scores
 * do not depend on how many rows its block has: a prompt cut between
 * forward chunks gets the bits of one uncut; a lone row's dot, summed in
 * another order, changed greedy answers between batches): float32 keys
 * in place, binary16 ones widened KN_WIN16_CHUNK at a time. */
static void kn_win_scores(const struct kn_win *w, size_t off, size_t i0, size_t rows, size_t lo,
			  size_t span, float *S)
{
	const float *q = w->q + i0 * w->ldq + off;
	if (!w->k16) {
		kn_gemm_rows(true, rows, span, w->head_dim, w->scale, q, w->ldq,
			     w->k + lo * w->ldk + off, w->ldk, 0.0f, S, span);
		return;
	}
	for (size_t c = 0; c < span; c += KN_WIN16_CHUNK) {
		size_t n = span - c < KN_WIN16_CHUNK ? span - c : KN_WIN16_CHUNK;
		const float *kc = kn_win_stage(w, w->k16, w->ldk, off, lo + c, n);
		kn_gemm_rows(true, rows, n, w->head_dim, w->scale, q, w->ldq, kc, w->head_dim,
			     0.0f, S + c, span);
	}
}

/* out[i0 .. i0 + rows) = S v[lo .. lo + span), as kn_win_scores (the
 * binary16 values' products summed chunk by chunk). */
static void kn_win_values(const struct kn_win *w, size_t off, size_t i0, size_t rows, size_t lo,
			  size_t span, const float *S)
{
	float *out = w->out + i0 * w->ldo + off;
	if (!w->v16) {
		kn_gemm_rows(false, rows, w->head_dim, span, 1.0f, S, span,
			     w->v + lo * w->ldv + off, w->ldv, 0.0f, out, w->ldo);
		return;
	}
	for (size_t c = 0; c < span; c += KN_WIN16_CHUNK) {
		size_t n = span - c < KN_WIN16_CHUNK ? span - c : KN_WIN16_CHUNK;
		const float *vc = kn_win_stage(w, w->v16, w->ldv, off, lo + c, n);
		kn_gemm_rows(false, rows, w->head_dim, n, 1.0f, S + c, span, vc, w->head_dim,
			     c ? 1.0f : 0.0f, out, w->ldo);
	}
}

/* Query rows [i0, i1) of the head at column off: S = scale q k[lo:hi]^T
 * over the keys the block sees (hi = last row's position + 1), then each
 * row's softmax over its own window [kn_win_lo(p) - lo, p + 1 - lo) and
 * zeros around it, then out = S v[lo:hi]. S: (i1 - i0) * (hi - lo). */
static void kn_win_block(const struct kn_win *w, size_t off, size_t i0, size_t i1, float *S)
{
	const struct kn_ops *ops = kn_ops();
	/* the span starts on a multiple of the GEMM's K block (and of the
	 * binary16 chunk, the same 256), the keys before the window masked:
	 * S v's sums then meet the keys in the same blocks wherever the block
	 * of rows starts, so a prompt cut between forward chunks gets the bits
	 * of one uncut also past a window wider than KN_WIN_MIN_ROWS (Gemma
	 * 3's 512: a cut inside the window's reach moved the sums' blocks, a
	 * logit by 1e-6 or so, enough to flip a near tie and every token
	 * after it) */
	size_t rows = i1 - i0, lo = kn_win_lo(w->q_pos0 + i0, w->window);
	lo -= lo % KN__SGEMM_KC;
	size_t span = w->q_pos0 + i1 - lo;
	kn_win_scores(w, off, i0, rows, lo, span, S);
	for (size_t r = 0; r < rows; r++) {
		size_t p = w->q_pos0 + i0 + r, a = kn_win_lo(p, w->window) - lo, b = p + 1 - lo;
		float *row = S + r * span;
		memset(row, 0, a * sizeof(*row));
		if (w->softcap > 0.0f)
			kn_softcap(row + a, b - a, w->softcap);
		ops->softmax(row + a, b - a);
		memset(row + b, 0, (span - b) * sizeof(*row));
	}
	kn_win_values(w, off, i0, rows, lo, span, S);
}

/* The blocks of one call: query rows per GEMM block at least the window,
 * so that a block's key span (rows + window - 1) wastes at most about
 * half its scores, and at least KN_WIN_MIN_ROWS so that small windows
 * still make GEMM-sized calls; no window: one block (every row sees a
 * prefix, as kn_attention). */
static void kn_win_run(const struct kn_win *w, size_t n_q, size_t n_heads, float *scratch)
{
	size_t block = w->window > KN_WIN_MIN_ROWS ? w->window : KN_WIN_MIN_ROWS;
	if (w->window == 0)
		block = n_q;
	for (size_t h = 0; h < n_heads; h++)
		for (size_t i0 = 0; i0 < n_q; i0 += block)
			kn_win_block(w, h * w->head_dim, i0, i0 + block < n_q ? i0 + block : n_q,
				     scratch);
}

/* Scratch use: one block's rows times its key span, which is at most
 * n_q * (q_pos0 + n_q) <= n_q * n_kv floats (kn_attention's bound). */
void kn_attention_window(size_t n_q, size_t n_kv, size_t n_heads, size_t head_dim, const float *q,
			 size_t ldq, const float *k, size_t ldk, const float *v, size_t ldv,
			 float *out, size_t ldo, size_t q_pos0, size_t window, float scale,
			 float softcap, float *scratch)
{
	assert(q_pos0 + n_q <= n_kv);
	(void)n_kv;
	const struct kn_win w = {.q = q, .k = k, .v = v, .out = out, .ldq = ldq, .ldk = ldk,
				 .ldv = ldv, .ldo = ldo, .head_dim = head_dim, .q_pos0 = q_pos0,
				 .window = window, .scale = scale, .softcap = softcap};
	kn_win_run(&w, n_q, n_heads, scratch);
}

/* The scores as above, then the widened chunk after them. */
void kn_attention_window_f16(size_t n_q, size_t n_kv, size_t n_heads, size_t head_dim,
			     const float *q, size_t ldq, const uint16_t *k, size_t ldk,
			     const uint16_t *v, size_t ldv, float *out, size_t ldo, size_t q_pos0,
			     size_t window, float scale, float softcap, float *scratch)
{
	assert(q_pos0 + n_q <= n_kv);
	const struct kn_win w = {.q = q, .k16 = k, .v16 = v, .stage = scratch + n_q * n_kv,
				 .out = out, .ldq = ldq, .ldk = ldk, .ldv = ldv, .ldo = ldo,
				 .head_dim = head_dim, .q_pos0 = q_pos0, .window = window,
				 .scale = scale, .softcap = softcap};
	kn_win_run(&w, n_q, n_heads, scratch);
}

/* Rotates dims (ia, ib) of each of the n_head heads in one token's row by
 * the angle whose cosine and sine are c and s. */
static void kn_rope_pair(float *row, size_t n_head, size_t head_dim, size_t ia, size_t ib, float c,
			 float s)
{
	for (size_t h = 0; h < n_head; h++) {
		float *hx = row + h * head_dim, x0 = hx[ia], x1 = hx[ib];
		hx[ia] = x0 * c - x1 * s;
		hx[ib] = x0 * s + x1 * c;
	}
}

/* Each (token, pair j) angle is computed once and applied to every head.
 * theta in double: positions of many thousands times base^(-2j/n_rot)
 * keep their digits, then cos/sin round once to float (llama.cpp's
 * ggml_rope_cache_init builds the same theta by repeated float
 * multiplication). base^(-2j/n_rot) does not depend on the position:
 * one pow per pair for all rows. */
void kn_rope_angles(float *cs, size_t n_tok, size_t n_rot, const int32_t *pos, float base,
		    float freq_scale, const float *freq_factors)
{
	assert(n_rot % 2 == 0);
	for (size_t j = 0; j < n_rot / 2; j++) {
		double f = pow((double)base, -2.0 * (double)j / (double)n_rot);
		if (freq_factors)
			f /= (double)freq_factors[j];
		for (size_t t = 0; t < n_tok; t++) {
			double theta = (double)pos[t] * (double)freq_scale * f;
			cs[t * n_rot + 2 * j] = (float)cos(theta);
			cs[t * n_rot + 2 * j + 1] = (float)sin(theta);
		}
	}
}

/* Dims n_rot.. of each head are not touched. */
void kn_rope_apply(float *x, size_t n_tok, size_t ld, size_t n_head, size_t head_dim,
		   size_t n_rot, const float *cs, bool neox)
{
	assert(n_rot % 2 == 0 && n_rot <= head_dim && n_head * head_dim <= ld);
	size_t half = n_rot / 2;
	for (size_t t = 0; t < n_tok; t++)
		for (size_t j = 0; j < half; j++) {
			size_t ia = neox ? j : 2 * j, ib = neox ? j + half : 2 * j + 1;
			kn_rope_pair(x + t * ld, n_head, head_dim, ia, ib, cs[t * n_rot + 2 * j],
				     cs[t * n_rot + 2 * j + 1]);
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
