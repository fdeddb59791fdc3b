/* eng_gguf.c - the GGUF v2/v3 reader (contract in eng_gguf.h).
 *
 * Parsing is one forward pass over the header, KV pairs and tensor infos
 * with a bounds-checked cursor (eng_file.h), followed by whole-file checks
 * (alignment, duplicate names, tensor extents and overlaps). Every count is
 * capped by what the remaining bytes could hold before anything is
 * allocated for it, so a corrupt count fails fast instead of allocating.
 * Values are not copied: views point into the map, except keys, tensor
 * names and scalar strings, which are copied once so that they are
 * NUL-terminated. Value views and the typed getters live in eng_gguf_val.c.
 */
/* qsort_r needs _GNU_SOURCE, which the build defines */
#include "engine/format/eng_gguf.h"

#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "engine/format/eng_file.h"
#include "devices/dev.h"

#define GGUF_MAGIC "GGUF"
#define GGUF_MAX_NAME 65535u /* longest key or tensor name accepted, bytes */
#define GGUF_MIN_KV_BYTES 13u     /* u64 key length + u32 type + 1 value byte */
#define GGUF_MIN_TENSOR_BYTES 24u /* u64 name length + u32 n_dims + u32 type + u64 offset */
#define GGUF_ARRAY_HEAD 12u       /* u32 element type + u64 length */

/* One metadata pair. */
struct gguf_kv {
	char *key;               /* NUL-terminated copy of the key */
	struct eng_gguf_val val; /* the value in the file */
	char *str;               /* NUL-terminated copy when val is a STRING, else NULL */
	uint64_t str_len;        /* bytes of str before the terminator */
};

struct eng_gguf {
	struct eng__map map;      /* the mmap (zeroed for open_buffer) */
	const uint8_t *base;      /* first byte of the file */
	uint64_t size;            /* file bytes */
	char *label;              /* path or label, for messages */
	uint32_t version;         /* 2 or 3 */
	uint32_t alignment;       /* general.alignment or 32 */
	uint64_t data_off;        /* file offset of the data section */
	size_t n_kv;              /* metadata pairs */
	struct gguf_kv *kv;       /* [n_kv] in file order */
	size_t *kv_sorted;        /* [n_kv] kv indices sorted by key */
	size_t n_tensors;         /* tensor infos */
	struct eng_gguf_tensor *tensors; /* [n_tensors] in file order */
	size_t *t_sorted;         /* [n_tensors] indices sorted by name */
	uint64_t tensor_bytes;    /* sum of size_bytes */
};

/* Parsing state: the handle being filled, the cursor and the error sink. */
struct pctx {
	struct eng_gguf *g;  /* handle under construction */
	struct eng__cur cur; /* position in the file */
	char *err;           /* caller's buffer */
	size_t errlen;       /* its size */
};

/* ---- type tables -------------------------------------------------------- */

static const struct {
	const char *name; /* spec name, lower case */
	uint32_t size;    /* bytes, 0 for variable-size types */
} vtypes[ENG_GGUF_VTYPE_COUNT] = {
	[ENG_GGUF_VTYPE_UINT8] = { "u8", 1 },      [ENG_GGUF_VTYPE_INT8] = { "i8", 1 },
	[ENG_GGUF_VTYPE_UINT16] = { "u16", 2 },    [ENG_GGUF_VTYPE_INT16] = { "i16", 2 },
	[ENG_GGUF_VTYPE_UINT32] = { "u32", 4 },    [ENG_GGUF_VTYPE_INT32] = { "i32", 4 },
	[ENG_GGUF_VTYPE_FLOAT32] = { "f32", 4 },   [ENG_GGUF_VTYPE_BOOL] = { "bool", 1 },
	[ENG_GGUF_VTYPE_STRING] = { "string", 0 }, [ENG_GGUF_VTYPE_ARRAY] = { "array", 0 },
	[ENG_GGUF_VTYPE_UINT64] = { "u64", 8 },    [ENG_GGUF_VTYPE_INT64] = { "i64", 8 },
	[ENG_GGUF_VTYPE_FLOAT64] = { "f64", 8 },
};

