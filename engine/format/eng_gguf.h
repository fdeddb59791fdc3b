/* eng_gguf.h - a validating reader for GGUF model files (v2 and v3).
 *
 * Source followed: the GGUF specification (ggml docs/gguf.md): header
 * (magic "GGUF", u32 version, u64 tensor count, u64 KV count), KV pairs
 * (u64-length string key, u32 value type, value), tensor infos (name, u32
 * n_dims, u64 dims[n_dims], u32 ggml type, u64 offset relative to the data
 * section), padding to general.alignment (default 32), then tensor data.
 * Little-endian files only; GGUF v1 (32-bit counts) is rejected.
 *
 * Every count, length, offset and size is checked against the file before
 * use: a file that opens successfully can be walked without further checks,
 * and every tensor lies inside the file, aligned and not overlapping another.
 *
 * Threads: open on one thread; afterwards a handle is immutable and every
 * accessor may be called from any thread concurrently.
 */
#ifndef ENG_GGUF_H
#define ENG_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct eng_gguf;

#define ENG_GGUF_MAX_DIMS 4        /* GGML_MAX_DIMS */
#define ENG_GGUF_DEFAULT_ALIGNMENT 32
#define ENG_GGUF_MAX_ARRAY_DEPTH 8 /* nesting deeper than this is rejected */

/* Metadata value types, numbered as in the spec. */
enum eng_gguf_vtype {
	ENG_GGUF_VTYPE_UINT8 = 0,
	ENG_GGUF_VTYPE_INT8 = 1,
	ENG_GGUF_VTYPE_UINT16 = 2,
	ENG_GGUF_VTYPE_INT16 = 3,
	ENG_GGUF_VTYPE_UINT32 = 4,
	ENG_GGUF_VTYPE_INT32 = 5,
	ENG_GGUF_VTYPE_FLOAT32 = 6,
	ENG_GGUF_VTYPE_BOOL = 7,
	ENG_GGUF_VTYPE_STRING = 8,
	ENG_GGUF_VTYPE_ARRAY = 9,
	ENG_GGUF_VTYPE_UINT64 = 10,
	ENG_GGUF_VTYPE_INT64 = 11,
	ENG_GGUF_VTYPE_FLOAT64 = 12,
	ENG_GGUF_VTYPE_COUNT
};

/* ggml tensor types, numbered as in ggml.h (gaps are retired types). */
enum eng_ggml_type {
	ENG_GGML_TYPE_F32 = 0,
	ENG_GGML_TYPE_F16 = 1,
	ENG_GGML_TYPE_Q4_0 = 2,
	ENG_GGML_TYPE_Q4_1 = 3,
	ENG_GGML_TYPE_Q5_0 = 6,
	ENG_GGML_TYPE_Q5_1 = 7,
	ENG_GGML_TYPE_Q8_0 = 8,
	ENG_GGML_TYPE_Q8_1 = 9,
	ENG_GGML_TYPE_Q2_K = 10,
	ENG_GGML_TYPE_Q3_K = 11,
	ENG_GGML_TYPE_Q4_K = 12,
	ENG_GGML_TYPE_Q5_K = 13,
	ENG_GGML_TYPE_Q6_K = 14,
	ENG_GGML_TYPE_Q8_K = 15,
	ENG_GGML_TYPE_IQ2_XXS = 16,
	ENG_GGML_TYPE_IQ2_XS = 17,
	ENG_GGML_TYPE_IQ3_XXS = 18,
	ENG_GGML_TYPE_IQ1_S = 19,
	ENG_GGML_TYPE_IQ4_NL = 20,
	ENG_GGML_TYPE_IQ3_S = 21,
	ENG_GGML_TYPE_IQ2_S = 22,
	ENG_GGML_TYPE_IQ4_XS = 23,
	ENG_GGML_TYPE_I8 = 24,
	ENG_GGML_TYPE_I16 = 25,
	ENG_GGML_TYPE_I32 = 26,
	ENG_GGML_TYPE_I64 = 27,
	ENG_GGML_TYPE_F64 = 28,
	ENG_GGML_TYPE_IQ1_M = 29,
	ENG_GGML_TYPE_BF16 = 30,
	ENG_GGML_TYPE_TQ1_0 = 34,
	ENG_GGML_TYPE_TQ2_0 = 35,
	ENG_GGML_TYPE_MXFP4 = 39,
	ENG_GGML_TYPE_COUNT = 40
};

