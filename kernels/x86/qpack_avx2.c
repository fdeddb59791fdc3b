/* kernels/x86/qpack_avx2.c - the packed weight layouts (kn_quant.h struct
 * kn_qpack) on AVX2: Q8_0, Q5_0, Q4_1 and Q4_K in the same groups of 16 rows as
 * every ISA (kernels/ref/qpack.c defines them), each group taken as two
 * halves of 8 rows, one ymm lane per row. Compiled with libkn_avx2's flags.
 *
 * A block's 64-byte chunk c holds 4 codes of each of the 16 rows; its
 * first 32 bytes are rows 0-7, the next rows 8-15: one ymm per half. An x
 * row's 4 codes of the chunk are broadcast to every lane (a load), and
 * vpmaddubsw (unsigned weight bytes times signed x bytes, pairs summed to
 * int16) then vpmaddwd against ones give each lane its row's dot of those
 * 4 codes. AVX2 has no vpdpbusd, so how far the int16 pairs may be summed
 * before widening is what decides the cost, and the codes' range decides
 * it:
 *   Q4_1 codes 0..15: a pair is at most 2 * 15 * 127 = 3810, so all 8
 *     chunks of a block add up in int16 (30480) and widen once;
 *   Q5_0 codes 0..31: 7874 per pair, 4 chunks in int16 (31496), two
 *     widenings per block; the codes stand for themselves minus 16, which
 *     the int32 sum starts at (-16 times x's code sum);
 *   Q8_0 codes -128..127: vpmaddubsw needs one operand unsigned, so one
 *     x row (gemv) takes |w| and gives x w's signs (vpsignb); a pair can
 *     reach 32512, so every chunk widens. Several x rows (gemm) widen the
 *     codes to int16 instead, and vpmaddwd sums their pairs to int32: on
 *     Zen vpsignb runs on the multipliers' pipes, and two vpmaddwd take
 *     1.25 cycles against 1.6 for a 32-code step with it.
 *   Q4_K (256-element blocks): per 32-element sub-block in int16 as Q4_1,
 *     widened by vpmaddwd against the sub-block's 6-bit scale.
 * After the block, each lane holds its row's exact integer dot; one
 * convert and one FMA with d_w * d_x (and for Q4_1 one FMA of m_w with
 * x's s, its Q8_1 partner's d times its code sum; for Q4_K one of dmin_w
 * d_x with the mins' sum) finish it: the reference's operations in its
 * order, so the results equal kernels/ref/qpack.c's bit for bit.
 *
 * Loop order, several x rows: each block of a group is unpacked once
 * (Q5_0's fifth bits spread, nibbles split, Q8_0's codes widened) into a
 * stack buffer that stays in L1, then the x rows meet it four at a time,
 * their 8 integer sums in registers, their float sums kept in y between
 * blocks. One x row (a decode step's gemv, memory-bound): each block is
 * unpacked in registers and met at once, with no buffer to write and
 * read back.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/kn_int.h"

/* Bytes ahead that each block asks the caches for, in the products of
 * several x rows (a prompt's, as qpack_avx512.c; SmolLM2's 603-token
 * prompt at AVX2, 5 alternated runs, 812 against 893 tok/s without and
 * with). Q4_K's one x row streams on the hardware prefetchers alone
 * (asking 4 KiB ahead: 13.9 against 19.2 GB/s on two Zen 4 threads). */
#define QA_PF 4096

/* Bytes ahead that a Q8_0 or Q4_1 block of one x row (a decode step's
 * gemv) asks the L2 for. At AVX2 a block's arithmetic is about twice as
 * many instructions per byte as at AVX-512, so the out-of-order window
 * holds fewer of the blocks still coming from memory, and the hardware
 * prefetchers alone left the loop below the memory's speed. Two Zen 4
 * threads over weights on huge pages (as the daemon's), medians of 60
 * passes alternated in one process: Q8_0 262 144 x 640 (Gemma 3's output
 * projection) 23.7 GB/s without, 26.1 with (plain 256-bit reads 31.0);
 * Q4_1 1536 columns 20.1 against 41.7, 576 columns 37.7 against 45.0
 * (plain 37.8 and 45.6). Into L1 instead, or 2 KiB ahead, was slower; 16
 * KiB as 8. Q5_0, whose fifth bits make its blocks the longest to
 * compute, gained nothing (42.1 against 40.9) and does without. Whole
 * decode steps (INFERD_CPU_ISA=avx2, 200 greedy tokens, five sets of
 * 8-24 alternated runs on a noisy host): Gemma 3 270M 0.97-1.14x (mean
 * 1.05x), SmolLM2 135M 1.00-1.15x (mean 1.07x). qpack_avx512.c's gemv
 * does without: the same ask slowed both models there (108.4 against
 * 99.3 and 274.2 against 252.7 tok/s). */
