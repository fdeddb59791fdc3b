/* kn_half.h - the scalar conversions between binary32 and the two 16-bit
 * float formats of model files: IEEE 754 binary16 (f16) and bfloat16
 * (bf16). The one copy every kernel (scalar references, the scalar tails
 * of SIMD files) and the engine use.
 *
 * Rules, chosen so the scalar code matches x86 F16C bit for bit and the
 * numbers ggml computes:
 * - f16 -> f32 is exact for all 65536 inputs: zeros keep their sign,
 *   subnormals (exponent 0) are mant * 2^-24, exponent 31 is +-inf or NaN;
 *   a NaN comes out quiet with its payload shifted up 13 bits (vcvtph2ps).
 * - f32 -> f16 rounds to nearest even (GGML_FP32_TO_FP16, vcvtps2ph with
 *   rounding 0): infinity from 65520 up, subnormal halves below 2^-14, a
 *   NaN quietened with the top 9 bits of its payload kept.
 * - bf16 is the top 16 bits of a binary32; f32 -> bf16 rounds to nearest
 *   even, a NaN becomes a quiet NaN (ggml_compute_fp32_to_bf16).
 * Pure functions, any thread.
 */
#ifndef KN_HALF_H
#define KN_HALF_H

#include <stdint.h>
#include <string.h>

/* kn_f16_to_f32 - binary16 bits h -> float (exact). */
static inline float kn_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu;
	uint32_t mant = h & 0x3ffu;
	uint32_t bits;

	if (exp == 0) {
		float v = (float)mant * 0x1p-24f; /* exact: mant < 2^10 */
		return sign ? -v : v;
	}
	if (exp == 31)
		bits = sign | 0x7f800000u | (mant ? (mant | 0x200u) << 13 : 0);
	else
		bits = sign | ((exp - 15 + 127) << 23) | (mant << 13);
	float f;
	memcpy(&f, &bits, sizeof(f));
	return f;
}

/* kn_f32_to_f16 - f rounded to binary16, nearest even; its bits. */
static inline uint16_t kn_f32_to_f16(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
	uint32_t a = u & 0x7fffffffu;
	if (a > 0x7f800000u)
		return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
	if (a >= 0x477ff000u) /* >= 65520 (or inf): rounds to inf */
		return (uint16_t)(sign | 0x7c00u);
	if (a < 0x38800000u) { /* below 2^-14: units of 2^-24, half to even */
		float v;
		memcpy(&v, &a, sizeof(v));
		v *= 0x1p24f;		     /* exact */
		v = (v + 0x1p23f) - 0x1p23f; /* round to integer, ties to even */
		return (uint16_t)(sign | (uint16_t)v); /* 1024 is 2^-14, right */
	}
	uint32_t r = a - 0x38000000u; /* exponent rebias 127 -> 15 */
	uint32_t h = r >> 13, rem = r & 0x1fffu;
	if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
		h++; /* a carry into the exponent is right too */
	return (uint16_t)(sign | h);
}

/* kn_bf16_to_f32 - bfloat16 bits b -> float (exact). */
static inline float kn_bf16_to_f32(uint16_t b)
{
	uint32_t bits = (uint32_t)b << 16;
	float f;
	memcpy(&f, &bits, sizeof(f));
	return f;
}

/* kn_f32_to_bf16 - f rounded to bfloat16, nearest even; its bits. */
static inline uint16_t kn_f32_to_bf16(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u | 0x00400000u) >> 16);
	return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* kn_bf16_round - f rounded to bfloat16 and widened back (every ISA's
 * round_x tail for BF16 weights). */
static inline float kn_bf16_round(float f)
{
	return kn_bf16_to_f32(kn_f32_to_bf16(f));
}

#endif /* KN_HALF_H */
