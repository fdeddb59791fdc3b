/* kernels/x86/bf16_amx.c - the bfloat16 product of kn_bf16.h on Intel AMX
 * (Intel 64 and IA-32 Architectures Software Developer's Manual, vol. 1
 * ch. 18 "Programming with Intel AMX"; TDPBF16PS).
 *
 * Eight tiles of 16 rows x 64 bytes: C in tiles 0-3 (a 32 x 32 float32
 * block of y), A in 4-5 (32 rows of x, 32 bfloat16 each), B in 6-7 (two
 * packed 16-column blocks of W, 16 rows of k-pairs). Rows of x go in
 * blocks of 32: converted once to bfloat16 (round to nearest even, zero
 * past K and past M) into the scratch, then every pair of 16-column
 * blocks of W runs the k loop over it - the packed W of a Whisper linear
 * (at most 1536 x 384 bfloat16, 1.2 MB) stays in L2 while the rows go by.
 * Tiles that lie wholly inside y are stored there directly; edge tiles
 * through a 16 x 16 buffer.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/kn_bf16_int.h"
#include "kernels/kn_half.h"
#include "kernels/x86/bf16_avx512.h"

struct kn_tilecfg {
	uint8_t palette, start_row;
	uint8_t reserved[14];
	uint16_t colsb[16];
	uint8_t rows[16];
};

static void kn_tiles_config(void)
{
	struct kn_tilecfg c;
	memset(&c, 0, sizeof(c));
	c.palette = 1;
	for (int i = 0; i < 8; i++) {
		c.rows[i] = 16;
		c.colsb[i] = 64;
	}
	_tile_loadconfig(&c);
}

/* rows (< = 32) rows of x into a [32][kp] bfloat16 block, zero-padded. */
static void kn_rows_to_bf16(const float *x, size_t ldx, size_t rows, size_t K, size_t kp,
			    uint16_t *a)
{
	for (size_t r = 0; r < KN__BF16_TM; r++) {
		uint16_t *dst = a + r * kp;
		size_t k = r < rows ? K : 0;
		if (r < rows)
			kn__bf16_from_f32_avx512(x + r * ldx, dst, K);
		memset(dst + k, 0, (kp - k) * sizeof(*dst));
	}
}

/* 16 floats at p (the first nv of them; the rest 0), as raw bits. */
static inline __m512i kn_load16(const float *p, size_t nv)
{
	__mmask16 m = nv >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << nv) - 1);
	return _mm512_castps_si512(_mm512_maskz_loadu_ps(m, p));
}

void kn__bf16_from_f32_avx512(const float *x, uint16_t *y, size_t n)
{
	size_t i = 0;
	for (; i + 16 <= n; i += 16) {
		__m512i u = _mm512_castps_si512(_mm512_loadu_ps(x + i));
		_mm256_storeu_si256((__m256i *)(y + i), kn__bf16x16(u));
	}
	for (; i < n; i++)
		y[i] = kn_f32_to_bf16(x[i]);
}

/* Blocks of 16 x 16: 16 rows of x converted (kn__bf16x16) into a small
 * buffer, then written out column by column. */
void kn__bf16_from_f32_t_avx512(const float *x, size_t ldx, size_t rows, size_t cols,
				uint16_t *y, size_t ldy)
{
	uint16_t t[16][16];
	for (size_t r0 = 0; r0 < rows; r0 += 16) {
		size_t nr = rows - r0 < 16 ? rows - r0 : 16;
		for (size_t c0 = 0; c0 < cols; c0 += 16) {
			size_t nc = cols - c0 < 16 ? cols - c0 : 16;
			for (size_t i = 0; i < nr; i++) {
				__m512i u = kn_load16(x + (r0 + i) * ldx + c0, nc);
				_mm256_storeu_si256((__m256i *)t[i], kn__bf16x16(u));
			}
			for (size_t c = 0; c < nc; c++)
				for (size_t i = 0; i < nr; i++)
					y[(c0 + c) * ldy + r0 + i] = t[i][c];
		}
	}
}