#define QA_PF1 8192

#define QA_INLINE static inline __attribute__((always_inline))

enum qa_kind { QA_Q8_0, QA_Q5_0, QA_Q4_1 };

/* One half (8 rows) of a block, unpacked: the 8 chunks' weight bytes as
 * vpmaddubsw's unsigned operand (u) and, for Q8_0, the signed codes whose
 * signs x takes (s); the rows' d and m as floats. */
struct qa_bh {
	__m256i u[8];
	__m256i s[8];
	__m256 d, m;
};

static void qa_quantize_x(const float *restrict x, void *restrict xq, size_t k)
{
	kn__qpack_q8_0_x(&kn__qops_avx2[KN_Q_Q8_0], x, xq, k);
}

static void qa_quantize_x1(const float *restrict x, void *restrict xq, size_t k)
{
	kn__qpack_q8_1_x(&kn__qops_avx2[KN_Q_Q4_1], x, xq, k);
}

QA_INLINE __m256 qa_half(const uint8_t *p)
{
	return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

/* Q8_0 block at o, half h: codes stored plus 128. */
QA_INLINE void qa_unpack_q8_0(const uint8_t *o, int h, struct qa_bh *t)
{
	const __m256i x80 = _mm256_set1_epi8((char)0x80);
	for (int c = 0; c < 8; c++) {
		__m256i w = _mm256_xor_si256(
			_mm256_loadu_si256((const __m256i *)(o + 32 + 64 * c + 32 * h)), x80);
		t->s[c] = w;
		t->u[c] = _mm256_abs_epi8(w);
	}
	t->d = qa_half(o + 16 * h);
}

/* The fifth bits of chunk c's codes, 16 at each set bit: in every row's
 * lane (its qh at qh's dword), byte i takes bit `first + i` of qh (first
 * a multiple of 4): its byte first / 8 is broadcast to the lane's 4
 * bytes, then byte i is tested against its own bit. */
QA_INLINE __m256i qa_bits(__m256i qh, int first)
{
	int byte = first / 8, sh = first % 8;
	const __m256i pick = _mm256_add_epi8(
		_mm256_set1_epi8((char)byte),
		_mm256_set_epi8(12, 12, 12, 12, 8, 8, 8, 8, 4, 4, 4, 4, 0, 0, 0, 0, 12, 12, 12, 12, 8,
				8, 8, 8, 4, 4, 4, 4, 0, 0, 0, 0));
	const __m256i bit = _mm256_set1_epi32((int)(0x08040201u << sh));
	__m256i v = _mm256_and_si256(_mm256_shuffle_epi8(qh, pick), bit);
	return _mm256_and_si256(_mm256_cmpeq_epi8(v, bit), _mm256_set1_epi8(16));
}

/* Q5_0 block at o, half h: chunk c's low nibbles are codes 4c.. (u[c]),
 * its high ones 16 + 4c.. (u[4 + c]), each with its fifth bit. */
QA_INLINE void qa_unpack_q5_0(const uint8_t *o, int h, struct qa_bh *t)
{
	const __m256i m4 = _mm256_set1_epi8(15);
	__m256i qh = _mm256_loadu_si256((const __m256i *)(o + 32 + 32 * h));
	for (int c = 0; c < 4; c++) {
		__m256i q = _mm256_loadu_si256((const __m256i *)(o + 96 + 64 * c + 32 * h));
		t->u[c] = _mm256_or_si256(_mm256_and_si256(q, m4), qa_bits(qh, 4 * c));
		t->u[c + 4] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4),
					      qa_bits(qh, 16 + 4 * c));
	}
	t->d = qa_half(o + 16 * h);
}

QA_INLINE void qa_unpack_q4_1(const uint8_t *o, int h, struct qa_bh *t)
{
	const __m256i m4 = _mm256_set1_epi8(15);
	for (int c = 0; c < 4; c++) {
		__m256i q = _mm256_loadu_si256((const __m256i *)(o + 64 + 64 * c + 32 * h));
		t->u[c] = _mm256_and_si256(q, m4);
		t->u[c + 4] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
	}
	t->d = qa_half(o + 16 * h);
	t->m = qa_half(o + 32 + 16 * h);
}

/* The x codes 4c .. 4c + 3 of chunk c in every lane. Chunk c of Q5_0 and
 * Q4_1 (c >= 4: the high nibbles) meets x codes 16 + 4 (c - 4); Q8_0's
 * chunk c meets 4c: both are xc + 4 * c when the high chunks follow the
 * low ones, as they do here. */
