/* dev_par_q.c - the products with GGUF block-type weights over a device
 * pool (dev_par_qlinear, dev_par_qlinear_multi; see dev_par.h). */
#include <assert.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "devices/dev_pool.h"
#include "devices/dev_par.h"
#include "kernels/kn.h"
#include "kernels/kn_blas.h"
#include "kernels/kn_quant.h"

/* One matrix of an integer-path product: its weights, its quantized x
 * rows, where its results go. */
struct ep_qrange {
	const char *W;
	size_t row_bytes, N, K, M;
	const struct kn_qops *q;
	const float *b;
	float *y;		   /* [M, N] */
	float *const *yrows;	   /* or NULL: row m also copied to yrows[m] */
	int32_t *argmax;	   /* or NULL: only each row's argmax is kept */
	float *best_v;		   /* argmax: per thread, M rows' best value so far */
	int32_t *best_i;	   /* and its index (-1: none yet) */
	const char *xq;		   /* the M quantized x rows */
	size_t xq_bytes;	   /* bytes of one (q->xq_bytes(K)) */
	size_t xq_th;		   /* from thread ith's own copy of them to ith + 1's (0: one) */
	const struct kn_qops *q8;  /* Q4_0/Q5_0 tiles widened to Q8_0 for these, or NULL */
	char *wide;		   /* per thread DEV_PAR_QTILE * wide_rb bytes */
	size_t wide_rb;		   /* bytes of a widened row */
};

/* The greedy scan (kn argmax: best = i if x[i] > x[best], from best = 0)
 * of a row carried over its tiles: v [n] holds its columns c .. c + n;
 * *bv, *bi the best so far on this thread (*bi < 0: none yet). The tile
 * at column 0 is scanned as the whole row would be (a NaN there stays);
 * any other from its first non-NaN value, which a NaN at its start would
 * otherwise hide; the thread's tiles, then the threads, merge in column
 * order by "greater than", so the first of equal maxima wins: the whole
 * row's scan, bit for bit. */
static void ep_q_tile_max(const float *v, size_t n, size_t c, float *bv, int32_t *bi)
{
	size_t j = 0;
	while (c > 0 && j < n && v[j] != v[j])
		j++;
	if (j == n)
		return;
	size_t i = j + kn_ops()->argmax(v + j, n - j);
	if (*bi < 0 || v[i] > *bv) {
		*bv = v[i];
		*bi = (int32_t)(c + i);
	}
}

/* The argmax per row over the threads' bests (dev_par_qmat argmax). */
static void ep_q_merge_max(const struct ep_qrange *r, int nth)
{
	for (size_t m = 0; m < r->M; m++) {
		float bv = 0.0f;
		int32_t bi = -1;
		for (int t = 0; t < nth; t++) {
			size_t k = (size_t)t * r->M + m;
			if (r->best_i[k] >= 0 && (bi < 0 || r->best_v[k] > bv)) {
				bv = r->best_v[k];
				bi = r->best_i[k];
			}
		}
		r->argmax[m] = bi;
	}
}

/* x rows up to which a tile's results are staged on the thread's stack */
#define EP_Q_STAGE_ROWS 64

/* Output columns [c0, c1) of a (c0 a multiple of 16) on thread ith, from
 * x rows already quantized: weight rows in tiles small enough to stay in
 * cache while every x row passes over them (the weights are read from
 * memory once). With up to EP_Q_STAGE_ROWS x rows, the kernels write a
 * tile's results into a small block on the stack (rows 256 bytes apart)
 * that is then copied to y or yrows: written straight into y, whose rows
 * lie N floats apart, the rows' accumulators meet in the same cache sets
 * (the AVX2 Q8_0 kernel over Gemma's 262 144-row lm head: 104.7 against
 * 100.2 GOP/s, copy included). */
