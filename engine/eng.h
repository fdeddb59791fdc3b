/* eng.h - the engine's public interface, the only engine header server/
 * includes.
 *
 * The engine owns the model registry: eng_create opens every configured
 * model with the format readers (GGUF: format/eng_gguf.h, CTranslate2:
 * format/eng_ct2.h), loads its weights and tokenizer, and starts its
 * replicas behind a scheduler (sched/eng_sched.h). Through the opaque
 * handles declared here callers query models' metadata and submit
 * transcriptions (asr/) and generations (gen/); the schedulers'
 * statistics are read through sched/eng_stats.h.
 */
#ifndef ENG_H
#define ENG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct eng;
struct eng_model;

enum eng_format {
	ENG_FORMAT_AUTO = 0, /* look at the path: a folder with model.bin is CT2, else GGUF magic */
	ENG_FORMAT_GGUF,
	ENG_FORMAT_CT2,
	ENG_FORMAT_COUNT
};

enum eng_task {
	ENG_TASK_TRANSCRIPTION = 0, /* a Whisper-family encoder-decoder (CT2) */
	ENG_TASK_GENERATION,        /* a decoder-only LLM (GGUF) */
	ENG_TASK_COUNT
};

/* How a model's matrix products are computed, as faster-whisper's
 * compute_type names them (CTranslate2 docs/quantization.md):
 *   DEFAULT: the type the weights are stored in (an int8 CTranslate2 folder
 *            runs int8, a float16/float32 one float32 as it always did);
 *   FLOAT32: float32 products (int8 weights are dequantized at load);
 *   INT8, INT8_FLOAT32: int8 weights (quantized per output row at load
 *            unless stored so) and per-row dynamically quantized
 *            activations for the Whisper linears; everything else float32;
 *   BFLOAT16: the encoder's products and attention and the decoder's
 *            cross-attention keys/values in bfloat16 on Intel AMX or
 *            AVX512-BF16 (kernels/kn_bf16.h; refused where the CPU has
 *            neither), the
 *            decoder's other products as DEFAULT;
 *   INT8_BFLOAT16: the encoder as BFLOAT16, the decoder's products as INT8.
 * Transcription (CT2) models only; a GGUF model refuses INT8. */
enum eng_compute_type {
	ENG_COMPUTE_DEFAULT = 0,
	ENG_COMPUTE_FLOAT32,
	ENG_COMPUTE_INT8,
	ENG_COMPUTE_INT8_FLOAT32,
	ENG_COMPUTE_BFLOAT16,
	ENG_COMPUTE_INT8_BFLOAT16,
	ENG_COMPUTE_COUNT
};

/* Where one replica runs: a device spec (devices/dev.h: "cpu:0-1") and
 * its compute threads (0: one per core of the device). */
struct eng_replica_spec {
	const char *device;
	int threads;
};

/* What to load; borrowed by eng_create, which copies what it keeps. Zero
 * scheduling fields take the defaults given (config/cfg.h documents them). */
