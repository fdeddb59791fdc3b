/* tests/unit/kernels/test_i8.c - the int8 products of kernels/kn_i8.h:
 *   - the quantizer on hand-computed rows (scale = amax / x_max, round
 *     half to even, clamp, an all-zero row), in every variant at its own
 *     x_max (127, or 63 for avx2-x7), pad bytes zero;
 *   - packing: the reference product equals a plain dot product of the
 *     unpacked codes (so the layout and the compensation are right);
 *   - every SIMD variant (AVX2, AVX2 with 7-bit activations, AVX-VNNI,
 *     AVX-512BW, AVX-512 VNNI, where the CPU has them) against the
 *     reference at the variant's x_max bit for bit, quantizer and
 *     product, over odd shapes (tails in M, N and K), column sub-ranges,
 *     with and without bias, leading dimensions wider than the rows;
 *   - extreme codes (every x at +-x_max, every w at +-127): the AVX2 sign
 *     trick and the x7 offset must not saturate, VNNI's and x7's
 *     compensation must cancel exactly;
 *   - the result is the float product within the quantization error;
 *   - gemm_u8 (never-negative rows) bit for bit with the reference gemm;
 *   - kn_ops softmax_i8 against the definition in every table;
 *   - kn_attention_i8 against kn_attention within the quantization error.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kn.h"
#include "kernels/kn_attn.h"
#include "kernels/kn_i8.h"
#include "tests/unit/kernels/kn_test_rng.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static float rng_uniform(void)
{
	return kn_test_uniform(&rng_state);
}

static void check_row(const struct kn_i8_ops *o, const float *x, size_t K, float want_scale,
		      const int8_t *want)
{
	int8_t q[16];
	float s = -1.0f;
	memset(q, 0x55, sizeof(q));
	o->quantize_rows(x, K, 1, K, q, sizeof(q), &s);
	assert_true(s == want_scale);
	for (size_t k = 0; k < K; k++) {
		if (q[k] != want[k])
			fail_msg("%s: k %zu: %d, want %d", o->name, k, q[k], want[k]);
	}
	for (size_t k = K; k < kn_i8_kpad(K); k++)
		assert_int_equal(q[k], 0);
}

static void test_quantizer_hand(void **state)
{
	(void)state;
	/* x_max 127. amax 127: scale 1, codes = round half even of x */
	const float a[7] = { 127.0f, -3.5f, 2.5f, 0.4f, -126.6f, 64.5f, 0.0f };
	const int8_t qa[7] = { 127, -4, 2, 0, -127, 64, 0 };
	/* amax 254: scale 2 */
	const float b[5] = { -254.0f, 1.0f, 3.0f, -127.0f, 200.0f };
	const int8_t qb[5] = { -127, 0, 2, -64, 100 };
	/* x_max 63 (avx2-x7). amax 63: scale 1; amax 126: scale 2 */
	const float a7[7] = { 63.0f, -3.5f, 2.5f, 0.4f, -62.6f, 31.5f, 0.0f };
	const int8_t qa7[7] = { 63, -4, 2, 0, -63, 32, 0 };
	const float b7[5] = { -126.0f, 1.0f, 3.0f, -63.0f, 100.0f };
	const int8_t qb7[5] = { -63, 0, 2, -32, 50 };
	const float z[3] = { 0.0f, -0.0f, 0.0f };
	const int8_t qz[3] = { 0, 0, 0 };
	int seen63 = 0;
	for (int kind = 0; kind < KN_I8_COUNT; kind++) {
		const struct kn_i8_ops *o = kn_i8_ops_for((enum kn_i8_kind)kind);
		if (!o)
			continue;
		assert_true(o->x_max == 127 || o->x_max == 63);
		if (o->x_max == 127) {
			check_row(o, a, 7, 1.0f, qa);
			check_row(o, b, 5, 2.0f, qb);
		} else {
			check_row(o, a7, 7, 1.0f, qa7);
			check_row(o, b7, 5, 2.0f, qb7);
			seen63++;
		}
		check_row(o, z, 3, 0.0f, qz);
	}
	assert_int_equal(seen63, kn_i8_ops_for(KN_I8_AVX2_X7) != NULL);
	int8_t q[7];
	float s;
	kn_i8_quantize_row(a, 7, KN_I8_QMAX, q, &s);
	assert_true(s == 1.0f);
	assert_memory_equal(q, qa, 7);
	kn_i8_quantize_row(b7, 5, 63, q, &s);
	assert_true(s == 2.0f);
	assert_memory_equal(q, qb7, 5);
}

