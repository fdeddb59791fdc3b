/* kernels/x86/dot_rows_avx2.h - kn_ops dot_rows, dot_rows_g and gemv_t_g
 * (kn.h): one row x against n rows of B, 8 rows at a time (ymm); up to
 * DR_G rows of x against B's rows 4 at a time (ymm); up to DR_G rows of
 * weights times B's rows in order (zmm with AVX-512, ymm without), or a
 * row of weights at a time over blocks of B's rows where a row of B fits
 * the registers whole and the DR_G rows' sums would not.
 * Not a public header: included once by x86/ops_avx2.c and once by
 * x86/ops_avx512.c (the same code, each compiled with its library's
 * flags; ymm is what head_dim 64 fills).
 *
 * dot_rows: each of the 8 rows gets its own accumulator over k in steps
 * of 8 (one FMA per step, x's 8 floats loaded once for the 8 rows), and the 8
 * accumulators are reduced together: two rounds of vhaddps and one
 * cross-lane add leave row r's sum in lane r, so 8 sums cost 7 shuffling
 * adds where a dot each would cost 8 horizontal sums (and 8 calls). The
 * last k % 8 elements are masked loads, the last n % 8 rows the kn_ops
 * dot of the file that includes this (DR_DOT).
 */
#ifndef KN_X86_DOT_ROWS_AVX2_H
#define KN_X86_DOT_ROWS_AVX2_H

#include <immintrin.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

static inline __m256 dr_sum8(const __m256 a[8])
{
	__m256 t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);
	__m256 t2 = _mm256_hadd_ps(a[4], a[5]), t3 = _mm256_hadd_ps(a[6], a[7]);
	__m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
	return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20),
			     _mm256_permute2f128_ps(u0, u1, 0x31));
}

static void dr_dot_rows(const float *x, const float *B, size_t ldb, size_t n, size_t k,
			float alpha, float *y)
{
	size_t k8 = k & ~(size_t)7, i = 0;
	int tail = (int)(k - k8);
	const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(tail),
						_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
	const __m256 va = _mm256_set1_ps(alpha);
	for (; i + 8 <= n; i += 8) {
		const float *b = B + i * ldb;
		__m256 acc[8];
		for (int r = 0; r < 8; r++)
			acc[r] = _mm256_setzero_ps();
		for (size_t d = 0; d < k8; d += 8) {
			__m256 xv = _mm256_loadu_ps(x + d);
#pragma GCC unroll 8
			for (int r = 0; r < 8; r++)
				acc[r] = _mm256_fmadd_ps(xv, _mm256_loadu_ps(b + (size_t)r * ldb + d),
							 acc[r]);
		}
		if (tail) {
			__m256 xv = _mm256_maskload_ps(x + k8, mask);
			for (int r = 0; r < 8; r++)
				acc[r] = _mm256_fmadd_ps(
					xv, _mm256_maskload_ps(b + (size_t)r * ldb + k8, mask), acc[r]);
		}
		_mm256_storeu_ps(y + i, _mm256_mul_ps(va, dr_sum8(acc)));
	}
	for (; i < n; i++)
		y[i] = alpha * DR_DOT(x, B + i * ldb, k);
}

#define DR_INLINE static inline __attribute__((always_inline))
/* rows of x (query heads) per pass: their accumulators fit AVX-512's 32
 * vector registers, AVX2's 16 */
#ifdef __AVX512F__
#define DR_G 4
#else
#define DR_G 3
#endif
/* Row widths from which dot_rows_g reads its 4 rows one after the other
 * (each accumulator's sums in the same order, so the same bits): 4 rows
 * of 1 KB met 32 bytes at a time were 4 streams a page apart, which the
 * hardware prefetchers followed at half the speed of one (Gemma 3's keys
 * of 256 floats, one thread, from memory: 66 against 84-92 us a layer of
 * 512 keys). 64-float rows keep the interleaved order, which is as fast
 * there. Neither asks for rows ahead (prefetcht0 of the rows 8 ahead):
 * the hardware's prefetch alone was faster (SmolLM2's 3 heads' keys
 * after 650 tokens, one thread, from memory: 36 against 50 us a layer). */
