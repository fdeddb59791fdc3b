/* srv_batch_api.c - the Batch API's routes in OpenAI's shapes
 * (platform.openai.com/docs/api-reference/files and .../batch): the
 * loop thread's handlers queue a command for the batch thread (which
 * owns the store), and post its answer back.
 *
 * Objects: a file {"id", "object": "file", "bytes", "created_at",
 * "expires_at", "filename", "purpose", "status": "processed"}; a batch
 * {"id", "object": "batch", "endpoint", "input_file_id",
 * "completion_window", "status", "output_file_id", "error_file_id",
 * "created_at", "in_progress_at", ..., "request_counts": {"total",
 * "completed", "failed"}, "metadata", "usage": {"input_tokens",
 * "output_tokens", "total_tokens", ...}, and inferd's own "x_inferd":
 * {"audio_seconds", "elapsed_s", "items_per_s", "audio_hours_per_hour",
 * "tokens_per_s", "price_per_hour", "cost", "cost_per_audio_hour",
 * "cost_per_million_tokens"}}; lists {"object": "list", "data",
 * "first_id", "last_id", "has_more"}.
 *
 * Endpoints of a batch: /v1/chat/completions, /v1/completions and, an
 * inferd extension, /v1/audio/transcriptions (each line's body names an
 * audio file in batch.input_dir as "file"; the other keys are the
 * form's fields). completion_window: "24h", as OpenAI takes.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "server/batch/srv_batch_int.h"
#include "server/srv_multipart.h"

#define BAPI_LIST_MAX 100 /* OpenAI's "limit" ceiling for batches */
#define BAPI_FILES_MAX 10000

/* --- the loop thread's half ---------------------------------------------- */

static void bapi_after(struct srv_post *p)
{
	struct srv_bcmd *c = (struct srv_bcmd *)p;
	struct srv_conn *conn = c->conn;
	struct srv *srv = conn->srv;
	struct srv_req *req = &conn->req;
	if (conn->state == SRV_CONN_STATE_HANDLING) {
		if (c->status == 429 || c->status == 503)
			srv__req_add_header(req, "Retry-After", "1");
		if (c->status >= 400)
			srv__req_respond_error(req, c->status, c->code, "%s", c->msg);
		else
			srv__req_respond(req, c->status, c->type, c->body, c->len);
	} else {
		srv__req_log_gone(req);
	}
	mem_free(c->body);
	mem_free(c);
	srv__conn_work_done(conn);
	srv__jobs_end(srv);
}

/* Hand req to the batch thread as a command that runs run. */
static void bapi_queue(struct srv_req *req, void (*run)(struct srv_batchd *, struct srv_bcmd *))
{
	struct srv_conn *conn = req->conn;
	struct srv_batchd *d = conn->srv->batch;
	if (!d) {
		srv__req_respond_error(req, 503, "batch_unavailable",
				       "the Batch API is not running on this server");
		return;
	}
	struct srv_bcmd *c = mem_calloc(1, sizeof(*c));
	if (!c) {
		srv__req_add_header(req, "Retry-After", "1");
		srv__req_respond_error(req, 503, "server_overloaded", "out of memory");
		return;
	}
	c->conn = conn;
	c->run = run;
	snprintf(c->param, sizeof(c->param), "%s", req->path_param);
	snprintf(c->query, sizeof(c->query), "%s", req->query ? req->query : "");
	const char *ct = srv__req_header(req, "Content-Type");
	snprintf(c->content_type, sizeof(c->content_type), "%s", ct ? ct : "");
	conn->n_work++;
	srv__jobs_begin(conn->srv);
	pthread_mutex_lock(&d->mu);
	if (d->cmd_tail)
		d->cmd_tail->next = c;
	else
		d->cmd_head = c;
	d->cmd_tail = c;
	pthread_cond_signal(&d->cmd_cv);
	pthread_mutex_unlock(&d->mu);
}

/* --- answers (batch thread) ---------------------------------------------- */

static void bapi_fail(struct srv_bcmd *c, int status, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void bapi_fail(struct srv_bcmd *c, int status, const char *code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->msg, sizeof(c->msg), fmt, ap);
	va_end(ap);
	c->status = status;
	c->code = code;
}