struct eng_model_spec {
	const char *name;       /* unique name clients use */
	const char *path;       /* file (GGUF) or folder (CT2) */
	enum eng_format format; /* AUTO, GGUF or CT2 */
	/* replicas: the placements listed, or else replica_count replicas
	 * spread over the cores this process may use (0: one replica on all
	 * of them). Weights are mapped once and shared by all replicas. */
	const struct eng_replica_spec *replicas;
	size_t n_replicas;
	int replica_count;
	/* Scheduling knobs; 0 takes the default in common/sched_defaults.h,
	 * the same ones config/ fills in for keys a config file leaves out. */
	int max_batch_size;     /* transcription windows/sequences per batch */
	int max_queue_delay_ms; /* wait for a batch to fill, ms; < 0: 0 */
	int max_queue_size;     /* requests waiting before -ST_BUSY */
	int max_num_seqs;       /* generation: sequences in the running batch */
	int max_batch_tokens;   /* generation: tokens per forward pass */
	int prefix_cache_mb;    /* generation: MiB of finished prompts' KV caches kept per
				 * replica (0: default; < 0: off) */
	int timeout_ms;         /* request deadline, ms (0 / default: none) */
	int slow_replica_factor; /* a replica this many times slower than another takes
				  * only its overflow (0: default; < 0: off) */
	enum eng_compute_type compute_type; /* 0: DEFAULT */
	bool kv_cache_f16;      /* generation: binary16 KV caches (eng_llm_kv_create) */
	/* generation: the most tokens (prompt + generated) of one sequence,
	 * eng_model_context; 0: min(4096, the trained context). Past the
	 * GGUF's trained context, negative, or set on a CT2 model: eng_create
	 * fails (-ST_INVAL / -ST_UNSUPPORTED) naming the numbers. */
	int max_model_len;
	/* transcription: Silero VAD (engine/vad/eng_vad.h). vad_model is its
	 * silero_vad_16k.safetensors (NULL: none; NULL with vad_model_optional:
	 * ENG_VAD_MODEL_BESIDE next to the model, i.e. in the folder holding
	 * path, as scripts/fetch-models lays out models/), loaded once per model and
	 * shared by its replicas; vad_filter is the model's default for
	 * requests that leave eng_transcribe_params.vad_filter DEFAULT, and
	 * needs the VAD to load. With vad_model_optional a vad_model that
	 * cannot be loaded is no error when vad_filter is false: the model
	 * serves without VAD and requests asking for it are refused with the
	 * reason (the config's default path, which may be absent). Ignored for
	 * GGUF models; vad_filter on one is refused. */
	const char *vad_model;
	bool vad_model_optional;
	bool vad_filter;
	/* transcription: the shortest encoder window (ms, 0..30000; 0: 30 s)
	 * of the model's live-stream transcriptions, which set
	 * eng_transcribe_params.window_min_s from it (the server's policy,
	 * kept with the model's other request defaults) */
	int live_window_ms;
};

/* The Silero VAD weights a transcription model uses by default, relative
 * to the folder holding the model (models/ for models/whisper-tiny.en). */
#define ENG_VAD_MODEL_BESIDE "silero-vad/silero_vad_16k.safetensors"

/* eng_create - open and validate every model in specs[0..n_specs).
 * Runs on the main thread before the server accepts connections (blocking
 * file I/O: mmap of the weights, read-only, shared by later replicas).
 * On success *out is new (eng_destroy) and 0 is returned. On the first
 * model that fails, *out is NULL, a negative ST_* is returned and err holds
 * one line naming the model, the file and the fault, e.g.
 * "model 'gemma': models/g.gguf: tensor 'blk.0.attn_q.weight' data at offset
 * 123 + 4096 bytes runs past the end of the file (1000 bytes)". */
int eng_create(const struct eng_model_spec *specs, size_t n_specs,
	       struct eng **out, char *err, size_t errlen);

/* eng_destroy - unmap and free everything; NULL is a no-op. */
void eng_destroy(struct eng *eng);

/* eng_is_ready - true when every configured model is loaded. Any thread. */
bool eng_is_ready(const struct eng *eng);

/* eng_model_count / eng_model_at - iterate models in config order
 * (borrowed pointers, valid until eng_destroy). eng_model_at returns NULL
 * when i is out of range. */
size_t eng_model_count(const struct eng *eng);
const struct eng_model *eng_model_at(const struct eng *eng, size_t i);

/* eng_model_find - the model named name, or NULL. */
const struct eng_model *eng_model_find(const struct eng *eng, const char *name);

/* Accessors (borrowed strings, valid until eng_destroy). */
const char *eng_model_name(const struct eng_model *m);
enum eng_task eng_model_task(const struct eng_model *m);
enum eng_format eng_model_format(const struct eng_model *m);
bool eng_model_is_ready(const struct eng_model *m);
/* Architecture from the file: GGUF general.architecture ("gemma3"), or the
 * CT2 spec name ("WhisperSpec"). */