QA_INLINE __m256i qa_x4(const uint8_t *xc, int c)
{
	int32_t v;
	memcpy(&v, xc + 4 * c, 4);
	return _mm256_set1_epi32(v);
}

/* The exact integer dot of one half (8 rows) of a block with an x row's
 * codes xc (32 int8), in int32 lanes (Q5_0: of its stored codes 0..31,
 * which qa_fin corrects). */
QA_INLINE __m256i qa_isum(const struct qa_bh *t, const uint8_t *xc, enum qa_kind kind)
{
	const __m256i ones = _mm256_set1_epi16(1);
	if (kind == QA_Q8_0) {
		__m256i a = _mm256_setzero_si256();
		for (int c = 0; c < 8; c++) {
			__m256i p = _mm256_maddubs_epi16(t->u[c],
							 _mm256_sign_epi8(qa_x4(xc, c), t->s[c]));
			a = _mm256_add_epi32(a, _mm256_madd_epi16(p, ones));
		}
		return a;
	}
	if (kind == QA_Q4_1) {
		__m256i p = _mm256_maddubs_epi16(t->u[0], qa_x4(xc, 0));
		for (int c = 1; c < 8; c++)
			p = _mm256_add_epi16(p, _mm256_maddubs_epi16(t->u[c], qa_x4(xc, c)));
		return _mm256_madd_epi16(p, ones);
	}
	__m256i l = _mm256_maddubs_epi16(t->u[0], qa_x4(xc, 0));
	__m256i h = _mm256_maddubs_epi16(t->u[4], qa_x4(xc, 4));
	for (int c = 1; c < 4; c++) {
		l = _mm256_add_epi16(l, _mm256_maddubs_epi16(t->u[c], qa_x4(xc, c)));
		h = _mm256_add_epi16(h, _mm256_maddubs_epi16(t->u[c + 4], qa_x4(xc, c + 4)));
	}
	return _mm256_add_epi32(_mm256_madd_epi16(l, ones), _mm256_madd_epi16(h, ones));
}

QA_INLINE void qa_unpack(const uint8_t *o, int h, struct qa_bh *t, enum qa_kind kind)
{
	if (kind == QA_Q8_0)
		qa_unpack_q8_0(o, h, t);
	else if (kind == QA_Q5_0)
		qa_unpack_q5_0(o, h, t);
	else
		qa_unpack_q4_1(o, h, t);
}

QA_INLINE void qa_prefetch(const uint8_t *o, size_t bb)
{
	for (size_t l = 0; l < bb; l += 64)
		_mm_prefetch((const char *)o + QA_PF + l, _MM_HINT_T0);
}

/* Block b's x scale d_x and code sum (Q4_1: its s, a float's bits) of x
 * row xj (nb blocks). */
QA_INLINE void qa_xmeta(const uint8_t *xj, size_t b, size_t nb, float *xd, int32_t *xsum)
{
	memcpy(xd, xj + nb * KN__QK + 4 * b, 4);
	memcpy(xsum, xj + nb * (KN__QK + 4) + 4 * b, 4);
}

/* acc (8 rows) += the block's integer dots s with d_w (*d) d_x (and
 * Q4_1's m_w (*m) times x's s; Q5_0's s first less 16 times x's code
 * sum, its codes' offset): the reference's operations, in its order. */
QA_INLINE __m256 qa_fin(const __m256 *d, const __m256 *m, __m256i s, float xd, int32_t xsum,
			enum qa_kind kind, __m256 acc)
{
	if (kind == QA_Q5_0)
		s = _mm256_add_epi32(_mm256_set1_epi32(xsum * -16), s);
	acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(*d, _mm256_set1_ps(xd)), acc);
	if (kind == QA_Q4_1)
		acc = _mm256_fmadd_ps(*m, _mm256_castsi256_ps(_mm256_set1_epi32(xsum)), acc);
	return acc;
}

QA_INLINE __m256 qa_block(const struct qa_bh *t, const uint8_t *xj, size_t b, size_t nb,
			  enum qa_kind kind, __m256 acc)
{
	float xd;
	int32_t xsum;
	qa_xmeta(xj, b, nb, &xd, &xsum);
	return qa_fin(&t->d, &t->m, qa_isum(t, xj + b * KN__QK, kind), xd, xsum, kind, acc);
}

/* The 16 rows of the group at gw (blocks of bb bytes) against one x
 * partner row: each block unpacked in registers as it is met, Q8_0's and
 * Q4_1's asking the L2 for the bytes QA_PF1 ahead. */
