/* kn_mel.h - Whisper's log-mel spectrogram (the encoder's input features).
 *
 * Follows openai/whisper audio.py log_mel_spectrogram and faster-whisper
 * 1.2.1 feature_extractor.py FeatureExtractor.__call__, which compute the
 * same thing:
 *   16 kHz mono float samples
 *   -> STFT: n_fft 400, hop 160, periodic Hann window (np.hanning(401)[:-1]),
 *      center=True with reflect padding of 200 samples on each side
 *   -> power |X|^2 of bins 0..200, the last STFT frame dropped
 *   -> Slaney-scale mel filterbank with Slaney (area) normalisation, as
 *      librosa.filters.mel(sr=16000, n_fft=400, n_mels, htk=False,
 *      norm="slaney"), computed here from the formula (no data files)
 *   -> log10(max(mel, 1e-10)), clamped below at (global max - 8),
 *      then (x + 4) / 4.
 * The clamp uses the maximum over the whole [n_mels][n_frames] output, so
 * the features of a frame depend on the rest of the audio handed in: to
 * match a reference exactly, hand in exactly the samples it used.
 *
 * Matching faster-whisper 1.2.1 WhisperModel.transcribe: it calls
 * feature_extractor(audio) with the default padding=160, i.e. it appends
 * 160 zero samples to the decoded audio and computes one spectrogram over
 * the whole file (n_samples/160 + 1 frames; generate_segments then treats
 * the last frame as padding). So: append 160 zeros, call kn_mel_compute
 * once on the whole buffer, then cut 3000-frame windows and zero-pad the
 * last one (pad_or_trim). openai/whisper instead appends 480000 zeros
 * (30 s) before computing; append those to match it.
 *
 * Thread: kn_mel_create/destroy anywhere; kn_mel_compute from any number of
 * threads at once on one kn_mel (it is read-only after creation), each with
 * its own scratch and output.
 */
#ifndef KN_MEL_H
#define KN_MEL_H

#include <stddef.h>

#define KN_MEL_SAMPLE_RATE 16000 /* Hz, the only rate the features are defined for */
#define KN_MEL_N_FFT	   400	 /* samples per STFT frame (25 ms) */
#define KN_MEL_HOP	   160	 /* samples between frames (10 ms) */
#define KN_MEL_N_BINS	   201	 /* one-sided FFT bins, n_fft/2 + 1 */

struct kn_mel;

/* kn_mel_create - precompute the windowed DFT basis [400][2*201] and the
 * mel filterbank [n_mels][201] for n_mels = 80 (Whisper v1/v2, tiny..large-v2)
 * or 128 (large-v3). *out is new, freed with kn_mel_destroy; set to NULL on
 * entry. Errors: -ST_INVAL (other n_mels or out NULL), -ST_NOMEM. Allocates
 * about 0.8 MB through mem.h. */
int kn_mel_create(int n_mels, struct kn_mel **out);

/* kn_mel_destroy - free m; NULL is a no-op. */
void kn_mel_destroy(struct kn_mel *m);

/* kn_mel_n_mels - the n_mels m was created with. */
int kn_mel_n_mels(const struct kn_mel *m);

/* kn_mel_n_frames - frames the reference produces for n_samples samples
 * (after whatever padding the caller appended): 1 + n/160 STFT frames less
 * the dropped last one = n_samples / 160 (0 for n_samples < 160). */
size_t kn_mel_n_frames(size_t n_samples);

/* kn_mel_scratch_len - floats of scratch kn_mel_compute needs. A constant
 * (about 1.1 MB) whatever the audio length: frames are processed in blocks. */
size_t kn_mel_scratch_len(const struct kn_mel *m);

/* kn_mel_compute - log-mel features of samples.
 *   samples: (n_samples) f32, 16 kHz mono, borrowed; the caller appends any
 *            padding the reference it wants to match uses (see above).
 *   out:     (n_mels, kn_mel_n_frames(n_samples)) f32 row-major, mel-major
 *            like the reference ([mel][frame]); written, caller-owned.
 *   scratch: (scratch_len) f32 caller-owned, scratch_len >=
 *            kn_mel_scratch_len(m); contents on return unspecified.
 * No frames (n_samples < 160) returns 0 and writes nothing. The DFT runs as
 * one GEMM per block of frames (kn_gemm, OpenBLAS, with the calling thread's
 * OpenBLAS thread setting). Never allocates.
 * Errors: -ST_INVAL (NULL m/out/scratch with frames to produce, or
 * scratch_len too small). */
int kn_mel_compute(const struct kn_mel *m, const float *samples, size_t n_samples, float *out,
		   float *scratch, size_t scratch_len);

/* kn_mel_filters - the filterbank, (n_mels, 201) f32 row-major, borrowed
 * from m (for tests and for callers that want the mel projection alone). */
const float *kn_mel_filters(const struct kn_mel *m);

#endif /* KN_MEL_H */