const char *eng_model_arch(const struct eng_model *m);
/* Unix time (seconds) the model finished loading, for OpenAI "created". */
int64_t eng_model_created(const struct eng_model *m);
/* Total bytes of tensor data in the file(s). */
uint64_t eng_model_size_bytes(const struct eng_model *m);
/* The compute type a transcription model runs in, its DEFAULT resolved
 * ("float32", "int8", "bfloat16", "int8_bfloat16"); NULL for a GGUF model
 * (its tensors' own types). Static string. */
const char *eng_model_compute_type(const struct eng_model *m);
/* eng_model_vad_filter - a transcription model's vad_filter default (the
 * spec's); eng_model_has_vad - whether its VAD is loaded. */
bool eng_model_vad_filter(const struct eng_model *m);
/* eng_model_live_window_ms - a model's eng_model_spec.live_window_ms. */
int eng_model_live_window_ms(const struct eng_model *m);
bool eng_model_has_vad(const struct eng_model *m);
/* eng_model_vad_probs - Silero VAD (engine/vad/eng_vad.h eng_vad_probs)
 * with m's loaded VAD: the speech probability in [0, 1] of each
 * ENG_VAD_WINDOW_SAMPLES-sample window of samples[n] (16 kHz mono,
 * borrowed) into probs[n / ENG_VAD_WINDOW_SAMPLES + 1] (caller-owned; the
 * last entry scores the zero-padded tail). The LSTM state starts at zero
 * each call. Errors: -ST_UNSUPPORTED (m has no VAD), -ST_NOMEM. Any thread
 * but the server's loop (compute). */
#define ENG_VAD_WINDOW_SAMPLES 512 /* 32 ms at 16 kHz */
int eng_model_vad_probs(const struct eng_model *m, const float *samples, size_t n, float *probs);
/* eng_model_kv_cache - "float16" or "float32", the type of a generation
 * model's KV caches (kv_cache_f16); NULL for transcription models. */
const char *eng_model_kv_cache(const struct eng_model *m);

/* Short names for enums: "transcription"/"generation", "gguf"/"ct2"/"auto". */
const char *eng_task_str(enum eng_task t);

const char *eng_format_str(enum eng_format f);

/* eng_kernels_describe - the kernels this process runs, one line into buf
 * (truncated to len): the kn_ops table, the int8 and bfloat16 products and
 * the INFERD_CPU_ISA ceiling, e.g. "avx512, int8 avx512vnni, bfloat16
 * avx512-bf16 (INFERD_CPU_ISA native)". eng_create refuses an
 * INFERD_CPU_ISA other than native, avx512 or avx2 (kernels/kn.h). */
void eng_kernels_describe(char *buf, size_t len);

/* eng_inspect - open the model at path (format AUTO) and print its metadata
 * and tensor table to out, for `inferd inspect FILE`. Returns 0 or a
 * negative ST_* with err set as eng_create does. */
int eng_inspect(const char *path, FILE *out, char *err, size_t errlen);

/* --- scheduling options ---------------------------------------------- */

/* How one request is scheduled. */
enum eng_priority {
	ENG_PRIORITY_NORMAL = 0,
	ENG_PRIORITY_HIGH,     /* taken before every waiting normal request */
	ENG_PRIORITY_URGENT,   /* before every waiting high one: a live stream's final,
				* which a caption is waiting for, ahead of other streams'
				* interims */
	ENG_PRIORITY_BATCH,    /* below normal: taken only when no other request waits
				* (offline work on the capacity interactive traffic
				* leaves idle, as OpenAI's Batch API) */
	ENG_PRIORITY_COUNT
};

struct eng_req_opts {
	enum eng_priority priority;
	int timeout_ms;        /* deadline from submission: 0 the model's default, < 0 none */
};

/* --- transcription (Whisper models) ----------------------------------- */

#include "engine/audio/eng_audio.h" /* eng_audio_decode: bytes -> 16 kHz mono float */

/* vad_filter of one transcription: the model's default (eng_model_spec.
 * vad_filter), or forced off or on. */
