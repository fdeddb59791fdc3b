/* test_dev_ct2.c - weight matrices with CTranslate2's arithmetic
 * (dev.h's DEV_MAT_CT2 and DEV_TYPE_I8R, what the Whisper models run):
 *
 * - on the cpu back end, bit for bit the products the Whisper forward
 *   pass has always called (devices/dev_par.h on a one-thread pool):
 *   F32 dev_par_linear (OpenBLAS sgemm), F16 dev_par_linear_f16, BF16
 *   dev_par_linear_bf16 on kn_bf16_pack of the float32 weights (where the
 *   CPU has a bfloat16 product; refused with a reason where not), and
 *   I8R made by dev_quantize_i8r against dev_par_linear_i8 on
 *   kn_i8_quantize_w of the same float32 weights;
 * - on the opencl back end (PoCL here) and the cpu, within a stated bound
 *   of the exact product (in double) of the weights as stored: F32 and
 *   F16 with x as it is, 2e-5 of sum_k |w_k x_k| for the order of the
 *   sums; BF16 adds x's rounding to bfloat16, |x_k| 2^-8 per element; I8R
 *   on the cpu adds x's per-row quantization, one step max|x| / 63 per
 *   element (the 7-bit AVX2 variant's step; 127 elsewhere), while opencl
 *   multiplies the float x;
 * - the refusals: a GGUF block type or a lookup table with DEV_MAT_CT2,
 *   I8R without it, I8R in dev_embed, CT2 matrices in dev_linear_n, rows
 *   of the wrong size.
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
#include "devices/dev_par.h"
#include "tests/unit/devices/dev_pair.h"
#include "kernels/kn_bf16.h"
#include "kernels/kn_half.h"
#include "kernels/kn_i8.h"

static uint64_t rng = 0x13198a2e03707344ull;

static float rnd(float lo, float hi)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	uint32_t u = (uint32_t)((rng * 0x2545f4914f6cdd1dull) >> 32);
	return lo + (hi - lo) * (float)(u >> 8) / 16777216.0f;
}

/* One case: float32 weights W [N, K] made into a matrix of type. */
struct ct2_case {
	int type;
	size_t M, N, K;
	float *W, *x, *b;
	void *rows;	/* host rows of type */
	size_t rb;	/* their row bytes */
	float *wd;	/* the weights as stored, widened to float32 */
};

static void case_make(struct ct2_case *c, int type, size_t M, size_t N, size_t K)
{
	*c = (struct ct2_case){ .type = type, .M = M, .N = N, .K = K };
	c->W = malloc(N * K * sizeof(float));
	c->x = malloc(M * K * sizeof(float));
	c->b = malloc(N * sizeof(float));
	c->wd = malloc(N * K * sizeof(float));
	for (size_t i = 0; i < N * K; i++)
		c->W[i] = rnd(-1, 1);
	for (size_t k = 0; k < K; k++) /* an all-zero row: I8R scale 0 */
		c->W[(N - 1) * K + k] = 0.0f;
	for (size_t i = 0; i < M * K; i++)
		c->x[i] = rnd(-2, 2);
	for (size_t i = 0; i < N; i++)
		c->b[i] = rnd(-1, 1);
	c->rb = dev_mat_row_bytes(type, K);
	assert_true(c->rb > 0);
	c->rows = malloc(N * c->rb);
	size_t n = N * K;
	if (type == 0) {
		memcpy(c->rows, c->W, n * sizeof(float));
		memcpy(c->wd, c->W, n * sizeof(float));
	} else if (type == 1) {
		uint16_t *h = c->rows;
		for (size_t i = 0; i < n; i++) {
			h[i] = kn_f32_to_f16(c->W[i]);
			c->wd[i] = kn_f16_to_f32(h[i]);
		}
	} else if (type == 30) {
		uint16_t *h = c->rows;
		dev_round_bf16(c->W, n, h);
		for (size_t i = 0; i < n; i++) {
			assert_int_equal(h[i], kn_f32_to_bf16(c->W[i]));
			c->wd[i] = kn_bf16_to_f32(h[i]);
		}
	} else {
		assert_int_equal(dev_quantize_i8r(c->W, N, K, c->rows), 0);
		for (size_t r = 0; r < N; r++) {
			const char *row = (const char *)c->rows + r * c->rb;
			float s;
			memcpy(&s, row, sizeof(s));
			for (size_t k = 0; k < K; k++)
				c->wd[r * K + k] = (float)((const int8_t *)row)[4 + k] * s;
		}
	}
}

static void case_free(struct ct2_case *c)
{
	free(c->W);
	free(c->x);
	free(c->b);
	free(c->rows);
	free(c->wd);
}

/* What the Whisper forward pass computed for this case before it went
 * through dev.h, on a one-thread pool (dev_pool NULL). */
