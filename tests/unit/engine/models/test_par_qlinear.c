/* tests/unit/engine/models/test_par_qlinear.c - dev_par_qlinear (the
 * threaded linear of the GGUF forward pass) on quantized weights, plain
 * and packed (kn_quant.h struct kn_qpack), against the kernels called
 * directly.
 *
 * For Q8_0, Q5_0, Q4_1 and Q4_K; the plain kernels, the packed reference
 * (kn_qpack_for(KN_ISA_REF): the packed path is exercised on every CPU)
 * and the packed kernels of this CPU where it has them; output widths
 * 16, 80 and 208 (one tile, uneven splits over threads, several tiles per
 * thread, threads without rows); widths in 64 and 640 (Q4_K: 256 and
 * 768); 1, 2, 17, 40 and 70 x rows (up to 64 the results go through a
 * block on the thread's stack); pools of 1 and 3
 * threads; with and without a bias: y equals quantize_x + gemv_xq of the
 * whole matrix per x row, plus the bias, bit for bit (dev_par_qlinear's
 * row tiles and thread splits never change a result), and nothing past y
 * is written.
 */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "devices/dev_pool.h"
#include "devices/dev_par.h"
#include "kernels/kn.h"
#include "kernels/kn_quant.h"
#include "tests/unit/kernels/kn_test_quant.h"

#define SENTINEL 0xa5a5a5a5u

struct ops_case {
	const char *name;
	const struct kn_qops *q;  /* the kernels dev_par_qlinear gets */
	const struct kn_qpack *pk; /* their packer, or NULL (plain) */
};

/* y[M, N] as the kernels give it: per x row, quantize_x then gemv_xq over
 * all N rows; plus b. */
static void expected(const struct kn_qops *q, const void *W, size_t rb, const float *x,
		     const float *b, size_t M, size_t N, size_t K, float *y)
{
	char *xq = malloc(q->xq_bytes(K));
	assert_non_null(xq);
	for (size_t m = 0; m < M; m++) {
		q->quantize_x(x + m * K, xq, K);
		q->gemv_xq(W, rb, xq, y + m * N, N, K);
		for (size_t r = 0; b && r < N; r++)
			y[m * N + r] += b[r];
	}
	free(xq);
}

static void run_case(const struct ops_case *c, int type, struct dev_pool *pool, size_t M,
		     size_t N, size_t K, int with_bias)
{
	size_t rb = kn_qtype_row_bytes(type, K), nb = K / kn_qtype_get(type)->block_elems;
	uint8_t *w = malloc(N * rb), *wp = malloc(N * rb);
	float *x = malloc(M * K * sizeof(float)), *b = malloc(N * sizeof(float));
	float *want = malloc(M * N * sizeof(float)), *y = malloc((M * N + 16) * sizeof(float));
	size_t n_scratch = (size_t)dev_pool_size(pool) * DEV_PAR_QTILE * K;
	float *scratch = malloc(n_scratch * sizeof(float));
	assert_true(w && wp && x && b && want && y && scratch);
	fill_blocks(w, type, N * nb, 0);
	for (size_t i = 0; i < M * K; i++)
		x[i] = rng_uniform(-2.0f, 2.0f);
	for (size_t r = 0; r < N; r++)
		b[r] = rng_uniform(-1.0f, 1.0f);
	const void *W = w;
	if (c->pk) {
		c->pk->pack(w, rb, N, K, wp);
		W = wp;
	}
	expected(c->q, W, rb, x, with_bias ? b : NULL, M, N, K, want);
	memset(y, 0xa5, (M * N + 16) * sizeof(float));
	dev_par_qlinear(pool, M, N, K, x, W, rb, c->q, with_bias ? b : NULL, y, scratch);
	assert_memory_equal(y, want, M * N * sizeof(float));
	for (size_t i = M * N; i < M * N + 16; i++)
		assert_int_equal(f32_bits(y[i]), SENTINEL);
	free(w);
	free(wp);
	free(x);
	free(b);
	free(want);
	free(y);
	free(scratch);
}

