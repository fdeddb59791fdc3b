/* eng_int.h - engine-internal helpers shared by the model-format readers
 * (eng_gguf.c, eng_ct2.c) and the registry (eng_model.c). Not for server/.
 *
 * Invariants: a cursor never reads outside [base, base + size); every read
 * helper checks the remaining bytes first and leaves the cursor unchanged on
 * failure, so the caller can report the exact byte where the file ended.
 */
#ifndef ENG_INT_H
#define ENG_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "engine/eng.h"

/* A bounds-checked little-endian reader over a byte range in memory. */
struct eng__cur {
	const uint8_t *base; /* first byte of the file (mmap or caller buffer) */
	uint64_t size;       /* bytes in the file */
	uint64_t pos;        /* next byte to read, 0 <= pos <= size */
};

static inline uint64_t eng__cur_left(const struct eng__cur *c)
{
	return c->size - c->pos;
}

/* eng__cur_take - *out = pointer to the next n bytes and advance, or false
 * (cursor unchanged) when fewer than n bytes remain. */
static inline bool eng__cur_take(struct eng__cur *c, uint64_t n, const uint8_t **out)
{
	if (n > eng__cur_left(c))
		return false;
	*out = c->base + c->pos;
	c->pos += n;
	return true;
}

/* Little-endian fixed-width reads (the project targets little-endian hosts;
 * memcpy keeps unaligned reads defined). */
#define ENG__CUR_READ(name, type)                                           \
	static inline bool name(struct eng__cur *c, type *out)              \
	{                                                                   \
		const uint8_t *p;                                           \
		if (!eng__cur_take(c, sizeof(type), &p))                    \
			return false;                                       \
		memcpy(out, p, sizeof(type));                               \
		return true;                                                \
	}
ENG__CUR_READ(eng__cur_u8, uint8_t)
ENG__CUR_READ(eng__cur_u16, uint16_t)
ENG__CUR_READ(eng__cur_u32, uint32_t)
ENG__CUR_READ(eng__cur_u64, uint64_t)
#undef ENG__CUR_READ

/* A read-only, shared mapping of a whole file. */
struct eng__map {
	const void *data; /* first byte, NULL when not mapped */
	size_t size;      /* bytes mapped (== file size) */
};

/* eng__map_file - mmap path read-only (PROT_READ, MAP_SHARED). An empty
 * file maps to data NULL, size 0 (the readers then report it as
 * truncated). Returns 0, -ST_NOTFOUND (no such file), -ST_IO (open, fstat,
 * not a regular file, mmap), with err "PATH: reason". */
int eng__map_file(const char *path, struct eng__map *map, char *err, size_t errlen);

/* eng__map_release - unmap; a zeroed map is a no-op. */
void eng__map_release(struct eng__map *map);

/* eng__detect_format - resolve ENG_FORMAT_AUTO for path: a folder with
 * model.bin is CT2, a file starting with "GGUF" is GGUF. Errors:
 * -ST_NOTFOUND (no such path / no model.bin), -ST_IO, -ST_UNSUPPORTED
 * (neither), with err "PATH: reason". */
int eng__detect_format(const char *path, enum eng_format *fmt, char *err, size_t errlen);

struct eng_gguf;
struct eng_ct2;
struct eng_whisper;
struct eng_whisper_tok;
struct kn_mel;
struct eng_llm;
struct eng_tok;
struct eng_sched;

/* A loaded model (opaque outside engine/). */
struct eng_model {
	char *name;             /* unique client-facing name */
	char *path;             /* file (GGUF) or folder (CT2) */
	enum eng_format format; /* resolved: GGUF or CT2, never AUTO */
	enum eng_task task;     /* what requests it serves */
	char *arch;             /* general.architecture or the CT2 spec name */
	int64_t created;        /* Unix seconds when loading finished */
	uint64_t size_bytes;    /* tensor / variable data bytes */
	struct eng_sched *sched; /* replicas and their queue (eng_sched.h) */
	struct eng_gguf *gguf;  /* open reader when format is GGUF */
	struct eng_ct2 *ct2;    /* open reader when format is CT2 */
	/* transcription models (eng_asr_transcribe.c) */
	struct eng_whisper *whisper;      /* float32 weights, shared read-only */
	struct eng_whisper_tok *wtok;     /* tokenizer facts */
	struct kn_mel *mel;               /* log-mel filterbank for hp.n_mels */
	/* generation models (eng_generate.c) */
	struct eng_llm *llm;              /* weight views into the GGUF map */
	struct eng_tok *tok;              /* the GGUF vocabulary's tokenizer */
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

/* eng__llm_model_load - after the GGUF reader opened m->gguf: the model's
 * architecture and weight views, and its tokenizer (eng_generate.c).
 * eng__llm_model_fini undoes it (NULL-safe). */
int eng__llm_model_load(struct eng_model *m, char *err, size_t errlen);
void eng__llm_model_fini(struct eng_model *m);

/* eng__checked_mul - *out = a * b, false on uint64 overflow. */
static inline bool eng__checked_mul(uint64_t a, uint64_t b, uint64_t *out)
{
	return !__builtin_mul_overflow(a, b, out);
}

#endif /* ENG_INT_H */