static void ep_q_cols(const struct ep_qrange *a, int ith, size_t c0, size_t c1)
{
	float stage[EP_Q_STAGE_ROWS * DEV_PAR_QTILE];
	bool staged = a->M <= EP_Q_STAGE_ROWS;
	const char *xq = a->xq + (size_t)ith * a->xq_th;
	for (size_t c = c0; c < c1; c += DEV_PAR_QTILE) {
		size_t nt = c1 - c < DEV_PAR_QTILE ? c1 - c : DEV_PAR_QTILE;
		const char *w = a->W + c * a->row_bytes;
		float *yt = staged ? stage : a->y + c;
		size_t ldy = staged ? DEV_PAR_QTILE : a->N;
		if (a->q8) {
			/* many rows: the tile widened to Q8_0 once, then Q8_0's
			 * faster kernel for all of them, the same bits (kn_quant.h
			 * to_q8_0) */
			char *wt = a->wide + (size_t)ith * DEV_PAR_QTILE * a->wide_rb;
			a->q->to_q8_0(w, wt, nt * (a->K / a->q->geom->block_elems));
			a->q8->gemm_xq(wt, a->wide_rb, xq, a->xq_bytes, a->M, yt, ldy, nt, a->K);
		} else if (a->q->gemm_xq && a->M > 1) {
			/* several rows: the tile's blocks unpacked once for all of
			 * them (the same results as gemv_xq, which one row keeps: it
			 * is faster alone) */
			a->q->gemm_xq(w, a->row_bytes, xq, a->xq_bytes, a->M, yt, ldy, nt, a->K);
		} else {
			for (size_t m = 0; m < a->M; m++)
				a->q->gemv_xq(w, a->row_bytes, xq + m * a->xq_bytes, yt + m * ldy, nt,
					      a->K);
		}
		for (size_t m = 0; m < a->M; m++) {
			if (a->b)
				kn_ops()->add(yt + m * ldy, a->b + c, nt);
			if (a->argmax) {
				size_t k = (size_t)ith * a->M + m;
				ep_q_tile_max(yt + m * ldy, nt, c, &a->best_v[k], &a->best_i[k]);
				continue;
			}
			if (staged && !a->yrows)
				memcpy(a->y + m * a->N + c, yt + m * ldy, nt * sizeof(float));
			if (a->yrows)
				memcpy(a->yrows[m] + c, yt + m * ldy, nt * sizeof(float));
		}
	}
}

static void ep_qlinear_xq(void *arg, int ith, int nth)
{
	const struct ep_qrange *a = arg;
	long c0, c1;
	dev_split((long)a->N, ith, nth, 16, &c0, &c1);
	if (c1 > c0)
		ep_q_cols(a, ith, (size_t)c0, (size_t)c1);
}

struct ep_qfloat {
	size_t M, N, K, row_bytes;
	const float *x, *b;
	const char *W;
	const struct kn_qops *q;
	float *y, *scratch;
};

static void ep_qfloat_bias(const struct ep_qfloat *a, size_t c0, size_t n)
{
	for (size_t m = 0; a->b && m < a->M; m++)
		kn_ops()->add(a->y + m * a->N + c0, a->b + c0, n);
}

static void ep_qlinear_gemv(void *arg, int ith, int nth)
{
	const struct ep_qfloat *a = arg;
	long c0, c1;
	dev_split((long)a->N, ith, nth, 16, &c0, &c1);
	if (c1 <= c0)
		return;
	for (size_t m = 0; m < a->M; m++)
		a->q->gemv(a->W + (size_t)c0 * a->row_bytes, a->row_bytes, a->x + m * a->K,
			   a->y + m * a->N + c0, (size_t)(c1 - c0), a->K);
	ep_qfloat_bias(a, (size_t)c0, (size_t)(c1 - c0));
}