/* One problem: float x [M, ldx], W [N, K], its packed int8 form. */
struct prob {
	size_t M, N, K, ldx, ldq, ldy;
	float *x, *W, *b, *ws;
	int8_t *wp, *xq;
	int32_t *comp;
	float *xs;
	struct kn_i8w w;
};

static void prob_init(struct prob *p, size_t M, size_t N, size_t K, float wval)
{
	*p = (struct prob){ .M = M, .N = N, .K = K, .ldx = K + 3, .ldq = kn_i8_kpad(K) + 8,
			    .ldy = N + 5 };
	p->x = malloc(M * p->ldx * sizeof(float));
	p->W = malloc(N * K * sizeof(float));
	p->b = malloc(N * sizeof(float));
	p->ws = malloc(kn_i8_npad(N) * sizeof(float));
	p->comp = malloc(kn_i8_npad(N) * sizeof(int32_t));
	p->wp = malloc(kn_i8_npad(N) * kn_i8_kpad(K));
	p->xq = malloc(M * p->ldq);
	p->xs = malloc(M * sizeof(float));
	int8_t *scratch = malloc(kn_i8_kpad(K));
	assert_true(p->x && p->W && p->b && p->ws && p->comp && p->wp && p->xq && p->xs && scratch);
	for (size_t i = 0; i < M * p->ldx; i++)
		p->x[i] = wval ? (rng_uniform() < 0 ? -wval : wval) : 3.0f * rng_uniform();
	for (size_t i = 0; i < N * K; i++)
		p->W[i] = wval ? (rng_uniform() < 0 ? -wval : wval) : 0.1f * rng_uniform();
	for (size_t i = 0; i < N; i++)
		p->b[i] = rng_uniform();
	kn_i8_quantize_w(p->W, N, K, p->wp, p->ws, p->comp, scratch);
	free(scratch);
	p->w = (struct kn_i8w){ p->wp, p->ws, p->comp, N, K };
}

static void prob_fini(struct prob *p)
{
	free(p->x);
	free(p->W);
	free(p->b);
	free(p->ws);
	free(p->comp);
	free(p->wp);
	free(p->xq);
	free(p->xs);
}

/* The reference against a plain dot product of codes quantized row by
 * row with kn_i8_quantize_row (x at x_max, W at 127; no packing). */
static void check_ref_unpacked(struct prob *p, int x_max, const float *y)
{
	int8_t *wq = malloc(p->K), *xq = malloc(p->K);
	assert_true(wq && xq);
	for (size_t m = 0; m < p->M; m++) {
		float xs, ws;
		kn_i8_quantize_row(p->x + m * p->ldx, p->K, x_max, xq, &xs);
		for (size_t n = 0; n < p->N; n++) {
			kn_i8_quantize_row(p->W + n * p->K, p->K, KN_I8_QMAX, wq, &ws);
			int32_t acc = 0;
			for (size_t k = 0; k < p->K; k++)
				acc += (int32_t)xq[k] * wq[k];
			float want = fmaf((float)acc, xs * ws, p->b[n]);
			assert_true(y[m * p->ldy + n] == want);
			/* and close to the float product */
			double exact = p->b[n], mag = fabs(p->b[n]);
			for (size_t k = 0; k < p->K; k++) {
				exact += (double)p->x[m * p->ldx + k] * p->W[n * p->K + k];
				mag += fabs((double)p->x[m * p->ldx + k] * p->W[n * p->K + k]);
			}
			assert_true(fabs(y[m * p->ldy + n] - exact) <= 0.02 * mag + 1e-6);
		}
	}
	free(wq);
	free(xq);
}

/* The reference's codes of p's rows at x_max (kn_i8_quantize_row, pad
 * bytes 0) into p->xq / p->xs, then its product over [n0, N) into y. */
