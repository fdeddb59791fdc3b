/* eng_vad.h - Silero VAD (voice activity detection, silero-vad 6.2.3's
 * silero_vad_16k.safetensors) and the speech-span logic faster-whisper
 * 1.2.1 runs for vad_filter (faster_whisper/vad.py: VadOptions,
 * get_speech_timestamps, collect_chunks, SpeechTimestampsMap).
 *
 * Audio is 16 kHz mono float32 in [-1, 1]; positions are in samples at
 * 16 kHz. The network scores 512-sample windows (32 ms), each with the
 * previous window's last 64 samples prepended and an LSTM state carried
 * from window to window, exactly as faster-whisper feeds its ONNX model.
 *
 * Weights: the wheel's safetensors hold other values than its ONNX/JIT
 * files (the "v6" network), and faster-whisper 1.2.1's own
 * assets/silero_vad_v6.onnx differs from both: same architecture and
 * logic, other numbers, so spans from the wheel's safetensors are not
 * faster-whisper's. Loaded with faster-whisper's weights converted
 * (tests/reference/vad_fw_safetensors.py), this code gives its
 * probabilities within 3e-6 and its speech spans exactly.
 *
 * Thread: a loaded struct eng_vad is immutable; any number of threads may
 * call eng_vad_probs / eng_vad_speech on it at once (each call owns its
 * state and scratch). Transcription's vad_filter (engine/asr/eng_asr_vad.c)
 * is its user.
 */
#ifndef ENG_VAD_H
#define ENG_VAD_H

#include <stddef.h>
#include <stdint.h>

#define ENG_VAD_SAMPLE_RATE 16000 /* Hz: the only rate the model takes */
#define ENG_VAD_WINDOW	    512	  /* samples scored per probability */
#define ENG_VAD_CONTEXT	    64	  /* samples of the previous window prepended */

struct eng_vad;

/* faster-whisper's VadOptions; eng_vad_params_init gives its defaults. */
struct eng_vad_params {
	double threshold;     /* speech when prob >= this (0.5) */
	double neg_threshold; /* silence when prob < this; < 0: max(threshold - 0.15, 0.01) */
	double min_speech_duration_ms;	/* shorter spans dropped (0) */
	double max_speech_duration_s;	/* longer spans split (INFINITY: never) */
	double min_silence_duration_ms; /* silence that ends a span (2000) */
	double speech_pad_ms;		/* padding added each side (400) */
};

/* A speech span [start, end) in samples of the input. */
struct eng_vad_span {
	int64_t start;
	int64_t end;
};

/* eng_vad_params_init - faster-whisper 1.2.1's VadOptions() defaults. */
void eng_vad_params_init(struct eng_vad_params *p);

/* eng_vad_load - read a silero_vad_16k.safetensors (stft_conv.weight
 * [258,1,256], conv1..conv4 [co,ci,3] + bias, lstm_cell.{weight,bias}_{ih,hh}
 * [512,128]/[512], final_conv [1,128,1] + [1]; all F32; names and shapes as
 * silero-vad's tinygrad_model.py). Every tensor's presence, dtype and shape
 * is checked; a file that differs is refused. *out is new (eng_vad_destroy),
 * NULL on failure. Errors: -ST_NOTFOUND, -ST_IO, -ST_CORRUPT,
 * -ST_UNSUPPORTED, -ST_NOMEM, with err "PATH: what". Any thread. */
int eng_vad_load(const char *path, struct eng_vad **out, char *err, size_t errlen);

/* eng_vad_n_windows - probabilities eng_vad_probs writes for n samples:
 * n / 512 + 1 (faster-whisper pads to the next multiple of 512 and adds a
 * whole window of zeros when n already is one). */
size_t eng_vad_n_windows(size_t n_samples);

/* eng_vad_probs - speech probability in [0, 1] of each 512-sample window
 * of samples[n] (borrowed), written to probs[eng_vad_n_windows(n)]
 * (caller-owned). The input is prepared as faster-whisper's
 * SileroVADModel.__call__ does (zero padding; the last window's final 64
 * samples zeroed; the 64-sample context of the previous window, zeros for
 * the first). Errors: -ST_NOMEM (about 1.3 MB of scratch per call). */