#define DR_SEQ_K 128

/* 8 floats at p, or (not whole) those mask keeps, 0 elsewhere. */
DR_INLINE __m256 dr_ld8(const float *p, bool whole, __m256i mask)
{
	return whole ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, mask);
}

/* Lane r of the result: the sum of a[r]'s lanes. */
DR_INLINE __m128 dr_sum4(const __m256 a[4])
{
	__m256 u = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
	return _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1));
}

/* Rows of x per pass of dot_rows_g where B's rows are read one after the
 * other (k >= DR_SEQ_K): a row's sum of each takes one register there,
 * so the G rows of Gemma 3's 4 query heads (or Qwen2's 7) share one read
 * of their keys; AVX2's DR_G of 3 read Gemma's keys twice, the second
 * time from memory past about 1000 keys of 256 floats. */
#define DR_GS 8

/* dot_rows_g for G (1 .. DR_G; to DR_GS where k >= DR_SEQ_K) rows of x:
 * B's rows 4 at a time, each of their 8-float pieces loaded once for the
 * G rows (4 G accumulators, or G and 4 G sums). */
DR_INLINE void dr_dot_rows_gn(const float *x, size_t ldx, int G, const float *B, size_t ldb,
			      size_t n, size_t k, float alpha, float *y, size_t ldy)
{
	size_t i = 0;
	const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(k % 8)),
						_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
	const __m128 va = _mm_set1_ps(alpha);
	for (; i + 4 <= n; i += 4) {
		const float *b = B + i * ldb;
		__m256 acc[DR_GS][4];
		for (int h = 0; h < G; h++)
			for (int r = 0; r < 4; r++)
				acc[h][r] = _mm256_setzero_ps();
		if (k >= DR_SEQ_K) { /* the 4 rows one after the other: one stream */
			for (int r = 0; r < 4; r++) {
				/* the row's G sums in registers: acc[h][r], r not
				 * a constant here, stayed in memory, a store and a
				 * load in every FMA's chain (Gemma 3's keys, one
				 * thread: 128 from L2 15 -> 6 us, 650 from memory
				 * 78 -> 36 us) */
				__m256 a[DR_GS];
				for (int h = 0; h < G; h++)
					a[h] = _mm256_setzero_ps();
				for (size_t d = 0; d < k; d += 8) {
					bool whole = k - d >= 8;
					__m256 bv = dr_ld8(b + (size_t)r * ldb + d, whole, mask);
					for (int h = 0; h < G; h++)
						a[h] = _mm256_fmadd_ps(
							dr_ld8(x + (size_t)h * ldx + d, whole, mask), bv,
							a[h]);
				}
				for (int h = 0; h < G; h++)
					acc[h][r] = a[h];
			}
		} else { /* a piece of each row in turn, x loaded once for the 4 */
			for (size_t d = 0; d < k; d += 8) {
				bool whole = k - d >= 8; /* else the masked tail */
				__m256 xv[DR_GS];
				for (int h = 0; h < G; h++)
					xv[h] = dr_ld8(x + (size_t)h * ldx + d, whole, mask);
				for (int r = 0; r < 4; r++) {
					__m256 bv = dr_ld8(b + (size_t)r * ldb + d, whole, mask);
					for (int h = 0; h < G; h++)
						acc[h][r] = _mm256_fmadd_ps(xv[h], bv, acc[h][r]);
				}
			}
		}
		for (int h = 0; h < G; h++)
			_mm_storeu_ps(y + (size_t)h * ldy + i, _mm_mul_ps(va, dr_sum4(acc[h])));
	}
	for (; i < n; i++)
		for (int h = 0; h < G; h++)
			y[(size_t)h * ldy + i] = alpha * DR_DOT(x + (size_t)h * ldx, B + i * ldb, k);
}

