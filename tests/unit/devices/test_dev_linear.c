/* test_dev_linear.c - dev_mat_create and dev_linear on the opencl back end
 * (PoCL here) against the cpu back end, for every weight type the opencl
 * back end multiplies, at shapes that take the cpu's packed layouts (rows
 * a multiple of 16) and its plain ones, one and several x rows, with and
 * without a bias; dev_linear_n against dev_linear and dev_embed against
 * the reference dequantization, on each back end; dev_conv1d (Whisper's
 * front end) on each against the convolution summed in double.
 *
 * The bound. The cpu, as llama.cpp's CPU back end, first quantizes x to
 * the type's integer partner (Q8_0 / Q8_1: 32-element blocks scaled by
 * their largest |x| / 127; Q8_K, the K-quants' and IQ4_XS's: the same
 * over 256-element blocks) or rounds it to binary16 / bfloat16, against
 * the exact product of the dequantized weights. So each output may differ
 * by sum_k |w_k| e_k, with e_k x_k's rounding: at most one step, the
 * block's max |x| / 127, for the integer types; |x_k| 2^-11 for F16;
 * |x_k| 2^-8 for BF16; 0 for F32; plus 2e-5 of sum_k |w_k x_k| for the
 * order of the sums. Both back ends are held to that bound around the
 * exact product of the reference dequantization (kernels/ref, in double),
 * so the bound is checked to hold for the cpu too.
 *
 * Since opencl computes what the cpu's scalar reference computes
 * (devices/opencl/dev_ocl_mat.c, kernels/opencl/dev_linear_xq.cl), every type
 * but F32 is also held to the reference ISA's result bit for bit
 * (kn_qops_for(KN_ISA_REF): quantize_x + gemv_xq, or round_x + gemv, then
 * the bias added in float as the cpu adds it). F32 multiplies x as it is,
 * its products contracted into fma by the OpenCL compiler: the bound
 * only.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/st.h"
#include "devices/dev.h"
#include "tests/unit/devices/dev_pair.h"
#include "kernels/kn.h"
#include "kernels/kn_attn.h"
#include "kernels/kn_half.h"
#include "kernels/kn_quant.h"

static uint64_t rng = 0x243f6a8885a308d3ull;

static uint32_t rnd_u32(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return (uint32_t)((rng * 0x2545f4914f6cdd1dull) >> 32);
}

/* Uniform in [lo, hi). */
static float rnd(float lo, float hi)
{
	return lo + (hi - lo) * (float)(rnd_u32() >> 8) / (float)(1u << 24);
}

static void put_f16(uint8_t *p, float v)
{
	uint16_t h = kn_f32_to_f16(v);
	memcpy(p, &h, 2);
}

/* Byte offsets in a block of its binary16 scale d and of its second
 * binary16 field, Q4_1 / Q5_1's m or a K-quant's dmin (-1: none), as
 * kernels/ref/quant.c lays them out. */
static void half_fields(int type, int *d, int *m)
{
	*d = type == 10 ? 80 : type == 11 ? 108 : type == 14 ? 208 : 0; /* Q2_K, Q3_K, Q6_K */
	*m = type == 10 ? 82 : type == 3 || type == 7 || type == 12 || type == 13 ? 2 : -1;
}

/* Random rows of type: random codes, with each block's scale (and min)
 * a sane binary16; F32/F16/BF16 elements in [-1, 1). */
