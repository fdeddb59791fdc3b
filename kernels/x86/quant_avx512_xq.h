/* kernels/x86/quant_avx512_xq.h - the integer path (kn_quant.h quantize_x
 * and gemv_xq) of x86/quant_avx512.c. Not a public header: quant_avx512.c
 * includes it once, after its field helpers (kq_half, KQ_INLINE), and
 * x86/quant_avx512_mm.h (gemm_xq) follows it and uses its helpers.
 *
 * The integer path (x quantized to Q8_0 / Q8_1 / Q8_K once per product)
 * is ggml's vec_dot_<type>_q8_<0|1|K> idea in our own form: codes stay
 * int8/uint8 and meet x in vpdpbusd (u8 x s8, 4 products per int32 lane;
 * _0 and _1 types, two blocks per 512-bit vector) or vpmaddubsw then
 * vpdpwssd (K-quants: the pair sums times the sub-block's integer scale),
 * with AVX512-VNNI; without it the same kernels use vpmaddubsw + vpmaddwd
 * (the AVX-512BW form). Each is instantiated twice and chosen per call by
 * kn__has_avx512vnni(); quant_avx512.c is compiled with -mavx512vnni for
 * the VNNI instances only. Four rows per pass share each x load and its
 * unpacking (K-quants: x pairs regrouped to the weights' nibble order,
 * bsums); the float combine is one FMA per block (two per 64 elements for
 * the 32-element types) into a per-row vector.
 * Q4_1 and Q5_1 (w = d q + m) meet x quantized to Q8_1 (Q8_0 plus
 * s = d sum q, ggml's partner): their unsigned codes against x in the same
 * u8 x s8 dot, one FMA with d_w d_x per block and row, and m_w s_x summed
 * apart.
 */
#ifndef KN_X86_QUANT_AVX512_XQ_H
#define KN_X86_QUANT_AVX512_XQ_H

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

/* Software prefetch of the n bytes at p (lines of 64). The _0 types'
 * weights are streamed four rows at a time, row r at block i, so the
 * hardware prefetchers see four interleaved streams within a few KiB and
 * fall behind (measured: a third of the DRAM rate); each step asks for the
 * same position R rows further down, i.e. the next pass's data (the
 * K-quants, one row at a time, the same way with R = 1). Prefetches never
 * fault, past the matrix included. */
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

/* The two fp16 header fields (d, then m or s) of blocks A = a and B = b
 * (b_ok 0: B absent, zeros) as [d_A, m_A, d_B, m_B]: one vcvtph2ps. Q4_1,
 * Q5_1 and Q8_1 blocks all begin so. */
KQ_INLINE __m128 kq_dm2(const uint8_t *a, const uint8_t *b, int b_ok)
{
	uint64_t bits = kq_u32(a) | (b_ok ? (uint64_t)kq_u32(b) << 32 : 0);
	return _mm_cvtph_ps(_mm_cvtsi64_si128((long long)bits));
}

/* One _1 step's float part for a weight row: p = kq_dm2(w) kq_dm2(x)
 * lane by lane, [d_A d_xA, m_A s_xA, d_B d_xB, m_B s_xB]; the m s lanes
 * are added into *accm, the d products widened to [A x8, B x8] for
 * *acc += isum (d_w d_x). */
KQ_INLINE void kq_xq1_fma(__m512i isum, __m128 p, __m512 *acc, __m128 *accm)
{
	*accm = _mm_add_ps(*accm, p);
	__m512 d = _mm512_permutexvar_ps(
		_mm512_set_epi32(2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0),
		_mm512_castps128_ps512(p));
	*acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), d, *acc);
}

/* A _1 row's result: the lanes of acc plus the m s lanes (1, 3) of accm. */
KQ_INLINE float kq_hsum_1(__m512 acc, __m128 accm)
{
	return _mm512_reduce_add_ps(acc) + (_mm_cvtss_f32(_mm_movehdup_ps(accm)) +
					    _mm_cvtss_f32(_mm_shuffle_ps(accm, accm, 3)));
}

