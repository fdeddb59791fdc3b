/* tests/unit/kernels/test_ops.c - every kn_ops variant the CPU runs against
 * the scalar reference (kernels/ref/ops.c) and against double-precision
 * formulas, on random inputs and edge sizes, with unaligned pointers.
 *
 * Each op is scored by a max error with its own tolerance (stated at the
 * check). Buffers are allocated to their exact size so ASan catches a tail
 * that reads or writes one element too far. With KN_BENCH=1 the same
 * harness also prints a micro-benchmark of every op per ISA.
 *
 * The erf coefficients in kernels/kn_int.h come from least-squares fits
 * (numpy, Chebyshev nodes, mpmath references at 40 digits); test_gelu here
 * is what checks them, against erff and against double erf.
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
#include <time.h>

#include "kernels/kn.h"
#include "kernels/kn_half.h"

static const size_t sizes[] = {0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 63, 65, 100, 383, 384, 1500};
#define N_SIZES (sizeof(sizes) / sizeof(sizes[0]))

/* ---- helpers ---------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng_u64(void) /* splitmix64: deterministic across runs */
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static float rng_uniform(float lo, float hi)
{
	return lo + (hi - lo) * (float)((double)(rng_u64() >> 40) / (double)(1ull << 24));
}

/* n floats starting `off` floats into a block of exactly n + off floats
 * (off = 1 makes the pointer 4 bytes off any vector alignment). */
static float *buf_new(size_t n, size_t off, float **base)
{
	*base = malloc((n + off + (n + off == 0)) * sizeof(float));
	assert_non_null(*base);
	return *base + off;
}

static void fill(float *x, size_t n, float lo, float hi)
{
	for (size_t i = 0; i < n; i++)
		x[i] = rng_uniform(lo, hi);
}

/* Calls fn(ops, n, off, err) for every runnable variant, size and offset;
 * fn returns its max normalised error (<= 1 passes), the worst is printed. */
typedef double (*case_fn)(const struct kn_ops *ops, size_t n, size_t off);

static void for_each_case(const char *op, case_fn fn)
{
	for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
		const struct kn_ops *ops = kn_ops_for((enum kn_isa)isa);
		if (!ops)
			continue;
		double worst = 0.0;
		for (size_t s = 0; s < N_SIZES; s++)
			for (size_t off = 0; off < 2; off++) {
				double e = fn(ops, sizes[s], off);
				worst = e > worst ? e : worst;
			}
		printf("[ kn ] %-10s %-6s worst error / tolerance = %.3g\n", op, ops->name, worst);
		assert_true(worst <= 1.0);
	}
}

static uint32_t f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

/* ---- gemv_f16 ---------------------------------------------------------- */

/* gemv_f16 on n_rows = 0..9 and 33 rows of width n (the size), with row
 * stride n + 3 and the offset applied to both W and x; against a double
 * loop over the exactly converted weights, scored by the sum of |w x|. */
static double case_gemv_f16(const struct kn_ops *ops, size_t n, size_t off)
{
	static const size_t rows[] = {0, 1, 3, 4, 5, 7, 9, 33};
	const struct kn_ops *ref = kn_ops_for(KN_ISA_REF);
	double worst = 0.0;
	for (size_t ri = 0; ri < sizeof(rows) / sizeof(rows[0]); ri++) {
		size_t nr = rows[ri], ldw = n + 3;
		uint16_t *wbase = malloc((nr * ldw + off + 1) * sizeof(uint16_t));
		float *xbase, *x = buf_new(n, off, &xbase), *wf = malloc((ldw + 1) * sizeof(float));
		float *y = malloc((nr + 1) * sizeof(float));
		assert_true(wbase && wf && y);
		uint16_t *w = wbase + off;
		for (size_t i = 0; i < nr * ldw; i++)
			w[i] = (uint16_t)(rng_u64() & 0x7bff); /* finite halves, either sign */
		fill(x, n, -2.0f, 2.0f);
		ops->gemv_f16(w, ldw, x, y, nr, n);
		for (size_t r = 0; r < nr; r++) {
			ref->f16_to_f32(w + r * ldw, wf, n);
			double exact = 0.0, mag = 0.0;
			for (size_t i = 0; i < n; i++) {
				exact += (double)wf[i] * x[i];
				mag += fabs((double)wf[i] * x[i]);
			}
			double e = fabs(y[r] - exact) / (1e-6 * (mag + 1e-30));
			worst = e > worst ? e : worst;
		}
		free(wbase);
		free(xbase);
		free(wf);
		free(y);
	}
	return worst;
}

static void test_gemv_f16(void **state)
{
	(void)state;
	for_each_case("gemv_f16", case_gemv_f16);
}

/* ---- dispatch --------------------------------------------------------- */

static void test_dispatch(void **state)
{
	(void)state;
	const struct kn_ops *ref = kn_ops_for(KN_ISA_REF);
	assert_non_null(ref);
	assert_string_equal(ref->name, "ref");
	assert_null(kn_ops_for(KN_ISA_COUNT));
	assert_ptr_equal(kn_init(KN_ISA_REF), ref);
	assert_ptr_equal(kn_ops(), ref);

	const struct kn_ops *best = kn_init(KN_ISA_COUNT);
	for (int isa = KN_ISA_COUNT - 1; isa >= 0; isa--)
		if (kn_ops_for((enum kn_isa)isa)) {
			assert_int_equal(best->isa, isa);
			break;
		}
	assert_ptr_equal(kn_ops(), best);
	for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
		const struct kn_ops *ops = kn_ops_for((enum kn_isa)isa);
		/* a forced ISA the CPU lacks falls back to the best */
		assert_ptr_equal(kn_init((enum kn_isa)isa), ops ? ops : best);
		printf("[ kn ] isa %d %s\n", isa, ops ? ops->name : "(not supported by this CPU)");
	}
	kn_init(KN_ISA_COUNT);
}

/* ---- f16_to_f32 --------------------------------------------------------- */

