/* kernels/x86/quant_avx512_mm.h - gemm_xq (kn_quant.h) for AVX-512: the
 * integer path of x86/quant_avx512_xq.h for several quantized x rows at
 * once. Not a public header: x86/quant_avx512.c includes it once, after
 * quant_avx512_xq.h, whose helpers (kq_dot_u8s8, kq_ld2x32, kq_d2, kq_w2_*,
 * kq_c2_*, kq_pf, kq_pf_dist, struct kq_xk / kq_wk, kq_wk_combine,
 * kq_hsum_k) it uses.
 *
 * Each weight block is read and unpacked once for up to four x rows, and
 * every (weight row, x row) pair then does exactly the operations gemv_xq
 * does for it, in the same order, so gemm_xq equals gemv_xq row by row
 * bit for bit (tests/unit/kernels/test_quant.c checks it for every type).
 *
 * Blocking (32 zmm registers): the 32-element types four weight rows by
 * four x rows, two blocks per step (sixteen accumulators); K-quants
 * KQ_MMK_R weight rows by four x rows, each x block unpacked once per pass
 * (struct kq_xk) and each weight block once for the four x rows (struct
 * kq_wk).
 */
#ifndef KN_X86_QUANT_AVX512_MM_H
#define KN_X86_QUANT_AVX512_MM_H

/* ---- 32-element types: q4_0, q5_0, q8_0 against Q8_0 x ------------------ */

/* One step of R weight rows against NX x rows
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


/* ---- q4_1, q5_1 against Q8_1 x ------------------------------------------ */

/* One step of R weight rows against NX x rows, blocks i and i + 1 (b_ok),
 * as kq_xq1_rows does it per pair; each row's codes and scales are
 * unpacked once for the NX x rows. */
KQ_INLINE void kq_xq1_step_nx(const uint8_t *w, size_t rb, size_t pf, const uint8_t *xq,
			      size_t xs, size_t i, int b_ok, __m512 acc[4][4], __m128 accm[4][4],
			      int R, int NX, size_t bytes, kq_c2_fn cf, int vnni)
{
	__m512i xv[4];
	__m128 xdm[4];
	for (int j = 0; j < NX; j++) {
		const uint8_t *xa = xq + (size_t)j * xs + i * KN__Q8_1X_BYTES;
		const uint8_t *xb = xa + KN__Q8_1X_BYTES;
		xv[j] = kq_ld2x32(xa + 4, xb + 4, b_ok);
		xdm[j] = kq_dm2(xa, xb, b_ok);
	}
	for (int r = 0; r < R; r++) {
		const uint8_t *wb = w + (size_t)r * rb + i * bytes;
		kq_pf(wb + pf, 2 * bytes);
		__m512i c = cf(wb, b_ok);
		__m128 wdm = kq_dm2(wb, wb + bytes, b_ok);
		for (int j = 0; j < NX; j++) {
			__m512i isum = kq_dot_u8s8(_mm512_setzero_si512(), c, xv[j], vnni);
			kq_xq1_fma(isum, _mm_mul_ps(wdm, xdm[j]), &acc[r][j], &accm[r][j]);
		}
	}
}

KQ_INLINE void kq_xq1_rows_nx(const uint8_t *w, size_t rb, const uint8_t *xq, size_t xs,
			      float *y, size_t ldy, size_t k, int R, int NX, size_t bytes,
			      kq_c2_fn cf, int vnni)
{
	__m512 acc[4][4];
	__m128 accm[4][4];
	for (int r = 0; r < R; r++)
		for (int j = 0; j < NX; j++) {
			acc[r][j] = _mm512_setzero_ps();
			accm[r][j] = _mm_setzero_ps();
		}
	size_t nb = k / KN__QK, pf = kq_pf_dist(R, rb);
	for (size_t i = 0; i < nb; i += 2)
		kq_xq1_step_nx(w, rb, pf, xq, xs, i, i + 1 < nb, acc, accm, R, NX, bytes, cf, vnni);
	for (int r = 0; r < R; r++)
		for (int j = 0; j < NX; j++)
			y[(size_t)j * ldy + r] = kq_hsum_1(acc[r][j], accm[r][j]);
}