/* The type table is the devices' (dev_type_block, kernels/kn_qtype.c),
 * one for the whole tree; the GGUF numbers are ggml's, which that table is
 * indexed by. */
const char *eng_ggml_type_name(int type)
{
	return type >= 0 && type < ENG_GGML_TYPE_COUNT ? dev_type_block(type, NULL, NULL) : NULL;
}

bool eng_ggml_type_size(int type, uint32_t *block_elems, uint32_t *block_bytes)
{
	return eng_ggml_type_name(type) && dev_type_block(type, block_elems, block_bytes);
}

const char *eng_gguf_vtype_name(int vtype)
{
	if (vtype < 0 || vtype >= ENG_GGUF_VTYPE_COUNT)
		return NULL;
	return vtypes[vtype].name;
}

uint32_t eng_gguf_vtype_size(int vtype)
{
	if (vtype < 0 || vtype >= ENG_GGUF_VTYPE_COUNT)
		return 0;
	return vtypes[vtype].size;
}

/* ---- error helpers ---------------------------------------------------- */

/* perr - "LABEL: <fmt>" into the caller's buffer; returns rc. */
__attribute__((format(printf, 3, 4)))
static int perr(struct pctx *p, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	rc = st_verrf(rc, p->err, p->errlen, p->g->label, fmt, ap);
	va_end(ap);
	return rc;
}

/* truncated - the file ended while reading `what` (already formatted). */
static int truncated(struct pctx *p, const char *what)
{
	return perr(p, -ST_CORRUPT, "truncated at byte %" PRIu64 " reading %s (file is %" PRIu64 " bytes)",
		    p->cur.pos, what, p->cur.size);
}

/* ---- values ------------------------------------------------------------ */

static int parse_val(struct pctx *p, uint32_t type, int depth, const char *key);

/* parse_array - validate an array value (element type, length, elements). */
static int parse_array(struct pctx *p, int depth, const char *key)
{
	uint32_t et;
	uint64_t n, at = p->cur.pos;
	char what[300];

	snprintf(what, sizeof(what), "the array header of key '%s'", key);
	if (!eng__cur_u32(&p->cur, &et) || !eng__cur_u64(&p->cur, &n))
		return truncated(p, what);
	if (et >= ENG_GGUF_VTYPE_COUNT)
		return perr(p, -ST_CORRUPT, "key '%s': unknown array element type %" PRIu32 " at byte %" PRIu64,
			    key, et, at);
	if (depth >= ENG_GGUF_MAX_ARRAY_DEPTH)
		return perr(p, -ST_UNSUPPORTED, "key '%s': arrays nested deeper than %d", key,
			    ENG_GGUF_MAX_ARRAY_DEPTH);
	uint64_t esz = vtypes[et].size, left = eng__cur_left(&p->cur);
	uint64_t min = esz ? esz : (et == ENG_GGUF_VTYPE_STRING ? 8 : GGUF_ARRAY_HEAD);
	if (n > left / min)
		return perr(p, -ST_CORRUPT,
			    "key '%s': array of %" PRIu64 " %s at byte %" PRIu64
			    " cannot fit in the %" PRIu64 " bytes left in the file",
			    key, n, vtypes[et].name, at, left);
	if (esz) {
		p->cur.pos += n * esz; /* n * esz <= left, checked above */
		return 0;
	}
	for (uint64_t i = 0; i < n; i++) {
		int rc = parse_val(p, et, depth + 1, key);
		if (rc)
			return rc;
	}
	return 0;
}

