/* kernels/x86/quant_x86.h - what x86/quant_avx2.c and x86/quant_avx512.c
 * share: the scalar field readers (and the q3_K, q4_K / q5_K and IQ4_XS
 * scale unpacking), the flat-type (F32, F16, BF16) loops
 * written once over a vector width, and the macros that bind each file's
 * kernels into its struct kn_qops table. Not a public header: each of the
 * two files includes it once, and nothing else does.
 *
 * The includer defines its vector width first:
 *   KQ_VEC              the float vector type (__m256, __m512)
 *   KQ_LANES            floats per vector (8, 16)
 *   KQ_ZERO_PS()        a vector of zeros
 *   KQ_LOADU_PS(p)      an unaligned load of KQ_LANES floats from p
 *   KQ_STOREU_PS(p, v)  an unaligned store of v to p
 *   KQ_ADD_PS(a, b)     a + b per lane
 *   KQ_FMADD_PS(a, b, c) a * b + c per lane, fused
 *   KQ_HSUM_PS(v)       the float sum of v's lanes (the includer's order)
 * so the loops below are, after expansion, exactly the includer's own:
 * the same instructions in the same order at each width, hence the same
 * bits as before they were shared. The includer's flat loaders kq_ld_f32,
 * kq_ld_f16, kq_ld_bf16 (KQ_LANES elements -> floats) must be defined
 * where KQ_FLAT is expanded, and its block-type kq_dequant / kq_gemv where
 * KQ_BLOCK is.
 */
#ifndef KN_X86_QUANT_X86_H
#define KN_X86_QUANT_X86_H

#include <immintrin.h>
#include <string.h>

#include "kernels/kn_half.h"
#include "kernels/kn_int.h"

#define KQ_INLINE static inline __attribute__((always_inline))

/* ---- scalar field readers ----------------------------------------------- */

/* The fp16 at p (any alignment) as a float. */
KQ_INLINE float kq_half(const uint8_t *p)
{
	uint16_t h;
	memcpy(&h, p, sizeof(h));
	return _cvtsh_ss(h);
}

KQ_INLINE float kq_ld1_f32(const uint8_t *p)
{
	float f;
	memcpy(&f, p, sizeof(f));
	return f;
}

KQ_INLINE float kq_ld1_bf16(const uint8_t *p)
{
	uint16_t h;
	memcpy(&h, p, sizeof(h));
	return kn_bf16_to_f32(h);
}

/* q4_K / q5_K's 8 scales and 8 mins as int16 (kn_int.h kn__scale_min_k4
 * on four lanes of a uint32 at a time). */
KQ_INLINE void kq_k45_scales(const uint8_t *b, __m128i *sc16, __m128i *m16)
{
	uint32_t a, bb, c;
	memcpy(&a, b + 4, 4);
	memcpy(&bb, b + 8, 4);
	memcpy(&c, b + 12, 4);
	uint32_t sc03 = a & 0x3f3f3f3fu, m03 = bb & 0x3f3f3f3fu;
	uint32_t sc47 = (c & 0x0f0f0f0fu) | ((a >> 6) & 0x03030303u) << 4;
	uint32_t m47 = ((c >> 4) & 0x0f0f0f0fu) | ((bb >> 6) & 0x03030303u) << 4;
	*sc16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)(sc03 | (uint64_t)sc47 << 32)));
	*m16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)(m03 | (uint64_t)m47 << 32)));
}

/* q3_K's 6-bit scale g < 16 (ref/quant.c kq_q3k_scales). */
KQ_INLINE int kq_q3k_sc(const uint8_t *b, int g)
{
	const uint8_t *q = b + 96;
	return ((q[g % 8] >> (4 * (g / 8))) & 0xf) | (((q[8 + g % 4] >> (2 * (g / 4))) & 3) << 4);
}

/* All sixteen q3_K scales (before their -32) as bytes: the same unpacking
 * four lanes of a uint32 at a time. */
