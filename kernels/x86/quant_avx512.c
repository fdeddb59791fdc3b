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
 * The integer path (gemv_xq, x quantized to Q8_0 / Q8_K once per product)
 * is ggml's vec_dot_<type>_q8_<0|K> idea in our own form: codes stay
 * int8/uint8 and meet x in vpdpbusd (u8 x s8, 4 products per int32 lane;
 * _0 types, two blocks per 512-bit vector) or vpmaddubsw then vpdpwssd
 * (K-quants: the pair sums times the sub-block's integer scale), with
 * AVX512-VNNI; without it the same kernels use vpmaddubsw + vpmaddwd (the
 * AVX-512BW form). Each is instantiated twice and chosen per call by
 * kn__has_avx512vnni(); this file is compiled with -mavx512vnni for the
 * VNNI instances only. Four rows per pass share each x load and its
 * unpacking (K-quants: x pairs regrouped to the weights' nibble order,
 * bsums); the float combine is one FMA per block (two per 64 elements
 * for the _0 types) into a per-row vector.
 * Q4_1 and Q5_1 (w = d q + m) meet x quantized to Q8_1 (Q8_0 plus s = d sum q,
 * ggml's partner): their unsigned codes against x in the same u8 x s8 dot,
 * one FMA with d_w d_x per block and row, and m_w s_x summed apart.
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

/* The 6-bit scale and min of q4_K/q5_K sub-block j (quant.c's kq_scale_min). */
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
	kq_scale_min(s, b + 4, &sc, &m);
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

/* ---- integer path: x quantized to Q8_0 / Q8_K (kn_quant.h) ------------ */

/* quantize_x: ggml's reference arithmetic (ref/quant.c) on 16 lanes. roundf
 * (half away from zero) is trunc plus a step of sign(v) where
 * |v - trunc(v)| >= 0.5 (v - trunc(v) is exact); nearest_int (half to
 * even) is vcvtps2dq in the default rounding mode. */
KQ_INLINE __m512 kq_roundf(__m512 v)
{
	__m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
	__m512 f = _mm512_abs_ps(_mm512_sub_ps(v, t));
	__mmask16 m = _mm512_cmp_ps_mask(f, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
	__m512 one = _mm512_castsi512_ps(_mm512_or_si512(
		_mm512_castps_si512(_mm512_set1_ps(1.0f)),
		_mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(INT32_MIN))));
	return _mm512_mask_add_ps(t, m, t, one);
}

static size_t kq_xq_bytes_q8_0(size_t k)
{
	return k / KN__QK * KN__Q8_0X_BYTES;
}

static size_t kq_xq_bytes_q8_1(size_t k)
{
	return k / KN__QK * KN__Q8_1X_BYTES;
}

static size_t kq_xq_bytes_q8_k(size_t k)
{
	return k / KN__QK_K * KN__Q8_K_BYTES;
}

/* One Q8_0 block of x[0..32): *d (the float scale) and the codes into
 * q8[32]; returns their sum (Q8_1's s). */
KQ_INLINE int kq_q8_block(const float *x, uint8_t *q8, float *d)
{
	__m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
	float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
	*d = amax / 127.0f;
	float id = *d != 0.0f ? 1.0f / *d : 0.0f;
	__m512 vid = _mm512_set1_ps(id);
	__m512i q0 = _mm512_cvtps_epi32(kq_roundf(_mm512_mul_ps(v0, vid)));
	__m512i q1 = _mm512_cvtps_epi32(kq_roundf(_mm512_mul_ps(v1, vid)));
	_mm_storeu_si128((__m128i *)q8, _mm512_cvtepi32_epi8(q0));
	_mm_storeu_si128((__m128i *)(q8 + 16), _mm512_cvtepi32_epi8(q1));
	return _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
}

static void kq_quantize_q8_0(const float *restrict x, void *restrict xq, size_t k)
{
	uint8_t *o = xq;
	for (size_t i = 0; i < k / KN__QK; i++, x += KN__QK, o += KN__Q8_0X_BYTES) {
		float d;
		kq_q8_block(x, o + 2, &d);
		uint16_t h = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
		memcpy(o, &h, sizeof(h));
	}
}

/* quantize_row_q8_1_ref: Q8_0's d and codes, s = fp16(d * sum). */
static void kq_quantize_q8_1(const float *restrict x, void *restrict xq, size_t k)
{
	uint8_t *o = xq;
	for (size_t i = 0; i < k / KN__QK; i++, x += KN__QK, o += KN__Q8_1X_BYTES) {
		float d;
		int sum = kq_q8_block(x, o + 4, &d);
		uint16_t hd = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
		uint16_t hs = _cvtss_sh((float)sum * d, _MM_FROUND_TO_NEAREST_INT);
		memcpy(o, &hd, sizeof(hd));
		memcpy(o + 2, &hs, sizeof(hs));
	}
}

static void kq_quantize_q8_k(const float *restrict x, void *restrict xq, size_t k)
{
	uint8_t *o = xq;
	for (size_t i = 0; i < k / KN__QK_K; i++, x += KN__QK_K, o += KN__Q8_K_BYTES) {
		__m512 am = _mm512_setzero_ps();
		for (int j = 0; j < 16; j++)
			am = _mm512_max_ps(am, _mm512_abs_ps(_mm512_loadu_ps(x + 16 * j)));
		float amax = _mm512_reduce_max_ps(am);
		if (amax == 0.0f) {
			memset(o, 0, KN__Q8_K_BYTES);
			continue;
		}
		float max = 0.0f; /* the first element with |x| == amax */
		for (int j = 0; j < 16; j++) {
			__mmask16 m = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + 16 * j)),
							 _mm512_set1_ps(amax), _CMP_EQ_OQ);
			if (m) {
				max = x[16 * j + __builtin_ctz(m)];
				break;
			}
		}
		float iscale = -127.0f / max;
		__m512 vs = _mm512_set1_ps(iscale);
		int16_t bsums[16];
		for (int j = 0; j < 16; j++) {
			__m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(vs, _mm512_loadu_ps(x + 16 * j)));
			q = _mm512_min_epi32(q, _mm512_set1_epi32(127));
			_mm_storeu_si128((__m128i *)(o + 4 + 16 * j), _mm512_cvtepi32_epi8(q));
			bsums[j] = (int16_t)_mm512_reduce_add_epi32(q);
		}
		memcpy(o + 260, bsums, sizeof(bsums));
		float d = 1.0f / iscale;
		memcpy(o, &d, sizeof(d));
	}
}