static void direct(const struct ct2_case *c, bool bias, float *y)
{
	const float *b = bias ? c->b : NULL;
	size_t M = c->M, N = c->N, K = c->K;
	if (c->type == 0) {
		dev_par_linear(NULL, M, N, K, c->x, c->W, b, y);
	} else if (c->type == 1) {
		dev_par_linear_f16(NULL, M, N, K, c->x, c->rows, b, y);
	} else if (c->type == 30) {
		uint16_t *wp = malloc(kn_bf16_packed_len(N, K) * sizeof(uint16_t));
		kn_bf16_pack(c->W, N, K, wp);
		assert_int_equal(dev_par_linear_bf16(NULL, M, N, K, c->x, wp, b, y), 0);
		free(wp);
	} else {
		size_t np = kn_i8_npad(N), kp = kn_i8_kpad(K);
		int8_t *packed = malloc(np * kp), *row = malloc(kp);
		float *scale = malloc(np * sizeof(float));
		int32_t *comp = malloc(np * sizeof(int32_t));
		kn_i8_quantize_w(c->W, N, K, packed, scale, comp, row);
		struct kn_i8w w = { packed, scale, comp, N, K };
		dev_par_linear_i8(NULL, M, c->x, &w, b, y);
		free(packed);
		free(row);
		free(scale);
		free(comp);
	}
}

/* y within the bound (top of the file) of the exact product; x_step:
 * the error of one element of x relative to max|x of its row| (I8R on
 * the cpu), or 0. */
static void check_bound(const struct ct2_case *c, bool bias, const float *y, double x_rel,
			double x_step, const char *who)
{
	for (size_t m = 0; m < c->M; m++) {
		const float *xr = c->x + m * c->K;
		double amax = 0.0;
		for (size_t k = 0; k < c->K; k++)
			amax = fmax(amax, fabs(xr[k]));
		for (size_t n = 0; n < c->N; n++) {
			const float *wr = c->wd + n * c->K;
			double exact = bias ? c->b[n] : 0.0, mag = 0.0, bound = 1e-6;
			for (size_t k = 0; k < c->K; k++) {
				exact += (double)wr[k] * xr[k];
				mag += fabs((double)wr[k] * xr[k]);
				bound += fabs(wr[k]) * (fabs(xr[k]) * x_rel + amax * x_step);
			}
			bound += 2e-5 * mag;
			double e = fabs(y[m * c->N + n] - exact);
			if (!(e <= bound)) {
				fprintf(stderr, "%s type %d M %zu N %zu K %zu [%zu,%zu]: exact %.7g "
						"got %.7g bound %.3g\n",
					who, c->type, c->M, c->N, c->K, m, n, exact, y[m * c->N + n],
					bound);
				fail();
			}
		}
	}
}

static void check_case(struct pair *p, int type, size_t M, size_t N, size_t K, bool bias)
{
	struct ct2_case c;
	case_make(&c, type, M, N, K);
	struct dev_mat *mc, *mo;
	char err[256];
	int rc = dev_mat_create(p->cpu, type, N, K, c.rows, c.rb, DEV_MAT_CT2, &mc, err,
				sizeof(err));
	if (type == 30 && !kn_bf16_ok()) { /* no bfloat16 product on this CPU */
		assert_int_equal(rc, -ST_UNSUPPORTED);
		assert_non_null(strstr(err, "bfloat16"));
		case_free(&c);
		return;
	}
	assert_int_equal(rc, 0);
	float *yc = malloc(M * N * sizeof(float)), *yd = malloc(M * N * sizeof(float));
	float *yo = malloc(M * N * sizeof(float));
	assert_int_equal(dev_linear(p->qc, mc, c.x, M, bias ? c.b : NULL, yc), 0);
	direct(&c, bias, yd);
	assert_memory_equal(yc, yd, M * N * sizeof(float));
	/* opencl */
	assert_int_equal(dev_mat_create(p->ocl, type, N, K, c.rows, c.rb, DEV_MAT_CT2, &mo, err,
					sizeof(err)),
			 0);
	float *dx = dev_alloc(p->ocl, M * K * 4), *db = dev_alloc(p->ocl, N * 4);
	float *dy = dev_alloc(p->ocl, M * N * 4);
	assert_int_equal(dev_upload(p->qo, dx, c.x, M * K * 4), 0);
	assert_int_equal(dev_upload(p->qo, db, c.b, N * 4), 0);
	assert_int_equal(dev_linear(p->qo, mo, dx, M, bias ? db : NULL, dy), 0);
	assert_int_equal(dev_download(p->qo, yo, dy, M * N * 4), 0);
	double x_rel = type == 30 ? 1.0 / 256 : 0.0;
	check_bound(&c, bias, yc, x_rel, type == DEV_TYPE_I8R ? 1.0 / 63 : 0.0, "cpu");
	check_bound(&c, bias, yo, x_rel, 0.0, "opencl");
	dev_free(p->ocl, dx);
	dev_free(p->ocl, db);
	dev_free(p->ocl, dy);
	dev_mat_destroy(mo);
	dev_mat_destroy(mc);
	free(yc);
	free(yd);
	free(yo);
	case_free(&c);
}