static void test_f16_ref_values(void **state)
{
	(void)state;
	static const struct {
		uint16_t h;
		float f;
	} cases[] = {
		{0x0000, 0.0f},	      {0x3c00, 1.0f},
		{0xc000, -2.0f},      {0x3555, 0.333251953125f},
		{0x0001, 0x1p-24f},   {0x8001, -0x1p-24f},
		{0x03ff, 0x3ffp-24f}, {0x0400, 0x1p-14f},
		{0x7bff, 65504.0f},   {0xfbff, -65504.0f},
		{0x7c00, INFINITY},   {0xfc00, -INFINITY},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		float y;
		kn_ops_for(KN_ISA_REF)->f16_to_f32(&cases[i].h, &y, 1);
		assert_int_equal(f32_bits(y), f32_bits(cases[i].f));
	}
	uint16_t h[4] = {0x8000, 0x7e00, 0xfe01, 0x7c01}; /* -0, qNaN, -qNaN, sNaN */
	float y[4];
	kn_ops_for(KN_ISA_REF)->f16_to_f32(h, y, 4);
	assert_int_equal(f32_bits(y[0]), 0x80000000u);
	assert_true(isnan(y[1]) && isnan(y[2]) && isnan(y[3]) && signbit(y[2]));
	assert_int_equal(f32_bits(y[3]), 0x7fc02000u); /* quietened, payload kept */
}

/* kn_half.h's f32 -> f16 / bf16 roundings on the edges the IEEE rules
 * name (round to nearest even, overflow at 65520, subnormals, NaN), and
 * the round trip of every finite half. */
static void test_half_roundings(void **state)
{
	(void)state;
	static const struct {
		float f;
		uint16_t h;
	} cases[] = {
		{1.0f, 0x3c00},		 {-2.0f, 0xc000},	  {65504.0f, 0x7bff},
		{65519.0f, 0x7bff},	 {65520.0f, 0x7c00},	  {-INFINITY, 0xfc00},
		{0x1p-24f, 0x0001},	 {0x1p-25f, 0x0000},	  {0x3p-25f, 0x0002},
		{0x1p-14f, 0x0400},	 {-0.0f, 0x8000},	  {1.0f + 0x1p-11f, 0x3c00},
		{1.0f + 0x3p-11f, 0x3c02}, {0x1.ffcp-15f, 0x0400},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_int_equal(kn_f32_to_f16(cases[i].f), cases[i].h);
	assert_int_equal(kn_f32_to_f16(NAN) & 0x7e00u, 0x7e00u); /* quiet NaN */
	for (uint32_t h = 0; h < 65536; h++)
		if ((h & 0x7c00u) != 0x7c00u || !(h & 0x3ffu)) /* all but NaNs */
			assert_int_equal(kn_f32_to_f16(kn_f16_to_f32((uint16_t)h)), h);
	assert_int_equal(kn_f32_to_bf16(1.0f), 0x3f80);
	assert_int_equal(kn_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80); /* tie: even */
	assert_int_equal(kn_f32_to_bf16(1.0f + 0x3p-8f), 0x3f82); /* tie: up to even */
	assert_int_equal(kn_f32_to_bf16(NAN) & 0x7fc0u, 0x7fc0u);
	assert_true(kn_bf16_to_f32(0x3f80) == 1.0f);
	assert_true(kn_bf16_round(1.0f + 0x1p-9f) == 1.0f);
}

/* All 65536 halves, bit for bit against the reference, at both offsets. */
static void test_f16_exhaustive(void **state)
{
	(void)state;
	const struct kn_ops *ref = kn_ops_for(KN_ISA_REF);
	uint16_t *hb = malloc((65536 + 1) * sizeof(*hb));
	float *want = malloc(65536 * sizeof(*want));
	float *yb, *y = buf_new(65536, 1, &yb);
	assert_non_null(hb);
	assert_non_null(want);
	for (uint32_t i = 0; i < 65536; i++)
		hb[i + 1] = (uint16_t)i;
	ref->f16_to_f32(hb + 1, want, 65536);
	for (int isa = 1; isa < KN_ISA_COUNT; isa++) {
		const struct kn_ops *ops = kn_ops_for((enum kn_isa)isa);
		if (!ops)
			continue;
		ops->f16_to_f32(hb + 1, y, 65536);
		assert_memory_equal(y, want, 65536 * sizeof(*y));
		printf("[ kn ] f16_to_f32 %-6s 65536/65536 bit-exact\n", ops->name);
	}
	free(hb);
	free(want);
	free(yb);
}

static double case_f16(const struct kn_ops *ops, size_t n, size_t off)
{
	uint16_t *hb = malloc((n + off + 1) * sizeof(*hb)), *h = hb + off;
	float *yb, *y = buf_new(n, off, &yb);
	float *wb, *want = buf_new(n, 0, &wb);
	assert_non_null(hb);
	for (size_t i = 0; i < n; i++)
		h[i] = (uint16_t)rng_u64();
	ops->f16_to_f32(h, y, n);
	kn_ops_for(KN_ISA_REF)->f16_to_f32(h, want, n);
	double bad = n ? memcmp(y, want, n * sizeof(*y)) != 0 : 0; /* tolerance: exact */
	free(hb);
	free(yb);
	free(wb);
	return bad ? 2.0 : 0.0;
}

static void test_f16_sizes(void **state)
{
	(void)state;
	for_each_case("f16_to_f32", case_f16);
}

/* ---- layer_norm --------------------------------------------------------- */

/* Tolerance: |y - y_double| <= 5e-6 (1 + |y_double|). Also checks that
 * in place (y == x) gives the same bits as out of place. */
static double case_layer_norm(const struct kn_ops *ops, size_t n, size_t off)
{
	float *xb, *gb, *bb, *yb;
	float *x = buf_new(n, off, &xb), *g = buf_new(n, off, &gb);
	float *b = buf_new(n, off, &bb), *y = buf_new(n, off, &yb);
	fill(x, n, -3.0f, 5.0f);
	fill(g, n, 0.5f, 1.5f);
	fill(b, n, -1.0f, 1.0f);
	double mean = 0.0, var = 0.0, worst = 0.0;
	for (size_t i = 0; i < n; i++)
		mean += x[i];
	mean /= n ? (double)n : 1.0;
	for (size_t i = 0; i < n; i++)
		var += (x[i] - mean) * (x[i] - mean);
	double rstd = 1.0 / sqrt(var / (n ? (double)n : 1.0) + 1e-5);
	ops->layer_norm(x, g, b, y, n, 1e-5f);
	for (size_t i = 0; i < n; i++) {
		double e = (x[i] - mean) * rstd * g[i] + b[i];
		double err = fabs(y[i] - e) / (5e-6 * (1.0 + fabs(e)));
		worst = err > worst ? err : worst;
	}
	ops->layer_norm(x, g, b, x, n, 1e-5f);
	if (n && memcmp(x, y, n * sizeof(*x)) != 0)
		worst = 2.0;
	free(xb);
	free(gb);
	free(bb);
	free(yb);
	return worst;
}

static void test_layer_norm(void **state)
{
	(void)state;
	for_each_case("layer_norm", case_layer_norm);
}

/* ---- gelu --------------------------------------------------------------- */

static float gelu_erff(float x)
{
	return 0.5f * x * (1.0f + erff(x * (float)M_SQRT1_2));
}

/* kn.h's tolerance: |gelu - erff formula| <= 1e-5 (1 + |x|). */
static double gelu_score(const float *in, const float *out, size_t n, double *abs_max)
{
	double worst = 0.0;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)out[i] - gelu_erff(in[i]));
		double dd = fabs((double)out[i] - 0.5 * in[i] * (1.0 + erf(in[i] * M_SQRT1_2)));
		double err = d / (1e-5 * (1.0 + fabs(in[i])));
		worst = err > worst ? err : worst;
		if (abs_max && dd > *abs_max)
			*abs_max = dd;
	}
	return worst;
}

