/* eng_vad_int.h - the loaded Silero VAD network, shared by eng_vad_load.c
 * and eng_vad_fwd.c. Weights are float32 copies (the safetensors data is
 * not aligned), laid out as kn_linear wants them: [out, in] rows, a conv's
 * row flattened input-channel-major ([co][ci][3], PyTorch's order).
 */
#ifndef ENG_VAD_INT_H
#define ENG_VAD_INT_H

#include "engine/vad/eng_vad.h"

#define EV_NFFT	  256 /* STFT frame length (samples) */
#define EV_HOP	  128 /* STFT hop (samples) */
#define EV_PAD	  64  /* reflect padding on the right (samples) */
#define EV_NBIN	  129 /* frequency bins: NFFT / 2 + 1 */
#define EV_FRAMES 4   /* STFT frames per window: (576 + 64 - 256) / 128 + 1 */
#define EV_HID	  128 /* LSTM width */
#define EV_NCONV  4   /* encoder convolutions */

/* One encoder convolution: kernel 3, padding 1, then ReLU. */
struct ev_conv {
	int c_in, c_out; /* channels */
	int stride;	 /* 1 or 2 */
	float *w;	 /* [c_out][c_in * 3] */
	float *b;	 /* [c_out] */
};

struct eng_vad {
	float *stft;		       /* [2 * EV_NBIN][EV_NFFT]: real rows, then imaginary */
	struct ev_conv conv[EV_NCONV]; /* 129->128 s1, 128->64 s2, 64->64 s2, 64->128 s1 */
	float *w_ih, *w_hh;	       /* [4 * EV_HID][EV_HID], gates i, f, g, o */
	float *b_ih, *b_hh;	       /* [4 * EV_HID] */
	float *w_out;		       /* [EV_HID] final 1x1 convolution */
	float b_out;		       /* its bias */
	float *block;		       /* one allocation holding every array above */
};

#endif /* ENG_VAD_INT_H */