static void dr_dot_rows_g(const float *x, size_t ldx, size_t g, const float *B, size_t ldb,
			  size_t n, size_t k, float alpha, float *y, size_t ldy)
{
	size_t pass = k >= DR_SEQ_K ? DR_GS : DR_G;
	for (size_t h = 0; h < g; h += pass) {
		const float *xh = x + h * ldx;
		float *yh = y + h * ldy;
		switch (g - h < pass ? g - h : pass) {
#define DR_ROWS_G(G)                                                          \
	case G:                                                               \
		dr_dot_rows_gn(xh, ldx, G, B, ldb, n, k, alpha, yh, ldy); \
		break;
			DR_ROWS_G(1)
			DR_ROWS_G(2)
			DR_ROWS_G(3)
			DR_ROWS_G(4)
			DR_ROWS_G(5)
			DR_ROWS_G(6)
			DR_ROWS_G(7)
			default:
			DR_ROWS_G(8)
#undef DR_ROWS_G
		}
	}
}

/* gemv_t_g for G (1 .. DR_G) rows of weights p over columns [j, j + w)
 * of B, w <= DR_GV_COLS (4 vectors: 64 columns in zmm where the including
 * library has AVX-512, 32 in ymm where not; the vectors past w masked):
 * B's rows in order, each loaded once for the G rows, one FMA per
 * element per row from 0 (kn__sgemm's one-row path reads B the same way:
 * its rows whole and in order, which streams from memory; columns 16 at
 * a time over blocks of rows ran 2x slower from memory). */