static void fill_rows(int type, uint8_t *w, size_t rows, size_t cols, size_t rb)
{
	const struct kn_qtype_info *t = kn_qtype_get(type);
	int d_at, m_at;
	half_fields(type, &d_at, &m_at);
	for (size_t r = 0; r < rows; r++) {
		uint8_t *row = w + r * rb;
		for (size_t i = 0; i < rb; i++)
			row[i] = (uint8_t)rnd_u32();
		for (size_t k = 0; type == 0 && k < cols; k++) {
			float v = rnd(-1, 1);
			memcpy(row + 4 * k, &v, 4);
		}
		for (size_t k = 0; type == 1 && k < cols; k++)
			put_f16(row + 2 * k, rnd(-1, 1));
		for (size_t k = 0; type == 30 && k < cols; k++) {
			uint16_t b = kn_f32_to_bf16(rnd(-1, 1));
			memcpy(row + 2 * k, &b, 2);
		}
		if (t->block_elems == 1)
			continue;
		for (size_t b = 0; b < cols / t->block_elems; b++) {
			uint8_t *blk = row + b * t->block_bytes;
			put_f16(blk + d_at, rnd(0.001f, 0.02f)); /* d */
			if (m_at >= 0 && t->block_elems == 256)
				put_f16(blk + m_at, rnd(0.001f, 0.02f)); /* dmin */
			else if (m_at >= 0)
				put_f16(blk + m_at, rnd(-0.1f, 0.1f)); /* m */
		}
	}
}

/* x_k's rounding on the cpu's path (see the header). */
static double x_err(int type, const float *x, size_t k, size_t K)
{
	if (type == 0)
		return 0.0;
	if (type == 1)
		return fabs(x[k]) * ldexp(1.0, -11);
	if (type == 30)
		return fabs(x[k]) * ldexp(1.0, -8);
	size_t n = kn_qtype_get(type)->block_elems == 256 ? 256 : 32; /* Q8_K or Q8_0/Q8_1 */
	size_t b0 = k / n * n;
	double amax = 0.0;
	for (size_t i = b0; i < b0 + n && i < K; i++)
		amax = fmax(amax, fabs(x[i]));
	return amax / 127.0;
}

/* y[M, N] = x W^T (+ b) as the cpu's scalar reference computes it, row by
 * row as devices/dev_par_q.c calls its kernels: x's row quantized to the
 * type's partner (xq_bytes(K) bytes) and gemv_xq, or rounded and gemv
 * (F16 / BF16), or gemv (F32); then b added in float. */
static void ref_linear(int type, const uint8_t *w, size_t rb, const float *x, size_t M, size_t N,
		       size_t K, const float *b, float *y)
{
	const struct kn_qops *ref = kn_qops_for(KN_ISA_REF, type);
	void *xq = malloc(ref->quantize_x ? ref->xq_bytes(K) : K * sizeof(float));
	for (size_t m = 0; m < M; m++) {
		const float *xr = x + m * K;
		float *yr = y + m * N;
		if (ref->quantize_x) {
			ref->quantize_x(xr, xq, K);
			ref->gemv_xq(w, rb, xq, yr, N, K);
		} else if (ref->round_x) {
			ref->round_x(xr, xq, K);
			ref->gemv(w, rb, xq, yr, N, K);
		} else {
			ref->gemv(w, rb, xr, yr, N, K);
		}
		for (size_t n = 0; b && n < N; n++)
			yr[n] += b[n];
	}
	free(xq);
}

/* opencl's y equals the reference's bit for bit (F32: not checked). */
static void check_ref(int type, const uint8_t *w, size_t rb, const float *x, size_t M, size_t N,
		      size_t K, const float *b, const float *yo)
{
	if (type == 0)
		return;
	float *yr = malloc(M * N * sizeof(float));
	ref_linear(type, w, rb, x, M, N, K, b, yr);
	for (size_t i = 0; i < M * N; i++) {
		if (memcmp(&yo[i], &yr[i], sizeof(float))) {
			fprintf(stderr, "type %d M %zu N %zu K %zu [%zu,%zu]: ref %.9g opencl %.9g\n",
				type, M, N, K, i / N, i % N, yr[i], yo[i]);
			fail();
		}
	}
	free(yr);
}