static double case_gelu(const struct kn_ops *ops, size_t n, size_t off)
{
	float *xb, *yb, *x = buf_new(n, off, &xb), *y = buf_new(n, off, &yb);
	fill(x, n, -8.0f, 8.0f);
	memcpy(y, x, n * sizeof(*x));
	ops->gelu(y, n);
	double worst = gelu_score(x, y, n, NULL);
	free(xb);
	free(yb);
	return worst;
}

/* A dense sweep over [-12, 12] plus specials, per variant; prints the max
 * absolute error against double erf (the number quoted in reports). */
static void test_gelu_sweep(void **state)
{
	(void)state;
	static const float special[] = {0.0f,	-0.0f,	1e-30f,	 -1e-30f, 1e-3f,
					-1e-3f, 100.0f, -100.0f, 1e10f,	  -1e10f};
	size_t ns = sizeof(special) / sizeof(special[0]), n = 24 * 4096 + 1 + ns;
	float *x = malloc(n * sizeof(*x)), *y = malloc(n * sizeof(*y));
	assert_non_null(x);
	assert_non_null(y);
	for (size_t i = 0; i < n - ns; i++)
		x[i] = -12.0f + (float)i / 4096.0f;
	memcpy(x + n - ns, special, sizeof(special));
	for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
		const struct kn_ops *ops = kn_ops_for((enum kn_isa)isa);
		if (!ops)
			continue;
		memcpy(y, x, n * sizeof(*x));
		ops->gelu(y, n);
		double abs_max = 0.0, worst = gelu_score(x, y, n, &abs_max);
		printf("[ kn ] gelu sweep %-6s max|err| vs double erf %.3g, worst/tol %.3g\n",
		       ops->name, abs_max, worst);
		assert_true(worst <= 1.0);
	}
	free(x);
	free(y);
	for_each_case("gelu", case_gelu);
}

/* ---- softmax ------------------------------------------------------------ */

/* Tolerance: |p - p_double| <= 4e-6 p_double + 1e-12, |sum - 1| <= 1e-5.
 * Inputs are shifted by +1000 on odd offsets to exercise the max
 * subtraction, and every 5th entry is -INFINITY (a mask) which must give
 * exactly 0. */
static double case_softmax(const struct kn_ops *ops, size_t n, size_t off)
{
	float *xb, *x = buf_new(n, off, &xb);
	double *want = malloc((n + 1) * sizeof(*want)), max = -INFINITY, sum = 0.0;
	assert_non_null(want);
	fill(x, n, off ? 990.0f : -10.0f, off ? 1010.0f : 10.0f);
	for (size_t i = 3; i < n; i += 5)
		x[i] = -INFINITY;
	for (size_t i = 0; i < n; i++)
		max = x[i] > max ? x[i] : max;
	for (size_t i = 0; i < n; i++)
		sum += want[i] = exp((double)x[i] - max);
	ops->softmax(x, n);
	double worst = 0.0, got_sum = 0.0;
	for (size_t i = 0; i < n; i++) {
		double p = want[i] / sum, err = fabs(x[i] - p) / (4e-6 * p + 1e-12);
		worst = err > worst ? err : worst;
		got_sum += x[i];
		if (i % 5 == 3 && x[i] != 0.0f)
			worst = 2.0;
	}
	if (n && fabs(got_sum - 1.0) > 1e-5)
		worst = 2.0;
	free(xb);
	free(want);
	return worst;
}

static void test_softmax(void **state)
{
	(void)state;
	for_each_case("softmax", case_softmax);
}

/* ---- softmax_bf16 ------------------------------------------------------- */

/* Bit for bit the table's own scale_add, softmax and kn_f32_to_bf16, and
 * zeros to n_pad (the padding starts dirty). */