#ifdef __AVX512F__
#define DR_GV_COLS 64
DR_INLINE void dr_gemv_t_gn(const float *p, size_t ldp, int G, const float *B, size_t ldb,
			    size_t n, size_t j, size_t w, float *y, size_t ldy)
{
	__mmask16 m[4];
	for (int v = 0; v < 4; v++) {
		size_t lo = 16 * (size_t)v, c = lo >= w ? 0 : w - lo;
		m[v] = (__mmask16)(c >= 16 ? 0xffff : (1u << c) - 1);
	}
	__m512 acc[DR_G][4];
	for (int h = 0; h < G; h++)
		for (int v = 0; v < 4; v++)
			acc[h][v] = _mm512_setzero_ps();
	const float *b = B + j;
	for (size_t i = 0; i < n; i++, b += ldb) {
		__m512 bv[4];
		for (int v = 0; v < 4; v++)
			bv[v] = _mm512_maskz_loadu_ps(m[v], b + 16 * v);
		for (int h = 0; h < G; h++) {
			__m512 pv = _mm512_set1_ps(p[(size_t)h * ldp + i]);
			for (int v = 0; v < 4; v++)
				acc[h][v] = _mm512_fmadd_ps(pv, bv[v], acc[h][v]);
		}
	}
	for (int h = 0; h < G; h++)
		for (int v = 0; v < 4; v++)
			_mm512_mask_storeu_ps(y + (size_t)h * ldy + j + 16 * v, m[v], acc[h][v]);
}
#else
#define DR_GV_COLS 32
DR_INLINE void dr_gemv_t_gn(const float *p, size_t ldp, int G, const float *B, size_t ldb,
			    size_t n, size_t j, size_t w, float *y, size_t ldy)
{
	__m256i m[4];
	for (int v = 0; v < 4; v++) {
		int c = 8 * v >= (int)w ? 0 : (int)w - 8 * v;
		m[v] = _mm256_cmpgt_epi32(_mm256_set1_epi32(c),
					  _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
	}
	bool full = w == DR_GV_COLS;
	__m256 acc[DR_G][4];
	for (int h = 0; h < G; h++)
		for (int v = 0; v < 4; v++)
			acc[h][v] = _mm256_setzero_ps();
	const float *b = B + j;
	for (size_t i = 0; i < n; i++, b += ldb) {
		__m256 bv[4];
		for (int v = 0; v < 4; v++)
			bv[v] = full ? _mm256_loadu_ps(b + 8 * v) : _mm256_maskload_ps(b + 8 * v, m[v]);
		for (int h = 0; h < G; h++) {
			__m256 pv = _mm256_broadcast_ss(p + (size_t)h * ldp + i);
			for (int v = 0; v < 4; v++)
				acc[h][v] = _mm256_fmadd_ps(pv, bv[v], acc[h][v]);
		}
	}
	for (int h = 0; h < G; h++)
		for (int v = 0; v < 4; v++)
			_mm256_maskstore_ps(y + (size_t)h * ldy + j + 8 * v, m[v], acc[h][v]);
}
#endif

DR_INLINE void dr_gemv_t_gk(const float *p, size_t ldp, int G, const float *B, size_t ldb,
			    size_t n, size_t k, float *y, size_t ldy)
{
	for (size_t j = 0; j < k; j += DR_GV_COLS)
		dr_gemv_t_gn(p, ldp, G, B, ldb, n, j, k - j < DR_GV_COLS ? k - j : DR_GV_COLS, y,
			     ldy);
}

/* gemv_t_g's form for rows wider than DR_GV_COLS that fit DR_GV_ROW
 * columns (65 .. 256 in zmm; 33 .. 64 in ymm): a head at a time over
 * blocks of DR_GV_RB rows of B, the head's whole row of sums in NV
 * registers (the last masked to k where not full), kept in y between
 * blocks; the block comes from memory for the first head and from L1
 * for the others. The G-heads form above reads such rows in pieces of
 * DR_GV_COLS, a pass over all the rows for each piece: strided streams
 * from memory, which ran at half the speed of one (one thread, the
 * values from memory: SmolLM2's 3 heads of 64 over 300 rows in ymm 7.0
 * against 4.0 us; Gemma 3's 4 of 256 over 600 rows in zmm 66 against 46
 * us; Gemma's 256 columns in ymm ran no faster in this form, 4 pieces
 * of 64 a row, so they keep the other). Each element's FMA
 * chain still runs over the rows in order from 0 (y starts at 0), so the
 * bits are the other form's. */
#define DR_GV_RB 32
#ifdef __AVX512F__
#define DR_GV_ROW 256
DR_INLINE void dr_gemv_t_rows(const float *p, size_t ldp, size_t g, const float *B, size_t ldb,
			      size_t n, size_t k, float *y, size_t ldy, const int NV)
{
	size_t c = k - 16 * (size_t)(NV - 1);
	const __mmask16 last = (__mmask16)(c >= 16 ? 0xffff : (1u << c) - 1);
	for (size_t h = 0; h < g; h++)
		memset(y + h * ldy, 0, k * sizeof(float));
	for (size_t i0 = 0; i0 < n; i0 += DR_GV_RB) {
		size_t i1 = n - i0 < DR_GV_RB ? n : i0 + DR_GV_RB;
		for (size_t h = 0; h < g; h++) {
			float *yh = y + h * ldy;
			__m512 acc[16];
#pragma GCC unroll 16
			for (int v = 0; v < NV; v++)
				acc[v] = _mm512_maskz_loadu_ps(v < NV - 1 ? 0xffff : last, yh + 16 * v);
			const float *b = B + i0 * ldb;
			for (size_t i = i0; i < i1; i++, b += ldb) {
				__m512 pv = _mm512_set1_ps(p[h * ldp + i]);
#pragma GCC unroll 16
				for (int v = 0; v < NV; v++)
					acc[v] = _mm512_fmadd_ps(
						pv,
						_mm512_maskz_loadu_ps(v < NV - 1 ? 0xffff : last,
								      b + 16 * v),
						acc[v]);
			}
#pragma GCC unroll 16
			for (int v = 0; v < NV; v++)
				_mm512_mask_storeu_ps(yh + 16 * v, v < NV - 1 ? 0xffff : last, acc[v]);
		}
	}
}

/* dr_gemv_t_rows for k in (DR_GV_COLS, DR_GV_ROW]: NV = k / 16 rounded up. */
static void dr_gemv_t_row(const float *p, size_t ldp, size_t g, const float *B, size_t ldb,
			  size_t n, size_t k, float *y, size_t ldy)
{
	switch ((k + 15) / 16) {
#define DR_ROW_NV(nv)                                                    \
	case nv:                                                         \
		dr_gemv_t_rows(p, ldp, g, B, ldb, n, k, y, ldy, nv); \
		break;
		DR_ROW_NV(5)
		DR_ROW_NV(6)
		DR_ROW_NV(7)
		DR_ROW_NV(8)
		DR_ROW_NV(9)
		DR_ROW_NV(10)
		DR_ROW_NV(11)
		DR_ROW_NV(12)
		DR_ROW_NV(13)
		DR_ROW_NV(14)
		DR_ROW_NV(15)
		default:
		DR_ROW_NV(16)
#undef DR_ROW_NV
	}
}
#else
#define DR_GV_ROW 64
DR_INLINE void dr_gemv_t_rows(const float *p, size_t ldp, size_t g, const float *B, size_t ldb,
			      size_t n, size_t k, float *y, size_t ldy, const int NV,
			      const bool full)
{
	const __m256i last = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)k - 8 * (NV - 1)),
						_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
	for (size_t h = 0; h < g; h++)
		memset(y + h * ldy, 0, k * sizeof(float));
	for (size_t i0 = 0; i0 < n; i0 += DR_GV_RB) {
		size_t i1 = n - i0 < DR_GV_RB ? n : i0 + DR_GV_RB;
		for (size_t h = 0; h < g; h++) {
			float *yh = y + h * ldy;
			__m256 acc[8];
#pragma GCC unroll 8
			for (int v = 0; v < NV; v++)
				acc[v] = dr_ld8(yh + 8 * v, full || v < NV - 1, last);
			const float *b = B + i0 * ldb;
			for (size_t i = i0; i < i1; i++, b += ldb) {
				__m256 pv = _mm256_broadcast_ss(p + h * ldp + i);
#pragma GCC unroll 8
				for (int v = 0; v < NV; v++)
					acc[v] = _mm256_fmadd_ps(
						pv, dr_ld8(b + 8 * v, full || v < NV - 1, last),
						acc[v]);
			}
#pragma GCC unroll 8
			for (int v = 0; v < NV; v++) {
				if (full || v < NV - 1)
					_mm256_storeu_ps(yh + 8 * v, acc[v]);
				else
					_mm256_maskstore_ps(yh + 8 * v, last, acc[v]);
			}
		}
	}
}