/* R rows (1 or 4) of q4_1 / q5_1 against Q8_1 x, two blocks per step, as
 * kq_xq0_rows; the blocks' mins enter as m_w s_x, summed apart per row
 * (kq_xq1_fma). */
KQ_INLINE void kq_xq1_rows(const uint8_t *w, size_t rb, const uint8_t *xq, float *y, size_t k,
			   int R, size_t bytes, kq_c2_fn cf, int vnni)
{
	__m512 acc[4];
	__m128 accm[4];
	for (int r = 0; r < R; r++) {
		acc[r] = _mm512_setzero_ps();
		accm[r] = _mm_setzero_ps();
	}
	size_t nb = k / KN__QK, pf = kq_pf_dist(R, rb);
	for (size_t i = 0; i < nb; i += 2) {
		int b_ok = i + 1 < nb;
		const uint8_t *xa = xq + i * KN__Q8_1X_BYTES, *xb = xa + KN__Q8_1X_BYTES;
		__m512i xv = kq_ld2x32(xa + 4, xb + 4, b_ok);
		__m128 xdm = kq_dm2(xa, xb, b_ok);
		for (int r = 0; r < R; r++) {
			const uint8_t *wb = w + (size_t)r * rb + i * bytes;
			kq_pf(wb + pf, 2 * bytes);
			__m512i isum = kq_dot_u8s8(_mm512_setzero_si512(), cf(wb, b_ok), xv, vnni);
			kq_xq1_fma(isum, _mm_mul_ps(kq_dm2(wb, wb + bytes, b_ok), xdm), &acc[r],
				   &accm[r]);
		}
	}
	for (int r = 0; r < R; r++)
		y[r] = kq_hsum_1(acc[r], accm[r]);
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

/* One K-quant weight block unpacked for the integer dot: its 256 codes in
 * X's order (q, unsigned), the int16 scale of every code pair (sc, the
 * pair's sub-block's), and its float scales. Filled once per block by
 * kq_wk_<type>, then met with any number of x blocks (kq_wk_combine):
 * gemv_xq with one, gemm_xq with several. */
struct kq_wk {
	__m512i q[4];
	__m512i sc[4];
	__m128i m16;  /* q4_K / q5_K: the 8 mins as int16 */
	__m256i sc16; /* q3_K / q6_K: the 16 scales as int16 (q3_K's less 32) */
	__m256i mn16; /* q2_K: the 16 mins as int16 */
	float d, dmin;
};

/* q4_K / q5_K (has_qh: q5_K) into K. */
KQ_INLINE void kq_wk_k45(const uint8_t *b, int has_qh, struct kq_wk *K)
{
	__m128i sc16;
	kq_k45_scales(b, &sc16, &K->m16);
	__m512i scb = _mm512_broadcast_i32x4(sc16);
	const uint8_t *qs = b + (has_qh ? 48 : 16);
	__m512i w0 = _mm512_loadu_si512(qs), w1 = _mm512_loadu_si512(qs + 64);
	__m512i m4 = _mm512_set1_epi8(0x0f);
	K->q[0] = _mm512_and_si512(w0, m4);
	K->q[1] = _mm512_and_si512(_mm512_srli_epi16(w0, 4), m4);
	K->q[2] = _mm512_and_si512(w1, m4);
	K->q[3] = _mm512_and_si512(_mm512_srli_epi16(w1, 4), m4);
	if (has_qh) { /* bit s of qh[l]: 16 into element l of sub-block s */
		__m512i h = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b + 16)));
		static const char sel[4][2] = {{1, 4}, {2, 8}, {16, 64}, {32, -128}};
		for (int g = 0; g < 4; g++) {
			__m512i bit = _mm512_inserti64x4(_mm512_set1_epi8(sel[g][0]),
							 _mm256_set1_epi8(sel[g][1]), 1);
			K->q[g] = _mm512_mask_add_epi8(K->q[g], _mm512_test_epi8_mask(h, bit), K->q[g],
						       _mm512_set1_epi8(0x10));
		}
	}
	K->sc[0] = _mm512_shuffle_epi8(scb, KQ_SEL16(0, 0, 2, 2));
	K->sc[1] = _mm512_shuffle_epi8(scb, KQ_SEL16(1, 1, 3, 3));
	K->sc[2] = _mm512_shuffle_epi8(scb, KQ_SEL16(4, 4, 6, 6));
	K->sc[3] = _mm512_shuffle_epi8(scb, KQ_SEL16(5, 5, 7, 7));
	K->d = kq_half(b);
	K->dmin = kq_half(b + 2);
}