QA_INLINE void qa_group1(const uint8_t *gw, size_t bb, enum qa_kind kind, const uint8_t *xq,
			 float *y, size_t nb)
{
	__m256 acc[2] = { _mm256_setzero_ps(), _mm256_setzero_ps() };
	for (size_t b = 0; b < nb; b++) {
		const uint8_t *o = gw + b * bb;
		for (size_t l = 0; kind != QA_Q5_0 && l < bb; l += 64)
			_mm_prefetch((const char *)o + QA_PF1 + l, _MM_HINT_T1);
		for (int h = 0; h < 2; h++) {
			struct qa_bh t;
			qa_unpack(o, h, &t, kind);
			acc[h] = qa_block(&t, xq, b, nb, kind, acc[h]);
		}
	}
	_mm256_storeu_ps(y, acc[0]);
	_mm256_storeu_ps(y + 8, acc[1]);
}

/* Several x rows (qa_group and what it calls, below): the x rows are met
 * four at a time by each block, unpacked once into a buffer in L1. Per
 * chunk each row's codes are broadcast once for both halves, and the 8
 * products' integer sums (4 rows by 2 halves) stay in registers for the
 * block: the steps are asm because GCC, given them as intrinsics, spilled
 * the sums and ran at half the speed. The rows' float sums wait in y
 * between blocks. Per (weight row, x row) the integer sums are exact and
 * the float operations are qa_block's, in its order: the same bits. */

/* p[j][h] = the int16 sums of n chunks, chunk c's codes u0[c] (half 0)
 * and u1[c] (half 1) against x row j's codes x + j xs + 4c: one
 * vpmaddubsw per chunk, half and row. */
QA_INLINE void qa_u_run(const __m256i *u0, const __m256i *u1, int n, const uint8_t *x,
			size_t xs, int NX, __m256i p[4][2])
{
	for (int j = 0; j < NX; j++)
		p[j][0] = p[j][1] = _mm256_setzero_si256();
	for (int c = 0; c < n; c++) {
		__m256i w0 = u0[c], w1 = u1[c];
#pragma GCC unroll 4
		for (int j = 0; j < NX; j++) {
			__m256i xv, tt;
			__asm__("vpbroadcastd %[x], %[xv]\n\t"
				"vpmaddubsw %[xv], %[w0], %[t]\n\t"
				"vpaddw %[t], %[p0], %[p0]\n\t"
				"vpmaddubsw %[xv], %[w1], %[t]\n\t"
				"vpaddw %[t], %[p1], %[p1]"
				: [p0] "+x"(p[j][0]), [p1] "+x"(p[j][1]), [xv] "=&x"(xv), [t] "=&x"(tt)
				: [w0] "x"(w0), [w1] "x"(w1),
				  [x] "m"(*(const int32_t *)(x + j * xs + 4 * c)));
		}
	}
}

/* y + j ldy (16 floats; block 0 starts them at 0) += block b of nb of x
 * row j < NX (partner rows at xq + j xs): its integer sums s[j][h] with
 * half h's scales d[h] (and Q4_1's mins m[h]), qa_fin per half. */
QA_INLINE void qa_rows_fin(const __m256 *const d[2], const __m256 *const m[2], __m256i s[4][2],
			   enum qa_kind kind, size_t b, size_t nb, const uint8_t *xq, size_t xs,
			   float *y, size_t ldy, int NX)
{
	for (int j = 0; j < NX; j++) {
		float xd;
		int32_t xsum;
		qa_xmeta(xq + j * xs, b, nb, &xd, &xsum);
		float *yj = y + j * ldy;
		for (int h = 0; h < 2; h++) {
			__m256 acc = b ? _mm256_loadu_ps(yj + 8 * h) : _mm256_setzero_ps();
			_mm256_storeu_ps(yj + 8 * h, qa_fin(d[h], m[h], s[j][h], xd, xsum, kind, acc));
		}
	}
}

/* Q4_1 / Q5_0: NX (1..4) x rows (partner rows at xq + j xs, results at
 * y + j ldy) += block b of nb against its unpacked halves t: vpmaddubsw
 * into int16 sums (Q4_1: the block's 8 chunks, Q5_0: 4 at a time),
 * widened by vpmaddwd. */