/* parse_val - validate one value of the given type and step over it. */
static int parse_val(struct pctx *p, uint32_t type, int depth, const char *key)
{
	char what[300];
	const uint8_t *bytes;
	uint64_t len, at = p->cur.pos;

	if (type == ENG_GGUF_VTYPE_ARRAY)
		return parse_array(p, depth, key);
	snprintf(what, sizeof(what), "the %s value of key '%s'", vtypes[type].name, key);
	if (type != ENG_GGUF_VTYPE_STRING) {
		if (!eng__cur_take(&p->cur, vtypes[type].size, &bytes))
			return truncated(p, what);
		return 0;
	}
	if (!eng__cur_u64(&p->cur, &len))
		return truncated(p, what);
	if (!eng__cur_take(&p->cur, len, &bytes))
		return perr(p, -ST_CORRUPT,
			    "key '%s': string length %" PRIu64 " at byte %" PRIu64
			    " runs past the end of the file (%" PRIu64 " bytes)",
			    key, len, at, p->cur.size);
	return 0;
}

/* parse_name - a GGUF string used as a key or tensor name: copied,
 * NUL-terminated; embedded NULs and absurd lengths are corrupt. */
static int parse_name(struct pctx *p, const char *what, char **out)
{
	uint64_t len, at = p->cur.pos;
	const uint8_t *bytes;

	if (!eng__cur_u64(&p->cur, &len))
		return truncated(p, what);
	if (len > GGUF_MAX_NAME)
		return perr(p, -ST_CORRUPT, "length %" PRIu64 " of %s at byte %" PRIu64 " exceeds %u",
			    len, what, at, GGUF_MAX_NAME);
	if (!eng__cur_take(&p->cur, len, &bytes))
		return truncated(p, what);
	if (memchr(bytes, 0, len))
		return perr(p, -ST_CORRUPT, "%s at byte %" PRIu64 " contains a NUL byte", what, at);
	*out = mem_strndup((const char *)bytes, len);
	return *out ? 0 : perr(p, -ST_NOMEM, "out of memory reading %s", what);
}

/* parse_kv - key, type tag and value of pair i. */
static int parse_kv(struct pctx *p, size_t i)
{
	struct gguf_kv *kv = &p->g->kv[i];
	char what[80];
	uint32_t type;

	snprintf(what, sizeof(what), "the key of metadata pair %zu", i);
	int rc = parse_name(p, what, &kv->key);
	if (rc)
		return rc;
	snprintf(what, sizeof(what), "the value type of key '%.40s'", kv->key);
	if (!eng__cur_u32(&p->cur, &type))
		return truncated(p, what);
	if (type >= ENG_GGUF_VTYPE_COUNT)
		return perr(p, -ST_CORRUPT, "key '%s' (index %zu): unknown value type %" PRIu32, kv->key, i, type);
	kv->val.type = type;
	kv->val.p = p->cur.base + p->cur.pos;
	uint64_t start = p->cur.pos;
	rc = parse_val(p, type, 0, kv->key);
	if (rc)
		return rc;
	kv->val.size_bytes = p->cur.pos - start;
	if (type != ENG_GGUF_VTYPE_STRING)
		return 0;
	kv->str_len = kv->val.size_bytes - 8;
	kv->str = mem_alloc(kv->str_len + 1);
	if (!kv->str)
		return perr(p, -ST_NOMEM, "out of memory copying the value of key '%s'", kv->key);
	memcpy(kv->str, kv->val.p + 8, kv->str_len);
	kv->str[kv->str_len] = '\0';
	return 0;
}

/* ---- header and tensor infos ------------------------------------------- */

