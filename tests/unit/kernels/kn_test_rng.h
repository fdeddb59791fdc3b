/* kn_test_rng.h - the kernel tests' random inputs: splitmix64 (Steele,
 * Lea, Flood 2014), the one step every kernel test's generator takes,
 * and that mapped to floats in [-1, 1) with 23 random bits. */
#ifndef KN_TEST_RNG_H
#define KN_TEST_RNG_H

#include <stdint.h>

/* The next 64 random bits of *state (advanced): deterministic across runs. */
static inline uint64_t kn_test_splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline float kn_test_uniform(uint64_t *state)
{
	uint64_t z = kn_test_splitmix64(state);
	return (float)((double)(z >> 40) / (double)(1ull << 23) - 1.0);
}

#endif /* KN_TEST_RNG_H */