void kn__bf16_pack_cols_avx512(const float *B, size_t ldb, size_t N, size_t K, uint16_t *out)
{
	size_t nb = (N + KN__BF16_NB - 1) / KN__BF16_NB, kb = (K + KN__BF16_KB - 1) / KN__BF16_KB;
	const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);
	for (size_t i = 0; i < nb; i++) {
		size_t n0 = i * KN__BF16_NB, nv = N - n0 < 16 ? N - n0 : 16;
		for (size_t j = 0; j < kb; j++) {
			uint16_t *blk = out + (i * kb + j) * KN__BF16_NB * KN__BF16_KB;
			for (size_t pair = 0; pair < KN__BF16_KB / 2; pair++) {
				size_t k = j * KN__BF16_KB + 2 * pair;
				__m512i u0 = k < K ? kn_load16(B + k * ldb + n0, nv) : _mm512_setzero_si512();
				__m512i u1 = k + 1 < K ? kn_load16(B + (k + 1) * ldb + n0, nv)
						       : _mm512_setzero_si512();
				__m512i v = _mm512_or_si512(_mm512_srli_epi32(kn__rne_hi512(u0), 16),
							    _mm512_and_si512(kn__rne_hi512(u1), hi));
				_mm512_storeu_si512(blk + pair * 32, v);
			}
		}
	}
}

void kn__bf16_pack_rows_avx512(const float *W, size_t ldw, size_t N, size_t K, uint16_t *out)
{
	size_t nb = (N + KN__BF16_NB - 1) / KN__BF16_NB, kb = (K + KN__BF16_KB - 1) / KN__BF16_KB;
	/* the high halves of lanes 0..15 of a, then of b: 32 bfloat16 in order */
	const __m512i odd = _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37,
					     35, 33, 31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9,
					     7, 5, 3, 1);
	uint32_t t[16][16];
	for (size_t i = 0; i < nb; i++)
		for (size_t j = 0; j < kb; j++) {
			size_t k0 = j * KN__BF16_KB, kv = K - k0 < 32 ? K - k0 : 32;
			for (size_t c = 0; c < KN__BF16_NB; c++) {
				size_t n = i * KN__BF16_NB + c;
				__m512i v = _mm512_setzero_si512();
				if (n < N) {
					const float *src = W + n * ldw + k0;
					__m512i a = kn__rne_hi512(kn_load16(src, kv));
					__m512i b = kv > 16 ? kn__rne_hi512(kn_load16(src + 16, kv - 16))
							    : _mm512_setzero_si512();
					v = _mm512_permutex2var_epi16(a, odd, b);
				}
				_mm512_storeu_si512(t[c], v); /* t[c][pair]: k-values 2 pair, +1 */
			}
			uint32_t *blk = (uint32_t *)(out + (i * kb + j) * KN__BF16_NB * KN__BF16_KB);
			for (size_t pair = 0; pair < 16; pair++)
				for (size_t c = 0; c < 16; c++)
					blk[pair * 16 + c] = t[c][pair];
		}
}

/* Tile t holds y rows [r, r + 16), columns [c, c + 16): store what lies
 * inside M x N. */
#define KN_STORE(t, r, c)                                                                  \
	do {                                                                               \
		size_t r_ = (r), c_ = (c);                                                 \
		if (r_ + 16 <= M && c_ + 16 <= N) {                                        \
			_tile_stored(t, y + r_ * ldy + c_, (long)(ldy * sizeof(float)));   \
		} else if (r_ < M && c_ < N) {                                             \
			_tile_stored(t, edge, 64);                                         \
			size_t nr_ = M - r_ < 16 ? M - r_ : 16, nc_ = N - c_ < 16 ? N - c_ : 16; \
			for (size_t i_ = 0; i_ < nr_; i_++)                                \
				memcpy(y + (r_ + i_) * ldy + c_, edge + i_ * 16,           \
				       nc_ * sizeof(float));                               \
		}                                                                          \
	} while (0)

/* y rows [m0, m0 + 32) (those below M) = the 32 bfloat16 rows at a
 * (lda elements apart; rows past M are read, their results dropped) times
 * the packed W, + bias. */