/* parse_header - magic, version and the two counts, capped by file size. */
static int parse_header(struct pctx *p, uint64_t *n_tensors, uint64_t *n_kv)
{
	const uint8_t *magic;
	uint32_t v;

	if (!eng__cur_take(&p->cur, 4, &magic))
		return truncated(p, "the GGUF magic");
	if (memcmp(magic, GGUF_MAGIC, 4) != 0)
		return perr(p, -ST_CORRUPT, "not a GGUF file (magic %02x %02x %02x %02x, expected \"GGUF\")",
			    magic[0], magic[1], magic[2], magic[3]);
	if (!eng__cur_u32(&p->cur, &v))
		return truncated(p, "the GGUF version");
	if (v == 1)
		return perr(p, -ST_UNSUPPORTED, "GGUF version 1 is not supported (32-bit counts; only v2 and v3)");
	if (v != 2 && v != 3)
		return perr(p, -ST_UNSUPPORTED, "GGUF version %" PRIu32 " is not supported (only v2 and v3%s)",
			    v, (v & 0xffff) == 0 ? "; a big-endian file?" : "");
	p->g->version = v;
	if (!eng__cur_u64(&p->cur, n_tensors))
		return truncated(p, "the tensor count");
	if (!eng__cur_u64(&p->cur, n_kv))
		return truncated(p, "the metadata count");
	uint64_t left = eng__cur_left(&p->cur);
	if (*n_kv > left / GGUF_MIN_KV_BYTES)
		return perr(p, -ST_CORRUPT, "metadata count %" PRIu64 " cannot fit in the %" PRIu64 " bytes left",
			    *n_kv, left);
	if (*n_tensors > left / GGUF_MIN_TENSOR_BYTES)
		return perr(p, -ST_CORRUPT, "tensor count %" PRIu64 " cannot fit in the %" PRIu64 " bytes left",
			    *n_tensors, left);
	return 0;
}

/* tensor_shape - n_dims and dims of tensor i; checks the element count. */
static int tensor_shape(struct pctx *p, size_t i, struct eng_gguf_tensor *t)
{
	char what[128];

	snprintf(what, sizeof(what), "the dims of tensor '%.64s' (index %zu)", t->name, i);
	if (!eng__cur_u32(&p->cur, &t->n_dims))
		return truncated(p, what);
	if (t->n_dims > ENG_GGUF_MAX_DIMS)
		return perr(p, -ST_UNSUPPORTED, "tensor '%s' (index %zu): n_dims %" PRIu32 " exceeds the maximum of %d",
			    t->name, i, t->n_dims, ENG_GGUF_MAX_DIMS);
	uint64_t n = 1;
	for (uint32_t d = 0; d < ENG_GGUF_MAX_DIMS; d++) {
		t->dims[d] = 1;
		if (d < t->n_dims && !eng__cur_u64(&p->cur, &t->dims[d]))
			return truncated(p, what);
		if (t->dims[d] > INT64_MAX || !eng__checked_mul(n, t->dims[d], &n) || n > INT64_MAX)
			return perr(p, -ST_CORRUPT, "tensor '%s' (index %zu): dims overflow at dim %" PRIu32
				    " (%" PRIu64 ")", t->name, i, d, t->dims[d]);
	}
	return 0;
}

/* tensor_type - ggml type (known, dims[0] a whole number of blocks), the
 * offset, and size_bytes. */
static int tensor_type(struct pctx *p, size_t i, struct eng_gguf_tensor *t)
{
	char what[128];
	uint32_t type;

	snprintf(what, sizeof(what), "the type and offset of tensor '%.64s' (index %zu)", t->name, i);
	if (!eng__cur_u32(&p->cur, &type) || !eng__cur_u64(&p->cur, &t->offset))
		return truncated(p, what);
	uint32_t blck, bytes;
	if (!eng_ggml_type_size((int)type, &blck, &bytes))
		return perr(p, -ST_UNSUPPORTED, "tensor '%s' (index %zu): unknown ggml type %" PRIu32,
			    t->name, i, type);
	t->type = type;
	if (t->dims[0] % blck != 0)
		return perr(p, -ST_CORRUPT, "tensor '%s' (index %zu): dim 0 (%" PRIu64
			    ") is not a multiple of the %s block size %" PRIu32,
			    t->name, i, t->dims[0], eng_ggml_type_name((int)type), blck);
	uint64_t n = t->dims[0] / blck * t->dims[1] * t->dims[2] * t->dims[3]; /* <= product, checked */
	if (!eng__checked_mul(n, bytes, &t->size_bytes))
		return perr(p, -ST_CORRUPT, "tensor '%s' (index %zu): byte size overflows", t->name, i);
	return 0;
}

static int parse_tensor(struct pctx *p, size_t i)
{
	struct eng_gguf_tensor *t = &p->g->tensors[i];
	char what[64];
	char *name = NULL;

	snprintf(what, sizeof(what), "the name of tensor %zu", i);
	int rc = parse_name(p, what, &name);
	if (rc)
		return rc;
	t->name = name;
	rc = tensor_shape(p, i, t);
	return rc ? rc : tensor_type(p, i, t);
}