enum eng_vad_filter {
	ENG_VAD_FILTER_DEFAULT = 0,
	ENG_VAD_FILTER_OFF,
	ENG_VAD_FILTER_ON,
	ENG_VAD_FILTER_COUNT
};

/* Options of one transcription; eng_transcribe_params_init sets the
 * defaults of faster-whisper's WhisperModel.transcribe (the reference),
 * except beam_size 1 (greedy). Strings are borrowed during the call. */
struct eng_transcribe_params {
	const char *language;      /* ISO 639-1 code; NULL: detect (multilingual) or "en" */
	const char *task;          /* "transcribe" (default) or "translate": English text,
				    * multilingual models only (else -ST_INVAL) */
	const char *prompt;        /* initial prompt (previous text), or NULL */
	float temperatures[8];     /* tried in order while the fallback tests fail */
	int n_temperatures;        /* default 6: 0.0, 0.2, ..., 1.0 */
	int beam_size;             /* 1 (greedy) .. 16 */
	int best_of;               /* candidates when sampling (temperature > 0), default 5 */
	float patience;            /* beam search patience, default 1 */
	bool timestamps;           /* segment timestamps (default true) */
	bool condition_on_previous_text; /* default true */
	float compression_ratio_threshold; /* 2.4; <= 0 disables */
	float log_prob_threshold;  /* -1.0; <= -1e9 disables */
	float no_speech_threshold; /* 0.6; > 1 disables */
	uint64_t seed;             /* sampling seed (0: a fixed default) */
	const _Atomic int *cancel; /* non-NULL and set: stop between windows (-ST_CANCELED) */
	/* Batched long-form (default false): audio over 30 s is cut at quiet
	 * moments into chunks of at most 30 s transcribed independently (no
	 * text carried across chunks) and together, their windows and decode
	 * steps batched (faster-whisper's BatchedInferencePipeline). Decoded
	 * samples only (eng_transcribe, eng_asr_input.samples). */
	bool batched;
	/* Word-level timestamps (default false): each segment's words with
	 * their times from the cross-attention alignment (faster-whisper's
	 * word_timestamps=True, its default punctuation merging). As there,
	 * a window whose last segment is unfinished is resumed at its last
	 * word's end rather than its last timestamp. */
	bool word_timestamps;
	/* Voice activity detection (faster-whisper 1.2.1's vad_filter=True with
	 * its default VadOptions: threshold 0.5, min speech 0 ms, min silence
	 * 2000 ms, 400 ms padding): the model's Silero VAD finds the speech
	 * spans on the replica, only their audio (concatenated) is
	 * transcribed, and segment and word times are mapped back to the
	 * original audio (restore_speech_timestamps). Audio without speech
	 * gives an empty transcript (its duration still the audio's). ON with
	 * a model that has no VAD loaded is -ST_INVAL. With batched, each
	 * chunk is filtered on its own (the cuts stay energy's). */
	enum eng_vad_filter vad_filter;
	/* Encoder windows sized to the audio (default window_min_s 0: the
	 * full 30 s, as the reference runs it). > 0: each window's encoder
	 * pass covers its audio plus window_margin_s of padding, at least
	 * window_min_s (both up to 30 s), rounded up to ENG_WINDOW_ROUND
	 * positions (eng_whisper_enc_trim; whisper.cpp's audio_ctx). Far
	 * cheaper for short audio, at an accuracy cost the model was not
	 * trained for: live streams' re-transcriptions use it. */
	float window_min_s, window_margin_s;
};
#define ENG_WINDOW_ROUND 16 /* encoder positions (0.32 s) a trimmed window is a multiple of */

/* One word of a segment (word_timestamps; times in seconds from the audio
 * start). */
struct eng_word {
	char *word;          /* UTF-8 with its leading space, punctuation merged, owned */
	double start_s, end_s;
	float probability;   /* mean probability of its tokens */
};

