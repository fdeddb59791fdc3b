/* kernels/x86/quant_avx2_mm.h - gemm_xq (kn_quant.h) for AVX2: the integer
 * path of x86/quant_avx2.c for several quantized x rows at once. Not a
 * public header: x86/quant_avx2.c includes it once, after its gemv_xq
 * kernels, whose helpers (kq_dot_u8s8, kq_nib32, kq_bits32_x10, kq_u32,
 * kq_c_q4_1, kq_c_q5_1, kq_half, kq_hsum, kq_scales, kq_pf, kq_pf_dist; from
 * x86/quant_avx2_k.h the K-quant unpacking struct kq_wk, kq_wk_unpack,
 * kq_wk_combine, kq_hsum_k) it uses.
 *
 * Each weight block is read and unpacked once for up to four x rows (the
 * multi-row idea of llamafile's tinyBLAS and of ggml's repacked GEMMs, in
 * our own form), and every (weight row, x row) pair then does exactly the
 * operations gemv_xq does for it, in the same order: the same integer dot
 * products (their sums are exact, so how they are grouped cannot matter),
 * one float FMA per block into the pair's own accumulator, the same lane
 * sum. So gemm_xq equals gemv_xq row by row bit for bit, which
 * tests/unit/kernels/test_quant.c checks for every type.
 *
 * Blocking (16 ymm registers): _0 and _1 types two weight rows by four x
 * rows (eight accumulators), one block per step; K-quants one weight row
 * by four x rows, each block's 256 codes and their scale vectors unpacked
 * once (struct kq_wk, x86/quant_avx2.c, which gemv_xq uses too) for the
 * four x rows.
 */
#ifndef KN_X86_QUANT_AVX2_MM_H
#define KN_X86_QUANT_AVX2_MM_H

/* The 32-element types' pass: KQ_MM_R weight rows by KQ_MM_NX x rows
 * (measured on a 2-core EPYC, family 23: 2 x 4 beat 4 x 2, 3 x 4, 4 x 4
 * and 2 x 3, by 5 to 40 %). KQ_MM_NX is at most 4. */
#define KQ_MM_R 2
#define KQ_MM_NX 4

/* ---- 32-element types: q4_0, q5_0, q8_0 (Q8_0 x), q4_1, q5_1 (Q8_1 x) -- */

/* The codes of one block as |w| (unsigned) and raw = w with its sign:
 * the _0 types' codes less their offset (8, 16), so that x takes w's
 * signs (vpsignb) and the offset needs no x sums: the integer dot, lane
 * by lane, is gemv_xq's (sum (q - off) x = sum q x - off sum x, exactly).
 * Q4_1 / Q5_1: the unsigned codes, raw unused. */
KQ_INLINE __m256i kq_mc_q4_0(const uint8_t *b, __m256i *raw)
{
	*raw = _mm256_sub_epi8(kq_nib32(b + 2), _mm256_set1_epi8(8));
	return _mm256_abs_epi8(*raw);
}

KQ_INLINE __m256i kq_mc_q5_0(const uint8_t *b, __m256i *raw)
{
	*raw = _mm256_sub_epi8(_mm256_or_si256(kq_nib32(b + 6), kq_bits32_x10(kq_u32(b + 2))),
			       _mm256_set1_epi8(16));
	return _mm256_abs_epi8(*raw);
}

KQ_INLINE __m256i kq_mc_q8_0(const uint8_t *b, __m256i *raw)
{
	*raw = _mm256_loadu_si256((const __m256i *)(b + 2));
	return _mm256_abs_epi8(*raw);
}

KQ_INLINE __m256i kq_mc_q4_1(const uint8_t *b, __m256i *raw)
{
	*raw = _mm256_setzero_si256();
	return kq_c_q4_1(b);
}

KQ_INLINE __m256i kq_mc_q5_1(const uint8_t *b, __m256i *raw)
{
	*raw = _mm256_setzero_si256();
	return kq_c_q5_1(b);
}

typedef __m256i (*kq_mc_fn)(const uint8_t *b, __m256i *raw);

/* R weight rows (1 or 2) against NX x rows (1..4) over the whole width.
 * The x format is Q8_0 (xb = 34: d @0, codes @2) or Q8_1 (xb = 36: d @0,
 * s @2, codes @4; `one` set: the rows' mins meet s, summed apart as
 * kq_xq1_rows does; otherwise x takes the signs of the _0 types' codes).
 * Per pair, kq_xq0_rows' or kq_xq1_rows' arithmetic. */
