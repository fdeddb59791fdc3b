/* kernels/kn_qpack.c - the x partner of the packed Q8_0 layout (kn_quant.h
 * struct kn_qpack), shared by every ISA's packed kernels
 * (kernels/ref/qpack.c, kernels/x86/qpack_avx512.c): the ISA's own Q8_0
 * quantize_x, whose codes and d are the same in every ISA, rearranged.
 */
#include <string.h>

#include "kernels/kn_half.h"
#include "kernels/kn_int.h"

void kn__qpack_q8_0_x(const struct kn_qops *q8, const float *restrict x, void *restrict xq,
		      size_t k)
{
	enum { CHUNK = 64 }; /* blocks quantized at a time */
	uint8_t tmp[CHUNK * KN__Q8_0X_BYTES];
	size_t nb = k / KN__QK;
	int8_t *codes = xq;
	float *d = (float *)(codes + nb * KN__QK);
	int32_t *sums = (int32_t *)(d + nb);
	for (size_t b0 = 0; b0 < nb; b0 += CHUNK) {
		size_t n = nb - b0 < CHUNK ? nb - b0 : CHUNK;
		q8->quantize_x(x + b0 * KN__QK, tmp, n * KN__QK);
		for (size_t i = 0; i < n; i++) {
			const uint8_t *blk = tmp + i * KN__Q8_0X_BYTES;
			uint16_t h;
			int32_t s = 0;
			memcpy(&h, blk, 2);
			memcpy(codes + (b0 + i) * KN__QK, blk + 2, KN__QK);
			for (int j = 0; j < KN__QK; j++)
				s += (int8_t)blk[2 + j];
			d[b0 + i] = kn_f16_to_f32(h);
			sums[b0 + i] = s;
		}
	}
}