/* Answer c with obj (stolen; NULL: out of memory) as JSON. */
static void bapi_json(struct srv_bcmd *c, int status, json_t *obj)
{
	char *t = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
	json_decref(obj);
	c->body = t ? mem_strdup(t) : NULL;
	free(t); /* jansson's allocator */
	if (!c->body) {
		bapi_fail(c, 503, "server_overloaded", "out of memory");
		return;
	}
	c->len = strlen(c->body);
	c->status = status;
	c->type = "application/json";
}

/* A store error as the answer: 404 for what is not there, 500 else. */
static void bapi_store_fail(struct srv_bcmd *c, int rc, const char *what)
{
	if (rc == -ST_NOTFOUND)
		bapi_fail(c, 404, "not_found", "No such %s: '%s'", what, c->param);
	else if (rc == -ST_NOMEM)
		bapi_fail(c, 503, "server_overloaded", "out of memory");
	else
		bapi_fail(c, 500, "server_error", "the batch store failed: %s", st_str(rc));
}

static void bapi_post_back(struct srv_batchd *d, struct srv_bcmd *c)
{
	srv__post(d->srv, &c->post, bapi_after);
}

/* The batch thread's store, opened (and with create, made) on demand.
 * NULL with c answered when it cannot be. */
static struct srv_bstore *bapi_store(struct srv_batchd *d, struct srv_bcmd *c, bool create)
{
	if (d->store)
		return d->store;
	char err[512];
	int rc = srv__batch_store_open(d, create, &d->store, err, sizeof(err));
	if (rc == -ST_NOTFOUND)
		return NULL; /* the caller answers as for an empty store */
	if (rc) {
		bapi_fail(c, 500, "server_error", "%s", err);
		return NULL;
	}
	pthread_mutex_lock(&d->mu);
	d->store_ready = true;
	pthread_cond_broadcast(&d->work_cv);
	pthread_mutex_unlock(&d->mu);
	return d->store;
}

/* The value of key in the query string q into out (cut to cap), or
 * false when absent. Values here are ids and numbers: not unescaped. */
static bool bapi_query(const char *q, const char *key, char *out, size_t cap)
{
	size_t kl = strlen(key);
	for (const char *p = q; p && *p; p = strchr(p, '&') ? strchr(p, '&') + 1 : NULL) {
		if (strncmp(p, key, kl) || p[kl] != '=')
			continue;
		const char *v = p + kl + 1;
		size_t n = strcspn(v, "&");
		snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), v);
		return true;
	}
	return false;
}

/* "limit": 1..max (default def); false with c answered when bad. */
static bool bapi_limit(struct srv_bcmd *c, int def, int max, int *out)
{
	char v[32];
	*out = def;
	if (!bapi_query(c->query, "limit", v, sizeof(v)))
		return true;
	char *end;
	long n = strtol(v, &end, 10);
	if (!*v || *end || n < 1 || n > max) {
		bapi_fail(c, 400, "invalid_request_error", "limit must be an integer 1..%d", max);
		return false;
	}
	*out = (int)n;
	return true;
}

static json_t *bapi_time(int64_t t)
{
	return t ? json_integer(t) : json_null();
}

static json_t *bapi_id(const char *id)
{
	return id[0] ? json_string(id) : json_null();
}

static json_t *bapi_file_obj(const struct srv_bfile *f)
{
	return json_pack("{s:s,s:s,s:I,s:I,s:o,s:s,s:s,s:s,s:n}", "id", f->id, "object", "file",
			 "bytes", (json_int_t)f->bytes, "created_at", (json_int_t)f->created_at,
			 "expires_at", bapi_time(f->expires_at), "filename", f->filename, "purpose",
			 f->purpose, "status", "processed", "status_details");
}

/* A rate a / secs, or null without time or work. */
static json_t *bapi_rate(double a, double secs)
{
	return secs > 0 && a > 0 ? json_real(a / secs) : json_null();
}

/* inferd's own figures of batch b (the "x_inferd" object): what it did
 * and, with price_per_hour, what it cost. Its time is from in_progress_at
 * to its end (or now): the machine's time while the job ran, downtime
 * and interactive work included, so the cost is an upper bound. */
