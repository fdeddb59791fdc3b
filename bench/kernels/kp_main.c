/* bench/kernels/kp_main.c - kernel-peak: the physical limits of one core
 * and how close the float32 matrix products come to them.
 *
 * usage: build/bench/kernels/kernel-peak [--gemm-ms N] [--no-bw] [--peaks-only]
 *                                        [--bw-cores N]
 *
 * Prints, single-threaded: the CPU (CPUID brand string, family/model) and
 * its SIMD features; the load average (the machine may be shared: every
 * figure is the best of several timed runs, CLOCK_MONOTONIC); the core
 * clock estimated from a chain of dependent integer adds (1 cycle each);
 * the FMA peak in GFLOP/s on ymm (AVX2) and zmm (AVX-512, when present)
 * from FMA-throughput loops; the int8 dot-product peak in GOP/s (one
 * u8 x s8 multiply-add is 2 ops): AVX2 vpmaddubsw + vpmaddwd + vpaddd,
 * AVX-VNNI vpdpbusd ymm, AVX-512BW's same three-step on zmm and
 * AVX512-VNNI vpdpbusd zmm, each where the CPU has it; the bfloat16 peak
 * in GFLOP/s of AVX512-BF16 vdpbf16ps zmm where present; the read bandwidth
 * of one core in GB/s (10^9 bytes/s) over a 1 GiB buffer (far beyond any
 * L3) and a 32 MiB one (L3-resident on a large-L3 server part, in DRAM on
 * a small one); then the GEMM table of kp_gemm.c: the Whisper tiny
 * encoder's products through OpenBLAS, kn__sgemm_avx2 and
 * kn__sgemm_avx512, GFLOP/s and the fraction of the matching FMA peak
 * (the FMA peaks are measured again before each product and after the
 * last; the fractions are of the best over the whole run, the figure
 * printed below the table), the bfloat16 table (kn_bf16_linear on the
 * same shapes, against the vdpbf16ps peak), and the int8 table of
 * kp_i8.c (every kn_i8 variant on the linears, against the peak loop of
 * its own instructions, and on one decode step's output projection, in
 * weight GB/s), and the packed GGUF table of kp_qpack.c (the LLM weight
 * products of every kn_qpack variant against 1 and 16 x rows).
 * OpenBLAS picks its kernels by CPU model at load time (the core name is
 * printed; "Prescott" is its SSE3 fallback for a model it does not know);
 * run with OPENBLAS_CORETYPE=Haswell (AVX2) or SkylakeX (AVX-512) to
 * compare against those. --gemm-ms: how long each product is repeated for
 * at least (default 500); the best single run counts (wall time), and a
 * product whose best run was still interrupted (its thread had the CPU
 * for under 97 % of it) is marked '*'. --no-bw skips the bandwidth
 * loops; --peaks-only prints the CPU, clock and peaks and stops (what
 * bench/transcribe-vs-peers reads for its physical-limit lines);
 * --bw-cores N prints the CPU and the read bandwidth of N cores reading at
 * once (kp_bw.c, each thread pinned to one of the first N CPUs of the
 * affinity mask) over a 1 GiB buffer, and stops (what
 * bench/generate-vs-peers reads for its decode bound).
 *
 * Timings are wall time on CLOCK_MONOTONIC; peak loops run ~2 ms at a
 * time, repeated for 300 ms, best kept. Run it on an idle machine (the
 * load average is printed) for figures to quote.
 */
#include <cpuid.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/kn.h"
#include "kernels/kn_blas.h"
#include "kernels/kn_i8.h"
#include "kp_int.h"

double kp__now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double kp__cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Best time in seconds of runs of fn(n), n grown first until one run
 * takes >= 2 ms, then repeated for window_s (at least 20 runs): short
 * runs, so that on a shared machine some run is likely to go
 * uninterrupted; *n_out is that n. */
static double best_loop(void (*fn)(long), long *n_out, double window_s)
{
	long n = 100;
	double t = 0.0;
	for (;;) {
		double t0 = kp__now();
		fn(n);
		t = kp__now() - t0;
		if (t >= 0.002 || n > (1L << 40))
			break;
		n *= 2;
	}
	double start = kp__now();
	for (int r = 0; r < 20 || kp__now() - start < window_s; r++) {
		double t0 = kp__now();
		fn(n);
		double d = kp__now() - t0;
		t = d < t ? d : t;
	}
	*n_out = n;
	return t;
}

double kp__fma_probe(bool zmm)
{
	long n;
	double t = best_loop(zmm ? kp__fma_zmm : kp__fma_ymm, &n, 0.15);
	return (zmm ? KP_FMA_ZMM_OPS : KP_FMA_YMM_OPS) * (double)n / t * 1e-9;
}

