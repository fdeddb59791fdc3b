/* dev_par.c - parallel-for wrappers around the kernels (see dev_par.h). */
#include "devices/dev_par.h"

#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "devices/dev_pool.h"
#include "kernels/kn.h"
#include "kernels/kn_attn.h"
#include "kernels/kn_bf16.h"
#include "kernels/kn_blas.h"
#include "kernels/kn_i8.h"

/* --- linear ------------------------------------------------------------ */

struct ep_linear {
	size_t M, N, K;
	const float *x, *W, *b;
	float *y;
};

static void ep_linear_rows(void *arg, int ith, int nth)
{
	const struct ep_linear *a = arg;
	long r0, r1;
	dev_split((long)a->M, ith, nth, 1, &r0, &r1);
	if (r1 > r0)
		kn_linear((size_t)(r1 - r0), a->N, a->K, a->x + (size_t)r0 * a->K, a->W, a->b,
			  a->y + (size_t)r0 * a->N);
}

static void ep_linear_cols(void *arg, int ith, int nth)
{
	const struct ep_linear *a = arg;
	long c0, c1;
	dev_split((long)a->N, ith, nth, 16, &c0, &c1);
	if (c1 <= c0)
		return;
	size_t n = (size_t)(c1 - c0);
	for (size_t m = 0; m < a->M; m++) {
		float *row = a->y + m * a->N + c0;
		if (a->b)
			memcpy(row, a->b + c0, n * sizeof(float));
		else
			memset(row, 0, n * sizeof(float));
	}
	kn_gemm(true, a->M, n, a->K, 1.0f, a->x, a->K, a->W + (size_t)c0 * a->K, a->K, 1.0f,
		a->y + c0, a->N);
}

void dev_par_linear(struct dev_pool *p, size_t M, size_t N, size_t K, const float *x,
		    const float *W, const float *b, float *y)
{
	struct ep_linear a = { M, N, K, x, W, b, y };
	int nth = dev_pool_size(p);
	dev_pool_run(p, M >= (size_t)(8 * nth) ? ep_linear_rows : ep_linear_cols, &a);
}

struct ep_linear16 {
	size_t M, N, K;
	const float *x, *b;
	const uint16_t *W;
	float *y;
};

/* Output columns in tiles of DEV_PAR_QTILE: every row passes over a tile
 * while it is in cache, so W is read once for all rows. gemv_f16 computes
 * each column alone (its own accumulator, the same operations whatever
 * the tile or the row count), so a row's result never depends on M. */
static void ep_linear16_cols(void *arg, int ith, int nth)
{
	const struct ep_linear16 *a = arg;
	const struct kn_ops *ops = kn_ops();
	long c0, c1;
	dev_split((long)a->N, ith, nth, DEV_PAR_QTILE, &c0, &c1);
	for (long c = c0; c < c1; c += DEV_PAR_QTILE) {
		size_t nt = (size_t)(c1 - c < DEV_PAR_QTILE ? c1 - c : DEV_PAR_QTILE);
		for (size_t m = 0; m < a->M; m++) {
			float *row = a->y + m * a->N + (size_t)c;
			ops->gemv_f16(a->W + (size_t)c * a->K, a->K, a->x + m * a->K, row, nt, a->K);
			if (a->b)
				ops->add(row, a->b + c, nt);
		}
	}
}

void dev_par_linear_f16(struct dev_pool *p, size_t M, size_t N, size_t K, const float *x,
			const uint16_t *W16, const float *b, float *y)
{
	struct ep_linear16 a = { M, N, K, x, b, W16, y };
	dev_pool_run(p, ep_linear16_cols, &a);
}

/* --- int8 linear ------------------------------------------------------ */

struct ep_i8 {
	size_t M;
	const float *x, *b;
	const struct kn_i8w *w;
	float *y;
};

#define EP_I8_ROWS 64 /* rows quantized at a time */

/* Rows [r0, r1) times columns [c0, c1): quantized in chunks that fit the
 * stack buffer, then one kernel call per chunk. */
static void ep_i8_run(const struct ep_i8 *a, size_t r0, size_t r1, size_t c0, size_t c1)
{
	int8_t xq[DEV_PAR_I8_MAX_K + 64];
	float xs[EP_I8_ROWS];
	const struct kn_i8_ops *o = kn_i8_ops();
	size_t K = a->w->K, ldq = kn_i8_kpad(K);
	size_t chunk = sizeof(xq) / ldq < EP_I8_ROWS ? sizeof(xq) / ldq : EP_I8_ROWS;
	for (size_t r = r0; r < r1; r += chunk) {
		size_t n = r1 - r < chunk ? r1 - r : chunk;
		o->quantize_rows(a->x + r * K, K, n, K, xq, ldq, xs);
		o->gemm(n, c0, c1, xq, ldq, xs, a->w, a->b, a->y + r * a->w->N, a->w->N);
	}
}