QA_INLINE void qa_u_rows(const struct qa_bh *t, size_t b, size_t nb, enum qa_kind kind,
			 const uint8_t *xq, size_t xs, float *y, size_t ldy, int NX)
{
	const __m256i ones = _mm256_set1_epi16(1);
	__m256i s[4][2], p[4][2];
	const uint8_t *xb = xq + b * KN__QK;
	qa_u_run(t[0].u, t[1].u, kind == QA_Q5_0 ? 4 : 8, xb, xs, NX, p);
	for (int j = 0; j < NX; j++)
		for (int h = 0; h < 2; h++)
			s[j][h] = _mm256_madd_epi16(p[j][h], ones);
	if (kind == QA_Q5_0) {
		qa_u_run(t[0].u + 4, t[1].u + 4, 4, xb + 16, xs, NX, p);
		for (int j = 0; j < NX; j++)
			for (int h = 0; h < 2; h++)
				s[j][h] = _mm256_add_epi32(s[j][h], _mm256_madd_epi16(p[j][h], ones));
	}
	const __m256 *const d[2] = { &t[0].d, &t[1].d }, *const m[2] = { &t[0].m, &t[1].m };
	qa_rows_fin(d, m, s, kind, b, nb, xq, xs, y, ldy, NX);
}

/* A Q8_0 block, both halves, as int16 pairs for vpmaddwd: w[h][p] holds
 * codes 2p and 2p + 1 of half h's 8 rows, a row a dword lane. */
struct qa_w16 {
	__m256i w[2][16];
	__m256 d[2];
};

/* Q8_0 block at o: each row's 4 codes of a chunk (a dword, stored plus
 * 128) go to the high bytes of two dwords' words, which shift down with
 * their signs. */
QA_INLINE void qa_unpack_w16(const uint8_t *o, struct qa_w16 *t)
{
	const __m256i lo = _mm256_setr_epi8(-1, 0, -1, 1, -1, 4, -1, 5, -1, 8, -1, 9, -1, 12, -1, 13,
					    -1, 0, -1, 1, -1, 4, -1, 5, -1, 8, -1, 9, -1, 12, -1, 13);
	const __m256i hi = _mm256_setr_epi8(-1, 2, -1, 3, -1, 6, -1, 7, -1, 10, -1, 11, -1, 14, -1,
					    15, -1, 2, -1, 3, -1, 6, -1, 7, -1, 10, -1, 11, -1, 14,
					    -1, 15);
	const __m256i x80 = _mm256_set1_epi8((char)0x80);
	for (int h = 0; h < 2; h++) {
		for (int c = 0; c < 8; c++) {
			__m256i w = _mm256_xor_si256(
				_mm256_loadu_si256((const __m256i *)(o + 32 + 64 * c + 32 * h)), x80);
			t->w[h][2 * c] = _mm256_srai_epi16(_mm256_shuffle_epi8(w, lo), 8);
			t->w[h][2 * c + 1] = _mm256_srai_epi16(_mm256_shuffle_epi8(w, hi), 8);
		}
		t->d[h] = qa_half(o + 16 * h);
	}
}

/* Q8_0: as qa_u_rows, with vpmaddwd on int16 codes (each x row's block
 * widened once) instead of qa_isum's vpsignb + vpmaddubsw + vpmaddwd:
 * on Zen vpsignb takes the multipliers' pipes, 1.6 cycles a 32-code step
 * against 1.25 for two vpmaddwd (the same exact integer dot). */
QA_INLINE void qa_q8_rows(const struct qa_w16 *t, size_t b, size_t nb, const uint8_t *xq,
			  size_t xs, float *y, size_t ldy, int NX)
{
	int16_t xw[4][KN__QK] __attribute__((aligned(32)));
	for (int j = 0; j < NX; j++) {
		const uint8_t *xc = xq + j * xs + b * KN__QK;
		_mm256_store_si256((__m256i *)xw[j],
				   _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)xc)));
		_mm256_store_si256((__m256i *)(xw[j] + 16),
				   _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(xc + 16))));
	}
	__m256i a[4][2];
	for (int j = 0; j < NX; j++)
		a[j][0] = a[j][1] = _mm256_setzero_si256();
#pragma GCC unroll 2
	for (int p = 0; p < 16; p++) {
		__m256i w0 = t->w[0][p], w1 = t->w[1][p];
#pragma GCC unroll 4
		for (int j = 0; j < NX; j++) {
			__m256i t0, t1;
			__asm__("vpbroadcastd %[x], %[t0]\n\t"
				"vpmaddwd %[w0], %[t0], %[t1]\n\t"
				"vpmaddwd %[w1], %[t0], %[t0]\n\t"
				"vpaddd %[t1], %[a0], %[a0]\n\t"
				"vpaddd %[t0], %[a1], %[a1]"
				: [a0] "+x"(a[j][0]), [a1] "+x"(a[j][1]), [t0] "=&x"(t0), [t1] "=&x"(t1)
				: [w0] "x"(w0), [w1] "x"(w1), [x] "m"(*(const int32_t *)(xw[j] + 2 * p)));
		}
	}
	const __m256 *const d[2] = { &t->d[0], &t->d[1] }, *const m[2] = { NULL, NULL };
	qa_rows_fin(d, m, a, QA_Q8_0, b, nb, xq, xs, y, ldy, NX);
}