static void check_type(struct pair *p, int type, size_t M, size_t N, size_t K, bool bias)
{
	size_t rb = kn_qtype_row_bytes(type, K);
	assert_true(rb > 0);
	assert_int_equal(dev_mat_row_bytes(type, K), rb);
	uint8_t *w = malloc(N * rb);
	fill_rows(type, w, N, K, rb);
	float *x = malloc(M * K * sizeof(float)), *b = malloc(N * sizeof(float));
	for (size_t i = 0; i < M * K; i++)
		x[i] = rnd(-2, 2);
	/* row 0's first 256 elements: halfway cases of the quantizers (each
	 * 32-element block's largest |x| 127 / 64, so d = 1 / 64 and the rest
	 * (k + 0.5) / 64 are ties: Q8_0 / Q8_1 round them away from zero, Q8_K
	 * to even); row 1's: zero, a partner block with d = 0 */
	for (size_t i = 0; i < K && i < 256; i++)
		x[i] = i % 32 == 0 ? 127.0f / 64 : ((float)(i % 61) - 30.5f) / 64;
	for (size_t i = 0; M > 1 && i < K && i < 256; i++)
		x[K + i] = 0.0f;
	for (size_t i = 0; i < N; i++)
		b[i] = rnd(-1, 1);
	/* cpu: host memory */
	struct dev_mat *mc, *mo;
	char err[256];
	assert_int_equal(dev_mat_create(p->cpu, type, N, K, w, rb, 0, &mc, err, sizeof(err)), 0);
	float *yc = malloc(M * N * sizeof(float)), *yo = malloc(M * N * sizeof(float));
	assert_int_equal(dev_linear(p->qc, mc, x, M, bias ? b : NULL, yc), 0);
	/* opencl */
	assert_int_equal(dev_mat_create(p->ocl, type, N, K, w, rb, 0, &mo, err, sizeof(err)), 0);
	float *dx = dev_alloc(p->ocl, M * K * 4), *db = dev_alloc(p->ocl, N * 4);
	float *dy = dev_alloc(p->ocl, M * N * 4);
	assert_int_equal(dev_upload(p->qo, dx, x, M * K * 4), 0);
	assert_int_equal(dev_upload(p->qo, db, b, N * 4), 0);
	assert_int_equal(dev_linear(p->qo, mo, dx, M, bias ? db : NULL, dy), 0);
	assert_int_equal(dev_download(p->qo, yo, dy, M * N * 4), 0);
	check_ref(type, w, rb, x, M, N, K, bias ? b : NULL, yo);
	/* the exact product of the reference dequantization */
	const struct kn_qops *ref = kn_qops_for(KN_ISA_REF, type);
	float *wd = malloc(K * sizeof(float));
	for (size_t n = 0; n < N; n++) {
		ref->dequant(w + n * rb, wd, K);
		for (size_t m = 0; m < M; m++) {
			const float *xr = x + m * K;
			double exact = bias ? b[n] : 0.0, mag = 0.0, bound = 1e-6;
			for (size_t k = 0; k < K; k++) {
				exact += (double)wd[k] * xr[k];
				mag += fabs((double)wd[k] * xr[k]);
				bound += fabs(wd[k]) * x_err(type, xr, k, K);
			}
			bound += 2e-5 * mag;
			double ec = fabs(yc[m * N + n] - exact), eo = fabs(yo[m * N + n] - exact);
			if (!(ec <= bound) || !(eo <= bound)) {
				fprintf(stderr,
					"type %d M %zu N %zu K %zu [%zu,%zu]: exact %.7g cpu %.7g "
					"opencl %.7g bound %.3g\n",
					type, M, N, K, m, n, exact, yc[m * N + n], yo[m * N + n], bound);
				fail();
			}
		}
	}
	free(wd);
	dev_free(p->ocl, dx);
	dev_free(p->ocl, db);
	dev_free(p->ocl, dy);
	dev_mat_destroy(mo);
	dev_mat_destroy(mc);
	free(w);
	free(x);
	free(b);
	free(yc);
	free(yo);
}

static const int types[] = { 0, 1, 30, 8, 2, 3, 6, 7, 10, 11, 12, 13, 14, 20, 23 };

