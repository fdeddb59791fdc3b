/* kn_test_quant.h - what the quantized-weight kernel tests
 * (test_quant.c, test_quant_xq.c) share: the types under test, a
 * deterministic random source, and random blocks with finite scales. */
#ifndef KN_TEST_QUANT_H
#define KN_TEST_QUANT_H

#include <stdint.h>
#include <string.h>

#include "kernels/kn_quant.h"
#include "tests/unit/kernels/kn_test_rng.h"

#define KN_TQ_UNUSED __attribute__((unused))

static const int all_types[] KN_TQ_UNUSED = {KN_Q_F32,  KN_Q_F16,  KN_Q_BF16, KN_Q_Q4_0,   KN_Q_Q4_1,
				KN_Q_Q5_0, KN_Q_Q5_1, KN_Q_Q8_0, KN_Q_Q4_K,   KN_Q_Q5_K,
				KN_Q_Q6_K, KN_Q_IQ4_NL, KN_Q_IQ4_XS, KN_Q_Q2_K, KN_Q_Q3_K};
#define N_TYPES (sizeof(all_types) / sizeof(all_types[0]))

static uint64_t rng_state KN_TQ_UNUSED = 0x9e3779b97f4a7c15ull;

static inline uint64_t rng_u64(void) /* splitmix64: deterministic across runs */
{
	return kn_test_splitmix64(&rng_state);
}

static inline float rng_uniform(float lo, float hi)
{
	return lo + (hi - lo) * (float)((double)(rng_u64() >> 40) / (double)(1ull << 24));
}

static inline uint32_t f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

static inline void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

/* A random finite fp16 (any sign, zero, subnormal or normal). */
static inline uint16_t rng_f16_finite(void)
{
	uint16_t h = (uint16_t)rng_u64();
	return (h & 0x7c00) == 0x7c00 ? (uint16_t)(h & ~0x4000) : h;
}

/* Offsets of the fp16 fields in a block of type (-1 ends the list). */
static inline const int *half_fields(int type)
{
	static const int at0[] = {0, -1}, at02[] = {0, 2, -1}, at208[] = {208, -1}, none[] = {-1};
	static const int at80[] = {80, 82, -1}, at108[] = {108, -1};
	switch (type) {
	case KN_Q_Q4_0:
	case KN_Q_Q5_0:
	case KN_Q_Q8_0:
	case KN_Q_IQ4_NL:
	case KN_Q_IQ4_XS:
		return at0;
	case KN_Q_Q4_1:
	case KN_Q_Q5_1:
	case KN_Q_Q4_K:
	case KN_Q_Q5_K:
		return at02;
	case KN_Q_Q6_K:
		return at208;
	case KN_Q_Q2_K:
		return at80;
	case KN_Q_Q3_K:
		return at108;
	default:
		return none;
	}
}

/* n_blocks random blocks of type: random bytes, fp16 scale fields finite.
 * For F32 (blocks of one float) the values are finite too when finite_flat
 * (gemv needs finite weights; dequant is tested on every bit pattern). */
static inline void fill_blocks(uint8_t *p, int type, size_t n_blocks, int finite_flat)
{
	const struct kn_qops *q = kn_qops_for(KN_ISA_REF, type);
	size_t bb = (size_t)q->geom->block_bytes;
	for (size_t i = 0; i < n_blocks * bb; i++)
		p[i] = (uint8_t)rng_u64();
	for (size_t b = 0; b < n_blocks; b++) {
		for (const int *f = half_fields(type); *f >= 0; f++)
			put16(p + b * bb + (size_t)*f, rng_f16_finite());
		if (!finite_flat)
			continue;
		if (type == KN_Q_F32) {
			float v = rng_uniform(-2.0f, 2.0f);
			memcpy(p + b * bb, &v, sizeof(v));
		} else if (type == KN_Q_F16) {
			put16(p + b * bb, rng_f16_finite());
		} else if (type == KN_Q_BF16) { /* 2^-7 <= |v| < 2^9 */
			uint16_t e = (uint16_t)(0x3c00 + (rng_u64() & 15) * 0x80);
			put16(p + b * bb, (uint16_t)((rng_u64() & 0x807f) | e));
		}
	}
}

/* The widths for a type: 1, 2, 3 blocks and realistic rows (640 and 2048
 * for 32-element blocks, 1024 and 2048 for K-quants; odd widths for the
 * flat types to reach every tail). */
static inline size_t gemv_widths(const struct kn_qops *q, size_t *k)
{
	static const size_t flat[] = {1, 2, 3, 7, 15, 16, 17, 31, 33, 640, 2048};
	static const size_t blk[] = {1, 2, 3, 20, 64};	 /* x 32: 640, 2048 */
	static const size_t kq[] = {1, 2, 3, 4, 8};	 /* x 256: 1024, 2048 */
	if (q->geom->block_elems == 1) {
		memcpy(k, flat, sizeof(flat));
		return sizeof(flat) / sizeof(flat[0]);
	}
	const size_t *m = q->geom->block_elems == 32 ? blk : kq;
	for (size_t i = 0; i < 5; i++)
		k[i] = m[i] * (size_t)q->geom->block_elems;
	return 5;
}

#endif /* KN_TEST_QUANT_H */
