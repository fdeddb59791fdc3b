/* kernels/ref/quant.c - scalar reference dequantization and gemv for the
 * GGUF/ggml block types of kernels/kn_quant.h, written as plain loops.
 *
 * Block layouts (ggml-common.h; all fields little-endian, fp16 = IEEE
 * binary16; offsets in bytes):
 *   q4_0  (32 el, 18 B): d fp16 @0, qs[16] @2: element j < 16 is the low
 *         nibble of qs[j], element j + 16 its high nibble; w = (q - 8) d.
 *   q4_1  (32 el, 20 B): d fp16 @0, m fp16 @2, qs[16] @4 as q4_0; w = q d + m.
 *   q5_0  (32 el, 22 B): d @0, qh[4] @2 (a u32: bit j is bit 4 of element
 *         j), qs[16] @6 as q4_0; w = (q - 16) d.
 *   q5_1  (32 el, 24 B): d @0, m @2, qh[4] @4, qs[16] @8 as q5_0; w = q d + m.
 *   q8_0  (32 el, 34 B): d @0, int8 qs[32] @2; w = q d.
 *   q4_K (256 el, 144 B): d @0, dmin @2, scales[12] @4 (eight 6-bit scale /
 *         min pairs, kn_int.h kn__scale_min_k4), qs[128] @16. Sub-block s (32 elements)
 *         takes the low (s even) or high (s odd) nibbles of qs[32 (s/2) ..];
 *         w = (d sc) q - (dmin m).
 *   q5_K (256 el, 176 B): d, dmin, scales[12] as q4_K, qh[32] @16, qs[128]
 *         @48; bit s of qh[l] is bit 4 of element l of sub-block s.
 *   q6_K (256 el, 210 B): ql[128] @0, qh[64] @128, int8 scales[16] @192,
 *         d @208. Per half h (128 elements): element 32 t + l (t < 4,
 *         l < 32) has low nibble from ql[64 h + 32 (t & 1) + l] (high
 *         nibble when t >= 2), bits 4-5 from qh[32 h + l] >> 2t, scale
 *         scales[8 h + 2 t + l / 16]; w = (d sc) (q - 32).
 *   q2_K (256 el, 84 B): scales[16] @0 (per 16 elements: scale in the low
 *         nibble, min in the high), qs[64] @16, d @80, dmin @82. Per half
 *         h (128 elements): element 32 t + l (t < 4, l < 32) is bits 2t,
 *         2t + 1 of qs[32 h + l], group 8 h + 2 t + l / 16;
 *         w = (d sc) q - (dmin m).
 *   q3_K (256 el, 110 B): hmask[32] @0, qs[64] @32, scales[12] @96 (sixteen
 *         6-bit scales, kq_q3k_scales), d @108. Element 32 t + l of half h
 *         takes bits 2t, 2t + 1 of qs[32 h + l] and, as bit 2, bit 4 h + t
 *         of hmask[l]; q = that - 4; w = (d (sc - 32)) q, group as q2_K.
 *   iq4_nl (32 el, 18 B): d @0, qs[16] @2 as q4_0; w = d v[q], v the
 *         codebook kn__iq4nl_values (ggml's kvalues_iq4nl).
 *   iq4_xs (256 el, 136 B): d @0, scales_h u16 @2, scales_l[4] @4, qs[128]
 *         @8. Sub-block s (32 elements) has the 6-bit scale ls = nibble
 *         s % 2 of scales_l[s / 2] | bits 2s, 2s+1 of scales_h << 4, and
 *         takes qs[16 s ..] as q4_0 does; w = (d (ls - 32)) v[q].
 *
 * The arithmetic is ggml's dequantize_row_* operation for operation (the
 * same products in the same order, never fused), so dequantized values are
 * the ones ggml computes, and the SIMD variants reproduce them bit for bit.
 * gemv dequantizes one block into a stack buffer and accumulates its dot
 * with x left to right in float32.
 *
 * The integer path (kn_quant.h: quantize_x / gemv_xq) is ggml's reference
 * arithmetic: quantize_row_q8_0_ref / quantize_row_q8_K_ref for x, and
 * ggml_vec_dot_<type>_q8_<0|K>'s scalar form per row: an exact int32 dot
 * of the codes per block (K-quants: sub-block dots times their integer
 * scales, and the mins against the x block's bsums), then
 * sumf += (d_w d_x) * (float)isum block by block, left to right. (ggml's
 * K-quant reference spreads isum over 8 float lanes before summing; one
 * lane here, the same within float rounding.)
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/kn_half.h"
#include "kernels/kn_int.h"

/* Field readers: blocks sit at any byte address, so no typed loads. */
static uint16_t kq_u16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static float kq_half(const uint8_t *p)
{
	return kn_f16_to_f32(kq_u16(p));
}