/* The scale vectors sc[0], sc[1] of half h from 16 int16 scales, one per
 * 16 codes (q2_K, q3_K, q6_K): 128-bit lane L of sc[p] holds scale
 * 8h + 4p + L. */
KQ_INLINE void kq_wk_s16(__m256i sc16, int h, __m512i *sc)
{
	__m512i scb = _mm512_broadcast_i32x4(h ? _mm256_extracti128_si256(sc16, 1)
					       : _mm256_castsi256_si128(sc16));
	sc[0] = _mm512_shuffle_epi8(scb, KQ_SEL16(0, 1, 2, 3));
	sc[1] = _mm512_shuffle_epi8(scb, KQ_SEL16(4, 5, 6, 7));
}

/* Per-half int16 shift counts: a in the low 256 bits, b in the high. */
KQ_INLINE __m512i kq_cnt2(int a, int b)
{
	return _mm512_inserti64x4(_mm512_set1_epi16((short)a), _mm256_set1_epi16((short)b), 1);
}

/* q6_K into K: codes 0..63 (the -32 enters through the bsums). */
KQ_INLINE void kq_wk_q6_k(const uint8_t *b, struct kq_wk *K)
{
	K->sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + 192)));
	__m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
	for (int h = 0; h < 2; h++) {
		__m512i l = _mm512_loadu_si512(b + 64 * h);
		__m512i hh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b + 128 + 32 * h)));
		/* bits 2t, 2t+1 of qh to bits 4, 5: t = 0, 1 shift left 4, 2;
		 * t = 2, 3 right 0, 2 */
		__m512i h01 = _mm512_and_si512(_mm512_sllv_epi16(hh, kq_cnt2(4, 2)), m30);
		__m512i h23 = _mm512_and_si512(_mm512_srlv_epi16(hh, kq_cnt2(0, 2)), m30);
		K->q[2 * h] = _mm512_or_si512(_mm512_and_si512(l, m4), h01);
		K->q[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4), h23);
		kq_wk_s16(K->sc16, h, K->sc + 2 * h);
	}
	K->d = kq_half(b + 208);
	K->dmin = 0.0f;
}

/* q2_K into K: in half h, q[2h] holds groups t = 0, 1 (bits 0-1, 2-3 of
 * qs[32 h ..]) and q[2h + 1] t = 2, 3; each scale byte's low nibble
 * scales 16 codes, its high nibble is their min. */
KQ_INLINE void kq_wk_q2_k(const uint8_t *b, struct kq_wk *K)
{
	__m128i sb = _mm_loadu_si128((const __m128i *)b), m4 = _mm_set1_epi8(0x0f);
	K->sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sb, m4));
	K->mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sb, 4), m4));
	__m512i m3 = _mm512_set1_epi8(3);
	for (int h = 0; h < 2; h++) {
		__m512i qv = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b + 16 + 32 * h)));
		K->q[2 * h] = _mm512_and_si512(_mm512_srlv_epi16(qv, kq_cnt2(0, 2)), m3);
		K->q[2 * h + 1] = _mm512_and_si512(_mm512_srlv_epi16(qv, kq_cnt2(4, 6)), m3);
		kq_wk_s16(K->sc16, h, K->sc + 2 * h);
	}
	K->d = kq_half(b + 80);
	K->dmin = kq_half(b + 82);
}

