/* eng_ct2.c - the CTranslate2 model.bin + config.json reader (contract in
 * eng_ct2.h).
 *
 * One forward pass over model.bin with a bounds-checked cursor; counts are
 * capped by what the remaining bytes could hold before anything is
 * allocated. Variable data stays in the map; names are copied so that they
 * are NUL-terminated. Aliases must name an existing variable.
 */
/* qsort_r needs _GNU_SOURCE, which the build defines */
#include "engine/format/eng_ct2.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/mem.h"
#include "common/st.h"
#include "engine/format/eng_file.h"

#define CT2_MIN_VAR_BYTES 9u   /* string(2+1) + rank(1) + dtype(1) + n_bytes(4) */
#define CT2_MIN_ALIAS_BYTES 6u /* two strings of at least 2+1 bytes */

/* One alias: another name for variable `var`. */
struct ct2_alias {
	char *alias;  /* the extra name */
	char *target; /* the variable's own name, as written in the file */
	size_t var;   /* index of the target in vars */
};

struct eng_ct2 {
	struct eng__map map;       /* model.bin's mmap (zeroed for buffers) */
	const uint8_t *base;       /* first byte of model.bin */
	uint64_t size;             /* its bytes */
	char *label;               /* model.bin's path or label, for messages */
	uint32_t version;          /* binary version, 1..6 */
	char *spec;                /* spec name, "" for version 1 */
	uint32_t revision;         /* spec revision */
	size_t n_vars;             /* variables */
	struct eng_ct2_var *vars;  /* [n_vars] in file order */
	size_t *sorted;            /* [n_vars] indices sorted by name */
	uint64_t var_bytes;        /* sum of size_bytes */
	size_t n_aliases;          /* aliases */
	struct ct2_alias *aliases; /* [n_aliases] */
	json_t *config;            /* config.json object, or NULL */
	char *vocab_path;          /* vocabulary file found, or NULL */
	char *tok_path;            /* tokenizer.json when present, or NULL */
};

/* Parsing state. */
struct pctx {
	struct eng_ct2 *c;   /* handle under construction */
	struct eng__cur cur; /* position in model.bin */
	char *err;           /* caller's buffer */
	size_t errlen;       /* its size */
};

static const struct {
	const char *name; /* numpy-style name, as CT2 prints it */
	uint32_t size;    /* bytes per element */
} dtypes[ENG_CT2_DTYPE_COUNT] = {
	[ENG_CT2_DTYPE_FLOAT32] = { "float32", 4 }, [ENG_CT2_DTYPE_INT8] = { "int8", 1 },
	[ENG_CT2_DTYPE_INT16] = { "int16", 2 },     [ENG_CT2_DTYPE_INT32] = { "int32", 4 },
	[ENG_CT2_DTYPE_FLOAT16] = { "float16", 2 }, [ENG_CT2_DTYPE_BFLOAT16] = { "bfloat16", 2 },
};

const char *eng_ct2_dtype_name(int dtype)
{
	return dtype >= 0 && dtype < ENG_CT2_DTYPE_COUNT ? dtypes[dtype].name : NULL;
}

uint32_t eng_ct2_dtype_size(int dtype)
{
	return dtype >= 0 && dtype < ENG_CT2_DTYPE_COUNT ? dtypes[dtype].size : 0;
}

/* perr - "LABEL: <fmt>" into the caller's buffer; returns rc. */
__attribute__((format(printf, 3, 4)))
static int perr(struct pctx *p, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	rc = st_verrf(rc, p->err, p->errlen, p->c->label, fmt, ap);
	va_end(ap);
	return rc;
}

static int truncated(struct pctx *p, const char *what)
{
	return perr(p, -ST_CORRUPT, "truncated at byte %" PRIu64 " reading %s (file is %" PRIu64 " bytes)",
		    p->cur.pos, what, p->cur.size);
}

/* parse_str - a CT2 string (u16 length with the NUL, bytes, NUL), copied. */
static int parse_str(struct pctx *p, const char *what, char **out)
{
	uint16_t len;
	const uint8_t *bytes;
	uint64_t at = p->cur.pos;

	if (!eng__cur_u16(&p->cur, &len) || !eng__cur_take(&p->cur, len, &bytes))
		return truncated(p, what);
	if (len == 0 || bytes[len - 1] != 0 || memchr(bytes, 0, len - 1u))
		return perr(p, -ST_CORRUPT, "%s at byte %" PRIu64 " is not a NUL-terminated string of %u bytes",
			    what, at, len);
	*out = mem_strndup((const char *)bytes, len - 1u);
	return *out ? 0 : perr(p, -ST_NOMEM, "out of memory reading %s", what);
}

