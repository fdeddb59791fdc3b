/* kernels/quant/avx2.c - the quantized-weight kernels (kn_quant.h) for
 * AVX2 + FMA + F16C: 8 floats per vector. Compiled alone with -mavx2
 * -mfma -mf16c (kernels/meson.build) and reached only through
 * kn__qops_avx2 once kn_init.c has checked the CPU.
 *
 * The structure is quant/avx512.c's: one decoder per block type,
 * kq_dq_<type>(block, sub, w), turns 32 consecutive weights (sub-block
 * `sub`; 0 for the 32-element types) into four vectors of floats. Nibbles
 * and high bits are unpacked with byte shifts, masks and compares in
 * 128-bit registers (q5_0's 32 high bits are spread over bytes with a
 * pshufb and a bit-select compare), widened with vpmovsx/zxbd, converted
 * and scaled in ggml's order, never fused, so dequant is bit-exact with
 * the reference (quant/ref.c). gemv (x is float32, never quantized) runs
 * four rows per pass so each 32 floats of x are loaded once for four rows,
 * two accumulators per row (eight FMA chains), and a one-row tail. Loads
 * are unaligned; a block sits at any byte address.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/kn_int.h"

#define KQ_INLINE static inline __attribute__((always_inline))

/* ---- field and byte helpers ------------------------------------------- */

KQ_INLINE float kq_half(const uint8_t *p)
{
	uint16_t h;
	memcpy(&h, p, sizeof(h));
	return _cvtsh_ss(h);
}

KQ_INLINE __m128i kq_ld16(const uint8_t *p)
{
	return _mm_loadu_si128((const __m128i *)p);
}

/* 16 signed / unsigned bytes -> two vectors of 8 floats, scaled by d. */
KQ_INLINE void kq_i8_ps(__m128i v, __m256 d, __m256 *w)
{
	w[0] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)), d);
	w[1] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(v, v))), d);
}

/* w = d1 q - m1 over 16 unsigned bytes (q4_K / q5_K), not fused. */
KQ_INLINE void kq_u8_ps(__m128i v, __m256 d1, __m256 m1, __m256 *w)
{
	__m256 f0 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v));
	__m256 f1 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(v, v)));
	w[0] = _mm256_sub_ps(_mm256_mul_ps(d1, f0), m1);
	w[1] = _mm256_sub_ps(_mm256_mul_ps(d1, f1), m1);
}

/* Each byte's nibble: bits [shift, shift + 4) of every byte. */
KQ_INLINE __m128i kq_nib(__m128i v, int shift)
{
	return _mm_and_si128(_mm_srl_epi16(v, _mm_cvtsi32_si128(shift)), _mm_set1_epi8(0x0f));
}

/* Byte j = 0x10 where bit j of bits16 is set, else 0 (q5_0's fifth bit):
 * bytes 0-7 get the low byte of bits16 and 8-15 the high byte, then each
 * keeps its own bit. */
KQ_INLINE __m128i kq_bits16_x10(uint32_t bits16)
{
	const __m128i spread = _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
	const __m128i sel = _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64,
					  -128);
	__m128i v = _mm_shuffle_epi8(_mm_cvtsi32_si128((int)bits16), spread);
	return _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(v, sel), sel), _mm_set1_epi8(0x10));
}

/* Byte j = 0x10 where bit `bit` of qh byte j is set (q5_K's fifth bit). */
KQ_INLINE __m128i kq_bit_x10(__m128i qh, int bit)
{
	__m128i sel = _mm_set1_epi8((char)(1 << bit));
	return _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(qh, sel), sel), _mm_set1_epi8(0x10));
}