static double case_softmax_bf16(const struct kn_ops *ops, size_t n, size_t off)
{
	if (n == 0)
		return 0.0;
	float *xb, *x = buf_new(n, off, &xb), *x2 = malloc(n * sizeof(float));
	size_t n_pad = n + 31;
	uint16_t *got = malloc(n_pad * sizeof(uint16_t));
	assert_true(x2 && got);
	fill(x, n, off ? 990.0f : -10.0f, off ? 1010.0f : 10.0f);
	for (size_t i = 3; i < n; i += 5)
		x[i] = -INFINITY;
	memcpy(x2, x, n * sizeof(float));
	memset(got, 0xa5, n_pad * sizeof(uint16_t));
	ops->softmax_bf16(x, n, 0.125f * (1.0f + (float)off / 3.0f), got, n_pad);
	ops->scale_add(x2, 0.125f * (1.0f + (float)off / 3.0f), NULL, n);
	ops->softmax(x2, n);
	double worst = 0.0;
	for (size_t i = 0; i < n_pad; i++)
		if (got[i] != (i < n ? kn_f32_to_bf16(x2[i]) : 0))
			worst = 2.0;
	free(xb);
	free(x2);
	free(got);
	return worst;
}

static void test_softmax_bf16(void **state)
{
	(void)state;
	for_each_case("softmax_bf16", case_softmax_bf16);
}

/* ---- logsumexp ---------------------------------------------------------- */

/* |lse - lse_double| <= 1e-6 (1 + |lse_double|), inputs as for softmax
 * (every 5th -INFINITY); an all -INFINITY row gives -INFINITY. */
static double case_logsumexp(const struct kn_ops *ops, size_t n, size_t off)
{
	float *xb, *x = buf_new(n, off, &xb);
	fill(x, n, off ? 990.0f : -30.0f, off ? 1010.0f : 10.0f);
	for (size_t i = 3; i < n; i += 5)
		x[i] = -INFINITY;
	double max = -INFINITY, sum = 0.0, worst = 0.0;
	for (size_t i = 0; i < n; i++)
		max = x[i] > max ? x[i] : max;
	for (size_t i = 0; i < n; i++)
		sum += exp((double)x[i] - max);
	double want = n ? max + log(sum) : -INFINITY, got = ops->logsumexp(x, n);
	if (n == 0)
		worst = got == -INFINITY ? 0.0 : 2.0;
	else
		worst = fabs(got - want) / (1e-6 * (1.0 + fabs(want)));
	for (size_t i = 0; i < n; i++)
		x[i] = -INFINITY;
	if (ops->logsumexp(x, n) != -INFINITY)
		worst = 2.0;
	free(xb);
	return worst;
}

static void test_logsumexp(void **state)
{
	(void)state;
	for_each_case("logsumexp", case_logsumexp);
	/* a vocabulary's row (Whisper's 51864): many blocks of KN__LSE_BLOCK */
	for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
		const struct kn_ops *ops = kn_ops_for((enum kn_isa)isa);
		for (size_t off = 0; ops && off < 2; off++)
			assert_true(case_logsumexp(ops, 51864, off) <= 1.0);
	}
}

/* ---- add, scale_add, dot ------------------------------------------------ */

static double case_add(const struct kn_ops *ops, size_t n, size_t off)
{
	float *yb, *xb, *wb;
	float *y = buf_new(n, off, &yb), *x = buf_new(n, off, &xb), *w = buf_new(n, 0, &wb);
	fill(y, n, -2.0f, 2.0f);
	fill(x, n, -2.0f, 2.0f);
	memcpy(w, y, n * sizeof(*y));
	ops->add(y, x, n);
	kn_ops_for(KN_ISA_REF)->add(w, x, n);
	double bad = n && memcmp(y, w, n * sizeof(*y)) != 0; /* tolerance: exact */
	free(yb);
	free(xb);
	free(wb);
	return bad ? 2.0 : 0.0;
}

/* Tolerance: b NULL exact; else |y - y_double| <= 2^-23 (|y a| + |b|)
 * (the variants fuse the multiply-add, the reference rounds twice). */
static double case_scale_add(const struct kn_ops *ops, size_t n, size_t off)
{
	float *yb, *bb, *wb;
	float *y = buf_new(n, off, &yb), *b = buf_new(n, off, &bb), *w = buf_new(n, 0, &wb);
	fill(y, n, -2.0f, 2.0f);
	fill(b, n, -2.0f, 2.0f);
	memcpy(w, y, n * sizeof(*y));
	ops->scale_add(y, 0.37f, NULL, n);
	kn_ops_for(KN_ISA_REF)->scale_add(w, 0.37f, NULL, n);
	double worst = n && memcmp(y, w, n * sizeof(*y)) != 0 ? 2.0 : 0.0;
	memcpy(w, y, n * sizeof(*y));
	ops->scale_add(y, -1.7f, b, n);
	for (size_t i = 0; i < n; i++) {
		double e = (double)w[i] * -1.7 + b[i],
		       tol = 0x1p-23 * (fabs(w[i] * 1.7) + fabs(b[i]));
		double err = fabs(y[i] - e) / tol;
		worst = err > worst ? err : worst;
	}
	free(yb);
	free(bb);
	free(wb);
	return worst;
}

/* Tolerance: |dot - dot_double| <= 1e-6 sum |x y| (+1e-30 for n = 0). */
static double case_dot(const struct kn_ops *ops, size_t n, size_t off)
{
	float *xb, *yb, *x = buf_new(n, off, &xb), *y = buf_new(n, off, &yb);
	fill(x, n, -1.0f, 1.0f);
	fill(y, n, -1.0f, 1.0f);
	double e = 0.0, mag = 0.0;
	for (size_t i = 0; i < n; i++) {
		e += (double)x[i] * y[i];
		mag += fabs((double)x[i] * y[i]);
	}
	double err = fabs(ops->dot(x, y, n) - e) / (1e-6 * mag + 1e-30);
	free(xb);
	free(yb);
	return err;
}

/* n of the sizes rows of k (64, a head's width, and 9: a masked tail)
 * at a row stride of k + 3, against one x row; each y[i] within dot's
 * tolerance of the double dot times alpha. B is exactly n * ldb floats. */
