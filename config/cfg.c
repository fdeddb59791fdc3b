/* cfg.c - the configuration file: JSON (jansson) read through a declarative
 * table of knobs into a frozen struct cfg.
 *
 * Every knob is one row of cfg_knobs[] (the file's top level and "limits"),
 * cfg_model_knobs[] (one entry of "models") or the small tables below it
 * ("replicas" as {"count": N}, one placement of "replicas": [...]), in the
 * style of nginx's ngx_command_t: JSON path, type, offsetof() the field,
 * default, range, doc.
 * A type (struct cfg_type) knows how to mark its field UNSET, read it from
 * JSON, fill in the default and check the range, so loading is:
 *
 *   JSON text -> every field UNSET -> JSON values stored (type checked)
 *             -> defaults for fields still UNSET -> range checks -> frozen.
 *
 * Invariants: after a successful load no field is UNSET, every number lies
 * in its row's [min, max] (a placement's absent "threads" is 0), model names
 * are unique, and each model has either replica_count >= 1 and no
 * placements or replica_count 0 and 1..256 placements, each with a device.
 * cfg_help_print() walks the same tables, so --help, README.md and the
 * schema (kept in step by hand and by tests) cannot drift from the parser
 * silently.
 *
 * Errors: one line "PATH: what was expected" in the caller's buffer, the
 * status as the return value. All allocation goes through common/mem.h.
 */
#include "config/cfg.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/mem.h"
#include "common/sched_defaults.h"
#include "common/st.h"

#define CFG_MAX_INPUT_BYTES (1024 * 1024) /* larger files are refused */
#define CFG_MAX_MODELS 256                /* ceiling on "models" entries */
#define CFG_MAX_API_KEYS 1024             /* ceiling on "api_keys" entries */
#define CFG_MAX_REPLICAS 256              /* ceiling on listed placements */
#define CFG_DEVICE_MAX 63                 /* device spec length in bytes */
#define CFG_NAME_MAX 64                   /* model name length in bytes */
#define CFG_PATH_LEN 96                   /* longest JSON path in a message */
#define CFG_DAY_MS 86400000               /* one day, the timeout ceiling */

#define CFG_UNSET_INT INT_MIN             /* int field not given in JSON */
#define CFG_UNSET_INT64 INT64_MIN         /* int64_t field not given */

/* One load in progress: where the error line goes. */
struct cfg_ctx {
	char *err;     /* caller's buffer, may be NULL */
	size_t errlen; /* its size in bytes, may be 0 */
};

struct cfg_knob;

/* How --help shows a knob's default. */
enum cfg_show {
	CFG_SHOW_TEXT = 0, /* def_str, or "required" when the row says so */
	CFG_SHOW_INT,      /* def as a decimal number */
	CFG_SHOW_BOOL,     /* def as true / false */
};

/* How one kind of knob is marked UNSET, read, defaulted and checked. */
struct cfg_type {
	const char *name;   /* for --help: "integer", "string", ... */
	enum cfg_show show; /* how --help prints the default */
	const char *unit;   /* --help shows min..max with it; NULL: no range */
	/* store the UNSET sentinel; NULL: the zeroed struct is already UNSET */
	void (*unset)(const struct cfg_knob *k, void *base);
	/* type-check v and store it; path names v in error messages */
	int (*read)(struct cfg_ctx *ctx, const struct cfg_knob *k, void *base,
		    json_t *v, const char *path);
	/* fill the default if still UNSET, then check the range; parent is
	 * the path of the object holding the knob ("" at the top) */
	int (*finish)(struct cfg_ctx *ctx, const struct cfg_knob *k, void *base,
		      const char *parent);
};

/* One row of the declarative table (nginx ngx_command_t). */
struct cfg_knob {
	const char *path;            /* key, below the parent object */
	const struct cfg_type *type; /* how to read it */
	size_t offset;               /* offsetof() the field in the base struct */
	int64_t def;                 /* default of a number or boolean */
	int64_t min;                 /* smallest number, length or count */
	int64_t max;                 /* largest number, length or count */
	const char *def_str;         /* default of other types, for --help */
	bool required;               /* absent key is an error */
	const struct cfg_knob *sub;  /* object: its keys (--help: "PATH.KEY") */
	size_t n_sub;                /* rows in sub */
	const struct cfg_knob *items; /* array of objects: the keys of each
				       * entry (--help: "PATH[].KEY") */
	size_t n_items;              /* rows in items */
	const char *doc;             /* one line for --help */
};

