/* eng_int.h - the body of a loaded model (struct eng_model) and of the
 * registry (struct eng), shared by the registry (eng_model.c) and the task
 * code that fills and serves a model (asr/, gen/, sched/). Not for server/.
 */
#ifndef ENG_INT_H
#define ENG_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "engine/eng.h"

struct eng_gguf;
struct eng_ct2;
struct eng_whisper;
struct eng_whisper_tok;
struct dev_log_mel;
struct eng_vad;
struct eng_llm;
struct eng_tok;
struct eng_sched;

/* A generation model's chat format, from its tokenizer.chat_template
 * (eng_chat.c): none (no template), one it does not recognise, or a family. */
enum eng__chat { ENG__CHAT_NONE, ENG__CHAT_UNKNOWN, ENG__CHAT_GEMMA, ENG__CHAT_CHATML,
		 ENG__CHAT_LLAMA3, ENG__CHAT_INST };

/* A loaded model (opaque outside engine/). */
struct eng_model {
	char *name;             /* unique client-facing name */
	char *path;             /* file (GGUF) or folder (CT2) */
	enum eng_format format; /* resolved: GGUF or CT2, never AUTO */
	enum eng_task task;     /* what requests it serves */
	enum eng_compute_type compute_type; /* as the spec asked (eng.h) */
	bool kv_cache_f16;      /* generation: binary16 KV caches (eng.h) */
	size_t max_model_len;   /* generation: tokens per sequence; 0: the default (eng.h) */
	char *arch;             /* general.architecture or the CT2 spec name */
	int64_t created;        /* Unix seconds when loading finished */
	uint64_t size_bytes;    /* tensor / variable data bytes */
	struct eng_sched *sched; /* replicas and their queue (eng_sched.h) */
	struct eng_gguf *gguf;  /* open reader when format is GGUF */
	struct eng_ct2 *ct2;    /* open reader when format is CT2 */
	/* transcription models (eng_asr_transcribe.c) */
	struct eng_whisper *whisper;      /* float32 weights, shared read-only */
	struct eng_whisper_tok *wtok;     /* tokenizer facts */
	struct dev_log_mel *mel;          /* log-mel spectrogram for hp.n_mels */
	struct eng_vad *vad;              /* Silero VAD (vad_model), or NULL */
	char *vad_err;                    /* why vad is NULL (new), or NULL */
	bool vad_filter;                  /* requests' default (eng_model_spec) */
	int live_window_ms;               /* eng_model_spec's */
	/* generation models (eng_generate.c) */
	struct eng_llm *llm;              /* weight views into the GGUF map */
	struct eng_tok *tok;              /* the GGUF vocabulary's tokenizer */
	enum eng__chat chat;              /* its chat format (eng__chat_load) */
	char *chat_system;                /* ChatML's default system message, or NULL */
};

struct eng {
	size_t n_models;          /* entries in models */
	struct eng_model *models; /* [n_models] in config order */
};

/* eng__whisper_model_load - after the CT2 reader opened m->ct2: convert the
 * Whisper weights, load the tokenizer and the mel filterbank
 * (eng_asr_transcribe.c). eng__whisper_model_fini undoes it (NULL-safe). */
int eng__whisper_model_load(struct eng_model *m, char *err, size_t errlen);
void eng__whisper_model_fini(struct eng_model *m);

/* eng__asr_vad_load - the Silero VAD of a loaded Whisper model m from
 * spec->vad_model (eng_asr_vad.c); a failure is an error when spec asks
 * for vad_filter or does not mark the file optional, else kept in
 * m->vad_err. eng__asr_vad_fini undoes it (NULL-safe fields). */
int eng__asr_vad_load(struct eng_model *m, const struct eng_model_spec *spec, char *err,
		      size_t errlen);
void eng__asr_vad_fini(struct eng_model *m);

/* eng__chat_default_system - the system message a ChatML chat template
 * writes when the messages start with none: the text of a string literal
 * '<|im_start|>system\n...<|im_end|>' in tmpl (its "\n" escapes as
 * newlines) that holds no expression, where tmpl tests the first
 * message's role against 'system' (SmolLM2-Instruct's "You are a helpful
 * AI assistant named SmolLM, trained by Hugging Face", Qwen 2.5's). *out:
 * that text (mem_alloc'd, the caller frees it) or NULL when tmpl has none.
 * Returns 0 or -ST_NOMEM. */
int eng__chat_default_system(const char *tmpl, char **out);

/* eng__chat_load - a loaded GGUF generation model's chat format and
 * default system message, read once from its template into m->chat and
 * m->chat_system (eng_chat_format uses them for every request). Returns 0,
 * or -ST_NOMEM with err set; eng__chat_fini frees them (NULL-safe). */
int eng__chat_load(struct eng_model *m, char *err, size_t errlen);
void eng__chat_fini(struct eng_model *m);

/* eng__llm_model_load - after the GGUF reader opened m->gguf: the model's
 * architecture and weight views, and its tokenizer (eng_generate.c).
 * eng__llm_model_fini undoes it (NULL-safe). */
int eng__llm_model_load(struct eng_model *m, char *err, size_t errlen);
void eng__llm_model_fini(struct eng_model *m);

#endif /* ENG_INT_H */