KQ_INLINE void kq_mm32_rows(const uint8_t *w, size_t rb, const uint8_t *xq, size_t xs, float *y,
			    size_t ldy, size_t k, int R, int NX, size_t bytes, size_t xb, int one,
			    kq_mc_fn cf)
{
	__m256 acc[KQ_MM_R][KQ_MM_NX];
	float accm[KQ_MM_R][KQ_MM_NX];
	for (int r = 0; r < R; r++)
		for (int j = 0; j < NX; j++) {
			acc[r][j] = _mm256_setzero_ps();
			accm[r][j] = 0.0f;
		}
	size_t pf = kq_pf_dist(R, rb);
	for (size_t i = 0; i < k / KN__QK; i++) {
		__m256i q[KQ_MM_R], raw[KQ_MM_R];
		float dx[KQ_MM_R][4], mx[KQ_MM_R][4]; /* d_w d_x, m_w s_x per pair */
		const uint8_t *x0 = xq + i * xb;
		for (int r = 0; r < R; r++) {
			const uint8_t *b = w + (size_t)r * rb + i * bytes;
			if (!(i & 1))
				kq_pf(b + pf, 2 * bytes);
			q[r] = cf(b, &raw[r]);
			kq_scales(x0, xs, NX, kq_half(b), dx[r]);
			if (one)
				kq_scales(x0 + 2, xs, NX, kq_half(b + 2), mx[r]);
		}
		for (int j = 0; j < NX; j++) {
			__m256i xv = _mm256_loadu_si256((const __m256i *)(x0 + (size_t)j * xs + (one ? 4 : 2)));
			for (int r = 0; r < R; r++) {
				__m256i xsv = !one ? _mm256_sign_epi8(xv, raw[r]) : xv;
				__m256i isum = kq_dot_u8s8(_mm256_setzero_si256(), q[r], xsv);
				acc[r][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum),
							    _mm256_broadcast_ss(&dx[r][j]), acc[r][j]);
				if (one)
					accm[r][j] += mx[r][j];
			}
		}
	}
	for (int r = 0; r < R; r++)
		for (int j = 0; j < NX; j++)
			y[(size_t)j * ldy + r] = one ? kq_hsum(acc[r][j]) + accm[r][j] : kq_hsum(acc[r][j]);
}

/* NX x rows (a constant in each call) against every weight row. */
KQ_INLINE void kq_mm32_nx(const uint8_t *w, size_t rb, const uint8_t *xq, size_t xs, int NX,
			  float *y, size_t ldy, size_t n_rows, size_t k, size_t bytes, size_t xb,
			  int one, kq_mc_fn cf)
{
	size_t r = 0;
	for (; r + KQ_MM_R <= n_rows; r += KQ_MM_R)
		kq_mm32_rows(w + r * rb, rb, xq, xs, y + r, ldy, k, KQ_MM_R, NX, bytes, xb, one,
			     cf);
	for (; r < n_rows; r++)
		kq_mm32_rows(w + r * rb, rb, xq, xs, y + r, ldy, k, 1, NX, bytes, xb, one,
			     cf);
}

KQ_INLINE void kq_mm32(const void *W, size_t rb, const void *xq, size_t xs, size_t n_x, float *y,
		       size_t ldy, size_t n_rows, size_t k, size_t bytes, size_t xb, int one,
		       kq_mc_fn cf)
{
	const uint8_t *w = W, *x = xq;
	for (size_t j = 0; j < n_x; j += KQ_MM_NX) {
		const uint8_t *xj = x + j * xs;
		float *yj = y + j * ldy;
		switch (n_x - j >= KQ_MM_NX ? KQ_MM_NX : (int)(n_x - j)) {
		case 4: kq_mm32_nx(w, rb, xj, xs, 4, yj, ldy, n_rows, k, bytes, xb, one, cf); break;
		case 3: kq_mm32_nx(w, rb, xj, xs, 3, yj, ldy, n_rows, k, bytes, xb, one, cf); break;
		case 2: kq_mm32_nx(w, rb, xj, xs, 2, yj, ldy, n_rows, k, bytes, xb, one, cf); break;
		default: kq_mm32_nx(w, rb, xj, xs, 1, yj, ldy, n_rows, k, bytes, xb, one, cf); break;
		}
	}
}

/* ---- K-quants: q4_K, q5_K, q6_K against Q8_K x ------------------------- */

/* One weight row (kind 2..6: q2_K .. q6_K) against NX x rows: per block
 * the codes are unpacked once (kq_wk_unpack), then each x row gets
 * kq_blk_<type>'s integer sum and float combine (kq_wk_combine). */
KQ_INLINE void kq_mmk_row(const uint8_t *w, const uint8_t *xq, size_t xs, float *y, size_t ldy,
			  size_t k, int NX, size_t bytes, int kind, size_t pf)
{
	__m256 acc[4];
	__m128 accm[4];
	for (int j = 0; j < NX; j++) {
		acc[j] = _mm256_setzero_ps();
		accm[j] = _mm_setzero_ps();
	}
	for (size_t i = 0; i < k / KN__QK_K; i++) {
		const uint8_t *wb = w + i * bytes;
		kq_pf(wb + pf, bytes);
		struct kq_wk K;
		kq_wk_unpack(wb, kind, &K);
		for (int j = 0; j < NX; j++)
			kq_wk_combine(&K, kind, xq + (size_t)j * xs + i * KN__Q8_K_BYTES, &acc[j],
				      &accm[j]);
	}
	for (int j = 0; j < NX; j++)
		y[(size_t)j * ldy] = kq_hsum_k(acc[j], accm[j]);
}

