/* tests/unit/kernels/test_ops_act.c - kn_ops activations on every variant
 * the CPU runs: gelu (erf form), gelu_tanh_mul and silu_mul against
 * double-precision formulas (and the gated ones against the scalar
 * reference, kernels/ref/ops.c) on random inputs at the edge sizes with
 * unaligned pointers and on dense sweeps with special values;
 * geglu_table_mul bit for bit with the reference.
 *
 * The erf coefficients in kernels/kn_int.h come from least-squares fits
 * (numpy, Chebyshev nodes, mpmath references at 40 digits); test_gelu_sweep
 * here is what checks them, against erff and against double erf.
 */
#include <stdbool.h>
#include <string.h>

#include "tests/unit/kernels/kn_test_ops.h"
#include "kernels/kn_half.h"

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

int main(void)
{
	kn_init(KN_ISA_COUNT);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gelu_sweep),
		cmocka_unit_test(test_gelu_tanh_mul),
		cmocka_unit_test(test_silu_mul),
		cmocka_unit_test(test_geglu_table_mul),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
