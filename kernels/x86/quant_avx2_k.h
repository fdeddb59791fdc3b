/* kernels/x86/quant_avx2_k.h - the K-quants' integer path (kn_quant.h
 * gemv_xq) for AVX2: Q2_K, Q3_K, Q4_K, Q5_K and Q6_K against Q8_K x. Not a
 * public header: x86/quant_avx2.c includes it once, after its 32-element
 * kernels, whose helpers (kq_ld16, kq_u8_ps, kq_i8_ps, kq_u32, kq_half,
 * kq_pf, kq_pf_dist) it uses; it also holds the Q2_K and Q3_K decoders of
 * dequant and gemv;
 * x86/quant_avx2_mm.h (gemm_xq) uses its struct kq_wk, kq_wk_unpack,
 * kq_wk_combine and kq_hsum_k.
 *
 * Every block is first unpacked (struct kq_wk: 256 unsigned codes in x's
 * order, one int16 scale per code pair), then met with x: vpmaddubsw pair
 * sums times the scales by vpmaddwd, exact in int32, one FMA per block
 * with d_w d_x. What a type's codes leave out enters through Q8_K's bsums
 * (sums of 16 x codes): the mins of Q2_K, Q4_K and Q5_K as dmin_w d_x
 * (m . bsums), summed apart and subtracted at the end; the offsets of
 * Q3_K (codes 0..7 for q - 4: -4 sc . bsums) and Q6_K (0..63 for q - 32:
 * -32 sc . bsums) inside isum.
 */
#ifndef KN_X86_QUANT_AVX2_K_H
#define KN_X86_QUANT_AVX2_K_H

/* ---- q2_K / q3_K decoders (dequant, gemv): ref/quant.c's arithmetic ---- */

/* q2_K sub-block s (h = s / 4, t = s % 4): bits 2t, 2t + 1 of qs[32 h ..],
 * two 16-element groups of w = (d sc) q - (dmin m). */
KQ_INLINE void kq_dq_q2_k(const uint8_t *b, int s, __m256 *w)
{
	int h = s / 4, t = s % 4;
	float d = kq_half(b + 80), dmin = kq_half(b + 82);
	for (int i = 0; i < 2; i++) {
		int sc = b[8 * h + 2 * t + i];
		__m128i v = _mm_and_si128(_mm_srl_epi16(kq_ld16(b + 16 + 32 * h + 16 * i),
							_mm_cvtsi32_si128(2 * t)), _mm_set1_epi8(3));
		kq_u8_ps(v, _mm256_set1_ps(d * (float)(sc & 0xf)),
			 _mm256_set1_ps(dmin * (float)(sc >> 4)), w + 2 * i);
	}
}

/* q3_K sub-block s: q = bits 2t, 2t + 1 of qs[32 h ..], less 4 where bit
 * 4h + t of hmask[l] is clear; w = (d (sc - 32)) q. */
KQ_INLINE void kq_dq_q3_k(const uint8_t *b, int s, __m256 *w)
{
	int h = s / 4, t = s % 4;
	float d = kq_half(b + 108);
	for (int i = 0; i < 2; i++) {
		__m128i lo = _mm_and_si128(_mm_srl_epi16(kq_ld16(b + 32 + 32 * h + 16 * i),
							 _mm_cvtsi32_si128(2 * t)), _mm_set1_epi8(3));
		__m128i hb = _mm_and_si128(_mm_srl_epi16(kq_ld16(b + 16 * i), _mm_cvtsi32_si128(4 * h + t)),
					   _mm_set1_epi8(1));
		__m128i q = _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(hb, 2)), _mm_set1_epi8(4));
		kq_i8_ps(q, _mm256_set1_ps(d * (float)(kq_q3k_sc(b, 8 * h + 2 * t + i) - 32)), w + 2 * i);
	}
}

/* pshufb control: every int16 of a 128-bit lane is int16 number n. */
#define KQ_L16(n) ((short)(0x0100 + 0x0202 * (n)))

/* One K-quant block unpacked: code group t (32 unsigned codes) meets x
 * codes 32t..32t+31, its int16 scales in s[t] (one per pair, as vpmaddwd
 * wants them); q4_K/q5_K: the 8 mins m16 and d, dmin; q2_K: the 16 mins
 * mn16 and d, dmin; q3_K / q6_K: the 16 scales sc16 (their offsets enter
 * through the bsums) and d. */