static json_t *bapi_batch_figures(const struct srv_batch *b, double price)
{
	int64_t end = b->completed_at ? b->completed_at
		      : b->cancelled_at ? b->cancelled_at
		      : b->expired_at	? b->expired_at
		      : b->failed_at	? b->failed_at
					: srv__batch_now();
	double secs = b->in_progress_at && end > b->in_progress_at
			      ? (double)(end - b->in_progress_at)
			      : 0;
	double tokens = (double)(b->prompt_tokens + b->completion_tokens);
	double cost = price * secs / 3600.0;
	return json_pack("{s:f,s:f,s:o,s:o,s:o,s:f,s:o,s:o,s:o}", "audio_seconds", b->audio_s,
			 "elapsed_s", secs, "items_per_s",
			 bapi_rate((double)(b->done + b->failed), secs), "audio_hours_per_hour",
			 bapi_rate(b->audio_s, secs), "tokens_per_s", bapi_rate(tokens, secs),
			 "price_per_hour", price, "cost", price > 0 ? json_real(cost) : json_null(),
			 "cost_per_audio_hour",
			 price > 0 ? bapi_rate(cost, b->audio_s / 3600.0) : json_null(),
			 "cost_per_million_tokens",
			 price > 0 ? bapi_rate(cost, tokens / 1e6) : json_null());
}

static json_t *bapi_batch_obj(const struct srv_batch *b, double price)
{
	json_t *meta = json_loads(b->metadata, JSON_DECODE_ANY, NULL);
	json_t *usage = json_pack(
		"{s:I,s:{s:i},s:I,s:{s:i},s:I}", "input_tokens", (json_int_t)b->prompt_tokens,
		"input_tokens_details", "cached_tokens", 0, "output_tokens",
		(json_int_t)b->completion_tokens, "output_tokens_details", "reasoning_tokens", 0,
		"total_tokens", (json_int_t)(b->prompt_tokens + b->completion_tokens));
	json_t *o = json_pack(
		"{s:s,s:s,s:s,s:n,s:s,s:s,s:s,s:o,s:o,s:I,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,"
		"s:{s:I,s:I,s:I},s:o,s:o,s:o}",
		"id", b->id, "object", "batch", "endpoint", b->endpoint, "errors", "input_file_id",
		b->input_file_id, "completion_window", b->completion_window, "status", b->status,
		"output_file_id", bapi_id(b->output_file_id), "error_file_id",
		bapi_id(b->error_file_id), "created_at", (json_int_t)b->created_at,
		"in_progress_at", bapi_time(b->in_progress_at), "expires_at",
		bapi_time(b->expires_at), "finalizing_at", bapi_time(b->finalizing_at),
		"completed_at", bapi_time(b->completed_at), "failed_at", bapi_time(b->failed_at),
		"expired_at", bapi_time(b->expired_at), "cancelling_at",
		bapi_time(b->cancelling_at), "cancelled_at", bapi_time(b->cancelled_at),
		"request_counts", "total", (json_int_t)b->total, "completed", (json_int_t)b->done,
		"failed", (json_int_t)b->failed, "metadata", meta ? meta : json_null(), "usage",
		usage ? usage : json_null(), "x_inferd", bapi_batch_figures(b, price));
	return o;
}

/* {"object": "list", "data": data (stolen), "first_id", "last_id", "has_more"}. */
static json_t *bapi_list(json_t *data, bool has_more)
{
	size_t n = json_array_size(data);
	json_t *first = n ? json_object_get(json_array_get(data, 0), "id") : NULL;
	json_t *last = n ? json_object_get(json_array_get(data, n - 1), "id") : NULL;
	return json_pack("{s:s,s:o,s:O,s:O,s:b}", "object", "list", "data", data, "first_id",
			 first ? first : json_null(), "last_id", last ? last : json_null(),
			 "has_more", has_more);
}

/* --- files ----------------------------------------------------------------- */

/* The "file" part of an upload (purpose "batch", within
 * batch.max_file_bytes) into *file; false with c answered. */
