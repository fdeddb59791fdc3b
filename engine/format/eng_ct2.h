/* eng_ct2.h - a validating reader for CTranslate2 model folders.
 *
 * Source followed: CTranslate2's serializer (python/ctranslate2/specs/
 * model_spec.py, ModelSpec._serialize) and loader (src/models/model.cc,
 * Model::load). model.bin, little-endian:
 *   u32 binary_version                      (1..6 accepted; 6 is current)
 *   version >= 2: string spec_name, u32 spec_revision
 *   u32 n_variables, then per variable:
 *     string name, u8 rank, u32 dims[rank],
 *     version >= 4: u8 dtype, u32 n_bytes     (dtype: enum eng_ct2_dtype)
 *     version <  4: u8 item_size, u32 n_items (item size 4/2/1 = f32/i16/i8)
 *     n_bytes of data (no alignment padding)
 *   version >= 3: u32 n_aliases, then pairs (string alias, string target)
 * A "string" is a u16 length counting a trailing NUL, then the bytes.
 * The folder also holds config.json (parsed with jansson) and a vocabulary
 * (vocabulary.txt or tokenizer.json, checked for presence only).
 *
 * Every length, count and size is checked against the file; n_bytes must
 * equal product(dims) x dtype size. Variable data is NOT aligned (CT2 does
 * not pad): callers reading wider types must use memcpy or copy out.
 *
 * Threads: open on one thread; afterwards a handle is immutable and every
 * accessor may be called from any thread concurrently.
 */
#ifndef ENG_CT2_H
#define ENG_CT2_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct eng_ct2;

#define ENG_CT2_MAX_BINARY_VERSION 6 /* CURRENT_BINARY_VERSION in model_spec.py */
#define ENG_CT2_MAX_RANK 8           /* higher ranks are rejected (CT2 uses <= 4) */

/* Variable dtypes, numbered as CTranslate2's DataType enum (types.h). */
enum eng_ct2_dtype {
	ENG_CT2_DTYPE_FLOAT32 = 0,
	ENG_CT2_DTYPE_INT8 = 1,
	ENG_CT2_DTYPE_INT16 = 2,
	ENG_CT2_DTYPE_INT32 = 3,
	ENG_CT2_DTYPE_FLOAT16 = 4,
	ENG_CT2_DTYPE_BFLOAT16 = 5,
	ENG_CT2_DTYPE_COUNT
};

/* One variable, validated. A rank-0 variable is a scalar (one element). */
struct eng_ct2_var {
	const char *name;                /* NUL-terminated copy, owned by the handle */
	uint32_t rank;                   /* 0..ENG_CT2_MAX_RANK */
	uint32_t dims[ENG_CT2_MAX_RANK]; /* row-major, dims[rank-1] contiguous; unused = 1 */
	enum eng_ct2_dtype dtype;        /* element type */
	uint64_t n_elems;                /* product of dims */
	uint64_t size_bytes;             /* n_elems x dtype size */
	uint64_t offset;                 /* file offset of the data */
	const void *data;                /* the data in the map (unaligned) */
};

/* eng_ct2_open - open the CTranslate2 folder dir: mmap dir/model.bin
 * read-only (PROT_READ, MAP_SHARED) and validate it, parse dir/config.json
 * (a JSON object) and require dir/vocabulary.txt or dir/tokenizer.json.
 * On success *out is new (eng_ct2_close) and 0 returned. Errors:
 * -ST_NOTFOUND (a file is missing), -ST_IO, -ST_CORRUPT (model.bin or
 * config.json contradicts its format), -ST_UNSUPPORTED (binary version,
 * dtype, rank), -ST_NOMEM; *out NULL and err one line "FILE: fault". */
int eng_ct2_open(const char *dir, struct eng_ct2 **out, char *err, size_t errlen);

/* eng_ct2_open_buffer - validate model.bin bytes in memory (borrowed: they
 * must outlive the handle). config (config_len bytes of JSON, borrowed
 * only during the call) may be NULL: the handle then has no config. No
 * vocabulary is checked. label (may be NULL) names the file in errors. */
int eng_ct2_open_buffer(const void *bin, size_t bin_size, const char *config, size_t config_len,
			const char *label, struct eng_ct2 **out, char *err, size_t errlen);

/* eng_ct2_close - unmap and free; NULL is a no-op. */
void eng_ct2_close(struct eng_ct2 *c);

uint32_t eng_ct2_binary_version(const struct eng_ct2 *c);
/* Spec name without the NUL ("WhisperSpec"); "" for binary version 1. */
const char *eng_ct2_spec_name(const struct eng_ct2 *c);
uint32_t eng_ct2_spec_revision(const struct eng_ct2 *c); /* 1 for version 1 */
uint64_t eng_ct2_file_size(const struct eng_ct2 *c);     /* model.bin bytes */

/* Variables in file order; borrowed, valid until eng_ct2_close. */
size_t eng_ct2_n_vars(const struct eng_ct2 *c);
const struct eng_ct2_var *eng_ct2_var_at(const struct eng_ct2 *c, size_t i);
/* eng_ct2_var_find - by name, following aliases; NULL when absent. */
const struct eng_ct2_var *eng_ct2_var_find(const struct eng_ct2 *c, const char *name);
uint64_t eng_ct2_var_bytes(const struct eng_ct2 *c); /* sum of size_bytes */

/* Aliases (name -> existing variable), in file order. */
size_t eng_ct2_n_aliases(const struct eng_ct2 *c);
/* eng_ct2_alias_at - borrowed names; -ST_NOTFOUND when i is out of range. */
int eng_ct2_alias_at(const struct eng_ct2 *c, size_t i, const char **alias, const char **target);

/* eng_ct2_config - config.json as a jansson object (borrowed: json_incref
 * to keep it past eng_ct2_close), or NULL when none was given. */
json_t *eng_ct2_config(const struct eng_ct2 *c);
/* eng_ct2_config_int / _bool - a top-level config value: 0, -ST_NOTFOUND
 * (no config or no key) or -ST_INVAL (other JSON type). */
int eng_ct2_config_int(const struct eng_ct2 *c, const char *key, int64_t *out);
int eng_ct2_config_bool(const struct eng_ct2 *c, const char *key, bool *out);

/* eng_ct2_vocab_path - path of the vocabulary file found by eng_ct2_open
 * (vocabulary.txt preferred, else tokenizer.json); NULL for buffers. */
const char *eng_ct2_vocab_path(const struct eng_ct2 *c);
/* eng_ct2_tokenizer_path - dir/tokenizer.json when it exists, else NULL. */
const char *eng_ct2_tokenizer_path(const struct eng_ct2 *c);

/* Type table: "float32", "int8", ...; NULL / 0 when unknown. */
const char *eng_ct2_dtype_name(int dtype);
uint32_t eng_ct2_dtype_size(int dtype);

#endif /* ENG_CT2_H */
