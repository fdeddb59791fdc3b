/* kernels/kn_i8.c - load-time packing of int8 weights and the choice of
 * int8 product variant (kn_i8.h). */
#include <string.h>

#include "kernels/kn.h"
#include "kernels/kn_i8.h"
#include "kernels/kn_i8_int.h"
#include "kernels/kn_int.h"

void kn_i8_pack(const int8_t *wq, size_t N, size_t K, int8_t *packed, int32_t *comp)
{
	size_t kp = kn_i8_kpad(K), np = kn_i8_npad(N), groups = kp / KN_I8_KG;
	memset(packed, 0, np * kp);
	memset(comp, 0, np * sizeof(*comp));
	for (size_t n = 0; n < N; n++) {
		int32_t sum = 0;
		int8_t *blk = packed + (n / KN_I8_NB) * groups * (KN_I8_NB * KN_I8_KG) +
			      (n % KN_I8_NB) * KN_I8_KG;
		for (size_t k = 0; k < K; k++) {
			int8_t v = wq[n * K + k] < -127 ? -127 : wq[n * K + k];
			blk[(k / KN_I8_KG) * (KN_I8_NB * KN_I8_KG) + k % KN_I8_KG] = v;
			sum += v;
		}
		comp[n] = 128 * sum;
	}
}

void kn_i8_quantize_rows(const float *restrict x, size_t ldx, size_t M, size_t K,
			 int8_t *restrict q, size_t ldq, float *restrict scale)
{
	if (kn_ops_for(KN_ISA_AVX2))
		kn__i8_quantize_rows_avx2(x, ldx, M, K, q, ldq, scale);
	else
		kn__i8_quantize_rows_ref(x, ldx, M, K, q, ldq, scale, KN_I8_QMAX);
}

void kn_i8_quantize_w(const float *W, size_t N, size_t K, int8_t *packed, float *scale,
		      int32_t *comp, int8_t *scratch)
{
	size_t kp = kn_i8_kpad(K), np = kn_i8_npad(N), groups = kp / KN_I8_KG;
	memset(packed, 0, np * kp);
	memset(comp, 0, np * sizeof(*comp));
	memset(scale, 0, np * sizeof(*scale));
	for (size_t n = 0; n < N; n++) {
		kn_i8_quantize_rows(W + n * K, K, 1, K, scratch, kp, &scale[n]);
		int32_t sum = 0;
		int8_t *blk = packed + (n / KN_I8_NB) * groups * (KN_I8_NB * KN_I8_KG) +
			      (n % KN_I8_NB) * KN_I8_KG;
		for (size_t k = 0; k < K; k++) {
			blk[(k / KN_I8_KG) * (KN_I8_NB * KN_I8_KG) + k % KN_I8_KG] = scratch[k];
			sum += scratch[k];
		}
		comp[n] = 128 * sum;
	}
}

static const struct kn_i8_ops *const kn_i8_tables[] = {
	[KN_I8_REF] = &kn__i8_ref,
	[KN_I8_AVX2] = &kn__i8_avx2,
	[KN_I8_AVXVNNI] = &kn__i8_avxvnni,
	[KN_I8_AVX512BW] = &kn__i8_avx512bw,
	[KN_I8_AVX512VNNI] = &kn__i8_avx512vnni,
	[KN_I8_AVX2_X7] = &kn__i8_avx2_x7,
};
_Static_assert(sizeof(kn_i8_tables) / sizeof(kn_i8_tables[0]) == KN_I8_COUNT,
	       "one table per enum kn_i8_kind value");

const struct kn_i8_ops *kn_i8_ops_for(enum kn_i8_kind kind)
{
	bool ok = false;
	switch (kind) {
	case KN_I8_REF: ok = true; break;
	case KN_I8_AVX2:
	case KN_I8_AVX2_X7: ok = kn_ops_for(KN_ISA_AVX2) != NULL; break;
	case KN_I8_AVXVNNI: ok = kn_ops_for(KN_ISA_AVX2) && kn__has_avxvnni(); break;
	case KN_I8_AVX512BW: ok = kn_ops_for(KN_ISA_AVX512) != NULL; break;
	case KN_I8_AVX512VNNI: ok = kn_ops_for(KN_ISA_AVX512) && kn__has_avx512vnni(); break;
	default: break;
	}
	return ok ? kn_i8_tables[kind] : NULL;
}

const struct kn_i8_ops *kn_i8_ops(void)
{
	static const enum kn_i8_kind order[KN_ISA_COUNT][2] = {
		[KN_ISA_REF] = { KN_I8_REF, KN_I8_REF },
		[KN_ISA_AVX2] = { KN_I8_AVXVNNI, KN_I8_AVX2_X7 },
		[KN_ISA_AVX512] = { KN_I8_AVX512VNNI, KN_I8_AVX512BW },
	};
	enum kn_isa isa = kn_ops()->isa;
	for (int i = 0; i < 2; i++) {
		const struct kn_i8_ops *o = kn_i8_ops_for(order[isa][i]);
		if (o)
			return o;
	}
	return &kn__i8_ref;
}