/* parse_header - version, spec name and revision, variable count. */
static int parse_header(struct pctx *p, uint32_t *n_vars)
{
	struct eng_ct2 *c = p->c;

	if (!eng__cur_u32(&p->cur, &c->version))
		return truncated(p, "the binary version");
	if (c->version < 1 || c->version > ENG_CT2_MAX_BINARY_VERSION)
		return perr(p, -ST_UNSUPPORTED, "binary version %" PRIu32 " is not supported (1..%d)",
			    c->version, ENG_CT2_MAX_BINARY_VERSION);
	c->revision = 1;
	int rc = c->version >= 2 ? parse_str(p, "the spec name", &c->spec) : 0;
	if (!rc && !c->spec && !(c->spec = mem_strdup("")))
		rc = perr(p, -ST_NOMEM, "out of memory");
	if (rc)
		return rc;
	if (c->version >= 2 && !eng__cur_u32(&p->cur, &c->revision))
		return truncated(p, "the spec revision");
	if (!eng__cur_u32(&p->cur, n_vars))
		return truncated(p, "the variable count");
	if (*n_vars > eng__cur_left(&p->cur) / CT2_MIN_VAR_BYTES)
		return perr(p, -ST_CORRUPT, "variable count %" PRIu32 " cannot fit in the %" PRIu64 " bytes left",
			    *n_vars, eng__cur_left(&p->cur));
	return 0;
}

/* var_dtype - dtype and byte count (layout depends on the version). */
static int var_dtype(struct pctx *p, size_t i, struct eng_ct2_var *v, uint32_t *n_bytes)
{
	char what[128];
	uint8_t code;
	uint32_t n;

	snprintf(what, sizeof(what), "the dtype and size of variable %zu ('%.60s')", i, v->name);
	if (!eng__cur_u8(&p->cur, &code) || !eng__cur_u32(&p->cur, &n))
		return truncated(p, what);
	if (p->c->version < 4) { /* old files store the item size and count */
		int dt = code == 4 ? ENG_CT2_DTYPE_FLOAT32 : code == 2 ? ENG_CT2_DTYPE_INT16
			 : code == 1 ? ENG_CT2_DTYPE_INT8 : -1;
		if (dt < 0)
			return perr(p, -ST_UNSUPPORTED, "variable '%s' (index %zu): unknown item size %u",
				    v->name, i, code);
		if (n > UINT32_MAX / code)
			return perr(p, -ST_CORRUPT, "variable '%s' (index %zu): %" PRIu32 " items overflow",
				    v->name, i, n);
		v->dtype = dt;
		*n_bytes = n * code;
		return 0;
	}
	if (code >= ENG_CT2_DTYPE_COUNT)
		return perr(p, -ST_UNSUPPORTED, "variable '%s' (index %zu): unknown dtype %u", v->name, i, code);
	v->dtype = code;
	*n_bytes = n;
	return 0;
}

/* var_shape - rank and dims; n_elems with overflow checks. */
static int var_shape(struct pctx *p, size_t i, struct eng_ct2_var *v)
{
	char what[128];
	uint8_t rank;

	snprintf(what, sizeof(what), "the shape of variable %zu ('%.60s')", i, v->name);
	if (!eng__cur_u8(&p->cur, &rank))
		return truncated(p, what);
	if (rank > ENG_CT2_MAX_RANK)
		return perr(p, -ST_UNSUPPORTED, "variable '%s' (index %zu): rank %u exceeds %d",
			    v->name, i, rank, ENG_CT2_MAX_RANK);
	v->rank = rank;
	v->n_elems = 1;
	for (uint32_t d = 0; d < ENG_CT2_MAX_RANK; d++) {
		v->dims[d] = 1;
		if (d < rank && !eng__cur_u32(&p->cur, &v->dims[d]))
			return truncated(p, what);
		if (!eng__checked_mul(v->n_elems, v->dims[d], &v->n_elems))
			return perr(p, -ST_CORRUPT, "variable '%s' (index %zu): dims overflow", v->name, i);
	}
	return 0;
}