/* q3_K into K: codes 0..7 for q + 4 (bits 2t, 2t + 1 of qs[32 h ..], bit
 * 4h + t of hmask[l] as bit 2), grouped as q2_K's; the sixteen 6-bit
 * scales less 32 (ref/quant.c kq_q3k_scales, four lanes at once). */
KQ_INLINE void kq_wk_q3_k(const uint8_t *b, struct kq_wk *K)
{
	K->sc16 = _mm256_sub_epi16(_mm256_cvtepu8_epi16(kq_q3k_scales16(b)), _mm256_set1_epi16(32));
	__m512i hm = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)b));
	__m512i m3 = _mm512_set1_epi8(3), four = _mm512_set1_epi8(4);
	for (int h = 0; h < 2; h++) {
		__m512i qv = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b + 32 + 32 * h)));
		for (int p = 0; p < 2; p++) {
			int j0 = 4 * h + 2 * p, j1 = j0 + 1; /* hmask bits to bit 2 */
			__m512i hb = _mm512_srlv_epi16(
				_mm512_sllv_epi16(hm, kq_cnt2(j0 < 2 ? 2 - j0 : 0, j1 < 2 ? 2 - j1 : 0)),
				kq_cnt2(j0 > 2 ? j0 - 2 : 0, j1 > 2 ? j1 - 2 : 0));
			__m512i l2 = _mm512_and_si512(_mm512_srlv_epi16(qv, kq_cnt2(4 * p, 4 * p + 2)), m3);
			K->q[2 * h + p] = _mm512_or_si512(l2, _mm512_and_si512(hb, four));
		}
		kq_wk_s16(K->sc16, h, K->sc + 2 * h);
	}
	K->d = kq_half(b + 108);
	K->dmin = 0.0f;
}

/* An unpacked block K (kind 2..6: q2_K .. q6_K) against X: *acc +=
 * d_w d_x isum; q4_K / q5_K also *accm += dmin_w d_x (mins . bs8), q2_K
 * *accm += dmin_w d_x (mins . bs16) (four lanes); q3_K / q6_K start isum
 * at -4 / -32 sum sc bsum, since sum sc (q - c) x = sum sc q x - c sum sc
 * bsum. */
KQ_INLINE void kq_wk_combine(const struct kq_wk *K, int kind, const struct kq_xk *X, __m512 *acc,
			     __m128 *accm, int vnni)
{
	__m512i isum = _mm512_setzero_si512();
	if (kind == 3 || kind == 6)
		isum = _mm512_sub_epi32(isum, _mm512_zextsi256_si512(_mm256_slli_epi32(
						      _mm256_madd_epi16(K->sc16, X->bs16),
						      kind == 6 ? 5 : 2)));
	for (int g = 0; g < 4; g++)
		isum = kq_dot_i16(isum, _mm512_maddubs_epi16(K->q[g], X->x[g]), K->sc[g], vnni);
	*acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(K->d * X->d), *acc);
	if (kind == 4 || kind == 5) {
		*accm = _mm_fmadd_ps(_mm_cvtepi32_ps(_mm_madd_epi16(K->m16, X->bs8)),
				     _mm_set1_ps(K->dmin * X->d), *accm);
	} else if (kind == 2) {
		__m256i m8 = _mm256_madd_epi16(K->mn16, X->bs16);
		__m128i m = _mm_add_epi32(_mm256_castsi256_si128(m8), _mm256_extracti128_si256(m8, 1));
		*accm = _mm_fmadd_ps(_mm_cvtepi32_ps(m), _mm_set1_ps(K->dmin * X->d), *accm);
	}
}

/* One weight block (kind 2..6: q2_K .. q6_K) into K. */
KQ_INLINE void kq_wk(const uint8_t *b, int kind, struct kq_wk *K)
{
	switch (kind) {
	case 2: kq_wk_q2_k(b, K); break;
	case 3: kq_wk_q3_k(b, K); break;
	case 6: kq_wk_q6_k(b, K); break;
	default: kq_wk_k45(b, kind == 5, K); break;
	}
}

