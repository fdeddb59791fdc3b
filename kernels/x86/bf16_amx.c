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
		kn__bf16_rows_avx512(x + m0 * ldx, ldx, rows, K, kp, abuf);
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
