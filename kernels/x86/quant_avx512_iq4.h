/* kernels/x86/quant_avx512_iq4.h - IQ4_NL and IQ4_XS (kn_quant.h) for
 * AVX-512: the decoders for dequant and gemv, and the integer path
 * (gemv_xq, gemm_xq). Not a public header: x86/quant_avx512.c includes it
 * once, after quant_avx512_mm.h, whose helpers (kq_ld16, kq_nib, kq_i8_ps,
 * kq_nib2, kq_dot_u8s8, kq_dot_i16, kq_pf, kq_pf_dist, kq_xq0, kq_gemm0,
 * KQ_XQ_FNS, KQ_MM_FNS) it uses.
 *
 * The codes are 4-bit indices into the signed codebook kn__iq4nl_values,
 * looked up with vpshufb; the integer dot takes |v| against x negated
 * where v < 0 (as Q8_0 does, x86/quant_avx512_xq.h kq_w2_q8_0). IQ4_NL is
 * then a Q8_0-like 32-element type against Q8_0 x, two blocks per vector
 * (kq_xq0, kq_gemm0). IQ4_XS (256 elements, a 6-bit scale per 32) meets
 * Q8_K x: two sub-blocks per vector, their vpmaddubsw pair sums times the
 * sub-blocks' scales (ls - 32) by vpdpwssd, exact in int32, then one FMA
 * per block with d_w d_x.
 */
#ifndef KN_X86_QUANT_AVX512_IQ4_H
#define KN_X86_QUANT_AVX512_IQ4_H

/* The codebook in every 128-bit lane, for vpshufb. */
KQ_INLINE __m512i kq_iq4_lut(void)
{
	return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)kn__iq4nl_values));
}

/* ---- decoders (dequant, gemv): ref/quant.c's arithmetic ----------------- */

/* 16 codes at qs (low nibbles: lo, high: hi) times d. */
KQ_INLINE void kq_dq_iq4(const uint8_t *qs, __m512 d, __m512 *lo, __m512 *hi)
{
	__m128i lut = _mm512_castsi512_si128(kq_iq4_lut()), q = kq_ld16(qs);
	*lo = _mm512_mul_ps(kq_i8_ps(_mm_shuffle_epi8(lut, kq_nib(q, 0))), d);
	*hi = _mm512_mul_ps(kq_i8_ps(_mm_shuffle_epi8(lut, kq_nib(q, 4))), d);
}

KQ_INLINE void kq_dq_iq4_nl(const uint8_t *b, int s, __m512 *lo, __m512 *hi)
{
	(void)s;
	kq_dq_iq4(b + 2, _mm512_set1_ps(kq_half(b)), lo, hi);
}

KQ_INLINE void kq_dq_iq4_xs(const uint8_t *b, int s, __m512 *lo, __m512 *hi)
{
	kq_dq_iq4(b + 8 + 16 * s, _mm512_set1_ps(kq_half(b) * (float)kq_iq4xs_sc(b, s)), lo, hi);
}

/* ---- IQ4_NL against Q8_0 x ---------------------------------------------- */

/* kq_w2_<type> for IQ4_NL: the codes of blocks A = w, B = w + bytes (b_ok)
 * as |v|, x negated where v < 0 (*xs). */
KQ_INLINE __m512i kq_w2_iq4_nl(const uint8_t *w, int b_ok, __m512i x, __m512i *xs)
{
	__m512i v = _mm512_shuffle_epi8(kq_iq4_lut(), kq_nib2(w + 2, w + KN__IQ4_NL_BYTES + 2, b_ok));
	*xs = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(v), _mm512_setzero_si512(), x);
	return _mm512_abs_epi8(v);
}

KQ_XQ_FNS(iq4_nl, kq_xq0, KN__IQ4_NL_BYTES, 0, kq_w2_iq4_nl)
KQ_MM_FNS(iq4_nl, kq_gemm0, KN__IQ4_NL_BYTES, 0, kq_w2_iq4_nl)

/* ---- IQ4_XS against Q8_K x ---------------------------------------------- */

/* One IQ4_XS block unpacked for the integer dot, two sub-blocks (2g,
 * 2g + 1) per vector in x's order: |v| (a), where v < 0 (neg), the
 * sub-blocks' scales less 32 as int16 (sc: the first 16 lanes 2g's, the
 * rest 2g + 1's); and d. Filled once, met with one x block (gemv_xq) or
 * several (gemm_xq). */
struct kq_w4x {
	__m512i a[4], sc[4];
	__mmask64 neg[4];
	float d;
};

KQ_INLINE void kq_w4x_unpack(const uint8_t *b, struct kq_w4x *W)
{
	__m512i lut = kq_iq4_lut();
	for (int g = 0; g < 4; g++) {
		const uint8_t *qs = b + 8 + 32 * g;
		__m512i v = _mm512_shuffle_epi8(lut, kq_nib2(qs, qs + 16, 1));
		W->a[g] = _mm512_abs_epi8(v);
		W->neg[g] = _mm512_movepi8_mask(v);
		W->sc[g] = _mm512_inserti64x4(_mm512_set1_epi16((short)kq_iq4xs_sc(b, 2 * g)),
					      _mm256_set1_epi16((short)kq_iq4xs_sc(b, 2 * g + 1)), 1);
	}
	W->d = kq_half(b);
}