static void test_qlinear(void **state)
{
	(void)state;
	static const int types[] = { KN_Q_Q8_0, KN_Q_Q5_0, KN_Q_Q4_1, KN_Q_Q4_K };
	static const size_t widths[] = { 16, 80, 208 }, rows[] = { 1, 2, 17, 40, 70 };
	static const size_t ks32[] = { 64, 640 }, ks256[] = { 256, 768 };
	static const int threads[] = { 1, 3 };
	for (size_t ti = 0; ti < sizeof(types) / sizeof(*types); ti++) {
		int type = types[ti];
		const size_t *ks = type == KN_Q_Q4_K ? ks256 : ks32;
		struct ops_case cases[3] = {
			{ "plain", kn_qops_get(type), NULL },
			{ "packed reference", NULL, kn_qpack_for(KN_ISA_REF, type) },
			{ "packed", NULL, kn_qpack_get(type) },
		};
		for (int ci = 0; ci < 3; ci++) {
			struct ops_case *c = &cases[ci];
			if (c->pk)
				c->q = c->pk->ops;
			if (!c->q) {
				printf("%s %s: not on this CPU\n", kn_qtype_get(type)->name, c->name);
				continue;
			}
			for (size_t p = 0; p < 2; p++) {
				struct dev_pool *pool;
				assert_int_equal(dev_pool_create(threads[p], NULL, &pool), 0);
				for (size_t wi = 0; wi < 3; wi++)
					for (size_t ri = 0; ri < 5; ri++)
						for (size_t ki = 0; ki < 2; ki++)
							run_case(c, type, pool, rows[ri], widths[wi], ks[ki],
								 (int)((wi + ri) & 1));
				dev_pool_destroy(pool);
			}
			printf("%s %s: dev_par_qlinear == the kernels, bit for bit\n",
			       kn_qtype_get(type)->name, c->name);
		}
	}
}

/* dev_par_qlinear_multi: matrices of mixed types and layouts over the
 * same x give each what dev_par_qlinear gives it alone (checked above
 * against the kernels), bit for bit, in y or in yrows; the fused
 * path (every N a multiple of 16) and the fallback (an N of 24). */
static void run_multi(struct dev_pool *pool, size_t M, size_t K, const size_t *Ns, int with_yrows)
{
	const int types[3] = { KN_Q_Q8_0, KN_Q_Q5_0, KN_Q_Q4_K };
	struct dev_par_qmat m[3];
	float *want[3], *rows[3][40], *bias[3];
	uint8_t *wts[3];
	float *x = malloc(M * K * sizeof(float));
	size_t n_scratch = (size_t)dev_pool_size(pool) * DEV_PAR_QTILE * K;
	float *scratch = malloc(n_scratch * sizeof(float));
	assert_true(x && scratch && M <= 40);
	for (size_t i = 0; i < M * K; i++)
		x[i] = rng_uniform(-2.0f, 2.0f);
	for (int i = 0; i < 3; i++) {
		/* packed where the CPU has the layout (and N fits its groups) */
		const struct kn_qpack *pk = Ns[i] % 16 ? NULL : kn_qpack_get(types[i]);
		const struct kn_qops *q = pk ? pk->ops : kn_qops_get(types[i]);
		size_t rb = kn_qtype_row_bytes(types[i], K);
		size_t nb = K / kn_qtype_get(types[i])->block_elems;
		uint8_t *w = malloc(Ns[i] * rb);
		wts[i] = malloc(Ns[i] * rb);
		want[i] = malloc(M * Ns[i] * sizeof(float));
		float *y = malloc(M * Ns[i] * sizeof(float)), *b = malloc(Ns[i] * sizeof(float));
		assert_true(w && wts[i] && want[i] && y && b);
		bias[i] = b;
		fill_blocks(w, types[i], Ns[i] * nb, 0);
		if (pk)
			pk->pack(w, rb, Ns[i], K, wts[i]);
		else
			memcpy(wts[i], w, Ns[i] * rb);
		free(w);
		for (size_t r = 0; r < Ns[i]; r++)
			b[r] = rng_uniform(-1.0f, 1.0f);
		for (size_t r = 0; r < M; r++) {
			rows[i][r] = malloc(Ns[i] * sizeof(float));
			assert_non_null(rows[i][r]);
		}
		m[i] = (struct dev_par_qmat){ .W = wts[i], .row_bytes = rb, .N = Ns[i], .q = q,
					      .b = i == 1 ? b : NULL, .y = y,
					      .yrows = with_yrows ? rows[i] : NULL };
		dev_par_qlinear(pool, M, Ns[i], K, x, wts[i], rb, q, m[i].b, want[i], scratch);
	}
	dev_par_qlinear_multi(pool, M, K, x, m, 3, scratch);
	for (int i = 0; i < 3; i++) {
		if (!with_yrows)
			assert_memory_equal(m[i].y, want[i], M * Ns[i] * sizeof(float));
		for (size_t r = 0; with_yrows && r < M; r++)
			assert_memory_equal(rows[i][r], want[i] + r * Ns[i], Ns[i] * sizeof(float));
		for (size_t r = 0; r < M; r++)
			free(rows[i][r]);
		free(bias[i]);
		free(m[i].y);
		free(want[i]);
		free(wts[i]);
	}
	free(x);
	free(scratch);
}