#define CFG_N(a) (sizeof(a) / sizeof((a)[0]))

/* ---- errors ---------------------------------------------------------- */

/* cfg_fail - write "PATH: message" (or just the message when path is empty)
 * into the caller's buffer and return rc. */
static int cfg_fail(struct cfg_ctx *ctx, int rc, const char *path,
		    const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	rc = st_verrf(rc, ctx->err, ctx->errlen, path, fmt, ap);
	va_end(ap);
	return rc;
}

static int cfg_nomem(struct cfg_ctx *ctx)
{
	return cfg_fail(ctx, -ST_NOMEM, "", "out of memory");
}

/* cfg_quote - copy s into out (outlen >= 8) as printable ASCII, escaping
 * quotes, backslashes and other bytes, cut with "..." when too long; keeps
 * error messages one line whatever the input holds. */
static const char *cfg_quote(const char *s, char *out, size_t outlen)
{
	size_t o = 0;
	for (; *s && o + 8 < outlen; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			out[o++] = '\\';
			out[o++] = (char)c;
		} else if (c < 0x20 || c >= 0x7f) {
			o += (size_t)snprintf(out + o, outlen - o, "\\x%02x", c);
		} else {
			out[o++] = (char)c;
		}
	}
	if (*s)
		o += (size_t)snprintf(out + o, outlen - o, "...");
	out[o] = '\0';
	return out;
}

/* cfg_join - path of key below parent: "limits.max_body_bytes", "listen".
 * Paths are built from table keys and array indexes only, so they fit;
 * a longer one would be cut, never overflow. */
static void cfg_join(char *out, size_t outlen, const char *parent,
		     const char *key)
{
	int n = parent[0] ? snprintf(out, outlen, "%s.%s", parent, key) :
			    snprintf(out, outlen, "%s", key);
	assert(n >= 0 && (size_t)n < outlen);
	(void)n;
}

/* ---- numbers and booleans -------------------------------------------- */

/* cfg_range_fail - "expected an integer >= MIN" when the row has no real
 * ceiling (INT_MAX / INT64_MAX), else "expected an integer in MIN..MAX". */
static int cfg_range_fail(struct cfg_ctx *ctx, const struct cfg_knob *k,
			  const char *path)
{
	if (k->max == INT_MAX || k->max == INT64_MAX)
		return cfg_fail(ctx, -ST_INVAL, path,
				"expected an integer >= %lld", (long long)k->min);
	return cfg_fail(ctx, -ST_INVAL, path, "expected an integer in %lld..%lld",
			(long long)k->min, (long long)k->max);
}