/* The sixteen 6-bit q3_K scales (before their -32) from the 12 packed
 * bytes (ggml dequantize_row_q3_K): scale j's low 4 bits are nibble j / 8
 * of byte j % 8, its high 2 bits bits 2 (j / 4) .. of byte 8 + j % 4. */
static void kq_q3k_scales(const uint8_t *q, int *sc)
{
	for (int j = 0; j < 16; j++)
		sc[j] = ((q[j % 8] >> (4 * (j / 8))) & 0xf) | (((q[8 + j % 4] >> (2 * (j / 4))) & 3) << 4);
}

/* ggml's nearest_int: round half to even by the 1.5 * 2^23 trick (exact
 * for |v| < 2^22; quantized x stays within +-128). */
static int kq_nearest_int(float v)
{
	float f = v + 12582912.0f;
	int32_t i;
	memcpy(&i, &f, sizeof(i));
	return (i & 0x007fffff) - 0x00400000;
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
	y[0] = kn_bf16_to_f32(kq_u16(b));
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

static void ref_block_q4_1(const uint8_t *b, float *y)
{
	float d = kq_half(b), m = kq_half(b + 2);
	const uint8_t *qs = b + 4;
	for (int j = 0; j < 16; j++) {
		y[j] = (float)(qs[j] & 0xf) * d + m;
		y[j + 16] = (float)(qs[j] >> 4) * d + m;
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

static void ref_block_q5_1(const uint8_t *b, float *y)
{
	float d = kq_half(b), m = kq_half(b + 2);
	uint32_t qh = (uint32_t)b[4] | (uint32_t)b[5] << 8 | (uint32_t)b[6] << 16 |
		      (uint32_t)b[7] << 24;
	const uint8_t *qs = b + 8;
	for (int j = 0; j < 16; j++) {
		int hi0 = (qh >> j) & 1, hi1 = (qh >> (j + 16)) & 1;
		y[j] = (float)((qs[j] & 0xf) | hi0 << 4) * d + m;
		y[j + 16] = (float)((qs[j] >> 4) | hi1 << 4) * d + m;
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
		kn__scale_min_k4(s, b + 4, &sc, &m);
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

/* Code and group of element e of a q2_K / q3_K block (the 2 low bits). */
static int ref_k23_lo(const uint8_t *qs, int e)
{
	int h = e / 128, t = (e % 128) / 32, l = e % 32;
	return (qs[32 * h + l] >> (2 * t)) & 3;
}

static int ref_k23_group(int e)
{
	return 8 * (e / 128) + 2 * ((e % 128) / 32) + (e % 32) / 16;
}

/* q3_K's signed code of element e: the 2 low bits, less 4 where its hmask
 * bit is clear. */
static int ref_q3k_code(const uint8_t *b, int e)
{
	int h = e / 128, t = (e % 128) / 32, l = e % 32;
	return ref_k23_lo(b + 32, e) - ((b[l] >> (4 * h + t)) & 1 ? 0 : 4);
}

static void ref_block_q2_k(const uint8_t *b, float *y)
{
	float d = kq_half(b + 80), dmin = kq_half(b + 82);
	for (int e = 0; e < KN__QK_K; e++) {
		int sc = b[ref_k23_group(e)];
		float dl = d * (float)(sc & 0xf), ml = dmin * (float)(sc >> 4);
		y[e] = dl * (float)ref_k23_lo(b + 16, e) - ml;
	}
}

static void ref_block_q3_k(const uint8_t *b, float *y)
{
	int sc[16];
	kq_q3k_scales(b + 96, sc);
	float d = kq_half(b + 108);
	for (int e = 0; e < KN__QK_K; e++) {
		float dl = d * (float)(sc[ref_k23_group(e)] - 32);
		y[e] = dl * (float)ref_q3k_code(b, e);
	}
}

static void ref_block_iq4_nl(const uint8_t *b, float *y)
{
	float d = kq_half(b);
	const uint8_t *qs = b + 2;
	for (int j = 0; j < 16; j++) {
		y[j] = d * (float)kn__iq4nl_values[qs[j] & 0xf];
		y[j + 16] = d * (float)kn__iq4nl_values[qs[j] >> 4];
	}
}

/* The 6-bit scale of IQ4_XS sub-block s < 8 (before its -32). */
static int ref_iq4xs_scale(const uint8_t *b, int s)
{
	return ((b[4 + s / 2] >> (4 * (s % 2))) & 0xf) | (((kq_u16(b + 2) >> (2 * s)) & 3) << 4);
}

static void ref_block_iq4_xs(const uint8_t *b, float *y)
{
	float d = kq_half(b);
	for (int s = 0; s < 8; s++) {
		float dl = d * (float)(ref_iq4xs_scale(b, s) - 32);
		const uint8_t *qs = b + 8 + 16 * s;
		for (int j = 0; j < 16; j++) {
			y[32 * s + j] = dl * (float)kn__iq4nl_values[qs[j] & 0xf];
			y[32 * s + j + 16] = dl * (float)kn__iq4nl_values[qs[j] >> 4];
		}
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
REF_TYPE(q4_1, KN__QK, KN__Q4_1_BYTES)
REF_TYPE(q5_0, KN__QK, KN__Q5_0_BYTES)
REF_TYPE(q5_1, KN__QK, KN__Q5_1_BYTES)
REF_TYPE(q8_0, KN__QK, KN__Q8_0_BYTES)
REF_TYPE(q4_k, KN__QK_K, KN__Q4_K_BYTES)
REF_TYPE(q5_k, KN__QK_K, KN__Q5_K_BYTES)
REF_TYPE(q6_k, KN__QK_K, KN__Q6_K_BYTES)
REF_TYPE(q2_k, KN__QK_K, KN__Q2_K_BYTES)
REF_TYPE(q3_k, KN__QK_K, KN__Q3_K_BYTES)
REF_TYPE(iq4_nl, KN__QK, KN__IQ4_NL_BYTES)
REF_TYPE(iq4_xs, KN__QK_K, KN__IQ4_XS_BYTES)

/* ---- activations rounded for F16 / BF16 weights ------------------------- */

static void ref_round_f16(const float *restrict x, float *restrict y, size_t k)
{
	for (size_t i = 0; i < k; i++)
		y[i] = kn_f16_to_f32(kn_f32_to_f16(x[i]));
}

static void ref_round_bf16(const float *restrict x, float *restrict y, size_t k)
{
	for (size_t i = 0; i < k; i++)
		y[i] = kn_bf16_round(x[i]);
}

/* ---- integer path: x quantized to Q8_0 / Q8_K ---------------------------- */

static size_t ref_xq_bytes_q8_0(size_t k)
{
	return k / KN__QK * KN__Q8_0X_BYTES;
}

static size_t ref_xq_bytes_q8_1(size_t k)
{
	return k / KN__QK * KN__Q8_1X_BYTES;
}

static size_t ref_xq_bytes_q8_k(size_t k)
{
	return k / KN__QK_K * KN__Q8_K_BYTES;
}

/* One block of quantize_row_q8_0_ref: *d = amax / 127 (float), the codes
 * roundf(x / d) into q8[32]; returns their sum (Q8_1's s). */
static int ref_q8_block(const float *x, uint8_t *q8, float *d)
{
	float amax = 0.0f;
	for (int j = 0; j < KN__QK; j++) {
		float a = fabsf(x[j]);
		amax = amax > a ? amax : a;
	}
	*d = amax / 127.0f;
	float id = *d != 0.0f ? 1.0f / *d : 0.0f;
	int sum = 0;
	for (int j = 0; j < KN__QK; j++) {
		int8_t q = (int8_t)roundf(x[j] * id);
		q8[j] = (uint8_t)q;
		sum += q;
	}
	return sum;
}

static void ref_put_half(uint8_t *o, float v)
{
	uint16_t h = kn_f32_to_f16(v);
	o[0] = (uint8_t)h;
	o[1] = (uint8_t)(h >> 8);
}

/* quantize_row_q8_0_ref */
static void ref_quantize_q8_0(const float *restrict x, void *restrict xq, size_t k)
{
	uint8_t *o = xq;
	for (size_t i = 0; i < k / KN__QK; i++, x += KN__QK, o += KN__Q8_0X_BYTES) {
		float d;
		ref_q8_block(x, o + 2, &d);
		ref_put_half(o, d);
	}
}

/* quantize_row_q8_1_ref: Q8_0's d and codes, and s = fp16(d * sum). */
static void ref_quantize_q8_1(const float *restrict x, void *restrict xq, size_t k)
{
	uint8_t *o = xq;
	for (size_t i = 0; i < k / KN__QK; i++, x += KN__QK, o += KN__Q8_1X_BYTES) {
		float d;
		int sum = ref_q8_block(x, o + 4, &d);
		ref_put_half(o, d);
		ref_put_half(o + 2, (float)sum * d);
	}
}

/* quantize_row_q8_K_ref */
static void ref_quantize_q8_k(const float *restrict x, void *restrict xq, size_t k)
{
	uint8_t *o = xq;
	for (size_t i = 0; i < k / KN__QK_K; i++, x += KN__QK_K, o += KN__Q8_K_BYTES) {
		float amax = 0.0f, max = 0.0f;
		for (int j = 0; j < KN__QK_K; j++) {
			float a = fabsf(x[j]);
			if (a > amax) {
				amax = a;
				max = x[j];
			}
		}
		if (amax == 0.0f) {
			memset(o, 0, KN__Q8_K_BYTES);
			continue;
		}
		float iscale = -127.0f / max;
		int8_t *qs = (int8_t *)(o + 4);
		for (int j = 0; j < KN__QK_K; j++) {
			int v = kq_nearest_int(iscale * x[j]);
			qs[j] = (int8_t)(v < 127 ? v : 127);
		}
		for (int j = 0; j < KN__QK_K / 16; j++) {
			int sum = 0;
			for (int l = 0; l < 16; l++)
				sum += qs[16 * j + l];
			int16_t s16 = (int16_t)sum;
			memcpy(o + 260 + 2 * j, &s16, sizeof(s16));
		}
		float d = 1.0f / iscale;
		memcpy(o, &d, sizeof(d));
	}
}

/* Element j's 4-bit code from qs[16] and (qh: a q5 type's 4 bytes of fifth
 * bits, else NULL) its fifth bit. */
static int ref_code_nib(const uint8_t *qs, const uint8_t *qh, int j)
{
	int lo = j < 16 ? qs[j] & 0xf : qs[j - 16] >> 4;
	if (!qh)
		return lo;
	uint32_t h = (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 |
		     (uint32_t)qh[3] << 24;
	return lo | (int)((h >> j) & 1) << 4;
}

/* The integer code of element j of a 32-element block, minus its offset
 * (_0 types), or unsigned (_1 types, whose min is added apart). */
static int ref_code_q4_0(const uint8_t *b, int j)
{
	return ref_code_nib(b + 2, NULL, j) - 8;
}

static int ref_code_q5_0(const uint8_t *b, int j)
{
	return ref_code_nib(b + 6, b + 2, j) - 16;
}

static int ref_code_q8_0(const uint8_t *b, int j)
{
	return (int8_t)b[2 + j];
}

static int ref_code_q4_1(const uint8_t *b, int j)
{
	return ref_code_nib(b + 4, NULL, j);
}

static int ref_code_q5_1(const uint8_t *b, int j)
{
	return ref_code_nib(b + 8, b + 4, j);
}

static int ref_code_iq4_nl(const uint8_t *b, int j)
{
	return kn__iq4nl_values[ref_code_nib(b + 2, NULL, j)];
}

typedef int (*ref_code_fn)(const uint8_t *b, int j);

/* ggml_vec_dot_<q4_0|q5_0|q8_0|iq4_nl>_q8_0 (q8_1 false): per block sumf +=
 * isum (d_w d_x); ggml_vec_dot_<q4_1|q5_1>_q8_1 (q8_1 true): sumf +=
 * (d_w d_x) isum + m_w s_x. */
static void ref_gemv_xq_32(const void *W, size_t rb, const void *xq, float *y, size_t n_rows,
			   size_t k, ref_code_fn code, size_t bytes, bool q8_1)
{
	const uint8_t *xb = xq;
	size_t xbytes = q8_1 ? KN__Q8_1X_BYTES : KN__Q8_0X_BYTES, at = q8_1 ? 4 : 2;
	for (size_t r = 0; r < n_rows; r++) {
		const uint8_t *row = (const uint8_t *)W + r * rb;
		float sumf = 0.0f;
		for (size_t i = 0; i < k / KN__QK; i++) {
			const uint8_t *b = row + i * bytes, *xi = xb + i * xbytes;
			int32_t sumi = 0;
			for (int j = 0; j < KN__QK; j++)
				sumi += code(b, j) * (int8_t)xi[at + j];
			if (q8_1)
				sumf += (kq_half(b) * kq_half(xi)) * (float)sumi +
					kq_half(b + 2) * kq_half(xi + 2);
			else
				sumf += (float)sumi * (kq_half(b) * kq_half(xi));
		}
		y[r] = sumf;
	}
}

static float ref_q8k_d(const uint8_t *xi)
{
	float d;
	memcpy(&d, xi, sizeof(d));
	return d;
}

static int ref_q8k_bsum(const uint8_t *xi, int j)
{
	int16_t s;
	memcpy(&s, xi + 260 + 2 * j, sizeof(s));
	return s;
}

/* ggml_vec_dot_q4_K_q8_K / q5_K (qh NULL for q4_K): per block
 * isum = sum_s sc_s (q_s . x_s), msum = sum_s m_s (bsum_2s + bsum_2s+1). */
static float ref_dot_k45(const uint8_t *b, int has_qh, const uint8_t *xi)
{
	const uint8_t *qh = b + 16, *qs = b + (has_qh ? 48 : 16);
	const int8_t *q8 = (const int8_t *)(xi + 4);
	int32_t isum = 0, msum = 0;
	for (int s = 0; s < 8; s++) {
		int sc, m;
		kn__scale_min_k4(s, b + 4, &sc, &m);
		const uint8_t *q = qs + 32 * (s / 2);
		int32_t dot = 0;
		for (int l = 0; l < 32; l++) {
			int v = (s & 1) ? q[l] >> 4 : q[l] & 0xf;
			if (has_qh)
				v |= ((qh[l] >> s) & 1) << 4;
			dot += v * q8[32 * s + l];
		}
		isum += sc * dot;
		msum += m * (ref_q8k_bsum(xi, 2 * s) + ref_q8k_bsum(xi, 2 * s + 1));
	}
	float xd = ref_q8k_d(xi);
	float d = kq_half(b) * xd, dmin = kq_half(b + 2) * xd;
	return d * (float)isum - dmin * (float)msum;
}

/* ggml_vec_dot_q6_K_q8_K: isum = sum over 16-element groups of
 * sc_g sum (q - 32) x. */
static float ref_dot_q6_k(const uint8_t *b, const uint8_t *xi)
{
	const uint8_t *ql = b, *qh = b + 128;
	const int8_t *sc = (const int8_t *)(b + 192), *q8 = (const int8_t *)(xi + 4);
	int32_t isum = 0;
	for (int h = 0; h < 2; h++)
		for (int t = 0; t < 4; t++)
			for (int g = 0; g < 2; g++) {
				int32_t dot = 0;
				for (int l = 16 * g; l < 16 * g + 16; l++) {
					int lo = ql[64 * h + 32 * (t & 1) + l] >> (4 * (t >> 1)) & 0xf;
					int hi = (qh[32 * h + l] >> (2 * t)) & 3;
					dot += ((lo | hi << 4) - 32) * q8[128 * h + 32 * t + l];
				}
				isum += sc[8 * h + 2 * t + g] * dot;
			}
	return (kq_half(b + 208) * ref_q8k_d(xi)) * (float)isum;
}

/* ggml_vec_dot_q2_K_q8_K: isum = sum_g sc_g (q_g . x_g), msum = sum_g m_g
 * bsum_g over the sixteen 16-element groups. */
static float ref_dot_q2_k(const uint8_t *b, const uint8_t *xi)
{
	const int8_t *q8 = (const int8_t *)(xi + 4);
	int32_t isum = 0, msum = 0;
	for (int g = 0; g < 16; g++)
		msum += (b[g] >> 4) * ref_q8k_bsum(xi, g);
	for (int e = 0; e < KN__QK_K; e++)
		isum += (b[ref_k23_group(e)] & 0xf) * ref_k23_lo(b + 16, e) * q8[e];
	float xd = ref_q8k_d(xi);
	float d = kq_half(b + 80) * xd, dmin = kq_half(b + 82) * xd;
	return d * (float)isum - dmin * (float)msum;
}

/* ggml_vec_dot_q3_K_q8_K: isum = sum_g (sc_g - 32) (q_g . x_g). */
static float ref_dot_q3_k(const uint8_t *b, const uint8_t *xi)
{
	const int8_t *q8 = (const int8_t *)(xi + 4);
	int sc[16];
	kq_q3k_scales(b + 96, sc);
	int32_t isum = 0;
	for (int e = 0; e < KN__QK_K; e++)
		isum += (sc[ref_k23_group(e)] - 32) * ref_q3k_code(b, e) * q8[e];
	return (kq_half(b + 108) * ref_q8k_d(xi)) * (float)isum;
}

/* ggml_vec_dot_iq4_xs_q8_K: isum = sum_s (ls_s - 32) (v[q_s] . x_s). */
static float ref_dot_iq4_xs(const uint8_t *b, const uint8_t *xi)
{
	const int8_t *q8 = (const int8_t *)(xi + 4);
	int32_t isum = 0;
	for (int s = 0; s < 8; s++) {
		const uint8_t *qs = b + 8 + 16 * s;
		int32_t dot = 0;
		for (int j = 0; j < 16; j++)
			dot += kn__iq4nl_values[qs[j] & 0xf] * q8[32 * s + j] +
			       kn__iq4nl_values[qs[j] >> 4] * q8[32 * s + j + 16];
		isum += (ref_iq4xs_scale(b, s) - 32) * dot;
	}
	return (kq_half(b) * ref_q8k_d(xi)) * (float)isum;
}

static float ref_dot_q4_k(const uint8_t *b, const uint8_t *xi)
{
	return ref_dot_k45(b, 0, xi);
}

static float ref_dot_q5_k(const uint8_t *b, const uint8_t *xi)
{
	return ref_dot_k45(b, 1, xi);
}

typedef float (*ref_dotk_fn)(const uint8_t *b, const uint8_t *xi);

static void ref_gemv_xq_k(const void *W, size_t rb, const void *xq, float *y, size_t n_rows,
			  size_t k, ref_dotk_fn dot, size_t bytes)
{
	const uint8_t *xb = xq;
	for (size_t r = 0; r < n_rows; r++) {
		const uint8_t *row = (const uint8_t *)W + r * rb;
		float sumf = 0.0f;
		for (size_t i = 0; i < k / KN__QK_K; i++)
			sumf += dot(row + i * bytes, xb + i * KN__Q8_K_BYTES);
		y[r] = sumf;
	}
}

#define REF_XQ0(T, BYTES)                                                                  \
	static void ref_gemv_xq_##T(const void *restrict W, size_t rb,                     \
				    const void *restrict xq, float *restrict y,            \
				    size_t n_rows, size_t k)                               \
	{                                                                                  \
		ref_gemv_xq_32(W, rb, xq, y, n_rows, k, ref_code_##T, BYTES, false);       \
	}
#define REF_XQK(T, BYTES)                                                                  \
	static void ref_gemv_xq_##T(const void *restrict W, size_t rb,                     \
				    const void *restrict xq, float *restrict y,            \
				    size_t n_rows, size_t k)                               \
	{                                                                                  \
		ref_gemv_xq_k(W, rb, xq, y, n_rows, k, ref_dot_##T, BYTES);                \
	}

REF_XQ0(q4_0, KN__Q4_0_BYTES)
REF_XQ0(q5_0, KN__Q5_0_BYTES)
REF_XQ0(q8_0, KN__Q8_0_BYTES)
REF_XQ0(iq4_nl, KN__IQ4_NL_BYTES)
#define REF_XQ1(T, BYTES)                                                                  \
	static void ref_gemv_xq_##T(const void *restrict W, size_t rb,                     \
				    const void *restrict xq, float *restrict y,            \
				    size_t n_rows, size_t k)                               \
	{                                                                                  \
		ref_gemv_xq_32(W, rb, xq, y, n_rows, k, ref_code_##T, BYTES, true);        \
	}
REF_XQ1(q4_1, KN__Q4_1_BYTES)
REF_XQ1(q5_1, KN__Q5_1_BYTES)
REF_XQK(q4_k, KN__Q4_K_BYTES)
REF_XQK(q5_k, KN__Q5_K_BYTES)
REF_XQK(q6_k, KN__Q6_K_BYTES)
REF_XQK(q2_k, KN__Q2_K_BYTES)
REF_XQK(q3_k, KN__Q3_K_BYTES)
REF_XQK(iq4_xs, KN__IQ4_XS_BYTES)

/* Q4_0 / Q5_0 / IQ4_NL blocks as Q8_0 blocks (kn_quant.h to_q8_0). */
static void ref_to_q8_0(const void *src, void *dst, size_t n_blocks, size_t bytes,
			ref_code_fn code)
{
	const uint8_t *b = src;
	uint8_t *o = dst;
	for (size_t i = 0; i < n_blocks; i++, b += bytes, o += KN__Q8_0_BYTES) {
		memcpy(o, b, 2);
		for (int j = 0; j < KN__QK; j++)
			o[2 + j] = (uint8_t)(int8_t)code(b, j);
	}
}

static void ref_to_q8_0_q4_0(const void *restrict src, void *restrict dst, size_t n_blocks)
{
	ref_to_q8_0(src, dst, n_blocks, KN__Q4_0_BYTES, ref_code_q4_0);
}

static void ref_to_q8_0_q5_0(const void *restrict src, void *restrict dst, size_t n_blocks)
{
	ref_to_q8_0(src, dst, n_blocks, KN__Q5_0_BYTES, ref_code_q5_0);
}

static void ref_to_q8_0_iq4_nl(const void *restrict src, void *restrict dst, size_t n_blocks)
{
	ref_to_q8_0(src, dst, n_blocks, KN__IQ4_NL_BYTES, ref_code_iq4_nl);
}

/* The fields every entry has, and those of the integer path (X: its
 * partner, q8_0, q8_1 or q8_k). */
#define REF_FIELDS(TYPE, T)                                                                \
	.type = TYPE, .geom = &kn__qtypes[TYPE], .dequant = ref_dequant_##T, .gemv = ref_gemv_##T
#define REF_FIELDS_XQ(TYPE, T, X)                                                          \
	REF_FIELDS(TYPE, T), .xq_bytes = ref_xq_bytes_##X, .quantize_x = ref_quantize_##X,  \
		.gemv_xq = ref_gemv_xq_##T

#define REF_ENTRY(TYPE, T) [TYPE] = {REF_FIELDS(TYPE, T)}
/* A type with an integer path. */
#define REF_ENTRY_XQ(TYPE, T, X) [TYPE] = {REF_FIELDS_XQ(TYPE, T, X)}
/* Q4_0 / Q5_0 / IQ4_NL: the integer path and the widening to Q8_0 blocks. */
#define REF_ENTRY_W8(TYPE, T, X) [TYPE] = {REF_FIELDS_XQ(TYPE, T, X), .to_q8_0 = ref_to_q8_0_##T}
/* A flat type whose activations are rounded first (F16, BF16). */
#define REF_ENTRY_RX(TYPE, T) [TYPE] = {REF_FIELDS(TYPE, T), .round_x = ref_round_##T}

const struct kn_qops kn__qops_ref[KN_Q_MAX] = {
	REF_ENTRY(KN_Q_F32, f32),
	REF_ENTRY_RX(KN_Q_F16, f16),
	REF_ENTRY_RX(KN_Q_BF16, bf16),
	REF_ENTRY_W8(KN_Q_Q4_0, q4_0, q8_0),
	REF_ENTRY_XQ(KN_Q_Q4_1, q4_1, q8_1),
	REF_ENTRY_W8(KN_Q_Q5_0, q5_0, q8_0),
	REF_ENTRY_XQ(KN_Q_Q5_1, q5_1, q8_1),
	REF_ENTRY_XQ(KN_Q_Q8_0, q8_0, q8_0),
	REF_ENTRY_XQ(KN_Q_Q4_K, q4_k, q8_k),
	REF_ENTRY_XQ(KN_Q_Q5_K, q5_k, q8_k),
	REF_ENTRY_XQ(KN_Q_Q6_K, q6_k, q8_k),
	REF_ENTRY_XQ(KN_Q_Q2_K, q2_k, q8_k),
	REF_ENTRY_XQ(KN_Q_Q3_K, q3_k, q8_k),
	REF_ENTRY_W8(KN_Q_IQ4_NL, iq4_nl, q8_0),
	REF_ENTRY_XQ(KN_Q_IQ4_XS, iq4_xs, q8_k),
};
