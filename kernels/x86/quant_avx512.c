/* kernels/x86/quant_avx512.c - the quantized-weight kernels (kn_quant.h) for
 * AVX-512F/BW/VL + F16C: 16 floats per vector. Compiled alone with
 * -mavx512f -mavx512bw -mavx512vl -mavx2 -mfma -mf16c (kernels/meson.build)
 * and reached only through kn__qops_avx512 once kn_init.c has checked the
 * CPU.
 *
 * Every block type is read by one decoder, kq_dq_<type>(block, sub, lo,
 * hi), that turns 32 consecutive weights (sub-block `sub` of the block;
 * 0 for the 32-element types) into two vectors of floats: nibbles and
 * high bits are unpacked with byte shifts, masks and a compare in 128-bit
 * registers, widened with vpmovsx/zxbd, converted and scaled. The decoder
 * does ggml's arithmetic in ggml's order (kernels/ref/quant.c), never
 * fused, so dequant is bit-exact with the reference. gemv (x is float32,
 * never quantized) runs four rows per pass so each 32 floats of x are
 * loaded once for four rows, with two accumulators per row (eight FMA
 * chains in flight), and a one-row tail. Loads are unaligned; a block sits
 * at any byte address.
 *
 * The integer path (quantize_x, gemv_xq: x86/quant_avx512_xq.h; gemm_xq:
 * x86/quant_avx512_mm.h) keeps codes as integers and meets x, quantized
 * once per product, in vpdpbusd / vpdpwssd (AVX512-VNNI) or their AVX-512BW
 * forms.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/kn_half.h"
#include "kernels/kn_int.h"

/* The vector width of the flat-type loops x86/quant_x86.h shares with
 * x86/quant_avx2.c: 16 floats, the lane sum by _mm512_reduce_add_ps. */
#define KQ_VEC       __m512
#define KQ_LANES     16
#define KQ_ZERO_PS   _mm512_setzero_ps
#define KQ_LOADU_PS  _mm512_loadu_ps
#define KQ_STOREU_PS _mm512_storeu_ps
#define KQ_ADD_PS    _mm512_add_ps
#define KQ_FMADD_PS  _mm512_fmadd_ps
#define KQ_HSUM_PS   _mm512_reduce_add_ps
#include "kernels/x86/quant_x86.h"

/* ---- field and byte helpers ------------------------------------------- */

KQ_INLINE __m128i kq_ld16(const uint8_t *p)
{
	return _mm_loadu_si128((const __m128i *)p);
}

/* 16 signed / unsigned bytes -> 16 floats. */
KQ_INLINE __m512 kq_i8_ps(__m128i v)
{
	return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(v));
}

KQ_INLINE __m512 kq_u8_ps(__m128i v)
{
	return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(v));
}

/* Each byte's nibble: bits [shift, shift + 4) of every byte. */
KQ_INLINE __m128i kq_nib(__m128i v, int shift)
{
	return _mm_and_si128(_mm_srl_epi16(v, _mm_cvtsi32_si128(shift)), _mm_set1_epi8(0x0f));
}

/* Byte j = 0x10 where bit j of bits16 is set, else 0 (q5_0's fifth bit). */
KQ_INLINE __m128i kq_bits16_x10(uint32_t bits16)
{
	return _mm_maskz_mov_epi8((__mmask16)bits16, _mm_set1_epi8(0x10));
}

/* Byte j = 0x10 where bit `bit` of qh byte j is set (q5_K's fifth bit). */
KQ_INLINE __m128i kq_bit_x10(__m128i qh, int bit)
{
	__mmask16 m = _mm_test_epi8_mask(qh, _mm_set1_epi8((char)(1 << bit)));
	return _mm_maskz_mov_epi8(m, _mm_set1_epi8(0x10));
}


/* ---- decoders: 32 weights of a block -> lo (0..15), hi (16..31) ------- */

KQ_INLINE void kq_dq_q4_0(const uint8_t *b, int s, __m512 *lo, __m512 *hi)
{
	(void)s;
	__m512 d = _mm512_set1_ps(kq_half(b));
	__m128i qs = kq_ld16(b + 2), eight = _mm_set1_epi8(8);
	*lo = _mm512_mul_ps(kq_i8_ps(_mm_sub_epi8(kq_nib(qs, 0), eight)), d);
	*hi = _mm512_mul_ps(kq_i8_ps(_mm_sub_epi8(kq_nib(qs, 4), eight)), d);
}