/* u8 x s8 dot, four products per int32 lane added to acc: vpdpbusd with
 * VNNI, else vpmaddubsw (pair sums must fit int16: every caller's are
 * below 2 * 128 * 127) + vpmaddwd by ones. vnni is a compile-time
 * constant of each instantiation below. */
KQ_INLINE __m512i kq_dot_u8s8(__m512i acc, __m512i u, __m512i s, int vnni)
{
	if (vnni)
		return _mm512_dpbusd_epi32(acc, u, s);
	return _mm512_add_epi32(
		acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1)));
}

/* acc += pairwise int16 products p * sc: vpdpwssd, else vpmaddwd + add. */
KQ_INLINE __m512i kq_dot_i16(__m512i acc, __m512i p, __m512i sc, int vnni)
{
	if (vnni)
		return _mm512_dpwssd_epi32(acc, p, sc);
	return _mm512_add_epi32(acc, _mm512_madd_epi16(p, sc));
}

KQ_INLINE uint32_t kq_u16(const uint8_t *p)
{
	uint16_t h;
	memcpy(&h, p, sizeof(h));
	return h;
}

KQ_INLINE uint32_t kq_u32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

/* Two fp16 scales (block A, B; b_ok 0: B absent, 0) as [A x8, B x8]. */
KQ_INLINE __m512 kq_d2(const uint8_t *a, const uint8_t *b, int b_ok)
{
	uint32_t bits = kq_u16(a) | (b_ok ? kq_u16(b) << 16 : 0u);
	__m512 d = _mm512_castps128_ps512(_mm_cvtph_ps(_mm_cvtsi32_si128((int)bits)));
	return _mm512_permutexvar_ps(
		_mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0), d);
}

/* 32 bytes at a and (b_ok) 32 at b as one vector; B half zero if absent. */
KQ_INLINE __m512i kq_ld2x32(const uint8_t *a, const uint8_t *b, int b_ok)
{
	__m512i v = _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)a));
	return b_ok ? _mm512_inserti64x4(v, _mm256_loadu_si256((const __m256i *)b), 1) : v;
}

/* q4_0 / q5_0 nibbles of blocks A, B as [A 0..15, A 16..31, B 0..15,
 * B 16..31]: each 16-byte qs broadcast to 32 bytes, the upper copy shifted
 * right 4. */
KQ_INLINE __m512i kq_nib2(const uint8_t *qa, const uint8_t *qb, int b_ok)
{
	__m512i v = _mm512_zextsi256_si512(
		_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qa)));
	if (b_ok)
		v = _mm512_inserti64x4(
			v, _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qb)), 1);
	v = _mm512_srlv_epi64(v, _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0));
	return _mm512_and_si512(v, _mm512_set1_epi8(0x0f));
}

/* The weights of blocks A = w, B = w + bytes (when b_ok) as codes in int8
 * lanes matching x's [A 0..31, B 0..31]: unsigned codes for q4_0 (q,
 * offset 8) and q5_0 (offset 16); for q8_0 |q| with x's sign flipped
 * where q < 0 (*xs), so that every type is a u8 x s8 dot. */
KQ_INLINE __m512i kq_w2_q4_0(const uint8_t *w, int b_ok, __m512i x, __m512i *xs)
{
	*xs = x;
	return kq_nib2(w + 2, w + KN__Q4_0_BYTES + 2, b_ok);
}

