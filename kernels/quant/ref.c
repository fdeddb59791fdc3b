/* kernels/quant/ref.c - scalar reference dequantization and gemv for the
 * GGUF/ggml block types of kernels/kn_quant.h, written as plain loops.
 *
 * Block layouts (ggml-common.h; all fields little-endian, fp16 = IEEE
 * binary16; offsets in bytes):
 *   q4_0  (32 el, 18 B): d fp16 @0, qs[16] @2: element j < 16 is the low
 *         nibble of qs[j], element j + 16 its high nibble; w = (q - 8) d.
 *   q5_0  (32 el, 22 B): d @0, qh[4] @2 (a u32: bit j is bit 4 of element
 *         j), qs[16] @6 as q4_0; w = (q - 16) d.
 *   q8_0  (32 el, 34 B): d @0, int8 qs[32] @2; w = q d.
 *   q4_K (256 el, 144 B): d @0, dmin @2, scales[12] @4 (eight 6-bit scale /
 *         min pairs, kq_scale_min), qs[128] @16. Sub-block s (32 elements)
 *         takes the low (s even) or high (s odd) nibbles of qs[32 (s/2) ..];
 *         w = (d sc) q - (dmin m).
 *   q5_K (256 el, 176 B): d, dmin, scales[12] as q4_K, qh[32] @16, qs[128]
 *         @48; bit s of qh[l] is bit 4 of element l of sub-block s.
 *   q6_K (256 el, 210 B): ql[128] @0, qh[64] @128, int8 scales[16] @192,
 *         d @208. Per half h (128 elements): element 32 t + l (t < 4,
 *         l < 32) has low nibble from ql[64 h + 32 (t & 1) + l] (high
 *         nibble when t >= 2), bits 4-5 from qh[32 h + l] >> 2t, scale
 *         scales[8 h + 2 t + l / 16]; w = (d sc) (q - 32).
 *
 * The arithmetic is ggml's dequantize_row_* operation for operation (the
 * same products in the same order, never fused), so dequantized values are
 * the ones ggml computes, and the SIMD variants reproduce them bit for bit.
 * gemv dequantizes one block into a stack buffer and accumulates its dot
 * with x left to right in float32.
 */
#include <string.h>

#include "kernels/kn_int.h"

/* IEEE binary16 -> binary32, exact for all 65536 inputs; NaNs quietened
 * with the payload shifted up 13 bits as x86 F16C does (kernels/ref/ops.c
 * documents the same rule), so the F16C variants match bit for bit. */
static float kq_f16(uint16_t h)
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

/* Field readers: blocks sit at any byte address, so no typed loads. */
static uint16_t kq_u16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static float kq_half(const uint8_t *p)
{
	return kq_f16(kq_u16(p));
}

/* The 6-bit scale and min of sub-block j < 8 from the 12 packed bytes
 * (ggml get_scale_min_k4): j < 4 sit in the low 6 bits of bytes j and
 * j + 4; j >= 4 take a nibble of byte j + 4 for their low 4 bits and the
 * top 2 bits of bytes j - 4 / j for their high 2 bits. */