static double case_dot_rows(const struct kn_ops *ops, size_t n, size_t off)
{
	double worst = 0.0;
	for (size_t k = 9; k <= 64; k += 55) {
		size_t ldb = k + 3;
		float *xb, *bb, *yb, *x = buf_new(k, off, &xb), *B = buf_new(n * ldb, off, &bb);
		float *y = buf_new(n, off, &yb);
		fill(x, k, -1.0f, 1.0f);
		fill(B, n * ldb, -1.0f, 1.0f);
		ops->dot_rows(x, B, ldb, n, k, 0.125f, y);
		for (size_t i = 0; i < n; i++) {
			double e = 0.0, mag = 0.0;
			for (size_t j = 0; j < k; j++) {
				e += (double)x[j] * B[i * ldb + j];
				mag += fabs((double)x[j] * B[i * ldb + j]);
			}
			double err = fabs(y[i] - 0.125 * e) / (0.125 * 1e-6 * mag + 1e-30);
			worst = err > worst ? err : worst;
		}
		free(xb);
		free(bb);
		free(yb);
	}
	return worst;
}

static void test_add(void **state)
{
	(void)state;
	for_each_case("add", case_add);
	for_each_case("scale_add", case_scale_add);
	for_each_case("dot", case_dot);
	for_each_case("dot_rows", case_dot_rows);
}

/* ---- rms_norm, gelu_tanh_mul, silu_mul ---------------------------------- */

/* One op's worst errors over every size and offset of one variant. */
struct op_err {
	double dbl, dbl_norm; /* vs the double formula: max |err|, max |err| / tol */
	double ref, ref_norm; /* vs the reference table: likewise */
};

/* Folds |got - want| into a raw and a tolerance-normalised maximum; a NaN
 * counts as infinitely wrong. */
static void err_note(double *raw, double *norm, double got, double want, double tol)
{
	double e = fabs(got - want);
	if (isnan(e))
		e = INFINITY;
	*raw = e > *raw ? e : *raw;
	*norm = e / tol > *norm ? e / tol : *norm;
}

typedef void (*case2_fn)(const struct kn_ops *ops, size_t n, size_t off, struct op_err *e);

/* Like for_each_case, scoring each variant both against double and
 * against the reference (every size, offsets 0 and 1), printing both. */
static void for_each_case2(const char *op, case2_fn fn)
{
	for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
		const struct kn_ops *ops = kn_ops_for((enum kn_isa)isa);
		if (!ops)
			continue;
		struct op_err e = {0};
		for (size_t s = 0; s < N_SIZES; s++)
			for (size_t off = 0; off < 2; off++)
				fn(ops, sizes[s], off, &e);
		printf("[ kn ] %-13s %-6s max|err| vs double %.3g (/tol %.3g), vs ref %.3g (/tol "
		       "%.3g)\n",
		       op, ops->name, e.dbl, e.dbl_norm, e.ref, e.ref_norm);
		assert_true(e.dbl_norm <= 1.0 && e.ref_norm <= 1.0);
	}
}

/* rms_norm tolerance, vs double and vs ref: |err| <= 2e-6 (1 + |y|)
 * (outputs are O(1): x in [-3, 5], w in [0.5, 1.5]). */
#define TOL_RMS 2e-6

/* rms_norm with w, then with w = NULL, against the double formula and the
 * reference; in place (y == x) must give the bits of out of place. */
static void case_rms_norm(const struct kn_ops *ops, size_t n, size_t off, struct op_err *e)
{
	const struct kn_ops *ref = kn_ops_for(KN_ISA_REF);
	float *xb, *wb, *yb, *rb;
	float *x = buf_new(n, off, &xb), *w = buf_new(n, off, &wb);
	float *y = buf_new(n, off, &yb), *r = buf_new(n, off, &rb);
	fill(x, n, -3.0f, 5.0f);
	fill(w, n, 0.5f, 1.5f);
	double ss = 0.0;
	for (size_t i = 0; i < n; i++)
		ss += (double)x[i] * x[i];
	double rstd = 1.0 / sqrt(ss / (n ? (double)n : 1.0) + 1e-6);
	for (int with_w = 0; with_w < 2; with_w++) {
		ops->rms_norm(x, with_w ? w : NULL, y, n, 1e-6f);
		ref->rms_norm(x, with_w ? w : NULL, r, n, 1e-6f);
		for (size_t i = 0; i < n; i++) {
			double want = x[i] * rstd * (with_w ? w[i] : 1.0);
			err_note(&e->dbl, &e->dbl_norm, y[i], want, TOL_RMS * (1.0 + fabs(want)));
			err_note(&e->ref, &e->ref_norm, y[i], r[i], TOL_RMS * (1.0 + fabs(r[i])));
		}
	}
	memcpy(r, x, n * sizeof(*x));
	ops->rms_norm(r, w, r, n, 1e-6f);
	if (n && memcmp(r, y, n * sizeof(*y)) != 0)
		e->dbl_norm = INFINITY;
	free(xb);
	free(wb);
	free(yb);
	free(rb);
}