KQ_INLINE __m512i kq_w2_q5_0(const uint8_t *w, int b_ok, __m512i x, __m512i *xs)
{
	*xs = x;
	__m512i q = kq_nib2(w + 6, w + KN__Q5_0_BYTES + 6, b_ok);
	uint64_t hb = kq_u32(w + 2) | (b_ok ? (uint64_t)kq_u32(w + KN__Q5_0_BYTES + 2) << 32 : 0);
	return _mm512_mask_add_epi8(q, (__mmask64)hb, q, _mm512_set1_epi8(0x10));
}

KQ_INLINE __m512i kq_w2_q8_0(const uint8_t *w, int b_ok, __m512i x, __m512i *xs)
{
	__m512i q = kq_ld2x32(w + 2, w + KN__Q8_0_BYTES + 2, b_ok);
	*xs = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(q), _mm512_setzero_si512(), x);
	return _mm512_abs_epi8(q);
}

typedef __m512i (*kq_w2_fn)(const uint8_t *w, int b_ok, __m512i x, __m512i *xs);

/* Software prefetch of the n bytes at p (lines of 64). The weights are
 * streamed four rows at a time, row r at block i, so the hardware
 * prefetchers see four interleaved streams within a few KiB and fall
 * behind (measured: a third of the DRAM rate); each step asks for the same
 * position R rows further down, i.e. the next pass's data. Prefetches
 * never fault, past the matrix included. */
#define KQ_PF_AHEAD_BYTES 6144

/* The prefetch distance for passes of R rows of rb bytes: whole passes,
 * at least KQ_PF_AHEAD_BYTES (tuned on Zen 4: 4.6 KiB passes, q4_0 and
 * q4_K at k = 2048, ran 25 % slower one pass ahead than two; 8.7 KiB
 * ones, q8_0, best one ahead). */
KQ_INLINE size_t kq_pf_dist(int R, size_t rb)
{
	size_t pass = (size_t)R * rb;
	return pass ? (KQ_PF_AHEAD_BYTES + pass - 1) / pass * pass : 0;
}

KQ_INLINE void kq_pf(const uint8_t *p, size_t n)
{
	for (size_t o = 0; o < n; o += 64)
		_mm_prefetch((const char *)p + o, _MM_HINT_T0);
}

/* One step of R rows of a _0 type: blocks i (and i + 1 when b_ok). */
KQ_INLINE void kq_xq0_step(const uint8_t *w, size_t rb, size_t pf, const uint8_t *xq, size_t i,
			   int b_ok, __m512 *acc, int R, size_t bytes, int off, kq_w2_fn wf,
			   int vnni)
{
	const uint8_t *xa = xq + i * KN__Q8_0X_BYTES, *xb = xa + KN__Q8_0X_BYTES;
	__m512i xv = kq_ld2x32(xa + 2, xb + 2, b_ok);
	__m512 xd = kq_d2(xa, xb, b_ok);
	__m512i c0 = _mm512_setzero_si512();
	if (off)
		c0 = _mm512_sub_epi32(c0, kq_dot_u8s8(c0, _mm512_set1_epi8((char)off), xv, vnni));
	for (int r = 0; r < R; r++) {
		const uint8_t *wb = w + (size_t)r * rb + i * bytes;
		kq_pf(wb + pf, 2 * bytes);
		__m512i xs, q = wf(wb, b_ok, xv, &xs);
		__m512i isum = kq_dot_u8s8(c0, q, xs, vnni);
		__m512 d = _mm512_mul_ps(kq_d2(wb, wb + bytes, b_ok), xd);
		acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), d, acc[r]);
	}
}

/* R rows (1 or 4) of a _0 type against Q8_0 x, two blocks per step:
 * x loaded once per step for all R rows, together with its scales and
 * -off * (sums of 4 x codes) (the start of each row's dot, so that
 * unsigned codes q give sum (q - off) x). Per row and step: one dot,
 * one int -> float and one FMA with d_w d_x; an odd last block alone. */
KQ_INLINE void kq_xq0_rows(const uint8_t *w, size_t rb, const uint8_t *xq, float *y, size_t k,
			   int R, size_t bytes, int off, kq_w2_fn wf, int vnni)
{
	__m512 acc[4];
	for (int r = 0; r < R; r++)
		acc[r] = _mm512_setzero_ps();
	size_t nb = k / KN__QK, i = 0, pf = kq_pf_dist(R, rb);
	for (; i + 2 <= nb; i += 2)
		kq_xq0_step(w, rb, pf, xq, i, 1, acc, R, bytes, off, wf, vnni);
	if (i < nb)
		kq_xq0_step(w, rb, pf, xq, i, 0, acc, R, bytes, off, wf, vnni);
	for (int r = 0; r < R; r++)
		y[r] = _mm512_reduce_add_ps(acc[r]);
}

