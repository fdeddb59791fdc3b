/* bench/kernels/kp_gemm.c - the GEMM table of kernel-peak: the float32
 * products of the Whisper tiny encoder (d_model 384, 6 heads of 64, 1500
 * frames, MLP 1536, conv2 as a [1500, 3*384] x [384, 3*384]^T product),
 * each through OpenBLAS (kn_gemm under the reference table: cblas_sgemm),
 * kn__sgemm_avx2 and kn__sgemm_avx512, single-threaded. GFLOP/s counts
 * 2*M*N*K per product, from the best of as many runs as fit in min_ms
 * (at least 3). The fraction is of the measured FMA peak of the kernel's
 * ISA (OpenBLAS: zmm for its AVX-512 cores, else ymm). "bits" says
 * whether the AVX2 and AVX-512 kernels gave identical C (they must).
 * A second table times the same products in bfloat16 (kn_bf16_linear:
 * AMX or AVX512-BF16, whichever kernels/kn_bf16.c runs), against the
 * measured vdpbf16ps peak where the kernel is the AVX512-BF16 one.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kn.h"
#include "kernels/kn_bf16.h"
#include "kernels/kn_blas.h"
#include "kernels/kn_int.h"
#include "kp_int.h"

struct gemm_shape {
	const char *name;
	size_t M, N, K;
	bool trans_b;
};

static const struct gemm_shape gemm_shapes[] = {
	{"qkv   x[1500,384] W[1152,384]^T", 1500, 1152, 384, true},
	{"out   x[1500,384] W[384,384]^T", 1500, 384, 384, true},
	{"fc1   x[1500,384] W[1536,384]^T", 1500, 1536, 384, true},
	{"fc2   x[1500,1536] W[384,1536]^T", 1500, 384, 1536, true},
	{"qk^T  q[96,64] k[1500,64]^T", 96, 1500, 64, true},
	{"sv    S[96,1500] v[1500,64]", 96, 64, 1500, false},
	{"conv  x[1500,1152] W[384,1152]^T", 1500, 384, 1152, true},
};

enum { KP_BLAS, KP_AVX2, KP_AVX512, KP_N };

struct gemm_bufs {
	float *A, *B, *C[KP_N], *pack;
};

static float *rand_new(size_t n, unsigned *seed)
{
	float *p = malloc(n * sizeof(float));
	if (!p)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		*seed = *seed * 1664525u + 1013904223u;
		p[i] = (float)(*seed >> 8) / (float)(1u << 23) - 1.0f;
	}
	return p;
}

static void run_once(int kern, const struct gemm_shape *s, struct gemm_bufs *b)
{
	size_t ldb = s->trans_b ? s->K : s->N;
	if (kern == KP_BLAS)
		kn_gemm(s->trans_b, s->M, s->N, s->K, 1.0f, b->A, s->K, b->B, ldb, 0.0f,
			b->C[kern], s->N);
	else if (kern == KP_AVX2)
		kn__sgemm_avx2(s->trans_b, s->M, s->N, s->K, 1.0f, b->A, s->K, b->B, ldb, 0.0f,
			       b->C[kern], s->N, b->pack);
	else
		kn__sgemm_avx512(s->trans_b, s->M, s->N, s->K, 1.0f, b->A, s->K, b->B, ldb, 0.0f,
				 b->C[kern], s->N, b->pack);
}

/* Best GFLOP/s of kern on s over >= 3 runs filling min_ms; *cut: the best
 * run was interrupted (the thread ran under 97 % of its wall time). */
static double time_kernel(int kern, const struct gemm_shape *s, struct gemm_bufs *b, double min_ms,
			  bool *cut)
{
	run_once(kern, s, b); /* warm: pages, caches, OpenBLAS buffers */
	double best = 1e30, best_cpu = 0.0, start = kp__now();
	for (int r = 0; r < 3 || (kp__now() - start) * 1e3 < min_ms; r++) {
		double c0 = kp__cpu_now(), t0 = kp__now();
		run_once(kern, s, b);
		double t = kp__now() - t0, c = kp__cpu_now() - c0;
		if (t < best) {
			best = t;
			best_cpu = c;
		}
	}
	*cut = best_cpu < 0.97 * best;
	return 2.0 * (double)s->M * (double)s->N * (double)s->K / best * 1e-9;
}

static bool blas_is_avx512(void)
{
	const char *c = kn_blas_core();
	return strstr(c, "SkylakeX") || strstr(c, "Cooperlake") || strstr(c, "SapphireRapids");
}

struct gemm_result {
	bool ok, same;
	double gflops[KP_N];
	bool cut[KP_N];
};

static void gemm_row(const struct gemm_shape *s, const bool have[KP_N], double min_ms,
		     struct gemm_result *res)
{
	struct gemm_bufs b = {0};
	unsigned seed = 12345u;
	b.A = rand_new(s->M * s->K, &seed);
	b.B = rand_new(s->N * s->K, &seed);
	b.pack = malloc(KN__SGEMM_PACK * sizeof(float));
	res->ok = b.A && b.B && b.pack;
	for (int k = 0; k < KP_N; k++)
		res->ok = res->ok && (b.C[k] = calloc(s->M * s->N, sizeof(float)));
	for (int k = 0; res->ok && k < KP_N; k++)
		if (have[k])
			res->gflops[k] = time_kernel(k, s, &b, min_ms, &res->cut[k]);
	res->same = res->ok && have[KP_AVX2] && have[KP_AVX512] &&
		    !memcmp(b.C[KP_AVX2], b.C[KP_AVX512], s->M * s->N * sizeof(float));
	for (int k = 0; k < KP_N; k++)
		free(b.C[k]);
	free(b.A);
	free(b.B);
	free(b.pack);
}