static void test_qlinear_multi(void **state)
{
	(void)state;
	static const size_t fused[3] = { 80, 16, 208 }, mixed[3] = { 80, 24, 208 };
	static const size_t rows[] = { 1, 2, 17, 40 };
	static const int threads[] = { 1, 3 };
	for (size_t p = 0; p < 2; p++) {
		struct dev_pool *pool;
		assert_int_equal(dev_pool_create(threads[p], NULL, &pool), 0);
		for (size_t ri = 0; ri < 4; ri++) {
			run_multi(pool, rows[ri], 768, fused, (int)(ri & 1));
			run_multi(pool, rows[ri], 768, mixed, (int)(~ri & 1));
		}
		dev_pool_destroy(pool);
	}
}

/* dev_par_qmat argmax: each row's argmax equals kn argmax over the row
 * dev_par_qlinear gives (the greedy scan: first of equal maxima, a NaN
 * never taken but at column 0), across tiles and threads: biases put a
 * NaN at column 0; NaNs at the starts of later tiles and thread shares
 * (64, 65, 128, 144); two equal maxima (1e30 at 5 and 150). */
static void run_argmax(struct dev_pool *pool, size_t M, size_t N, int bias_kind)
{
	const size_t K = 640;
	const struct kn_qpack *pk = N % 16 ? NULL : kn_qpack_get(KN_Q_Q8_0);
	const struct kn_qops *q = pk ? pk->ops : kn_qops_get(KN_Q_Q8_0);
	size_t rb = kn_qtype_row_bytes(KN_Q_Q8_0, K), nb = K / 32;
	uint8_t *w = malloc(N * rb), *wp = malloc(N * rb);
	float *x = malloc(M * K * sizeof(float)), *b = malloc(N * sizeof(float));
	float *y = malloc(M * N * sizeof(float)), *y2 = malloc(M * N * sizeof(float));
	size_t n_scratch = (size_t)dev_pool_size(pool) * DEV_PAR_QTILE * K;
	float *scratch = malloc(n_scratch * sizeof(float));
	int32_t got[70];
	assert_true(w && wp && x && b && y && y2 && scratch && M <= 70);
	fill_blocks(w, KN_Q_Q8_0, N * nb, 0);
	if (pk)
		pk->pack(w, rb, N, K, wp);
	else
		memcpy(wp, w, N * rb);
	for (size_t i = 0; i < M * K; i++)
		x[i] = rng_uniform(-2.0f, 2.0f);
	for (size_t r = 0; r < N; r++)
		b[r] = rng_uniform(-1.0f, 1.0f);
	if (bias_kind == 1)
		b[0] = NAN;
	static const size_t nans[] = { 64, 65, 128, 144 };
	for (size_t i = 0; bias_kind == 2 && i < 4; i++)
		if (nans[i] < N)
			b[nans[i]] = NAN;
	if (bias_kind == 3 && N > 150)
		b[5] = b[150] = 1e30f;
	dev_par_qlinear(pool, M, N, K, x, wp, rb, q, b, y, scratch);
	struct dev_par_qmat m = { .W = wp, .row_bytes = rb, .N = N, .q = q, .b = b, .y = y2,
				  .argmax = got };
	dev_par_qlinear_multi(pool, M, K, x, &m, 1, scratch);
	for (size_t r = 0; r < M; r++)
		assert_int_equal(got[r], (int32_t)kn_ops()->argmax(y + r * N, N));
	if (bias_kind == 1)
		assert_int_equal(got[0], 0);
	if (bias_kind == 3 && N > 150)
		assert_int_equal(got[0], 5);
	free(w);
	free(wp);
	free(x);
	free(b);
	free(y);
	free(y2);
	free(scratch);
}

static void test_qlinear_argmax(void **state)
{
	(void)state;
	static const size_t rows[] = { 1, 3, 17, 70 }, widths[] = { 208, 24, 1024 };
	for (int th = 1; th <= 3; th++) {
		struct dev_pool *pool;
		assert_int_equal(dev_pool_create(th, NULL, &pool), 0);
		for (size_t ri = 0; ri < 4; ri++)
			for (size_t wi = 0; wi < 3; wi++)
				for (int kind = 0; kind < 4; kind++)
					run_argmax(pool, rows[ri], widths[wi], kind);
		dev_pool_destroy(pool);
	}
}

int main(void)
{
	kn_init(KN_ISA_COUNT);
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_qlinear),
					    cmocka_unit_test(test_qlinear_multi),
					    cmocka_unit_test(test_qlinear_argmax) };
	return cmocka_run_group_tests(tests, NULL, NULL);
}
