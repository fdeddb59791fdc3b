/* kernels/kn_quant.c - dispatch for the quantized-weight kernels
 * (kernels/kn_quant.h).
 *
 * The per-ISA tables live in the files that own their ISA (ref/quant.c,
 * x86/quant_avx2.c, x86/quant_avx512.c; declared in kn_int.h). Which ISA the CPU
 * runs and which one kn_init chose is kn_init.c's business: this file only
 * asks kn_ops_for / kn_ops, so there is no second CPU detection and no
 * state of its own. The type geometry the tables point into is kn_qtype.c.
 */
#include <assert.h>

#include "kernels/kn_int.h"

static const struct kn_qops *const kq_tables[] = {
	[KN_ISA_REF] = kn__qops_ref,
	[KN_ISA_AVX2] = kn__qops_avx2,
	[KN_ISA_AVX512] = kn__qops_avx512,
};
static_assert(sizeof(kq_tables) / sizeof(kq_tables[0]) == KN_ISA_COUNT,
	      "one kn_qops table per enum kn_isa value");

const struct kn_qops *kn_qops_for(enum kn_isa isa, int type)
{
	if (!kn_ops_for(isa) || type < 0 || type >= KN_Q_MAX)
		return NULL;
	const struct kn_qops *q = &kq_tables[isa][type];
	return q->geom ? q : NULL;
}

const struct kn_qops *kn_qops_get(int type)
{
	return kn_qops_for(kn_ops()->isa, type);
}

const struct kn_qpack *kn_qpack_for(enum kn_isa isa, int type)
{
	if (!kn_ops_for(isa) || type < 0 || type >= KN_Q_MAX)
		return NULL;
	const struct kn_qpack *p = NULL;
	if (isa == KN_ISA_REF)
		p = &kn__qpack_ref[type];
	else if (isa == KN_ISA_AVX2)
		p = &kn__qpack_avx2[type];
	else if (isa == KN_ISA_AVX512 && kn__has_avx512vnni())
		p = &kn__qpack_avx512[type];
	return p && p->ops ? p : NULL;
}

const struct kn_qpack *kn_qpack_get(int type)
{
	enum kn_isa isa = kn_ops()->isa;
	if (isa == KN_ISA_REF)
		return NULL;
	const struct kn_qpack *p = kn_qpack_for(isa, type);
	/* AVX-512 without VNNI: the AVX2 kernels, faster there than the
	 * plain AVX-512 ones */
	return p || isa != KN_ISA_AVX512 ? p : kn_qpack_for(KN_ISA_AVX2, type);
}

/* Only for types with kernels (every ISA implements the reference's). */
size_t kn_qtype_row_bytes(int type, size_t k)
{
	const struct kn_qtype_info *t = kn_qtype_get(type);
	if (!t || !kn__qops_ref[type].geom || k % t->block_elems)
		return 0;
	return k / t->block_elems * t->block_bytes;
}