/* q4_1 / q5_1: w = d q + m, not fused. */
KQ_INLINE void kq_dq_q4_1(const uint8_t *b, int s, __m512 *lo, __m512 *hi)
{
	(void)s;
	__m512 d = _mm512_set1_ps(kq_half(b)), m = _mm512_set1_ps(kq_half(b + 2));
	__m128i qs = kq_ld16(b + 4);
	__m512 f0 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(kq_nib(qs, 0)));
	__m512 f1 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(kq_nib(qs, 4)));
	*lo = _mm512_add_ps(_mm512_mul_ps(f0, d), m);
	*hi = _mm512_add_ps(_mm512_mul_ps(f1, d), m);
}

KQ_INLINE void kq_dq_q5_1(const uint8_t *b, int s, __m512 *lo, __m512 *hi)
{
	(void)s;
	__m512 d = _mm512_set1_ps(kq_half(b)), m = _mm512_set1_ps(kq_half(b + 2));
	uint32_t qh;
	memcpy(&qh, b + 4, sizeof(qh));
	__m128i qs = kq_ld16(b + 8);
	__m128i q0 = _mm_or_si128(kq_nib(qs, 0), kq_bits16_x10(qh & 0xffff));
	__m128i q1 = _mm_or_si128(kq_nib(qs, 4), kq_bits16_x10(qh >> 16));
	__m512 f0 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(q0));
	__m512 f1 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(q1));
	*lo = _mm512_add_ps(_mm512_mul_ps(f0, d), m);
	*hi = _mm512_add_ps(_mm512_mul_ps(f1, d), m);
}

KQ_INLINE void kq_dq_q5_0(const uint8_t *b, int s, __m512 *lo, __m512 *hi)
{
	(void)s;
	__m512 d = _mm512_set1_ps(kq_half(b));
	uint32_t qh;
	memcpy(&qh, b + 2, sizeof(qh));
	__m128i qs = kq_ld16(b + 6), sixteen = _mm_set1_epi8(16);
	__m128i q0 = _mm_or_si128(kq_nib(qs, 0), kq_bits16_x10(qh & 0xffff));
	__m128i q1 = _mm_or_si128(kq_nib(qs, 4), kq_bits16_x10(qh >> 16));
	*lo = _mm512_mul_ps(kq_i8_ps(_mm_sub_epi8(q0, sixteen)), d);
	*hi = _mm512_mul_ps(kq_i8_ps(_mm_sub_epi8(q1, sixteen)), d);
}

KQ_INLINE void kq_dq_q8_0(const uint8_t *b, int s, __m512 *lo, __m512 *hi)
{
	(void)s;
	__m512 d = _mm512_set1_ps(kq_half(b));
	*lo = _mm512_mul_ps(kq_i8_ps(kq_ld16(b + 2)), d);
	*hi = _mm512_mul_ps(kq_i8_ps(kq_ld16(b + 18)), d);
}

/* q4_K / q5_K sub-block s: w = (d sc) q - (dmin m); qh NULL for q4_K. */
KQ_INLINE void kq_dq_k45(const uint8_t *b, const uint8_t *qh, const uint8_t *qs, int s,
			 __m512 *lo, __m512 *hi)
{
	int sc, m;
	kn__scale_min_k4(s, b + 4, &sc, &m);
	__m512 d1 = _mm512_set1_ps(kq_half(b) * (float)sc);
	__m512 m1 = _mm512_set1_ps(kq_half(b + 2) * (float)m);
	const uint8_t *q = qs + 32 * (s / 2);
	__m128i q0 = kq_nib(kq_ld16(q), 4 * (s & 1)), q1 = kq_nib(kq_ld16(q + 16), 4 * (s & 1));
	if (qh) {
		q0 = _mm_or_si128(q0, kq_bit_x10(kq_ld16(qh), s));
		q1 = _mm_or_si128(q1, kq_bit_x10(kq_ld16(qh + 16), s));
	}
	*lo = _mm512_sub_ps(_mm512_mul_ps(d1, kq_u8_ps(q0)), m1);
	*hi = _mm512_sub_ps(_mm512_mul_ps(d1, kq_u8_ps(q1)), m1);
}

KQ_INLINE void kq_dq_q4_k(const uint8_t *b, int s, __m512 *lo, __m512 *hi)
{
	kq_dq_k45(b, NULL, b + 16, s, lo, hi);
}

