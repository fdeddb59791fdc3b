/* kn_test_ops.h - what the kn_ops tests (test_ops.c, test_ops_half.c,
 * test_ops_norm.c, test_ops_act.c, test_ops_softmax.c, test_ops_vec.c)
 * share: the edge sizes, a deterministic random source, exact-size
 * buffers at an unaligned offset, and the loops that run a case on every
 * variant the CPU runs, size and offset.
 *
 * Each op is scored by a max error with its own tolerance (stated at the
 * check). Buffers are allocated to their exact size so ASan catches a tail
 * that reads or writes one element too far. Each test binary starts the
 * random source from the same seed.
 */
#ifndef KN_TEST_OPS_H
#define KN_TEST_OPS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/kn.h"
#include "tests/unit/kernels/kn_test_rng.h"

static const size_t sizes[] = {0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 63, 65, 100, 383, 384, 1500};
#define N_SIZES (sizeof(sizes) / sizeof(sizes[0]))

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static inline uint64_t rng_u64(void) /* splitmix64: deterministic across runs */
{
	return kn_test_splitmix64(&rng_state);
}

static inline float rng_uniform(float lo, float hi)
{
	return lo + (hi - lo) * (float)((double)(rng_u64() >> 40) / (double)(1ull << 24));
}

/* n floats starting `off` floats into a block of exactly n + off floats
 * (off = 1 makes the pointer 4 bytes off any vector alignment). */
static inline float *buf_new(size_t n, size_t off, float **base)
{
	*base = malloc((n + off + (n + off == 0)) * sizeof(float));
	assert_non_null(*base);
	return *base + off;
}

static inline void fill(float *x, size_t n, float lo, float hi)
{
	for (size_t i = 0; i < n; i++)
		x[i] = rng_uniform(lo, hi);
}

/* Calls fn(ops, n, off, err) for every runnable variant, size and offset;
 * fn returns its max normalised error (<= 1 passes), the worst is printed. */
typedef double (*case_fn)(const struct kn_ops *ops, size_t n, size_t off);

static inline void for_each_case(const char *op, case_fn fn)
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

/* One op's worst errors over every size and offset of one variant. */
struct op_err {
	double dbl, dbl_norm; /* vs the double formula: max |err|, max |err| / tol */
	double ref, ref_norm; /* vs the reference table: likewise */
};

/* Folds |got - want| into a raw and a tolerance-normalised maximum; a NaN
 * counts as infinitely wrong. */
static inline void err_note(double *raw, double *norm, double got, double want, double tol)
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
static inline void for_each_case2(const char *op, case2_fn fn)
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

#endif /* KN_TEST_OPS_H */