static void ep_i8_rows(void *arg, int ith, int nth)
{
	const struct ep_i8 *a = arg;
	long r0, r1;
	dev_split((long)a->M, ith, nth, 1, &r0, &r1);
	if (r1 > r0)
		ep_i8_run(a, (size_t)r0, (size_t)r1, 0, a->w->N);
}

static void ep_i8_cols(void *arg, int ith, int nth)
{
	const struct ep_i8 *a = arg;
	long c0, c1;
	dev_split((long)a->w->N, ith, nth, KN_I8_NB, &c0, &c1);
	if (c1 > c0)
		ep_i8_run(a, 0, a->M, (size_t)c0, (size_t)c1);
}

/* Below this many multiply-adds (a decode step's 384 x 384 products) an
 * int8 product runs on the calling thread. */
#define EP_I8_MIN_PAR_MACS 200000

void dev_par_linear_i8(struct dev_pool *p, size_t M, const float *x, const struct kn_i8w *w,
		       const float *b, float *y)
{
	struct ep_i8 a = { M, x, b, w, y };
	int nth = dev_pool_size(p);
	if (M * w->N * w->K < EP_I8_MIN_PAR_MACS)
		p = NULL; /* less work than waking the pool costs */
	dev_pool_run(p, M >= (size_t)(8 * nth) ? ep_i8_rows : ep_i8_cols, &a);
}

/* --- row and element ops ---------------------------------------------- */

struct ep_rows {
	size_t rows, d;
	const float *x, *gamma, *beta;
	float *y;
	float eps;
};

static void ep_layer_norm(void *arg, int ith, int nth)
{
	const struct ep_rows *a = arg;
	const struct kn_ops *ops = kn_ops();
	long r0, r1;
	dev_split((long)a->rows, ith, nth, 1, &r0, &r1);
	for (long r = r0; r < r1; r++)
		ops->layer_norm(a->x + (size_t)r * a->d, a->gamma, a->beta, a->y + (size_t)r * a->d,
				a->d, a->eps);
}

void dev_par_layer_norm(struct dev_pool *p, size_t rows, size_t d, const float *x,
			const float *gamma, const float *beta, float *y, float eps)
{
	struct ep_rows a = { rows, d, x, gamma, beta, y, eps };
	dev_pool_run(rows > 1 ? p : NULL, ep_layer_norm, &a);
}

struct ep_elems {
	size_t n;
	float *y;
	const float *x;
};

static void ep_gelu(void *arg, int ith, int nth)
{
	const struct ep_elems *a = arg;
	long i0, i1;
	dev_split((long)a->n, ith, nth, 64, &i0, &i1);
	if (i1 > i0)
		kn_ops()->gelu(a->y + i0, (size_t)(i1 - i0));
}

static void ep_add(void *arg, int ith, int nth)
{
	const struct ep_elems *a = arg;
	long i0, i1;
	dev_split((long)a->n, ith, nth, 64, &i0, &i1);
	if (i1 > i0)
		kn_ops()->add(a->y + i0, a->x + i0, (size_t)(i1 - i0));
}

struct ep_cap {
	size_t n;
	float *x;
	float cap;
};

static void ep_softcap(void *arg, int ith, int nth)
{
	const struct ep_cap *a = arg;
	long i0, i1;
	dev_split((long)a->n, ith, nth, 64, &i0, &i1);
	if (i1 > i0)
		kn_softcap(a->x + i0, (size_t)(i1 - i0), a->cap);
}

/* Element ops are worth a parallel run only when large (encoder rows). */
#define EP_MIN_PAR_ELEMS 16384

void dev_par_gelu(struct dev_pool *p, float *x, size_t n)
{
	struct ep_elems a = { n, x, NULL };
	dev_pool_run(n >= EP_MIN_PAR_ELEMS ? p : NULL, ep_gelu, &a);
}

void dev_par_add(struct dev_pool *p, float *y, const float *x, size_t n)
{
	struct ep_elems a = { n, y, x };
	dev_pool_run(n >= EP_MIN_PAR_ELEMS ? p : NULL, ep_add, &a);
}

void dev_par_softcap(struct dev_pool *p, float *x, size_t n, float cap)
{
	struct ep_cap a = { n, x, cap };
	dev_pool_run(n >= EP_MIN_PAR_ELEMS ? p : NULL, ep_softcap, &a);
}