static bool bapi_upload_part(struct srv_batchd *d, struct srv_bcmd *c, struct srv_mp_part *file)
{
	const struct srv_buf *body = &c->conn->req.body;
	char err[256];
	struct srv_mp_str bnd;
	struct srv_mp_part parts[8];
	size_t n = 0;
	struct srv_mp_limits lim = { .max_parts = 8, .max_header_bytes = 4096,
				     .max_field_bytes = 4096 };
	int rc = srv_mp_boundary(c->content_type, &bnd, err, sizeof(err));
	if (!rc)
		rc = srv_mp_parse(body->data, body->len, bnd, &lim, parts, &n, err, sizeof(err));
	if (rc) {
		bapi_fail(c, rc == -ST_UNSUPPORTED ? 415 : 400, "invalid_request_error",
			  "expected a multipart/form-data body with \"file\" and \"purpose\": %s",
			  err);
		return false;
	}
	const struct srv_mp_part *f = NULL, *purpose = NULL;
	for (size_t i = 0; i < n; i++) {
		if (srv_mp_str_eq(parts[i].name, "file"))
			f = &parts[i];
		else if (srv_mp_str_eq(parts[i].name, "purpose"))
			purpose = &parts[i];
	}
	if (!f || !purpose)
		bapi_fail(c, 400, "invalid_request_error", "missing the \"%s\" field",
			  f ? "purpose" : "file");
	else if (!srv_mp_str_eq(purpose->data, "batch"))
		bapi_fail(c, 400, "invalid_request_error",
			  "purpose must be \"batch\" (the only one inferd stores), not '%.*s'",
			  (int)(purpose->data.n < 64 ? purpose->data.n : 64), purpose->data.p);
	else if ((int64_t)f->data.n > d->cfg->batch_max_file_bytes)
		bapi_fail(c, 413, "file_too_large",
			  "the file is %zu bytes, over batch.max_file_bytes (%lld)", f->data.n,
			  (long long)d->cfg->batch_max_file_bytes);
	else
		*file = *f;
	return !c->status;
}

static void bapi_run_file_create(struct srv_batchd *d, struct srv_bcmd *c)
{
	char err[256];
	struct srv_mp_part part = { 0 }, *file = &part;
	if (!bapi_upload_part(d, c, file))
		goto out;
	struct srv_bstore *s = bapi_store(d, c, true);
	if (!s)
		goto out;
	int64_t used = srv__bstore_bytes(s);
	if (used < 0 || used + (int64_t)file->data.n > d->cfg->batch_max_store_bytes) {
		bapi_fail(c, 507, "storage_full",
			  "the batch store holds %lld bytes; this file would pass "
			  "batch.max_store_bytes (%lld): delete files or wait for them to expire",
			  (long long)used, (long long)d->cfg->batch_max_store_bytes);
		goto out;
	}
	int64_t now = srv__batch_now();
	struct srv_bfile f = { .created_at = now, .expires_at = now + d->cfg->batch_file_ttl_s };
	snprintf(f.purpose, sizeof(f.purpose), "batch");
	size_t fl = file->filename.p ? file->filename.n : 0;
	snprintf(f.filename, sizeof(f.filename), "%.*s", (int)(fl < 255 ? fl : 255),
		 fl ? file->filename.p : "upload.jsonl");
	int rc = srv__bstore_file_put(s, &f, file->data.p, file->data.n, err, sizeof(err));
	if (rc) {
		bapi_fail(c, rc == -ST_NOMEM ? 503 : 500, "server_error", "%s", err);
		goto out;
	}
	bapi_json(c, 200, bapi_file_obj(&f));
out:
	bapi_post_back(d, c);
}

static void bapi_run_files_list(struct srv_batchd *d, struct srv_bcmd *c)
{
	char purpose[32], after[SRV_BSTORE_ID_MAX] = "";
	int limit;
	bool has_purpose = bapi_query(c->query, "purpose", purpose, sizeof(purpose));
	bapi_query(c->query, "after", after, sizeof(after));
	if (!bapi_limit(c, BAPI_FILES_MAX, BAPI_FILES_MAX, &limit))
		goto out;
	struct srv_bstore *s = bapi_store(d, c, false);
	if (c->status)
		goto out;
	struct srv_bfile *f = mem_calloc((size_t)limit, sizeof(*f));
	size_t n = 0;
	bool more = false;
	int rc = !f ? -ST_NOMEM
		 : s ? srv__bstore_file_list(s, has_purpose ? purpose : NULL, after, f,
					     (size_t)limit, &n, &more)
		     : 0;
	json_t *data = json_array();
	for (size_t i = 0; !rc && i < n; i++)
		json_array_append_new(data, bapi_file_obj(&f[i]));
	mem_free(f);
	if (rc) {
		json_decref(data);
		snprintf(c->param, sizeof(c->param), "%s", after);
		bapi_store_fail(c, rc, "file");
	} else {
		bapi_json(c, 200, bapi_list(data, more));
	}
out:
	bapi_post_back(d, c);
}