static void kq_scale_min(int j, const uint8_t *q, int *sc, int *m)
{
	if (j < 4) {
		*sc = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
		*m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

/* ---- one block -> floats ------------------------------------------------ */

static void ref_block_f32(const uint8_t *b, float *y)
{
	memcpy(y, b, sizeof(*y));
}

static void ref_block_f16(const uint8_t *b, float *y)
{
	y[0] = kq_half(b);
}

static void ref_block_bf16(const uint8_t *b, float *y)
{
	uint32_t bits = (uint32_t)kq_u16(b) << 16;
	memcpy(y, &bits, sizeof(*y));
}

static void ref_block_q4_0(const uint8_t *b, float *y)
{
	float d = kq_half(b);
	const uint8_t *qs = b + 2;
	for (int j = 0; j < 16; j++) {
		y[j] = (float)((qs[j] & 0xf) - 8) * d;
		y[j + 16] = (float)((qs[j] >> 4) - 8) * d;
	}
}

static void ref_block_q5_0(const uint8_t *b, float *y)
{
	float d = kq_half(b);
	uint32_t qh = (uint32_t)b[2] | (uint32_t)b[3] << 8 | (uint32_t)b[4] << 16 |
		      (uint32_t)b[5] << 24;
	const uint8_t *qs = b + 6;
	for (int j = 0; j < 16; j++) {
		int hi0 = (qh >> j) & 1, hi1 = (qh >> (j + 16)) & 1;
		y[j] = (float)(((qs[j] & 0xf) | hi0 << 4) - 16) * d;
		y[j + 16] = (float)(((qs[j] >> 4) | hi1 << 4) - 16) * d;
	}
}

static void ref_block_q8_0(const uint8_t *b, float *y)
{
	float d = kq_half(b);
	for (int j = 0; j < 32; j++)
		y[j] = (float)(int8_t)b[2 + j] * d;
}

/* q4_K and q5_K: qh is NULL for q4_K. */
static void ref_block_k45(const uint8_t *b, const uint8_t *qh, const uint8_t *qs, float *y)
{
	float d = kq_half(b), dmin = kq_half(b + 2);
	for (int s = 0; s < 8; s++) {
		int sc, m;
		kq_scale_min(s, b + 4, &sc, &m);
		float d1 = d * (float)sc, m1 = dmin * (float)m;
		const uint8_t *q = qs + 32 * (s / 2);
		for (int l = 0; l < 32; l++) {
			int v = (s & 1) ? q[l] >> 4 : q[l] & 0xf;
			if (qh)
				v |= ((qh[l] >> s) & 1) << 4;
			y[32 * s + l] = d1 * (float)v - m1;
		}
	}
}

static void ref_block_q4_k(const uint8_t *b, float *y)
{
	ref_block_k45(b, NULL, b + 16, y);
}

static void ref_block_q5_k(const uint8_t *b, float *y)
{
	ref_block_k45(b, b + 16, b + 48, y);
}

static void ref_block_q6_k(const uint8_t *b, float *y)
{
	const uint8_t *ql = b, *qh = b + 128;
	const int8_t *sc = (const int8_t *)(b + 192);
	float d = kq_half(b + 208);
	for (int h = 0; h < 2; h++)
		for (int t = 0; t < 4; t++)
			for (int l = 0; l < 32; l++) {
				int lo = ql[64 * h + 32 * (t & 1) + l] >> (4 * (t >> 1)) & 0xf;
				int hi = (qh[32 * h + l] >> (2 * t)) & 3;
				float ds = d * (float)sc[8 * h + 2 * t + l / 16];
				y[128 * h + 32 * t + l] = ds * (float)((lo | hi << 4) - 32);
			}
}

/* ---- rows: dequant and gemv, shared by every type ---------------------- */

typedef void (*ref_block_fn)(const uint8_t *b, float *y);

static void ref_dequant(const void *src, float *dst, size_t n, ref_block_fn fn, size_t elems,
			size_t bytes)
{
	const uint8_t *b = src;
	for (size_t i = 0; i < n / elems; i++)
		fn(b + i * bytes, dst + i * elems);
}

static void ref_gemv(const void *W, size_t row_bytes, const float *x, float *y, size_t n_rows,
		     size_t k, ref_block_fn fn, size_t elems, size_t bytes)
{
	float w[KN__QK_K]; /* one block, the largest is 256 elements */
	for (size_t r = 0; r < n_rows; r++) {
		const uint8_t *row = (const uint8_t *)W + r * row_bytes;
		float sum = 0.0f;
		for (size_t i = 0; i < k / elems; i++) {
			fn(row + i * bytes, w);
			for (size_t j = 0; j < elems; j++)
				sum += w[j] * x[i * elems + j];
		}
		y[r] = sum;
	}
}

/* One dequant/gemv pair per type, binding its block function and size. */
#define REF_TYPE(T, ELEMS, BYTES)                                                          \
	static void ref_dequant_##T(const void *restrict src, float *restrict dst, size_t n) \
	{                                                                                  \
		ref_dequant(src, dst, n, ref_block_##T, ELEMS, BYTES);                     \
	}                                                                                  \
	static void ref_gemv_##T(const void *restrict W, size_t row_bytes,                 \
				 const float *restrict x, float *restrict y, size_t n_rows,  \
				 size_t k)                                                 \
	{                                                                                  \
		ref_gemv(W, row_bytes, x, y, n_rows, k, ref_block_##T, ELEMS, BYTES);      \
	}

REF_TYPE(f32, 1, 4)
REF_TYPE(f16, 1, 2)
REF_TYPE(bf16, 1, 2)
REF_TYPE(q4_0, KN__QK, KN__Q4_0_BYTES)
REF_TYPE(q5_0, KN__QK, KN__Q5_0_BYTES)
REF_TYPE(q8_0, KN__QK, KN__Q8_0_BYTES)
REF_TYPE(q4_k, KN__QK_K, KN__Q4_K_BYTES)
REF_TYPE(q5_k, KN__QK_K, KN__Q5_K_BYTES)
REF_TYPE(q6_k, KN__QK_K, KN__Q6_K_BYTES)

#define REF_ENTRY(TYPE, T, NAME, ELEMS, BYTES)                                             \
	[TYPE] = {.type = TYPE,                                                            \
		  .name = NAME,                                                            \
		  .block_elems = ELEMS,                                                    \
		  .block_bytes = BYTES,                                                    \
		  .dequant = ref_dequant_##T,                                              \
		  .gemv = ref_gemv_##T}

const struct kn_qops kn__qops_ref[KN_Q_MAX] = {
	REF_ENTRY(KN_Q_F32, f32, "f32", 1, 4),
	REF_ENTRY(KN_Q_F16, f16, "f16", 1, 2),
	REF_ENTRY(KN_Q_BF16, bf16, "bf16", 1, 2),
	REF_ENTRY(KN_Q_Q4_0, q4_0, "q4_0", KN__QK, KN__Q4_0_BYTES),
	REF_ENTRY(KN_Q_Q5_0, q5_0, "q5_0", KN__QK, KN__Q5_0_BYTES),
	REF_ENTRY(KN_Q_Q8_0, q8_0, "q8_0", KN__QK, KN__Q8_0_BYTES),
	REF_ENTRY(KN_Q_Q4_K, q4_k, "q4_K", KN__QK_K, KN__Q4_K_BYTES),
	REF_ENTRY(KN_Q_Q5_K, q5_k, "q5_K", KN__QK_K, KN__Q5_K_BYTES),
	REF_ENTRY(KN_Q_Q6_K, q6_k, "q6_K", KN__QK_K, KN__Q6_K_BYTES),
};
