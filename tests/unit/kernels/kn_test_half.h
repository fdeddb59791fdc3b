/* kn_test_half.h - the kernel tests' binary16 test data: float arrays
 * rounded with kn_f32_to_f16 (kn_half.h, nearest even: the rounding the
 * kernels and the KV cache use), so every test converts one way. */
#ifndef KN_TEST_HALF_H
#define KN_TEST_HALF_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>

#include "kernels/kn_half.h"

/* The binary16 bits of x[0 .. n): new (malloc'd to exactly n elements, so
 * ASan catches a kernel reading past them; one for n = 0), the caller
 * frees it; fails the test when out of memory. */
static inline uint16_t *kn_test_f16_new(const float *x, size_t n)
{
	uint16_t *h = malloc((n + (n == 0)) * sizeof(*h));
	assert_non_null(h);
	for (size_t i = 0; i < n; i++)
		h[i] = kn_f32_to_f16(x[i]);
	return h;
}

#endif /* KN_TEST_HALF_H */