/* A borrowed view of one metadata value inside the file (no copy).
 * For arrays, p points at the array's u32 element type. */
struct eng_gguf_val {
	enum eng_gguf_vtype type; /* what p encodes */
	const uint8_t *p;         /* first byte of the encoding (after the type tag) */
	uint64_t size_bytes;      /* bytes the encoding occupies, validated */
};

/* One tensor info, validated: type known, dims[0] a multiple of the type's
 * block size, data aligned and inside the file. Unused dims are 1. */
struct eng_gguf_tensor {
	const char *name;          /* NUL-terminated copy, owned by the handle */
	uint32_t n_dims;           /* 1..ENG_GGUF_MAX_DIMS (0 is accepted as a scalar) */
	uint64_t dims[ENG_GGUF_MAX_DIMS]; /* ggml ne[]: dims[0] is the contiguous one */
	enum eng_ggml_type type;   /* element / block type */
	uint64_t offset;           /* bytes from the start of the data section */
	uint64_t size_bytes;       /* n_elements / block_size * type_size */
	const void *data;          /* offset's byte in the map, alignment-aligned */
};

/* eng_gguf_open - mmap path read-only (PROT_READ, MAP_SHARED) and validate
 * it. On success *out is new (eng_gguf_close) and 0 returned. Errors:
 * -ST_NOTFOUND / -ST_IO (file), -ST_CORRUPT (contradicts the format),
 * -ST_UNSUPPORTED (version, unknown tensor type, too many dims), -ST_NOMEM;
 * *out NULL and err one line "PATH: fault". */
int eng_gguf_open(const char *path, struct eng_gguf **out, char *err, size_t errlen);

/* eng_gguf_open_buffer - the same on size bytes at data, borrowed: they
 * must outlive the handle and stay unchanged. label (borrowed, may be NULL
 * for "<buffer>") names the file in errors. */
int eng_gguf_open_buffer(const void *data, size_t size, const char *label,
			 struct eng_gguf **out, char *err, size_t errlen);

/* eng_gguf_close - unmap and free; NULL is a no-op. */
void eng_gguf_close(struct eng_gguf *g);

uint32_t eng_gguf_version(const struct eng_gguf *g);     /* 2 or 3 */
uint64_t eng_gguf_file_size(const struct eng_gguf *g);   /* bytes */
uint32_t eng_gguf_alignment(const struct eng_gguf *g);   /* power of two */
uint64_t eng_gguf_data_offset(const struct eng_gguf *g); /* file offset of the data section */

/* Metadata by index, 0 <= i < eng_gguf_n_kv (in file order). The key is a
 * borrowed NUL-terminated copy; out of range gives NULL / -1 / -ST_NOTFOUND. */
size_t eng_gguf_n_kv(const struct eng_gguf *g);
const char *eng_gguf_kv_key(const struct eng_gguf *g, size_t i);
int eng_gguf_kv_type(const struct eng_gguf *g, size_t i); /* enum eng_gguf_vtype or -1 */
int eng_gguf_kv_val(const struct eng_gguf *g, size_t i, struct eng_gguf_val *out);
/* eng_gguf_find_kv - index of key, or -1 when absent (binary search). */
long eng_gguf_find_kv(const struct eng_gguf *g, const char *key);