/* The unsigned codes of q4_1 / q5_1 blocks A = w, B = w + bytes (b_ok). */
KQ_INLINE __m512i kq_c2_q4_1(const uint8_t *w, int b_ok)
{
	return kq_nib2(w + 4, w + KN__Q4_1_BYTES + 4, b_ok);
}

KQ_INLINE __m512i kq_c2_q5_1(const uint8_t *w, int b_ok)
{
	__m512i q = kq_nib2(w + 8, w + KN__Q5_1_BYTES + 8, b_ok);
	uint64_t hb = kq_u32(w + 4) | (b_ok ? (uint64_t)kq_u32(w + KN__Q5_1_BYTES + 4) << 32 : 0);
	return _mm512_mask_add_epi8(q, (__mmask64)hb, q, _mm512_set1_epi8(0x10));
}

typedef __m512i (*kq_c2_fn)(const uint8_t *w, int b_ok);

/* R rows (1 or 4) of q4_1 / q5_1 against Q8_1 x, two blocks per step, as
 * kq_xq0_rows; the blocks' mins enter as m_w s_x, summed apart per row. */
KQ_INLINE void kq_xq1_rows(const uint8_t *w, size_t rb, const uint8_t *xq, float *y, size_t k,
			   int R, size_t bytes, kq_c2_fn cf, int vnni)
{
	__m512 acc[4];
	float accm[4] = { 0.0f, 0.0f, 0.0f, 0.0f };
	for (int r = 0; r < R; r++)
		acc[r] = _mm512_setzero_ps();
	size_t nb = k / KN__QK, pf = kq_pf_dist(R, rb);
	for (size_t i = 0; i < nb; i += 2) {
		int b_ok = i + 1 < nb;
		const uint8_t *xa = xq + i * KN__Q8_1X_BYTES, *xb = xa + KN__Q8_1X_BYTES;
		__m512i xv = kq_ld2x32(xa + 4, xb + 4, b_ok);
		__m512 xd = kq_d2(xa, xb, b_ok);
		float sa = kq_half(xa + 2), sb = b_ok ? kq_half(xb + 2) : 0.0f;
		for (int r = 0; r < R; r++) {
			const uint8_t *wb = w + (size_t)r * rb + i * bytes;
			kq_pf(wb + pf, 2 * bytes);
			__m512i isum = kq_dot_u8s8(_mm512_setzero_si512(), cf(wb, b_ok), xv, vnni);
			__m512 d = _mm512_mul_ps(kq_d2(wb, wb + bytes, b_ok), xd);
			acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), d, acc[r]);
			accm[r] += kq_half(wb + 2) * sa;
			if (b_ok)
				accm[r] += kq_half(wb + bytes + 2) * sb;
		}
	}
	for (int r = 0; r < R; r++)
		y[r] = _mm512_reduce_add_ps(acc[r]) + accm[r];
}

KQ_INLINE void kq_xq1(const void *W, size_t rb, const void *xq, float *y, size_t n_rows,
		      size_t k, size_t bytes, kq_c2_fn cf, int vnni)
{
	const uint8_t *w = W;
	size_t r = 0;
	for (; r + 4 <= n_rows; r += 4)
		kq_xq1_rows(w + r * rb, rb, xq, y + r, k, 4, bytes, cf, vnni);
	for (; r < n_rows; r++)
		kq_xq1_rows(w + r * rb, rb, xq, y + r, k, 1, bytes, cf, vnni);
}


KQ_INLINE void kq_xq0(const void *W, size_t rb, const void *xq, float *y, size_t n_rows,
		      size_t k, size_t bytes, int off, kq_w2_fn wf, int vnni)
{
	const uint8_t *w = W;
	size_t r = 0;
	for (; r + 4 <= n_rows; r += 4)
		kq_xq0_rows(w + r * rb, rb, xq, y + r, k, 4, bytes, off, wf, vnni);
	for (; r < n_rows; r++)
		kq_xq0_rows(w + r * rb, rb, xq, y + r, k, 1, bytes, off, wf, vnni);
}

/* gemm_xq for the _0 types: one step of R weight rows against NX x rows
 * (blocks i, i + 1 when b_ok). Per (row, x) pair the operations of
 * kq_xq0_step exactly; the weights' scales and codes are read once for
 * the NX x rows. */