static void run_ref(struct prob *p, int x_max, size_t n0, bool bias, float *y)
{
	for (size_t m = 0; m < p->M; m++) {
		memset(p->xq + m * p->ldq, 0, kn_i8_kpad(p->K));
		kn_i8_quantize_row(p->x + m * p->ldx, p->K, x_max, p->xq + m * p->ldq, &p->xs[m]);
	}
	kn_i8_ops_for(KN_I8_REF)->gemm(p->M, n0, p->N, p->xq, p->ldq, p->xs, &p->w,
				       bias ? p->b : NULL, y, p->ldy);
}

/* Run variant o on p over columns [n0, n1) with or without bias into y. */
static void run(const struct kn_i8_ops *o, struct prob *p, size_t n0, size_t n1, bool bias,
		float *y)
{
	o->quantize_rows(p->x, p->ldx, p->M, p->K, p->xq, p->ldq, p->xs);
	o->gemm(p->M, n0, n1, p->xq, p->ldq, p->xs, &p->w, bias ? p->b : NULL, y, p->ldy);
}

/* Every variant (the reference's own quantize_rows too) against the
 * reference at the variant's x_max, bit for bit. */
static void compare_variants(struct prob *p)
{
	size_t ny = p->M * p->ldy;
	float *yr = malloc(ny * sizeof(float)), *yv = malloc(ny * sizeof(float));
	int8_t *xq_ref = malloc(p->M * p->ldq);
	float *xs_ref = malloc(p->M * sizeof(float));
	assert_true(yr && yv && xq_ref && xs_ref);
	for (int kind = KN_I8_REF; kind < KN_I8_COUNT; kind++) {
		const struct kn_i8_ops *o = kn_i8_ops_for((enum kn_i8_kind)kind);
		if (!o)
			continue;
		for (int bias = 0; bias < 2; bias++) {
			size_t n0 = bias && p->N > 16 ? 16 : 0; /* a column sub-range too */
			memset(yr, 0, ny * sizeof(float));
			run_ref(p, o->x_max, n0, bias, yr);
			if (bias && n0 == 0)
				check_ref_unpacked(p, o->x_max, yr);
			memcpy(xq_ref, p->xq, p->M * p->ldq);
			memcpy(xs_ref, p->xs, p->M * sizeof(float));
			memset(yv, 0, ny * sizeof(float));
			memset(p->xq, 0x33, p->M * p->ldq);
			run(o, p, n0, p->N, bias, yv);
			for (size_t m = 0; m < p->M; m++) {
				assert_true(p->xs[m] == xs_ref[m]);
				assert_memory_equal(p->xq + m * p->ldq, xq_ref + m * p->ldq,
						    kn_i8_kpad(p->K));
			}
			/* bit for bit, and nothing outside [n0, N) of each row written */
			if (memcmp(yr, yv, ny * sizeof(float)))
				fail_msg("%s: M %zu N %zu K %zu bias %d differs from ref", o->name,
					 p->M, p->N, p->K, bias);
		}
	}
	free(yr);
	free(yv);
	free(xq_ref);
	free(xs_ref);
}

static void test_variants_vs_ref(void **state)
{
	(void)state;
	static const size_t Ms[] = { 1, 2, 3, 4, 5, 9 };
	static const size_t Ns[] = { 1, 7, 16, 17, 33, 64, 65, 100 };
	static const size_t Ks[] = { 1, 3, 4, 5, 31, 64, 67, 384 };
	for (size_t i = 0; i < sizeof(Ms) / sizeof(Ms[0]); i++)
		for (size_t j = 0; j < sizeof(Ns) / sizeof(Ns[0]); j++)
			for (size_t k = 0; k < sizeof(Ks) / sizeof(Ks[0]); k++) {
				struct prob p;
				prob_init(&p, Ms[i], Ns[j], Ks[k], 0.0f);
				compare_variants(&p);
				prob_fini(&p);
			}
}

/* Every code +-x_max: the largest int16 pair sums the AVX2 paths form
 * (avx2-x7: x + 64 = 127 or 1 against w = +-127). */
static void test_extreme_codes(void **state)
{
	(void)state;
	struct prob p;
	prob_init(&p, 5, 70, 1539, 0.75f);
	compare_variants(&p);
	prob_fini(&p);
}

/* The encoder's shapes (whisper tiny: 384 wide, 1536 inner), 64 rows as
 * the engine quantizes them at a time. */