static void test_types(void **state)
{
	struct pair *p = *state;
	/* (M, N, K): N a multiple of 16 (the cpu's packed layouts) or not;
	 * K whole blocks, 32 elements or 256 (the K-quants and IQ4_XS). */
	static const size_t shapes32[][3] = {
		{ 1, 16, 64 }, { 3, 33, 32 }, { 17, 64, 96 }, { 5, 1, 256 }, { 2, 48, 512 },
	};
	static const size_t shapes256[][3] = {
		{ 1, 16, 256 }, { 3, 33, 512 }, { 17, 64, 256 }, { 5, 1, 512 }, { 2, 48, 768 },
	};
	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
		bool k256 = kn_qtype_get(types[t])->block_elems == 256;
		const size_t(*shapes)[3] = k256 ? shapes256 : shapes32;
		for (size_t s = 0; s < sizeof(shapes32) / sizeof(shapes32[0]); s++)
			check_type(p, types[t], shapes[s][0], shapes[s][1], shapes[s][2],
				   s % 2 == 0);
	}
}

/* dev_linear_n on one back end: q, k, v style matrices over one x, one
 * output on the device, one into host rows, then an lm head's argmax,
 * each equal bit for bit to dev_linear (and dev_argmax of its result) on
 * the same back end. */
static void check_linear_n(struct dev *d, struct dev_queue *q, bool on_dev)
{
	enum { M = 5, K = 256 };
	static const int mtypes[3] = { 8, 12, 3 };
	static const size_t rows[3] = { 32, 16, 24 };
	struct dev_mat *w[3];
	uint8_t *hw[3];
	char err[256];
	float *x = malloc(M * K * 4), *b = malloc(32 * 4);
	for (size_t i = 0; i < M * K; i++)
		x[i] = rnd(-2, 2);
	for (size_t i = 0; i < 32; i++)
		b[i] = rnd(-1, 1);
	for (int i = 0; i < 3; i++) {
		size_t rb = kn_qtype_row_bytes(mtypes[i], K);
		hw[i] = malloc(rows[i] * rb);
		fill_rows(mtypes[i], hw[i], rows[i], K, rb);
		assert_int_equal(dev_mat_create(d, mtypes[i], rows[i], K, hw[i], rb, 0, &w[i], err,
						sizeof(err)), 0);
	}
	/* device buffers (host memory on the cpu) */
	float *dx = on_dev ? dev_alloc(d, M * K * 4) : x, *db = on_dev ? dev_alloc(d, 32 * 4) : b;
	if (on_dev) {
		assert_int_equal(dev_upload(q, dx, x, M * K * 4), 0);
		assert_int_equal(dev_upload(q, db, b, 32 * 4), 0);
	}
	float *y[3], *one = dev_alloc(d, M * 32 * 4);
	for (int i = 0; i < 3; i++)
		y[i] = dev_alloc(d, M * rows[i] * 4);
	float host_rows[M][24], *yr[M];
	for (int m = 0; m < M; m++)
		yr[m] = host_rows[m];
	struct dev_linear_out o[3] = { { w[0], db, y[0], NULL, NULL },
				       { w[1], NULL, y[1], NULL, NULL },
				       { w[2], db, y[2], yr, NULL } };
	assert_int_equal(dev_linear_n(q, dx, M, o, 3), 0);
	float got[M * 32], want[M * 32];
	for (int i = 0; i < 3; i++) {
		size_t n = M * rows[i];
		assert_int_equal(dev_linear(q, w[i], dx, M, o[i].b, one), 0);
		assert_int_equal(dev_download(q, want, one, n * 4), 0);
		if (i < 2)
			assert_int_equal(dev_download(q, got, y[i], n * 4), 0);
		else
			for (int m = 0; m < M; m++)
				memcpy(got + m * rows[i], host_rows[m], rows[i] * 4);
		assert_memory_equal(got, want, n * 4);
	}
	int32_t am[M], am_want[M];
	struct dev_linear_out head = { w[0], db, y[0], NULL, am };
	assert_int_equal(dev_linear_n(q, dx, M, &head, 1), 0);
	assert_int_equal(dev_linear(q, w[0], dx, M, db, one), 0);
	assert_int_equal(dev_argmax(q, one, M, 32, am_want), 0);
	assert_memory_equal(am, am_want, sizeof(am));
	/* refused: too many outputs, widths that differ, both host outputs */
	struct dev_linear_out bad[5] = { o[0], o[1], o[2], o[0], o[1] };
	assert_int_equal(dev_linear_n(q, dx, M, bad, 5), -ST_INVAL);
	struct dev_mat *w64;
	assert_int_equal(dev_mat_create(d, 0, 2, 64, x, 256, 0, &w64, err, sizeof(err)), 0);
	bad[1].w = w64;
	assert_int_equal(dev_linear_n(q, dx, M, bad, 2), -ST_INVAL);
	head.yrows = yr;
	assert_int_equal(dev_linear_n(q, dx, M, &head, 1), -ST_INVAL);
	dev_mat_destroy(w64);
	for (int i = 0; i < 3; i++) {
		dev_free(d, y[i]);
		dev_mat_destroy(w[i]);
		free(hw[i]);
	}
	dev_free(d, one);
	if (on_dev) {
		dev_free(d, dx);
		dev_free(d, db);
	}
	free(x);
	free(b);
}