KQ_INLINE void kq_xq0_step_nx(const uint8_t *w, size_t rb, size_t pf, const uint8_t *xq,
			      size_t xs, size_t i, int b_ok, __m512 acc[4][4], int R, int NX,
			      size_t bytes, int off, kq_w2_fn wf, int vnni)
{
	__m512i xv[4], c0[4];
	__m512 xd[4];
	for (int j = 0; j < NX; j++) {
		const uint8_t *xa = xq + (size_t)j * xs + i * KN__Q8_0X_BYTES;
		const uint8_t *xb = xa + KN__Q8_0X_BYTES;
		xv[j] = kq_ld2x32(xa + 2, xb + 2, b_ok);
		xd[j] = kq_d2(xa, xb, b_ok);
		c0[j] = _mm512_setzero_si512();
		if (off)
			c0[j] = _mm512_sub_epi32(c0[j], kq_dot_u8s8(c0[j], _mm512_set1_epi8((char)off),
								  xv[j], vnni));
	}
	for (int r = 0; r < R; r++) {
		const uint8_t *wb = w + (size_t)r * rb + i * bytes;
		kq_pf(wb + pf, 2 * bytes);
		__m512 dw = kq_d2(wb, wb + bytes, b_ok);
		for (int j = 0; j < NX; j++) {
			__m512i xsv, q = wf(wb, b_ok, xv[j], &xsv);
			__m512i isum = kq_dot_u8s8(c0[j], q, xsv, vnni);
			acc[r][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, xd[j]),
						    acc[r][j]);
		}
	}
}

KQ_INLINE void kq_xq0_rows_nx(const uint8_t *w, size_t rb, const uint8_t *xq, size_t xs,
			      float *y, size_t ldy, size_t k, int R, int NX, size_t bytes, int off,
			      kq_w2_fn wf, int vnni)
{
	__m512 acc[4][4];
	for (int r = 0; r < R; r++)
		for (int j = 0; j < NX; j++)
			acc[r][j] = _mm512_setzero_ps();
	size_t nb = k / KN__QK, i = 0, pf = kq_pf_dist(R, rb);
	for (; i + 2 <= nb; i += 2)
		kq_xq0_step_nx(w, rb, pf, xq, xs, i, 1, acc, R, NX, bytes, off, wf, vnni);
	if (i < nb)
		kq_xq0_step_nx(w, rb, pf, xq, xs, i, 0, acc, R, NX, bytes, off, wf, vnni);
	for (int r = 0; r < R; r++)
		for (int j = 0; j < NX; j++)
			y[(size_t)j * ldy + r] = _mm512_reduce_add_ps(acc[r][j]);
}

/* NX x rows (1..4, a constant in each branch) against every weight row. */
KQ_INLINE void kq_gemm0_nx(const uint8_t *w, size_t rb, const uint8_t *xq, size_t xs, int NX,
			   float *y, size_t ldy, size_t n_rows, size_t k, size_t bytes, int off,
			   kq_w2_fn wf, int vnni)
{
	size_t r = 0;
	for (; r + 4 <= n_rows; r += 4)
		kq_xq0_rows_nx(w + r * rb, rb, xq, xs, y + r, ldy, k, 4, NX, bytes, off, wf, vnni);
	for (; r < n_rows; r++)
		kq_xq0_rows_nx(w + r * rb, rb, xq, xs, y + r, ldy, k, 1, NX, bytes, off, wf, vnni);
}

KQ_INLINE void kq_gemm0(const void *W, size_t rb, const void *xq, size_t xs, size_t n_x,
			float *y, size_t ldy, size_t n_rows, size_t k, size_t bytes, int off,
			kq_w2_fn wf, int vnni)
{
	const uint8_t *w = W, *x = xq;
	for (size_t j = 0; j < n_x; j += 4) {
		const uint8_t *xj = x + j * xs;
		float *yj = y + j * ldy;
		switch (n_x - j >= 4 ? 4 : (int)(n_x - j)) {
		case 4: kq_gemm0_nx(w, rb, xj, xs, 4, yj, ldy, n_rows, k, bytes, off, wf, vnni); break;
		case 3: kq_gemm0_nx(w, rb, xj, xs, 3, yj, ldy, n_rows, k, bytes, off, wf, vnni); break;
		case 2: kq_gemm0_nx(w, rb, xj, xs, 2, yj, ldy, n_rows, k, bytes, off, wf, vnni); break;
		default: kq_gemm0_nx(w, rb, xj, xs, 1, yj, ldy, n_rows, k, bytes, off, wf, vnni); break;
		}
	}
}

/* pshufb control: in 128-bit lane L (0..3) every int16 is int16 number
 * n_L of that lane (a scale vector broadcast to all four lanes). */
#define KQ_L16(n) (long long)(0x0100010001000100ULL + 0x0202020202020202ULL * (unsigned)(n))
#define KQ_SEL16(a, b, c, d)                                                               \
	_mm512_set_epi64(KQ_L16(d), KQ_L16(d), KQ_L16(c), KQ_L16(c), KQ_L16(b), KQ_L16(b),  \
			 KQ_L16(a), KQ_L16(a))

/* The x side of one Q8_K block for the K-quant kernels: four vectors of
 * codes in the order the weights unpack to, the per-32 bsums (q4_K/q5_K
 * mins) or the 16 bsums (q6_K), and d. */