KQ_INLINE void kq_dq_q5_k(const uint8_t *b, int s, __m512 *lo, __m512 *hi)
{
	kq_dq_k45(b, b + 16, b + 48, s, lo, hi);
}

/* q6_K sub-block s = 4 h + t: 16 weights per int8 scale, so lo and hi
 * each have one. */
KQ_INLINE __m128i kq_q6(const uint8_t *ql, const uint8_t *qh, int t)
{
	__m128i nib = kq_nib(kq_ld16(ql), 4 * (t >> 1));
	__m128i h2 = _mm_and_si128(_mm_srl_epi16(kq_ld16(qh), _mm_cvtsi32_si128(2 * t)),
				   _mm_set1_epi8(3));
	return _mm_sub_epi8(_mm_or_si128(nib, _mm_slli_epi16(h2, 4)), _mm_set1_epi8(32));
}

KQ_INLINE void kq_dq_q6_k(const uint8_t *b, int s, __m512 *lo, __m512 *hi)
{
	int h = s / 4, t = s % 4;
	const uint8_t *ql = b + 64 * h + 32 * (t & 1), *qh = b + 128 + 32 * h;
	const int8_t *sc = (const int8_t *)(b + 192 + 8 * h + 2 * t);
	float d = kq_half(b + 208);
	*lo = _mm512_mul_ps(_mm512_set1_ps(d * (float)sc[0]), kq_i8_ps(kq_q6(ql, qh, t)));
	*hi = _mm512_mul_ps(_mm512_set1_ps(d * (float)sc[1]),
			    kq_i8_ps(kq_q6(ql + 16, qh + 16, t)));
}

/* q2_K sub-block s (h = s / 4, t = s % 4): bits 2t, 2t + 1 of qs[32 h ..],
 * two 16-element groups of w = (d sc) q - (dmin m), not fused. */
KQ_INLINE void kq_dq_q2_k(const uint8_t *b, int s, __m512 *lo, __m512 *hi)
{
	int h = s / 4, t = s % 4;
	float d = kq_half(b + 80), dmin = kq_half(b + 82);
	__m512 w[2];
	for (int i = 0; i < 2; i++) {
		int sc = b[8 * h + 2 * t + i];
		__m128i v = _mm_and_si128(_mm_srl_epi16(kq_ld16(b + 16 + 32 * h + 16 * i),
							_mm_cvtsi32_si128(2 * t)), _mm_set1_epi8(3));
		w[i] = _mm512_sub_ps(_mm512_mul_ps(_mm512_set1_ps(d * (float)(sc & 0xf)), kq_u8_ps(v)),
				     _mm512_set1_ps(dmin * (float)(sc >> 4)));
	}
	*lo = w[0];
	*hi = w[1];
}

/* q3_K sub-block s: q = bits 2t, 2t + 1 of qs[32 h ..], less 4 where bit
 * 4h + t of hmask[l] is clear; w = (d (sc - 32)) q. */
KQ_INLINE void kq_dq_q3_k(const uint8_t *b, int s, __m512 *lo, __m512 *hi)
{
	int h = s / 4, t = s % 4;
	float d = kq_half(b + 108);
	__m512 w[2];
	for (int i = 0; i < 2; i++) {
		__m128i l2 = _mm_and_si128(_mm_srl_epi16(kq_ld16(b + 32 + 32 * h + 16 * i),
							 _mm_cvtsi32_si128(2 * t)), _mm_set1_epi8(3));
		__m128i hb = _mm_and_si128(_mm_srl_epi16(kq_ld16(b + 16 * i), _mm_cvtsi32_si128(4 * h + t)),
					   _mm_set1_epi8(1));
		__m128i q = _mm_sub_epi8(_mm_or_si128(l2, _mm_slli_epi16(hb, 2)), _mm_set1_epi8(4));
		w[i] = _mm512_mul_ps(kq_i8_ps(q),
				     _mm512_set1_ps(d * (float)(kq_q3k_sc(b, 8 * h + 2 * t + i) - 32)));
	}
	*lo = w[0];
	*hi = w[1];
}

/* ---- block types: dequant and gemv around a decoder -------------------- */

typedef void (*kq_dq_fn)(const uint8_t *b, int s, __m512 *lo, __m512 *hi);

KQ_INLINE void kq_dequant(const void *src, float *dst, size_t n, size_t elems, size_t bytes,
			  kq_dq_fn dq)
{
	const uint8_t *b = src;
	for (size_t i = 0; i < n / elems; i++, b += bytes)
		for (int s = 0; s < (int)(elems / 32); s++) {
			__m512 lo, hi;
			dq(b, s, &lo, &hi);
			_mm512_storeu_ps(dst + i * elems + 32 * s, lo);
			_mm512_storeu_ps(dst + i * elems + 32 * s + 16, hi);
		}
}