/* dr_gemv_t_rows for k in (DR_GV_COLS, DR_GV_ROW]: NV = k / 8 rounded up. */
static void dr_gemv_t_row(const float *p, size_t ldp, size_t g, const float *B, size_t ldb,
			  size_t n, size_t k, float *y, size_t ldy)
{
	bool full = k % 8 == 0;
	switch ((k + 7) / 8) {
#define DR_ROW_NV(nv)                                                                  \
	case nv:                                                                       \
		if (full)                                                              \
			dr_gemv_t_rows(p, ldp, g, B, ldb, n, k, y, ldy, nv, true);  \
		else                                                                   \
			dr_gemv_t_rows(p, ldp, g, B, ldb, n, k, y, ldy, nv, false); \
		break;
		DR_ROW_NV(5)
		DR_ROW_NV(6)
		DR_ROW_NV(7)
		default:
		DR_ROW_NV(8)
#undef DR_ROW_NV
	}
}
#endif

static void dr_gemv_t_g(const float *p, size_t ldp, size_t g, const float *B, size_t ldb,
			size_t n, size_t k, float *y, size_t ldy)
{
	if (k > DR_GV_COLS && k <= DR_GV_ROW) {
		dr_gemv_t_row(p, ldp, g, B, ldb, n, k, y, ldy);
		return;
	}
	for (size_t h = 0; h < g; h += DR_G) {
		const float *ph = p + h * ldp;
		float *yh = y + h * ldy;
		if (g - h >= 4 && DR_G >= 4)
			dr_gemv_t_gk(ph, ldp, 4, B, ldb, n, k, yh, ldy);
		else if (g - h >= 3)
			dr_gemv_t_gk(ph, ldp, 3, B, ldb, n, k, yh, ldy);
		else if (g - h == 2)
			dr_gemv_t_gk(ph, ldp, 2, B, ldb, n, k, yh, ldy);
		else
			dr_gemv_t_gk(ph, ldp, 1, B, ldb, n, k, yh, ldy);
	}
}

#endif /* KN_X86_DOT_ROWS_AVX2_H */
