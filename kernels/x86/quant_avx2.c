/* kernels/x86/quant_avx2.c - the quantized-weight kernels (kn_quant.h) for
 * AVX2 + FMA + F16C: 8 floats per vector. Compiled alone with -mavx2
 * -mfma -mf16c (kernels/meson.build) and reached only through
 * kn__qops_avx2 once kn_init.c has checked the CPU.
 *
 * The structure is x86/quant_avx512.c's: one decoder per block type,
 * kq_dq_<type>(block, sub, w), turns 32 consecutive weights (sub-block
 * `sub`; 0 for the 32-element types) into four vectors of floats. Nibbles
 * and high bits are unpacked with byte shifts, masks and compares in
 * 128-bit registers (q5_0's 32 high bits are spread over bytes with a
 * pshufb and a bit-select compare), widened with vpmovsx/zxbd, converted
 * and scaled in ggml's order, never fused, so dequant is bit-exact with
 * the reference (ref/quant.c). gemv (x is float32, never quantized) runs
 * four rows per pass so each 32 floats of x are loaded once for four rows,
 * two accumulators per row (eight FMA chains), and a one-row tail. Loads
 * are unaligned; a block sits at any byte address.
 *
 * The integer path (gemv_xq, x quantized once to Q8_0 / Q8_K) is ggml's
 * vec_dot_<type>_q8_<0|K> idea in our own form: unsigned codes (q8_0:
 * |q| against x with q's sign) meet x in vpmaddubsw, then vpmaddwd by
 * ones (_0 types; their offset 8 / 16 enters as -off * sum x, computed
 * once per x block) or by the sub-block's integer scale (K-quants; q6_K's
 * -32 through the bsums). Four rows per pass share each x load; one float
 * FMA per block and row.
 * Q4_1 and Q5_1 (w = d q + m) meet x quantized to Q8_1 (Q8_0 plus s = d sum q,
 * ggml's partner): their unsigned codes against x in the same u8 x s8 dot,
 * one FMA with d_w d_x per block and row, and m_w s_x summed apart.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/kn_half.h"
#include "kernels/kn_int.h"

/* The sum of v's 8 lanes: halves, then pairs, then the last two. */
static float kq_hsum(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

/* The vector width of the flat-type loops x86/quant_x86.h shares with
 * x86/quant_avx512.c: 8 floats, the lane sum by kq_hsum. */
#define KQ_VEC       __m256
#define KQ_LANES     8
#define KQ_ZERO_PS   _mm256_setzero_ps
#define KQ_LOADU_PS  _mm256_loadu_ps
#define KQ_STOREU_PS _mm256_storeu_ps
#define KQ_ADD_PS    _mm256_add_ps
#define KQ_FMADD_PS  _mm256_fmadd_ps
#define KQ_HSUM_PS   kq_hsum
#include "kernels/x86/quant_x86.h"

/* ---- field and byte helpers ------------------------------------------- */

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

/* w = d q + m over 16 unsigned bytes (q4_1), not fused. */
KQ_INLINE void kq_u8_ps_add(__m128i v, __m256 d, __m256 m, __m256 *w)
{
	__m256 f0 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v));
	__m256 f1 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(v, v)));
	w[0] = _mm256_add_ps(_mm256_mul_ps(f0, d), m);
	w[1] = _mm256_add_ps(_mm256_mul_ps(f1, d), m);
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


/* ---- decoders: 32 weights of a block -> w[0..4), 8 each --------------- */

KQ_INLINE void kq_dq_q4_0(const uint8_t *b, int s, __m256 *w)
{
	(void)s;
	__m256 d = _mm256_set1_ps(kq_half(b));
	__m128i qs = kq_ld16(b + 2), eight = _mm_set1_epi8(8);
	kq_i8_ps(_mm_sub_epi8(kq_nib(qs, 0), eight), d, w);
	kq_i8_ps(_mm_sub_epi8(kq_nib(qs, 4), eight), d, w + 2);
}

KQ_INLINE void kq_dq_q4_1(const uint8_t *b, int s, __m256 *w)
{
	(void)s;
	__m256 d = _mm256_set1_ps(kq_half(b)), m = _mm256_set1_ps(kq_half(b + 2));
	__m128i qs = kq_ld16(b + 4);
	kq_u8_ps_add(kq_nib(qs, 0), d, m, w);
	kq_u8_ps_add(kq_nib(qs, 4), d, m, w + 2);
}

