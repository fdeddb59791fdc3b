/* eng_file.h - the bottom layer of the model-format readers: a
 * bounds-checked little-endian cursor over bytes in memory, a read-only
 * mapping of a whole file, and telling a GGUF file from a CTranslate2
 * folder. Calls nothing in engine/ (a leaf), so every reader, tokenizer and
 * the registry may use it. Not for server/.
 *
 * Invariants: a cursor never reads outside [base, base + size); every read
 * helper checks the remaining bytes first and leaves the cursor unchanged on
 * failure, so the caller can report the exact byte where the file ended.
 */
#ifndef ENG_FILE_H
#define ENG_FILE_H

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

/* eng__checked_mul - *out = a * b, false on uint64 overflow. */
static inline bool eng__checked_mul(uint64_t a, uint64_t b, uint64_t *out)
{
	return !__builtin_mul_overflow(a, b, out);
}

#endif /* ENG_FILE_H */
