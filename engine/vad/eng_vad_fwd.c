/* eng_vad_fwd.c - the Silero VAD forward pass (silero-vad v5/v6's 16 kHz
 * network, as the wheel's tinygrad_model.py and silero_vad_16k_op15.onnx
 * graph define it), per 512-sample window w with 64 samples of context:
 *
 *   x[576] = context | window; reflect-pad 64 on the right -> [640]
 *   STFT: a conv1d with the fixed basis [258][256], hop 128 -> 4 frames;
 *         magnitude sqrt(re^2 + im^2) -> [4][129]
 *   encoder: 4 x (conv1d k3 p1 + ReLU): 129->128 s1, 128->64 s2,
 *            64->64 s2, 64->128 s1 -> [1][128]
 *   LSTMCell(128, 128), state (h, c) carried from window to window
 *   decoder: ReLU(h), 1x1 conv to 1, sigmoid -> the speech probability
 *
 * Everything before the LSTM is independent per window, so windows go
 * through it EV_BLOCK at a time as matrix products (dev_host_linear, im2col for
 * the convolutions); the input half of the LSTM gates is one more product
 * per block, and only W_hh h and the cell update run window by window.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "engine/vad/eng_vad_int.h"
#include "devices/dev.h"

#define EV_BLOCK 64					     /* windows per batched pass */
#define EV_X	 (ENG_VAD_CONTEXT + ENG_VAD_WINDOW + EV_PAD) /* 640 samples */

/* Per-call scratch, floats for EV_BLOCK windows. */
struct ev_scratch {
	float *frames; /* [B * 4][256] STFT frames */
	float *spec;   /* [B * 4][258] STFT output */
	float *col;    /* [B * 4][129 * 3] im2col of a convolution's input */
	float *act[2]; /* [B * 4][129] activations, ping-pong */
	float *gx;     /* [B][512] W_ih x + b_ih */
	float *block;  /* the one allocation */
};

/* The LSTM state and input bookkeeping of one eng_vad_probs call. */
struct ev_run {
	const float *samples; /* the input, n samples */
	size_t n;
	size_t n_win; /* windows: n / 512 + 1 */
	float h[EV_HID], c[EV_HID];
};

static int ev_scratch_init(struct ev_scratch *s)
{
	size_t f = (size_t)EV_BLOCK * EV_FRAMES;
	size_t sizes[6] = {f * EV_NFFT, f * 2 * EV_NBIN, f * EV_NBIN * 3,
			   f * EV_NBIN, f * EV_NBIN,	 (size_t)EV_BLOCK * 4 * EV_HID};
	size_t total = 0;
	for (int i = 0; i < 6; i++)
		total += sizes[i];
	s->block = mem_alloc(total * sizeof(float));
	if (!s->block)
		return -ST_NOMEM;
	float *p = s->block;
	float **dst[6] = {&s->frames, &s->spec, &s->col, &s->act[0], &s->act[1], &s->gx};
	for (int i = 0; i < 6; i++) {
		*dst[i] = p;
		p += sizes[i];
	}
	return 0;
}

/* ev_sample - sample j (-64 <= j < 512) of window w as faster-whisper
 * feeds it: zero past the input, the last window's final 64 zeroed, the
 * context before window 0 zero. */
static float ev_sample(const struct ev_run *r, size_t w, long j)
{
	if (j < 0) {
		if (w == 0)
			return 0.0f;
		w--;
		j += ENG_VAD_WINDOW;
	} else if (w == r->n_win - 1 && j >= ENG_VAD_WINDOW - ENG_VAD_CONTEXT) {
		return 0.0f;
	}
	size_t i = w * ENG_VAD_WINDOW + (size_t)j;
	return i < r->n ? r->samples[i] : 0.0f;
}

/* ev_frames - the 4 STFT frames of window w into out[4][256]. */
static void ev_frames(const struct ev_run *r, size_t w, float *out)
{
	float x[EV_X];
	for (long j = 0; j < ENG_VAD_CONTEXT + ENG_VAD_WINDOW; j++)
		x[j] = ev_sample(r, w, j - ENG_VAD_CONTEXT);
	for (int j = 0; j < EV_PAD; j++) /* reflect: the edge sample is not repeated */
		x[ENG_VAD_CONTEXT + ENG_VAD_WINDOW + j] =
			x[ENG_VAD_CONTEXT + ENG_VAD_WINDOW - 2 - j];
	for (int f = 0; f < EV_FRAMES; f++)
		memcpy(out + (size_t)f * EV_NFFT, x + f * EV_HOP, EV_NFFT * sizeof(float));
}

/* ev_im2col_row - the input of output position t of one window:
 * row[ci * 3 + tap] = in[t * stride + tap - 1][ci], zero outside [0, l_in). */
static void ev_im2col_row(const struct ev_conv *cv, const float *in, int l_in, int t, float *row)
{
	for (int tap = 0; tap < 3; tap++) {
		int src = t * cv->stride + tap - 1;
		if (src < 0 || src >= l_in) {
			for (int ci = 0; ci < cv->c_in; ci++)
				row[ci * 3 + tap] = 0.0f;
			continue;
		}
		const float *x = in + (size_t)src * (size_t)cv->c_in;
		for (int ci = 0; ci < cv->c_in; ci++)
			row[ci * 3 + tap] = x[ci];
	}
}