KQ_INLINE void kq_dq_q5_1(const uint8_t *b, int s, __m256 *w)
{
	(void)s;
	__m256 d = _mm256_set1_ps(kq_half(b)), m = _mm256_set1_ps(kq_half(b + 2));
	uint32_t qh;
	memcpy(&qh, b + 4, sizeof(qh));
	__m128i qs = kq_ld16(b + 8);
	kq_u8_ps_add(_mm_or_si128(kq_nib(qs, 0), kq_bits16_x10(qh & 0xffff)), d, m, w);
	kq_u8_ps_add(_mm_or_si128(kq_nib(qs, 4), kq_bits16_x10(qh >> 16)), d, m, w + 2);
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
	kn__scale_min_k4(s, b + 4, &sc, &m);
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

/* 8 elements -> floats, for the loops of x86/quant_x86.h. */
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

/* ---- integer path: x quantized to Q8_0 / Q8_K (kn_quant.h) ------------ */

/* roundf on 8 lanes: trunc plus sign(v) where |v - trunc(v)| >= 0.5 (the
 * difference is exact), ggml's quantize_row_q8_0_ref rounding. */
KQ_INLINE __m256 kq_roundf(__m256 v)
{
	__m256 sign = _mm256_set1_ps(-0.0f);
	__m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
	__m256 f = _mm256_andnot_ps(sign, _mm256_sub_ps(v, t));
	__m256 ge = _mm256_cmp_ps(f, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
	__m256 one = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(v, sign));
	return _mm256_add_ps(t, _mm256_and_ps(ge, one));
}

KQ_INLINE float kq_hmax(__m256 v)
{
	__m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	m = _mm_max_ps(m, _mm_movehl_ps(m, m));
	m = _mm_max_ss(m, _mm_movehdup_ps(m));
	return _mm_cvtss_f32(m);
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
	__m256 sign = _mm256_set1_ps(-0.0f), am = _mm256_setzero_ps();
	for (int j = 0; j < 4; j++)
		am = _mm256_max_ps(am, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * j)));
	*d = kq_hmax(am) / 127.0f;
	float id = *d != 0.0f ? 1.0f / *d : 0.0f;
	int32_t q[32];
	for (int j = 0; j < 4; j++)
		_mm256_storeu_si256((__m256i *)(q + 8 * j),
				    _mm256_cvtps_epi32(kq_roundf(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * j),
									       _mm256_set1_ps(id)))));
	int sum = 0;
	for (int j = 0; j < 32; j++) {
		q8[j] = (uint8_t)(int8_t)q[j];
		sum += q[j];
	}
	return sum;
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
	__m256 sign = _mm256_set1_ps(-0.0f);
	for (size_t i = 0; i < k / KN__QK_K; i++, x += KN__QK_K, o += KN__Q8_K_BYTES) {
		__m256 am = _mm256_setzero_ps();
		for (int j = 0; j < 32; j++)
			am = _mm256_max_ps(am, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * j)));
		float amax = kq_hmax(am);
		if (amax == 0.0f) {
			memset(o, 0, KN__Q8_K_BYTES);
			continue;
		}
		float max = 0.0f; /* the first element with |x| == amax */
		for (int j = 0; j < 32; j++) {
			__m256 eq = _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * j)),
						  _mm256_set1_ps(amax), _CMP_EQ_OQ);
			int m = _mm256_movemask_ps(eq);
			if (m) {
				max = x[8 * j + __builtin_ctz((unsigned)m)];
				break;
			}
		}
		float iscale = -127.0f / max;
		int32_t q[KN__QK_K];
		for (int j = 0; j < 32; j++) {
			__m256i v = _mm256_cvtps_epi32(
				_mm256_mul_ps(_mm256_set1_ps(iscale), _mm256_loadu_ps(x + 8 * j)));
			_mm256_storeu_si256((__m256i *)(q + 8 * j),
					    _mm256_min_epi32(v, _mm256_set1_epi32(127)));
		}
		for (int g = 0; g < 16; g++) {
			int sum = 0;
			for (int l = 0; l < 16; l++) {
				o[4 + 16 * g + l] = (uint8_t)(int8_t)q[16 * g + l];
				sum += q[16 * g + l];
			}
			int16_t s16 = (int16_t)sum;
			memcpy(o + 260 + 2 * g, &s16, sizeof(s16));
		}
		float d = 1.0f / iscale;
		memcpy(o, &d, sizeof(d));
	}
}

