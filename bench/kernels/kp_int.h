/* bench/kernels/kp_int.h - the kernel-peak benchmark's parts (kp_main.c
 * drives them). Each peak loop runs n iterations of a fixed block of
 * independent instructions written in inline assembly (so no compiler can
 * fold, hoist or reorder them) and the caller times it; the *_OPS macros
 * say how many operations one iteration is: FLOPs (an FMA is 2) or int8
 * ops (a u8 x s8 multiply and its add are 2, as for FLOPs).
 */
#ifndef KP_INT_H
#define KP_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* kp_peak_avx2.c (-mavx2 -mfma) */
#define KP_ADD_CHAIN_OPS 100 /* dependent 64-bit adds per iteration (1 cycle each) */
void kp__add_chain(long n);
#define KP_FMA_YMM_OPS (12 * 8 * 2 * 8) /* 12 chains x 8 lanes x 2, 8 times */
void kp__fma_ymm(long n);
#define KP_I8_YMM_OPS (6 * 32 * 2 * 8) /* vpmaddubsw+vpmaddwd+vpaddd on 6 chains, 8 times */
void kp__i8_ymm(long n);
/* Sum of the 32-bit words of buf (size_bytes a multiple of 256, buf 32-byte
 * aligned), read with 256-bit loads: the read-bandwidth loop. */
uint32_t kp__read_ymm(const void *buf, size_t size_bytes);

/* kp_peak_avxvnni.c (-mavxvnni) */
#define KP_VNNI_YMM_OPS (12 * 32 * 2 * 8) /* {vex} vpdpbusd ymm on 12 chains, 8 times */
void kp__vnni_ymm(long n);

/* kp_peak_avx512.c (-mavx512f -mavx512bw -mavx512vnni) */
#define KP_FMA_ZMM_OPS (24 * 16 * 2 * 4)
void kp__fma_zmm(long n);
#define KP_I8_ZMM_OPS (12 * 64 * 2 * 4)
void kp__i8_zmm(long n);
#define KP_VNNI_ZMM_OPS (24 * 64 * 2 * 4)
void kp__vnni_zmm(long n);

/* kp_peak_avx512bf16.c (-mavx512f -mavx512bf16) */
#define KP_DPBF16_ZMM_OPS (24 * 32 * 2 * 4) /* vdpbf16ps zmm on 24 chains, 4 times */
void kp__dpbf16_zmm(long n);

/* kp_gemm.c: the GEMM table; peak_ymm/peak_zmm the FMA peaks measured so
 * far in GFLOP/s (zmm 0: no AVX-512), min_ms the time each kernel is
 * repeated for at least. */
void kp__gemm_table(double peak_ymm, double peak_zmm, double min_ms);
/* kp_gemm.c: the bfloat16 table (kn_bf16_linear on the same shapes, where
 * kn_bf16_ok()); peak_dp the vdpbf16ps peak in GFLOP/s (0: not measured). */
void kp__bf16_table(double peak_dp, double min_ms);
/* kp_i8.c: the int8 table (every kn_i8 variant the CPU can run on the
 * encoder's linears and the output projection); peak the measured peak
 * loop of each enum kn_i8_kind's instructions in GOP/s, KN_I8_COUNT of
 * them (0: not measured). */
void kp__i8_table(const double *peak, double min_ms);

/* kp_qpack.c: the packed GGUF table (every kn_qpack variant the CPU can
 * run, 1 and 16 x rows); peak_avx2 / peak_avx512 the int8 peak loops of
 * AVX2 (vpmaddubsw + vpmaddwd + vpaddd) and AVX512-VNNI (vpdpbusd zmm) in
 * GOP/s (0: not measured). */
void kp__qpack_table(double peak_avx2, double peak_avx512, double min_ms);

/* kp_main.c: seconds on CLOCK_MONOTONIC; this thread's CPU seconds
 * (CLOCK_THREAD_CPUTIME_ID). */
double kp__now(void);

/* kp_bw.c: read bandwidth in GB/s (10^9 bytes/s) of n_threads threads, each
 * pinned to its own CPU of the affinity mask (the first n_threads of it),
 * reading their own slices of one size_bytes buffer at once; best of reps
 * passes after a warm-up pass; 0 when it could not run. */
double kp__read_bw_cores(size_t size_bytes, int reps, int n_threads);
double kp__cpu_now(void);
/* The FMA peak in GFLOP/s, ymm or zmm, from a 150 ms best-of probe. */
double kp__fma_probe(bool zmm);

#endif /* KP_INT_H */
