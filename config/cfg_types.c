/* cfg_types.c - the knob types of the configuration table (struct
 * cfg_type): for each kind of value, how its field is marked UNSET, read
 * from JSON (type checked), given its default and range checked. Scalars
 * first (numbers, booleans, strings, names, the model format, listen
 * addresses, API keys), then the compound types that walk a row's sub or
 * items table (objects, replicas, models) and the table walkers loading
 * uses. The tables themselves are in cfg_knobs.c.
 */
#include <arpa/inet.h>
#include <assert.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "config/cfg_int.h"

/* ---- numbers and booleans -------------------------------------------- */

/* cfg_range_fail - "expected an integer >= MIN" when the row has no real
 * ceiling (INT_MAX / INT64_MAX), else "expected an integer in MIN..MAX". */
static int cfg_range_fail(struct cfg_ctx *ctx, const struct cfg_knob *k,
			  const char *path)
{
	if (k->max == INT_MAX || k->max == INT64_MAX)
		return cfg__fail(ctx, -ST_INVAL, path,
				"expected an integer >= %lld", (long long)k->min);
	return cfg__fail(ctx, -ST_INVAL, path, "expected an integer in %lld..%lld",
			(long long)k->min, (long long)k->max);
}

/* cfg_range_check - the range check of the finish step; x is the value. */
static int cfg_range_check(struct cfg_ctx *ctx, const struct cfg_knob *k,
			   int64_t x, const char *parent)
{
	if (x >= k->min && x <= k->max)
		return 0;
	char path[CFG_PATH_LEN];
	cfg__join(path, sizeof(path), parent, k->path);
	return cfg_range_fail(ctx, k, path);
}

static void cfg_int_unset(const struct cfg_knob *k, void *base)
{
	*(int *)((char *)base + k->offset) = CFG_UNSET_INT;
}

/* An out-of-range number is refused here already when it does not fit the
 * int field; the finish step checks the row's own range. */
static int cfg_int_read(struct cfg_ctx *ctx, const struct cfg_knob *k,
			void *base, json_t *v, const char *path)
{
	if (!json_is_integer(v))
		return cfg_range_fail(ctx, k, path);
	json_int_t x = json_integer_value(v);
	if (x <= CFG_UNSET_INT || x > INT_MAX)
		return cfg_range_fail(ctx, k, path);
	*(int *)((char *)base + k->offset) = (int)x;
	return 0;
}

/* A required row still UNSET is a missing key; otherwise UNSET takes the
 * default. */
static int cfg_int_finish(struct cfg_ctx *ctx, const struct cfg_knob *k,
			  void *base, const char *parent)
{
	int *p = (int *)((char *)base + k->offset);
	if (*p == CFG_UNSET_INT && k->required)
		return cfg__fail(ctx, -ST_INVAL, parent, "missing key \"%s\"",
				k->path);
	if (*p == CFG_UNSET_INT)
		*p = (int)k->def;
	return cfg_range_check(ctx, k, *p, parent);
}

/* An optional int whose absence is a value outside the range ("threads":
 * absent -> 0, "one per core"): the default skips the range check. */
static int cfg_int_opt_finish(struct cfg_ctx *ctx, const struct cfg_knob *k,
			      void *base, const char *parent)
{
	int *p = (int *)((char *)base + k->offset);
	if (*p == CFG_UNSET_INT) {
		*p = (int)k->def;
		return 0;
	}
	return cfg_range_check(ctx, k, *p, parent);
}

static void cfg_int64_unset(const struct cfg_knob *k, void *base)
{
	*(int64_t *)((char *)base + k->offset) = CFG_UNSET_INT64;
}

static int cfg_int64_read(struct cfg_ctx *ctx, const struct cfg_knob *k,
			  void *base, json_t *v, const char *path)
{
	if (!json_is_integer(v) || json_integer_value(v) == CFG_UNSET_INT64)
		return cfg_range_fail(ctx, k, path);
	*(int64_t *)((char *)base + k->offset) = json_integer_value(v);
	return 0;
}

static int cfg_int64_finish(struct cfg_ctx *ctx, const struct cfg_knob *k,
			    void *base, const char *parent)
{
	int64_t *p = (int64_t *)((char *)base + k->offset);
	if (*p == CFG_UNSET_INT64)
		*p = k->def;
	return cfg_range_check(ctx, k, *p, parent);
}

