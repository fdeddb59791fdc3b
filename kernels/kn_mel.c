/* kn_mel.c - Whisper's log-mel spectrogram (contract in kn_mel.h).
 *
 * Why a DFT-by-GEMM and not an FFT: n_fft = 400 = 2^4 * 5^2 is not a power
 * of two, so a fast transform needs a mixed-radix FFT (pocketfft's job in
 * numpy) - several hundred lines to write and test. The direct DFT against
 * a precomputed [400][402] basis (cos and sin columns for bins 0..200, the
 * Hann window folded in) is 161k multiply-adds per frame; as one OpenBLAS
 * SGEMM per block of frames that runs near peak (~100 GFLOP/s per core), so
 * an hour of audio (360k frames, 1.2e11 flop) costs about a second on one
 * core - well inside the budget, with one code path that is easy to verify.
 * The mel projection is a second GEMM writing straight into the mel-major
 * output. Both use double-precision set-up and float32 arithmetic like
 * faster-whisper (numpy >= 2 runs rfft in float32).
 *
 * Invariants: a struct kn_mel is immutable after kn_mel_create; all
 * per-call memory is the caller's scratch, processed in blocks of
 * MEL_BLOCK frames so the scratch size does not grow with the audio.
 */
#include "kernels/kn_mel.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "kernels/kn_blas.h"

#define MEL_BLOCK     256		  /* frames per GEMM block */
#define MEL_PAD	      (KN_MEL_N_FFT / 2)  /* center=True reflect padding, samples */
#define MEL_SPEC_W    (2 * KN_MEL_N_BINS) /* basis columns: cos bins, then sin bins */
#define MEL_LOG_FLOOR 1e-10f		  /* log10 floor (the reference's clip) */
#define MEL_DYN_RANGE 8.0f		  /* dB/10 kept below the global max */

struct kn_mel {
	int n_mels;	/* 80 or 128 */
	float *basis;	/* (400, 402): [t][k] = w[t]cos(2pi kt/400), [t][201+k] = -w[t]sin(..) */
	float *filters; /* (n_mels, 201): Slaney mel filterbank, Slaney-normalised */
};

/* C[M,N] = A[M,K] * op(B), row-major, through the project's OpenBLAS
 * wrapper (kn_blas.h). */
static void mel_gemm(bool trans_b, size_t M, size_t N, size_t K, const float *A, size_t lda,
		     const float *B, size_t ldb, float *C, size_t ldc)
{
	kn_gemm(trans_b, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc);
}

/* Hann window, periodic: np.hanning(401)[:-1] = 0.5 - 0.5 cos(2 pi t / 400).
 * The window is folded into the DFT basis; the angle is reduced exactly
 * through (k*t mod 400) before scaling, so every entry is correctly rounded. */
static void mel_fill_basis(float *basis)
{
	const double two_pi = 2.0 * M_PI;
	for (int t = 0; t < KN_MEL_N_FFT; t++) {
		double w = 0.5 - 0.5 * cos(two_pi * t / KN_MEL_N_FFT);
		float *row = basis + (size_t)t * MEL_SPEC_W;
		for (int k = 0; k < KN_MEL_N_BINS; k++) {
			double ang = two_pi * (double)((k * t) % KN_MEL_N_FFT) / KN_MEL_N_FFT;
			row[k] = (float)(w * cos(ang));
			row[KN_MEL_N_BINS + k] = (float)(-w * sin(ang));
		}
	}
}

/* Slaney mel scale to Hz (librosa.mel_to_hz, htk=False): linear below
 * 1 kHz (200/3 Hz per mel), logarithmic above (step log(6.4)/27). */
static double mel_to_hz(double mel)
{
	const double f_sp = 200.0 / 3.0, min_log_hz = 1000.0;
	const double min_log_mel = min_log_hz / f_sp, logstep = log(6.4) / 27.0;
	if (mel >= min_log_mel)
		return min_log_hz * exp(logstep * (mel - min_log_mel));
	return f_sp * mel;
}