/* One segment of a transcript (times in seconds from the audio start). */
struct eng_segment {
	int id;                 /* 1-based */
	double start_s, end_s;
	char *text;             /* UTF-8, as decoded (leading space kept) */
	int32_t *tokens;        /* the segment's tokens, timestamps included */
	size_t n_tokens;
	double avg_logprob, compression_ratio;
	float no_speech_prob, temperature;
	struct eng_word *words; /* word_timestamps: [n_words], else NULL */
	size_t n_words;
};

struct eng_transcript {
	char *text;                   /* all segments' text joined, UTF-8 */
	struct eng_segment *segments; /* [n_segments] */
	size_t n_segments;
	double duration_s;            /* audio seconds transcribed */
	char language[16];            /* ISO code used or detected */
	float language_prob;          /* 1 when given or English-only */
	int channel;                  /* the source channel (per_channel input), else 0 */
	struct eng_transcript *next;  /* per_channel: the next channel's (owned), or NULL */
};

void eng_transcribe_params_init(struct eng_transcribe_params *p);

#define ENG_ASR_MAX_CHANNELS 16 /* per_channel: channels transcribed one by one, at most */

/* The audio of a submitted transcription: either encoded bytes (a file,
 * or headerless samples described by raw), decoded on the replica with
 * eng_audio_decode, or samples already decoded (16 kHz mono float).
 * Borrowed until done. */
struct eng_asr_input {
	const void *data;          /* encoded bytes [len], or NULL */
	size_t len;
	const struct eng_audio_raw *raw; /* how to read headerless data, or NULL */
	const float *samples;      /* when data is NULL: [n_samples] at 16 kHz */
	size_t n_samples;
	bool per_channel;          /* data only: each channel of the audio transcribed on its
				    * own, in turn (Deepgram's multichannel); the transcript
				    * is channel 0's, ->next the others' in order; audio with
				    * more than ENG_ASR_MAX_CHANNELS channels is -ST_INVAL */
};

/* Called exactly once when a submitted transcription ends, on a replica
 * thread: rc 0 with t (new, the callee's: eng_transcript_destroy;
 * t->duration_s is the source's duration), or a negative ST_* with err
 * (one line): -ST_INVAL (audio that cannot be decoded or is empty),
 * -ST_UNSUPPORTED (an audio format not handled), -ST_TOOBIG (audio longer
 * than the limit), -ST_CANCELED, -ST_TIMEDOUT, -ST_CLOSED, -ST_NOMEM. */
typedef void (*eng_transcribe_done_fn)(void *ud, int rc, struct eng_transcript *t,
				       const char *err);

/* eng_transcribe_submit - queue a transcription of in with model m on its
 * scheduler: log-mel features, 30-second windows, encoder, decoder with
 * the Whisper decoding rules, temperature fallback, long-form seeking on
 * the last timestamp (faster-whisper's algorithm). p is copied (its
 * strings borrowed until done); o may be NULL. Any thread; never blocks
 * on compute. Returns 0 (done will be called), or without calling done:
 * -ST_INVAL (not a transcription model, bad parameter: err names it),
 * -ST_BUSY (queue full), -ST_CLOSED, -ST_NOMEM. */
int eng_transcribe_submit(const struct eng_model *m, const struct eng_asr_input *in,
			  const struct eng_transcribe_params *p, const struct eng_req_opts *o,
			  eng_transcribe_done_fn done, void *ud, char *err, size_t errlen);

/* eng_transcribe - transcribe samples [n_samples] (16 kHz mono float) on
 * m's scheduler and wait (CLI, tests). Errors as eng_transcribe_submit and
 * its done give them; on success *out is new (eng_transcript_destroy).
 * Not on a replica thread. */
int eng_transcribe(const struct eng_model *m, const float *samples, size_t n_samples,
		   const struct eng_transcribe_params *p, struct eng_transcript **out, char *err,
		   size_t errlen);
void eng_transcript_destroy(struct eng_transcript *t);

/* --- text generation (GGUF models) ------------------------------------ */

#define ENG_GEN_MAX_STOP 4     /* stop strings per request (OpenAI's limit) */
#define ENG_GEN_MAX_TOP 20     /* top alternatives per token (OpenAI's limit) */
#define ENG_GEN_MAX_BIAS 300   /* logit_bias entries (OpenAI's limit) */