struct kq_wk {
	__m256i c[8], s[8], sc16, mn16;
	__m128i m16;
	float d, dmin;
};

/* A q4_K / q5_K block unpacked (has_qh: q5_K): 32 qs bytes hold sub-block
 * 2p in their low nibbles, 2p + 1 in their high ones; each sub-block's
 * 6-bit scale spread over its int16 pairs. */
KQ_INLINE void kq_wk_k45(const uint8_t *b, int has_qh, struct kq_wk *K)
{
	__m128i sc16;
	kq_k45_scales(b, &sc16, &K->m16);
	__m256i scb = _mm256_broadcastsi128_si256(sc16);
	const uint8_t *qs = b + (has_qh ? 48 : 16);
	__m256i m4 = _mm256_set1_epi8(0x0f), x10 = _mm256_set1_epi8(0x10);
	__m256i h = has_qh ? _mm256_loadu_si256((const __m256i *)(b + 16)) : _mm256_setzero_si256();
	for (int p = 0; p < 4; p++) {
		__m256i wv = _mm256_loadu_si256((const __m256i *)(qs + 32 * p));
		__m256i lo = _mm256_and_si256(wv, m4);
		__m256i hi = _mm256_and_si256(_mm256_srli_epi16(wv, 4), m4);
		if (has_qh) { /* bit s of qh[l] to bit 4: shift by 4 - s */
			int s = 2 * p;
			__m256i hl = s <= 4 ? _mm256_slli_epi16(h, 4 - s) : _mm256_srli_epi16(h, s - 4);
			__m256i hh = s + 1 <= 4 ? _mm256_slli_epi16(h, 3 - s)
						: _mm256_srli_epi16(h, s - 3);
			lo = _mm256_or_si256(lo, _mm256_and_si256(hl, x10));
			hi = _mm256_or_si256(hi, _mm256_and_si256(hh, x10));
		}
		K->c[2 * p] = lo;
		K->c[2 * p + 1] = hi;
		K->s[2 * p] = _mm256_shuffle_epi8(scb, _mm256_set1_epi16(KQ_L16(2 * p)));
		K->s[2 * p + 1] = _mm256_shuffle_epi8(scb, _mm256_set1_epi16(KQ_L16(2 * p + 1)));
	}
	K->d = kq_half(b);
	K->dmin = kq_half(b + 2);
}

/* The int16 scale vectors of code groups 4h + t (t < 4) from 16 int16
 * scales, one per 16 codes (q2_K, q3_K, q6_K): lane 0 of group t holds
 * scale 8h + 2t, lane 1 scale 8h + 2t + 1. */
KQ_INLINE void kq_wk_s16(__m256i sc16, int h, __m256i *s)
{
	__m256i scb = _mm256_broadcastsi128_si256(h ? _mm256_extracti128_si256(sc16, 1)
						    : _mm256_castsi256_si128(sc16));
	for (int t = 0; t < 4; t++) {
		__m256i ctl = _mm256_inserti128_si256(
			_mm256_castsi128_si256(_mm_set1_epi16(KQ_L16(2 * t))),
			_mm_set1_epi16(KQ_L16(2 * t + 1)), 1);
		s[t] = _mm256_shuffle_epi8(scb, ctl);
	}
}

/* A q6_K block unpacked: 32 ql bytes hold t and t + 2 (low, high
 * nibbles), qh bits 2t, 2t+1 are shifted to bits 4, 5; 16 elements per
 * int8 scale (sum sc (q - 32) x = sum sc q x - 32 sum sc bsum). */
KQ_INLINE void kq_wk_q6_k(const uint8_t *b, struct kq_wk *K)
{
	K->sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + 192)));
	__m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
	for (int h = 0; h < 2; h++) {
		__m256i la = _mm256_loadu_si256((const __m256i *)(b + 64 * h));
		__m256i lb = _mm256_loadu_si256((const __m256i *)(b + 64 * h + 32));
		__m256i hv = _mm256_loadu_si256((const __m256i *)(b + 128 + 32 * h));
		K->c[4 * h] = _mm256_or_si256(_mm256_and_si256(la, m4),
					      _mm256_and_si256(_mm256_slli_epi16(hv, 4), m30));
		K->c[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(lb, m4),
						  _mm256_and_si256(_mm256_slli_epi16(hv, 2), m30));
		K->c[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(la, 4), m4),
						  _mm256_and_si256(hv, m30));
		K->c[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lb, 4), m4),
						  _mm256_and_si256(_mm256_srli_epi16(hv, 2), m30));
		kq_wk_s16(K->sc16, h, K->s + 4 * h);
	}
	K->d = kq_half(b + 208);
	K->dmin = 0.0f;
}