/* librosa.filters.mel(sr=16000, n_fft=400, n_mels, fmin=0, fmax=8000,
 * htk=False, norm="slaney"): triangles between n_mels+2 points evenly
 * spaced on the Slaney mel scale (0 .. hz_to_mel(8000) = 45.2456...), each
 * scaled by 2 / (right edge - left edge) Hz. Computed in double, stored f32.
 * freqs needs n_mels + 2 entries. */
static void mel_fill_filters(float *filters, int n_mels, double *freqs)
{
	const double max_mel = 45.245640471924965; /* hz_to_mel(8000), Slaney */
	const double bin_hz = (double)KN_MEL_SAMPLE_RATE / KN_MEL_N_FFT;
	for (int i = 0; i < n_mels + 2; i++) /* np.linspace: i * step, last exact */
		freqs[i] = mel_to_hz(i == n_mels + 1 ? max_mel : i * (max_mel / (n_mels + 1)));
	for (int m = 0; m < n_mels; m++) {
		double lo = freqs[m], mid = freqs[m + 1], hi = freqs[m + 2];
		double enorm = 2.0 / (hi - lo);
		for (int k = 0; k < KN_MEL_N_BINS; k++) {
			double f = k * bin_hz;
			double lower = (f - lo) / (mid - lo), upper = (hi - f) / (hi - mid);
			double w = fmax(0.0, fmin(lower, upper));
			filters[(size_t)m * KN_MEL_N_BINS + k] = (float)(w * enorm);
		}
	}
}

int kn_mel_create(int n_mels, struct kn_mel **out)
{
	if (!out)
		return -ST_INVAL;
	*out = NULL;
	if (n_mels != 80 && n_mels != 128)
		return -ST_INVAL;
	int rc = -ST_NOMEM;
	double freqs[128 + 2];
	struct kn_mel *m = mem_calloc(1, sizeof(*m));
	if (!m)
		return -ST_NOMEM;
	m->n_mels = n_mels;
	m->basis = mem_alloc(sizeof(*m->basis) * KN_MEL_N_FFT * MEL_SPEC_W);
	m->filters = mem_alloc(sizeof(*m->filters) * (size_t)n_mels * KN_MEL_N_BINS);
	if (!m->basis || !m->filters)
		goto out_destroy;
	mel_fill_basis(m->basis);
	mel_fill_filters(m->filters, n_mels, freqs);
	*out = m;
	return 0;
out_destroy:
	kn_mel_destroy(m);
	return rc;
}

void kn_mel_destroy(struct kn_mel *m)
{
	if (!m)
		return;
	mem_free(m->basis);
	mem_free(m->filters);
	mem_free(m);
}

int kn_mel_n_mels(const struct kn_mel *m)
{
	return m ? m->n_mels : 0;
}

const float *kn_mel_filters(const struct kn_mel *m)
{
	return m ? m->filters : NULL;
}

size_t kn_mel_n_frames(size_t n_samples)
{
	/* padded length n + 400 gives 1 + n/160 frames; the last is dropped */
	return n_samples / KN_MEL_HOP;
}

size_t kn_mel_scratch_len(const struct kn_mel *m)
{
	(void)m;
	return (size_t)MEL_BLOCK * (KN_MEL_N_FFT + MEL_SPEC_W + KN_MEL_N_BINS);
}

/* Index into samples of padded position p (the signal with MEL_PAD samples
 * reflected on each side, np.pad mode="reflect"). Pads longer than the
 * signal reflect again, which np.pad's repeated reflection equals: a
 * periodic extension with period 2(n-1); n == 1 repeats the one sample. */
static size_t mel_reflect(long long p, size_t n)
{
	long long j = p - MEL_PAD;
	if (j >= 0 && (size_t)j < n)
		return (size_t)j;
	if (n == 1)
		return 0;
	long long period = 2 * ((long long)n - 1);
	j %= period;
	if (j < 0)
		j += period;
	return (size_t)(j >= (long long)n ? period - j : j);
}