static void ep_qlinear_tiles(void *arg, int ith, int nth)
{
	const struct ep_qfloat *a = arg;
	float *tile = a->scratch + (size_t)ith * DEV_PAR_QTILE * a->K;
	long c0, c1;
	dev_split((long)a->N, ith, nth, DEV_PAR_QTILE, &c0, &c1);
	for (long c = c0; c < c1; c += DEV_PAR_QTILE) {
		size_t nt = (size_t)(c1 - c < DEV_PAR_QTILE ? c1 - c : DEV_PAR_QTILE);
		const float *B = tile;
		size_t ldb = a->K;
		if (a->q->type == KN_Q_F32) {
			B = (const float *)(a->W + (size_t)c * a->row_bytes);
			ldb = a->row_bytes / sizeof(float);
		} else {
			for (size_t j = 0; j < nt; j++)
				a->q->dequant(a->W + (size_t)(c + (long)j) * a->row_bytes, tile + j * a->K,
					      a->K);
		}
		kn_gemm(true, a->M, nt, a->K, 1.0f, a->x, a->K, B, ldb, 0.0f, a->y + c, a->N);
	}
	if (c1 > c0)
		ep_qfloat_bias(a, (size_t)c0, (size_t)(c1 - c0));
}

/* Whether m's tiles are widened to Q8_0 for M rows (Q4_0 / Q5_0 against
 * many rows, where the ISA's Q8_0 kernel is faster); its Q8_0 kernels. */
static const struct kn_qops *ep_q_widen(const struct kn_qops *q, size_t M)
{
	const struct kn_qops *q8 = q->to_q8_0 ? kn_qops_get(KN_Q_Q8_0) : NULL;
	return q8 && q8->gemm_xq && M >= DEV_PAR_WIDEN_ROWS ? q8 : NULL;
}

void dev_par_qlinear(struct dev_pool *p, size_t M, size_t N, size_t K, const float *x,
		     const void *W, size_t row_bytes, const struct kn_qops *q, const float *b,
		     float *y, float *scratch)
{
	if (q->round_x && scratch) {
		float *xr = scratch;
		for (size_t m = 0; m < M; m++)
			q->round_x(x + m * K, xr + m * K, K);
		x = xr;
		scratch += M * K;
	}
	assert(scratch || q->gemv); /* a packed layout has the integer path only */
	if (!q->gemv_xq || !scratch) {
		struct ep_qfloat f = { M, N, K, row_bytes, x, b, W, q, y, scratch };
		dev_pool_run(p, M <= 4 ? ep_qlinear_gemv : ep_qlinear_tiles, &f);
		return;
	}
	/* The integer path, as llama.cpp computes it (activations quantized to
	 * the type's partner format), for any number of rows: x rows are
	 * quantized here into scratch, as many at a time as it holds. */
	struct ep_qrange a = { .W = W, .row_bytes = row_bytes, .N = N, .K = K, .q = q, .b = b,
			       .xq_bytes = q->xq_bytes(K) };
	size_t cap = (size_t)dev_pool_size(p) * DEV_PAR_QTILE * K * sizeof(float);
	/* Q4_0 / Q5_0 against many rows: each thread widens its weight tile
	 * to Q8_0 (34 bytes per 32 weights) at the end of scratch, the rest
	 * holds the quantized rows (at least DEV_PAR_WIDEN_ROWS of them). */
	size_t wide_rb = kn_qtype_row_bytes(KN_Q_Q8_0, K);
	size_t wide = (size_t)dev_pool_size(p) * DEV_PAR_QTILE * wide_rb;
	const struct kn_qops *q8 = ep_q_widen(q, M);
	if (q8 && cap >= wide + DEV_PAR_WIDEN_ROWS * a.xq_bytes) {
		a.q8 = q8;
		a.wide_rb = wide_rb;
		cap -= wide;
		a.wide = (char *)scratch + cap;
	}
	size_t group = cap / a.xq_bytes;
	for (size_t m0 = 0; m0 < M; m0 += group) {
		size_t g = M - m0 < group ? M - m0 : group;
		for (size_t m = 0; m < g; m++)
			q->quantize_x(x + (m0 + m) * K, (char *)scratch + m * a.xq_bytes, K);
		a.M = g;
		a.xq = (const char *)scratch;
		a.y = y + m0 * N;
		dev_pool_run(p, ep_qlinear_xq, &a);
	}
}