/* acc + u8 x s8 dot, four products per int32 lane (vpmaddubsw pair sums
 * stay below 2 * 128 * 127, vpmaddwd by ones). */
KQ_INLINE __m256i kq_dot_u8s8(__m256i acc, __m256i u, __m256i s)
{
	return _mm256_add_epi32(
		acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
}

KQ_INLINE uint32_t kq_u32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

/* q4_0 / q5_0 nibbles of one block as [0..15 | 16..31]. */
KQ_INLINE __m256i kq_nib32(const uint8_t *qs)
{
	__m128i t = _mm_loadu_si128((const __m128i *)qs);
	__m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(t), _mm_srli_epi16(t, 4), 1);
	return _mm256_and_si256(v, _mm256_set1_epi8(0x0f));
}

/* Byte j = 0x10 where bit j of bits is set (q5_0's fifth bits). */
KQ_INLINE __m256i kq_bits32_x10(uint32_t bits)
{
	const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
						2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
	const __m256i sel = _mm256_set1_epi64x(0x8040201008040201LL);
	__m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), spread);
	return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, sel), sel),
				_mm256_set1_epi8(0x10));
}

/* One block's codes as u8 against x (*xs: x, or x with q8_0's signs). */
KQ_INLINE __m256i kq_w_q4_0(const uint8_t *b, __m256i x, __m256i *xs)
{
	*xs = x;
	return kq_nib32(b + 2);
}

KQ_INLINE __m256i kq_w_q5_0(const uint8_t *b, __m256i x, __m256i *xs)
{
	*xs = x;
	return _mm256_or_si256(kq_nib32(b + 6), kq_bits32_x10(kq_u32(b + 2)));
}

KQ_INLINE __m256i kq_w_q8_0(const uint8_t *b, __m256i x, __m256i *xs)
{
	__m256i q = _mm256_loadu_si256((const __m256i *)(b + 2));
	*xs = _mm256_sign_epi8(x, q);
	return _mm256_abs_epi8(q);
}

typedef __m256i (*kq_w_fn)(const uint8_t *b, __m256i x, __m256i *xs);

/* Software prefetch of the n bytes at p (lines of 64): the _0 types' four
 * rows are streamed at a time, which the hardware prefetchers follow badly
 * (a third of the DRAM rate measured), so each step asks for the same
 * position R rows further down, the next pass's data (the K-quants, one
 * row at a time, the same way with R = 1). Prefetches never fault. */
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

/* dx[r] = fp16 at b + r * st, times xd, for r < n (1..4): the n scales
 * converted in one vcvtph2ps and multiplied in one vmulps (the same
 * products as one at a time), for broadcasts from memory. */
KQ_INLINE void kq_scales(const uint8_t *b, size_t st, int n, float xd, float *dx)
{
	if (n == 1) {
		dx[0] = kq_half(b) * xd;
		return;
	}
	uint16_t h[4] = { 0, 0, 0, 0 };
	for (int r = 0; r < n; r++)
		memcpy(&h[r], b + (size_t)r * st, sizeof(h[r]));
	__m128i v = _mm_loadl_epi64((const __m128i *)(const void *)h);
	_mm_storeu_ps(dx, _mm_mul_ps(_mm_cvtph_ps(v), _mm_set1_ps(xd)));
}

/* R rows (1 or 4) of a _0 type against Q8_0 x, one block per step: x,
 * its scale and -off * (sums of 4 codes) once per step for all R rows. */