static void bapi_run_file_get(struct srv_batchd *d, struct srv_bcmd *c)
{
	struct srv_bstore *s = bapi_store(d, c, false);
	struct srv_bfile f;
	int rc = s ? srv__bstore_file_get(s, c->param, &f, NULL) : -ST_NOTFOUND;
	if (c->status)
		;
	else if (rc)
		bapi_store_fail(c, rc, "file");
	else
		bapi_json(c, 200, bapi_file_obj(&f));
	bapi_post_back(d, c);
}

static void bapi_run_file_content(struct srv_batchd *d, struct srv_bcmd *c)
{
	struct srv_bstore *s = bapi_store(d, c, false);
	struct srv_bfile f;
	char *data = NULL;
	int rc = s ? srv__bstore_file_get(s, c->param, &f, &data) : -ST_NOTFOUND;
	if (c->status) {
		;
	} else if (rc) {
		bapi_store_fail(c, rc, "file");
	} else {
		c->status = 200;
		c->type = "application/octet-stream";
		c->body = data;
		c->len = (size_t)f.bytes;
		data = NULL;
	}
	mem_free(data);
	bapi_post_back(d, c);
}

static void bapi_run_file_delete(struct srv_batchd *d, struct srv_bcmd *c)
{
	struct srv_bstore *s = bapi_store(d, c, false);
	int rc = s ? srv__bstore_file_delete(s, c->param) : -ST_NOTFOUND;
	if (c->status)
		;
	else if (rc)
		bapi_store_fail(c, rc, "file");
	else
		bapi_json(c, 200, json_pack("{s:s,s:s,s:b}", "id", c->param, "object", "file",
					    "deleted", 1));
	bapi_post_back(d, c);
}

/* --- batches --------------------------------------------------------------- */

/* The endpoint's check: NULL when the server can run it, else why not. */
static const char *bapi_endpoint_refusal(const struct srv_batchd *d, const char *e)
{
	if (!strcmp(e, "/v1/chat/completions") || !strcmp(e, "/v1/completions"))
		return NULL;
	if (!strcmp(e, "/v1/audio/transcriptions"))
		return d->cfg->batch_input_dir ? NULL
					       : "/v1/audio/transcriptions batches need "
						 "batch.input_dir in the server's config";
	return "endpoint must be /v1/chat/completions, /v1/completions or "
	       "/v1/audio/transcriptions";
}