/* G operations per second of a peak loop doing ops per iteration. */
static double peak(const char *what, void (*fn)(long), double ops, double ghz, const char *unit)
{
	long n;
	double t = best_loop(fn, &n, 0.3);
	double g = ops * (double)n / t * 1e-9;
	printf("  %-44s %8.1f %s  (%.1f per cycle)\n", what, g, unit, g / ghz);
	return g;
}

struct cpu {
	bool avx2, avx512, avx512vnni, avxvnni, avx512bf16;
};

static void cpu_print(struct cpu *c)
{
	unsigned r[12] = {0}, a = 0, b = 0, cx = 0, d = 0;
	char brand[49] = "unknown";
	if (__get_cpuid(0x80000004, &a, &b, &cx, &d)) {
		for (unsigned i = 0; i < 3; i++)
			__get_cpuid(0x80000002 + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2],
				    &r[4 * i + 3]);
		memcpy(brand, r, 48);
		brand[48] = '\0';
	}
	__get_cpuid(1, &a, &b, &cx, &d);
	unsigned fam = ((a >> 8) & 15) + ((a >> 20) & 255), model = ((a >> 4) & 15) | ((a >> 12) & 240);
	printf("cpu       %s (family %u model %u stepping %u)\n", brand, fam, model, a & 15);
	unsigned l1c = cx, l7b = 0, l7c = 0, l7d = 0, l71a = 0;
	__get_cpuid_count(7, 0, &a, &l7b, &l7c, &l7d);
	__get_cpuid_count(7, 1, &l71a, &b, &cx, &d);
	const struct {
		const char *name;
		const unsigned *reg;
		unsigned bit;
	} f[] = {
		{"fma", &l1c, 12},	 {"f16c", &l1c, 29},	   {"avx2", &l7b, 5},
		{"avx512f", &l7b, 16},	 {"avx512bw", &l7b, 30},   {"avx512vl", &l7b, 31},
		{"avx512vnni", &l7c, 11}, {"avx512bf16", &l71a, 5}, {"avx512fp16", &l7d, 23},
		{"avx-vnni", &l71a, 4},	 {"amx-tile", &l7d, 24},   {"amx-int8", &l7d, 25},
		{"amx-bf16", &l7d, 22},
	};
	printf("features ");
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		if (*f[i].reg & (1u << f[i].bit))
			printf(" %s", f[i].name);
	/* usable: the OS saves the registers too (kn_ops_for checks XCR0) */
	c->avx2 = kn_ops_for(KN_ISA_AVX2) != NULL;
	c->avx512 = kn_ops_for(KN_ISA_AVX512) != NULL;
	c->avx512vnni = c->avx512 && (l7c & (1u << 11));
	c->avxvnni = c->avx2 && (l71a & (1u << 4)) && kn_cpu_cap(NULL) != KN_CAP_AVX2;
	c->avx512bf16 = c->avx512 && (l71a & (1u << 5));
	printf("\nusable    avx2 %s, avx512 %s (INFERD_CPU_ISA %s)\n", c->avx2 ? "yes" : "no",
	       c->avx512 ? "yes" : "no", kn_cap_name(kn_cpu_cap(NULL)));
}

static void load_print(void)
{
	char buf[128] = "?";
	FILE *f = fopen("/proc/loadavg", "r");
	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = '\0';
		fclose(f);
	}
	buf[strcspn(buf, "\n")] = '\0';
	printf("load      %s (/proc/loadavg; shared cores slow every figure down)\n", buf);
}

/* Best read bandwidth in GB/s over size_bytes, of reps passes. */
static double read_bw(size_t size_bytes, int reps)
{
	unsigned char *buf = aligned_alloc(64, size_bytes);
	if (!buf)
		return 0.0;
	memset(buf, 1, size_bytes); /* touch every page: no zero-page reads */
	double best = 1e30;
	uint32_t sum = 0;
	for (int r = 0; r < reps + 1; r++) {
		double t0 = kp__now();
		sum += kp__read_ymm(buf, size_bytes);
		double t = kp__now() - t0;
		if (r > 0 && t < best) /* the first pass warms caches and TLB */
			best = t;
	}
	free(buf);
	if (sum != (uint32_t)((size_bytes / 4) * 0x01010101u * (uint32_t)(reps + 1)))
		printf("  (read checksum mismatch)\n");
	return (double)size_bytes / best * 1e-9;
}

/* The clock and the peak loops the CPU can run; *ymm, *zmm the FMA peaks
 * in GFLOP/s (zmm 0 without AVX-512). */