/* parse_var - variable i: name, shape, dtype, size check, data extent. */
static int parse_var(struct pctx *p, size_t i)
{
	struct eng_ct2_var *v = &p->c->vars[i];
	char what[64], *name = NULL;
	uint32_t n_bytes = 0;

	snprintf(what, sizeof(what), "the name of variable %zu", i);
	int rc = parse_str(p, what, &name);
	if (rc)
		return rc;
	v->name = name;
	if ((rc = var_shape(p, i, v)) != 0 || (rc = var_dtype(p, i, v, &n_bytes)) != 0)
		return rc;
	if (!eng__checked_mul(v->n_elems, dtypes[v->dtype].size, &v->size_bytes) || v->size_bytes != n_bytes)
		return perr(p, -ST_CORRUPT, "variable '%s' (index %zu): %" PRIu32 " bytes stored but %" PRIu64
			    " %s elements need %" PRIu64, v->name, i, n_bytes, v->n_elems,
			    dtypes[v->dtype].name, v->n_elems * dtypes[v->dtype].size);
	v->offset = p->cur.pos;
	const uint8_t *data;
	if (!eng__cur_take(&p->cur, n_bytes, &data))
		return perr(p, -ST_CORRUPT, "variable '%s' (index %zu): data at byte %" PRIu64 " + %" PRIu32
			    " bytes runs past the end of the file (%" PRIu64 " bytes)",
			    v->name, i, v->offset, n_bytes, p->cur.size);
	v->data = data;
	p->c->var_bytes += n_bytes;
	return 0;
}

static int cmp_name(const void *a, const void *b, void *ctx)
{
	const struct eng_ct2_var *v = ctx;
	return strcmp(v[*(const size_t *)a].name, v[*(const size_t *)b].name);
}

/* index_vars - sort names for lookup; duplicates are corrupt. */
static int index_vars(struct pctx *p)
{
	struct eng_ct2 *c = p->c;

	c->sorted = mem_calloc(c->n_vars ? c->n_vars : 1, sizeof(*c->sorted));
	if (!c->sorted)
		return perr(p, -ST_NOMEM, "out of memory indexing %zu variables", c->n_vars);
	for (size_t i = 0; i < c->n_vars; i++)
		c->sorted[i] = i;
	qsort_r(c->sorted, c->n_vars, sizeof(*c->sorted), cmp_name, c->vars);
	for (size_t i = 1; i < c->n_vars; i++)
		if (!strcmp(c->vars[c->sorted[i - 1]].name, c->vars[c->sorted[i]].name))
			return perr(p, -ST_CORRUPT, "duplicate variable name '%s'", c->vars[c->sorted[i]].name);
	return 0;
}

