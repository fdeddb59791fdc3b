/* kernels/x86/quant_avx2_iq4.h - IQ4_NL and IQ4_XS (kn_quant.h) for AVX2:
 * the decoders for dequant and gemv, and the integer path (gemv_xq,
 * gemm_xq). Not a public header: x86/quant_avx2.c includes it once, after
 * quant_avx2_mm.h, whose helpers (kq_ld16, kq_nib, kq_i8_ps, kq_nib32,
 * kq_dot_u8s8, kq_pf, kq_pf_dist, kq_hsum, kq_xq0, kq_mm32) it uses.
 *
 * Both types store 4-bit indices into one 16-value codebook
 * (kn__iq4nl_values), looked up with vpshufb. The values are signed
 * (-127..113), so the integer dot takes |v| against x with v's signs
 * (vpsignb), as Q8_0 does: IQ4_NL is then a Q8_0-like 32-element type
 * against Q8_0 x (the same kq_xq0 / kq_mm32 loops, and to_q8_0 widening,
 * which is exact: the codes are int8 values). IQ4_XS (256 elements, a
 * 6-bit scale per 32) meets Q8_K x: per sub-block the vpmaddubsw pair sums
 * times its scale (ls - 32) by vpmaddwd, exact in int32, then one FMA per
 * block with d_w d_x, as the K-quants do.
 */
#ifndef KN_X86_QUANT_AVX2_IQ4_H
#define KN_X86_QUANT_AVX2_IQ4_H

/* The codebook in both 128-bit lanes, for vpshufb. */
KQ_INLINE __m256i kq_iq4_lut(void)
{
	return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kn__iq4nl_values));
}

/* ---- decoders (dequant, gemv): ref/quant.c's arithmetic ----------------- */

/* 16 codes at qs (low nibbles, then high) as 32 floats times d. */
KQ_INLINE void kq_dq_iq4(const uint8_t *qs, __m256 d, __m256 *w)
{
	__m128i lut = _mm256_castsi256_si128(kq_iq4_lut()), q = kq_ld16(qs);
	kq_i8_ps(_mm_shuffle_epi8(lut, kq_nib(q, 0)), d, w);
	kq_i8_ps(_mm_shuffle_epi8(lut, kq_nib(q, 4)), d, w + 2);
}

KQ_INLINE void kq_dq_iq4_nl(const uint8_t *b, int s, __m256 *w)
{
	(void)s;
	kq_dq_iq4(b + 2, _mm256_set1_ps(kq_half(b)), w);
}

KQ_INLINE void kq_dq_iq4_xs(const uint8_t *b, int s, __m256 *w)
{
	kq_dq_iq4(b + 8 + 16 * s, _mm256_set1_ps(kq_half(b) * (float)kq_iq4xs_sc(b, s)), w);
}

/* ---- IQ4_NL against Q8_0 x ---------------------------------------------- */

/* kq_w_<type> and kq_mc_<type> (quant_avx2.c, quant_avx2_mm.h) for IQ4_NL:
 * |v| against x with v's signs. */
KQ_INLINE __m256i kq_w_iq4_nl(const uint8_t *b, __m256i x, __m256i *xs)
{
	__m256i v = _mm256_shuffle_epi8(kq_iq4_lut(), kq_nib32(b + 2));
	*xs = _mm256_sign_epi8(x, v);
	return _mm256_abs_epi8(v);
}

KQ_INLINE __m256i kq_mc_iq4_nl(const uint8_t *b, __m256i *raw)
{
	*raw = _mm256_shuffle_epi8(kq_iq4_lut(), kq_nib32(b + 2));
	return _mm256_abs_epi8(*raw);
}

KQ_XQ0(iq4_nl, KN__IQ4_NL_BYTES, 0)
KQ_MM32(iq4_nl, KN__IQ4_NL_BYTES, KN__Q8_0X_BYTES, 0)

static void kq_to_q8_0_iq4_nl(const void *restrict src, void *restrict dst, size_t n_blocks)
{
	kq_to_q8_0(src, dst, n_blocks, KN__IQ4_NL_BYTES, kq_mc_iq4_nl);
}

/* ---- IQ4_XS against Q8_K x ---------------------------------------------- */

/* One IQ4_XS block unpacked for the integer dot: per sub-block its codes'
 * |v| (a), the codes themselves for x's signs (v), its scale less 32 as
 * int16 (sc); and d. Filled once, met with one x block (gemv_xq) or
 * several (gemm_xq). */
struct kq_w4x {
	__m256i a[8], v[8], sc[8];
	float d;
};