/* Read POST /v1/batches's JSON body into b; false with c answered. */
static bool bapi_batch_params(struct srv_batchd *d, struct srv_bcmd *c, struct srv_batch *b)
{
	const struct srv_buf *body = &c->conn->req.body;
	json_error_t je;
	json_t *o = json_loadb(body->data ? body->data : "", body->len, 0, &je);
	json_t *in = json_object_get(o, "input_file_id"), *ep = json_object_get(o, "endpoint");
	json_t *win = json_object_get(o, "completion_window"), *meta = json_object_get(o, "metadata");
	const char *why = NULL;
	if (!json_is_object(o))
		bapi_fail(c, 400, "invalid_request_error", "the body is not a JSON object: %s",
			  o ? "" : je.text);
	else if (!json_is_string(in) || json_string_length(in) >= sizeof(b->input_file_id))
		bapi_fail(c, 400, "invalid_request_error", "input_file_id must be a file's id");
	else if (!json_is_string(ep) || (why = bapi_endpoint_refusal(d, json_string_value(ep))))
		bapi_fail(c, 400, "invalid_request_error", "%s", why ? why : "endpoint is required");
	else if (!json_is_string(win) || strcmp(json_string_value(win), "24h"))
		bapi_fail(c, 400, "invalid_request_error", "completion_window must be \"24h\"");
	else if (meta && !json_is_null(meta) && !json_is_object(meta))
		bapi_fail(c, 400, "invalid_request_error", "metadata must be an object of strings");
	if (!c->status && json_is_object(meta)) {
		const char *k;
		json_t *v;
		json_object_foreach(meta, k, v) if (!json_is_string(v) || strlen(k) > 64 ||
						    json_string_length(v) > 512)
			bapi_fail(c, 400, "invalid_request_error",
				  "metadata: each value a string of at most 512 characters, each key "
				  "at most 64");
		if (!c->status && json_object_size(meta) > 16)
			bapi_fail(c, 400, "invalid_request_error", "metadata: at most 16 pairs");
	}
	if (!c->status) {
		snprintf(b->input_file_id, sizeof(b->input_file_id), "%s", json_string_value(in));
		snprintf(b->endpoint, sizeof(b->endpoint), "%s", json_string_value(ep));
		snprintf(b->completion_window, sizeof(b->completion_window), "24h");
		char *m = json_is_object(meta) ? json_dumps(meta, JSON_COMPACT) : NULL;
		snprintf(b->metadata, sizeof(b->metadata), "%s", m ? m : "null");
		free(m); /* jansson's allocator */
	}
	json_decref(o);
	return !c->status;
}

static void bapi_run_batch_create(struct srv_batchd *d, struct srv_bcmd *c)
{
	struct srv_batch b;
	memset(&b, 0, sizeof(b));
	if (!bapi_batch_params(d, c, &b))
		goto out;
	struct srv_bstore *s = bapi_store(d, c, false);
	if (c->status)
		goto out;
	struct srv_bfile f;
	int rc = s ? srv__bstore_file_get(s, b.input_file_id, &f, NULL) : -ST_NOTFOUND;
	if (rc) {
		snprintf(c->param, sizeof(c->param), "%s", b.input_file_id);
		bapi_store_fail(c, rc, "file");
		goto out;
	}
	if (strcmp(f.purpose, "batch")) {
		bapi_fail(c, 400, "invalid_request_error",
			  "file %s has purpose '%s'; a batch's input file needs purpose \"batch\"",
			  f.id, f.purpose);
		goto out;
	}
	int n_open = d->n_open;
	if (n_open >= d->cfg->batch_max_jobs) {
		bapi_fail(c, 429, "too_many_batches",
			  "%d batches are not ended yet (batch.max_jobs); wait for one to end or "
			  "cancel one", n_open);
		goto out;
	}
	int64_t used = srv__bstore_bytes(s);
	if (used < 0 || used + f.bytes > d->cfg->batch_max_store_bytes) {
		bapi_fail(c, 507, "storage_full",
			  "the batch store holds %lld bytes; this batch would pass "
			  "batch.max_store_bytes (%lld)",
			  (long long)used, (long long)d->cfg->batch_max_store_bytes);
		goto out;
	}
	b.created_at = srv__batch_now();
	b.expires_at = b.created_at + 24 * 3600;
	char err[512];
	rc = srv__bstore_batch_create(s, &b, (size_t)d->cfg->batch_max_lines, err, sizeof(err));
	if (rc == -ST_INVAL) {
		bapi_fail(c, 400, "invalid_request_error", "%s", err);
		goto out;
	}
	if (rc) {
		bapi_fail(c, rc == -ST_NOTFOUND ? 404 : 500,
			  rc == -ST_NOTFOUND ? "not_found" : "server_error", "%s", err);
		goto out;
	}
	srv__bq_add(d, &b);
	bapi_json(c, 200, bapi_batch_obj(&b, d->cfg->price_per_hour));
out:
	bapi_post_back(d, c);
}