/* --- attention and convolution --------------------------------------- */

/* Which kernel an ep_attn runs: kn_attention, kn_attention_bf16 or
 * kn_attention_i8 (the last two without a mask). */
enum ep_attn_kind { EP_ATTN_F32, EP_ATTN_BF16, EP_ATTN_I8 };

struct ep_attn {
	size_t n_q, n_kv, n_heads, hd, ldq, ldk, ldv, ldo, q_pos0;
	const float *q, *k, *v;
	float *out, *scratch;
	bool causal;
	enum ep_attn_kind kind;
};

/* Floats of scratch per thread for a's kernel. */
static size_t ep_attn_per(const struct ep_attn *a)
{
	switch (a->kind) {
	case EP_ATTN_BF16: return dev_par_attention_bf16_scratch(a->n_q, a->n_kv, a->hd);
	case EP_ATTN_I8: return dev_par_attention_i8_scratch(a->n_q, a->n_kv, a->hd);
	default: return a->n_q * a->n_kv;
	}
}

/* Heads split over threads, each thread with its region of scratch. */
static void ep_attention(void *arg, int ith, int nth)
{
	const struct ep_attn *a = arg;
	long h0, h1;
	dev_split((long)a->n_heads, ith, nth, 1, &h0, &h1);
	if (h1 <= h0)
		return;
	size_t off = (size_t)h0 * a->hd, nh = (size_t)(h1 - h0);
	float *scratch = a->scratch + (size_t)ith * ep_attn_per(a);
	const float *q = a->q + off, *k = a->k + off, *v = a->v + off;
	float *out = a->out + off;
	if (a->kind == EP_ATTN_BF16)
		kn_attention_bf16(a->n_q, a->n_kv, nh, a->hd, q, a->ldq, k, a->ldk, v, a->ldv, out,
				  a->ldo, scratch);
	else if (a->kind == EP_ATTN_I8)
		kn_attention_i8(a->n_q, a->n_kv, nh, a->hd, q, a->ldq, k, a->ldk, v, a->ldv, out,
				a->ldo, scratch);
	else
		kn_attention(a->n_q, a->n_kv, nh, a->hd, q, a->ldq, k, a->ldk, v, a->ldv, out,
			     a->ldo, a->causal, a->q_pos0, scratch);
}

void dev_par_attention(struct dev_pool *p, size_t n_q, size_t n_kv, size_t n_heads,
		       size_t head_dim, const float *q, size_t ldq, const float *k, size_t ldk,
		       const float *v, size_t ldv, float *out, size_t ldo, bool causal,
		       size_t q_pos0, float *scratch)
{
	struct ep_attn a = { n_q, n_kv, n_heads, head_dim, ldq, ldk, ldv, ldo, q_pos0,
			     q, k, v, out, scratch, causal, EP_ATTN_F32 };
	dev_pool_run(p, ep_attention, &a);
}

struct ep_attn16 {
	size_t n_q, n_kv, n_heads, hd, ldq, ldo;
	const float *q;
	const uint16_t *cache;
	float *out, *scratch;
};

static void ep_attention_kv16(void *arg, int ith, int nth)
{
	const struct ep_attn16 *a = arg;
	long h0, h1;
	dev_split((long)a->n_heads, ith, nth, 1, &h0, &h1);
	if (h1 > h0)
		kn_attention_kv16(a->n_q, a->n_kv, a->n_heads, a->hd, (size_t)h0, (size_t)h1, a->q,
				  a->ldq, a->cache, a->out, a->ldo,
				  a->scratch + (size_t)ith * kn_kv16_scratch(a->n_kv));
}

struct ep_kv16 {
	const float *kv;
	size_t ldkv, n_kv, n_heads, hd;
	uint16_t *cache;
};

static void ep_kv16_pack(void *arg, int ith, int nth)
{
	const struct ep_kv16 *a = arg;
	long h0, h1;
	dev_split((long)a->n_heads, ith, nth, 1, &h0, &h1);
	if (h1 > h0)
		kn_kv16_pack_heads(a->kv, a->ldkv, a->n_kv, a->n_heads, a->hd, (size_t)h0,
				   (size_t)h1, a->cache);
}

void dev_par_kv16_pack(struct dev_pool *p, const float *kv, size_t ldkv, size_t n_kv,
		       size_t n_heads, size_t head_dim, uint16_t *cache)
{
	struct ep_kv16 a = { kv, ldkv, n_kv, n_heads, head_dim, cache };
	dev_pool_run(p, ep_kv16_pack, &a);
}