/* *acc += isum (d_w d_x), isum = sum_s sc_s (v_s . x_s) (exact). */
KQ_INLINE void kq_w4x_combine(const struct kq_w4x *W, const uint8_t *xb, __m512 *acc, int vnni)
{
	__m512i isum = _mm512_setzero_si512();
	for (int g = 0; g < 4; g++) {
		__m512i x = _mm512_loadu_si512(xb + 4 + 64 * g);
		x = _mm512_mask_sub_epi8(x, W->neg[g], _mm512_setzero_si512(), x);
		isum = kq_dot_i16(isum, _mm512_maddubs_epi16(W->a[g], x), W->sc[g], vnni);
	}
	float xd;
	memcpy(&xd, xb, sizeof(xd));
	*acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(W->d * xd), *acc);
}

/* R weight rows (1 or 4) against NX x rows (1..4) over the whole width:
 * each weight block unpacked once for the NX x rows. gemv_xq is NX = 1. */
KQ_INLINE void kq_iq4xs_rows(const uint8_t *w, size_t rb, const uint8_t *xq, size_t xs,
			     float *y, size_t ldy, size_t k, int R, int NX, size_t bytes, int vnni)
{
	__m512 acc[4][4];
	for (int r = 0; r < R; r++)
		for (int j = 0; j < NX; j++)
			acc[r][j] = _mm512_setzero_ps();
	size_t pf = kq_pf_dist(R, rb);
	for (size_t i = 0; i < k / KN__QK_K; i++)
		for (int r = 0; r < R; r++) {
			const uint8_t *b = w + (size_t)r * rb + i * bytes;
			kq_pf(b + pf, bytes);
			struct kq_w4x W;
			kq_w4x_unpack(b, &W);
			for (int j = 0; j < NX; j++)
				kq_w4x_combine(&W, xq + (size_t)j * xs + i * KN__Q8_K_BYTES, &acc[r][j],
					       vnni);
		}
	for (int r = 0; r < R; r++)
		for (int j = 0; j < NX; j++)
			y[(size_t)j * ldy + r] = _mm512_reduce_add_ps(acc[r][j]);
}

KQ_INLINE void kq_iq4xs_nx(const uint8_t *w, size_t rb, const uint8_t *xq, size_t xs, int NX,
			   float *y, size_t ldy, size_t n_rows, size_t k, size_t bytes, int vnni)
{
	size_t r = 0;
	for (; r + 4 <= n_rows; r += 4)
		kq_iq4xs_rows(w + r * rb, rb, xq, xs, y + r, ldy, k, 4, NX, bytes, vnni);
	for (; r < n_rows; r++)
		kq_iq4xs_rows(w + r * rb, rb, xq, xs, y + r, ldy, k, 1, NX, bytes, vnni);
}

/* gemv_xq (one x row) and gemm_xq in the KQ_XQ_FNS / KQ_MM_FNS shapes
 * (bytes: the block size, KN__IQ4_XS_BYTES). */
KQ_INLINE void kq_iq4xs_gemv(const void *W, size_t rb, const void *xq, float *y, size_t n_rows,
			     size_t k, size_t bytes, int vnni)
{
	kq_iq4xs_nx(W, rb, xq, 0, 1, y, 0, n_rows, k, bytes, vnni);
}

KQ_INLINE void kq_iq4xs_gemm(const void *W, size_t rb, const void *xq, size_t xs, size_t n_x,
			     float *y, size_t ldy, size_t n_rows, size_t k, size_t bytes, int vnni)
{
	const uint8_t *x = xq;
	for (size_t j = 0; j < n_x; j += 4) {
		const uint8_t *xj = x + j * xs;
		float *yj = y + j * ldy;
		switch (n_x - j >= 4 ? 4 : (int)(n_x - j)) {
		case 4: kq_iq4xs_nx(W, rb, xj, xs, 4, yj, ldy, n_rows, k, bytes, vnni); break;
		case 3: kq_iq4xs_nx(W, rb, xj, xs, 3, yj, ldy, n_rows, k, bytes, vnni); break;
		case 2: kq_iq4xs_nx(W, rb, xj, xs, 2, yj, ldy, n_rows, k, bytes, vnni); break;
		default: kq_iq4xs_nx(W, rb, xj, xs, 1, yj, ldy, n_rows, k, bytes, vnni); break;
		}
	}
}

KQ_XQ_FNS(iq4_xs, kq_iq4xs_gemv, KN__IQ4_XS_BYTES)
KQ_MM_FNS(iq4_xs, kq_iq4xs_gemm, KN__IQ4_XS_BYTES)

#endif /* KN_X86_QUANT_AVX512_IQ4_H */