static void bapi_run_batches_list(struct srv_batchd *d, struct srv_bcmd *c)
{
	char after[SRV_BSTORE_ID_MAX] = "";
	int limit;
	bapi_query(c->query, "after", after, sizeof(after));
	if (!bapi_limit(c, 20, BAPI_LIST_MAX, &limit))
		goto out;
	struct srv_bstore *s = bapi_store(d, c, false);
	if (c->status)
		goto out;
	struct srv_batch *b = mem_calloc((size_t)limit, sizeof(*b));
	size_t n = 0;
	bool more = false;
	int rc = !b ? -ST_NOMEM
		 : s ? srv__bstore_batch_list(s, after, false, b, (size_t)limit, &n, &more)
		     : 0;
	json_t *data = json_array();
	for (size_t i = 0; !rc && i < n; i++)
		json_array_append_new(data, bapi_batch_obj(&b[i], d->cfg->price_per_hour));
	mem_free(b);
	if (rc) {
		json_decref(data);
		snprintf(c->param, sizeof(c->param), "%s", after);
		bapi_store_fail(c, rc, "batch");
	} else {
		bapi_json(c, 200, bapi_list(data, more));
	}
out:
	bapi_post_back(d, c);
}

static void bapi_run_batch_get(struct srv_batchd *d, struct srv_bcmd *c)
{
	struct srv_bstore *s = bapi_store(d, c, false);
	struct srv_batch *b = mem_calloc(1, sizeof(*b));
	int rc = !b ? -ST_NOMEM : s ? srv__bstore_batch_get(s, c->param, b) : -ST_NOTFOUND;
	if (c->status)
		;
	else if (rc)
		bapi_store_fail(c, rc, "batch");
	else
		bapi_json(c, 200, bapi_batch_obj(b, d->cfg->price_per_hour));
	mem_free(b);
	bapi_post_back(d, c);
}

static void bapi_run_batch_cancel(struct srv_batchd *d, struct srv_bcmd *c)
{
	struct srv_bstore *s = bapi_store(d, c, false);
	struct srv_batch *b = mem_calloc(1, sizeof(*b));
	int rc = !b ? -ST_NOMEM : s ? srv__bstore_batch_get(s, c->param, b) : -ST_NOTFOUND;
	if (c->status)
		goto out;
	if (rc) {
		bapi_store_fail(c, rc, "batch");
		goto out;
	}
	if (!strcmp(b->status, "in_progress") || !strcmp(b->status, "validating")) {
		rc = srv__bstore_batch_set_status(s, b->id, "cancelling", srv__batch_now());
		if (!rc && srv__bq_cancel(d, b->id)) {
			/* none in flight: it ends now */
			struct srv_bq *q = NULL;
			pthread_mutex_lock(&d->mu);
			for (q = d->open; q && strcmp(q->id, b->id); q = q->next)
				;
			pthread_mutex_unlock(&d->mu);
			if (q)
				srv__bq_finish(d, s, q);
		}
		if (!rc)
			rc = srv__bstore_batch_get(s, b->id, b);
		if (rc) {
			bapi_store_fail(c, rc, "batch");
			goto out;
		}
	} else if (strcmp(b->status, "cancelling") && strcmp(b->status, "cancelled")) {
		bapi_fail(c, 409, "invalid_request_error",
			  "batch %s is %s: only an in_progress batch can be cancelled", b->id,
			  b->status);
		goto out;
	}
	bapi_json(c, 200, bapi_batch_obj(b, d->cfg->price_per_hour));
out:
	mem_free(b);
	bapi_post_back(d, c);
}

/* --- the routes ------------------------------------------------------------ */

void srv__h_files_create(struct srv_req *req)
{
	bapi_queue(req, bapi_run_file_create);
}

void srv__h_files_list(struct srv_req *req)
{
	bapi_queue(req, bapi_run_files_list);
}

void srv__h_file_get(struct srv_req *req)
{
	bapi_queue(req, bapi_run_file_get);
}

void srv__h_file_content(struct srv_req *req)
{
	bapi_queue(req, bapi_run_file_content);
}

void srv__h_file_delete(struct srv_req *req)
{
	bapi_queue(req, bapi_run_file_delete);
}

void srv__h_batches_create(struct srv_req *req)
{
	bapi_queue(req, bapi_run_batch_create);
}

void srv__h_batches_list(struct srv_req *req)
{
	bapi_queue(req, bapi_run_batches_list);
}

void srv__h_batch_get(struct srv_req *req)
{
	bapi_queue(req, bapi_run_batch_get);
}

void srv__h_batch_cancel(struct srv_req *req)
{
	bapi_queue(req, bapi_run_batch_cancel);
}