static int cfg_bool_read(struct cfg_ctx *ctx, const struct cfg_knob *k,
			 void *base, json_t *v, const char *path)
{
	if (!json_is_boolean(v))
		return cfg__fail(ctx, -ST_INVAL, path, "expected true or false");
	*(int *)((char *)base + k->offset) = json_is_true(v);
	return 0;
}

static int cfg_price_read(struct cfg_ctx *ctx, const struct cfg_knob *k, void *base, json_t *v,
			  const char *path)
{
	double x = json_number_value(v);
	if (!json_is_number(v) || !(x >= 0 && x <= 1e9))
		return cfg__fail(ctx, -ST_INVAL, path, "expected a number 0..1e9");
	*(double *)((char *)base + k->offset) = x;
	return 0;
}

static int cfg_none_finish(struct cfg_ctx *ctx, const struct cfg_knob *k, void *base,
			   const char *parent)
{
	(void)ctx, (void)k, (void)base, (void)parent;
	return 0;
}

/* The zeroed struct holds the default, 0. */
const struct cfg_type cfg__type_price = {
	"number", CFG_SHOW_TEXT, NULL, NULL, cfg_price_read, cfg_none_finish,
};

const struct cfg_type cfg__type_int = {
	"integer", CFG_SHOW_INT, "", cfg_int_unset, cfg_int_read,
	cfg_int_finish,
};
/* --help shows the row's def_str as the default ("one per core"). */
const struct cfg_type cfg__type_int_opt = {
	"integer", CFG_SHOW_TEXT, "", cfg_int_unset, cfg_int_read,
	cfg_int_opt_finish,
};
const struct cfg_type cfg__type_int64 = {
	"integer", CFG_SHOW_INT, "", cfg_int64_unset, cfg_int64_read,
	cfg_int64_finish,
};
/* A bool is an int that is UNSET, 0 or 1; the int range check covers it. */
const struct cfg_type cfg__type_bool = {
	"boolean", CFG_SHOW_BOOL, NULL, cfg_int_unset, cfg_bool_read,
	cfg_int_finish,
};

/* ---- strings ---------------------------------------------------------- */

/* cfg_required_finish - a pointer field still NULL is a missing key. */
static int cfg_required_finish(struct cfg_ctx *ctx, const struct cfg_knob *k,
			       void *base, const char *parent)
{
	if (*(void **)((char *)base + k->offset))
		return 0;
	return cfg__fail(ctx, -ST_INVAL, parent, "missing key \"%s\"", k->path);
}

/* cfg_str_store - a new copy of v's text in the char * field. */
static int cfg_str_store(struct cfg_ctx *ctx, const struct cfg_knob *k,
			 void *base, json_t *v)
{
	char *s = mem_strdup(json_string_value(v));
	if (!s)
		return cfg__nomem(ctx);
	*(char **)((char *)base + k->offset) = s;
	return 0;
}

/* A string of min..max bytes (jansson already refused NUL bytes). */
static int cfg_str_read(struct cfg_ctx *ctx, const struct cfg_knob *k,
			void *base, json_t *v, const char *path)
{
	size_t len = json_string_length(v);
	if (!json_is_string(v) || len < (size_t)k->min || len > (size_t)k->max)
		return cfg__fail(ctx, -ST_INVAL, path,
				"expected a non-empty string of at most %lld bytes",
				(long long)k->max);
	return cfg_str_store(ctx, k, base, v);
}

/* cfg_name_is_valid - s matches [A-Za-z0-9._-]{min,max}. */
static bool cfg_name_is_valid(const struct cfg_knob *k, const char *s,
			      size_t len)
{
	if (len < (size_t)k->min || len > (size_t)k->max)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '.' || c == '_' ||
			  c == '-';
		if (!ok)
			return false;
	}
	return true;
}

static int cfg_name_read(struct cfg_ctx *ctx, const struct cfg_knob *k,
			 void *base, json_t *v, const char *path)
{
	if (!json_is_string(v) ||
	    !cfg_name_is_valid(k, json_string_value(v), json_string_length(v)))
		return cfg__fail(ctx, -ST_INVAL, path,
				"expected a name of %lld..%lld characters from "
				"[A-Za-z0-9._-]", (long long)k->min,
				(long long)k->max);
	return cfg_str_store(ctx, k, base, v);
}