static void gemm_print(const struct gemm_shape *s, const bool have[KP_N], const double pk[KP_N],
		       const struct gemm_result *res)
{
	printf("  %-34s %5zu %5zu %5zu", s->name, s->M, s->N, s->K);
	if (!res->ok) {
		printf(" (out of memory)\n");
		return;
	}
	for (int k = 0; k < KP_N; k++) {
		if (!have[k]) {
			printf(" |      -       ");
			continue;
		}
		printf(" | %7.1f%s%4.0f%%", res->gflops[k], res->cut[k] ? "*" : " ",
		       100.0 * res->gflops[k] / pk[k]);
	}
	if (have[KP_AVX2] && have[KP_AVX512])
		printf(" | %s", res->same ? "same" : "DIFFER");
	printf("\n");
}

void kp__gemm_table(double peak_ymm, double peak_zmm, double min_ms)
{
	enum { N_SHAPES = sizeof(gemm_shapes) / sizeof(gemm_shapes[0]) };
	bool have[KP_N] = {true, kn_ops_for(KN_ISA_AVX2) != NULL, kn_ops_for(KN_ISA_AVX512) != NULL};
	struct gemm_result res[N_SHAPES] = {0};
	kn_init(KN_ISA_REF); /* kn_gemm -> cblas_sgemm */
	for (size_t i = 0; i <= N_SHAPES; i++) {
		double y = kp__fma_probe(false), z = have[KP_AVX512] ? kp__fma_probe(true) : 0.0;
		peak_ymm = y > peak_ymm ? y : peak_ymm;
		peak_zmm = z > peak_zmm ? z : peak_zmm;
		if (i < N_SHAPES)
			gemm_row(&gemm_shapes[i], have, min_ms, &res[i]);
	}
	kn_init(KN_ISA_COUNT);
	double pk[KP_N] = {blas_is_avx512() && peak_zmm > 0 ? peak_zmm : peak_ymm, peak_ymm,
			   peak_zmm};
	printf("float32 GEMM, one thread: GFLOP/s and %% of the ISA's FMA peak (OpenBLAS: of the "
	       "%s peak)\n",
	       blas_is_avx512() && peak_zmm > 0 ? "zmm" : "ymm");
	printf("  %-34s %5s %5s %5s | %-13s | %-13s | %-13s | avx2 vs avx512 bits\n", "product",
	       "M", "N", "K", "OpenBLAS", "kn avx2", "kn avx512");
	for (size_t i = 0; i < N_SHAPES; i++)
		gemm_print(&gemm_shapes[i], have, pk, &res[i]);
	printf("  FMA peak, best over the whole run: ymm %.1f, zmm %.1f GFLOP/s (the %% above)\n",
	       peak_ymm, peak_zmm);
	printf("  (* the best run was still interrupted by other processes: a lower bound)\n");
}

/* One bfloat16 product of s: x [M,K] float32 times the packed W. */
struct bf16_bufs {
	float *x, *y;
	uint16_t *wp, *scratch;
};

static void bf16_once(const struct gemm_shape *s, struct bf16_bufs *b)
{
	kn_bf16_linear(s->M, s->N, s->K, b->x, s->K, b->wp, NULL, b->y, s->N, b->scratch);
}

void kp__bf16_table(double peak_dp, double min_ms)
{
	if (!kn_bf16_ok()) {
		printf("bfloat16 products: none on this CPU (no AMX-BF16, no AVX512-BF16)\n");
		return;
	}
	bool dp = !strcmp(kn_bf16_kernel_name(), "avx512-bf16") && peak_dp > 0;
	printf("bfloat16 products (kn_bf16_linear, %s), one thread: GFLOP/s%s\n",
	       kn_bf16_kernel_name(), dp ? " and % of the vdpbf16ps peak" : "");
	for (size_t i = 0; i < sizeof(gemm_shapes) / sizeof(gemm_shapes[0]); i++) {
		const struct gemm_shape *s = &gemm_shapes[i];
		unsigned seed = 777u;
		struct bf16_bufs b = {0};
		float *w = rand_new(s->N * s->K, &seed);
		b.x = rand_new(s->M * s->K, &seed);
		b.y = malloc(s->M * s->N * sizeof(float));
		b.wp = malloc(kn_bf16_packed_len(s->N, s->K) * sizeof(uint16_t));
		b.scratch = malloc(kn_bf16_scratch_len(s->K) * sizeof(uint16_t));
		if (!w || !b.x || !b.y || !b.wp || !b.scratch) {
			printf("  %-34s (out of memory)\n", s->name);
			goto next;
		}
		if (s->trans_b)
			kn_bf16_pack(w, s->N, s->K, b.wp);
		else
			kn_bf16_pack_cols(w, s->N, s->N, s->K, b.wp);
		bf16_once(s, &b);
		double best = 1e30, start = kp__now();
		for (int r = 0; r < 3 || (kp__now() - start) * 1e3 < min_ms; r++) {
			double t0 = kp__now();
			bf16_once(s, &b);
			double t = kp__now() - t0;
			best = t < best ? t : best;
		}
		double g = 2.0 * (double)s->M * (double)s->N * (double)s->K / best * 1e-9;
		printf("  %-34s %5zu %5zu %5zu | %7.1f", s->name, s->M, s->N, s->K, g);
		if (dp)
			printf(" %4.0f%%", 100.0 * g / peak_dp);
		printf("\n");
	next:
		free(w);
		free(b.x);
		free(b.y);
		free(b.wp);
		free(b.scratch);
	}
	if (dp)
		printf("  vdpbf16ps peak %.1f GFLOP/s (the %% above)\n", peak_dp);
}
