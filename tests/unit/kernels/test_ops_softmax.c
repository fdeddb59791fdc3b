/* tests/unit/kernels/test_ops_softmax.c - the kn_ops reductions over a row
 * of scores or logits on every variant the CPU runs: softmax and logsumexp
 * against double-precision formulas, softmax_bf16 bit for bit with the
 * table's own steps, argmax equal to the reference scan (kernels/ref/ops.c),
 * on random inputs at the edge sizes with unaligned pointers, masked
 * (-INFINITY) entries, ties and NaNs.
 */
#include <string.h>

#include "tests/unit/kernels/kn_test_ops.h"
#include "kernels/kn_half.h"

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

int main(void)
{
	kn_init(KN_ISA_COUNT);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_softmax),
		cmocka_unit_test(test_softmax_bf16),
		cmocka_unit_test(test_logsumexp),
		cmocka_unit_test(test_argmax),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