/* A q2_K block unpacked: group 4h + t is bits 2t, 2t + 1 of qs[32 h ..];
 * each scale byte's low nibble scales 16 codes, its high nibble is their
 * min. */
KQ_INLINE void kq_wk_q2_k(const uint8_t *b, struct kq_wk *K)
{
	__m128i sb = _mm_loadu_si128((const __m128i *)b), m4 = _mm_set1_epi8(0x0f);
	K->sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sb, m4));
	K->mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sb, 4), m4));
	__m256i m3 = _mm256_set1_epi8(3);
	for (int h = 0; h < 2; h++) {
		__m256i qv = _mm256_loadu_si256((const __m256i *)(b + 16 + 32 * h));
		for (int t = 0; t < 4; t++)
			K->c[4 * h + t] = _mm256_and_si256(_mm256_srli_epi16(qv, 2 * t), m3);
		kq_wk_s16(K->sc16, h, K->s + 4 * h);
	}
	K->d = kq_half(b + 80);
	K->dmin = kq_half(b + 82);
}

/* A q3_K block unpacked: group 4h + t is bits 2t, 2t + 1 of qs[32 h ..]
 * with bit 4h + t of hmask[l] as bit 2 (codes 0..7 for q + 4); the sixteen
 * 6-bit scales less 32 (ref/quant.c kq_q3k_scales, four lanes at once). */
KQ_INLINE void kq_wk_q3_k(const uint8_t *b, struct kq_wk *K)
{
	K->sc16 = _mm256_sub_epi16(_mm256_cvtepu8_epi16(kq_q3k_scales16(b)), _mm256_set1_epi16(32));
	__m256i hm = _mm256_loadu_si256((const __m256i *)b);
	__m256i m3 = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
	for (int h = 0; h < 2; h++) {
		__m256i qv = _mm256_loadu_si256((const __m256i *)(b + 32 + 32 * h));
		for (int t = 0; t < 4; t++) {
			int j = 4 * h + t; /* hmask bit j to bit 2 */
			__m256i hb = j >= 2 ? _mm256_srli_epi16(hm, j - 2) : _mm256_slli_epi16(hm, 2 - j);
			K->c[4 * h + t] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qv, 2 * t), m3),
							  _mm256_and_si256(hb, four));
		}
		kq_wk_s16(K->sc16, h, K->s + 4 * h);
	}
	K->d = kq_half(b + 108);
	K->dmin = 0.0f;
}

/* One block of kind 2..6 (q2_K .. q6_K) into K. */
KQ_INLINE void kq_wk_unpack(const uint8_t *b, int kind, struct kq_wk *K)
{
	switch (kind) {
	case 2: kq_wk_q2_k(b, K); break;
	case 3: kq_wk_q3_k(b, K); break;
	case 6: kq_wk_q6_k(b, K); break;
	default: kq_wk_k45(b, kind == 5, K); break;
	}
}

/* The integer sum of unpacked block K against the 256 Q8_K codes at xc
 * (any alignment), added to isum: each code group's pair sums times its
 * scales (vpmaddubsw, vpmaddwd). Exact. */
KQ_INLINE __m256i kq_wk_isum(const struct kq_wk *K, const uint8_t *xc, __m256i isum)
{
	for (int t = 0; t < 8; t++) {
		__m256i xv = _mm256_loadu_si256((const __m256i *)(xc + 32 * t));
		isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(K->c[t], xv), K->s[t]));
	}
	return isum;
}

/* The float combine of one block (kind 2..6) and one x block (d_x, the
 * bsums bs16): acc += isum (d_w d_x); q2_K/q4_K/q5_K: accm += (mins .
 * bsums, pair-summed for q4_K/q5_K) (dmin_w d_x), subtracted at the end;
 * q3_K / q6_K: their -4 / -32 as -4 / -32 (scales . bsums) inside isum. */