static void test_linear_n(void **state)
{
	struct pair *p = *state;
	check_linear_n(p->cpu, p->qc, false);
	check_linear_n(p->ocl, p->qo, true);
}

/* dev_embed: rows looked up by id equal the reference dequantization of
 * those rows exactly, on both back ends; an id past the rows is refused. */
static void test_embed(void **state)
{
	struct pair *p = *state;
	static const int etypes[] = { 0, 1, 8, 14, 12, 23 };
	enum { ROWS = 40, K = 512, N = 4 };
	int32_t ids[N] = { 0, 39, 7, 7 };
	for (size_t t = 0; t < sizeof(etypes) / sizeof(etypes[0]); t++) {
		size_t rb = kn_qtype_row_bytes(etypes[t], K);
		uint8_t *w = malloc(ROWS * rb);
		fill_rows(etypes[t], w, ROWS, K, rb);
		struct dev_mat *mc, *mo;
		char err[256];
		assert_int_equal(dev_mat_create(p->cpu, etypes[t], ROWS, K, w, rb, 0, &mc, err,
						sizeof(err)), 0);
		assert_int_equal(dev_mat_create(p->ocl, etypes[t], ROWS, K, w, rb, 0, &mo, err,
						sizeof(err)), 0);
		float *yc = malloc(N * K * 4), *yo = malloc(N * K * 4), *want = malloc(N * K * 4);
		float *dy = dev_alloc(p->ocl, N * K * 4);
		const struct kn_qops *ref = kn_qops_for(KN_ISA_REF, etypes[t]);
		for (int i = 0; i < N; i++)
			ref->dequant(w + (size_t)ids[i] * rb, want + i * K, K);
		assert_int_equal(dev_embed(p->qc, mc, ids, N, yc), 0);
		assert_int_equal(dev_embed(p->qo, mo, ids, N, dy), 0);
		assert_int_equal(dev_download(p->qo, yo, dy, N * K * 4), 0);
		assert_memory_equal(yc, want, N * K * 4);
		assert_memory_equal(yo, want, N * K * 4);
		int32_t bad = ROWS;
		assert_int_equal(dev_embed(p->qo, mo, &bad, 1, dy), -ST_INVAL);
		/* a lookup-only table: the same rows, no products */
		struct dev_mat *lk;
		assert_int_equal(dev_mat_create(p->ocl, etypes[t], ROWS, K, w, rb, DEV_MAT_LOOKUP,
						&lk, err, sizeof(err)), 0);
		assert_int_equal(dev_embed(p->qo, lk, ids, N, dy), 0);
		assert_int_equal(dev_download(p->qo, yo, dy, N * K * 4), 0);
		assert_memory_equal(yo, want, N * K * 4);
		assert_int_equal(dev_linear(p->qo, lk, dy, 1, NULL, dy + K), -ST_INVAL);
		dev_mat_destroy(lk);
		dev_free(p->ocl, dy);
		dev_mat_destroy(mc);
		dev_mat_destroy(mo);
		free(w);
		free(yc);
		free(yo);
		free(want);
	}
}

