/* kernels/kn_bf16.c - kn_bf16.h: AMX detection and the tile-state
 * permission (once), packing, and the dispatch to x86/bf16_amx.c.
 *
 * Linux hands out the AMX tile data state (8 KB per thread) only to a
 * process that asked for it: arch_prctl(ARCH_REQ_XCOMP_PERM,
 * XFEATURE_XTILEDATA) (Documentation/arch/x86/xstate.rst); without it the
 * first tile instruction faults. Asked here once, for the whole process.
 */
#include <cpuid.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kernels/kn_bf16.h"
#include "kernels/kn_bf16_int.h"
#include "kernels/kn_half.h"

#define KN_ARCH_REQ_XCOMP_PERM 0x1023
#define KN_XFEATURE_XTILEDATA  18

static pthread_once_t kn_amx_once = PTHREAD_ONCE_INIT;
static bool kn_amx; /* written once in kn_amx_detect */

static void kn_amx_detect(void)
{
	unsigned a, b, c, d;
	/* CPUID.(EAX=7,ECX=0):EDX bit 22 AMX-BF16, bit 24 AMX-TILE; the
	 * AVX-512 conversions in the kernel need AVX-512F/BW too (EBX 16, 30) */
	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
		return;
	if (!(d & (1u << 22)) || !(d & (1u << 24)) || !(b & (1u << 16)) || !(b & (1u << 30)))
		return;
	kn_amx = syscall(SYS_arch_prctl, KN_ARCH_REQ_XCOMP_PERM, KN_XFEATURE_XTILEDATA) == 0;
}

bool kn_bf16_ok(void)
{
	pthread_once(&kn_amx_once, kn_amx_detect);
	return kn_amx;
}

size_t kn_bf16_packed_len(size_t N, size_t K)
{
	size_t nb = (N + KN__BF16_NB - 1) / KN__BF16_NB, kb = (K + KN__BF16_KB - 1) / KN__BF16_KB;
	return nb * kb * KN__BF16_NB * KN__BF16_KB;
}

/* Pack element (n, k) = src[n * sn + k * sk] of an N x K operand. */
void kn__bf16_pack_ref(const float *src, size_t sn, size_t sk, size_t N, size_t K,
		       uint16_t *out)
{
	size_t nb = (N + KN__BF16_NB - 1) / KN__BF16_NB, kb = (K + KN__BF16_KB - 1) / KN__BF16_KB;
	for (size_t i = 0; i < nb; i++)
		for (size_t j = 0; j < kb; j++) {
			uint16_t *blk = out + (i * kb + j) * KN__BF16_NB * KN__BF16_KB;
			for (size_t pair = 0; pair < KN__BF16_KB / 2; pair++)
				for (size_t c = 0; c < KN__BF16_NB; c++)
					for (size_t e = 0; e < 2; e++) {
						size_t n = i * KN__BF16_NB + c;
						size_t k = j * KN__BF16_KB + 2 * pair + e;
						blk[pair * 32 + c * 2 + e] =
							n < N && k < K ? kn_f32_to_bf16(src[n * sn + k * sk]) : 0;
					}
		}
}

void kn_bf16_pack(const float *W, size_t N, size_t K, uint16_t *out)
{
	kn_bf16_pack_rows(W, K, N, K, out);
}

void kn_bf16_pack_rows(const float *W, size_t ldw, size_t N, size_t K, uint16_t *out)
{
	if (kn_bf16_ok())
		kn__bf16_pack_rows_avx512(W, ldw, N, K, out);
	else
		kn__bf16_pack_ref(W, ldw, 1, N, K, out);
}

void kn_bf16_pack_cols(const float *B, size_t ldb, size_t N, size_t K, uint16_t *out)
{
	if (kn_bf16_ok())
		kn__bf16_pack_cols_avx512(B, ldb, N, K, out);
	else
		kn__bf16_pack_ref(B, 1, ldb, N, K, out);
}

size_t kn_bf16_scratch_len(size_t K)
{
	return KN__BF16_TM * kn_bf16_lda(K);
}

void kn_bf16_from_f32(const float *x, uint16_t *y, size_t n)
{
	if (kn_bf16_ok()) {
		kn__bf16_from_f32_avx512(x, y, n);
		return;
	}
	for (size_t i = 0; i < n; i++)
		y[i] = kn_f32_to_bf16(x[i]);
}

void kn_bf16_from_f32_t(const float *x, size_t ldx, size_t rows, size_t cols, uint16_t *y,
			size_t ldy)
{
	if (kn_bf16_ok()) {
		kn__bf16_from_f32_t_avx512(x, ldx, rows, cols, y, ldy);
		return;
	}
	for (size_t r = 0; r < rows; r++)
		for (size_t c = 0; c < cols; c++)
			y[c * ldy + r] = kn_f32_to_bf16(x[r * ldx + c]);
}

size_t kn_bf16_lda(size_t K)
{
	return (K + KN__BF16_KB - 1) / KN__BF16_KB * KN__BF16_KB;
}

void kn_bf16_linear_b16(size_t M, size_t N, size_t K, const uint16_t *xb, size_t ldxb,
			const uint16_t *Wp, const float *bias, float *y, size_t ldy)
{
	if (M == 0 || N == 0)
		return;
	kn__bf16_linear_amx_b16(M, N, K, xb, ldxb, Wp, bias, y, ldy);
}

void kn_bf16_linear(size_t M, size_t N, size_t K, const float *x, size_t ldx,
		    const uint16_t *Wp, const float *bias, float *y, size_t ldy,
		    uint16_t *scratch)
{
	if (M == 0 || N == 0)
		return;
	kn__bf16_linear_amx(M, N, K, x, ldx, Wp, bias, y, ldy, scratch);
}