struct kq_xk {
	__m512i x[4];
	__m128i bs8;  /* bsum_2s + bsum_2s+1, s < 8 */
	__m256i bs16; /* bsums */
	float d;
};

/* q4_K / q5_K: 64 qs bytes hold sub-blocks (0, 2) in their low nibbles and
 * (1, 3) in their high ones, so x is paired [x_s | x_s+2]. */
KQ_INLINE void kq_xk_k45(const uint8_t *xb, struct kq_xk *X)
{
	const uint8_t *q = xb + 4;
	X->x[0] = kq_ld2x32(q + 0, q + 64, 1);
	X->x[1] = kq_ld2x32(q + 32, q + 96, 1);
	X->x[2] = kq_ld2x32(q + 128, q + 192, 1);
	X->x[3] = kq_ld2x32(q + 160, q + 224, 1);
	__m256i bs = _mm256_loadu_si256((const __m256i *)(xb + 260));
	X->bs8 = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
	memcpy(&X->d, xb, sizeof(X->d));
}

/* q6_K: each 64 ql bytes hold t = 0, 1 in low nibbles, 2, 3 in high:
 * x in plain order. */
KQ_INLINE void kq_xk_q6(const uint8_t *xb, struct kq_xk *X)
{
	for (int j = 0; j < 4; j++)
		X->x[j] = _mm512_loadu_si512(xb + 4 + 64 * j);
	X->bs16 = _mm256_loadu_si256((const __m256i *)(xb + 260));
	memcpy(&X->d, xb, sizeof(X->d));
}

/* One q4_K / q5_K block (qh: q5_K) against X: *acc += d_w d_x isum,
 * *accm += dmin_w d_x (mins . bs8) (four lanes). */
KQ_INLINE void kq_blk_k45(const uint8_t *b, int has_qh, const struct kq_xk *X, __m512 *acc,
			  __m128 *accm, int vnni)
{
	/* the 12 scale bytes as 8 scales and 8 mins (quant.c's kq_scale_min
	 * on four lanes of a uint32) */
	uint32_t a = kq_u32(b + 4), bb = kq_u32(b + 8), c = kq_u32(b + 12);
	uint32_t sc03 = a & 0x3f3f3f3fu, m03 = bb & 0x3f3f3f3fu;
	uint32_t sc47 = (c & 0x0f0f0f0fu) | ((a >> 6) & 0x03030303u) << 4;
	uint32_t m47 = ((c >> 4) & 0x0f0f0f0fu) | ((bb >> 6) & 0x03030303u) << 4;
	__m128i sc16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)(sc03 | (uint64_t)sc47 << 32)));
	__m128i m16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)(m03 | (uint64_t)m47 << 32)));
	__m512i scb = _mm512_broadcast_i32x4(sc16);
	const uint8_t *qs = b + (has_qh ? 48 : 16);
	__m512i w0 = _mm512_loadu_si512(qs), w1 = _mm512_loadu_si512(qs + 64);
	__m512i m4 = _mm512_set1_epi8(0x0f);
	__m512i q[4] = {
		_mm512_and_si512(w0, m4),
		_mm512_and_si512(_mm512_srli_epi16(w0, 4), m4),
		_mm512_and_si512(w1, m4),
		_mm512_and_si512(_mm512_srli_epi16(w1, 4), m4),
	};
	if (has_qh) { /* bit s of qh[l]: 16 into element l of sub-block s */
		__m512i h = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b + 16)));
		static const char sel[4][2] = {{1, 4}, {2, 8}, {16, 64}, {32, -128}};
		for (int g = 0; g < 4; g++) {
			__m512i bit = _mm512_inserti64x4(_mm512_set1_epi8(sel[g][0]),
							 _mm256_set1_epi8(sel[g][1]), 1);
			q[g] = _mm512_mask_add_epi8(q[g], _mm512_test_epi8_mask(h, bit), q[g],
						    _mm512_set1_epi8(0x10));
		}
	}
	__m512i sc[4] = {
		_mm512_shuffle_epi8(scb, KQ_SEL16(0, 0, 2, 2)),
		_mm512_shuffle_epi8(scb, KQ_SEL16(1, 1, 3, 3)),
		_mm512_shuffle_epi8(scb, KQ_SEL16(4, 4, 6, 6)),
		_mm512_shuffle_epi8(scb, KQ_SEL16(5, 5, 7, 7)),
	};
	__m512i isum = _mm512_setzero_si512();
	for (int g = 0; g < 4; g++)
		isum = kq_dot_i16(isum, _mm512_maddubs_epi16(q[g], X->x[g]), sc[g], vnni);
	float d = kq_half(b) * X->d, dmin = kq_half(b + 2) * X->d;
	*acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(d), *acc);
	*accm = _mm_fmadd_ps(_mm_cvtepi32_ps(_mm_madd_epi16(m16, X->bs8)), _mm_set1_ps(dmin), *accm);
}

