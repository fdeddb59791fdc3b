/* eng_whisper.h - the Whisper encoder-decoder (Radford et al. 2022,
 * "Robust Speech Recognition via Large-Scale Weak Supervision"), loaded
 * from a CTranslate2 WhisperSpec (spec revision 3) and run through the
 * device interface (devices/dev.h) on the replica's device.
 *
 * Shapes (tiny.en in brackets): n_mels (80) log-mel bins; the encoder
 * takes a [n_mels, 3000] window (30 s), two convolutions (k 3; stride 1
 * then 2) and GELU make [1500, d_model (384)], plus sinusoidal positions,
 * then enc_layers (4) pre-norm blocks (self-attention, GELU MLP) and a final
 * LayerNorm. The decoder embeds tokens (+ learned positions, n_text_ctx
 * 448), runs dec_layers (4) pre-norm blocks (causal self-attention with a
 * KV cache, cross-attention over the encoder output, GELU MLP), a final
 * LayerNorm, and projects on the token embeddings (tied) to n_vocab logits.
 *
 * Lifetimes: struct eng_whisper (weights converted once, in host memory,
 * and their copy on each device a replica runs on) is immutable after
 * load and shared by every request and replica. A struct eng_whisper_enc
 * holds one window's encoder output and the decoder's cross-attention
 * keys/values; a struct eng_whisper_kv one hypothesis's self-attention
 * cache; both in one device's memory, used by that device's queues. Both
 * belong to one request on one thread. Every pass runs on a queue q of
 * their device, from q's work items (the replica loop) or from one thread
 * while q runs none; its errors: -ST_NOMEM, -ST_DEVICE (the device
 * failed) and those named.
 */
#ifndef ENG_WHISPER_H
#define ENG_WHISPER_H

#include <stddef.h>
#include <stdint.h>

#include "engine/eng.h"

struct eng_ct2;
struct eng_whisper;
struct eng_whisper_enc;
struct eng_whisper_kv;
struct dev;
struct dev_queue;

#define ENG_WHISPER_N_FRAMES 3000 /* mel frames in one 30 s window */
#define ENG_WHISPER_HOP 160       /* samples per mel frame at 16 kHz */
#define ENG_WHISPER_INPUT_STRIDE 2 /* mel frames per encoder position */
#define ENG_WHISPER_SAMPLE_RATE 16000

/* Hyper-parameters, all read from the variables' shapes. */
struct eng_whisper_hp {
	int n_mels;      /* conv1 input channels: 80, or 128 for large-v3 */
	int n_audio_ctx; /* encoder positions: 1500 */
	int d_model;     /* width */
	int n_heads;     /* attention heads (encoder and decoder) */
	int enc_layers;
	int dec_layers;
	int n_text_ctx;  /* decoder positions: 448 */
	int n_vocab;     /* 51864 English-only, 51865/51866 multilingual */
	int d_ffn;       /* MLP hidden width: 4 * d_model */
};

/* eng_whisper_load - convert ct2's WhisperSpec variables to float32.
 * ct2 is borrowed (only during the call). Errors: -ST_UNSUPPORTED (not a
 * WhisperSpec, quantized weights, unexpected activation/norm settings),
 * -ST_CORRUPT (a missing variable or a shape that disagrees), -ST_NOMEM;
 * err gets one line naming the variable. Start-up thread. */
int eng_whisper_load(const struct eng_ct2 *ct2, struct eng_whisper **out, char *err,
		     size_t errlen);

/* eng_whisper_load_ct - eng_whisper_load for a compute type (eng.h):
 * int8 quantizes every encoder and decoder linear and the tied output
 * projection per output row (dev.h's DEV_TYPE_I8R), or takes the codes and their
 * "<name>_scale" (CTranslate2's weight_scale, 127 / amax per row) as
 * stored; FLOAT32 / DEFAULT on a float folder is eng_whisper_load. An
 * int8-stored folder loaded as float32 is dequantized (q / weight_scale).
 * Errors as eng_whisper_load, and -ST_INVAL for a compute type out of
 * range. */
int eng_whisper_load_ct(const struct eng_ct2 *ct2, enum eng_compute_type ct,
			struct eng_whisper **out, char *err, size_t errlen);
void eng_whisper_destroy(struct eng_whisper *w);

/* eng_whisper_hold - w's weights on d, made now if d has none yet (a cpu
 * device shares the host's), held in *set until eng_whisper_release: a
 * replica holds its device's for its life, so a device's weights are
 * uploaded once. err says why not (a type d lacks, out of memory, or w
 * sealed before d had any). */