static void test_encoder_shapes(void **state)
{
	(void)state;
	static const size_t shapes[][3] = { { 64, 1152, 384 }, { 64, 384, 1536 }, { 37, 1536, 384 } };
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		struct prob p;
		prob_init(&p, shapes[i][0], shapes[i][1], shapes[i][2], 0.0f);
		compare_variants(&p);
		prob_fini(&p);
	}
}

/* gemm_u8 of every variant on never-negative rows (codes in [0, 127] by
 * kn_i8_quantize_rows) against the reference gemm, bit for bit, the
 * largest codes included (every x at its row's max: 127 against +-127). */
static void check_gemm_u8(size_t M, size_t N, size_t K, float xval)
{
	struct prob p;
	prob_init(&p, M, N, K, 0.0f);
	for (size_t i = 0; i < M * p.ldx; i++)
		p.x[i] = xval ? xval : fabsf(p.x[i]);
	size_t ny = M * p.ldy;
	float *yr = malloc(ny * sizeof(float)), *yv = malloc(ny * sizeof(float));
	assert_true(yr && yv);
	kn_i8_quantize_rows(p.x, p.ldx, M, K, p.xq, p.ldq, p.xs);
	for (size_t m = 0; m < M; m++)
		for (size_t k = 0; k < K; k++)
			assert_true(p.xq[m * p.ldq + k] >= 0);
	memset(yr, 0, ny * sizeof(float));
	kn_i8_ops_for(KN_I8_REF)->gemm(M, 0, N, p.xq, p.ldq, p.xs, &p.w, p.b, yr, p.ldy);
	for (int kind = KN_I8_REF; kind < KN_I8_COUNT; kind++) {
		const struct kn_i8_ops *o = kn_i8_ops_for((enum kn_i8_kind)kind);
		if (!o)
			continue;
		memset(yv, 0, ny * sizeof(float));
		o->gemm_u8(M, 0, N, p.xq, p.ldq, p.xs, &p.w, p.b, yv, p.ldy);
		if (memcmp(yr, yv, ny * sizeof(float)))
			fail_msg("%s gemm_u8: M %zu N %zu K %zu differs from ref", o->name, M, N, K);
	}
	free(yr);
	free(yv);
	prob_fini(&p);
}

static void test_gemm_u8(void **state)
{
	(void)state;
	check_gemm_u8(9, 100, 67, 0.0f);
	check_gemm_u8(4, 64, 1500, 0.0f);
	check_gemm_u8(5, 33, 384, 0.0f);
	check_gemm_u8(5, 70, 1539, 0.75f);
}

/* kn_ops softmax_i8 of every table on rows of n in [1, 300] scores in
 * [-10, 10) (every 5th -INFINITY): the exps left in x within 1e-6 of
 * exp(x - max) in double; each code exactly nearbyintf(127 e), the
 * largest 127; the padding 0; the scale 1 / (127 sum e) within 1e-6
 * relative of the double sum of the exps it left. */
static void test_softmax_i8(void **state)
{
	(void)state;
	float x[300], x0[300];
	int8_t q[340];
	for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
		const struct kn_ops *ops = kn_ops_for((enum kn_isa)isa);
		for (size_t n = 1; ops && n <= 300; n += n < 40 ? 1 : 37) {
			double max = -INFINITY, sum = 0.0;
			for (size_t i = 0; i < n; i++) {
				x0[i] = x[i] = i % 5 == 3 ? -INFINITY : 10.0f * rng_uniform();
				max = x[i] > max ? x[i] : max;
			}
			memset(q, 0x55, sizeof(q));
			float s = -1.0f;
			ops->softmax_i8(x, n, q, n + 33, &s);
			int top = 0;
			for (size_t i = 0; i < n; i++) {
				double e = exp((double)x0[i] - max);
				if (!(fabs(x[i] - e) <= 1e-6))
					fail_msg("%s n %zu: e[%zu] %g, want %g", ops->name, n, i, x[i], e);
				assert_int_equal(q[i], (int8_t)nearbyintf(127.0f * x[i]));
				top = q[i] > top ? q[i] : top;
				sum += x[i];
			}
			assert_int_equal(top, 127);
			for (size_t i = n; i < n + 33; i++)
				assert_int_equal(q[i], 0);
			assert_true(fabs(s * 127.0 * sum - 1.0) <= 1e-6);
		}
	}
}