const struct cfg_type cfg__type_str = {
	"string", CFG_SHOW_TEXT, " bytes", NULL, cfg_str_read,
	cfg_required_finish,
};
/* An optional string: absent stays NULL (the user of the field picks). */
static int cfg_str_opt_finish(struct cfg_ctx *ctx, const struct cfg_knob *k, void *base,
			      const char *parent)
{
	(void)ctx;
	(void)k;
	(void)base;
	(void)parent;
	return 0;
}

const struct cfg_type cfg__type_str_opt = {
	"string", CFG_SHOW_TEXT, " bytes", NULL, cfg_str_read, cfg_str_opt_finish,
};
const struct cfg_type cfg__type_name = {
	"string", CFG_SHOW_TEXT, " bytes", NULL, cfg_name_read,
	cfg_required_finish,
};

/* ---- model format ----------------------------------------------------- */

static const char *const cfg_format_names[] = {
	[CFG_MODEL_FORMAT_AUTO] = "auto",
	[CFG_MODEL_FORMAT_GGUF] = "gguf",
	[CFG_MODEL_FORMAT_CT2] = "ct2",
};
static_assert(CFG_N(cfg_format_names) == CFG_MODEL_FORMAT_COUNT,
	      "cfg_format_names must name every format");

const char *cfg_model_format_str(enum cfg_model_format f)
{
	if ((unsigned)f >= CFG_MODEL_FORMAT_COUNT)
		return "unknown";
	return cfg_format_names[f];
}

/* UNSET is CFG_MODEL_FORMAT_COUNT; "auto" is what an absent key means, so
 * the file may only name a real format. */
static void cfg_format_unset(const struct cfg_knob *k, void *base)
{
	*(enum cfg_model_format *)((char *)base + k->offset) =
		CFG_MODEL_FORMAT_COUNT;
}

static int cfg_format_read(struct cfg_ctx *ctx, const struct cfg_knob *k,
			   void *base, json_t *v, const char *path)
{
	const char *s = json_string_value(v); /* NULL when not a string */
	enum cfg_model_format f = CFG_MODEL_FORMAT_AUTO;
	for (int i = CFG_MODEL_FORMAT_AUTO + 1; i < CFG_MODEL_FORMAT_COUNT; i++)
		if (s && strcmp(s, cfg_format_names[i]) == 0)
			f = (enum cfg_model_format)i;
	if (f == CFG_MODEL_FORMAT_AUTO)
		return cfg__fail(ctx, -ST_INVAL, path,
				"expected \"gguf\" or \"ct2\"");
	*(enum cfg_model_format *)((char *)base + k->offset) = f;
	return 0;
}

static int cfg_format_finish(struct cfg_ctx *ctx, const struct cfg_knob *k,
			     void *base, const char *parent)
{
	(void)ctx;
	(void)parent;
	enum cfg_model_format *p =
		(enum cfg_model_format *)((char *)base + k->offset);
	if (*p == CFG_MODEL_FORMAT_COUNT)
		*p = CFG_MODEL_FORMAT_AUTO;
	return 0;
}

const struct cfg_type cfg__type_format = {
	"string", CFG_SHOW_TEXT, NULL, cfg_format_unset, cfg_format_read,
	cfg_format_finish,
};

/* ---- compute type ------------------------------------------------------ */

static const char *const cfg_compute_names[] = {
	[CFG_COMPUTE_DEFAULT] = "default",
	[CFG_COMPUTE_FLOAT32] = "float32",
	[CFG_COMPUTE_INT8] = "int8",
	[CFG_COMPUTE_INT8_FLOAT32] = "int8_float32",
	[CFG_COMPUTE_BFLOAT16] = "bfloat16",
	[CFG_COMPUTE_INT8_BFLOAT16] = "int8_bfloat16",
};
static_assert(CFG_N(cfg_compute_names) == CFG_COMPUTE_COUNT,
	      "cfg_compute_names must name every compute type");

const char *cfg_compute_type_str(enum cfg_compute_type c)
{
	if ((unsigned)c >= CFG_COMPUTE_COUNT)
		return "unknown";
	return cfg_compute_names[c];
}