/* acc0 += lo * x0, acc1 += hi * x1 for one row's sub-block. */
KQ_INLINE void kq_fma_sub(kq_dq_fn dq, const uint8_t *b, int s, __m512 x0, __m512 x1,
			  __m512 *acc0, __m512 *acc1)
{
	__m512 lo, hi;
	dq(b, s, &lo, &hi);
	*acc0 = _mm512_fmadd_ps(lo, x0, *acc0);
	*acc1 = _mm512_fmadd_ps(hi, x1, *acc1);
}

/* Rows r..r+3: each 32 floats of x loaded once, used by four rows. */
KQ_INLINE void kq_gemv4(const uint8_t *w, size_t rb, const float *x, float *y, size_t k,
			size_t elems, size_t bytes, kq_dq_fn dq)
{
	__m512 a0 = _mm512_setzero_ps(), b0 = a0, a1 = a0, b1 = a0;
	__m512 a2 = a0, b2 = a0, a3 = a0, b3 = a0;
	for (size_t i = 0; i < k / elems; i++) {
		const uint8_t *p = w + i * bytes;
		for (int s = 0; s < (int)(elems / 32); s++) {
			const float *xs = x + i * elems + 32 * s;
			__m512 x0 = _mm512_loadu_ps(xs), x1 = _mm512_loadu_ps(xs + 16);
			kq_fma_sub(dq, p, s, x0, x1, &a0, &b0);
			kq_fma_sub(dq, p + rb, s, x0, x1, &a1, &b1);
			kq_fma_sub(dq, p + 2 * rb, s, x0, x1, &a2, &b2);
			kq_fma_sub(dq, p + 3 * rb, s, x0, x1, &a3, &b3);
		}
	}
	y[0] = _mm512_reduce_add_ps(_mm512_add_ps(a0, b0));
	y[1] = _mm512_reduce_add_ps(_mm512_add_ps(a1, b1));
	y[2] = _mm512_reduce_add_ps(_mm512_add_ps(a2, b2));
	y[3] = _mm512_reduce_add_ps(_mm512_add_ps(a3, b3));
}

KQ_INLINE void kq_gemv(const void *W, size_t rb, const float *x, float *y, size_t n_rows,
		       size_t k, size_t elems, size_t bytes, kq_dq_fn dq)
{
	const uint8_t *w = W;
	size_t r = 0;
	for (; r + 4 <= n_rows; r += 4)
		kq_gemv4(w + r * rb, rb, x, y + r, k, elems, bytes, dq);
	for (; r < n_rows; r++) { /* row tail */
		__m512 a0 = _mm512_setzero_ps(), b0 = a0;
		for (size_t i = 0; i < k / elems; i++)
			for (int s = 0; s < (int)(elems / 32); s++) {
				const float *xs = x + i * elems + 32 * s;
				kq_fma_sub(dq, w + r * rb + i * bytes, s, _mm512_loadu_ps(xs),
					   _mm512_loadu_ps(xs + 16), &a0, &b0);
			}
		y[r] = _mm512_reduce_add_ps(_mm512_add_ps(a0, b0));
	}
}

/* ---- flat types: f32, f16, bf16 (any k: vector loop + scalar tail) ----- */

/* 16 elements -> floats, for the loops of x86/quant_x86.h. */
KQ_INLINE __m512 kq_ld_f32(const uint8_t *p)
{
	return _mm512_loadu_ps(p);
}