/* kn_attention_i8 against kn_attention (float32) under every kn_ops table
 * the CPU runs (the int8 variant follows it: avx2-x7 under AVX2), with
 * q, k, v in [-2, 2): every output within 0.1 of float32's, their mean
 * error within 0.01 (0.003 measured: the quantization's, about 1 % of a
 * score and of a probability), and the padding past each output row left
 * alone. */
static void attention_i8_against_float(size_t n_q, size_t n_kv, size_t H, size_t hd)
{
	size_t d = H * hd, ld = 3 * d + 5, n = n_q > n_kv ? n_q : n_kv, ldo = d + 3;
	float *qkv = malloc(n * ld * sizeof(float)), *want = malloc(n_q * d * sizeof(float));
	float *got = malloc(n_q * ldo * sizeof(float)), *fs = malloc(n_q * n_kv * sizeof(float));
	void *scratch = malloc(kn_attention_i8_scratch(n_kv, hd));
	assert_true(qkv && want && got && fs && scratch);
	for (size_t i = 0; i < n * ld; i++)
		qkv[i] = 2.0f * rng_uniform();
	for (size_t i = 0; i < n_q * ldo; i++)
		got[i] = 12345.0f;
	kn_attention(n_q, n_kv, H, hd, qkv, ld, qkv + d, ld, qkv + 2 * d, ld, want, d, false, 0, fs);
	kn_attention_i8(n_q, n_kv, H, hd, qkv, ld, qkv + d, ld, qkv + 2 * d, ld, got, ldo, scratch);
	double sum = 0.0;
	for (size_t i = 0; i < n_q; i++) {
		for (size_t c = 0; c < d; c++) {
			double e = fabs((double)got[i * ldo + c] - want[i * d + c]);
			if (!(e <= 0.1))
				fail_msg("%s: %zu x %zu, %zu x %zu: row %zu col %zu: %g vs %g",
					 kn_i8_ops()->name, n_q, n_kv, H, hd, i, c, got[i * ldo + c],
					 want[i * d + c]);
			sum += e;
		}
		for (size_t c = d; c < ldo; c++)
			assert_true(got[i * ldo + c] == 12345.0f);
	}
	assert_true(sum / (double)(n_q * d) <= 0.01);
	free(qkv);
	free(want);
	free(got);
	free(fs);
	free(scratch);
}

static void test_attention_i8(void **state)
{
	(void)state;
	for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
		if (!kn_ops_for((enum kn_isa)isa))
			continue;
		kn_init((enum kn_isa)isa);
		attention_i8_against_float(100, 70, 2, 64);
		attention_i8_against_float(1, 1, 1, 64);
		attention_i8_against_float(200, 300, 3, 32);
		attention_i8_against_float(97, 130, 2, 18);
	}
	kn_init(KN_ISA_COUNT);
}

static void test_dispatch(void **state)
{
	(void)state;
	const struct kn_i8_ops *o = kn_i8_ops();
	assert_non_null(o);
	printf("# int8 product: %s\n", o->name);
	kn_init(KN_ISA_REF);
	assert_int_equal(kn_i8_ops()->kind, KN_I8_REF);
	if (kn_ops_for(KN_ISA_AVX2)) {
		kn_init(KN_ISA_AVX2);
		enum kn_i8_kind k = kn_i8_ops()->kind;
		assert_true(k == KN_I8_AVX2_X7 || k == KN_I8_AVXVNNI);
	}
	kn_init(KN_ISA_COUNT);
}

int main(void)
{
	kn_init(KN_ISA_COUNT);
	for (int kind = 0; kind < KN_I8_COUNT; kind++) {
		const struct kn_i8_ops *o = kn_i8_ops_for((enum kn_i8_kind)kind);
		printf("# variant %d: %s\n", kind, o ? o->name : "(not on this CPU)");
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_quantizer_hand),
		cmocka_unit_test(test_variants_vs_ref),
		cmocka_unit_test(test_extreme_codes),
		cmocka_unit_test(test_encoder_shapes),
		cmocka_unit_test(test_gemm_u8),
		cmocka_unit_test(test_softmax_i8),
		cmocka_unit_test(test_attention_i8),
		cmocka_unit_test(test_dispatch),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