int eng_vad_probs(const struct eng_vad *vad, const float *samples, size_t n, float *probs);

/* eng_vad_spans_from_probs - faster-whisper's get_speech_timestamps on
 * probabilities already computed: probs[n_windows] for an input of
 * n_samples samples at 16 kHz. *spans is new (mem_free), NULL when none;
 * spans are ordered and padded. Errors: -ST_NOMEM, -ST_INVAL (bad p). */
int eng_vad_spans_from_probs(const float *probs, size_t n_windows, size_t n_samples,
			     const struct eng_vad_params *p, struct eng_vad_span **spans,
			     size_t *n_spans);

/* eng_vad_speech - eng_vad_probs then eng_vad_spans_from_probs: the speech
 * spans of samples[n] (16 kHz). p NULL means the defaults. *spans is new
 * (mem_free), NULL when none. Errors as both. */
int eng_vad_speech(const struct eng_vad *vad, const float *samples, size_t n,
		   const struct eng_vad_params *p, struct eng_vad_span **spans, size_t *n_spans);

/* One chunk of faster-whisper's collect_chunks: the concatenated audio of
 * spans[audio_first .. audio_first + audio_count) and the metadata it
 * reports. faster-whisper lists as "segments" only the spans appended
 * without a split, so the span that opens a new chunk is in the audio but
 * not in the segments (seg_first = audio_first + 1 then). */
struct eng_vad_chunk {
	size_t audio_first, audio_count; /* spans whose samples make the audio */
	size_t seg_first, seg_count;	 /* spans listed as its segments */
	int64_t offset_samples;		 /* "offset" * 16000 */
	int64_t n_samples;		 /* "duration" * 16000 (audio length) */
};

/* eng_vad_collect - collect_chunks(audio, spans, max_duration=max_s):
 * group spans[n_spans] into chunks of at most max_s seconds (INFINITY:
 * one chunk). No spans give one empty chunk, as there. *chunks is new
 * (mem_free), *n_chunks >= 1. Errors: -ST_NOMEM. */
int eng_vad_collect(const struct eng_vad_span *spans, size_t n_spans, double max_s,
		    struct eng_vad_chunk **chunks, size_t *n_chunks);

/* eng_vad_chunk_audio - copy chunk c's audio (c->n_samples floats) from
 * audio (the input the spans index) to out (caller-owned). */
void eng_vad_chunk_audio(const float *audio, const struct eng_vad_span *spans,
			 const struct eng_vad_chunk *c, float *out);

/* SpeechTimestampsMap: maps times in the concatenated speech back to the
 * original audio. Fields are read-only to callers. */
struct eng_vad_map {
	size_t n;		      /* spans mapped */
	int64_t *chunk_end_sample;    /* [n] end of span i in concatenated samples */
	double *total_silence_before; /* [n] seconds of silence before span i */
};

/* eng_vad_map_init - build the map of spans[n] (n >= 1) into *m (caller
 * embeds; eng_vad_map_fini frees). Errors: -ST_NOMEM, -ST_INVAL (n 0). */
int eng_vad_map_init(struct eng_vad_map *m, const struct eng_vad_span *spans, size_t n);

/* eng_vad_map_time - get_original_time(time_s, chunk_index, is_end): the
 * time in the original audio, seconds rounded to 2 decimals as Python's
 * round does; chunk_index < 0 picks it as get_chunk_index does. */
double eng_vad_map_time(const struct eng_vad_map *m, double time_s, long chunk_index, int is_end);

/* eng_vad_map_chunk - get_chunk_index(time_s, is_end): the span a time
 * in the concatenated speech (seconds) falls in, clamped to the last; -1
 * for an empty map. restore_speech_timestamps maps both ends of a word
 * through the span of its middle. */
long eng_vad_map_chunk(const struct eng_vad_map *m, double time_s, int is_end);

/* eng_vad_map_fini - free *m's arrays; a zeroed map is a no-op. */
void eng_vad_map_fini(struct eng_vad_map *m);

/* eng_vad_destroy - free; NULL is a no-op. */
void eng_vad_destroy(struct eng_vad *vad);

#endif /* ENG_VAD_H */