/* One logit_bias entry: bias is added to token id's logit before sampling. */
struct eng_logit_bias {
	int32_t id;
	float bias;
};

/* One generated token as streamed and reported with logprobs. */
struct eng_gen_token {
	int32_t id;
	size_t text_start;                   /* byte offset of its text in the completion */
	float logprob;                       /* log P(token) under the model */
	int n_top;                           /* alternatives filled in top[] */
	struct {
		int32_t id;
		float logprob;
	} top[ENG_GEN_MAX_TOP];
};

/* Options of one completion; eng_gen_params_init sets OpenAI's defaults
 * (temperature 1, top_p 1, max_tokens 16). Strings are borrowed. */
struct eng_gen_params {
	const char *prompt;            /* text; special tokens in it are parsed */
	size_t prompt_len;             /* bytes (0: strlen) */
	const uint8_t *prompt_plain;   /* NULL, or [prompt bytes]: 1 where control
					* tokens are text (eng_chat_format's mask) */
	int max_tokens;                /* 1 .. context */
	bool max_tokens_fit;           /* max_tokens is a ceiling: cut to what the
					* context leaves after the prompt */
	const char *stop[ENG_GEN_MAX_STOP];
	int n_stop;
	float temperature;             /* 0..2; 0 is greedy */
	float top_p;                   /* (0, 1] */
	int top_k;                     /* 0 = off (extension) */
	float min_p;                   /* 0 = off (extension) */
	float repetition_penalty;      /* 1 = off (extension) */
	float presence_penalty;        /* -2..2 */
	float frequency_penalty;       /* -2..2 */
	uint64_t seed;                 /* sampling seed */
	int logprobs;                  /* -1 none; 0..20 alternatives per token */
	const struct eng_logit_bias *bias; /* [n_bias], ids < n_vocab; borrowed */
	int n_bias;                    /* 0..ENG_GEN_MAX_BIAS */
	const _Atomic int *cancel;    /* set: stop at the next token (-ST_CANCELED) */
	/* on_text: text that is final (whole UTF-8 characters, past any stop
	 * string's possible start), with the tokens whose text begins in it
	 * that no earlier call carried (toks[n_toks]: logprobs; NULL, 0 when
	 * logprobs < 0 - and a piece held back over several tokens carries
	 * them all; tokens with no text of their own, special ones, can end
	 * a completion in a call with len 0). Return non-zero to stop
	 * (cancel). Called on the
	 * generating thread. */
	int (*on_text)(void *ud, const char *text, size_t len, const struct eng_gen_token *toks,
		       size_t n_toks);
	void *ud;
};

enum eng_finish {
	ENG_FINISH_STOP = 0,   /* end-of-generation token or a stop string */
	ENG_FINISH_LENGTH,     /* max_tokens reached */
};

struct eng_gen_result {
	char *text;                    /* the completion, UTF-8 (stop string excluded) */
	size_t text_len;
	enum eng_finish finish;
	size_t n_prompt_tokens, n_completion_tokens;
	size_t n_cached_tokens;        /* of the prompt's, copied from another sequence's KV cache
					* or a kept prompt's (prefix caching) instead of computed */
	struct eng_gen_token *tokens;  /* [n_completion_tokens] when logprobs >= 0, else NULL */
	size_t n_text_tokens;          /* tokens[0, n): those the answer holds (all but the ones
					* that begin in a stop string), as streamed */
	double queue_ms;               /* submitted -> admitted into a running batch */
	double prompt_ms, decode_ms;   /* admitted -> first token -> finished */
};

void eng_gen_params_init(struct eng_gen_params *p);