KQ_INLINE __m512 kq_ld_f16(const uint8_t *p)
{
	return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

KQ_INLINE __m512 kq_ld_bf16(const uint8_t *p)
{
	__m512i u = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
	return _mm512_castsi512_ps(_mm512_slli_epi32(u, 16));
}

/* The integer path: quantize_x and gemv_xq, then gemm_xq over them. */
#include "kernels/x86/quant_avx512_xq.h"
#include "kernels/x86/quant_avx512_mm.h"
/* IQ4_NL and IQ4_XS: decoders and integer path. */
#include "kernels/x86/quant_avx512_iq4.h"


/* ---- activations rounded for F16 / BF16 weights (round_x) -------------- */

static void kq_round_x_f16(const float *restrict x, float *restrict y, size_t k)
{
	size_t i = 0;
	for (; i + 16 <= k; i += 16) {
		__m512 v = _mm512_loadu_ps(x + i);
		_mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
	}
	for (; i < k; i++)
		y[i] = kq_round1_f16(x[i]);
}

/* Integer form of ggml_compute_fp32_to_bf16 on 16 lanes. */
static void kq_round_x_bf16(const float *restrict x, float *restrict y, size_t k)
{
	const __m512i lo = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
	const __m512i hi = _mm512_set1_epi32((int)0xffff0000u), quiet = _mm512_set1_epi32(0x00400000);
	size_t i = 0;
	for (; i + 16 <= k; i += 16) {
		__m512 v = _mm512_loadu_ps(x + i);
		__m512i u = _mm512_castps_si512(v);
		__m512i r = _mm512_add_epi32(u, _mm512_add_epi32(lo, _mm512_and_si512(_mm512_srli_epi32(u, 16), one)));
		__m512i q = _mm512_or_si512(u, quiet);
		__mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
		r = _mm512_and_si512(_mm512_mask_mov_epi32(r, nan, q), hi);
		_mm512_storeu_ps(y + i, _mm512_castsi512_ps(r));
	}
	for (; i < k; i++)
		y[i] = kn_bf16_round(x[i]);
}

/* ---- the table ---------------------------------------------------------- */

/* KQ_FLAT, KQ_BLOCK and the KQ_ENTRY* macros: x86/quant_x86.h. */

KQ_FLAT(f32, 4, kq_ld1_f32)
KQ_FLAT(f16, 2, kq_half)
KQ_FLAT(bf16, 2, kq_ld1_bf16)
KQ_BLOCK(q4_0, KN__QK, KN__Q4_0_BYTES)
KQ_BLOCK(q4_1, KN__QK, KN__Q4_1_BYTES)
KQ_BLOCK(q5_0, KN__QK, KN__Q5_0_BYTES)
KQ_BLOCK(q5_1, KN__QK, KN__Q5_1_BYTES)
KQ_BLOCK(q8_0, KN__QK, KN__Q8_0_BYTES)
KQ_BLOCK(q2_k, KN__QK_K, KN__Q2_K_BYTES)
KQ_BLOCK(q3_k, KN__QK_K, KN__Q3_K_BYTES)
KQ_BLOCK(q4_k, KN__QK_K, KN__Q4_K_BYTES)
KQ_BLOCK(q5_k, KN__QK_K, KN__Q5_K_BYTES)
KQ_BLOCK(q6_k, KN__QK_K, KN__Q6_K_BYTES)
KQ_BLOCK(iq4_nl, KN__QK, KN__IQ4_NL_BYTES)
KQ_BLOCK(iq4_xs, KN__QK_K, KN__IQ4_XS_BYTES)

/* No to_q8_0: on an Intel Xeon (family 6 model 207) these Q4_0 / Q5_0
 * gemm_xq kernels ran faster on their own blocks (62 / 55 GOP/s, one core,
 * 16 x rows) than Q8_0's on the widened ones (50 / 49). */
const struct kn_qops kn__qops_avx512[KN_Q_MAX] = {
	KQ_ENTRY(KN_Q_F32, f32),
	KQ_ENTRY_RX(KN_Q_F16, f16),
	KQ_ENTRY_RX(KN_Q_BF16, bf16),
	KQ_ENTRY_MM(KN_Q_Q4_0, q4_0, q8_0),
	KQ_ENTRY_MM(KN_Q_Q4_1, q4_1, q8_1),
	KQ_ENTRY_MM(KN_Q_Q5_0, q5_0, q8_0),
	KQ_ENTRY_MM(KN_Q_Q5_1, q5_1, q8_1),
	KQ_ENTRY_MM(KN_Q_Q8_0, q8_0, q8_0),
	KQ_ENTRY_MM(KN_Q_Q2_K, q2_k, q8_k),
	KQ_ENTRY_MM(KN_Q_Q3_K, q3_k, q8_k),
	KQ_ENTRY_MM(KN_Q_Q4_K, q4_k, q8_k),
	KQ_ENTRY_MM(KN_Q_Q5_K, q5_k, q8_k),
	KQ_ENTRY_MM(KN_Q_Q6_K, q6_k, q8_k),
	KQ_ENTRY_MM(KN_Q_IQ4_NL, iq4_nl, q8_0),
	KQ_ENTRY_MM(KN_Q_IQ4_XS, iq4_xs, q8_k),
};