KQ_INLINE void kq_w4x_unpack(const uint8_t *b, struct kq_w4x *W)
{
	__m256i lut = kq_iq4_lut();
	for (int s = 0; s < 8; s++) {
		W->v[s] = _mm256_shuffle_epi8(lut, kq_nib32(b + 8 + 16 * s));
		W->a[s] = _mm256_abs_epi8(W->v[s]);
		W->sc[s] = _mm256_set1_epi16((short)kq_iq4xs_sc(b, s));
	}
	W->d = kq_half(b);
}

/* *acc += isum (d_w d_x), isum = sum_s sc_s (v_s . x_s) (exact). */
KQ_INLINE void kq_w4x_combine(const struct kq_w4x *W, const uint8_t *xb, __m256 *acc)
{
	__m256i isum = _mm256_setzero_si256();
	for (int s = 0; s < 8; s++) {
		__m256i x = _mm256_loadu_si256((const __m256i *)(xb + 4 + 32 * s));
		__m256i p = _mm256_maddubs_epi16(W->a[s], _mm256_sign_epi8(x, W->v[s]));
		isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, W->sc[s]));
	}
	float xd;
	memcpy(&xd, xb, sizeof(xd));
	*acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(W->d * xd), *acc);
}

/* R weight rows (1 or 4) against NX x rows (1..4) over the whole width:
 * each weight block unpacked once for the NX x rows. gemv_xq is NX = 1. */
KQ_INLINE void kq_iq4xs_rows(const uint8_t *w, size_t rb, const uint8_t *xq, size_t xs,
			     float *y, size_t ldy, size_t k, int R, int NX)
{
	__m256 acc[4][4];
	for (int r = 0; r < R; r++)
		for (int j = 0; j < NX; j++)
			acc[r][j] = _mm256_setzero_ps();
	size_t pf = kq_pf_dist(R, rb);
	for (size_t i = 0; i < k / KN__QK_K; i++)
		for (int r = 0; r < R; r++) {
			const uint8_t *b = w + (size_t)r * rb + i * KN__IQ4_XS_BYTES;
			kq_pf(b + pf, KN__IQ4_XS_BYTES);
			struct kq_w4x W;
			kq_w4x_unpack(b, &W);
			for (int j = 0; j < NX; j++)
				kq_w4x_combine(&W, xq + (size_t)j * xs + i * KN__Q8_K_BYTES, &acc[r][j]);
		}
	for (int r = 0; r < R; r++)
		for (int j = 0; j < NX; j++)
			y[(size_t)j * ldy + r] = kq_hsum(acc[r][j]);
}

KQ_INLINE void kq_iq4xs_nx(const uint8_t *w, size_t rb, const uint8_t *xq, size_t xs, int NX,
			   float *y, size_t ldy, size_t n_rows, size_t k)
{
	size_t r = 0;
	for (; r + 4 <= n_rows; r += 4)
		kq_iq4xs_rows(w + r * rb, rb, xq, xs, y + r, ldy, k, 4, NX);
	for (; r < n_rows; r++)
		kq_iq4xs_rows(w + r * rb, rb, xq, xs, y + r, ldy, k, 1, NX);
}

static void kq_gemv_xq_iq4_xs(const void *restrict W, size_t rb, const void *restrict xq,
			      float *restrict y, size_t n_rows, size_t k)
{
	kq_iq4xs_nx(W, rb, xq, 0, 1, y, 0, n_rows, k);
}

static void kq_gemm_xq_iq4_xs(const void *restrict W, size_t rb, const void *restrict xq,
			      size_t xs, size_t n_x, float *restrict y, size_t ldy, size_t n_rows,
			      size_t k)
{
	const uint8_t *x = xq;
	for (size_t j = 0; j < n_x; j += 4) {
		const uint8_t *xj = x + j * xs;
		float *yj = y + j * ldy;
		switch (n_x - j >= 4 ? 4 : (int)(n_x - j)) {
		case 4: kq_iq4xs_nx(W, rb, xj, xs, 4, yj, ldy, n_rows, k); break;
		case 3: kq_iq4xs_nx(W, rb, xj, xs, 3, yj, ldy, n_rows, k); break;
		case 2: kq_iq4xs_nx(W, rb, xj, xs, 2, yj, ldy, n_rows, k); break;
		default: kq_iq4xs_nx(W, rb, xj, xs, 1, yj, ldy, n_rows, k); break;
		}
	}
}

#endif /* KN_X86_QUANT_AVX2_IQ4_H */
