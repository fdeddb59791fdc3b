/* dev_host.c - dev.h's host front end: the work inferd runs on the host CPU
 * whatever device a model is on (the log-mel spectrogram, the Silero VAD's
 * small products), on the cpu back end's kernels (kernels/kn_mel.h,
 * kernels/kn_blas.h).
 */
#include <stdbool.h>

#include "common/mem.h"
#include "common/st.h"
#include "devices/dev.h"
#include "kernels/kn_blas.h"
#include "kernels/kn_mel.h"

struct dev_log_mel {
	struct kn_mel *mel;
};

int dev_log_mel_create(int n_mels, struct dev_log_mel **out)
{
	if (!out)
		return -ST_INVAL;
	*out = NULL;
	struct dev_log_mel *m = mem_calloc(1, sizeof(*m));
	if (!m)
		return -ST_NOMEM;
	int rc = kn_mel_create(n_mels, &m->mel);
	if (rc) {
		mem_free(m);
		return rc;
	}
	*out = m;
	return 0;
}

void dev_log_mel_destroy(struct dev_log_mel *m)
{
	if (!m)
		return;
	kn_mel_destroy(m->mel);
	mem_free(m);
}

size_t dev_log_mel_frames(size_t n_samples)
{
	return kn_mel_n_frames(n_samples);
}

size_t dev_log_mel_scratch_len(const struct dev_log_mel *m)
{
	return kn_mel_scratch_len(m->mel);
}

int dev_log_mel(const struct dev_log_mel *m, const float *samples, size_t n, float *out,
		float *scratch, size_t scratch_len)
{
	if (!m)
		return -ST_INVAL;
	return kn_mel_compute(m->mel, samples, n, out, scratch, scratch_len);
}

void dev_host_linear(size_t m, size_t n, size_t k, const float *x, const float *w, const float *b,
		     float *y)
{
	kn_linear(m, n, k, x, w, b, y);
}