static void peaks(const struct cpu *c, double *ymm, double *zmm, double *dp,
		  double i8[KN_I8_COUNT])
{
	long n;
	double ghz = KP_ADD_CHAIN_OPS * 1e-9 / best_loop(kp__add_chain, &n, 0.3) * (double)n;
	printf("clock     %.2f GHz (dependent 64-bit adds, 1 cycle each)\n", ghz);
	printf("peak, one core:\n");
	*ymm = peak("fp32 FMA ymm (AVX2 vfmadd231ps)", kp__fma_ymm, KP_FMA_YMM_OPS, ghz, "GFLOP/s");
	if (c->avx512)
		*zmm = peak("fp32 FMA zmm (AVX-512 vfmadd231ps)", kp__fma_zmm, KP_FMA_ZMM_OPS, ghz,
			   "GFLOP/s");
	i8[KN_I8_AVX2] = peak("int8 ymm vpmaddubsw+vpmaddwd+vpaddd (AVX2)", kp__i8_ymm,
			      KP_I8_YMM_OPS, ghz, "GOP/s  ");
	i8[KN_I8_AVX2_X7] = i8[KN_I8_AVX2]; /* the same loop; x7 drops the sign trick's vpsignb */
	if (c->avxvnni)
		i8[KN_I8_AVXVNNI] = peak("int8 ymm vpdpbusd (AVX-VNNI)", kp__vnni_ymm,
					 KP_VNNI_YMM_OPS, ghz, "GOP/s  ");
	if (c->avx512)
		i8[KN_I8_AVX512BW] = peak("int8 zmm vpmaddubsw+vpmaddwd+vpaddd (AVX512BW)",
					  kp__i8_zmm, KP_I8_ZMM_OPS, ghz, "GOP/s  ");
	if (c->avx512vnni)
		i8[KN_I8_AVX512VNNI] = peak("int8 zmm vpdpbusd (AVX512-VNNI)", kp__vnni_zmm,
					    KP_VNNI_ZMM_OPS, ghz, "GOP/s  ");
	if (c->avx512bf16)
		*dp = peak("bf16 zmm vdpbf16ps (AVX512-BF16)", kp__dpbf16_zmm, KP_DPBF16_ZMM_OPS,
			   ghz, "GFLOP/s");
}

static void bandwidth(void)
{
	printf("read bandwidth, one core (256-bit loads):\n");
	printf("  %-44s %8.1f GB/s\n", "1 GiB buffer (beyond L3: DRAM)", read_bw(1ul << 30, 5));
	printf("  %-44s %8.1f GB/s\n", "32 MiB buffer (L3 on a large-L3 part)", read_bw(32ul << 20, 40));
}

int main(int argc, char **argv)
{
	double gemm_ms = 500.0;
	bool no_bw = false, peaks_only = false;
	int bw_cores = 0;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--gemm-ms") == 0 && i + 1 < argc) {
			gemm_ms = strtod(argv[++i], NULL);
		} else if (strcmp(argv[i], "--no-bw") == 0) {
			no_bw = true;
		} else if (strcmp(argv[i], "--peaks-only") == 0) {
			peaks_only = true;
		} else if (strcmp(argv[i], "--bw-cores") == 0 && i + 1 < argc) {
			bw_cores = (int)strtol(argv[++i], NULL, 10);
			if (bw_cores < 1 || bw_cores > 256) {
				fprintf(stderr, "%s: --bw-cores takes 1..256\n", argv[0]);
				return 2;
			}
		} else {
			fprintf(stderr, "usage: %s [--gemm-ms N] [--no-bw] [--peaks-only] "
				"[--bw-cores N]\n", argv[0]);
			return 2;
		}
	}
	struct cpu c;
	printf("kernel-peak: single-core limits and float32 GEMM speed (best of repeated runs)\n");
	cpu_print(&c);
	kn_init(KN_ISA_COUNT); /* also sets OpenBLAS to 1 thread */
	printf("openblas  core %s (OPENBLAS_CORETYPE=%s)\n", kn_blas_core(),
	       getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "unset");
	load_print();
	if (!c.avx2) {
		printf("no AVX2: nothing to measure\n");
		return 0;
	}
	if (bw_cores) {
		printf("read bandwidth, %d cores at once (1 GiB buffer, 256-bit loads): %.1f GB/s\n",
		       bw_cores, kp__read_bw_cores(1ul << 30, 5, bw_cores));
		return 0;
	}
	double ymm = 0.0, zmm = 0.0, dp = 0.0, i8[KN_I8_COUNT] = {0};
	peaks(&c, &ymm, &zmm, &dp, i8);
	if (peaks_only)
		return 0;
	if (!no_bw)
		bandwidth();
	kp__gemm_table(ymm, zmm, gemm_ms);
	kp__bf16_table(dp, gemm_ms);
	kp__i8_table(i8, gemm_ms);
	kp__qpack_table(i8[KN_I8_AVX2], i8[KN_I8_AVX512VNNI], gemm_ms);
	return 0;
}