int eng_whisper_hold(const struct eng_whisper *w, struct dev *d, void **set, char *err,
		     size_t errlen);
void eng_whisper_release(const struct eng_whisper *w, void *set);

/* eng_whisper_seal - every device w will run on holds its weights now:
 * free the host copies that only made them (the int8 rows, which every
 * device keeps a copy of: dev.h's DEV_TYPE_I8R), and refuse weights for
 * any other device from here on. Start-up, before any request. */
void eng_whisper_seal(struct eng_whisper *w);
const struct eng_whisper_hp *eng_whisper_hp(const struct eng_whisper *w);
/* Bytes of the weights held on the host (each device's set besides). */
size_t eng_whisper_weight_bytes(const struct eng_whisper *w);
/* The compute type the loaded weights run in, as eng.h names them
 * ("float32", "int8", "bfloat16", "int8_bfloat16"): DEFAULT resolved to
 * what the folder stores. Static string. */
const char *eng_whisper_compute_type(const struct eng_whisper *w);

/* eng_whisper_enc_create - device memory on d for one window's encoder
 * pass and the cross-attention keys/values (about 40 MB for tiny; the cpu
 * queue keeps 9 MB of attention scores per thread besides), and the
 * model's weights on d (made on first use). -ST_NOMEM, or the weights'
 * error (a type d lacks); err says which. */
int eng_whisper_enc_create(const struct eng_whisper *w, struct dev *d,
			   struct eng_whisper_enc **out, char *err, size_t errlen);
void eng_whisper_enc_destroy(struct eng_whisper_enc *e);

/* eng_whisper_enc_trim - the encoder positions e's next encoder pass
 * computes: the first n_ctx (0, or n_ctx >= n_audio_ctx: all 1500, the
 * default). A trimmed window is the first 2 * n_ctx mel frames (at 10 ms)
 * of the 30 s one; its positions attend only to each other, and the
 * decoder's cross-attention and word alignment over e see n_ctx columns.
 * This is whisper.cpp's audio_ctx: far less compute for short audio, at
 * some cost in accuracy the model was not trained for (the caller sizes
 * it with a margin past the audio). eng_whisper_enc_ctx - e's positions. */
void eng_whisper_enc_trim(const struct eng_whisper *w, struct eng_whisper_enc *e, size_t n_ctx);
size_t eng_whisper_enc_ctx(const struct eng_whisper_enc *e);

/* eng_whisper_encode - run the encoder on mel frames [frame0, frame0 +
 * n_frames) of a [n_mels, mel_stride] mel-major spectrogram; frames past
 * n_frames up to 3000 (up to 2 * eng_whisper_enc_ctx) are zero-padded (openai/whisper pad_or_trim; the
 * padding value 0 is what the reference feeds); mel is host memory. Fills
 * e, on queue q of its device. Returns 0 or a device error. */
int eng_whisper_encode(const struct eng_whisper *w, struct eng_whisper_enc *e,
		       struct dev_queue *q, const float *mel, size_t mel_stride, size_t frame0,
		       size_t n_frames);

/* eng_whisper_encode_batch - eng_whisper_encode for n windows (of
 * different transcriptions) in one pass: the convolutions per window, then
 * every layer's norms and matrix products over the n windows' rows stacked
 * (each window's eng_whisper_enc_ctx rows: one read of each weight matrix), attention per
 * window, and the cross-attention keys/values of all windows in one
 * product per decoder layer. encs[b] receives window b's output exactly as
 * eng_whisper_encode would give it (every product is per row). Needs
 * about 16 MB of scratch per window (tiny); -ST_NOMEM when it cannot have
 * it (nothing written then). */
int eng_whisper_encode_batch(const struct eng_whisper *w, struct dev_queue *q,
			     struct eng_whisper_enc *const *encs, const float *const *mels,
			     const size_t *strides, const size_t *frame0, const size_t *n_frames,
			     size_t n);

/* eng_whisper_kv_create - an empty self-attention cache for n_text_ctx
 * tokens in d's memory. -ST_NOMEM. eng_whisper_kv_copy copies src's
 * filled positions into dst on q (beam search reordering); 0 or a device
 * error. */
int eng_whisper_kv_create(const struct eng_whisper *w, struct dev *d, struct eng_whisper_kv **out);
void eng_whisper_kv_destroy(struct eng_whisper_kv *kv);
int eng_whisper_kv_copy(const struct eng_whisper *w, struct dev_queue *q,
			struct eng_whisper_kv *dst, const struct eng_whisper_kv *src);
/* Positions filled so far. */
size_t eng_whisper_kv_len(const struct eng_whisper_kv *kv);
void eng_whisper_kv_reset(struct eng_whisper_kv *kv);

