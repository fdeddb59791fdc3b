/* eng_safetensors.h - a reader for the safetensors format (Hugging Face,
 * https://huggingface.co/docs/safetensors): an 8-byte little-endian header
 * length N, N bytes of JSON {"NAME": {"dtype": "F32", "shape": [..],
 * "data_offsets": [begin, end]}, ..., "__metadata__": {..}}, then the
 * tensors' bytes, offsets relative to the end of the header.
 *
 * Every size is checked before use: the header fits in the file and under
 * ENG_ST_MAX_HEADER, every tensor's byte range lies inside the data, and
 * its length equals product(shape) * element size (no overflow). A file
 * that breaks any rule is refused with -ST_CORRUPT and "LABEL: what"; a
 * dtype we do not know is refused with -ST_UNSUPPORTED. Tensor data is not
 * necessarily aligned: copy it out with memcpy.
 */
#ifndef ENG_SAFETENSORS_H
#define ENG_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define ENG_ST_MAX_HEADER (100u << 20) /* bytes of JSON header (the spec's limit) */
#define ENG_ST_MAX_DIMS	  8	       /* dimensions per tensor we accept */

enum eng_st_dtype {
	ENG_ST_DTYPE_F32 = 0,
	ENG_ST_DTYPE_F16 = 1,
	ENG_ST_DTYPE_BF16 = 2,
	ENG_ST_DTYPE_F64 = 3,
	ENG_ST_DTYPE_I64 = 4,
	ENG_ST_DTYPE_I32 = 5,
	ENG_ST_DTYPE_I16 = 6,
	ENG_ST_DTYPE_I8 = 7,
	ENG_ST_DTYPE_U8 = 8,
	ENG_ST_DTYPE_BOOL = 9,
	ENG_ST_DTYPE_COUNT
};

/* One tensor of a file; borrowed from its struct eng_st. */
struct eng_st_tensor {
	const char *name;		 /* the JSON key, NUL-terminated */
	enum eng_st_dtype dtype;	 /* element type */
	int n_dims;			 /* 0 (a scalar) .. ENG_ST_MAX_DIMS */
	uint64_t shape[ENG_ST_MAX_DIMS]; /* dimensions, outermost first */
	uint64_t n_elems;		 /* product of shape (1 for a scalar) */
	const uint8_t *data;		 /* first byte (unaligned, little-endian) */
	uint64_t size_bytes;		 /* n_elems * element size */
};

struct eng_st;

/* eng_st_open - mmap path read-only and validate it (above). *out is new
 * (eng_st_destroy), NULL on failure. Errors: -ST_NOTFOUND, -ST_IO (open,
 * mmap), -ST_CORRUPT, -ST_UNSUPPORTED, -ST_NOMEM, with err "PATH: what".
 * Any thread. */
int eng_st_open(const char *path, struct eng_st **out, char *err, size_t errlen);

/* eng_st_open_buffer - the same over size bytes at data (borrowed: they
 * must outlive *out); label names the buffer in messages. */
int eng_st_open_buffer(const void *data, size_t size, const char *label, struct eng_st **out,
		       char *err, size_t errlen);

/* eng_st_find - the tensor called name, or NULL. Borrowed. */
const struct eng_st_tensor *eng_st_find(const struct eng_st *st, const char *name);

/* eng_st_n_tensors / eng_st_tensor - the tensors in the header's order. */
size_t eng_st_n_tensors(const struct eng_st *st);
const struct eng_st_tensor *eng_st_tensor(const struct eng_st *st, size_t i);

/* eng_st_destroy - unmap and free; NULL is a no-op. */
void eng_st_destroy(struct eng_st *st);

#endif /* ENG_SAFETENSORS_H */