KQ_INLINE void kq_xq0_rows(const uint8_t *w, size_t rb, const uint8_t *xq, float *y, size_t k,
			   int R, size_t bytes, int off, kq_w_fn wf)
{
	__m256 acc[4];
	for (int r = 0; r < R; r++)
		acc[r] = _mm256_setzero_ps();
	size_t pf = kq_pf_dist(R, rb);
	for (size_t i = 0; i < k / KN__QK; i++) {
		const uint8_t *xb = xq + i * KN__Q8_0X_BYTES;
		__m256i xv = _mm256_loadu_si256((const __m256i *)(xb + 2));
		float xd = kq_half(xb);
		__m256i c0 = _mm256_setzero_si256();
		if (off)
			c0 = _mm256_sub_epi32(c0, kq_dot_u8s8(c0, _mm256_set1_epi8((char)off), xv));
		float dx[4]; /* d_w d_x per row */
		kq_scales(w + i * bytes, rb, R, xd, dx);
		for (int r = 0; r < R; r++) {
			const uint8_t *b = w + (size_t)r * rb + i * bytes;
			if (!(i & 1))
				kq_pf(b + pf, 2 * bytes);
			__m256i xs, q = wf(b, xv, &xs);
			__m256 isum = _mm256_cvtepi32_ps(kq_dot_u8s8(c0, q, xs));
			acc[r] = _mm256_fmadd_ps(isum, _mm256_broadcast_ss(&dx[r]), acc[r]);
		}
	}
	for (int r = 0; r < R; r++) {
		__m128 s = _mm_add_ps(_mm256_castps256_ps128(acc[r]), _mm256_extractf128_ps(acc[r], 1));
		s = _mm_add_ps(s, _mm_movehl_ps(s, s));
		y[r] = _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
	}
}

KQ_INLINE void kq_xq0(const void *W, size_t rb, const void *xq, float *y, size_t n_rows,
		      size_t k, size_t bytes, int off, kq_w_fn wf)
{
	const uint8_t *w = W;
	size_t r = 0;
	for (; r + 4 <= n_rows; r += 4)
		kq_xq0_rows(w + r * rb, rb, xq, y + r, k, 4, bytes, off, wf);
	for (; r < n_rows; r++)
		kq_xq0_rows(w + r * rb, rb, xq, y + r, k, 1, bytes, off, wf);
}

/* The unsigned codes of a q4_1 / q5_1 block as [0..15 | 16..31]. */
KQ_INLINE __m256i kq_c_q4_1(const uint8_t *b)
{
	return kq_nib32(b + 4);
}

KQ_INLINE __m256i kq_c_q5_1(const uint8_t *b)
{
	return _mm256_or_si256(kq_nib32(b + 8), kq_bits32_x10(kq_u32(b + 4)));
}

typedef __m256i (*kq_c_fn)(const uint8_t *b);

/* R rows (1 or 4) of q4_1 / q5_1 against Q8_1 x, one block per step: the
 * codes (unsigned) meet x in vpmaddubsw; the block's min enters as
 * m_w s_x, summed apart in a scalar per row. */
KQ_INLINE void kq_xq1_rows(const uint8_t *w, size_t rb, const uint8_t *xq, float *y, size_t k,
			   int R, size_t bytes, kq_c_fn cf)
{
	__m256 acc[4];
	float accm[4] = { 0.0f, 0.0f, 0.0f, 0.0f };
	for (int r = 0; r < R; r++)
		acc[r] = _mm256_setzero_ps();
	size_t pf = kq_pf_dist(R, rb);
	for (size_t i = 0; i < k / KN__QK; i++) {
		const uint8_t *xb = xq + i * KN__Q8_1X_BYTES;
		__m256i xv = _mm256_loadu_si256((const __m256i *)(xb + 4));
		float dx[4], mx[4]; /* d_w d_x and m_w s_x per row */
		kq_scales(w + i * bytes, rb, R, kq_half(xb), dx);
		kq_scales(w + i * bytes + 2, rb, R, kq_half(xb + 2), mx);
		for (int r = 0; r < R; r++) {
			const uint8_t *b = w + (size_t)r * rb + i * bytes;
			if (!(i & 1))
				kq_pf(b + pf, 2 * bytes);
			__m256i isum = kq_dot_u8s8(_mm256_setzero_si256(), cf(b), xv);
			acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_broadcast_ss(&dx[r]),
						 acc[r]);
			accm[r] += mx[r];
		}
	}
	for (int r = 0; r < R; r++)
		y[r] = kq_hsum(acc[r]) + accm[r];
}

KQ_INLINE void kq_xq1(const void *W, size_t rb, const void *xq, float *y, size_t n_rows,
		      size_t k, size_t bytes, kq_c_fn cf)
{
	const uint8_t *w = W;
	size_t r = 0;
	for (; r + 4 <= n_rows; r += 4)
		kq_xq1_rows(w + r * rb, rb, xq, y + r, k, 4, bytes, cf);
	for (; r < n_rows; r++)
		kq_xq1_rows(w + r * rb, rb, xq, y + r, k, 1, bytes, cf);
}