/* ---- whole-file checks ------------------------------------------------- */

static int cmp_kv(const void *a, const void *b, void *ctx)
{
	const struct gguf_kv *kv = ctx;
	return strcmp(kv[*(const size_t *)a].key, kv[*(const size_t *)b].key);
}

static int cmp_tname(const void *a, const void *b, void *ctx)
{
	const struct eng_gguf_tensor *t = ctx;
	return strcmp(t[*(const size_t *)a].name, t[*(const size_t *)b].name);
}

static int cmp_toff(const void *a, const void *b, void *ctx)
{
	const struct eng_gguf_tensor *t = ctx;
	uint64_t x = t[*(const size_t *)a].offset, y = t[*(const size_t *)b].offset;
	return x < y ? -1 : x > y;
}

/* sorted_index - new [n] array of 0..n-1 sorted by cmp. */
static size_t *sorted_index(size_t n, int (*cmp)(const void *, const void *, void *), void *ctx)
{
	size_t *ix = mem_calloc(n ? n : 1, sizeof(*ix));
	if (!ix)
		return NULL;
	for (size_t i = 0; i < n; i++)
		ix[i] = i;
	qsort_r(ix, n, sizeof(*ix), cmp, ctx);
	return ix;
}

/* check_keys - sort the keys, reject duplicates, read general.alignment. */
static int check_keys(struct pctx *p)
{
	struct eng_gguf *g = p->g;

	g->kv_sorted = sorted_index(g->n_kv, cmp_kv, g->kv);
	if (!g->kv_sorted)
		return perr(p, -ST_NOMEM, "out of memory indexing %zu keys", g->n_kv);
	for (size_t i = 1; i < g->n_kv; i++)
		if (!strcmp(g->kv[g->kv_sorted[i - 1]].key, g->kv[g->kv_sorted[i]].key))
			return perr(p, -ST_CORRUPT, "duplicate metadata key '%s'", g->kv[g->kv_sorted[i]].key);
	g->alignment = ENG_GGUF_DEFAULT_ALIGNMENT;
	long a = eng_gguf_find_kv(g, "general.alignment");
	if (a < 0)
		return 0;
	const struct gguf_kv *kv = &g->kv[a];
	uint32_t v = 0;
	if (kv->val.type == ENG_GGUF_VTYPE_UINT32)
		memcpy(&v, kv->val.p, 4);
	if (v == 0 || (v & (v - 1)) != 0)
		return perr(p, -ST_CORRUPT, "general.alignment must be a u32 power of two (type %s, value %" PRIu32 ")",
			    vtypes[kv->val.type].name, v);
	g->alignment = v;
	return 0;
}

/* check_extent - tensor i is aligned and inside the file. */
static int check_extent(struct pctx *p, size_t i)
{
	struct eng_gguf *g = p->g;
	struct eng_gguf_tensor *t = &g->tensors[i];
	uint64_t end;

	if (t->offset % g->alignment != 0)
		return perr(p, -ST_CORRUPT, "tensor '%s' (index %zu): data offset %" PRIu64
			    " is not a multiple of the alignment %" PRIu32, t->name, i, t->offset, g->alignment);
	if (__builtin_add_overflow(g->data_off, t->offset, &end) ||
	    __builtin_add_overflow(end, t->size_bytes, &end) || end > g->size)
		return perr(p, -ST_CORRUPT, "tensor '%s' (index %zu): data offset %" PRIu64 " + %" PRIu64
			    " bytes runs past the end of the file (%" PRIu64 " bytes, data section at byte %" PRIu64 ")",
			    t->name, i, t->offset, t->size_bytes, g->size, g->data_off);
	t->data = g->base + g->data_off + t->offset;
	g->tensor_bytes += t->size_bytes;
	return 0;
}