/* Typed getters by key. Integer getters accept any integer type whose value
 * fits the requested one (a u8 read as u32, an i32 >= 0 as u64); floats
 * accept FLOAT32 or FLOAT64. Return 0, -ST_NOTFOUND (no such key) or
 * -ST_INVAL (wrong type or out of range); *out unchanged on error. */
int eng_gguf_get_u32(const struct eng_gguf *g, const char *key, uint32_t *out);
int eng_gguf_get_i32(const struct eng_gguf *g, const char *key, int32_t *out);
int eng_gguf_get_u64(const struct eng_gguf *g, const char *key, uint64_t *out);
int eng_gguf_get_i64(const struct eng_gguf *g, const char *key, int64_t *out);
int eng_gguf_get_f32(const struct eng_gguf *g, const char *key, float *out);
int eng_gguf_get_f64(const struct eng_gguf *g, const char *key, double *out);
int eng_gguf_get_bool(const struct eng_gguf *g, const char *key, bool *out);
/* eng_gguf_get_str - borrowed NUL-terminated copy (*len: bytes before the
 * terminator, may be NULL; a string may hold embedded NULs). */
int eng_gguf_get_str(const struct eng_gguf *g, const char *key, const char **out, size_t *len);
/* eng_gguf_get_arr - the array value of key (-ST_INVAL when not an array). */
int eng_gguf_get_arr(const struct eng_gguf *g, const char *key, struct eng_gguf_val *out);

/* Value views (any value from kv_val, get_arr or arr_at). The scalar
 * readers follow the same conversion rules as the getters. Strings read
 * from a view are NOT NUL-terminated: (*s, *len) borrow the file bytes. */
int eng_gguf_val_u64(const struct eng_gguf_val *v, uint64_t *out);
int eng_gguf_val_i64(const struct eng_gguf_val *v, int64_t *out);
int eng_gguf_val_f64(const struct eng_gguf_val *v, double *out);
int eng_gguf_val_bool(const struct eng_gguf_val *v, bool *out);
int eng_gguf_val_str(const struct eng_gguf_val *v, const char **s, uint64_t *len);
/* eng_gguf_arr_info - element type and length of an array view. */
int eng_gguf_arr_info(const struct eng_gguf_val *arr, enum eng_gguf_vtype *elem_type, uint64_t *n);
/* eng_gguf_arr_at - element i: O(1) for fixed-size elements, O(i) for
 * strings and nested arrays (use eng_gguf_arr_next to walk those). */
int eng_gguf_arr_at(const struct eng_gguf_val *arr, uint64_t i, struct eng_gguf_val *out);
/* eng_gguf_arr_next - iterate: start with *cursor = 0; each call yields the
 * next element and returns true, false after the last. */
bool eng_gguf_arr_next(const struct eng_gguf_val *arr, uint64_t *cursor, struct eng_gguf_val *out);

/* Tensors, in file order; borrowed, valid until eng_gguf_close. */
size_t eng_gguf_n_tensors(const struct eng_gguf *g);
const struct eng_gguf_tensor *eng_gguf_tensor_at(const struct eng_gguf *g, size_t i);
const struct eng_gguf_tensor *eng_gguf_tensor_find(const struct eng_gguf *g, const char *name);
/* eng_gguf_tensor_bytes - sum of every tensor's size_bytes. */
uint64_t eng_gguf_tensor_bytes(const struct eng_gguf *g);

/* Type tables. Names are static ("Q4_K", "string"); NULL when unknown. */
const char *eng_ggml_type_name(int type);
/* eng_ggml_type_size - elements per block and bytes per block; false when
 * the type number is unknown or retired. */
bool eng_ggml_type_size(int type, uint32_t *block_elems, uint32_t *block_bytes);
const char *eng_gguf_vtype_name(int vtype);
/* eng_gguf_vtype_size - bytes of a fixed-size value type, 0 for STRING,
 * ARRAY and unknown types. */
uint32_t eng_gguf_vtype_size(int vtype);

#endif /* ENG_GGUF_H */
