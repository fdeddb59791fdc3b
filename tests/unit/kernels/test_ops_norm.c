/* tests/unit/kernels/test_ops_norm.c - kn_ops layer_norm and rms_norm on
 * every variant the CPU runs, against double-precision formulas (and
 * rms_norm against the scalar reference, kernels/ref/ops.c too), on random
 * inputs at the edge sizes with unaligned pointers, in place and out of
 * place.
 */
#include <string.h>

#include "tests/unit/kernels/kn_test_ops.h"

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

static void test_rms_norm(void **state)
{
	(void)state;
	for_each_case2("rms_norm", case_rms_norm);
}

int main(void)
{
	kn_init(KN_ISA_COUNT);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layer_norm),
		cmocka_unit_test(test_rms_norm),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