/* check_tensors - names unique, extents in the file, no two overlapping. */
static int check_tensors(struct pctx *p)
{
	struct eng_gguf *g = p->g;
	uint64_t pos = p->cur.pos;

	g->data_off = (pos + g->alignment - 1) / g->alignment * g->alignment; /* pos <= size: no overflow */
	if (g->n_tensors > 0 && g->data_off > g->size)
		return perr(p, -ST_CORRUPT, "data section would start at byte %" PRIu64
			    ", past the end of the file (%" PRIu64 " bytes)", g->data_off, g->size);
	g->t_sorted = sorted_index(g->n_tensors, cmp_tname, g->tensors);
	if (!g->t_sorted)
		return perr(p, -ST_NOMEM, "out of memory indexing %zu tensors", g->n_tensors);
	for (size_t i = 1; i < g->n_tensors; i++)
		if (!strcmp(g->tensors[g->t_sorted[i - 1]].name, g->tensors[g->t_sorted[i]].name))
			return perr(p, -ST_CORRUPT, "duplicate tensor name '%s'", g->tensors[g->t_sorted[i]].name);
	for (size_t i = 0; i < g->n_tensors; i++) {
		int rc = check_extent(p, i);
		if (rc)
			return rc;
	}
	size_t *by_off = sorted_index(g->n_tensors, cmp_toff, g->tensors);
	if (!by_off)
		return perr(p, -ST_NOMEM, "out of memory indexing %zu tensors", g->n_tensors);
	int rc = 0;
	for (size_t i = 1; i < g->n_tensors && !rc; i++) {
		const struct eng_gguf_tensor *a = &g->tensors[by_off[i - 1]], *b = &g->tensors[by_off[i]];
		if (a->offset + a->size_bytes > b->offset)
			rc = perr(p, -ST_CORRUPT, "tensor '%s' (data offset %" PRIu64 ", %" PRIu64
				  " bytes) overlaps tensor '%s' (data offset %" PRIu64 ")",
				  a->name, a->offset, a->size_bytes, b->name, b->offset);
	}
	mem_free(by_off);
	return rc;
}

/* ---- open / close ------------------------------------------------------ */

static int parse_all(struct pctx *p)
{
	struct eng_gguf *g = p->g;
	uint64_t n_tensors = 0, n_kv = 0;

	int rc = parse_header(p, &n_tensors, &n_kv);
	if (rc)
		return rc;
	/* Both counts are <= file size / 13 here, so the arrays stay small. */
	g->kv = mem_calloc(n_kv ? n_kv : 1, sizeof(*g->kv));
	g->tensors = mem_calloc(n_tensors ? n_tensors : 1, sizeof(*g->tensors));
	if (!g->kv || !g->tensors)
		return perr(p, -ST_NOMEM, "out of memory for %" PRIu64 " keys and %" PRIu64 " tensors",
			    n_kv, n_tensors);
	while (g->n_kv < n_kv) {
		size_t i = g->n_kv++; /* its key is freed by close from here on */
		if ((rc = parse_kv(p, i)) != 0)
			return rc;
	}
	rc = check_keys(p);
	if (rc)
		return rc;
	while (g->n_tensors < n_tensors) {
		size_t i = g->n_tensors++; /* its name is freed by close from here on */
		if ((rc = parse_tensor(p, i)) != 0)
			return rc;
	}
	return check_tensors(p);
}

static int open_common(struct eng_gguf *g, const char *label, struct eng_gguf **out,
		       char *err, size_t errlen)
{
	struct pctx p = { .g = g, .cur = { g->base, g->size, 0 }, .err = err, .errlen = errlen };

	g->label = mem_strdup(label ? label : "<buffer>");
	if (!g->label) {
		eng_gguf_close(g);
		return st_errf(-ST_NOMEM, err, errlen, "%s: out of memory",
			       label ? label : "<buffer>");
	}
	int rc = parse_all(&p);
	if (rc) {
		eng_gguf_close(g);
		return rc;
	}
	*out = g;
	return 0;
}