KQ_INLINE void kq_wk_combine(const struct kq_wk *K, int kind, const uint8_t *xb, __m256 *acc,
			     __m128 *accm)
{
	__m256i bs16 = _mm256_loadu_si256((const __m256i *)(xb + 260));
	__m256i isum = _mm256_setzero_si256();
	if (kind == 3 || kind == 6)
		isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(_mm256_madd_epi16(K->sc16, bs16),
								kind == 6 ? 5 : 2));
	isum = kq_wk_isum(K, xb + 4, isum);
	float xd;
	memcpy(&xd, xb, sizeof(xd));
	*acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(K->d * xd), *acc);
	if (kind == 4 || kind == 5) {
		__m128i bs8 = _mm_hadd_epi16(_mm256_castsi256_si128(bs16), _mm256_extracti128_si256(bs16, 1));
		*accm = _mm_fmadd_ps(_mm_cvtepi32_ps(_mm_madd_epi16(K->m16, bs8)),
				     _mm_set1_ps(K->dmin * xd), *accm);
	} else if (kind == 2) {
		__m256i m8 = _mm256_madd_epi16(K->mn16, bs16);
		__m128i m = _mm_add_epi32(_mm256_castsi256_si128(m8), _mm256_extracti128_si256(m8, 1));
		*accm = _mm_fmadd_ps(_mm_cvtepi32_ps(m), _mm_set1_ps(K->dmin * xd), *accm);
	}
}

/* One block of each K-quant against one Q8_K x block xb. */
#define KQ_BLK(T, KIND)                                                                    \
	KQ_INLINE void kq_blk_##T(const uint8_t *b, const uint8_t *xb, __m256 *acc,        \
				  __m128 *accm)                                            \
	{                                                                                  \
		struct kq_wk K;                                                            \
		kq_wk_unpack(b, KIND, &K);                                                 \
		kq_wk_combine(&K, KIND, xb, acc, accm);                                    \
	}
KQ_BLK(q2_k, 2)
KQ_BLK(q3_k, 3)
KQ_BLK(q4_k, 4)
KQ_BLK(q5_k, 5)
KQ_BLK(q6_k, 6)

typedef void (*kq_blk_fn)(const uint8_t *b, const uint8_t *xb, __m256 *acc, __m128 *accm);

/* A K-quant row's result: the lane sum of acc less accm, in one order. */
KQ_INLINE float kq_hsum_k(__m256 acc, __m128 accm)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
	s = _mm_sub_ps(s, accm);
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

/* One row of a K-quant, block by block: rows one after the other, one
 * stream from memory (x86/quant_avx512_xq.h kq_xqk_row says why). */
KQ_INLINE float kq_xqk_row(const uint8_t *w, size_t rb, const uint8_t *xq, size_t k,
			   size_t bytes, kq_blk_fn bf)
{
	__m256 acc = _mm256_setzero_ps();
	__m128 accm = _mm_setzero_ps();
	size_t pf = kq_pf_dist(1, rb);
	for (size_t i = 0; i < k / KN__QK_K; i++) {
		kq_pf(w + i * bytes + pf, bytes);
		bf(w + i * bytes, xq + i * KN__Q8_K_BYTES, &acc, &accm);
	}
	return kq_hsum_k(acc, accm);
}

KQ_INLINE void kq_xqk(const void *W, size_t rb, const void *xq, float *y, size_t n_rows,
		      size_t k, size_t bytes, kq_blk_fn bf)
{
	const uint8_t *w = W;
	for (size_t r = 0; r < n_rows; r++)
		y[r] = kq_xqk_row(w + r * rb, rb, xq, k, bytes, bf);
}

#define KQ_XQK(T, BYTES)                                                                   \
	static void kq_gemv_xq_##T(const void *restrict W, size_t rb,                      \
				   const void *restrict xq, float *restrict y, size_t n,   \
				   size_t k)                                               \
	{                                                                                  \
		kq_xqk(W, rb, xq, y, n, k, BYTES, kq_blk_##T);                             \
	}


KQ_XQK(q2_k, KN__Q2_K_BYTES)
KQ_XQK(q3_k, KN__Q3_K_BYTES)
KQ_XQK(q4_k, KN__Q4_K_BYTES)
KQ_XQK(q5_k, KN__Q5_K_BYTES)
KQ_XQK(q6_k, KN__Q6_K_BYTES)

#endif /* KN_X86_QUANT_AVX2_K_H */