KQ_INLINE void kq_mmk(const void *W, size_t rb, const void *xq, size_t xs, size_t n_x, float *y,
		      size_t ldy, size_t n_rows, size_t k, size_t bytes, int kind)
{
	const uint8_t *w = W, *x = xq;
	size_t pf = kq_pf_dist(1, rb);
	for (size_t j = 0; j < n_x; j += 4) {
		const uint8_t *xj = x + j * xs;
		float *yj = y + j * ldy;
		int nx = n_x - j >= 4 ? 4 : (int)(n_x - j);
		for (size_t r = 0; r < n_rows; r++)
			switch (nx) {
			case 4: kq_mmk_row(w + r * rb, xj, xs, yj + r, ldy, k, 4, bytes, kind, pf); break;
			case 3: kq_mmk_row(w + r * rb, xj, xs, yj + r, ldy, k, 3, bytes, kind, pf); break;
			case 2: kq_mmk_row(w + r * rb, xj, xs, yj + r, ldy, k, 2, bytes, kind, pf); break;
			default: kq_mmk_row(w + r * rb, xj, xs, yj + r, ldy, k, 1, bytes, kind, pf); break;
			}
	}
}

/* ---- Q4_0 / Q5_0 tiles widened to Q8_0 (kn_quant.h to_q8_0) -------------- */

/* kq_mc_<type>'s signed codes, stored after the block's d. */
KQ_INLINE void kq_to_q8_0(const uint8_t *b, uint8_t *o, size_t n_blocks, size_t bytes,
			  kq_mc_fn cf)
{
	for (size_t i = 0; i < n_blocks; i++, b += bytes, o += KN__Q8_0_BYTES) {
		__m256i raw;
		(void)cf(b, &raw);
		memcpy(o, b, 2);
		_mm256_storeu_si256((__m256i *)(o + 2), raw);
	}
}

static void kq_to_q8_0_q4_0(const void *restrict src, void *restrict dst, size_t n_blocks)
{
	kq_to_q8_0(src, dst, n_blocks, KN__Q4_0_BYTES, kq_mc_q4_0);
}

static void kq_to_q8_0_q5_0(const void *restrict src, void *restrict dst, size_t n_blocks)
{
	kq_to_q8_0(src, dst, n_blocks, KN__Q5_0_BYTES, kq_mc_q5_0);
}

/* ---- binding ------------------------------------------------------------ */

#define KQ_MM32(T, BYTES, XB, ONE)                                                         \
	static void kq_gemm_xq_##T(const void *restrict W, size_t rb,                      \
				   const void *restrict xq, size_t xs, size_t nx,          \
				   float *restrict y, size_t ldy, size_t n, size_t k)      \
	{                                                                                  \
		kq_mm32(W, rb, xq, xs, nx, y, ldy, n, k, BYTES, XB, ONE, kq_mc_##T); \
	}
#define KQ_MMK(T, BYTES, KIND)                                                             \
	static void kq_gemm_xq_##T(const void *restrict W, size_t rb,                      \
				   const void *restrict xq, size_t xs, size_t nx,          \
				   float *restrict y, size_t ldy, size_t n, size_t k)      \
	{                                                                                  \
		kq_mmk(W, rb, xq, xs, nx, y, ldy, n, k, BYTES, KIND);                      \
	}

KQ_MM32(q4_0, KN__Q4_0_BYTES, KN__Q8_0X_BYTES, 0)
KQ_MM32(q5_0, KN__Q5_0_BYTES, KN__Q8_0X_BYTES, 0)
KQ_MM32(q8_0, KN__Q8_0_BYTES, KN__Q8_0X_BYTES, 0)
KQ_MM32(q4_1, KN__Q4_1_BYTES, KN__Q8_1X_BYTES, 1)
KQ_MM32(q5_1, KN__Q5_1_BYTES, KN__Q8_1X_BYTES, 1)
KQ_MMK(q2_k, KN__Q2_K_BYTES, 2)
KQ_MMK(q3_k, KN__Q3_K_BYTES, 3)
KQ_MMK(q4_k, KN__Q4_K_BYTES, 4)
KQ_MMK(q5_k, KN__Q5_K_BYTES, 5)
KQ_MMK(q6_k, KN__Q6_K_BYTES, 6)

#endif /* KN_X86_QUANT_AVX2_MM_H */