/* Called exactly once when a submitted completion ends, on a replica
 * thread: rc 0 with res (new, the callee's: eng_gen_result_destroy), or a
 * negative ST_* with err (one line): -ST_TOOBIG (prompt + max_tokens beyond
 * the context), -ST_INVAL (empty prompt), -ST_CANCELED (p->cancel was set
 * or on_text asked to stop), -ST_TIMEDOUT (the deadline passed),
 * -ST_CLOSED (the engine shut down first), -ST_NOMEM. Text already given to
 * on_text stays given. */
typedef void (*eng_gen_done_fn)(void *ud, int rc, struct eng_gen_result *res, const char *err);

/* eng_generate_submit - queue a completion of p->prompt on model m's
 * scheduler (engine/sched/eng_sched.h): a replica with room admits it into its
 * running batch (continuous batching), tokenises the prompt, prefills it
 * in chunks mixed with other sequences' decode steps and samples until an
 * end-of-generation token, a stop string or max_tokens. p is copied; its
 * strings and ud must live until done. o may be NULL (defaults). Any
 * thread; never blocks on compute. Returns 0 (done will be called), or,
 * without calling done: -ST_INVAL (not a generation model, bad parameter:
 * err says which), -ST_BUSY (the queue is full: retry later), -ST_CLOSED
 * (shutting down), -ST_NOMEM. */
int eng_generate_submit(const struct eng_model *m, const struct eng_gen_params *p,
			const struct eng_req_opts *o, eng_gen_done_fn done, void *ud, char *err,
			size_t errlen);

/* eng_generate_submit_group - eng_generate_submit for the n completions
 * ps[i] (the choices of one request; done gets uds[i]), queued or refused
 * together: -ST_BUSY when all n do not fit the queue. n <= ENG_GEN_MAX_GROUP. */
#define ENG_GEN_MAX_GROUP 16
int eng_generate_submit_group(const struct eng_model *m, const struct eng_gen_params *const *ps,
			      size_t n, const struct eng_req_opts *o, eng_gen_done_fn done,
			      void *const *uds, char *err, size_t errlen);

/* eng_generate - eng_generate_submit and wait for it (CLI, tests): the
 * same errors, returned; on success *out is new (eng_gen_result_destroy).
 * Not on a replica thread. */
int eng_generate(const struct eng_model *m, const struct eng_gen_params *p,
		 struct eng_gen_result **out, char *err, size_t errlen);
void eng_gen_result_destroy(struct eng_gen_result *r);

/* eng_token_text - the bytes of token id of model m (may be a partial
 * UTF-8 sequence), for logprobs; returns the full length like snprintf. */
size_t eng_token_text(const struct eng_model *m, int32_t id, char *out, size_t cap);

/* eng_model_context - the context length, in tokens (prompt + generated),
 * each generation sequence of m gets: eng_model_spec.max_model_len when
 * set, else min(4096, the GGUF's trained context); 0 for a transcription
 * model. Any thread. */
size_t eng_model_context(const struct eng_model *m);

/* eng_model_vocab_size - the token ids a generation model m knows (logit
 * biases, logprobs): 0..n-1; 0 for a transcription model. Any thread. */
size_t eng_model_vocab_size(const struct eng_model *m);

/* A chat message (OpenAI roles "system", "user", "assistant"). */
struct eng_chat_msg {
	const char *role;
	const char *content;
};

/* eng_chat_format - the prompt text for messages [n] in model m's chat
 * format, recognised from its tokenizer.chat_template (gemma, chatml as
 * qwen uses, llama 3, llama 2 / mistral [INST]), ending with the
 * assistant's turn opened. *out is new (mem_free), and so is *plain
 * ([strlen(*out)]: 1 where the bytes are a message's content, 0 for the
 * template's): pass it as eng_gen_params.prompt_plain so that control
 * tokens written in the content stay text. Errors:
 * -ST_UNSUPPORTED (no template, or one not recognised: err says how to
 * fix it - use /v1/completions with a formatted prompt), -ST_INVAL (a role
 * the format has no place for), -ST_NOMEM. */
int eng_chat_format(const struct eng_model *m, const struct eng_chat_msg *msgs, size_t n,
		    char **out, uint8_t **plain, char *err, size_t errlen);

#endif /* ENG_H */