static double gelu_tanh_dbl(double x)
{
	return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

static double silu_dbl(double x)
{
	return x / (1.0 + exp(-x));
}

/* kn.h's tolerance for the gated ops, used vs double and vs the reference:
 * |err| <= 1e-5 (1 + |result|). */
#define TOL_GATED 1e-5

/* gate = act(gate) * up on gate in [-8, 8] (offset 0) or [-30, 30]
 * (offset 1: saturated tails), up in [-2, 2]. */
static void case_gated(const struct kn_ops *ops, size_t n, size_t off, struct op_err *e, bool gelu)
{
	const struct kn_ops *ref = kn_ops_for(KN_ISA_REF);
	float *xb, *ub, *gb, *rb;
	float *x = buf_new(n, off, &xb), *up = buf_new(n, off, &ub);
	float *g = buf_new(n, off, &gb), *r = buf_new(n, off, &rb);
	fill(x, n, off ? -30.0f : -8.0f, off ? 30.0f : 8.0f);
	fill(up, n, -2.0f, 2.0f);
	memcpy(g, x, n * sizeof(*x));
	memcpy(r, x, n * sizeof(*x));
	(gelu ? ops->gelu_tanh_mul : ops->silu_mul)(g, up, n);
	(gelu ? ref->gelu_tanh_mul : ref->silu_mul)(r, up, n);
	for (size_t i = 0; i < n; i++) {
		double want = (gelu ? gelu_tanh_dbl(x[i]) : silu_dbl(x[i])) * up[i];
		err_note(&e->dbl, &e->dbl_norm, g[i], want, TOL_GATED * (1.0 + fabs(want)));
		err_note(&e->ref, &e->ref_norm, g[i], r[i], TOL_GATED * (1.0 + fabs(r[i])));
	}
	free(xb);
	free(ub);
	free(gb);
	free(rb);
}

static void case_gelu_tanh_mul(const struct kn_ops *ops, size_t n, size_t off, struct op_err *e)
{
	case_gated(ops, n, off, e, true);
}

static void case_silu_mul(const struct kn_ops *ops, size_t n, size_t off, struct op_err *e)
{
	case_gated(ops, n, off, e, false);
}

/* A dense sweep of gate over [-12, 12] with up = 1, plus specials (signed
 * zeros, tiny, saturated and near-FLT_MAX inputs, where x^3 overflows and
 * exp must not be clamped into a wrong finite result) at both ends, so
 * they pass through the vector body and the scalar tail. Tolerance as
 * TOL_GATED, against double. */
static void gated_sweep(bool gelu)
{
	static const float special[] = {0.0f,  -0.0f,  1e-30f, -1e-30f, 1e-3f, -1e-3f,
					30.0f, -30.0f, 100.0f, -100.0f, 1e10f, -1e10f,
					1e30f, -1e30f, 3e38f,  -3e38f};
	size_t ns = sizeof(special) / sizeof(special[0]), nd = 24 * 4096 + 1, n = nd + 2 * ns;
	float *x = malloc(n * sizeof(*x)), *g = malloc(n * sizeof(*g)),
	      *up = malloc(n * sizeof(*up));
	assert_true(x && g && up);
	memcpy(x, special, sizeof(special));
	for (size_t i = 0; i < nd; i++)
		x[ns + i] = -12.0f + (float)i / 4096.0f;
	memcpy(x + ns + nd, special, sizeof(special));
	for (size_t i = 0; i < n; i++)
		up[i] = 1.0f;
	for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
		const struct kn_ops *ops = kn_ops_for((enum kn_isa)isa);
		if (!ops)
			continue;
		memcpy(g, x, n * sizeof(*x));
		(gelu ? ops->gelu_tanh_mul : ops->silu_mul)(g, up, n);
		double raw = 0.0, norm = 0.0;
		for (size_t i = 0; i < n; i++) {
			double want = gelu ? gelu_tanh_dbl(x[i]) : silu_dbl(x[i]);
			err_note(&raw, &norm, g[i], want, TOL_GATED * (1.0 + fabs(want)));
		}
		printf("[ kn ] %s sweep %-6s max|err| vs double %.3g, worst/tol %.3g\n",
		       gelu ? "gelu_tanh_mul" : "silu_mul", ops->name, raw, norm);
		assert_true(norm <= 1.0);
	}
	free(x);
	free(g);
	free(up);
}

static void test_rms_norm(void **state)
{
	(void)state;
	for_each_case2("rms_norm", case_rms_norm);
}

static void test_gelu_tanh_mul(void **state)
{
	(void)state;
	gated_sweep(true);
	for_each_case2("gelu_tanh_mul", case_gelu_tanh_mul);
}

static void test_silu_mul(void **state)
{
	(void)state;
	gated_sweep(false);
	for_each_case2("silu_mul", case_silu_mul);
}

/* geglu_table_mul: every variant bit for bit with the reference, whose
 * rule is checked at hand-picked points, over a table of distinct values
 * (table[h] = h - 30000.5, so a wrong index shows), a dense sweep of x
 * over [-12, 12] and specials (the clamps' edges, NaN, infinities,
 * subnormals), at lengths that leave every tail. */
static void test_geglu_table_mul(void **state)
{
	(void)state;
	const struct kn_ops *ref = kn_ops_for(KN_ISA_REF);
	static const float special[] = {-10.0f, 10.0f, -9.999f, 9.999f, 0.0f, -0.0f,
					1e-30f, -1e-41f, 65504.0f, 1e30f, -1e30f};
	size_t ns = sizeof(special) / sizeof(special[0]), nd = 24 * 512, n = nd + ns + 3;
	float *table = malloc(65536 * sizeof(float)), *x = malloc(n * sizeof(float));
	float *up = malloc(n * sizeof(float)), *want = malloc(n * sizeof(float));
	float *got = malloc(n * sizeof(float));
	assert_true(table && x && up && want && got);
	for (size_t h = 0; h < 65536; h++)
		table[h] = (float)h - 30000.5f;
	memcpy(x, special, sizeof(special));
	for (size_t i = 0; i < nd; i++)
		x[ns + i] = -12.0f + (float)i / 512.0f;
	x[n - 3] = NAN;
	x[n - 2] = INFINITY;
	x[n - 1] = -INFINITY;
	fill(up, n, -2.0f, 2.0f);
	memcpy(want, x, n * sizeof(float));
	ref->geglu_table_mul(want, up, table, n);
	/* the rule, by hand: clamps, and the table at x's binary16 bits */
	assert_true(want[0] == 0.0f && want[1] == 10.0f * up[1]);
	assert_true(want[2] == table[kn_f32_to_f16(-9.999f)] * up[2]);
	assert_true(want[n - 2] == INFINITY * up[n - 2] && want[n - 1] == 0.0f);
	assert_true(want[ns + 13 * 512] == table[0x3c00] * up[ns + 13 * 512]); /* x = 1 */
	for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
		const struct kn_ops *ops = kn_ops_for((enum kn_isa)isa);
		for (size_t len = n; ops && len + 20 > n; len -= 7) {
			memcpy(got, x, n * sizeof(float));
			ops->geglu_table_mul(got, up, table, len);
			assert_memory_equal(got, want, len * sizeof(float));
			assert_memory_equal(got + len, x + len, (n - len) * sizeof(float));
		}
	}
	free(table);
	free(x);
	free(up);
	free(want);
	free(got);
}