/* A block unpacked for several x rows: Q8_0's in w, the others' in h. */
union qa_blk {
	struct qa_bh h[2];
	struct qa_w16 w;
};

QA_INLINE void qa_rows(const union qa_blk *t, enum qa_kind kind, size_t b, size_t nb,
		       const uint8_t *xq, size_t xs, float *y, size_t ldy, int NX)
{
	if (kind == QA_Q8_0)
		qa_q8_rows(&t->w, b, nb, xq, xs, y, ldy, NX);
	else
		qa_u_rows(t->h, b, nb, kind, xq, xs, y, ldy, NX);
}

/* The 16 rows of the group at gw (blocks of bb bytes) against n_x x
 * partner rows (row j at xq + j * xs; its results at y + j * ldy). */
QA_INLINE void qa_group(const uint8_t *gw, size_t bb, enum qa_kind kind, const uint8_t *xq,
			size_t xs, size_t n_x, float *y, size_t ldy, size_t nb)
{
	union qa_blk t;
	for (size_t b = 0; b < nb; b++) {
		const uint8_t *o = gw + b * bb;
		qa_prefetch(o, bb);
		if (kind == QA_Q8_0) {
			qa_unpack_w16(o, &t.w);
		} else {
			qa_unpack(o, 0, &t.h[0], kind);
			qa_unpack(o, 1, &t.h[1], kind);
		}
		for (size_t j = 0; j < n_x; j += 4) {
			size_t nx = n_x - j < 4 ? n_x - j : 4;
			const uint8_t *xj = xq + j * xs;
			float *yj = y + j * ldy;
			switch (nx) {
			case 4: qa_rows(&t, kind, b, nb, xj, xs, yj, ldy, 4); break;
			case 3: qa_rows(&t, kind, b, nb, xj, xs, yj, ldy, 3); break;
			case 2: qa_rows(&t, kind, b, nb, xj, xs, yj, ldy, 2); break;
			default: qa_rows(&t, kind, b, nb, xj, xs, yj, ldy, 1);
			}
		}
	}
}

QA_INLINE void qa_gemm(const void *restrict W, size_t rb, const void *restrict xq,
		       size_t xq_stride, size_t n_x, float *restrict y, size_t ldy, size_t n_rows,
		       size_t k, size_t bb, enum qa_kind kind)
{
	const uint8_t *w = W;
	for (size_t g = 0; g < n_rows / KN__QP_ROWS; g++) {
		const uint8_t *gw = w + g * KN__QP_ROWS * rb;
		if (n_x == 1)
			qa_group1(gw, bb, kind, xq, y + g * KN__QP_ROWS, k / KN__QK);
		else
			qa_group(gw, bb, kind, xq, xq_stride, n_x, y + g * KN__QP_ROWS, ldy,
				 k / KN__QK);
	}
}

/* ---- Q4_K: 256-element blocks, 8 sub-blocks with 6-bit scales and mins -- */

/* One half (8 rows) of a Q4_K block, unpacked: sub-block s's chunk c
 * (codes 4c .. 4c + 3 of the 8 rows) at u[8 s + c]; its scale as an int16
 * pair in each row's lane (sc[s], for vpmaddwd); the mins of sub-blocks
 * 2t, 2t + 1 as an int16 pair (mp[t]); d and dmin as floats. */
struct qk_bh {
	__m256i u[64];
	__m256i sc[8];
	__m256i mp[4];
	__m256 d, dm;
};

/* The bytes (i0, i1) of every dword as zero-extended int16 pairs. */
QA_INLINE __m256i qk_pairs(__m256i v, int i0, int i1)
{
	const __m256i pick = _mm256_setr_epi8(
		(char)i0, -1, (char)i1, -1, (char)(4 + i0), -1, (char)(4 + i1), -1, (char)(8 + i0), -1,
		(char)(8 + i1), -1, (char)(12 + i0), -1, (char)(12 + i1), -1, (char)i0, -1, (char)i1,
		-1, (char)(4 + i0), -1, (char)(4 + i1), -1, (char)(8 + i0), -1, (char)(8 + i1), -1,
		(char)(12 + i0), -1, (char)(12 + i1), -1);
	return _mm256_shuffle_epi8(v, pick);
}

/* The 8 rows' scale words decoded together, each lane one row, by the
 * bit operations ggml's get_scale_min_k4 does on one row's bytes
 * (kernels/ref/qpack.c qp_group_q4_k). */
