/* kernels/kn_init.c - CPU feature detection and the choice of kn_ops table.
 *
 * The per-ISA tables are const objects in their own files (kn_int.h). What
 * this file owns is the one piece of process-wide mutable state the design
 * allows: which ISAs the CPU runs (detected once, under pthread_once, which
 * also sets OpenBLAS to 1 thread) and the table kn_init chose (an atomic
 * pointer, so concurrent kn_init / kn_ops calls are data-race free; the
 * last kn_init wins).
 */
#include <assert.h>
#include <cblas.h>
#include <cpuid.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kn_i8_int.h"
#include "kernels/kn_int.h"

static const struct kn_ops *const kn_tables[] = {
	[KN_ISA_REF] = &kn__ops_ref,
	[KN_ISA_AVX2] = &kn__ops_avx2,
	[KN_ISA_AVX512] = &kn__ops_avx512,
};
static_assert(sizeof(kn_tables) / sizeof(kn_tables[0]) == KN_ISA_COUNT,
	      "one kn_ops table per enum kn_isa value");

static pthread_once_t kn_detect_once = PTHREAD_ONCE_INIT;
static bool kn_isa_ok[KN_ISA_COUNT];		 /* written once in kn_detect */
static bool kn_vnni;				 /* AVX512-VNNI, written once too */
static bool kn_avxvnni;				 /* AVX-VNNI (ymm), written once too */
static atomic_bool kn_vnni_off;			 /* tests: kn__set_avx512vnni(false) */
static _Atomic(const struct kn_ops *) kn_chosen; /* NULL until kn_init */
static enum kn_cap kn_cap;			 /* INFERD_CPU_ISA, written once too */
static const char *kn_cap_bad;			 /* its value if unknown, else NULL */

static const char *const kn_cap_names[] = {
	[KN_CAP_NATIVE] = "native",
	[KN_CAP_AVX512] = "avx512",
	[KN_CAP_AVX2] = "avx2",
};

static void kn_cap_read(void)
{
	const char *v = getenv("INFERD_CPU_ISA");
	if (!v || !*v)
		return;
	for (size_t i = 0; i < sizeof(kn_cap_names) / sizeof(*kn_cap_names); i++)
		if (!strcmp(v, kn_cap_names[i])) {
			kn_cap = (enum kn_cap)i;
			return;
		}
	kn_cap_bad = v;
}

/* libgcc's __builtin_cpu_supports also checks that the OS saves the
 * YMM/ZMM state (XCR0), so a "yes" here means the code can run. The
 * AVX-512 file is compiled with -mavx2 -mfma -mf16c too, hence the
 * superset test. */
static bool kn_has_f16c(void)
{
	/* CPUID leaf 1, ECX bit 29 (clang 14's __builtin_cpu_supports lacks
	 * "f16c"); only consulted once AVX2 is known usable. */
	unsigned a, b, c, d;
	return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}

static bool kn_has_avx512vnni_cpuid(void)
{
	/* CPUID leaf 7 subleaf 0, ECX bit 11 (AVX512_VNNI); read directly as
	 * for F16C so that no compiler's builtin name list matters. Only
	 * consulted once AVX-512F/BW/VL (and so the ZMM state) are usable. */
	unsigned a, b, c, d;
	return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 11));
}

static bool kn_has_avxvnni_cpuid(void)
{
	/* CPUID leaf 7 subleaf 1, EAX bit 4 (AVX-VNNI, VEX-encoded); only
	 * consulted once AVX2 (and so the YMM state) is usable. */
	unsigned a, b, c, d;
	return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4));
}

static void kn_detect(void)
{
	__builtin_cpu_init();
	kn_cap_read();
	bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
		    kn_has_f16c();
	bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
		      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
		      kn_cap != KN_CAP_AVX2;

	kn_isa_ok[KN_ISA_REF] = true;
	kn_isa_ok[KN_ISA_AVX2] = avx2;
	kn_isa_ok[KN_ISA_AVX512] = avx512;
	kn_vnni = avx512 && kn_has_avx512vnni_cpuid();
	kn_avxvnni = avx2 && kn_cap != KN_CAP_AVX2 && kn_has_avxvnni_cpuid();
	/* the engine owns threading (kn.h); OpenBLAS directly, not through
	 * kn_blas_set_threads, so that this file calls nothing in blas/ (which
	 * calls kn_ops here) */
	openblas_set_num_threads(1);
}

const struct kn_ops *kn_ops_for(enum kn_isa isa)
{
	pthread_once(&kn_detect_once, kn_detect);
	if ((unsigned)isa >= KN_ISA_COUNT || !kn_isa_ok[isa])
		return NULL;
	return kn_tables[isa];
}

enum kn_cap kn_cpu_cap(const char **bad)
{
	pthread_once(&kn_detect_once, kn_detect);
	if (bad)
		*bad = kn_cap_bad;
	return kn_cap;
}

const char *kn_cap_name(enum kn_cap cap)
{
	return (unsigned)cap < sizeof(kn_cap_names) / sizeof(*kn_cap_names) ? kn_cap_names[cap]
									   : "?";
}

bool kn__has_avx512vnni(void)
{
	pthread_once(&kn_detect_once, kn_detect);
	return kn_vnni && !atomic_load_explicit(&kn_vnni_off, memory_order_relaxed);
}

bool kn__has_avxvnni(void)
{
	pthread_once(&kn_detect_once, kn_detect);
	return kn_avxvnni;
}

bool kn__set_avx512vnni(bool on)
{
	atomic_store_explicit(&kn_vnni_off, !on, memory_order_relaxed);
	return kn__has_avx512vnni();
}

static const struct kn_ops *kn_best(void)
{
	for (int isa = KN_ISA_COUNT - 1; isa > KN_ISA_REF; isa--) {
		const struct kn_ops *ops = kn_ops_for((enum kn_isa)isa);
		if (ops)
			return ops;
	}
	return &kn__ops_ref;
}

const struct kn_ops *kn_init(enum kn_isa force)
{
	const struct kn_ops *ops = kn_ops_for(force);
	if (!ops)
		ops = kn_best();
	atomic_store_explicit(&kn_chosen, ops, memory_order_release);
	return ops;
}

/* Before any kn_init this installs the best table rather than handing
 * back NULL (a forgotten kn_init must not crash a worker); the
 * compare-exchange keeps a concurrent explicit kn_init's choice. */
const struct kn_ops *kn_ops(void)
{
	const struct kn_ops *ops = atomic_load_explicit(&kn_chosen, memory_order_acquire);
	if (ops)
		return ops;
	const struct kn_ops *best = kn_best();
	if (atomic_compare_exchange_strong_explicit(&kn_chosen, &ops, best, memory_order_acq_rel,
						    memory_order_acquire))
		return best;
	return ops; /* another thread's kn_init won; ops now holds its table */
}