/* dev_conv1d on both back ends against the convolution summed in double
 * (bound: 1e-6 + 2e-5 of sum |w x| for the order of the sums); the cpu's
 * bits are kn_conv1d's, the kernel the Whisper encoder runs. Odd channel
 * counts, strides 1-3, padding 0-2, a kernel wider than the padding. */
static void check_conv1d(struct pair *p, size_t t_in, size_t c_in, size_t c_out, size_t k,
			 size_t stride, size_t pad, bool bias)
{
	size_t t_out = dev_conv1d_out_len(t_in, k, stride, pad), K = c_in * k;
	assert_true(t_out > 0);
	float *w = malloc(c_out * K * 4), *x = malloc(t_in * c_in * 4), *b = malloc(c_out * 4);
	for (size_t i = 0; i < c_out * K; i++)
		w[i] = rnd(-1, 1);
	for (size_t i = 0; i < t_in * c_in; i++)
		x[i] = rnd(-2, 2);
	for (size_t i = 0; i < c_out; i++)
		b[i] = rnd(-1, 1);
	struct dev_mat *mc, *mo;
	char err[256];
	assert_int_equal(dev_mat_create(p->cpu, 0, c_out, K, w, K * 4, 0, &mc, err, sizeof(err)), 0);
	assert_int_equal(dev_mat_create(p->ocl, 0, c_out, K, w, K * 4, 0, &mo, err, sizeof(err)), 0);
	float *yc = malloc(t_out * c_out * 4), *yo = malloc(t_out * c_out * 4);
	float *yk = malloc(t_out * c_out * 4), *col = malloc(t_out * K * 4);
	assert_int_equal(dev_conv1d(p->qc, mc, c_in, k, stride, pad, x, t_in, bias ? b : NULL, yc),
			 0);
	kn_conv1d(t_in, c_in, c_out, k, stride, pad, x, w, bias ? b : NULL, yk, col);
	assert_memory_equal(yc, yk, t_out * c_out * 4);
	float *dx = dev_alloc(p->ocl, t_in * c_in * 4), *db = dev_alloc(p->ocl, c_out * 4);
	float *dy = dev_alloc(p->ocl, t_out * c_out * 4);
	assert_int_equal(dev_upload(p->qo, dx, x, t_in * c_in * 4), 0);
	assert_int_equal(dev_upload(p->qo, db, b, c_out * 4), 0);
	assert_int_equal(dev_conv1d(p->qo, mo, c_in, k, stride, pad, dx, t_in, bias ? db : NULL, dy),
			 0);
	assert_int_equal(dev_download(p->qo, yo, dy, t_out * c_out * 4), 0);
	for (size_t t = 0; t < t_out; t++)
		for (size_t o = 0; o < c_out; o++) {
			double exact = bias ? b[o] : 0.0, mag = 0.0;
			for (size_t j = 0; j < k; j++) {
				long r = (long)(t * stride + j) - (long)pad;
				if (r < 0 || r >= (long)t_in)
					continue;
				for (size_t c = 0; c < c_in; c++) {
					double v = (double)w[o * K + c * k + j] * x[(size_t)r * c_in + c];
					exact += v;
					mag += fabs(v);
				}
			}
			double bound = 1e-6 + 2e-5 * mag;
			double ec = fabs(yc[t * c_out + o] - exact), eo = fabs(yo[t * c_out + o] - exact);
			if (!(ec <= bound) || !(eo <= bound)) {
				fprintf(stderr,
					"conv1d t_in %zu c_in %zu c_out %zu k %zu stride %zu pad %zu "
					"[%zu,%zu]: exact %.7g cpu %.7g opencl %.7g bound %.3g\n",
					t_in, c_in, c_out, k, stride, pad, t, o, exact, yc[t * c_out + o],
					yo[t * c_out + o], bound);
				fail();
			}
		}
	dev_free(p->ocl, dx);
	dev_free(p->ocl, db);
	dev_free(p->ocl, dy);
	dev_mat_destroy(mo);
	dev_mat_destroy(mc);
	free(w);
	free(x);
	free(b);
	free(yc);
	free(yo);
	free(yk);
	free(col);
}