/* One q6_K block against X: sum sc (q - 32) x = sum sc q x - 32 sum sc bsum. */
KQ_INLINE void kq_blk_q6_k(const uint8_t *b, const struct kq_xk *X, __m512 *acc, __m128 *accm,
			 int vnni)
{
	(void)accm;
	__m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + 192)));
	__m512i isum = _mm512_zextsi256_si512(
		_mm256_slli_epi32(_mm256_madd_epi16(sc16, X->bs16), 5));
	isum = _mm512_sub_epi32(_mm512_setzero_si512(), isum);
	__m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
	for (int h = 0; h < 2; h++) {
		__m512i l = _mm512_loadu_si512(b + 64 * h);
		__m512i hh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b + 128 + 32 * h)));
		/* bits 2t, 2t+1 of qh to bits 4, 5: t = 0, 1 shift left 4, 2;
		 * t = 2, 3 right 0, 2 */
		__m512i h01 = _mm512_and_si512(
			_mm512_sllv_epi16(hh, _mm512_inserti64x4(_mm512_set1_epi16(4),
								  _mm256_set1_epi16(2), 1)), m30);
		__m512i h23 = _mm512_and_si512(
			_mm512_srlv_epi16(hh, _mm512_inserti64x4(_mm512_setzero_si512(),
								  _mm256_set1_epi16(2), 1)), m30);
		__m512i q01 = _mm512_or_si512(_mm512_and_si512(l, m4), h01);
		__m512i q23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4), h23);
		__m512i scb = _mm512_broadcast_i32x4(h ? _mm256_extracti128_si256(sc16, 1)
						       : _mm256_castsi256_si128(sc16));
		isum = kq_dot_i16(isum, _mm512_maddubs_epi16(q01, X->x[2 * h]),
				  _mm512_shuffle_epi8(scb, KQ_SEL16(0, 1, 2, 3)), vnni);
		isum = kq_dot_i16(isum, _mm512_maddubs_epi16(q23, X->x[2 * h + 1]),
				  _mm512_shuffle_epi8(scb, KQ_SEL16(4, 5, 6, 7)), vnni);
	}
	float d = kq_half(b + 208) * X->d;
	*acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(d), *acc);
}

typedef void (*kq_xk_fn)(const uint8_t *xb, struct kq_xk *X);
typedef void (*kq_blk_fn)(const uint8_t *b, const struct kq_xk *X, __m512 *acc, __m128 *accm,
			  int vnni);

KQ_INLINE void kq_blk_q4_k(const uint8_t *b, const struct kq_xk *X, __m512 *acc, __m128 *accm,
			   int vnni)
{
	kq_blk_k45(b, 0, X, acc, accm, vnni);
}

KQ_INLINE void kq_blk_q5_k(const uint8_t *b, const struct kq_xk *X, __m512 *acc, __m128 *accm,
			   int vnni)
{
	kq_blk_k45(b, 1, X, acc, accm, vnni);
}

/* R rows (1 or 4) of a K-quant: each Q8_K block of x unpacked once for
 * all R rows. */
KQ_INLINE void kq_xqk_rows(const uint8_t *w, size_t rb, const uint8_t *xq, float *y, size_t k,
			   int R, size_t bytes, kq_xk_fn xf, kq_blk_fn bf, int vnni)
{
	__m512 acc[4];
	__m128 accm[4];
	for (int r = 0; r < R; r++) {
		acc[r] = _mm512_setzero_ps();
		accm[r] = _mm_setzero_ps();
	}
	size_t pf = kq_pf_dist(R, rb);
	for (size_t i = 0; i < k / KN__QK_K; i++) {
		struct kq_xk X;
		xf(xq + i * KN__Q8_K_BYTES, &X);
		for (int r = 0; r < R; r++) {
			const uint8_t *wb = w + (size_t)r * rb + i * bytes;
			kq_pf(wb + pf, bytes);
			bf(wb, &X, &acc[r], &accm[r], vnni);
		}
	}
	for (int r = 0; r < R; r++) {
		__m128 m = _mm_add_ps(accm[r], _mm_movehl_ps(accm[r], accm[r]));
		m = _mm_add_ss(m, _mm_movehdup_ps(m));
		y[r] = _mm512_reduce_add_ps(acc[r]) - _mm_cvtss_f32(m);
	}
}

KQ_INLINE void kq_xqk(const void *W, size_t rb, const void *xq, float *y, size_t n_rows,
		      size_t k, size_t bytes, kq_xk_fn xf, kq_blk_fn bf, int vnni)
{
	const uint8_t *w = W;
	size_t r = 0;
	for (; r + 4 <= n_rows; r += 4)
		kq_xqk_rows(w + r * rb, rb, xq, y + r, k, 4, bytes, xf, bf, vnni);
	for (; r < n_rows; r++)
		kq_xqk_rows(w + r * rb, rb, xq, y + r, k, 1, bytes, xf, bf, vnni);
}