static void test_products(void **state)
{
	static const int types[] = { 0, 1, 30, DEV_TYPE_I8R };
	static const size_t shapes[][3] = { { 1, 17, 40 }, { 3, 64, 96 }, { 37, 33, 130 } };
	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++)
		for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
			for (int bias = 0; bias < 2; bias++)
				check_case(*state, types[t], shapes[s][0], shapes[s][1], shapes[s][2],
					   bias);
}

/* dev_embed reads an F16 CT2 matrix's rows as stored, on both back ends. */
static void test_embed(void **state)
{
	struct pair *p = *state;
	struct ct2_case c;
	case_make(&c, 1, 1, 9, 24);
	struct dev_mat *mc, *mo;
	char err[256];
	assert_int_equal(dev_mat_create(p->cpu, 1, 9, 24, c.rows, c.rb, DEV_MAT_CT2, &mc, err,
					sizeof(err)),
			 0);
	assert_int_equal(dev_mat_create(p->ocl, 1, 9, 24, c.rows, c.rb, DEV_MAT_CT2, &mo, err,
					sizeof(err)),
			 0);
	const int32_t ids[3] = { 4, 0, 8 };
	float y[3 * 24], yo[3 * 24], *dy = dev_alloc(p->ocl, sizeof(yo));
	assert_int_equal(dev_embed(p->qc, mc, ids, 3, y), 0);
	assert_int_equal(dev_embed(p->qo, mo, ids, 3, dy), 0);
	assert_int_equal(dev_download(p->qo, yo, dy, sizeof(yo)), 0);
	for (int i = 0; i < 3; i++) {
		assert_memory_equal(y + i * 24, c.wd + ids[i] * 24, 24 * sizeof(float));
		assert_memory_equal(yo + i * 24, c.wd + ids[i] * 24, 24 * sizeof(float));
	}
	dev_free(p->ocl, dy);
	dev_mat_destroy(mo);
	dev_mat_destroy(mc);
	case_free(&c);
}

static void test_refused(void **state)
{
	struct pair *p = *state;
	struct dev_mat *m = NULL, *ok;
	char err[256];
	uint8_t w[4096] = { 0 };
	assert_int_equal(dev_mat_row_bytes(DEV_TYPE_I8R, 10), 14);
	assert_int_equal(dev_mat_row_bytes(DEV_TYPE_I8R, 0), 0);
	struct dev *devs[2] = { p->cpu, p->ocl };
	for (int i = 0; i < 2; i++) {
		struct dev *d = devs[i];
		/* a GGUF block type with CTranslate2's arithmetic, I8R without it */
		assert_int_equal(dev_mat_create(d, 8, 4, 32, w, 34, DEV_MAT_CT2, &m, err, sizeof(err)),
				 -ST_INVAL);
		assert_non_null(strstr(err, "Q8_0"));
		assert_int_equal(dev_mat_create(d, DEV_TYPE_I8R, 4, 10, w, 14, 0, &m, err, sizeof(err)),
				 -ST_INVAL);
		assert_non_null(strstr(err, "I8R"));
		assert_int_equal(dev_mat_create(d, 0, 4, 8, w, 32, DEV_MAT_CT2 | DEV_MAT_LOOKUP, &m,
						err, sizeof(err)),
				 -ST_INVAL);
		assert_int_equal(dev_mat_create(d, DEV_TYPE_I8R, 4, 10, w, 10, DEV_MAT_CT2, &m, err,
						sizeof(err)),
				 -ST_INVAL); /* the scale's 4 bytes missing */
		assert_null(m);
	}
	/* I8R has no lookup; CT2 matrices stay out of dev_linear_n */
	assert_int_equal(dev_mat_create(p->cpu, DEV_TYPE_I8R, 4, 10, w, 14, DEV_MAT_CT2, &ok, err,
					sizeof(err)),
			 0);
	int32_t id = 1;
	float x[10] = { 0 }, y[4 * 10];
	assert_int_equal(dev_embed(p->qc, ok, &id, 1, y), -ST_INVAL);
	struct dev_linear_out o = { .w = ok, .y = y };
	assert_int_equal(dev_linear_n(p->qc, x, 1, &o, 1), -ST_INVAL);
	assert_int_equal(dev_linear(p->qc, ok, x, 1, NULL, y), 0);
	for (int i = 0; i < 4; i++)
		assert_true(y[i] == 0.0f); /* zero codes, zero scales */
	dev_mat_destroy(ok);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_products),
		cmocka_unit_test(test_embed),
		cmocka_unit_test(test_refused),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