QA_INLINE void qk_unpack(const uint8_t *o, int h, struct qk_bh *t)
{
	const __m256i m4 = _mm256_set1_epi8(15), m6 = _mm256_set1_epi8(63);
	const __m256i m2 = _mm256_set1_epi8(3);
	__m256i a = _mm256_loadu_si256((const __m256i *)(o + 64 + 32 * h));
	__m256i b = _mm256_loadu_si256((const __m256i *)(o + 128 + 32 * h));
	__m256i c = _mm256_loadu_si256((const __m256i *)(o + 192 + 32 * h));
	__m256i sc03 = _mm256_and_si256(a, m6), m03 = _mm256_and_si256(b, m6);
	__m256i sc47 = _mm256_or_si256(
		_mm256_and_si256(c, m4),
		_mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(a, 6), m2), 4));
	__m256i m47 = _mm256_or_si256(
		_mm256_and_si256(_mm256_srli_epi32(c, 4), m4),
		_mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(b, 6), m2), 4));
	for (int sb = 0; sb < 4; sb++) {
		t->sc[sb] = qk_pairs(sc03, sb, sb);
		t->sc[sb + 4] = qk_pairs(sc47, sb, sb);
	}
	t->mp[0] = qk_pairs(m03, 0, 1);
	t->mp[1] = qk_pairs(m03, 2, 3);
	t->mp[2] = qk_pairs(m47, 0, 1);
	t->mp[3] = qk_pairs(m47, 2, 3);
	for (int p = 0; p < 4; p++)
		for (int ch = 0; ch < 8; ch++) {
			__m256i q = _mm256_loadu_si256(
				(const __m256i *)(o + 256 + 512 * p + 64 * ch + 32 * h));
			t->u[16 * p + ch] = _mm256_and_si256(q, m4);
			t->u[16 * p + 8 + ch] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
		}
	t->d = qa_half(o + 16 * h);
	t->dm = qa_half(o + 32 + 16 * h);
}

/* acc (8 rows) += the half t's integer sums isum with d_w d_x, less the
 * mins (mp) against x block xb's sums of 32 codes with dmin_w d_x: the
 * reference's two FMAs. */
QA_INLINE __m256 qk_fin(const struct qk_bh *t, const uint8_t *xb, __m256i isum, __m256 acc)
{
	float xd;
	int16_t bs[16];
	memcpy(&xd, xb, 4);
	memcpy(bs, xb + 260, sizeof(bs));
	__m256i msum = _mm256_setzero_si256();
	for (int k = 0; k < 4; k++) {
		uint32_t lo = (uint16_t)(bs[4 * k] + bs[4 * k + 1]);
		uint32_t hi = (uint16_t)(bs[4 * k + 2] + bs[4 * k + 3]);
		msum = _mm256_add_epi32(msum, _mm256_madd_epi16(t->mp[k],
								_mm256_set1_epi32((int)(lo | hi << 16))));
	}
	__m256 vxd = _mm256_set1_ps(xd);
	acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(t->d, vxd), acc);
	return _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_mul_ps(t->dm, vxd), acc);
}

/* NX (1..4) x rows (Q8_K blocks at xb + j xs; results at y + j ldy) +=
 * the block's halves t: per sub-block the 8 chunks' int16 sums (at most
 * 8 * 3810) times its scale by vpmaddwd, then qk_fin. */
QA_INLINE void qk_rows(const struct qk_bh *t, const uint8_t *xb, size_t xs, float *y,
		       size_t ldy, int NX, int first)
{
	__m256i is[4][2], p[4][2];
	for (int j = 0; j < NX; j++)
		is[j][0] = is[j][1] = _mm256_setzero_si256();
	for (int sb = 0; sb < 8; sb++) {
		qa_u_run(t[0].u + 8 * sb, t[1].u + 8 * sb, 8, xb + 4 + 32 * sb, xs, NX, p);
		for (int j = 0; j < NX; j++)
			for (int h = 0; h < 2; h++)
				is[j][h] = _mm256_add_epi32(is[j][h],
							    _mm256_madd_epi16(p[j][h], t[h].sc[sb]));
	}
	for (int j = 0; j < NX; j++) {
		float *yj = y + j * ldy;
		for (int h = 0; h < 2; h++) {
			__m256 acc = first ? _mm256_setzero_ps() : _mm256_loadu_ps(yj + 8 * h);
			_mm256_storeu_ps(yj + 8 * h, qk_fin(&t[h], xb + j * xs, is[j][h], acc));
		}
	}
}

/* Every group, each block unpacked once (both halves) for all n_x rows,
 * met four at a time (as qa_group), whose float sums wait in y between
 * blocks. */
