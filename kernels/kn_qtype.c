/* kernels/kn_qtype.c - the one table of ggml tensor type geometry
 * (kn_qtype_get in kernels/kn_quant.h): a leaf that every ISA's kn_qops
 * table and the GGUF reader point into.
 */
#include <assert.h>

#include "kernels/kn_int.h"

/* Every ggml type by its number (ggml.h enum ggml_type; block sizes from
 * ggml-common.h / ggml.c type_traits); retired numbers stay NULL. The
 * implemented types' sizes are checked against the kernels' own block
 * constants below. */
const struct kn_qtype_info kn__qtypes[KN_Q_MAX] = {
	[0] = { "F32", 1, 4 },
	[1] = { "F16", 1, 2 },
	[2] = { "Q4_0", 32, 18 },
	[3] = { "Q4_1", 32, 20 },
	[6] = { "Q5_0", 32, 22 },
	[7] = { "Q5_1", 32, 24 },
	[8] = { "Q8_0", 32, 34 },
	[9] = { "Q8_1", 32, 36 },
	[10] = { "Q2_K", 256, 84 },
	[11] = { "Q3_K", 256, 110 },
	[12] = { "Q4_K", 256, 144 },
	[13] = { "Q5_K", 256, 176 },
	[14] = { "Q6_K", 256, 210 },
	[15] = { "Q8_K", 256, 292 },
	[16] = { "IQ2_XXS", 256, 66 },
	[17] = { "IQ2_XS", 256, 74 },
	[18] = { "IQ3_XXS", 256, 98 },
	[19] = { "IQ1_S", 256, 50 },
	[20] = { "IQ4_NL", 32, 18 },
	[21] = { "IQ3_S", 256, 110 },
	[22] = { "IQ2_S", 256, 82 },
	[23] = { "IQ4_XS", 256, 136 },
	[24] = { "I8", 1, 1 },
	[25] = { "I16", 1, 2 },
	[26] = { "I32", 1, 4 },
	[27] = { "I64", 1, 8 },
	[28] = { "F64", 1, 8 },
	[29] = { "IQ1_M", 256, 56 },
	[30] = { "BF16", 1, 2 },
	[34] = { "TQ1_0", 256, 54 },
	[35] = { "TQ2_0", 256, 66 },
	[39] = { "MXFP4", 32, 17 },
};
static_assert(KN__Q4_0_BYTES == 18 && KN__Q4_1_BYTES == 20 && KN__Q5_0_BYTES == 22 &&
		      KN__Q5_1_BYTES == 24 && KN__Q8_0_BYTES == 34 &&
		      KN__Q4_K_BYTES == 144 && KN__Q5_K_BYTES == 176 && KN__Q6_K_BYTES == 210 &&
		      KN__Q2_K_BYTES == 84 && KN__Q3_K_BYTES == 110 && KN__IQ4_NL_BYTES == 18 &&
		      KN__IQ4_XS_BYTES == 136 && KN__QK == 32 &&
		      KN__QK_K == 256,
	      "kn__qtypes agrees with the kernels' block layouts");

/* ggml-common.h kvalues_iq4nl: a non-uniform grid, denser near 0. */
const int8_t kn__iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
				     1,    13,   25,  38,  53,  69,  89,  113};

const struct kn_qtype_info *kn_qtype_get(int type)
{
	if (type < 0 || type >= KN_Q_MAX || !kn__qtypes[type].name)
		return NULL;
	return &kn__qtypes[type];
}