KQ_INLINE void kq_gemm1_nx(const uint8_t *w, size_t rb, const uint8_t *xq, size_t xs, int NX,
			   float *y, size_t ldy, size_t n_rows, size_t k, size_t bytes,
			   kq_c2_fn cf, int vnni)
{
	size_t r = 0;
	for (; r + 4 <= n_rows; r += 4)
		kq_xq1_rows_nx(w + r * rb, rb, xq, xs, y + r, ldy, k, 4, NX, bytes, cf, vnni);
	for (; r < n_rows; r++)
		kq_xq1_rows_nx(w + r * rb, rb, xq, xs, y + r, ldy, k, 1, NX, bytes, cf, vnni);
}

KQ_INLINE void kq_gemm1(const void *W, size_t rb, const void *xq, size_t xs, size_t n_x,
			float *y, size_t ldy, size_t n_rows, size_t k, size_t bytes, kq_c2_fn cf,
			int vnni)
{
	const uint8_t *w = W, *x = xq;
	for (size_t j = 0; j < n_x; j += 4) {
		const uint8_t *xj = x + j * xs;
		float *yj = y + j * ldy;
		switch (n_x - j >= 4 ? 4 : (int)(n_x - j)) {
		case 4: kq_gemm1_nx(w, rb, xj, xs, 4, yj, ldy, n_rows, k, bytes, cf, vnni); break;
		case 3: kq_gemm1_nx(w, rb, xj, xs, 3, yj, ldy, n_rows, k, bytes, cf, vnni); break;
		case 2: kq_gemm1_nx(w, rb, xj, xs, 2, yj, ldy, n_rows, k, bytes, cf, vnni); break;
		default: kq_gemm1_nx(w, rb, xj, xs, 1, yj, ldy, n_rows, k, bytes, cf, vnni); break;
		}
	}
}

/* ---- K-quants: q4_K, q5_K, q6_K against Q8_K x -------------------------- */

/* Weight rows per K-quant pass: each holds an unpacked block (8 zmm) and
 * four accumulator pairs. */
#define KQ_MMK_R 2

/* R weight rows (1..KQ_MMK_R) of a K-quant (kind 4, 5, 6) against NX x
 * rows: per block, the NX x blocks unpacked once (kq_xk), each weight
 * block once (kq_wk), then kq_wk_combine per pair as gemv_xq does. */
KQ_INLINE void kq_mmk_rows(const uint8_t *w, size_t rb, const uint8_t *xq, size_t xs, float *y,
			   size_t ldy, size_t k, int R, int NX, size_t bytes, kq_xk_fn xf,
			   int kind, int vnni)
{
	__m512 acc[KQ_MMK_R][4];
	__m128 accm[KQ_MMK_R][4];
	for (int r = 0; r < R; r++)
		for (int j = 0; j < NX; j++) {
			acc[r][j] = _mm512_setzero_ps();
			accm[r][j] = _mm_setzero_ps();
		}
	size_t pf = kq_pf_dist(R, rb);
	for (size_t i = 0; i < k / KN__QK_K; i++) {
		struct kq_xk X[4];
		for (int j = 0; j < NX; j++)
			xf(xq + (size_t)j * xs + i * KN__Q8_K_BYTES, &X[j]);
		for (int r = 0; r < R; r++) {
			const uint8_t *wb = w + (size_t)r * rb + i * bytes;
			kq_pf(wb + pf, bytes);
			struct kq_wk K;
			kq_wk(wb, kind, &K);
			for (int j = 0; j < NX; j++)
				kq_wk_combine(&K, kind, &X[j], &acc[r][j], &accm[r][j], vnni);
		}
	}
	for (int r = 0; r < R; r++)
		for (int j = 0; j < NX; j++)
			y[(size_t)j * ldy + r] = kq_hsum_k(acc[r][j], accm[r][j]);
}

KQ_INLINE void kq_mmk_nx(const uint8_t *w, size_t rb, const uint8_t *xq, size_t xs, int NX,
			 float *y, size_t ldy, size_t n_rows, size_t k, size_t bytes, kq_xk_fn xf,
			 int kind, int vnni)
{
	size_t r = 0;
	for (; r + KQ_MMK_R <= n_rows; r += KQ_MMK_R)
		kq_mmk_rows(w + r * rb, rb, xq, xs, y + r, ldy, k, KQ_MMK_R, NX, bytes, xf, kind,
			    vnni);
	for (; r < n_rows; r++)
		kq_mmk_rows(w + r * rb, rb, xq, xs, y + r, ldy, k, 1, NX, bytes, xf, kind, vnni);
}

