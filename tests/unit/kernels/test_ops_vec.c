/* tests/unit/kernels/test_ops_vec.c - kn_ops vector arithmetic on every
 * variant the CPU runs: add and scale_add against the scalar reference
 * (kernels/ref/ops.c) and double formulas, dot, dot_rows and gemv_f16
 * against double sums, on random inputs at the edge sizes with unaligned
 * pointers and strided rows.
 */
#include <string.h>

#include "tests/unit/kernels/kn_test_ops.h"

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

int main(void)
{
	kn_init(KN_ISA_COUNT);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_add),
		cmocka_unit_test(test_gemv_f16),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