static void qk_gemm_xq_q4_k(const void *restrict W, size_t rb, const void *restrict xq,
			    size_t xs, size_t n_x, float *restrict y, size_t ldy, size_t n_rows,
			    size_t k)
{
	const uint8_t *w = W, *x = xq;
	size_t nb = k / KN__QK_K;
	struct qk_bh t[2];
	for (size_t g = 0; g < n_rows / KN__QP_ROWS; g++) {
		const uint8_t *gw = w + g * KN__QP_ROWS * rb;
		float *yg = y + g * KN__QP_ROWS;
		for (size_t b = 0; b < nb; b++) {
			const uint8_t *o = gw + b * KN__QP_Q4_K_BLOCK;
			if (n_x > 1)
				qa_prefetch(o, KN__QP_Q4_K_BLOCK);
			qk_unpack(o, 0, &t[0]);
			qk_unpack(o, 1, &t[1]);
			for (size_t j = 0; j < n_x; j += 4) {
				const uint8_t *xb = x + j * xs + b * KN__Q8_K_BYTES;
				float *yj = yg + j * ldy;
				switch (n_x - j < 4 ? n_x - j : 4) {
				case 4: qk_rows(t, xb, xs, yj, ldy, 4, b == 0); break;
				case 3: qk_rows(t, xb, xs, yj, ldy, 3, b == 0); break;
				case 2: qk_rows(t, xb, xs, yj, ldy, 2, b == 0); break;
				default: qk_rows(t, xb, xs, yj, ldy, 1, b == 0);
				}
			}
		}
	}
}

static void qk_gemv_xq_q4_k(const void *restrict W, size_t rb, const void *restrict xq,
			    float *restrict y, size_t n_rows, size_t k)
{
	qk_gemm_xq_q4_k(W, rb, xq, 0, 1, y, 0, n_rows, k);
}

static void qk_quantize_x(const float *restrict x, void *restrict xq, size_t k)
{
	kn__qops_avx2[KN_Q_Q4_K].quantize_x(x, xq, k);
}

#define QA_PRODUCTS(T, BLOCK, KIND)                                                              \
	static void qa_gemm_xq_##T(const void *restrict W, size_t rb, const void *restrict xq,    \
				   size_t xq_stride, size_t n_x, float *restrict y, size_t ldy,   \
				   size_t n_rows, size_t k)                                       \
	{                                                                                         \
		qa_gemm(W, rb, xq, xq_stride, n_x, y, ldy, n_rows, k, BLOCK, KIND);              \
	}                                                                                         \
	static void qa_gemv_xq_##T(const void *restrict W, size_t rb, const void *restrict xq,    \
				   float *restrict y, size_t n_rows, size_t k)                    \
	{                                                                                         \
		qa_gemm(W, rb, xq, 0, 1, y, 0, n_rows, k, BLOCK, KIND);                           \
	}

QA_PRODUCTS(q8_0, KN__QP_Q8_0_BLOCK, QA_Q8_0)
QA_PRODUCTS(q5_0, KN__QP_Q5_0_BLOCK, QA_Q5_0)
QA_PRODUCTS(q4_1, KN__QP_Q4_1_BLOCK, QA_Q4_1)

#define QA_OPS(TYPE, T, QX)                                                                      \
	{ .type = TYPE, .geom = &kn__qtypes[TYPE], .xq_bytes = kn__qpack_xq_bytes,                      \
	  .quantize_x = QX, .gemv_xq = qa_gemv_xq_##T, .gemm_xq = qa_gemm_xq_##T }

static const struct kn_qops qa_q8_0_ops = QA_OPS(KN_Q_Q8_0, q8_0, qa_quantize_x);
static const struct kn_qops qa_q5_0_ops = QA_OPS(KN_Q_Q5_0, q5_0, qa_quantize_x);
static const struct kn_qops qa_q4_1_ops = QA_OPS(KN_Q_Q4_1, q4_1, qa_quantize_x1);

static const struct kn_qops qk_q4_k_ops = {
	.type = KN_Q_Q4_K, .geom = &kn__qtypes[KN_Q_Q4_K], .xq_bytes = kn__qpack_xq_bytes_k,
	.quantize_x = qk_quantize_x, .gemv_xq = qk_gemv_xq_q4_k, .gemm_xq = qk_gemm_xq_q4_k
};

const struct kn_qpack kn__qpack_avx2[KN_Q_MAX] = {
	[KN_Q_Q8_0] = { &qa_q8_0_ops, KN__QP_ROWS, kn__qpack_q8_0 },
	[KN_Q_Q5_0] = { &qa_q5_0_ops, KN__QP_ROWS, kn__qpack_q5_0 },
	[KN_Q_Q4_1] = { &qa_q4_1_ops, KN__QP_ROWS, kn__qpack_q4_1 },
	[KN_Q_Q4_K] = { &qk_q4_k_ops, KN__QP_ROWS, kn__qpack_q4_k },
};
