/* eng_safetensors.c - the safetensors reader; the format and the checks
 * are described in eng_safetensors.h. The JSON header is parsed with
 * jansson (duplicate keys refused) and kept alive: tensor names borrow its
 * strings.
 */
#include "engine/format/eng_safetensors.h"

#include <jansson.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "engine/format/eng_file.h"

struct eng_st {
	struct eng__map map;	       /* the file (zeroed for a caller buffer) */
	json_t *header;		       /* the parsed JSON header */
	struct eng_st_tensor *tensors; /* n entries */
	size_t n;
};

static const struct {
	const char *name;
	uint64_t size; /* bytes per element */
} st_dtypes[ENG_ST_DTYPE_COUNT] = {
	[ENG_ST_DTYPE_F32] = {"F32", 4},   [ENG_ST_DTYPE_F16] = {"F16", 2},
	[ENG_ST_DTYPE_BF16] = {"BF16", 2}, [ENG_ST_DTYPE_F64] = {"F64", 8},
	[ENG_ST_DTYPE_I64] = {"I64", 8},   [ENG_ST_DTYPE_I32] = {"I32", 4},
	[ENG_ST_DTYPE_I16] = {"I16", 2},   [ENG_ST_DTYPE_I8] = {"I8", 1},
	[ENG_ST_DTYPE_U8] = {"U8", 1},	   [ENG_ST_DTYPE_BOOL] = {"BOOL", 1},
};

/* The context of one parse: where the data starts and how errors read. */
struct st_parse {
	const uint8_t *data; /* first byte after the header */
	uint64_t data_size;  /* bytes from there to the end of the file */
	const char *label;
	char *err;
	size_t errlen;
};

static int st_dtype(const struct st_parse *p, const char *name, json_t *v, enum eng_st_dtype *out)
{
	const char *s = json_string_value(v);
	if (!s)
		return st_errf(-ST_CORRUPT, p->err, p->errlen, "%s: %s: dtype is not a string",
			       p->label, name);
	for (int i = 0; i < ENG_ST_DTYPE_COUNT; i++)
		if (!strcmp(s, st_dtypes[i].name)) {
			*out = (enum eng_st_dtype)i;
			return 0;
		}
	return st_errf(-ST_UNSUPPORTED, p->err, p->errlen, "%s: %s: dtype %.16s not supported",
		       p->label, name, s);
}

/* st_u64 - a JSON integer >= 0, else false. */
static bool st_u64(json_t *v, uint64_t *out)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return false;
	*out = (uint64_t)json_integer_value(v);
	return true;
}

static int st_shape(const struct st_parse *p, const char *name, json_t *v, struct eng_st_tensor *t)
{
	size_t n = json_array_size(v);
	if (!json_is_array(v) || n > ENG_ST_MAX_DIMS)
		return st_errf(-ST_CORRUPT, p->err, p->errlen,
			       "%s: %s: shape is not an array of at most %d sizes", p->label, name,
			       ENG_ST_MAX_DIMS);
	t->n_dims = (int)n;
	t->n_elems = 1;
	for (size_t i = 0; i < n; i++) {
		if (!st_u64(json_array_get(v, i), &t->shape[i]) ||
		    !eng__checked_mul(t->n_elems, t->shape[i], &t->n_elems))
			return st_errf(-ST_CORRUPT, p->err, p->errlen,
				       "%s: %s: shape[%zu] is not a size (or the product "
				       "overflows)",
				       p->label, name, i);
	}
	return 0;
}

static int st_offsets(const struct st_parse *p, const char *name, json_t *v,
		      struct eng_st_tensor *t)
{
	uint64_t b, e, want;
	if (json_array_size(v) != 2 || !st_u64(json_array_get(v, 0), &b) ||
	    !st_u64(json_array_get(v, 1), &e) || b > e || e > p->data_size)
		return st_errf(-ST_CORRUPT, p->err, p->errlen,
			       "%s: %s: data_offsets is not [begin, end] inside the %llu data "
			       "bytes",
			       p->label, name, (unsigned long long)p->data_size);
	if (!eng__checked_mul(t->n_elems, st_dtypes[t->dtype].size, &want) || want != e - b)
		return st_errf(-ST_CORRUPT, p->err, p->errlen,
			       "%s: %s: %llu data bytes for a shape that needs %llu", p->label,
			       name, (unsigned long long)(e - b), (unsigned long long)want);
	t->data = p->data + b;
	t->size_bytes = e - b;
	return 0;
}