KQ_INLINE void kq_mmk(const void *W, size_t rb, const void *xq, size_t xs, size_t n_x, float *y,
		      size_t ldy, size_t n_rows, size_t k, size_t bytes, kq_xk_fn xf, int kind,
		      int vnni)
{
	const uint8_t *w = W, *x = xq;
	for (size_t j = 0; j < n_x; j += 4) {
		const uint8_t *xj = x + j * xs;
		float *yj = y + j * ldy;
		switch (n_x - j >= 4 ? 4 : (int)(n_x - j)) {
		case 4: kq_mmk_nx(w, rb, xj, xs, 4, yj, ldy, n_rows, k, bytes, xf, kind, vnni); break;
		case 3: kq_mmk_nx(w, rb, xj, xs, 3, yj, ldy, n_rows, k, bytes, xf, kind, vnni); break;
		case 2: kq_mmk_nx(w, rb, xj, xs, 2, yj, ldy, n_rows, k, bytes, xf, kind, vnni); break;
		default: kq_mmk_nx(w, rb, xj, xs, 1, yj, ldy, n_rows, k, bytes, xf, kind, vnni); break;
		}
	}
}

/* ---- binding ------------------------------------------------------------ */

/* Each type's gemm_xq in two instantiations (VNNI and AVX-512BW) of the
 * kernel F (its extra arguments ..., then vnni), picked per call by
 * kn__has_avx512vnni(). */
#define KQ_MM_FNS(T, F, ...)                                                               	static void kq_mm_##T##_vnni(const void *W, size_t rb, const void *xq, size_t xs,  				     size_t nx, float *y, size_t ldy, size_t n, size_t k)  	{                                                                                  		F(W, rb, xq, xs, nx, y, ldy, n, k, __VA_ARGS__, 1);                        	}                                                                                  	static void kq_mm_##T##_bw(const void *W, size_t rb, const void *xq, size_t xs,    				   size_t nx, float *y, size_t ldy, size_t n, size_t k)    	{                                                                                  		F(W, rb, xq, xs, nx, y, ldy, n, k, __VA_ARGS__, 0);                        	}                                                                                  	static void kq_gemm_xq_##T(const void *restrict W, size_t rb,                      				   const void *restrict xq, size_t xs, size_t nx,          				   float *restrict y, size_t ldy, size_t n, size_t k)      	{                                                                                  		(kn__has_avx512vnni() ? kq_mm_##T##_vnni : kq_mm_##T##_bw)(W, rb, xq, xs, nx, y, 									   ldy, n, k);     	}

KQ_MM_FNS(q4_0, kq_gemm0, KN__Q4_0_BYTES, 8, kq_w2_q4_0)
KQ_MM_FNS(q5_0, kq_gemm0, KN__Q5_0_BYTES, 16, kq_w2_q5_0)
KQ_MM_FNS(q8_0, kq_gemm0, KN__Q8_0_BYTES, 0, kq_w2_q8_0)
KQ_MM_FNS(q4_1, kq_gemm1, KN__Q4_1_BYTES, kq_c2_q4_1)
KQ_MM_FNS(q5_1, kq_gemm1, KN__Q5_1_BYTES, kq_c2_q5_1)
KQ_MM_FNS(q2_k, kq_mmk, KN__Q2_K_BYTES, kq_xk_q6, 2)
KQ_MM_FNS(q3_k, kq_mmk, KN__Q3_K_BYTES, kq_xk_q6, 3)
KQ_MM_FNS(q4_k, kq_mmk, KN__Q4_K_BYTES, kq_xk_k45, 4)
KQ_MM_FNS(q5_k, kq_mmk, KN__Q5_K_BYTES, kq_xk_k45, 5)
KQ_MM_FNS(q6_k, kq_mmk, KN__Q6_K_BYTES, kq_xk_q6, 6)

#endif /* KN_X86_QUANT_AVX512_MM_H */