int eng_gguf_open_buffer(const void *data, size_t size, const char *label,
			 struct eng_gguf **out, char *err, size_t errlen)
{
	*out = NULL;
	struct eng_gguf *g = mem_calloc(1, sizeof(*g));
	if (!g)
		return st_errf(-ST_NOMEM, err, errlen, "%s: out of memory",
			       label ? label : "<buffer>");
	g->base = data;
	g->size = data ? size : 0;
	return open_common(g, label, out, err, errlen);
}

int eng_gguf_open(const char *path, struct eng_gguf **out, char *err, size_t errlen)
{
	*out = NULL;
	struct eng_gguf *g = mem_calloc(1, sizeof(*g));
	if (!g)
		return st_errf(-ST_NOMEM, err, errlen, "%s: out of memory", path);
	int rc = eng__map_file(path, &g->map, err, errlen);
	if (rc) {
		mem_free(g);
		return rc;
	}
	g->base = g->map.data;
	g->size = g->map.size;
	return open_common(g, path, out, err, errlen);
}

void eng_gguf_close(struct eng_gguf *g)
{
	if (!g)
		return;
	for (size_t i = 0; g->kv && i < g->n_kv; i++) {
		mem_free(g->kv[i].key);
		mem_free(g->kv[i].str);
	}
	for (size_t i = 0; g->tensors && i < g->n_tensors; i++)
		mem_free((char *)g->tensors[i].name);
	mem_free(g->kv);
	mem_free(g->kv_sorted);
	mem_free(g->tensors);
	mem_free(g->t_sorted);
	mem_free(g->label);
	eng__map_release(&g->map);
	mem_free(g);
}

/* ---- accessors ---------------------------------------------------------- */

uint32_t eng_gguf_version(const struct eng_gguf *g) { return g->version; }
uint64_t eng_gguf_file_size(const struct eng_gguf *g) { return g->size; }
uint32_t eng_gguf_alignment(const struct eng_gguf *g) { return g->alignment; }
uint64_t eng_gguf_data_offset(const struct eng_gguf *g) { return g->data_off; }
size_t eng_gguf_n_kv(const struct eng_gguf *g) { return g->n_kv; }
size_t eng_gguf_n_tensors(const struct eng_gguf *g) { return g->n_tensors; }
uint64_t eng_gguf_tensor_bytes(const struct eng_gguf *g) { return g->tensor_bytes; }

const char *eng_gguf_kv_key(const struct eng_gguf *g, size_t i)
{
	return i < g->n_kv ? g->kv[i].key : NULL;
}

int eng_gguf_kv_type(const struct eng_gguf *g, size_t i)
{
	return i < g->n_kv ? (int)g->kv[i].val.type : -1;
}

int eng_gguf_kv_val(const struct eng_gguf *g, size_t i, struct eng_gguf_val *out)
{
	if (i >= g->n_kv)
		return -ST_NOTFOUND;
	*out = g->kv[i].val;
	return 0;
}

long eng_gguf_find_kv(const struct eng_gguf *g, const char *key)
{
	size_t lo = 0, hi = g->n_kv;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(key, g->kv[g->kv_sorted[mid]].key);
		if (c == 0)
			return (long)g->kv_sorted[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return -1;
}

const struct eng_gguf_tensor *eng_gguf_tensor_at(const struct eng_gguf *g, size_t i)
{
	return i < g->n_tensors ? &g->tensors[i] : NULL;
}

const struct eng_gguf_tensor *eng_gguf_tensor_find(const struct eng_gguf *g, const char *name)
{
	size_t lo = 0, hi = g->n_tensors;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct eng_gguf_tensor *t = &g->tensors[g->t_sorted[mid]];
		int c = strcmp(name, t->name);
		if (c == 0)
			return t;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

/* ---- strings by key (the copies live here) -------------------------------- */

int eng_gguf_get_str(const struct eng_gguf *g, const char *key, const char **out, size_t *len)
{
	long i = eng_gguf_find_kv(g, key);
	if (i < 0)
		return -ST_NOTFOUND;
	const struct gguf_kv *kv = &g->kv[i];
	if (!kv->str)
		return -ST_INVAL;
	*out = kv->str;
	if (len)
		*len = kv->str_len;
	return 0;
}