/* --- several matrices over the same x ------------------------------------ */

struct ep_qmulti {
	struct ep_qrange r[DEV_PAR_QMULTI_MAX];
	size_t n;		/* matrices */
	bool quantize[DEV_PAR_QMULTI_MAX]; /* r[i] is the first with its partner rows */
	const float *x;		/* [M, K], quantized by the threads first */
	bool own;		/* each thread quantizes every row into its own copy */
	struct dev_pool *p;	/* for the barrier between the two phases */
};

/* Where cost point X falls in matrix r, whose columns cost rb bytes each
 * from cost c0 on: a column index rounded down to a group of 16, within
 * [0, N]. */
static size_t ep_qmulti_col(const struct ep_qrange *r, uint64_t c0, uint64_t X)
{
	if (X <= c0)
		return 0;
	uint64_t col = (X - c0 + r->row_bytes - 1) / r->row_bytes;
	return col >= r->N ? r->N : (size_t)col / 16 * 16;
}

/* x quantized, then the matrices' columns laid end to end and split once
 * over the threads by their weight bytes (a Q8_0 column costs about 1.5 Q5_0 ones): thread
 * ith takes the columns in its share of the total bytes, each matrix's
 * part cut at groups of 16 (every N is a multiple of 16). The same cut
 * bounds a thread's end and the next one's start, so the columns are
 * split exactly. */
static void ep_qmulti_run(void *arg, int ith, int nth)
{
	const struct ep_qmulti *a = arg;
	/* first x's rows, quantized to every partner format by the threads
	 * (a row's codes do not depend on who makes them): split, then a
	 * barrier; or, with fewer rows than threads (a decode step), every
	 * row by every thread into its own copy, with no barrier to wait at */
	long m0 = 0, m1 = (long)a->r[0].M;
	if (!a->own)
		dev_split((long)a->r[0].M, ith, nth, 1, &m0, &m1);
	for (size_t i = 0; i < a->n; i++) {
		const struct ep_qrange *r = &a->r[i];
		char *xq = (char *)r->xq + (size_t)ith * r->xq_th;
		for (long m = m0; a->quantize[i] && m < m1; m++)
			r->q->quantize_x(a->x + (size_t)m * r->K, xq + (size_t)m * r->xq_bytes, r->K);
	}
	if (!a->own)
		dev_pool_barrier(a->p);
	uint64_t total = 0, off = 0;
	for (size_t i = 0; i < a->n; i++)
		total += (uint64_t)a->r[i].N * a->r[i].row_bytes;
	uint64_t lo = total * (unsigned)ith / (unsigned)nth;
	uint64_t hi = total * (unsigned)(ith + 1) / (unsigned)nth;
	for (size_t i = 0; i < a->n; i++) {
		const struct ep_qrange *r = &a->r[i];
		size_t c0 = ep_qmulti_col(r, off, lo), c1 = ep_qmulti_col(r, off, hi);
		if (ith == nth - 1)
			c1 = r->N;
		if (c1 > c0)
			ep_q_cols(r, ith, c0, c1);
		off += (uint64_t)r->N * r->row_bytes;
	}
}

/* The fused form of dev_par_qlinear_multi, when its conditions hold: x
 * quantized once per partner format, one run of the pool. 0, or -1 with
 * nothing done. */