static void test_conv1d(void **state)
{
	struct pair *p = *state;
	check_conv1d(p, 37, 5, 7, 3, 1, 1, true);    /* Whisper's conv1 shape, small */
	check_conv1d(p, 40, 67, 70, 3, 2, 1, true);  /* conv2's: stride 2 */
	check_conv1d(p, 9, 3, 65, 5, 3, 0, false);   /* no padding, no bias */
	check_conv1d(p, 4, 2, 3, 5, 1, 2, false);    /* every output row reads padding */
	check_conv1d(p, 1, 1, 1, 1, 1, 0, true);
	/* refused: a type other than F32, columns not c_in k, no output row */
	struct dev_mat *m16, *m32;
	char err[256];
	uint16_t w16[12] = { 0 };
	float w32[12] = { 0 }, *d = dev_alloc(p->ocl, 256);
	assert_int_equal(dev_mat_create(p->ocl, 1, 2, 6, w16, 12, 0, &m16, err, sizeof(err)), 0);
	assert_int_equal(dev_mat_create(p->ocl, 0, 2, 6, w32, 24, 0, &m32, err, sizeof(err)), 0);
	assert_int_equal(dev_conv1d(p->qo, m16, 2, 3, 1, 1, d, 4, NULL, d + 16), -ST_INVAL);
	assert_int_equal(dev_conv1d(p->qo, m32, 3, 3, 1, 1, d, 4, NULL, d + 16), -ST_INVAL);
	assert_int_equal(dev_conv1d(p->qo, m32, 2, 3, 1, 0, d, 2, NULL, d + 16), -ST_INVAL);
	assert_int_equal(dev_conv1d(p->qo, m32, 2, 3, 0, 1, d, 4, NULL, d + 16), -ST_INVAL);
	assert_int_equal(dev_conv1d(p->qc, m32, 2, 3, 1, 1, d, 4, NULL, d + 16), -ST_INVAL);
	assert_int_equal(dev_conv1d_out_len(3000, 3, 2, 1), 1500);
	dev_mat_destroy(m16);
	dev_mat_destroy(m32);
	dev_free(p->ocl, d);
}

/* Bad weights are refused with a reason; a type opencl lacks says so. */
static void test_refused(void **state)
{
	struct pair *p = *state;
	struct dev_mat *m;
	char err[256];
	uint8_t w[4096] = { 0 };
	assert_int_equal(dev_mat_create(p->ocl, 8, 4, 33, w, 34, 0, &m, err, sizeof(err)), -ST_INVAL);
	assert_non_null(strstr(err, "Q8_0"));
	assert_int_equal(dev_mat_create(p->ocl, 8, 4, 32, w, 36, 0, &m, err, sizeof(err)), -ST_INVAL);
	assert_int_equal(dev_mat_create(p->ocl, 99, 4, 32, w, 36, 0, &m, err, sizeof(err)),
			 -ST_UNSUPPORTED);
	assert_int_equal(dev_mat_row_bytes(99, 32), 0);
	assert_int_equal(dev_mat_row_bytes(8, 33), 0); /* not whole Q8_0 blocks */
	assert_int_equal(dev_mat_row_bytes(8, 64), 68);
	assert_int_equal(dev_mat_row_bytes(14, 512), 420); /* Q6_K: 210 bytes per 256 */
	assert_null(m);
	/* a matrix of one device on another's queue */
	assert_int_equal(dev_mat_create(p->cpu, 0, 2, 4, w, 16, 0, &m, err, sizeof(err)), 0);
	float *y = dev_alloc(p->ocl, 64);
	assert_int_equal(dev_linear(p->qo, m, y, 1, NULL, y + 4), -ST_INVAL);
	dev_free(p->ocl, y);
	dev_mat_destroy(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_types),
		cmocka_unit_test(test_linear_n),
		cmocka_unit_test(test_embed),
		cmocka_unit_test(test_conv1d),
		cmocka_unit_test(test_refused),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