/* argmax: every variant equals the reference scan (checked by hand on
 * small cases) on random rows of many lengths, with ties (values on a
 * coarse grid), NaNs at lane starts and elsewhere, infinities, and a NaN
 * first element (the scan keeps index 0). */
static void test_argmax(void **state)
{
	(void)state;
	const struct kn_ops *ref = kn_ops_for(KN_ISA_REF);
	static const float tie[] = {1.0f, 3.0f, 2.0f, 3.0f};
	assert_int_equal(ref->argmax(tie, 4), 1);
	static const float nan0[] = {NAN, 5.0f, 7.0f};
	assert_int_equal(ref->argmax(nan0, 3), 0);
	static const float nan1[] = {-1.0f, NAN, 7.0f, NAN};
	assert_int_equal(ref->argmax(nan1, 4), 2);
	static const size_t lens[] = {1, 2, 7, 15, 16, 17, 31, 32, 33, 47, 100, 1000, 262144};
	size_t nmax = 262144;
	float *x = malloc(nmax * sizeof(float));
	assert_non_null(x);
	for (int variant = 0; variant < 6; variant++)
		for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
			size_t n = lens[li];
			fill(x, n, -8.0f, 8.0f);
			for (size_t i = 0; variant >= 1 && i < n; i++)
				x[i] = floorf(x[i]); /* many ties */
			for (size_t i = 1; variant == 2 && i < n; i++)
				if (i < 16 || i % 13 == 5)
					x[i] = NAN; /* every lane's start but x[0]'s, and more */
			for (size_t i = 0; variant == 3 && i < n; i++)
				x[i] = i % 3 ? -INFINITY : NAN;
			if (variant == 3)
				x[0] = -INFINITY;
			if (variant == 4)
				x[0] = NAN;
			if (variant == 5 && n > 20)
				x[n - 1] = INFINITY;
			size_t want = ref->argmax(x, n);
			for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
				const struct kn_ops *ops = kn_ops_for((enum kn_isa)isa);
				if (ops && ops->argmax(x, n) != want)
					fail_msg("argmax %s variant %d n %zu: %zu, the scan %zu",
						 ops->name, variant, n, ops->argmax(x, n), want);
			}
		}
	free(x);
}

/* ---- each SIMD variant against the reference, directly ----------------- */

/* n = 1500 random inputs through ref and the variant; max |variant - ref|,
 * divided by |ref| for softmax, by 1 + |x| for gelu, by |y a| + |b| for
 * scale_add and by sum |x y| for dot. Tolerances: layer_norm 1e-5 abs
 * (outputs are O(1)), gelu 1e-5, softmax 4e-6, scale_add 2^-22 (fused vs
 * unfused multiply-add: one rounding apart), dot 1e-6. */
enum { VS_LN, VS_GELU, VS_SOFTMAX, VS_SCALE, VS_DOT, VS_COUNT };
static const char *const vs_names[VS_COUNT] = {"layer_norm", "gelu", "softmax", "scale_add", "dot"};
static const double vs_tol[VS_COUNT] = {1e-5, 1e-5, 4e-6, 0x1p-22, 1e-6};

static double vs_ref_one(const struct kn_ops *ops, int op, const float *in, const float *in2,
			 float *a, float *b, size_t n)
{
	const struct kn_ops *ref = kn_ops_for(KN_ISA_REF);
	memcpy(a, in, n * sizeof(*a));
	memcpy(b, in, n * sizeof(*b));
	switch (op) {
	case VS_LN:
		ops->layer_norm(in, in2, in2, a, n, 1e-5f);
		ref->layer_norm(in, in2, in2, b, n, 1e-5f);
		break;
	case VS_GELU:
		ops->gelu(a, n);
		ref->gelu(b, n);
		break;
	case VS_SOFTMAX:
		ops->softmax(a, n);
		ref->softmax(b, n);
		break;
	case VS_SCALE:
		ops->scale_add(a, 0.3f, in2, n);
		ref->scale_add(b, 0.3f, in2, n);
		break;
	default: {
		double d = ops->dot(in, in2, n), e = ref->dot(in, in2, n), mag = 0.0;
		for (size_t i = 0; i < n; i++)
			mag += fabs((double)in[i] * in2[i]);
		return fabs(d - e) / mag;
	}
	}
	double worst = 0.0;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)a[i] - b[i]);
		if (op == VS_SOFTMAX)
			d /= b[i];
		else if (op == VS_GELU)
			d /= 1.0 + fabs(in[i]);
		else if (op == VS_SCALE)
			d /= fabs(in[i] * 0.3) + fabs(in2[i]);
		worst = d > worst ? d : worst;
	}
	return worst;
}

static void test_vs_ref(void **state)
{
	(void)state;
	enum { N = 1500 };
	float *in = malloc(N * sizeof(*in)), *in2 = malloc(N * sizeof(*in2));
	float *a = malloc(N * sizeof(*a)), *b = malloc(N * sizeof(*b));
	assert_true(in && in2 && a && b);
	fill(in, N, -8.0f, 8.0f);
	fill(in2, N, 0.5f, 1.5f);
	for (int isa = 1; isa < KN_ISA_COUNT; isa++) {
		const struct kn_ops *ops = kn_ops_for((enum kn_isa)isa);
		for (int op = 0; ops && op < VS_COUNT; op++) {
			double e = vs_ref_one(ops, op, in, in2, a, b, N);
			printf("[ kn ] vs ref %-10s %-6s max err %.3g (tol %.3g)\n", vs_names[op],
			       ops->name, e, vs_tol[op]);
			assert_true(e <= vs_tol[op]);
		}
	}
	free(in);
	free(in2);
	free(a);
	free(b);
}