int cfg_compute_type_parse(const char *s)
{
	for (int i = 0; s && i < CFG_COMPUTE_COUNT; i++)
		if (strcmp(s, cfg_compute_names[i]) == 0)
			return i;
	return -1;
}

/* An absent key is "default" (the zero value): nothing to finish. */
static void cfg_compute_unset(const struct cfg_knob *k, void *base)
{
	*(enum cfg_compute_type *)((char *)base + k->offset) = CFG_COMPUTE_DEFAULT;
}

static int cfg_compute_read(struct cfg_ctx *ctx, const struct cfg_knob *k, void *base,
			    json_t *v, const char *path)
{
	int c = cfg_compute_type_parse(json_string_value(v)); /* NULL when not a string */
	if (c < 0)
		return cfg__fail(ctx, -ST_INVAL, path,
				"expected \"default\", \"float32\", \"int8\", \"int8_float32\", "
				"\"bfloat16\" or \"int8_bfloat16\"");
	*(enum cfg_compute_type *)((char *)base + k->offset) = (enum cfg_compute_type)c;
	return 0;
}

const struct cfg_type cfg__type_compute = {
	"string", CFG_SHOW_TEXT, NULL, cfg_compute_unset, cfg_compute_read, NULL,
};

/* ---- listen ----------------------------------------------------------- */

/* cfg_port_parse - 1 to 5 decimal digits, 0..65535; -1 when not. */
static long cfg_port_parse(const char *s)
{
	size_t n = strlen(s);
	if (n < 1 || n > 5 || strspn(s, "0123456789") != n)
		return -1;
	long port = strtol(s, NULL, 10);
	return port <= 65535 ? port : -1;
}

/* cfg_listen_parse - split "HOST:PORT" (HOST a numeric IPv4 address, or
 * "localhost" meaning 127.0.0.1) or "[IPv6]:PORT" into a new host string
 * without brackets and a port. No DNS: start-up must not block on it. */
static int cfg_listen_parse(struct cfg_ctx *ctx, char **host_out, int *port_out,
			    const char *s, const char *path)
{
	bool v6 = s[0] == '[';
	const char *host = s + v6;
	const char *end = v6 ? strchr(host, ']') : strchr(host, ':');
	if (!end || (v6 && end[1] != ':'))
		return cfg__fail(ctx, -ST_INVAL, path, "expected \"HOST:PORT\"");
	size_t hlen = (size_t)(end - host);
	char buf[INET6_ADDRSTRLEN];
	unsigned char addr[sizeof(struct in6_addr)];
	if (hlen == 0 || hlen >= sizeof(buf))
		return cfg__fail(ctx, -ST_INVAL, path, "expected \"HOST:PORT\"");
	memcpy(buf, host, hlen);
	buf[hlen] = '\0';
	if (!v6 && strcmp(buf, "localhost") == 0) /* as --listen accepts it */
		memcpy(buf, "127.0.0.1", sizeof("127.0.0.1"));
	if (inet_pton(v6 ? AF_INET6 : AF_INET, buf, addr) != 1)
		return cfg__fail(ctx, -ST_INVAL, path, "expected \"HOST:PORT\"");
	long port = cfg_port_parse(end + 1 + v6);
	if (port < 0)
		return cfg__fail(ctx, -ST_INVAL, path,
				"expected \"HOST:PORT\" with PORT in 0..65535");
	*host_out = mem_strdup(buf);
	if (!*host_out)
		return cfg__nomem(ctx);
	*port_out = (int)port;
	return 0;
}

static int cfg_listen_read(struct cfg_ctx *ctx, const struct cfg_knob *k,
			   void *base, json_t *v, const char *path)
{
	(void)k;
	struct cfg *cfg = base;
	if (!json_is_string(v))
		return cfg__fail(ctx, -ST_INVAL, path, "expected \"HOST:PORT\"");
	return cfg_listen_parse(ctx, &cfg->listen_host, &cfg->listen_port, json_string_value(v),
				path);
}

static int cfg_listen_finish(struct cfg_ctx *ctx, const struct cfg_knob *k,
			     void *base, const char *parent)
{
	struct cfg *cfg = base;
	if (cfg->listen_host)
		return 0;
	char path[CFG_PATH_LEN];
	cfg__join(path, sizeof(path), parent, k->path);
	return cfg_listen_parse(ctx, &cfg->listen_host, &cfg->listen_port, k->def_str, path);
}