/* A row's result from its K-quant accumulators: the lanes of acc less
 * those of accm, in one fixed order. */
KQ_INLINE float kq_hsum_k(__m512 acc, __m128 accm)
{
	__m128 m = _mm_add_ps(accm, _mm_movehl_ps(accm, accm));
	m = _mm_add_ss(m, _mm_movehdup_ps(m));
	return _mm512_reduce_add_ps(acc) - _mm_cvtss_f32(m);
}

typedef void (*kq_xk_fn)(const uint8_t *xb, struct kq_xk *X);

/* One row of a K-quant, block by block. Rows one after the other, not 4
 * at a time with each Q8_K block of x unpacked once for the 4 (the same
 * sums in the same order either way): 4 rows met a block at a time were
 * 4 streams from memory, which the prefetches above did not make up for:
 * Gemma 3's Q6_K ffn_down (640 rows of 1680 bytes) in a decode step's
 * pool run on 2 threads took 59-69 us (16-18 GB/s), one row at a time
 * 37-46 (23-29 GB/s). */
KQ_INLINE float kq_xqk_row(const uint8_t *w, size_t rb, const uint8_t *xq, size_t k,
			   size_t bytes, kq_xk_fn xf, int kind, int vnni)
{
	__m512 acc = _mm512_setzero_ps();
	__m128 accm = _mm_setzero_ps();
	size_t pf = kq_pf_dist(1, rb);
	for (size_t i = 0; i < k / KN__QK_K; i++) {
		struct kq_xk X;
		struct kq_wk K;
		xf(xq + i * KN__Q8_K_BYTES, &X);
		kq_pf(w + i * bytes + pf, bytes);
		kq_wk(w + i * bytes, kind, &K);
		kq_wk_combine(&K, kind, &X, &acc, &accm, vnni);
	}
	return kq_hsum_k(acc, accm);
}

KQ_INLINE void kq_xqk(const void *W, size_t rb, const void *xq, float *y, size_t n_rows,
		      size_t k, size_t bytes, kq_xk_fn xf, int kind, int vnni)
{
	const uint8_t *w = W;
	for (size_t r = 0; r < n_rows; r++)
		y[r] = kq_xqk_row(w + r * rb, rb, xq, k, bytes, xf, kind, vnni);
}

/* Each type's gemv_xq in two instantiations (VNNI and AVX-512BW) of the
 * row loop F (its extra arguments ..., then vnni), picked per call by
 * kn__has_avx512vnni(). */
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

KQ_XQ_FNS(q4_0, kq_xq0, KN__Q4_0_BYTES, 8, kq_w2_q4_0)
KQ_XQ_FNS(q5_0, kq_xq0, KN__Q5_0_BYTES, 16, kq_w2_q5_0)
KQ_XQ_FNS(q8_0, kq_xq0, KN__Q8_0_BYTES, 0, kq_w2_q8_0)
KQ_XQ_FNS(q4_1, kq_xq1, KN__Q4_1_BYTES, kq_c2_q4_1)
KQ_XQ_FNS(q5_1, kq_xq1, KN__Q5_1_BYTES, kq_c2_q5_1)
KQ_XQ_FNS(q2_k, kq_xqk, KN__Q2_K_BYTES, kq_xk_q6, 2)
KQ_XQ_FNS(q3_k, kq_xqk, KN__Q3_K_BYTES, kq_xk_q6, 3)
KQ_XQ_FNS(q4_k, kq_xqk, KN__Q4_K_BYTES, kq_xk_k45, 4)
KQ_XQ_FNS(q5_k, kq_xqk, KN__Q5_K_BYTES, kq_xk_k45, 5)
KQ_XQ_FNS(q6_k, kq_xqk, KN__Q6_K_BYTES, kq_xk_q6, 6)

#endif /* KN_X86_QUANT_AVX512_XQ_H */
