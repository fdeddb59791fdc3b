/* kernels/x86/dot_rows_f16.h - kn_ops dot_rows_g_f16 (kn.h): g rows of x
 * against binary16 rows of W, each 4 rows of W widened once for up to
 * DF_G rows of x. Not a public header: included once by x86/ops_avx2.c
 * (ymm, DF_G 2: 4 DF_G + 5 vectors of 16) and once by x86/ops_avx512.c
 * (zmm, DF_G 4), after that file's gemv_f16, whose arithmetic each (row
 * of W, row of x) repeats exactly - one accumulator over k in steps of a
 * vector, the file's horizontal sum, the last k % W elements in scalar,
 * the rows past the last 4 by gemv_f16 itself - so the bits are the same.
 * The including file defines W (floats per vector) and:
 *   DF_VEC            the vector type
 *   DF_ZERO()         a vector of zeros
 *   DF_LOADH(p)       W binary16 at p widened
 *   DF_LOADF(p)       W floats at p
 *   DF_FMA(a, b, c)   a b + c
 *   DF_SUM(v)         gemv_f16's horizontal sum
 *   DF_GEMV           gemv_f16
 *   DF_G              rows of x a pass
 */
#ifndef KN_X86_DOT_ROWS_F16_H
#define KN_X86_DOT_ROWS_F16_H

static inline __attribute__((always_inline)) void
df_dot_rows(const float *x, size_t ldx, int G, const uint16_t *Wt, size_t ldw, size_t n_rows,
	    size_t k, float *y, size_t ldy)
{
	size_t r = 0;
	for (; r + 4 <= n_rows; r += 4) {
		const uint16_t *w0 = Wt + r * ldw;
		DF_VEC a[DF_G][4];
		for (int h = 0; h < G; h++)
			for (int j = 0; j < 4; j++)
				a[h][j] = DF_ZERO();
		size_t i = 0;
		for (; i + W <= k; i += W) {
			DF_VEC wv[4];
			for (int j = 0; j < 4; j++)
				wv[j] = DF_LOADH(w0 + (size_t)j * ldw + i);
			for (int h = 0; h < G; h++) {
				DF_VEC xv = DF_LOADF(x + (size_t)h * ldx + i);
				for (int j = 0; j < 4; j++)
					a[h][j] = DF_FMA(wv[j], xv, a[h][j]);
			}
		}
		for (int h = 0; h < G; h++)
			for (int j = 0; j < 4; j++) {
				const uint16_t *wj = w0 + (size_t)j * ldw;
				const float *xh = x + (size_t)h * ldx;
				float sum = DF_SUM(a[h][j]);
				for (size_t t = i; t < k; t++)
					sum += _cvtsh_ss(wj[t]) * xh[t];
				y[(size_t)h * ldy + r + (size_t)j] = sum;
			}
	}
	for (; r < n_rows; r++)
		for (int h = 0; h < G; h++)
			DF_GEMV(Wt + r * ldw, ldw, x + (size_t)h * ldx, y + (size_t)h * ldy + r, 1, k);
}

static void df_dot_rows_g_f16(const float *x, size_t ldx, size_t g, const uint16_t *Wt,
			      size_t ldw, size_t n_rows, size_t k, float *y, size_t ldy)
{
	for (size_t h = 0; h < g; h += DF_G) {
		const float *xh = x + h * ldx;
		float *yh = y + h * ldy;
		if (g - h >= 4 && DF_G >= 4)
			df_dot_rows(xh, ldx, 4, Wt, ldw, n_rows, k, yh, ldy);
		else if (g - h >= 3 && DF_G >= 3)
			df_dot_rows(xh, ldx, 3, Wt, ldw, n_rows, k, yh, ldy);
		else if (g - h >= 2)
			df_dot_rows(xh, ldx, 2, Wt, ldw, n_rows, k, yh, ldy);
		else
			df_dot_rows(xh, ldx, 1, Wt, ldw, n_rows, k, yh, ldy);
	}
}

#endif /* KN_X86_DOT_ROWS_F16_H */
