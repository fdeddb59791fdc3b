/* cfg.c - the configuration file: JSON (jansson) read through a declarative
 * table of knobs into a frozen struct cfg. This file loads (text or file ->
 * struct cfg) and frees; the table is cfg_knobs.c, its types cfg_types.c,
 * the error lines cfg_err.c and --help cfg_help.c (cfg_int.h lists them).
 *
 * Every knob is one row of cfg__knobs[] (the file's top level and "limits"),
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

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/mem.h"
#include "common/st.h"
#include "config/cfg_int.h"

/* ---- public ----------------------------------------------------------- */

/* cfg_build - root (any JSON value) into cfg (zeroed): the whole pipeline. */
static int cfg_build(struct cfg_ctx *ctx, struct cfg *cfg, json_t *root)
{
	if (!json_is_object(root))
		return cfg__fail(ctx, -ST_INVAL, "",
				"expected a JSON object at the top level");
	cfg__table_unset(cfg__knobs, cfg__n_knobs, cfg);
	int rc = cfg__object_read(ctx, cfg__knobs, cfg__n_knobs, cfg, root, "");
	if (rc)
		return rc;
	return cfg__table_finish(ctx, cfg__knobs, cfg__n_knobs, cfg, "");
}

int cfg_load_string(const char *json, size_t len, struct cfg **out, char *err,
		    size_t errlen)
{
	struct cfg_ctx ctx = { .err = err, .errlen = errlen };
	*out = NULL;
	if (err && errlen)
		err[0] = '\0';
	if (len > CFG_MAX_INPUT_BYTES)
		return cfg__fail(&ctx, -ST_TOOBIG, "",
				"expected at most %d bytes of JSON",
				CFG_MAX_INPUT_BYTES);
	json_error_t jerr;
	json_t *root = json_loadb(json ? json : "", json ? len : 0,
				  JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return cfg__fail(&ctx, -ST_INVAL, "", "line %d column %d: %s",
				jerr.line, jerr.column, jerr.text);
	int rc;
	struct cfg *cfg = mem_calloc(1, sizeof(*cfg));
	if (!cfg) {
		rc = cfg__nomem(&ctx);
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
		return cfg__nomem(ctx);
	size_t got = 0;
	while (got < size + 1) {
		ssize_t r = read(fd, buf + got, size + 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			char ebuf[128];
			mem_free(buf);
			return cfg__fail(ctx, -ST_IO, "", "%s",
					strerror_r(errno, ebuf, sizeof(ebuf)));
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	if (got > size) {
		mem_free(buf);
		return cfg__fail(ctx, -ST_IO, "", "file changed while read");
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
		return cfg__fail(ctx, -ST_IO, "", "%s",
				strerror_r(errno, ebuf, sizeof(ebuf)));
	struct stat st;
	if (fstat(fd, &st) != 0) {
		rc = cfg__fail(ctx, -ST_IO, "", "%s",
			      strerror_r(errno, ebuf, sizeof(ebuf)));
		goto out_close;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = cfg__fail(ctx, -ST_IO, "", "not a regular file");
		goto out_close;
	}
	if (st.st_size > CFG_MAX_INPUT_BYTES) {
		rc = cfg__fail(ctx, -ST_TOOBIG, "",
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
	mem_free(cfg->batch_store);
	mem_free(cfg->batch_input_dir);
	for (size_t i = 0; i < cfg->n_api_keys; i++)
		mem_free(cfg->api_keys[i]);
	mem_free(cfg->api_keys);
	for (size_t i = 0; i < cfg->n_models; i++) {
		struct cfg_model *m = &cfg->models[i];
		mem_free(m->name);
		mem_free(m->path);
		mem_free(m->vad_model);
		for (size_t j = 0; j < m->n_replicas; j++)
			mem_free(m->replicas[j].device);
		mem_free(m->replicas);
	}
	mem_free(cfg->models);
	mem_free(cfg);
}