static int ep_qmulti_fused(struct dev_pool *p, size_t M, size_t K, const float *x,
			   const struct dev_par_qmat *mats, size_t n, char *scratch)
{
	size_t cap = (size_t)dev_pool_size(p) * DEV_PAR_QTILE * K * sizeof(float), used = 0;
	size_t wide_rb = kn_qtype_row_bytes(KN_Q_Q8_0, K);
	size_t wide = (size_t)dev_pool_size(p) * DEV_PAR_QTILE * wide_rb;
	struct ep_qmulti a = { .n = n, .own = M < (size_t)dev_pool_size(p) };
	if (n > DEV_PAR_QMULTI_MAX || !scratch || (n > 1 && mats[0].argmax))
		return -1;
	for (size_t i = 0; i < n; i++) {
		const struct kn_qops *q = mats[i].q;
		if (!q->gemv_xq || q->round_x || mats[i].N % 16)
			return -1;
		struct ep_qrange *r = &a.r[i];
		*r = (struct ep_qrange){ .W = mats[i].W, .row_bytes = mats[i].row_bytes,
					 .N = mats[i].N, .K = K, .M = M, .q = q, .b = mats[i].b,
					 .y = mats[i].y, .yrows = mats[i].yrows,
					 .argmax = mats[i].argmax,
					 .xq_bytes = q->xq_bytes(K), .q8 = ep_q_widen(q, M),
					 .wide_rb = wide_rb };
		for (size_t j = 0; j < i && !r->xq; j++)
			if (a.r[j].q->quantize_x == q->quantize_x && a.r[j].xq_bytes == r->xq_bytes)
				r->xq = a.r[j].xq; /* the same partner rows */
		r->xq_th = a.own ? M * r->xq_bytes : 0;
		if (!r->xq) {
			r->xq = scratch + used;
			used += M * r->xq_bytes * (a.own ? (size_t)dev_pool_size(p) : 1);
		}
	}
	bool widen = false; /* one region for every widened matrix: they take turns */
	for (size_t i = 0; i < n; i++)
		if (a.r[i].q8) {
			a.r[i].wide = scratch + used;
			widen = true;
		}
	used += widen ? wide : 0;
	if (a.r[0].argmax) { /* the threads' bests, after the rows (4-byte aligned) */
		used = (used + 3) & ~(size_t)3;
		a.r[0].best_v = (float *)(scratch + used);
		a.r[0].best_i = (int32_t *)(scratch + used + (size_t)dev_pool_size(p) * M * 4);
		used += (size_t)dev_pool_size(p) * M * 8;
		for (size_t k = 0; used <= cap && k < (size_t)dev_pool_size(p) * M; k++)
			a.r[0].best_i[k] = -1;
	}
	if (used > cap)
		return -1;
	for (size_t i = 0; i < n; i++) {
		a.quantize[i] = true;
		for (size_t j = 0; j < i; j++)
			a.quantize[i] = a.quantize[i] && a.r[j].xq != a.r[i].xq;
	}
	a.x = x;
	a.p = p;
	dev_pool_run(p, ep_qmulti_run, &a);
	if (a.r[0].argmax)
		ep_q_merge_max(&a.r[0], dev_pool_size(p));
	return 0;
}

void dev_par_qlinear_multi(struct dev_pool *p, size_t M, size_t K, const float *x,
			   const struct dev_par_qmat *mats, size_t n, float *scratch)
{
	if (!ep_qmulti_fused(p, M, K, x, mats, n, (char *)scratch))
		return;
	for (size_t i = 0; i < n; i++) {
		const struct dev_par_qmat *m = &mats[i];
		dev_par_qlinear(p, M, m->N, K, x, m->W, m->row_bytes, m->q, m->b, m->y, scratch);
		for (size_t r = 0; m->argmax && r < M; r++)
			m->argmax[r] = (int32_t)kn_ops()->argmax(m->y + r * m->N, m->N);
		for (size_t r = 0; !m->argmax && m->yrows && r < M; r++)
			memcpy(m->yrows[r], m->y + r * m->N, m->N * sizeof(float));
	}
}