/* find_var - index of the variable with this exact name, or -1. */
static long find_var(const struct eng_ct2 *c, const char *name)
{
	size_t lo = 0, hi = c->n_vars;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int cmp = strcmp(name, c->vars[c->sorted[mid]].name);
		if (cmp == 0)
			return (long)c->sorted[mid];
		if (cmp < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return -1;
}

/* parse_aliases - count, then (alias, target) pairs; targets must exist. */
static int parse_aliases(struct pctx *p)
{
	struct eng_ct2 *c = p->c;
	uint32_t n;
	char what[64];

	if (c->version < 3)
		return 0;
	if (!eng__cur_u32(&p->cur, &n))
		return truncated(p, "the alias count");
	if (n > eng__cur_left(&p->cur) / CT2_MIN_ALIAS_BYTES)
		return perr(p, -ST_CORRUPT, "alias count %" PRIu32 " cannot fit in the %" PRIu64 " bytes left",
			    n, eng__cur_left(&p->cur));
	c->aliases = mem_calloc(n ? n : 1, sizeof(*c->aliases));
	if (!c->aliases)
		return perr(p, -ST_NOMEM, "out of memory for %" PRIu32 " aliases", n);
	for (uint32_t k = 0; k < n; k++) {
		struct ct2_alias *a = &c->aliases[c->n_aliases++]; /* freed by close from here on */
		snprintf(what, sizeof(what), "alias %" PRIu32, k);
		int rc = parse_str(p, what, &a->alias);
		snprintf(what, sizeof(what), "the target of alias %" PRIu32, k);
		if (!rc)
			rc = parse_str(p, what, &a->target);
		if (rc)
			return rc;
		long v = find_var(c, a->target);
		if (v < 0)
			return perr(p, -ST_CORRUPT, "alias '%s' names a missing variable '%s'", a->alias, a->target);
		a->var = (size_t)v;
	}
	return 0;
}

static int parse_bin(struct pctx *p)
{
	struct eng_ct2 *c = p->c;
	uint32_t n_vars = 0;

	int rc = parse_header(p, &n_vars);
	if (rc)
		return rc;
	c->vars = mem_calloc(n_vars ? n_vars : 1, sizeof(*c->vars)); /* n_vars <= size / 9 */
	if (!c->vars)
		return perr(p, -ST_NOMEM, "out of memory for %" PRIu32 " variables", n_vars);
	while (c->n_vars < n_vars) {
		size_t i = c->n_vars++; /* its name is freed by close from here on */
		if ((rc = parse_var(p, i)) != 0)
			return rc;
	}
	rc = index_vars(p);
	return rc ? rc : parse_aliases(p);
}

/* set_config - parse JSON text; it must be an object. */
static int set_config(struct eng_ct2 *c, json_t *j, const json_error_t *je, const char *file,
		      char *err, size_t errlen)
{
	if (!j)
		return st_errf(-ST_CORRUPT, err, errlen, "%s: line %d: %s", file, je->line,
			       je->text);
	if (!json_is_object(j)) {
		json_decref(j);
		return st_errf(-ST_CORRUPT, err, errlen, "%s: not a JSON object", file);
	}
	c->config = j;
	return 0;
}

static struct eng_ct2 *ct2_new(const char *label, char *err, size_t errlen)
{
	struct eng_ct2 *c = mem_calloc(1, sizeof(*c));
	if (c && !(c->label = mem_strdup(label))) {
		mem_free(c);
		c = NULL;
	}
	if (!c)
		st_errf(-ST_NOMEM, err, errlen, "%s: out of memory", label);
	return c;
}

static int parse_model_bin(struct eng_ct2 *c, char *err, size_t errlen)
{
	struct pctx p = { .c = c, .cur = { c->base, c->size, 0 }, .err = err, .errlen = errlen };
	return parse_bin(&p);
}

int eng_ct2_open_buffer(const void *bin, size_t bin_size, const char *config, size_t config_len,
			const char *label, struct eng_ct2 **out, char *err, size_t errlen)
{
	*out = NULL;
	struct eng_ct2 *c = ct2_new(label ? label : "<buffer>", err, errlen);
	if (!c)
		return -ST_NOMEM;
	c->base = bin;
	c->size = bin ? bin_size : 0;
	int rc = parse_model_bin(c, err, errlen);
	if (!rc && config) {
		json_error_t je;
		json_t *j = json_loadb(config, config_len, JSON_REJECT_DUPLICATES, &je);
		rc = set_config(c, j, &je, "config.json", err, errlen);
	}
	if (rc) {
		eng_ct2_close(c);
		return rc;
	}
	*out = c;
	return 0;
}

/* join - new "dir/name" (mem_free), or NULL. */
static char *join(const char *dir, const char *name)
{
	size_t n = strlen(dir) + 1 + strlen(name) + 1;
	char *s = mem_alloc(n);
	if (s)
		snprintf(s, n, "%s/%s", dir, name);
	return s;
}

static bool is_file(const char *path)
{
	struct stat st;
	return path && stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* open_side_files - config.json (required) and the vocabulary. */
static int open_side_files(struct eng_ct2 *c, const char *dir, char *err, size_t errlen)
{
	char *cfg = join(dir, "config.json");
	int rc = 0;

	c->vocab_path = join(dir, "vocabulary.txt");
	c->tok_path = join(dir, "tokenizer.json");
	if (!cfg || !c->vocab_path || !c->tok_path) {
		rc = st_errf(-ST_NOMEM, err, errlen, "%s: out of memory", dir);
		goto out_free_cfg;
	}
	if (!is_file(cfg)) {
		rc = st_errf(-ST_NOTFOUND, err, errlen,
			     "%s: missing (a CTranslate2 model needs config.json)", cfg);
		goto out_free_cfg;
	}
	json_error_t je;
	rc = set_config(c, json_load_file(cfg, JSON_REJECT_DUPLICATES, &je), &je, cfg, err, errlen);
	if (rc)
		goto out_free_cfg;
	if (!is_file(c->tok_path)) {
		mem_free(c->tok_path);
		c->tok_path = NULL;
	}
	if (!is_file(c->vocab_path)) {
		mem_free(c->vocab_path);
		c->vocab_path = c->tok_path ? mem_strdup(c->tok_path) : NULL;
		if (!c->tok_path)
			rc = st_errf(-ST_NOTFOUND, err, errlen,
				     "%s: neither vocabulary.txt nor tokenizer.json found (the "
				     "tokenizer needs one)",
				     dir);
		else if (!c->vocab_path)
			rc = st_errf(-ST_NOMEM, err, errlen, "%s: out of memory", dir);
	}
out_free_cfg:
	mem_free(cfg);
	return rc;
}

int eng_ct2_open(const char *dir, struct eng_ct2 **out, char *err, size_t errlen)
{
	*out = NULL;
	char *bin = join(dir, "model.bin");
	if (!bin)
		return st_errf(-ST_NOMEM, err, errlen, "%s: out of memory", dir);
	struct eng_ct2 *c = ct2_new(bin, err, errlen);
	mem_free(bin);
	if (!c)
		return -ST_NOMEM;
	int rc = eng__map_file(c->label, &c->map, err, errlen);
	if (rc)
		goto out_close;
	c->base = c->map.data;
	c->size = c->map.size;
	rc = parse_model_bin(c, err, errlen);
	if (!rc)
		rc = open_side_files(c, dir, err, errlen);
	if (rc)
		goto out_close;
	*out = c;
	return 0;
out_close:
	eng_ct2_close(c);
	return rc;
}

void eng_ct2_close(struct eng_ct2 *c)
{
	if (!c)
		return;
	for (size_t i = 0; c->vars && i < c->n_vars; i++)
		mem_free((char *)c->vars[i].name);
	for (size_t i = 0; c->aliases && i < c->n_aliases; i++) {
		mem_free(c->aliases[i].alias);
		mem_free(c->aliases[i].target);
	}
	mem_free(c->vars);
	mem_free(c->sorted);
	mem_free(c->aliases);
	mem_free(c->spec);
	mem_free(c->label);
	mem_free(c->vocab_path);
	mem_free(c->tok_path);
	json_decref(c->config);
	eng__map_release(&c->map);
	mem_free(c);
}

/* ---- accessors ---------------------------------------------------------- */

uint32_t eng_ct2_binary_version(const struct eng_ct2 *c) { return c->version; }
const char *eng_ct2_spec_name(const struct eng_ct2 *c) { return c->spec; }
uint32_t eng_ct2_spec_revision(const struct eng_ct2 *c) { return c->revision; }
uint64_t eng_ct2_file_size(const struct eng_ct2 *c) { return c->size; }
size_t eng_ct2_n_vars(const struct eng_ct2 *c) { return c->n_vars; }
uint64_t eng_ct2_var_bytes(const struct eng_ct2 *c) { return c->var_bytes; }
size_t eng_ct2_n_aliases(const struct eng_ct2 *c) { return c->n_aliases; }
json_t *eng_ct2_config(const struct eng_ct2 *c) { return c->config; }
const char *eng_ct2_vocab_path(const struct eng_ct2 *c) { return c->vocab_path; }
const char *eng_ct2_tokenizer_path(const struct eng_ct2 *c) { return c->tok_path; }

const struct eng_ct2_var *eng_ct2_var_at(const struct eng_ct2 *c, size_t i)
{
	return i < c->n_vars ? &c->vars[i] : NULL;
}

const struct eng_ct2_var *eng_ct2_var_find(const struct eng_ct2 *c, const char *name)
{
	long i = find_var(c, name);
	if (i >= 0)
		return &c->vars[i];
	for (size_t a = 0; a < c->n_aliases; a++)
		if (!strcmp(c->aliases[a].alias, name))
			return &c->vars[c->aliases[a].var];
	return NULL;
}

int eng_ct2_alias_at(const struct eng_ct2 *c, size_t i, const char **alias, const char **target)
{
	if (i >= c->n_aliases)
		return -ST_NOTFOUND;
	*alias = c->aliases[i].alias;
	*target = c->aliases[i].target;
	return 0;
}

int eng_ct2_config_int(const struct eng_ct2 *c, const char *key, int64_t *out)
{
	json_t *v = c->config ? json_object_get(c->config, key) : NULL;
	if (!v)
		return -ST_NOTFOUND;
	if (!json_is_integer(v))
		return -ST_INVAL;
	*out = json_integer_value(v);
	return 0;
}

int eng_ct2_config_bool(const struct eng_ct2 *c, const char *key, bool *out)
{
	json_t *v = c->config ? json_object_get(c->config, key) : NULL;
	if (!v)
		return -ST_NOTFOUND;
	if (!json_is_boolean(v))
		return -ST_INVAL;
	*out = json_is_true(v);
	return 0;
}