/* eng_whisper_decode - feed n tokens at positions kv_len .. kv_len+n-1
 * (the cache grows by n; requires kv_len + n <= n_text_ctx), attending to
 * e's encoder output. logits: [n_vocab] for the last token. If logits_at
 * is not NULL it receives the logits of token index at_index (< n) too
 * (no-speech probability at <|startoftranscript|>). The logits are host
 * memory. Returns 0 or -ST_TOOBIG (context full), -ST_INVAL (a token out
 * of range) or a device error; the cache grows only on success. */
int eng_whisper_decode(const struct eng_whisper *w, const struct eng_whisper_enc *e,
		       struct eng_whisper_kv *kv, struct dev_queue *q, const int32_t *tokens,
		       size_t n, float *logits, float *logits_at, size_t at_index);

/* eng_whisper_align_pass - the decoder over tokens [n] (n <= n_text_ctx)
 * from an empty cache, all rows at once, for word alignment (CTranslate2's
 * WhisperReplica::align: sot sequence, <|notimestamps|>, text, eot):
 *   scores: [n_heads][n][n_cols] out, the cross-attention scores before
 *           the softmax (q k^T / sqrt(head_dim)) of heads[k] = {layer,
 *           head} over encoder positions j < n_cols;
 *   probs:  [n_probs] out, probs[i] = P(tokens[r0 + i + 1] | row r0 + i)
 *           under the softmax over the first n_text logits (the text
 *           tokens: ids below <|endoftext|>); 0 for a token outside them.
 *           Needs r0 + n_probs < n.
 * scores and probs are host memory. Returns 0, -ST_TOOBIG (n over the
 * context), -ST_INVAL (a head, token or bound out of range), or a device
 * error. */
int eng_whisper_align_pass(const struct eng_whisper *w, const struct eng_whisper_enc *e,
			   struct dev_queue *q, const int32_t *tokens, size_t n,
			   const int (*heads)[2], size_t n_heads, size_t n_cols, size_t r0,
			   size_t n_probs, int32_t n_text, float *scores, float *probs);

/* eng_whisper_align_heads - the cross-attention heads that follow the
 * word timing, {decoder layer, head} pairs from the model's config.json
 * "alignment_heads" (borrowed; *n 0 when the model has none). */
const int (*eng_whisper_align_heads(const struct eng_whisper *w, size_t *n))[2];

/* One sequence's part of a batched decoder pass: a decode step (n = 1) or
 * a short prompt (n <= ENG_WHISPER_STEP_MAX, the rows eng_whisper_decode
 * computes with the binary16 weights). */
#define ENG_WHISPER_STEP_MAX 4
struct eng_whisper_step {
	const struct eng_whisper_enc *e; /* its window's encoder output */
	struct eng_whisper_kv *kv;       /* its cache; grows by n */
	const int32_t *tokens;           /* [n] */
	size_t n;
	float *logits;                   /* [n_vocab] out: the last token's */
	float *logits_at;                /* [n_vocab] out for token at_index, or NULL */
	size_t at_index;
};

/* eng_whisper_decode_steps - one decoder pass for n sequences, a few tokens
 * each (the decode steps and short prompts of several transcriptions
 * together): every matrix product runs over all rows with one read of its
 * weights (binary16 weights, fixed column tiles), each sequence's rows
 * attend to its own cache and its own encoder output. Each sequence's
 * logits are exactly those eng_whisper_decode gives for it alone (the
 * products are per row, in the same order). Returns 0, -ST_TOOBIG (a cache
 * full), -ST_INVAL (a token out of range, n outside 1..STEP_MAX), -ST_NOMEM;
 * the caches grow only on success. */
int eng_whisper_decode_steps(const struct eng_whisper *w, struct dev_queue *q,
			     const struct eng_whisper_step *steps, size_t n);

/* How a transcription's passes run. NULL: directly on the queue given
 * (eng_whisper_encode / eng_whisper_decode). Otherwise through these
 * calls, which may hand the pass to a batcher that runs it together with
 * other transcriptions' passes (the replica loop, engine/asr/eng_asr_replica.c);
 * the results are the same. */
struct eng_whisper_runner {
	int (*encode)(void *ctx, struct eng_whisper_enc *e, const float *mel, size_t mel_stride,
		      size_t frame0, size_t n_frames);
	int (*decode)(void *ctx, const struct eng_whisper_enc *e, struct eng_whisper_kv *kv,
		      const int32_t *tokens, size_t n, float *logits, float *logits_at,
		      size_t at_index);
	void *ctx;
};

#endif /* ENG_WHISPER_H */
