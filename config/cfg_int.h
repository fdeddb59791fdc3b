/* cfg_int.h - config/ internal: the declarative table's types (struct
 * cfg_knob, one row; struct cfg_type, how one kind of knob is read) and
 * what the files of config/ share. Nothing here is public API (cfg.h is).
 *
 * The files, leaves first:
 *   cfg_err.c    error lines ("PATH: what was expected") and JSON paths
 *   cfg_types.c  the knob types: numbers, strings, listen addresses, keys,
 *                objects, replicas, models; and the table walkers
 *   cfg_knobs.c  the tables themselves: every knob, its default and range
 *   cfg_help.c   --help generated from the tables
 *   cfg.c        loading: text or file -> struct cfg, and cfg_destroy
 */
#ifndef CFG_INT_H
#define CFG_INT_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/cfg.h"

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

/* ---- cfg_err.c ---------------------------------------------------------- */

/* cfg__fail - write "PATH: message" (or just the message when path is
 * empty; printf-style fmt) into ctx's buffer and return rc (a -ST_* code). */
int cfg__fail(struct cfg_ctx *ctx, int rc, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* cfg__nomem - cfg__fail with -ST_NOMEM, "out of memory". */
int cfg__nomem(struct cfg_ctx *ctx);

/* cfg__quote - s as printable ASCII into out (outlen >= 8), quotes,
 * backslashes and other bytes escaped, cut with "..." when too long.
 * Returns out. */
const char *cfg__quote(const char *s, char *out, size_t outlen);

/* cfg__join - "PARENT.KEY" (or "KEY" when parent is "") into out. */
void cfg__join(char *out, size_t outlen, const char *parent, const char *key);

/* ---- cfg_types.c -------------------------------------------------------- */

/* The knob types the tables use (what each reads: its comment there). */
extern const struct cfg_type cfg__type_int;         /* int, default def */
extern const struct cfg_type cfg__type_int_opt;     /* int, absent: def, no range check */
extern const struct cfg_type cfg__type_int64;       /* int64_t */
extern const struct cfg_type cfg__type_bool;        /* bool */
extern const struct cfg_type cfg__type_price;       /* double >= 0, absent: 0 */
extern const struct cfg_type cfg__type_str;         /* new string, min..max bytes */
extern const struct cfg_type cfg__type_str_opt;     /* the same, absent: NULL */
extern const struct cfg_type cfg__type_name;        /* a model name [A-Za-z0-9._-] */
extern const struct cfg_type cfg__type_format;      /* enum cfg_model_format */
extern const struct cfg_type cfg__type_compute;     /* enum cfg_compute_type */
extern const struct cfg_type cfg__type_listen;      /* "HOST:PORT" -> host, port */
extern const struct cfg_type cfg__type_grpc_listen; /* the same, "" = none */
extern const struct cfg_type cfg__type_keys;        /* array of API key strings */
extern const struct cfg_type cfg__type_section;     /* object, keys in the same struct */
extern const struct cfg_type cfg__type_device;      /* a placement's device spec */
extern const struct cfg_type cfg__type_replicas;    /* N, {"count": N} or placements */
extern const struct cfg_type cfg__type_models;      /* the "models" array */

/* cfg__table_unset - every field of the n rows of tab (and of sub-objects
 * sharing base) UNSET. */
void cfg__table_unset(const struct cfg_knob *tab, size_t n, void *base);

/* cfg__table_finish - defaults and range checks for every row; parent is
 * the JSON path of the object the rows belong to. 0 or -ST_*. */
int cfg__table_finish(struct cfg_ctx *ctx, const struct cfg_knob *tab, size_t n, void *base,
		      const char *parent);

/* cfg__object_read - every key of obj (borrowed) stored through its row
 * in tab; a key with no row is -ST_INVAL. path names obj ("" at the top). */
int cfg__object_read(struct cfg_ctx *ctx, const struct cfg_knob *tab, size_t n, void *base,
		     json_t *obj, const char *path);

/* ---- cfg_knobs.c -------------------------------------------------------- */

/* The top level of the file, offsets into struct cfg ("limits" and
 * "models" hang their own tables off their rows). */
extern const struct cfg_knob cfg__knobs[];
extern const size_t cfg__n_knobs;

#endif /* CFG_INT_H */