const struct cfg_type cfg__type_listen = {
	"string", CFG_SHOW_TEXT, NULL, NULL, cfg_listen_read,
	cfg_listen_finish,
};

/* grpc_listen: the same forms, or "" (no gRPC port; the default). */
static int cfg_grpc_listen_read(struct cfg_ctx *ctx, const struct cfg_knob *k,
				void *base, json_t *v, const char *path)
{
	(void)k;
	struct cfg *cfg = base;
	if (!json_is_string(v))
		return cfg__fail(ctx, -ST_INVAL, path, "expected \"HOST:PORT\" or \"\"");
	if (!json_string_length(v))
		return 0;
	return cfg_listen_parse(ctx, &cfg->grpc_host, &cfg->grpc_port, json_string_value(v), path);
}

int cfg_set_grpc_listen(struct cfg *cfg, const char *s, char *err, size_t errlen)
{
	struct cfg_ctx ctx = { 0 };
	ctx.err = err;
	ctx.errlen = errlen;
	char *host = NULL;
	int port = 0;
	if (*s) {
		int rc = cfg_listen_parse(&ctx, &host, &port, s, "INFERD_GRPC_LISTEN");
		if (rc)
			return rc;
	}
	mem_free(cfg->grpc_host);
	cfg->grpc_host = host;
	cfg->grpc_port = port;
	return 0;
}

const struct cfg_type cfg__type_grpc_listen = {
	"string", CFG_SHOW_TEXT, NULL, NULL, cfg_grpc_listen_read, NULL,
};

/* ---- api_keys --------------------------------------------------------- */

/* An array of at most max non-empty strings; absent means none. */
static int cfg_keys_read(struct cfg_ctx *ctx, const struct cfg_knob *k,
			 void *base, json_t *v, const char *path)
{
	struct cfg *cfg = base;
	size_t n = json_array_size(v);
	if (!json_is_array(v) || n > (size_t)k->max)
		return cfg__fail(ctx, -ST_INVAL, path,
				"expected an array of at most %lld non-empty "
				"strings", (long long)k->max);
	cfg->api_keys = mem_calloc(n, sizeof(*cfg->api_keys));
	if (!cfg->api_keys)
		return cfg__nomem(ctx);
	cfg->n_api_keys = n; /* NULL entries are fine for cfg_destroy */
	for (size_t i = 0; i < n; i++) {
		json_t *e = json_array_get(v, i);
		if (!json_is_string(e) || json_string_length(e) == 0) {
			char epath[CFG_PATH_LEN];
			snprintf(epath, sizeof(epath), "%s[%zu]", path, i);
			return cfg__fail(ctx, -ST_INVAL, epath,
					"expected a non-empty string");
		}
		cfg->api_keys[i] = mem_strdup(json_string_value(e));
		if (!cfg->api_keys[i])
			return cfg__nomem(ctx);
	}
	return 0;
}

const struct cfg_type cfg__type_keys = {
	"array of strings", CFG_SHOW_TEXT, " entries", NULL, cfg_keys_read,
	NULL,
};

/* ---- objects ---------------------------------------------------------- */

/* cfg__table_unset - mark every field of the table (and its sub-objects that
 * share the base, like "limits") UNSET. */
void cfg__table_unset(const struct cfg_knob *tab, size_t n, void *base)
{
	for (size_t i = 0; i < n; i++)
		if (tab[i].type->unset)
			tab[i].type->unset(&tab[i], base);
}

/* cfg__table_finish - defaults and range checks for every row; parent is
 * the JSON path of the object the rows belong to. */
int cfg__table_finish(struct cfg_ctx *ctx, const struct cfg_knob *tab,
		      size_t n, void *base, const char *parent)
{
	for (size_t i = 0; i < n; i++) {
		if (!tab[i].type->finish)
			continue;
		int rc = tab[i].type->finish(ctx, &tab[i], base, parent);
		if (rc)
			return rc;
	}
	return 0;
}

/* cfg__object_read - store every key of obj through its row in tab; a key
 * with no row is an error. path names obj ("" at the top). */