/* Copy frames f0 .. f0+nb-1 (400 samples each, hop 160, padded
 * coordinates) into rows of frames; interior frames are one memcpy. */
static void mel_gather(const float *samples, size_t n, size_t f0, size_t nb, float *frames)
{
	for (size_t b = 0; b < nb; b++) {
		size_t start = (f0 + b) * KN_MEL_HOP; /* padded position of sample 0 */
		float *row = frames + b * KN_MEL_N_FFT;
		if (start >= MEL_PAD && start - MEL_PAD + KN_MEL_N_FFT <= n) {
			memcpy(row, samples + (start - MEL_PAD), sizeof(*row) * KN_MEL_N_FFT);
			continue;
		}
		for (size_t t = 0; t < KN_MEL_N_FFT; t++)
			row[t] = samples[mel_reflect((long long)(start + t), n)];
	}
}

/* power[b][k] = re^2 + im^2 of spec rows (cos part, then sin part). */
static void mel_power(const float *spec, size_t nb, float *power)
{
	for (size_t b = 0; b < nb; b++) {
		const float *re = spec + b * MEL_SPEC_W, *im = re + KN_MEL_N_BINS;
		float *p = power + b * KN_MEL_N_BINS;
		for (size_t k = 0; k < KN_MEL_N_BINS; k++)
			p[k] = re[k] * re[k] + im[k] * im[k];
	}
}

/* log10(max(x, 1e-10)) in place; returns the maximum. */
static float mel_log(float *x, size_t n)
{
	float mx = -INFINITY;
	for (size_t i = 0; i < n; i++) {
		float v = log10f(x[i] > MEL_LOG_FLOOR ? x[i] : MEL_LOG_FLOOR);
		x[i] = v;
		mx = v > mx ? v : mx;
	}
	return mx;
}

/* max(x, mx - 8), then (x + 4) / 4, in place. */
static void mel_scale(float *x, size_t n, float mx)
{
	const float lo = mx - MEL_DYN_RANGE;
	for (size_t i = 0; i < n; i++)
		x[i] = ((x[i] > lo ? x[i] : lo) + 4.0f) / 4.0f;
}

int kn_mel_compute(const struct kn_mel *m, const float *samples, size_t n_samples, float *out,
		   float *scratch, size_t scratch_len)
{
	size_t n_frames = kn_mel_n_frames(n_samples);
	if (n_frames == 0)
		return 0;
	if (!m || !samples || !out || !scratch || scratch_len < kn_mel_scratch_len(m))
		return -ST_INVAL;
	float *frames = scratch;
	float *spec = frames + (size_t)MEL_BLOCK * KN_MEL_N_FFT;
	float *power = spec + (size_t)MEL_BLOCK * MEL_SPEC_W;
	for (size_t f0 = 0; f0 < n_frames; f0 += MEL_BLOCK) {
		size_t nb = n_frames - f0 < MEL_BLOCK ? n_frames - f0 : MEL_BLOCK;
		mel_gather(samples, n_samples, f0, nb, frames);
		/* spec[nb][402] = frames[nb][400] * basis[400][402] */
		mel_gemm(false, nb, MEL_SPEC_W, KN_MEL_N_FFT, frames, KN_MEL_N_FFT, m->basis,
			 MEL_SPEC_W, spec, MEL_SPEC_W);
		mel_power(spec, nb, power);
		/* out[:, f0:f0+nb] = filters[n_mels][201] * power[nb][201]^T */
		mel_gemm(true, (size_t)m->n_mels, nb, KN_MEL_N_BINS, m->filters, KN_MEL_N_BINS,
			 power, KN_MEL_N_BINS, out + f0, n_frames);
	}
	size_t n_out = (size_t)m->n_mels * n_frames;
	mel_scale(out, n_out, mel_log(out, n_out));
	return 0;
}