/* cfg_range_check - the range check of the finish step; x is the value. */
static int cfg_range_check(struct cfg_ctx *ctx, const struct cfg_knob *k,
			   int64_t x, const char *parent)
{
	if (x >= k->min && x <= k->max)
		return 0;
	char path[CFG_PATH_LEN];
	cfg_join(path, sizeof(path), parent, k->path);
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
		return cfg_fail(ctx, -ST_INVAL, parent, "missing key \"%s\"",
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
		return cfg_fail(ctx, -ST_INVAL, path, "expected true or false");
	*(int *)((char *)base + k->offset) = json_is_true(v);
	return 0;
}

static const struct cfg_type cfg_type_int = {
	"integer", CFG_SHOW_INT, "", cfg_int_unset, cfg_int_read,
	cfg_int_finish,
};
/* --help shows the row's def_str as the default ("one per core"). */
static const struct cfg_type cfg_type_int_opt = {
	"integer", CFG_SHOW_TEXT, "", cfg_int_unset, cfg_int_read,
	cfg_int_opt_finish,
};
static const struct cfg_type cfg_type_int64 = {
	"integer", CFG_SHOW_INT, "", cfg_int64_unset, cfg_int64_read,
	cfg_int64_finish,
};
/* A bool is an int that is UNSET, 0 or 1; the int range check covers it. */
static const struct cfg_type cfg_type_bool = {
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
	return cfg_fail(ctx, -ST_INVAL, parent, "missing key \"%s\"", k->path);
}

/* cfg_str_store - a new copy of v's text in the char * field. */
static int cfg_str_store(struct cfg_ctx *ctx, const struct cfg_knob *k,
			 void *base, json_t *v)
{
	char *s = mem_strdup(json_string_value(v));
	if (!s)
		return cfg_nomem(ctx);
	*(char **)((char *)base + k->offset) = s;
	return 0;
}

/* A string of min..max bytes (jansson already refused NUL bytes). */
static int cfg_str_read(struct cfg_ctx *ctx, const struct cfg_knob *k,
			void *base, json_t *v, const char *path)
{
	size_t len = json_string_length(v);
	if (!json_is_string(v) || len < (size_t)k->min || len > (size_t)k->max)
		return cfg_fail(ctx, -ST_INVAL, path,
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
		return cfg_fail(ctx, -ST_INVAL, path,
				"expected a name of %lld..%lld characters from "
				"[A-Za-z0-9._-]", (long long)k->min,
				(long long)k->max);
	return cfg_str_store(ctx, k, base, v);
}

static const struct cfg_type cfg_type_str = {
	"string", CFG_SHOW_TEXT, " bytes", NULL, cfg_str_read,
	cfg_required_finish,
};
static const struct cfg_type cfg_type_name = {
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
		return cfg_fail(ctx, -ST_INVAL, path,
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

static const struct cfg_type cfg_type_format = {
	"string", CFG_SHOW_TEXT, NULL, cfg_format_unset, cfg_format_read,
	cfg_format_finish,
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
		return cfg_fail(ctx, -ST_INVAL, path, "expected \"HOST:PORT\"");
	size_t hlen = (size_t)(end - host);
	char buf[INET6_ADDRSTRLEN];
	unsigned char addr[sizeof(struct in6_addr)];
	if (hlen == 0 || hlen >= sizeof(buf))
		return cfg_fail(ctx, -ST_INVAL, path, "expected \"HOST:PORT\"");
	memcpy(buf, host, hlen);
	buf[hlen] = '\0';
	if (!v6 && strcmp(buf, "localhost") == 0) /* as --listen accepts it */
		memcpy(buf, "127.0.0.1", sizeof("127.0.0.1"));
	if (inet_pton(v6 ? AF_INET6 : AF_INET, buf, addr) != 1)
		return cfg_fail(ctx, -ST_INVAL, path, "expected \"HOST:PORT\"");
	long port = cfg_port_parse(end + 1 + v6);
	if (port < 0)
		return cfg_fail(ctx, -ST_INVAL, path,
				"expected \"HOST:PORT\" with PORT in 0..65535");
	*host_out = mem_strdup(buf);
	if (!*host_out)
		return cfg_nomem(ctx);
	*port_out = (int)port;
	return 0;
}

static int cfg_listen_read(struct cfg_ctx *ctx, const struct cfg_knob *k,
			   void *base, json_t *v, const char *path)
{
	(void)k;
	struct cfg *cfg = base;
	if (!json_is_string(v))
		return cfg_fail(ctx, -ST_INVAL, path, "expected \"HOST:PORT\"");
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
	cfg_join(path, sizeof(path), parent, k->path);
	return cfg_listen_parse(ctx, &cfg->listen_host, &cfg->listen_port, k->def_str, path);
}

static const struct cfg_type cfg_type_listen = {
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
		return cfg_fail(ctx, -ST_INVAL, path, "expected \"HOST:PORT\" or \"\"");
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

static const struct cfg_type cfg_type_grpc_listen = {
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
		return cfg_fail(ctx, -ST_INVAL, path,
				"expected an array of at most %lld non-empty "
				"strings", (long long)k->max);
	cfg->api_keys = mem_calloc(n, sizeof(*cfg->api_keys));
	if (!cfg->api_keys)
		return cfg_nomem(ctx);
	cfg->n_api_keys = n; /* NULL entries are fine for cfg_destroy */
	for (size_t i = 0; i < n; i++) {
		json_t *e = json_array_get(v, i);
		if (!json_is_string(e) || json_string_length(e) == 0) {
			char epath[CFG_PATH_LEN];
			snprintf(epath, sizeof(epath), "%s[%zu]", path, i);
			return cfg_fail(ctx, -ST_INVAL, epath,
					"expected a non-empty string");
		}
		cfg->api_keys[i] = mem_strdup(json_string_value(e));
		if (!cfg->api_keys[i])
			return cfg_nomem(ctx);
	}
	return 0;
}

static const struct cfg_type cfg_type_keys = {
	"array of strings", CFG_SHOW_TEXT, " entries", NULL, cfg_keys_read,
	NULL,
};

/* ---- objects ---------------------------------------------------------- */

/* cfg_table_unset - mark every field of the table (and its sub-objects that
 * share the base, like "limits") UNSET. */
static void cfg_table_unset(const struct cfg_knob *tab, size_t n, void *base)
{
	for (size_t i = 0; i < n; i++)
		if (tab[i].type->unset)
			tab[i].type->unset(&tab[i], base);
}

/* cfg_table_finish - defaults and range checks for every row; parent is
 * the JSON path of the object the rows belong to. */
static int cfg_table_finish(struct cfg_ctx *ctx, const struct cfg_knob *tab,
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

/* cfg_object_read - store every key of obj through its row in tab; a key
 * with no row is an error. path names obj ("" at the top). */
static int cfg_object_read(struct cfg_ctx *ctx, const struct cfg_knob *tab,
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
			return cfg_fail(ctx, -ST_INVAL, path,
					"unknown key \"%s\"",
					cfg_quote(key, q, sizeof(q)));
		}
		char kpath[CFG_PATH_LEN];
		cfg_join(kpath, sizeof(kpath), path, key);
		int rc = k->type->read(ctx, k, base, v, kpath);
		if (rc)
			return rc;
	}
	return 0;
}

/* A nested object whose keys live in the same struct ("limits"). */
static void cfg_section_unset(const struct cfg_knob *k, void *base)
{
	cfg_table_unset(k->sub, k->n_sub, base);
}

static int cfg_section_read(struct cfg_ctx *ctx, const struct cfg_knob *k,
			    void *base, json_t *v, const char *path)
{
	if (!json_is_object(v))
		return cfg_fail(ctx, -ST_INVAL, path, "expected an object");
	return cfg_object_read(ctx, k->sub, k->n_sub, base, v, path);
}

static int cfg_section_finish(struct cfg_ctx *ctx, const struct cfg_knob *k,
			      void *base, const char *parent)
{
	char path[CFG_PATH_LEN];
	cfg_join(path, sizeof(path), parent, k->path);
	return cfg_table_finish(ctx, k->sub, k->n_sub, base, path);
}

static const struct cfg_type cfg_type_section = {
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
		return cfg_fail(ctx, -ST_INVAL, path,
				"expected a non-empty string");
	if (len > (size_t)k->max)
		return cfg_fail(ctx, -ST_INVAL, path,
				"expected a non-empty string of at most %lld bytes",
				(long long)k->max);
	const char *s = json_string_value(v);
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] >= 0x7f)
			return cfg_fail(ctx, -ST_INVAL, path,
					"expected a device spec without spaces, "
					"e.g. \"cpu:0-3\"");
	return cfg_str_store(ctx, k, base, v);
}

static const struct cfg_type cfg_type_device = {
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
		return cfg_fail(ctx, -ST_INVAL, path,
				"expected an array of 1..%d placements",
				CFG_MAX_REPLICAS);
	m->replicas = mem_calloc(n, sizeof(*m->replicas));
	if (!m->replicas)
		return cfg_nomem(ctx);
	m->n_replicas = n; /* half-filled entries are fine for cfg_destroy */
	m->replica_count = 0;
	for (size_t i = 0; i < n; i++) {
		char epath[CFG_PATH_LEN];
		snprintf(epath, sizeof(epath), "%s[%zu]", path, i);
		json_t *e = json_array_get(v, i);
		if (!json_is_object(e))
			return cfg_fail(ctx, -ST_INVAL, epath, "expected an object");
		struct cfg_replica *r = &m->replicas[i];
		cfg_table_unset(k->items, k->n_items, r);
		int rc = cfg_object_read(ctx, k->items, k->n_items, r, e, epath);
		if (!rc)
			rc = cfg_table_finish(ctx, k->items, k->n_items, r, epath);
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
		return cfg_fail(ctx, -ST_INVAL, path,
				"expected an integer >= %lld, {\"count\": N} or "
				"an array of placements", (long long)k->min);
	int rc = cfg_object_read(ctx, k->sub, k->n_sub, base, v, path);
	if (!rc)
		rc = cfg_table_finish(ctx, k->sub, k->n_sub, base, path);
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

static const struct cfg_type cfg_type_replicas = {
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
		return cfg_fail(ctx, -ST_INVAL, path, "expected an object");
	struct cfg_model *m = &cfg->models[i];
	cfg_table_unset(k->items, k->n_items, m);
	int rc = cfg_object_read(ctx, k->items, k->n_items, m, v, path);
	if (!rc)
		rc = cfg_table_finish(ctx, k->items, k->n_items, m, path);
	if (rc)
		return rc;
	for (size_t j = 0; j < i; j++) {
		if (strcmp(cfg->models[j].name, m->name) == 0) {
			char npath[CFG_PATH_LEN];
			cfg_join(npath, sizeof(npath), path, "name");
			return cfg_fail(ctx, -ST_INVAL, npath,
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
		return cfg_fail(ctx, -ST_INVAL, path,
				"expected an array of %lld..%lld models",
				(long long)k->min, (long long)k->max);
	cfg->models = mem_calloc(n, sizeof(*cfg->models));
	if (!cfg->models)
		return cfg_nomem(ctx);
	cfg->n_models = n; /* half-filled entries are fine for cfg_destroy */
	for (size_t i = 0; i < n; i++) {
		int rc = cfg_model_read(ctx, k, cfg, i, json_array_get(v, i));
		if (rc)
			return rc;
	}
	return 0;
}

static const struct cfg_type cfg_type_models = {
	"array of objects", CFG_SHOW_TEXT, " entries", NULL, cfg_models_read,
	cfg_required_finish,
};

/* ---- the tables ------------------------------------------------------- */

/* "replicas" as an object: {"count": N}; offsets into struct cfg_model. */
static const struct cfg_knob cfg_replicas_count_knobs[] = {
	{ .path = "count", .type = &cfg_type_int,
	  .offset = offsetof(struct cfg_model, replica_count), .min = 1,
	  .max = INT_MAX, .required = true,
	  .doc = "replicas spread over the available cores, as \"replicas\": N" },
};

/* One placement of "replicas": [...]; offsets into struct cfg_replica. */
static const struct cfg_knob cfg_replica_knobs[] = {
	{ .path = "device", .type = &cfg_type_device,
	  .offset = offsetof(struct cfg_replica, device), .min = 1,
	  .max = CFG_DEVICE_MAX, .required = true,
	  .doc = "cores the replica runs on: \"cpu\" (all), \"cpu:N\", "
		 "\"cpu:A-B\" or a list \"cpu:0,2-3\"; checked at start-up" },
	{ .path = "threads", .type = &cfg_type_int_opt,
	  .offset = offsetof(struct cfg_replica, threads), .def = 0, .min = 1,
	  .max = 1024, .def_str = "one per core of the device",
	  .doc = "compute threads of the replica" },
};

/* Keys of one "models" entry; offsets into struct cfg_model. */
static const struct cfg_knob cfg_model_knobs[] = {
	{ .path = "name", .type = &cfg_type_name,
	  .offset = offsetof(struct cfg_model, name), .min = 1,
	  .max = CFG_NAME_MAX, .required = true,
	  .doc = "unique model id used in requests; characters [A-Za-z0-9._-]" },
	{ .path = "path", .type = &cfg_type_str,
	  .offset = offsetof(struct cfg_model, path), .min = 1, .max = PATH_MAX,
	  .required = true,
	  .doc = "GGUF file or CTranslate2 folder, relative to the working "
		 "directory" },
	{ .path = "format", .type = &cfg_type_format,
	  .offset = offsetof(struct cfg_model, format), .def_str = "auto",
	  .doc = "\"gguf\" or \"ct2\"; absent: decided from the path" },
	{ .path = "replicas", .type = &cfg_type_replicas,
	  .offset = offsetof(struct cfg_model, replica_count), .def = ST_SCHED_DEF_REPLICAS,
	  .min = 1, .max = INT_MAX, .sub = cfg_replicas_count_knobs,
	  .n_sub = CFG_N(cfg_replicas_count_knobs), .items = cfg_replica_knobs,
	  .n_items = CFG_N(cfg_replica_knobs),
	  .doc = "copies of the model serving in parallel: N or {\"count\": N} "
		 "(N replicas spread over the available cores), or a list of "
		 "placements [{\"device\": \"cpu:0-3\", \"threads\": 4}, ...] "
		 "(keys below); models given the same cores share them" },
	{ .path = "max_batch_size", .type = &cfg_type_int,
	  .offset = offsetof(struct cfg_model, max_batch_size), .def = ST_SCHED_DEF_MAX_BATCH_SIZE,
	  .min = 1, .max = 256,
	  .doc = "transcription: audio windows per encoder batch and sequences "
		 "per decoder step" },
	{ .path = "max_queue_delay_ms", .type = &cfg_type_int,
	  .offset = offsetof(struct cfg_model, max_queue_delay_ms),
	  .def = ST_SCHED_DEF_MAX_QUEUE_DELAY_MS,
	  .min = 0, .max = 60000,
	  .doc = "transcription: how long an idle replica waits for a batch to fill" },
	{ .path = "max_queue_size", .type = &cfg_type_int,
	  .offset = offsetof(struct cfg_model, max_queue_size), .def = ST_SCHED_DEF_MAX_QUEUE_SIZE,
	  .min = 1, .max = 1000000,
	  .doc = "client requests waiting to start (n choices count once); past it 429" },
	{ .path = "max_num_seqs", .type = &cfg_type_int,
	  .offset = offsetof(struct cfg_model, max_num_seqs), .def = ST_SCHED_DEF_MAX_NUM_SEQS,
	  .min = 1, .max = 256,
	  .doc = "generation: sequences in the running batch" },
	{ .path = "max_batch_tokens", .type = &cfg_type_int,
	  .offset = offsetof(struct cfg_model, max_batch_tokens),
	  .def = ST_SCHED_DEF_MAX_BATCH_TOKENS,
	  .min = 16, .max = 65536,
	  .doc = "generation: most tokens in one forward pass" },
	{ .path = "timeout_ms", .type = &cfg_type_int,
	  .offset = offsetof(struct cfg_model, timeout_ms), .def = ST_SCHED_DEF_TIMEOUT_MS, .min = 0,
	  .max = CFG_DAY_MS,
	  .doc = "request deadline, 504 past it; 0 = none; Inferd-Timeout-Ms may shorten it" },
};

/* Keys of "limits"; offsets into struct cfg. */
static const struct cfg_knob cfg_limit_knobs[] = {
	{ .path = "max_connections", .type = &cfg_type_int,
	  .offset = offsetof(struct cfg, max_connections), .def = 1024,
	  .min = 1, .max = 1048576,
	  .doc = "most client connections open at once" },
	{ .path = "max_header_bytes", .type = &cfg_type_int64,
	  .offset = offsetof(struct cfg, max_header_bytes), .def = 16384,
	  .min = 1024, .max = 1048576,
	  .doc = "most bytes of a request line plus its headers" },
	{ .path = "max_body_bytes", .type = &cfg_type_int64,
	  .offset = offsetof(struct cfg, max_body_bytes), .def = 104857600,
	  .min = 1024, .max = INT64_C(17179869184),
	  .doc = "most bytes of a request body, also after decompression" },
	{ .path = "header_timeout_ms", .type = &cfg_type_int,
	  .offset = offsetof(struct cfg, header_timeout_ms), .def = 10000,
	  .min = 1, .max = CFG_DAY_MS,
	  .doc = "time allowed to receive a request's headers (slowloris guard)" },
	{ .path = "idle_timeout_ms", .type = &cfg_type_int,
	  .offset = offsetof(struct cfg, idle_timeout_ms), .def = 60000,
	  .min = 1, .max = CFG_DAY_MS,
	  .doc = "how long a keep-alive connection may wait for a request" },
	{ .path = "body_timeout_ms", .type = &cfg_type_int,
	  .offset = offsetof(struct cfg, body_timeout_ms), .def = 60000,
	  .min = 1, .max = CFG_DAY_MS,
	  .doc = "longest wait between two reads of a request body" },
	{ .path = "drain_timeout_ms", .type = &cfg_type_int,
	  .offset = offsetof(struct cfg, drain_timeout_ms), .def = 30000,
	  .min = 1, .max = CFG_DAY_MS,
	  .doc = "on shutdown, how long in-flight requests may take to finish" },
};

/* The top level; offsets into struct cfg. */
static const struct cfg_knob cfg_knobs[] = {
	{ .path = "listen", .type = &cfg_type_listen,
	  .offset = offsetof(struct cfg, listen_host),
	  .def_str = "127.0.0.1:8080",
	  .doc = "address to serve on: IPV4:PORT, localhost:PORT or [IPV6]:PORT; "
		 "port 0 = any free port" },
	{ .path = "grpc_listen", .type = &cfg_type_grpc_listen,
	  .offset = offsetof(struct cfg, grpc_host),
	  .def_str = "\"\"",
	  .doc = "address of the gRPC (KServe v2 GRPCInferenceService, h2c) port, same "
		 "forms as listen; \"\" = none" },
	{ .path = "api_keys", .type = &cfg_type_keys,
	  .offset = offsetof(struct cfg, api_keys), .max = CFG_MAX_API_KEYS,
	  .def_str = "[]",
	  .doc = "accepted API keys (non-empty); INFERD_API_KEY adds one" },
	{ .path = "access_log", .type = &cfg_type_bool,
	  .offset = offsetof(struct cfg, access_log), .def = 1, .min = 0,
	  .max = 1, .doc = "log one line per request" },
	{ .path = "limits", .type = &cfg_type_section, .sub = cfg_limit_knobs,
	  .n_sub = CFG_N(cfg_limit_knobs),
	  .doc = "resource limits and timeouts, keys below" },
	{ .path = "models", .type = &cfg_type_models,
	  .offset = offsetof(struct cfg, models), .min = 1,
	  .max = CFG_MAX_MODELS, .required = true, .items = cfg_model_knobs,
	  .n_items = CFG_N(cfg_model_knobs),
	  .doc = "models to load and serve, entries below" },
};

/* ---- public ----------------------------------------------------------- */

/* cfg_build - root (any JSON value) into cfg (zeroed): the whole pipeline. */
static int cfg_build(struct cfg_ctx *ctx, struct cfg *cfg, json_t *root)
{
	if (!json_is_object(root))
		return cfg_fail(ctx, -ST_INVAL, "",
				"expected a JSON object at the top level");
	cfg_table_unset(cfg_knobs, CFG_N(cfg_knobs), cfg);
	int rc = cfg_object_read(ctx, cfg_knobs, CFG_N(cfg_knobs), cfg, root, "");
	if (rc)
		return rc;
	return cfg_table_finish(ctx, cfg_knobs, CFG_N(cfg_knobs), cfg, "");
}

int cfg_load_string(const char *json, size_t len, struct cfg **out, char *err,
		    size_t errlen)
{
	struct cfg_ctx ctx = { .err = err, .errlen = errlen };
	*out = NULL;
	if (err && errlen)
		err[0] = '\0';
	if (len > CFG_MAX_INPUT_BYTES)
		return cfg_fail(&ctx, -ST_TOOBIG, "",
				"expected at most %d bytes of JSON",
				CFG_MAX_INPUT_BYTES);
	json_error_t jerr;
	json_t *root = json_loadb(json ? json : "", json ? len : 0,
				  JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return cfg_fail(&ctx, -ST_INVAL, "", "line %d column %d: %s",
				jerr.line, jerr.column, jerr.text);
	int rc;
	struct cfg *cfg = mem_calloc(1, sizeof(*cfg));
	if (!cfg) {
		rc = cfg_nomem(&ctx);
		goto out_decref;
	}
	rc = cfg_build(&ctx, cfg, root);
	if (rc) {
		cfg_destroy(cfg);
		goto out_decref;
	}
	*out = cfg;
out_decref:
	json_decref(root);
	return rc;
}

/* cfg_fd_read - size bytes (the file's size) from fd into a new buffer;
 * a file that grew meanwhile is refused rather than cut. */
static int cfg_fd_read(struct cfg_ctx *ctx, int fd, size_t size, char **out,
		       size_t *len)
{
	char *buf = mem_alloc(size + 1);
	if (!buf)
		return cfg_nomem(ctx);
	size_t got = 0;
	while (got < size + 1) {
		ssize_t r = read(fd, buf + got, size + 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			char ebuf[128];
			mem_free(buf);
			return cfg_fail(ctx, -ST_IO, "", "%s",
					strerror_r(errno, ebuf, sizeof(ebuf)));
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	if (got > size) {
		mem_free(buf);
		return cfg_fail(ctx, -ST_IO, "", "file changed while read");
	}
	*out = buf;
	*len = got;
	return 0;
}

/* cfg_file_read - the whole regular file at path into a new buffer. */
static int cfg_file_read(struct cfg_ctx *ctx, const char *path, char **out,
			 size_t *len)
{
	char ebuf[128];
	int rc = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return cfg_fail(ctx, -ST_IO, "", "%s",
				strerror_r(errno, ebuf, sizeof(ebuf)));
	struct stat st;
	if (fstat(fd, &st) != 0) {
		rc = cfg_fail(ctx, -ST_IO, "", "%s",
			      strerror_r(errno, ebuf, sizeof(ebuf)));
		goto out_close;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = cfg_fail(ctx, -ST_IO, "", "not a regular file");
		goto out_close;
	}
	if (st.st_size > CFG_MAX_INPUT_BYTES) {
		rc = cfg_fail(ctx, -ST_TOOBIG, "",
			      "expected at most %d bytes of JSON",
			      CFG_MAX_INPUT_BYTES);
		goto out_close;
	}
	rc = cfg_fd_read(ctx, fd, (size_t)st.st_size, out, len);
out_close:
	close(fd);
	return rc;
}

int cfg_load_file(const char *path, struct cfg **out, char *err, size_t errlen)
{
	char msg[512] = "";
	struct cfg_ctx ctx = { .err = msg, .errlen = sizeof(msg) };
	char *buf = NULL;
	size_t len = 0;
	*out = NULL;
	if (err && errlen)
		err[0] = '\0';
	int rc = cfg_file_read(&ctx, path, &buf, &len);
	if (rc == 0)
		rc = cfg_load_string(buf, len, out, msg, sizeof(msg));
	mem_free(buf);
	if (rc)
		st_errf(rc, err, errlen, "%s: %s", path, msg);
	return rc;
}

void cfg_destroy(struct cfg *cfg)
{
	if (!cfg)
		return;
	mem_free(cfg->listen_host);
	mem_free(cfg->grpc_host);
	for (size_t i = 0; i < cfg->n_api_keys; i++)
		mem_free(cfg->api_keys[i]);
	mem_free(cfg->api_keys);
	for (size_t i = 0; i < cfg->n_models; i++) {
		struct cfg_model *m = &cfg->models[i];
		mem_free(m->name);
		mem_free(m->path);
		for (size_t j = 0; j < m->n_replicas; j++)
			mem_free(m->replicas[j].device);
		mem_free(m->replicas);
	}
	mem_free(cfg->models);
	mem_free(cfg);
}

/* cfg_help_rows - one entry per row of tab, then the rows of its sub table
 * (an object's keys, "limits.KEY") and of its items table (the keys of each
 * array entry, "models[].KEY"). */
static void cfg_help_rows(FILE *out, const struct cfg_knob *tab, size_t n,
			  const char *parent)
{
	for (size_t i = 0; i < n; i++) {
		const struct cfg_knob *k = &tab[i];
		char path[CFG_PATH_LEN], def[48] = "";
		cfg_join(path, sizeof(path), parent, k->path);
		if (k->required)
			snprintf(def, sizeof(def), ", required");
		else if (k->type->show == CFG_SHOW_INT)
			snprintf(def, sizeof(def), ", default %lld",
				 (long long)k->def);
		else if (k->type->show == CFG_SHOW_BOOL)
			snprintf(def, sizeof(def), ", default %s",
				 k->def ? "true" : "false");
		else if (k->def_str)
			snprintf(def, sizeof(def), ", default %s", k->def_str);
		char range[64] = "";
		const char *unit = k->type->unit;
		if (unit && k->max == INT_MAX)
			snprintf(range, sizeof(range), ", >= %lld%s",
				 (long long)k->min, unit);
		else if (unit)
			snprintf(range, sizeof(range), ", %lld..%lld%s",
				 (long long)k->min, (long long)k->max, unit);
		fprintf(out, "  %s (%s%s%s)\n      %s\n", path, k->type->name,
			def, range, k->doc);
		if (k->sub)
			cfg_help_rows(out, k->sub, k->n_sub, path);
		if (k->items) {
			snprintf(path + strlen(path), sizeof(path) - strlen(path),
				 "[]");
			cfg_help_rows(out, k->items, k->n_items, path);
		}
	}
}

void cfg_help_print(FILE *out)
{
	cfg_help_rows(out, cfg_knobs, CFG_N(cfg_knobs), "");
}