void dev_par_attention_kv16(struct dev_pool *p, size_t n_q, size_t n_kv, size_t n_heads,
			    size_t head_dim, const float *q, size_t ldq, const uint16_t *cache,
			    float *out, size_t ldo, float *scratch)
{
	struct ep_attn16 a = { n_q, n_kv, n_heads, head_dim, ldq, ldo, q, cache, out, scratch };
	dev_pool_run(p, ep_attention_kv16, &a);
}

size_t dev_par_attention_bf16_scratch(size_t n_q, size_t n_kv, size_t head_dim)
{
	size_t need = kn_attention_bf16_scratch(n_kv, head_dim);
	return n_q * n_kv > need ? n_q * n_kv : need;
}

void dev_par_attention_bf16(struct dev_pool *p, size_t n_q, size_t n_kv, size_t n_heads,
			    size_t head_dim, const float *q, size_t ldq, const float *k,
			    size_t ldk, const float *v, size_t ldv, float *out, size_t ldo,
			    float *scratch)
{
	struct ep_attn a = { n_q, n_kv, n_heads, head_dim, ldq, ldk, ldv, ldo, 0,
			     q, k, v, out, scratch, false, EP_ATTN_BF16 };
	dev_pool_run(p, ep_attention, &a);
}

size_t dev_par_attention_i8_scratch(size_t n_q, size_t n_kv, size_t head_dim)
{
	size_t need = (kn_attention_i8_scratch(n_kv, head_dim) + sizeof(float) - 1) / sizeof(float);
	return n_q * n_kv > need ? n_q * n_kv : need;
}

void dev_par_attention_i8(struct dev_pool *p, size_t n_q, size_t n_kv, size_t n_heads,
			  size_t head_dim, const float *q, size_t ldq, const float *k, size_t ldk,
			  const float *v, size_t ldv, float *out, size_t ldo, float *scratch)
{
	struct ep_attn a = { n_q, n_kv, n_heads, head_dim, ldq, ldk, ldv, ldo, 0,
			     q, k, v, out, scratch, false, EP_ATTN_I8 };
	dev_pool_run(p, ep_attention, &a);
}

/* bfloat16 products: rows split over threads, each converting its rows
 * into its own block of scratch. */
struct ep_linear_bf16 {
	size_t M, N, K;
	const float *x, *b;
	const uint16_t *Wp;
	float *y;
	uint16_t *scratch;
};

static void ep_linear_bf16_rows(void *arg, int ith, int nth)
{
	const struct ep_linear_bf16 *a = arg;
	long r0, r1;
	dev_split((long)a->M, ith, nth, 32, &r0, &r1);
	if (r1 > r0)
		kn_bf16_linear((size_t)(r1 - r0), a->N, a->K, a->x + (size_t)r0 * a->K, a->K, a->Wp,
			       a->b, a->y + (size_t)r0 * a->N, a->N,
			       a->scratch + (size_t)ith * kn_bf16_scratch_len(a->K));
}

int dev_par_linear_bf16(struct dev_pool *p, size_t M, size_t N, size_t K, const float *x,
			const uint16_t *Wp, const float *b, float *y)
{
	uint16_t *scratch = mem_alloc((size_t)dev_pool_size(p) * kn_bf16_scratch_len(K) *
				      sizeof(uint16_t));
	if (!scratch)
		return -ST_NOMEM;
	struct ep_linear_bf16 a = { M, N, K, x, b, Wp, y, scratch };
	dev_pool_run(p, ep_linear_bf16_rows, &a);
	mem_free(scratch);
	return 0;
}

struct ep_conv {
	size_t t_in, c_in, c_out, k, stride, pad, t_out;
	const float *x, *w, *bias;
	float *y, *scratch;
};

static void ep_conv1d(void *arg, int ith, int nth)
{
	const struct ep_conv *a = arg;
	long t0, t1;
	dev_split((long)a->t_out, ith, nth, 1, &t0, &t1);
	kn_conv1d_rows(a->t_in, a->c_in, a->c_out, a->k, a->stride, a->pad, (size_t)t0,
		       (size_t)t1, a->x, a->w, a->bias, a->y,
		       a->scratch + (size_t)t0 * a->c_in * a->k);
}

void dev_par_conv1d(struct dev_pool *p, size_t t_in, size_t c_in, size_t c_out, size_t k,
		    size_t stride, size_t pad, const float *x, const float *w, const float *bias,
		    float *y, float *scratch)
{
	struct ep_conv a = { t_in, c_in, c_out, k, stride, pad,
			     kn_conv1d_out_len(t_in, k, stride, pad), x, w, bias, y, scratch };
	dev_pool_run(p, ep_conv1d, &a);
}