static void kn_amx_rows(size_t m0, size_t M, size_t N, size_t kb, const uint16_t *a, size_t lda,
			const uint16_t *Wp, const float *bias, float *y, size_t ldy, float *edge)
{
	size_t nb = (N + KN__BF16_NB - 1) / KN__BF16_NB, blk = KN__BF16_NB * KN__BF16_KB;
	size_t rows = M - m0 < KN__BF16_TM ? M - m0 : KN__BF16_TM;
	long ldab = (long)(lda * sizeof(uint16_t));
	const uint16_t *a0 = a, *a1 = a + 16 * lda;
	size_t j = 0;
	for (; j + 2 <= nb; j += 2) {
		const uint16_t *b0 = Wp + j * kb * blk, *b1 = b0 + kb * blk;
		_tile_zero(0);
		_tile_zero(1);
		_tile_zero(2);
		_tile_zero(3);
		for (size_t k = 0; k < kb; k++) {
			_tile_loadd(4, a0 + k * KN__BF16_KB, ldab);
			_tile_loadd(5, a1 + k * KN__BF16_KB, ldab);
			_tile_loadd(6, b0 + k * blk, 64);
			_tile_loadd(7, b1 + k * blk, 64);
			_tile_dpbf16ps(0, 4, 6);
			_tile_dpbf16ps(1, 4, 7);
			_tile_dpbf16ps(2, 5, 6);
			_tile_dpbf16ps(3, 5, 7);
		}
		KN_STORE(0, m0, j * 16);
		KN_STORE(1, m0, j * 16 + 16);
		KN_STORE(2, m0 + 16, j * 16);
		KN_STORE(3, m0 + 16, j * 16 + 16);
	}
	if (j < nb) { /* an odd last block of 16 columns */
		const uint16_t *b0 = Wp + j * kb * blk;
		_tile_zero(0);
		_tile_zero(2);
		for (size_t k = 0; k < kb; k++) {
			_tile_loadd(4, a0 + k * KN__BF16_KB, ldab);
			_tile_loadd(5, a1 + k * KN__BF16_KB, ldab);
			_tile_loadd(6, b0 + k * blk, 64);
			_tile_dpbf16ps(0, 4, 6);
			_tile_dpbf16ps(2, 5, 6);
		}
		KN_STORE(0, m0, j * 16);
		KN_STORE(2, m0 + 16, j * 16);
	}
	for (size_t r = 0; bias && r < rows; r++) {
		float *row = y + (m0 + r) * ldy;
		size_t n = 0;
		for (; n + 16 <= N; n += 16)
			_mm512_storeu_ps(row + n, _mm512_add_ps(_mm512_loadu_ps(row + n),
								_mm512_loadu_ps(bias + n)));
		for (; n < N; n++)
			row[n] += bias[n];
	}
}

void kn__bf16_linear_amx(size_t M, size_t N, size_t K, const float *x, size_t ldx,
			 const uint16_t *Wp, const float *bias, float *y, size_t ldy,
			 uint16_t *abuf)
{
	size_t kb = (K + KN__BF16_KB - 1) / KN__BF16_KB, kp = kb * KN__BF16_KB;
	float edge[16 * 16];
	kn_tiles_config();
	for (size_t m0 = 0; m0 < M; m0 += KN__BF16_TM) {
		size_t rows = M - m0 < KN__BF16_TM ? M - m0 : KN__BF16_TM;
		kn_rows_to_bf16(x + m0 * ldx, ldx, rows, K, kp, abuf);
		kn_amx_rows(m0, M, N, kb, abuf, kp, Wp, bias, y, ldy, edge);
	}
	_tile_release();
}

void kn__bf16_linear_amx_b16(size_t M, size_t N, size_t K, const uint16_t *xb, size_t ldxb,
			     const uint16_t *Wp, const float *bias, float *y, size_t ldy)
{
	size_t kb = (K + KN__BF16_KB - 1) / KN__BF16_KB;
	float edge[16 * 16];
	kn_tiles_config();
	for (size_t m0 = 0; m0 < M; m0 += KN__BF16_TM)
		kn_amx_rows(m0, M, N, kb, xb + m0 * ldxb, ldxb, Wp, bias, y, ldy, edge);
	_tile_release();
}