/* ev_conv - one encoder layer on nb windows: in [nb][l_in][c_in] ->
 * out [nb][l_out][c_out], l_out = (l_in - 1) / stride + 1 (kernel 3,
 * padding 1), ReLU. Returns l_out. */
static int ev_conv(const struct ev_conv *cv, const float *in, int l_in, size_t nb, float *col,
		   float *out)
{
	int l_out = (l_in - 1) / cv->stride + 1;
	size_t k = (size_t)cv->c_in * 3;
	for (size_t w = 0; w < nb; w++)
		for (int t = 0; t < l_out; t++)
			ev_im2col_row(cv, in + w * (size_t)l_in * (size_t)cv->c_in, l_in, t,
				      col + (w * (size_t)l_out + (size_t)t) * k);
	size_t m = nb * (size_t)l_out, nout = m * (size_t)cv->c_out;
	dev_host_linear(m, (size_t)cv->c_out, k, col, cv->w, cv->b, out);
	for (size_t i = 0; i < nout; i++)
		out[i] = out[i] > 0.0f ? out[i] : 0.0f;
	return l_out;
}

/* ev_encode - windows [w0, w0 + nb) through STFT, encoder and W_ih:
 * s->gx[nb][512]. */
static void ev_encode(const struct eng_vad *v, const struct ev_run *r, size_t w0, size_t nb,
		      struct ev_scratch *s)
{
	size_t nf = nb * EV_FRAMES;
	for (size_t w = 0; w < nb; w++)
		ev_frames(r, w0 + w, s->frames + w * EV_FRAMES * EV_NFFT);
	dev_host_linear(nf, 2 * EV_NBIN, EV_NFFT, s->frames, v->stft, NULL, s->spec);
	for (size_t f = 0; f < nf; f++) {
		const float *re = s->spec + f * 2 * EV_NBIN, *im = re + EV_NBIN;
		float *mag = s->act[0] + f * EV_NBIN;
		for (int b = 0; b < EV_NBIN; b++)
			mag[b] = sqrtf(re[b] * re[b] + im[b] * im[b]);
	}
	int l = EV_FRAMES;
	for (int i = 0; i < EV_NCONV; i++)
		l = ev_conv(&v->conv[i], s->act[i & 1], l, nb, s->col, s->act[(i + 1) & 1]);
	/* l == 1 now: act[0] holds [nb][128] */
	dev_host_linear(nb, 4 * EV_HID, EV_HID, s->act[0], v->w_ih, v->b_ih, s->gx);
}

static float ev_sigmoid(float x)
{
	return 1.0f / (1.0f + expf(-x));
}

/* ev_step - one LSTMCell step from gates g[512] = W_ih x + b_ih (PyTorch
 * gate order i, f, g, o), then the decoder: the window's probability. */
static float ev_step(const struct eng_vad *v, struct ev_run *r, const float *gx)
{
	float g[4 * EV_HID];
	dev_host_linear(1, 4 * EV_HID, EV_HID, r->h, v->w_hh, v->b_hh, g);
	float acc = v->b_out;
	for (int j = 0; j < EV_HID; j++) {
		float gi = ev_sigmoid(gx[j] + g[j]);
		float gf = ev_sigmoid(gx[EV_HID + j] + g[EV_HID + j]);
		float gg = tanhf(gx[2 * EV_HID + j] + g[2 * EV_HID + j]);
		float go = ev_sigmoid(gx[3 * EV_HID + j] + g[3 * EV_HID + j]);
		r->c[j] = gf * r->c[j] + gi * gg;
		r->h[j] = go * tanhf(r->c[j]);
		acc += v->w_out[j] * (r->h[j] > 0.0f ? r->h[j] : 0.0f);
	}
	return ev_sigmoid(acc);
}

size_t eng_vad_n_windows(size_t n_samples)
{
	return n_samples / ENG_VAD_WINDOW + 1;
}

int eng_vad_probs(const struct eng_vad *vad, const float *samples, size_t n, float *probs)
{
	struct ev_scratch s;
	if (ev_scratch_init(&s))
		return -ST_NOMEM;
	struct ev_run r = {.samples = samples, .n = n, .n_win = eng_vad_n_windows(n)};
	memset(r.h, 0, sizeof(r.h));
	memset(r.c, 0, sizeof(r.c));
	for (size_t w0 = 0; w0 < r.n_win; w0 += EV_BLOCK) {
		size_t nb = r.n_win - w0 < EV_BLOCK ? r.n_win - w0 : EV_BLOCK;
		ev_encode(vad, &r, w0, nb, &s);
		for (size_t w = 0; w < nb; w++)
			probs[w0 + w] = ev_step(vad, &r, s.gx + w * 4 * EV_HID);
	}
	mem_free(s.block);
	return 0;
}