/* Each type's gemv_xq in two instantiations (VNNI and AVX-512BW) of the
 * row loop F (its extra arguments ..., then vnni), picked per call by
 * kn__has_avx512vnni(); the _0 types' gemm_xq the same way. */
#define KQ_XQ_FNS(T, F, ...)                                                               \
	static void kq_xq_##T##_vnni(const void *W, size_t rb, const void *xq, float *y,   \
				     size_t n, size_t k)                                   \
	{                                                                                  \
		F(W, rb, xq, y, n, k, __VA_ARGS__, 1);                                     \
	}                                                                                  \
	static void kq_xq_##T##_bw(const void *W, size_t rb, const void *xq, float *y,     \
				   size_t n, size_t k)                                     \
	{                                                                                  \
		F(W, rb, xq, y, n, k, __VA_ARGS__, 0);                                     \
	}                                                                                  \
	static void kq_gemv_xq_##T(const void *restrict W, size_t rb,                      \
				   const void *restrict xq, float *restrict y, size_t n,   \
				   size_t k)                                               \
	{                                                                                  \
		(kn__has_avx512vnni() ? kq_xq_##T##_vnni : kq_xq_##T##_bw)(W, rb, xq, y, n, k); \
	}
#define KQ_XQ0(T, BYTES, OFF)                                                              \
	KQ_XQ_FNS(T, kq_xq0, BYTES, OFF, kq_w2_##T)                                        \
	static void kq_mm_##T##_vnni(const void *W, size_t rb, const void *xq, size_t xs,  \
				     size_t nx, float *y, size_t ldy, size_t n, size_t k)  \
	{                                                                                  \
		kq_gemm0(W, rb, xq, xs, nx, y, ldy, n, k, BYTES, OFF, kq_w2_##T, 1);       \
	}                                                                                  \
	static void kq_mm_##T##_bw(const void *W, size_t rb, const void *xq, size_t xs,    \
				   size_t nx, float *y, size_t ldy, size_t n, size_t k)    \
	{                                                                                  \
		kq_gemm0(W, rb, xq, xs, nx, y, ldy, n, k, BYTES, OFF, kq_w2_##T, 0);       \
	}                                                                                  \
	static void kq_gemm_xq_##T(const void *restrict W, size_t rb,                      \
				   const void *restrict xq, size_t xs, size_t nx,          \
				   float *restrict y, size_t ldy, size_t n, size_t k)      \
	{                                                                                  \
		(kn__has_avx512vnni() ? kq_mm_##T##_vnni : kq_mm_##T##_bw)(W, rb, xq, xs, nx, y, \
									   ldy, n, k);     \
	}
#define KQ_XQK(T, BYTES, XF) KQ_XQ_FNS(T, kq_xqk, BYTES, XF, kq_blk_##T)
#define KQ_XQ1(T, BYTES)     KQ_XQ_FNS(T, kq_xq1, BYTES, kq_c2_##T)

KQ_XQ0(q4_0, KN__Q4_0_BYTES, 8)
KQ_XQ0(q5_0, KN__Q5_0_BYTES, 16)
KQ_XQ0(q8_0, KN__Q8_0_BYTES, 0)
KQ_XQ1(q4_1, KN__Q4_1_BYTES)
KQ_XQ1(q5_1, KN__Q5_1_BYTES)
KQ_XQK(q4_k, KN__Q4_K_BYTES, kq_xk_k45)
KQ_XQK(q5_k, KN__Q5_K_BYTES, kq_xk_k45)
KQ_XQK(q6_k, KN__Q6_K_BYTES, kq_xk_q6)

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
KQ_BLOCK(q4_k, KN__QK_K, KN__Q4_K_BYTES)
KQ_BLOCK(q5_k, KN__QK_K, KN__Q5_K_BYTES)
KQ_BLOCK(q6_k, KN__QK_K, KN__Q6_K_BYTES)

const struct kn_qops kn__qops_avx512[KN_Q_MAX] = {
	KQ_ENTRY(KN_Q_F32, f32),
	KQ_ENTRY_RX(KN_Q_F16, f16),
	KQ_ENTRY_RX(KN_Q_BF16, bf16),
	KQ_ENTRY_MM(KN_Q_Q4_0, q4_0, q8_0),
	KQ_ENTRY_XQ(KN_Q_Q4_1, q4_1, q8_1),
	KQ_ENTRY_MM(KN_Q_Q5_0, q5_0, q8_0),
	KQ_ENTRY_XQ(KN_Q_Q5_1, q5_1, q8_1),
	KQ_ENTRY_MM(KN_Q_Q8_0, q8_0, q8_0),
	KQ_ENTRY_XQ(KN_Q_Q4_K, q4_k, q8_k),
	KQ_ENTRY_XQ(KN_Q_Q5_K, q5_k, q8_k),
	KQ_ENTRY_XQ(KN_Q_Q6_K, q6_k, q8_k),
};