static void kq_gemv_xq_q4_1(const void *restrict W, size_t rb, const void *restrict xq,
			    float *restrict y, size_t n_rows, size_t k)
{
	kq_xq1(W, rb, xq, y, n_rows, k, KN__Q4_1_BYTES, kq_c_q4_1);
}

static void kq_gemv_xq_q5_1(const void *restrict W, size_t rb, const void *restrict xq,
			    float *restrict y, size_t n_rows, size_t k)
{
	kq_xq1(W, rb, xq, y, n_rows, k, KN__Q5_1_BYTES, kq_c_q5_1);
}

#define KQ_XQ0(T, BYTES, OFF)                                                              \
	static void kq_gemv_xq_##T(const void *restrict W, size_t rb,                      \
				   const void *restrict xq, float *restrict y, size_t n,   \
				   size_t k)                                               \
	{                                                                                  \
		kq_xq0(W, rb, xq, y, n, k, BYTES, OFF, kq_w_##T);                          \
	}
KQ_XQ0(q4_0, KN__Q4_0_BYTES, 8)
KQ_XQ0(q5_0, KN__Q5_0_BYTES, 16)
KQ_XQ0(q8_0, KN__Q8_0_BYTES, 0)

/* The K-quants' integer path (Q2_K .. Q6_K against Q8_K): x86/quant_avx2_k.h. */
#include "kernels/x86/quant_avx2_k.h"

/* gemm_xq, the same arithmetic for several x rows: x86/quant_avx2_mm.h. */
#include "kernels/x86/quant_avx2_mm.h"

/* IQ4_NL and IQ4_XS: decoders and integer path, x86/quant_avx2_iq4.h. */
#include "kernels/x86/quant_avx2_iq4.h"

/* ---- activations rounded for F16 / BF16 weights (round_x) -------------- */

static void kq_round_x_f16(const float *restrict x, float *restrict y, size_t k)
{
	size_t i = 0;
	for (; i + 8 <= k; i += 8) {
		__m256 v = _mm256_loadu_ps(x + i);
		_mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
	}
	for (; i < k; i++)
		y[i] = kq_round1_f16(x[i]);
}

/* Integer form of ggml_compute_fp32_to_bf16 on 8 lanes. */
static void kq_round_x_bf16(const float *restrict x, float *restrict y, size_t k)
{
	const __m256i lo = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
	const __m256i hi = _mm256_set1_epi32((int)0xffff0000u), quiet = _mm256_set1_epi32(0x00400000);
	size_t i = 0;
	for (; i + 8 <= k; i += 8) {
		__m256 v = _mm256_loadu_ps(x + i);
		__m256i u = _mm256_castps_si256(v);
		__m256i r = _mm256_add_epi32(u, _mm256_add_epi32(lo, _mm256_and_si256(_mm256_srli_epi32(u, 16), one)));
		__m256i q = _mm256_or_si256(u, quiet);
		__m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
		r = _mm256_and_si256(_mm256_blendv_epi8(r, q, nan), hi);
		_mm256_storeu_ps(y + i, _mm256_castsi256_ps(r));
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

const struct kn_qops kn__qops_avx2[KN_Q_MAX] = {
	KQ_ENTRY(KN_Q_F32, f32),
	KQ_ENTRY_RX(KN_Q_F16, f16),
	KQ_ENTRY_RX(KN_Q_BF16, bf16),
	KQ_ENTRY_W8(KN_Q_Q4_0, q4_0, q8_0),
	KQ_ENTRY_MM(KN_Q_Q4_1, q4_1, q8_1),
	KQ_ENTRY_W8(KN_Q_Q5_0, q5_0, q8_0),
	KQ_ENTRY_MM(KN_Q_Q5_1, q5_1, q8_1),
	KQ_ENTRY_MM(KN_Q_Q8_0, q8_0, q8_0),
	KQ_ENTRY_MM(KN_Q_Q2_K, q2_k, q8_k),
	KQ_ENTRY_MM(KN_Q_Q3_K, q3_k, q8_k),
	KQ_ENTRY_MM(KN_Q_Q4_K, q4_k, q8_k),
	KQ_ENTRY_MM(KN_Q_Q5_K, q5_k, q8_k),
	KQ_ENTRY_MM(KN_Q_Q6_K, q6_k, q8_k),
	KQ_ENTRY_W8(KN_Q_IQ4_NL, iq4_nl, q8_0),
	KQ_ENTRY_MM(KN_Q_IQ4_XS, iq4_xs, q8_k),
};