KQ_INLINE __m128i kq_q3k_scales16(const uint8_t *b)
{
	uint32_t a0, a1, t2;
	memcpy(&a0, b + 96, 4);
	memcpy(&a1, b + 100, 4);
	memcpy(&t2, b + 104, 4);
	uint32_t m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
	return _mm_setr_epi32((int)((a0 & m4) | (t2 & m2) << 4),
			      (int)((a1 & m4) | ((t2 >> 2) & m2) << 4),
			      (int)(((a0 >> 4) & m4) | ((t2 >> 4) & m2) << 4),
			      (int)(((a1 >> 4) & m4) | ((t2 >> 6) & m2) << 4));
}

/* IQ4_XS sub-block s's 6-bit scale less 32 (ref/quant.c ref_iq4xs_scale). */
KQ_INLINE int kq_iq4xs_sc(const uint8_t *b, int s)
{
	uint16_t h;
	memcpy(&h, b + 2, sizeof(h));
	return (((b[4 + s / 2] >> (4 * (s % 2))) & 0xf) | (((h >> (2 * s)) & 3) << 4)) - 32;
}

/* f rounded to fp16 (nearest even) and widened back: round_x's tail. */
KQ_INLINE float kq_round1_f16(float f)
{
	return _cvtsh_ss(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

/* ---- flat types: f32, f16, bf16 (any k: vector loop + scalar tail) ----- */

typedef KQ_VEC (*kq_ld_fn)(const uint8_t *p); /* KQ_LANES elements -> floats */
typedef float (*kq_ld1_fn)(const uint8_t *p); /* 1 element -> float */

KQ_INLINE void kq_dequant_flat(const void *src, float *dst, size_t n, size_t esz, kq_ld_fn ld,
			       kq_ld1_fn ld1)
{
	const uint8_t *p = src;
	size_t i = 0;
	for (; i + KQ_LANES <= n; i += KQ_LANES)
		KQ_STOREU_PS(dst + i, ld(p + i * esz));
	for (; i < n; i++)
		dst[i] = ld1(p + i * esz);
}

/* One row: two accumulators over two vectors' worth, then one vector,
 * then scalars. */
KQ_INLINE float kq_dot_flat(const uint8_t *w, const float *x, size_t k, size_t esz,
			    kq_ld_fn ld, kq_ld1_fn ld1)
{
	KQ_VEC a = KQ_ZERO_PS(), b = a;
	size_t i = 0;
	for (; i + 2 * KQ_LANES <= k; i += 2 * KQ_LANES) {
		a = KQ_FMADD_PS(ld(w + i * esz), KQ_LOADU_PS(x + i), a);
		b = KQ_FMADD_PS(ld(w + (i + KQ_LANES) * esz), KQ_LOADU_PS(x + i + KQ_LANES), b);
	}
	for (; i + KQ_LANES <= k; i += KQ_LANES)
		a = KQ_FMADD_PS(ld(w + i * esz), KQ_LOADU_PS(x + i), a);
	float sum = KQ_HSUM_PS(KQ_ADD_PS(a, b));
	for (; i < k; i++)
		sum += ld1(w + i * esz) * x[i];
	return sum;
}

/* Four rows share each x load; one-row tail. */
KQ_INLINE void kq_gemv_flat(const void *W, size_t rb, const float *x, float *y,
			    size_t n_rows, size_t k, size_t esz, kq_ld_fn ld, kq_ld1_fn ld1)
{
	const uint8_t *w = W;
	size_t r = 0;
	for (; r + 4 <= n_rows; r += 4) {
		const uint8_t *w0 = w + r * rb, *w1 = w0 + rb, *w2 = w1 + rb, *w3 = w2 + rb;
		KQ_VEC a0 = KQ_ZERO_PS(), a1 = a0, a2 = a0, a3 = a0;
		size_t i = 0;
		for (; i + KQ_LANES <= k; i += KQ_LANES) {
			KQ_VEC xv = KQ_LOADU_PS(x + i);
			a0 = KQ_FMADD_PS(ld(w0 + i * esz), xv, a0);
			a1 = KQ_FMADD_PS(ld(w1 + i * esz), xv, a1);
			a2 = KQ_FMADD_PS(ld(w2 + i * esz), xv, a2);
			a3 = KQ_FMADD_PS(ld(w3 + i * esz), xv, a3);
		}
		float s0 = KQ_HSUM_PS(a0), s1 = KQ_HSUM_PS(a1);
		float s2 = KQ_HSUM_PS(a2), s3 = KQ_HSUM_PS(a3);
		for (; i < k; i++) {
			s0 += ld1(w0 + i * esz) * x[i];
			s1 += ld1(w1 + i * esz) * x[i];
			s2 += ld1(w2 + i * esz) * x[i];
			s3 += ld1(w3 + i * esz) * x[i];
		}
		y[r] = s0;
		y[r + 1] = s1;
		y[r + 2] = s2;
		y[r + 3] = s3;
	}
	for (; r < n_rows; r++)
		y[r] = kq_dot_flat(w + r * rb, x, k, esz, ld, ld1);
}

/* ---- binding into struct kn_qops --------------------------------------- */

/* Binds a decoder (block types) or loaders (flat types) into the
 * dequant/gemv signatures of struct kn_qops. */
#define KQ_BLOCK(T, ELEMS, BYTES)                                                          \
	static void kq_dequant_##T(const void *restrict src, float *restrict dst, size_t n)  \
	{                                                                                  \
		kq_dequant(src, dst, n, ELEMS, BYTES, kq_dq_##T);                          \
	}                                                                                  \
	static void kq_gemv_##T(const void *restrict W, size_t rb, const float *restrict x,  \
				float *restrict y, size_t n_rows, size_t k)                \
	{                                                                                  \
		kq_gemv(W, rb, x, y, n_rows, k, ELEMS, BYTES, kq_dq_##T);                  \
	}

#define KQ_FLAT(T, ESZ, LD1)                                                               \
	static void kq_dequant_##T(const void *restrict src, float *restrict dst, size_t n)  \
	{                                                                                  \
		kq_dequant_flat(src, dst, n, ESZ, kq_ld_##T, LD1);                         \
	}                                                                                  \
	static void kq_gemv_##T(const void *restrict W, size_t rb, const float *restrict x,  \
				float *restrict y, size_t n_rows, size_t k)                \
	{                                                                                  \
		kq_gemv_flat(W, rb, x, y, n_rows, k, ESZ, kq_ld_##T, LD1);                 \
	}

/* The fields every entry has, and those of the integer path (x quantized
 * to the partner X). */
#define KQ_FIELDS(TYPE, T)                                                                 \
	.type = TYPE, .geom = &kn__qtypes[TYPE], .dequant = kq_dequant_##T, .gemv = kq_gemv_##T
#define KQ_FIELDS_XQ(TYPE, T, X)                                                           \
	KQ_FIELDS(TYPE, T), .xq_bytes = kq_xq_bytes_##X, .quantize_x = kq_quantize_##X,     \
		.gemv_xq = kq_gemv_xq_##T

#define KQ_ENTRY(TYPE, T) [TYPE] = {KQ_FIELDS(TYPE, T)}

/* A block type with the integer path. */
#define KQ_ENTRY_XQ(TYPE, T, X) [TYPE] = {KQ_FIELDS_XQ(TYPE, T, X)}

/* A flat type whose activations are rounded first (F16, BF16). */
#define KQ_ENTRY_RX(TYPE, T) [TYPE] = {KQ_FIELDS(TYPE, T), .round_x = kq_round_x_##T}

/* A block type with the multi-row integer kernel too. */
#define KQ_ENTRY_MM(TYPE, T, X) [TYPE] = {KQ_FIELDS_XQ(TYPE, T, X), .gemm_xq = kq_gemm_xq_##T}

/* KQ_ENTRY_MM, and the widening of its blocks to Q8_0 (Q4_0, Q5_0). */
#define KQ_ENTRY_W8(TYPE, T, X)                                                            \
	[TYPE] = {KQ_FIELDS_XQ(TYPE, T, X), .gemm_xq = kq_gemm_xq_##T,                     \
		  .to_q8_0 = kq_to_q8_0_##T}

#endif /* KN_X86_QUANT_X86_H */