/* The 6-bit scale and min of q4_K/q5_K sub-block j (ref.c's kq_scale_min). */
KQ_INLINE void kq_scale_min(int j, const uint8_t *q, int *sc, int *m)
{
	if (j < 4) {
		*sc = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
		*m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

/* ---- decoders: 32 weights of a block -> w[0..4), 8 each --------------- */

KQ_INLINE void kq_dq_q4_0(const uint8_t *b, int s, __m256 *w)
{
	(void)s;
	__m256 d = _mm256_set1_ps(kq_half(b));
	__m128i qs = kq_ld16(b + 2), eight = _mm_set1_epi8(8);
	kq_i8_ps(_mm_sub_epi8(kq_nib(qs, 0), eight), d, w);
	kq_i8_ps(_mm_sub_epi8(kq_nib(qs, 4), eight), d, w + 2);
}

KQ_INLINE void kq_dq_q5_0(const uint8_t *b, int s, __m256 *w)
{
	(void)s;
	__m256 d = _mm256_set1_ps(kq_half(b));
	uint32_t qh;
	memcpy(&qh, b + 2, sizeof(qh));
	__m128i qs = kq_ld16(b + 6), sixteen = _mm_set1_epi8(16);
	__m128i q0 = _mm_or_si128(kq_nib(qs, 0), kq_bits16_x10(qh & 0xffff));
	__m128i q1 = _mm_or_si128(kq_nib(qs, 4), kq_bits16_x10(qh >> 16));
	kq_i8_ps(_mm_sub_epi8(q0, sixteen), d, w);
	kq_i8_ps(_mm_sub_epi8(q1, sixteen), d, w + 2);
}

KQ_INLINE void kq_dq_q8_0(const uint8_t *b, int s, __m256 *w)
{
	(void)s;
	__m256 d = _mm256_set1_ps(kq_half(b));
	kq_i8_ps(kq_ld16(b + 2), d, w);
	kq_i8_ps(kq_ld16(b + 18), d, w + 2);
}

/* q4_K / q5_K sub-block s: w = (d sc) q - (dmin m); qh NULL for q4_K. */
KQ_INLINE void kq_dq_k45(const uint8_t *b, const uint8_t *qh, const uint8_t *qs, int s,
			 __m256 *w)
{
	int sc, m;
	kq_scale_min(s, b + 4, &sc, &m);
	__m256 d1 = _mm256_set1_ps(kq_half(b) * (float)sc);
	__m256 m1 = _mm256_set1_ps(kq_half(b + 2) * (float)m);
	const uint8_t *q = qs + 32 * (s / 2);
	__m128i q0 = kq_nib(kq_ld16(q), 4 * (s & 1)), q1 = kq_nib(kq_ld16(q + 16), 4 * (s & 1));
	if (qh) {
		q0 = _mm_or_si128(q0, kq_bit_x10(kq_ld16(qh), s));
		q1 = _mm_or_si128(q1, kq_bit_x10(kq_ld16(qh + 16), s));
	}
	kq_u8_ps(q0, d1, m1, w);
	kq_u8_ps(q1, d1, m1, w + 2);
}

KQ_INLINE void kq_dq_q4_k(const uint8_t *b, int s, __m256 *w)
{
	kq_dq_k45(b, NULL, b + 16, s, w);
}

KQ_INLINE void kq_dq_q5_k(const uint8_t *b, int s, __m256 *w)
{
	kq_dq_k45(b, b + 16, b + 48, s, w);
}

/* q6_K sub-block s = 4 h + t; weights 0-15 and 16-31 have one int8 scale
 * each. */
KQ_INLINE __m128i kq_q6(const uint8_t *ql, const uint8_t *qh, int t)
{
	__m128i nib = kq_nib(kq_ld16(ql), 4 * (t >> 1));
	__m128i h2 = _mm_and_si128(_mm_srl_epi16(kq_ld16(qh), _mm_cvtsi32_si128(2 * t)),
				   _mm_set1_epi8(3));
	return _mm_sub_epi8(_mm_or_si128(nib, _mm_slli_epi16(h2, 4)), _mm_set1_epi8(32));
}

KQ_INLINE void kq_dq_q6_k(const uint8_t *b, int s, __m256 *w)
{
	int h = s / 4, t = s % 4;
	const uint8_t *ql = b + 64 * h + 32 * (t & 1), *qh = b + 128 + 32 * h;
	const int8_t *sc = (const int8_t *)(b + 192 + 8 * h + 2 * t);
	float d = kq_half(b + 208);
	kq_i8_ps(kq_q6(ql, qh, t), _mm256_set1_ps(d * (float)sc[0]), w);
	kq_i8_ps(kq_q6(ql + 16, qh + 16, t), _mm256_set1_ps(d * (float)sc[1]), w + 2);
}

/* ---- block types: dequant and gemv around a decoder -------------------- */

typedef void (*kq_dq_fn)(const uint8_t *b, int s, __m256 *w);

static float kq_hsum(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

KQ_INLINE void kq_dequant(const void *src, float *dst, size_t n, size_t elems, size_t bytes,
			  kq_dq_fn dq)
{
	const uint8_t *b = src;
	for (size_t i = 0; i < n / elems; i++, b += bytes)
		for (int s = 0; s < (int)(elems / 32); s++) {
			__m256 w[4];
			dq(b, s, w);
			float *o = dst + i * elems + 32 * s;
			for (int v = 0; v < 4; v++)
				_mm256_storeu_ps(o + 8 * v, w[v]);
		}
}

/* acc0 += w0 x0 + w2 x2, acc1 += w1 x1 + w3 x3 for one row's sub-block. */
KQ_INLINE void kq_fma_sub(kq_dq_fn dq, const uint8_t *b, int s, const __m256 *xv,
			  __m256 *acc0, __m256 *acc1)
{
	__m256 w[4];
	dq(b, s, w);
	*acc0 = _mm256_fmadd_ps(w[0], xv[0], *acc0);
	*acc1 = _mm256_fmadd_ps(w[1], xv[1], *acc1);
	*acc0 = _mm256_fmadd_ps(w[2], xv[2], *acc0);
	*acc1 = _mm256_fmadd_ps(w[3], xv[3], *acc1);
}

KQ_INLINE void kq_ld_x32(const float *xs, __m256 *xv)
{
	for (int v = 0; v < 4; v++)
		xv[v] = _mm256_loadu_ps(xs + 8 * v);
}

/* Rows r..r+3: each 32 floats of x loaded once, used by four rows. */
KQ_INLINE void kq_gemv4(const uint8_t *w, size_t rb, const float *x, float *y, size_t k,
			size_t elems, size_t bytes, kq_dq_fn dq)
{
	__m256 a0 = _mm256_setzero_ps(), b0 = a0, a1 = a0, b1 = a0;
	__m256 a2 = a0, b2 = a0, a3 = a0, b3 = a0;
	for (size_t i = 0; i < k / elems; i++) {
		const uint8_t *p = w + i * bytes;
		for (int s = 0; s < (int)(elems / 32); s++) {
			__m256 xv[4];
			kq_ld_x32(x + i * elems + 32 * s, xv);
			kq_fma_sub(dq, p, s, xv, &a0, &b0);
			kq_fma_sub(dq, p + rb, s, xv, &a1, &b1);
			kq_fma_sub(dq, p + 2 * rb, s, xv, &a2, &b2);
			kq_fma_sub(dq, p + 3 * rb, s, xv, &a3, &b3);
		}
	}
	y[0] = kq_hsum(_mm256_add_ps(a0, b0));
	y[1] = kq_hsum(_mm256_add_ps(a1, b1));
	y[2] = kq_hsum(_mm256_add_ps(a2, b2));
	y[3] = kq_hsum(_mm256_add_ps(a3, b3));
}

KQ_INLINE void kq_gemv(const void *W, size_t rb, const float *x, float *y, size_t n_rows,
		       size_t k, size_t elems, size_t bytes, kq_dq_fn dq)
{
	const uint8_t *w = W;
	size_t r = 0;
	for (; r + 4 <= n_rows; r += 4)
		kq_gemv4(w + r * rb, rb, x, y + r, k, elems, bytes, dq);
	for (; r < n_rows; r++) { /* row tail */
		__m256 a0 = _mm256_setzero_ps(), b0 = a0;
		for (size_t i = 0; i < k / elems; i++)
			for (int s = 0; s < (int)(elems / 32); s++) {
				__m256 xv[4];
				kq_ld_x32(x + i * elems + 32 * s, xv);
				kq_fma_sub(dq, w + r * rb + i * bytes, s, xv, &a0, &b0);
			}
		y[r] = kq_hsum(_mm256_add_ps(a0, b0));
	}
}

/* ---- flat types: f32, f16, bf16 (any k: vector loop + scalar tail) ----- */

typedef __m256 (*kq_ld_fn)(const uint8_t *p);  /* 8 elements -> floats */
typedef float (*kq_ld1_fn)(const uint8_t *p); /* 1 element -> float */

KQ_INLINE __m256 kq_ld_f32(const uint8_t *p)
{
	return _mm256_loadu_ps((const float *)(const void *)p);
}

KQ_INLINE __m256 kq_ld_f16(const uint8_t *p)
{
	return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

KQ_INLINE __m256 kq_ld_bf16(const uint8_t *p)
{
	__m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
	return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
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
	uint32_t bits = (uint32_t)h << 16;
	float f;
	memcpy(&f, &bits, sizeof(f));
	return f;
}

KQ_INLINE void kq_dequant_flat(const void *src, float *dst, size_t n, size_t esz, kq_ld_fn ld,
			       kq_ld1_fn ld1)
{
	const uint8_t *p = src;
	size_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(dst + i, ld(p + i * esz));
	for (; i < n; i++)
		dst[i] = ld1(p + i * esz);
}

/* One row: two accumulators over 16 elements, then 8, then scalars. */
KQ_INLINE float kq_dot_flat(const uint8_t *w, const float *x, size_t k, size_t esz,
			    kq_ld_fn ld, kq_ld1_fn ld1)
{
	__m256 a = _mm256_setzero_ps(), b = a;
	size_t i = 0;
	for (; i + 16 <= k; i += 16) {
		a = _mm256_fmadd_ps(ld(w + i * esz), _mm256_loadu_ps(x + i), a);
		b = _mm256_fmadd_ps(ld(w + (i + 8) * esz), _mm256_loadu_ps(x + i + 8), b);
	}
	for (; i + 8 <= k; i += 8)
		a = _mm256_fmadd_ps(ld(w + i * esz), _mm256_loadu_ps(x + i), a);
	float sum = kq_hsum(_mm256_add_ps(a, b));
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
		__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
		size_t i = 0;
		for (; i + 8 <= k; i += 8) {
			__m256 xv = _mm256_loadu_ps(x + i);
			a0 = _mm256_fmadd_ps(ld(w0 + i * esz), xv, a0);
			a1 = _mm256_fmadd_ps(ld(w1 + i * esz), xv, a1);
			a2 = _mm256_fmadd_ps(ld(w2 + i * esz), xv, a2);
			a3 = _mm256_fmadd_ps(ld(w3 + i * esz), xv, a3);
		}
		float s0 = kq_hsum(a0), s1 = kq_hsum(a1), s2 = kq_hsum(a2), s3 = kq_hsum(a3);
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

/* ---- the table ---------------------------------------------------------- */

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

KQ_FLAT(f32, 4, kq_ld1_f32)
KQ_FLAT(f16, 2, kq_half)
KQ_FLAT(bf16, 2, kq_ld1_bf16)
KQ_BLOCK(q4_0, KN__QK, KN__Q4_0_BYTES)
KQ_BLOCK(q5_0, KN__QK, KN__Q5_0_BYTES)
KQ_BLOCK(q8_0, KN__QK, KN__Q8_0_BYTES)
KQ_BLOCK(q4_k, KN__QK_K, KN__Q4_K_BYTES)
KQ_BLOCK(q5_k, KN__QK_K, KN__Q5_K_BYTES)
KQ_BLOCK(q6_k, KN__QK_K, KN__Q6_K_BYTES)

#define KQ_ENTRY(TYPE, T, NAME, ELEMS, BYTES)                                              \
	[TYPE] = {.type = TYPE,                                                            \
		  .name = NAME,                                                            \
		  .block_elems = ELEMS,                                                    \
		  .block_bytes = BYTES,                                                    \
		  .dequant = kq_dequant_##T,                                               \
		  .gemv = kq_gemv_##T}

const struct kn_qops kn__qops_avx2[KN_Q_MAX] = {
	KQ_ENTRY(KN_Q_F32, f32, "f32", 1, 4),
	KQ_ENTRY(KN_Q_F16, f16, "f16", 1, 2),
	KQ_ENTRY(KN_Q_BF16, bf16, "bf16", 1, 2),
	KQ_ENTRY(KN_Q_Q4_0, q4_0, "q4_0", KN__QK, KN__Q4_0_BYTES),
	KQ_ENTRY(KN_Q_Q5_0, q5_0, "q5_0", KN__QK, KN__Q5_0_BYTES),
	KQ_ENTRY(KN_Q_Q8_0, q8_0, "q8_0", KN__QK, KN__Q8_0_BYTES),
	KQ_ENTRY(KN_Q_Q4_K, q4_k, "q4_K", KN__QK_K, KN__Q4_K_BYTES),
	KQ_ENTRY(KN_Q_Q5_K, q5_k, "q5_K", KN__QK_K, KN__Q5_K_BYTES),
	KQ_ENTRY(KN_Q_Q6_K, q6_k, "q6_K", KN__QK_K, KN__Q6_K_BYTES),
};