int cfg__object_read(struct cfg_ctx *ctx, const struct cfg_knob *tab,
		     size_t n, void *base, json_t *obj, const char *path)
{
	const char *key;
	json_t *v;
	json_object_foreach(obj, key, v) {
		const struct cfg_knob *k = NULL;
		for (size_t i = 0; i < n && !k; i++)
			if (strcmp(tab[i].path, key) == 0)
				k = &tab[i];
		if (!k) {
			char q[48];
			return cfg__fail(ctx, -ST_INVAL, path,
					"unknown key \"%s\"",
					cfg__quote(key, q, sizeof(q)));
		}
		char kpath[CFG_PATH_LEN];
		cfg__join(kpath, sizeof(kpath), path, key);
		int rc = k->type->read(ctx, k, base, v, kpath);
		if (rc)
			return rc;
	}
	return 0;
}

/* A nested object whose keys live in the same struct ("limits"). */
static void cfg_section_unset(const struct cfg_knob *k, void *base)
{
	cfg__table_unset(k->sub, k->n_sub, base);
}

static int cfg_section_read(struct cfg_ctx *ctx, const struct cfg_knob *k,
			    void *base, json_t *v, const char *path)
{
	if (!json_is_object(v))
		return cfg__fail(ctx, -ST_INVAL, path, "expected an object");
	return cfg__object_read(ctx, k->sub, k->n_sub, base, v, path);
}

static int cfg_section_finish(struct cfg_ctx *ctx, const struct cfg_knob *k,
			      void *base, const char *parent)
{
	char path[CFG_PATH_LEN];
	cfg__join(path, sizeof(path), parent, k->path);
	return cfg__table_finish(ctx, k->sub, k->n_sub, base, path);
}

const struct cfg_type cfg__type_section = {
	"object", CFG_SHOW_TEXT, NULL, cfg_section_unset, cfg_section_read,
	cfg_section_finish,
};

/* ---- replicas --------------------------------------------------------- */

/* "device" of a placement: a string of min..max printable ASCII bytes
 * without white space. Only the shape is checked here; devices/ parses
 * and validates the spec (and the cores it names) at start-up. */
static int cfg_device_read(struct cfg_ctx *ctx, const struct cfg_knob *k,
			   void *base, json_t *v, const char *path)
{
	size_t len = json_string_length(v);
	if (!json_is_string(v) || len < (size_t)k->min)
		return cfg__fail(ctx, -ST_INVAL, path,
				"expected a non-empty string");
	if (len > (size_t)k->max)
		return cfg__fail(ctx, -ST_INVAL, path,
				"expected a non-empty string of at most %lld bytes",
				(long long)k->max);
	const char *s = json_string_value(v);
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] >= 0x7f)
			return cfg__fail(ctx, -ST_INVAL, path,
					"expected a device spec without spaces, "
					"e.g. \"cpu:0-3\"");
	return cfg_str_store(ctx, k, base, v);
}

const struct cfg_type cfg__type_device = {
	"string", CFG_SHOW_TEXT, " bytes", NULL, cfg_device_read,
	cfg_required_finish,
};

/* cfg_placements_read - "replicas": [{"device": ..., "threads": ...}, ...]
 * (v, an array) into m->replicas through the row's items table. */
static int cfg_placements_read(struct cfg_ctx *ctx, const struct cfg_knob *k,
			       struct cfg_model *m, json_t *v, const char *path)
{
	size_t n = json_array_size(v);
	if (n < 1 || n > CFG_MAX_REPLICAS)
		return cfg__fail(ctx, -ST_INVAL, path,
				"expected an array of 1..%d placements",
				CFG_MAX_REPLICAS);
	m->replicas = mem_calloc(n, sizeof(*m->replicas));
	if (!m->replicas)
		return cfg__nomem(ctx);
	m->n_replicas = n; /* half-filled entries are fine for cfg_destroy */
	m->replica_count = 0;
	for (size_t i = 0; i < n; i++) {
		char epath[CFG_PATH_LEN];
		snprintf(epath, sizeof(epath), "%s[%zu]", path, i);
		json_t *e = json_array_get(v, i);
		if (!json_is_object(e))
			return cfg__fail(ctx, -ST_INVAL, epath, "expected an object");
		struct cfg_replica *r = &m->replicas[i];
		cfg__table_unset(k->items, k->n_items, r);
		int rc = cfg__object_read(ctx, k->items, k->n_items, r, e, epath);
		if (!rc)
			rc = cfg__table_finish(ctx, k->items, k->n_items, r, epath);
		if (rc)
			return rc;
	}
	return 0;
}