/* ---- micro-benchmark (KN_BENCH=1) --------------------------------------- */

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

enum {
	BENCH_F16,
	BENCH_LN,
	BENCH_GELU,
	BENCH_SOFTMAX,
	BENCH_ADD,
	BENCH_SCALE,
	BENCH_DOT,
	BENCH_RMS,
	BENCH_GELU_TANH,
	BENCH_SILU,
	BENCH_COUNT
};
static const char *const bench_names[BENCH_COUNT] = {
	"f16_to_f32", "layer_norm", "gelu",	"softmax",	 "add",
	"scale_add",  "dot",	    "rms_norm", "gelu_tanh_mul", "silu_mul"};

static volatile float bench_sink;

/* Buffers: a in/out, b and c second operands (gamma/beta, rms_norm's w,
 * the gated ops' up), g a gelu/gated source in [-4, 4] copied into a
 * before each such call (the copy is timed too: in-place gelu repeated
 * would decay towards 0 and subnormals), h halves for f16_to_f32. */
struct bench_bufs {
	float *a, *b, *c, *g;
	uint16_t *h;
};

static void bench_run(const struct kn_ops *ops, int op, const struct bench_bufs *m, size_t n)
{
	switch (op) {
	case BENCH_F16:
		ops->f16_to_f32(m->h, m->a, n);
		break;
	case BENCH_LN:
		ops->layer_norm(m->a, m->b, m->c, m->a, n, 1e-5f);
		break;
	case BENCH_GELU:
		memcpy(m->a, m->g, n * sizeof(*m->a));
		ops->gelu(m->a, n);
		break;
	case BENCH_SOFTMAX:
		ops->softmax(m->a, n);
		break;
	case BENCH_ADD:
		ops->add(m->a, m->b, n);
		break;
	case BENCH_SCALE:
		ops->scale_add(m->a, 0.5f, m->b, n);
		break;
	case BENCH_RMS:
		ops->rms_norm(m->a, m->b, m->a, n, 1e-6f);
		break;
	case BENCH_GELU_TANH:
		memcpy(m->a, m->g, n * sizeof(*m->a));
		ops->gelu_tanh_mul(m->a, m->b, n);
		break;
	case BENCH_SILU:
		memcpy(m->a, m->g, n * sizeof(*m->a));
		ops->silu_mul(m->a, m->b, n);
		break;
	default:
		bench_sink = ops->dot(m->a, m->b, n);
		break;
	}
}

/* Best of 3 rounds of ~20M elements each; prints ns per call. */
static void bench_one(const struct kn_ops *ops, int op, size_t n)
{
	struct bench_bufs m = {malloc(n * sizeof(float)), malloc(n * sizeof(float)),
			       malloc(n * sizeof(float)), malloc(n * sizeof(float)),
			       malloc(n * sizeof(uint16_t))};
	assert_true(m.a && m.b && m.c && m.g && m.h);
	fill(m.b, n, 0.5f, 1.0f);
	fill(m.c, n, -0.1f, 0.1f);
	fill(m.g, n, -4.0f, 4.0f);
	for (size_t i = 0; i < n; i++)
		m.h[i] = (uint16_t)(0x3000 + (rng_u64() & 0x0fff));
	size_t reps = 20000000 / n + 10;
	double best = INFINITY;
	for (int round = 0; round < 3; round++) {
		fill(m.a, n, -1.0f, 1.0f);
		double t0 = now_ns();
		for (size_t r = 0; r < reps; r++)
			bench_run(ops, op, &m, n);
		double t = (now_ns() - t0) / (double)reps;
		best = t < best ? t : best;
	}
	printf("[bench] %-13s %-6s n=%-5zu %9.1f ns/call %7.2f Gelem/s\n", bench_names[op],
	       ops->name, n, best, (double)n / best);
	free(m.a);
	free(m.b);
	free(m.c);
	free(m.g);
	free(m.h);
}

/* The micro-benchmark: a separate group that runs only with KN_BENCH=1. */
static void test_bench(void **state)
{
	(void)state;
	static const size_t bench_n[] = {384, 1500};
	for (int op = 0; op < BENCH_COUNT; op++)
		for (size_t s = 0; s < 2; s++)
			for (int isa = 0; isa < KN_ISA_COUNT; isa++)
				if (kn_ops_for((enum kn_isa)isa))
					bench_one(kn_ops_for((enum kn_isa)isa), op, bench_n[s]);
}

int main(void)
{
	kn_init(KN_ISA_COUNT);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dispatch),       cmocka_unit_test(test_f16_ref_values),
		cmocka_unit_test(test_f16_exhaustive), cmocka_unit_test(test_f16_sizes),
		cmocka_unit_test(test_half_roundings),
		cmocka_unit_test(test_layer_norm),     cmocka_unit_test(test_gelu_sweep),
		cmocka_unit_test(test_softmax),	       cmocka_unit_test(test_softmax_bf16),	       cmocka_unit_test(test_logsumexp),	       cmocka_unit_test(test_add),
		cmocka_unit_test(test_vs_ref),	       cmocka_unit_test(test_gemv_f16),
		cmocka_unit_test(test_rms_norm),       cmocka_unit_test(test_gelu_tanh_mul),
		cmocka_unit_test(test_silu_mul),
		cmocka_unit_test(test_geglu_table_mul),
		cmocka_unit_test(test_argmax),
	};
	const struct CMUnitTest bench[] = { cmocka_unit_test(test_bench) };
	int failed = cmocka_run_group_tests(tests, NULL, NULL);
	const char *env = getenv("KN_BENCH");
	if (env && !strcmp(env, "1"))
		failed += cmocka_run_group_tests(bench, NULL, NULL);
	return failed;
}
