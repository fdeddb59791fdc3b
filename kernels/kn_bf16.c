/* kernels/kn_bf16.c - kn_bf16.h: detection of AMX-BF16 (with the
 * tile-state permission) and AVX512-BF16, once; packing; and the dispatch
 * to x86/bf16_amx.c or x86/bf16_dp_avx512.c.
 *
 * Linux hands out the AMX tile data state (8 KB per thread) only to a
 * process that asked for it: arch_prctl(ARCH_REQ_XCOMP_PERM,
 * XFEATURE_XTILEDATA) (Documentation/arch/x86/xstate.rst); without it the
 * first tile instruction faults. Asked here once, for the whole process.
 */
#include <cpuid.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kernels/kn.h"
#include "kernels/kn_bf16.h"
#include "kernels/kn_bf16_int.h"
#include "kernels/kn_half.h"

#define KN_ARCH_REQ_XCOMP_PERM 0x1023
#define KN_XFEATURE_XTILEDATA  18

static pthread_once_t kn_bf16_once = PTHREAD_ONCE_INIT;
static bool kn_has_amx, kn_has_dp; /* written once in kn_bf16_detect */
static _Atomic int kn_bf16_kernel; /* enum kn__bf16_kernel: best, or a test's pick */

static void kn_bf16_detect(void)
{
	unsigned a, b, c, d;
	/* Both kernels need the AVX-512 table's ISA (F/BW/VL, saved by the OS,
	 * under the INFERD_CPU_ISA ceiling: kn_init.c) for the conversions and
	 * packers. CPUID.(EAX=7,ECX=0): EDX bit 22 AMX-BF16, bit 24 AMX-TILE;
	 * CPUID.(EAX=7,ECX=1): EAX bit 5 AVX512-BF16. */
	if (!kn_ops_for(KN_ISA_AVX512) || !__get_cpuid_count(7, 0, &a, &b, &c, &d))
		return;
	if ((d & (1u << 22)) && (d & (1u << 24)) && kn_cpu_cap(NULL) == KN_CAP_NATIVE)
		kn_has_amx = syscall(SYS_arch_prctl, KN_ARCH_REQ_XCOMP_PERM,
				     KN_XFEATURE_XTILEDATA) == 0;
	unsigned a1, b1, c1, d1;
	kn_has_dp = __get_cpuid_count(7, 1, &a1, &b1, &c1, &d1) && (a1 & (1u << 5));
	kn_bf16_kernel = kn_has_amx ? KN__BF16_AMX : kn_has_dp ? KN__BF16_DP : KN__BF16_NONE;
}

bool kn_bf16_ok(void)
{
	pthread_once(&kn_bf16_once, kn_bf16_detect);
	return kn_has_amx || kn_has_dp;
}

bool kn__bf16_use(enum kn__bf16_kernel k)
{
	kn_bf16_ok();
	if ((k == KN__BF16_AMX && !kn_has_amx) || (k == KN__BF16_DP && !kn_has_dp))
		return false;
	kn_bf16_kernel = k;
	return true;
}

const char *kn_bf16_kernel_name(void)
{
	kn_bf16_ok();
	switch (atomic_load(&kn_bf16_kernel)) {
	case KN__BF16_AMX:
		return "amx-bf16";
	case KN__BF16_DP:
		return "avx512-bf16";
	default:
		return "none";
	}
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
	if (atomic_load(&kn_bf16_kernel) == KN__BF16_AMX)
		kn__bf16_linear_amx_b16(M, N, K, xb, ldxb, Wp, bias, y, ldy);
	else
		kn__bf16_linear_dp_b16(M, N, K, xb, ldxb, Wp, bias, y, ldy);
}

void kn_bf16_linear(size_t M, size_t N, size_t K, const float *x, size_t ldx,
		    const uint16_t *Wp, const float *bias, float *y, size_t ldy,
		    uint16_t *scratch)
{
	if (M == 0 || N == 0)
		return;
	if (atomic_load(&kn_bf16_kernel) == KN__BF16_AMX)
		kn__bf16_linear_amx(M, N, K, x, ldx, Wp, bias, y, ldy, scratch);
	else
		kn__bf16_linear_dp(M, N, K, x, ldx, Wp, bias, y, ldy, scratch);
}