/* "replicas" in one of three forms: N, {"count": N} (the row's sub table,
 * whose "count" is the same replica_count field) or a list of placements
 * (the row's items table). An integer out of range gets the row's range
 * message; any other type the message naming all three forms. */
static void cfg_replicas_unset(const struct cfg_knob *k, void *base)
{
	struct cfg_model *m = base;
	cfg_int_unset(k, base);
	m->replicas = NULL;
	m->n_replicas = 0;
}

static int cfg_replicas_read(struct cfg_ctx *ctx, const struct cfg_knob *k,
			     void *base, json_t *v, const char *path)
{
	if (json_is_integer(v))
		return cfg_int_read(ctx, k, base, v, path); /* range: finish */
	if (json_is_array(v))
		return cfg_placements_read(ctx, k, base, v, path);
	if (!json_is_object(v))
		return cfg__fail(ctx, -ST_INVAL, path,
				"expected an integer >= %lld, {\"count\": N} or "
				"an array of placements", (long long)k->min);
	int rc = cfg__object_read(ctx, k->sub, k->n_sub, base, v, path);
	if (!rc)
		rc = cfg__table_finish(ctx, k->sub, k->n_sub, base, path);
	return rc;
}

static int cfg_replicas_finish(struct cfg_ctx *ctx, const struct cfg_knob *k,
			       void *base, const char *parent)
{
	struct cfg_model *m = base;
	if (m->n_replicas > 0)
		return 0; /* placements: replica_count is 0 */
	return cfg_int_finish(ctx, k, base, parent);
}

const struct cfg_type cfg__type_replicas = {
	"integer, object or array", CFG_SHOW_INT, "", cfg_replicas_unset,
	cfg_replicas_read, cfg_replicas_finish,
};

/* ---- models ----------------------------------------------------------- */

/* cfg_model_read - entry i of "models" (v) into cfg->models[i] through the
 * row's items table; names must differ from every earlier entry's. */
static int cfg_model_read(struct cfg_ctx *ctx, const struct cfg_knob *k,
			  struct cfg *cfg, size_t i, json_t *v)
{
	char path[CFG_PATH_LEN];
	snprintf(path, sizeof(path), "%s[%zu]", k->path, i);
	if (!json_is_object(v))
		return cfg__fail(ctx, -ST_INVAL, path, "expected an object");
	struct cfg_model *m = &cfg->models[i];
	cfg__table_unset(k->items, k->n_items, m);
	int rc = cfg__object_read(ctx, k->items, k->n_items, m, v, path);
	if (!rc)
		rc = cfg__table_finish(ctx, k->items, k->n_items, m, path);
	if (rc)
		return rc;
	for (size_t j = 0; j < i; j++) {
		if (strcmp(cfg->models[j].name, m->name) == 0) {
			char npath[CFG_PATH_LEN];
			cfg__join(npath, sizeof(npath), path, "name");
			return cfg__fail(ctx, -ST_INVAL, npath,
					"duplicate name \"%s\"", m->name);
		}
	}
	return 0;
}

static int cfg_models_read(struct cfg_ctx *ctx, const struct cfg_knob *k,
			   void *base, json_t *v, const char *path)
{
	struct cfg *cfg = base;
	size_t n = json_array_size(v);
	if (!json_is_array(v) || n < (size_t)k->min || n > (size_t)k->max)
		return cfg__fail(ctx, -ST_INVAL, path,
				"expected an array of %lld..%lld models",
				(long long)k->min, (long long)k->max);
	cfg->models = mem_calloc(n, sizeof(*cfg->models));
	if (!cfg->models)
		return cfg__nomem(ctx);
	cfg->n_models = n; /* half-filled entries are fine for cfg_destroy */
	for (size_t i = 0; i < n; i++) {
		int rc = cfg_model_read(ctx, k, cfg, i, json_array_get(v, i));
		if (rc)
			return rc;
	}
	return 0;
}

const struct cfg_type cfg__type_models = {
	"array of objects", CFG_SHOW_TEXT, " entries", NULL, cfg_models_read,
	cfg_required_finish,
};
