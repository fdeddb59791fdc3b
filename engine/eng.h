/* eng.h - the engine's public interface, the only engine header server/
 * includes.
 *
 * At this stage the engine owns the model registry: it opens every
 * configured model with the real format readers (GGUF: eng_gguf.h,
 * CTranslate2: eng_ct2.h), validates them, and answers metadata queries.
 * Later issues add request submission and the scheduler behind the same
 * opaque handles.
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

/* What to load; borrowed by eng_create, which copies what it keeps. */
struct eng_model_spec {
	const char *name;       /* unique name clients use */
	const char *path;       /* file (GGUF) or folder (CT2) */
	enum eng_format format; /* AUTO, GGUF or CT2 */
	int replicas;           /* >= 1 (scheduling comes in a later issue) */
};

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

/* Short names for enums: "transcription"/"generation", "gguf"/"ct2"/"auto". */
const char *eng_task_str(enum eng_task t);
const char *eng_format_str(enum eng_format f);

/* eng_inspect - open the model at path (format AUTO) and print its metadata
 * and tensor table to out, for `inferd inspect FILE`. Returns 0 or a
 * negative ST_* with err set as eng_create does. */
int eng_inspect(const char *path, FILE *out, char *err, size_t errlen);

#endif /* ENG_H */