static int st_entry(const struct st_parse *p, const char *name, json_t *v, struct eng_st_tensor *t)
{
	if (!json_is_object(v))
		return st_errf(-ST_CORRUPT, p->err, p->errlen, "%s: %s: entry is not an object",
			       p->label, name);
	t->name = name;
	int rc = st_dtype(p, name, json_object_get(v, "dtype"), &t->dtype);
	if (!rc)
		rc = st_shape(p, name, json_object_get(v, "shape"), t);
	if (!rc)
		rc = st_offsets(p, name, json_object_get(v, "data_offsets"), t);
	return rc;
}

static int st_entries(struct eng_st *st, const struct st_parse *p)
{
	size_t cap = json_object_size(st->header);
	st->tensors = mem_calloc(cap ? cap : 1, sizeof(*st->tensors));
	if (!st->tensors)
		return st_errf(-ST_NOMEM, p->err, p->errlen, "%s: out of memory", p->label);
	const char *key;
	json_t *v;
	json_object_foreach(st->header, key, v)
	{
		if (!strcmp(key, "__metadata__"))
			continue;
		int rc = st_entry(p, key, v, &st->tensors[st->n]);
		if (rc)
			return rc;
		st->n++;
	}
	return 0;
}

static int st_parse(struct eng_st *st, const uint8_t *buf, size_t size, const char *label,
		    char *err, size_t errlen)
{
	struct eng__cur c = {.base = buf, .size = size};
	uint64_t n;
	const uint8_t *head;
	if (!eng__cur_u64(&c, &n) || n > ENG_ST_MAX_HEADER || !eng__cur_take(&c, n, &head))
		return st_errf(-ST_CORRUPT, err, errlen,
			       "%s: not a safetensors file (header length missing, over %u "
			       "bytes or past the end)",
			       label, ENG_ST_MAX_HEADER);
	json_error_t je;
	st->header = json_loadb((const char *)head, n, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(st->header))
		return st_errf(-ST_CORRUPT, err, errlen, "%s: header is not a JSON object: %s",
			       label, st->header ? "another JSON value" : je.text);
	struct st_parse p = {.data = buf + c.pos,
			     .data_size = eng__cur_left(&c),
			     .label = label,
			     .err = err,
			     .errlen = errlen};
	return st_entries(st, &p);
}

int eng_st_open_buffer(const void *data, size_t size, const char *label, struct eng_st **out,
		       char *err, size_t errlen)
{
	*out = NULL;
	struct eng_st *st = mem_calloc(1, sizeof(*st));
	if (!st)
		return st_errf(-ST_NOMEM, err, errlen, "%s: out of memory", label);
	int rc = st_parse(st, data, size, label, err, errlen);
	if (rc) {
		eng_st_destroy(st);
		return rc;
	}
	*out = st;
	return 0;
}

int eng_st_open(const char *path, struct eng_st **out, char *err, size_t errlen)
{
	*out = NULL;
	struct eng__map map;
	int rc = eng__map_file(path, &map, err, errlen);
	if (rc)
		return rc;
	rc = eng_st_open_buffer(map.data, map.size, path, out, err, errlen);
	if (rc) {
		eng__map_release(&map);
		return rc;
	}
	(*out)->map = map;
	return 0;
}

const struct eng_st_tensor *eng_st_find(const struct eng_st *st, const char *name)
{
	for (size_t i = 0; i < st->n; i++)
		if (!strcmp(st->tensors[i].name, name))
			return &st->tensors[i];
	return NULL;
}

size_t eng_st_n_tensors(const struct eng_st *st)
{
	return st->n;
}

const struct eng_st_tensor *eng_st_tensor(const struct eng_st *st, size_t i)
{
	return i < st->n ? &st->tensors[i] : NULL;
}

void eng_st_destroy(struct eng_st *st)
{
	if (!st)
		return;
	mem_free(st->tensors);
	json_decref(st->header);
	eng__map_release(&st->map);
	mem_free(st);
}
