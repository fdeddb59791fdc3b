/* srv_bstore_batch.c - batches and their items in the batch store
 * (contract in srv_bstore.h): an input file's lines become items at
 * creation, each ends once with its result compressed beside it, and the
 * output and error files are rendered from the ended items in line order.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "server/batch/srv_bstore_int.h"

/* One input line's item: custom_id and the request body's JSON, or why
 * the line is refused (err set, body NULL). */
struct bs_line {
	char custom_id[128];
	char *body;
	char err[256];
};

/* Parse line n (1-based) of an input file for endpoint into *l. */
static void bs_parse_line(const char *text, size_t len, int64_t n, const char *endpoint,
			  struct bs_line *l)
{
	memset(l, 0, sizeof(*l));
	json_error_t je;
	json_t *o = json_loadb(text, len, 0, &je);
	json_t *cid = json_object_get(o, "custom_id"), *method = json_object_get(o, "method");
	json_t *url = json_object_get(o, "url"), *body = json_object_get(o, "body");
	if (!o)
		snprintf(l->err, sizeof(l->err), "line %lld is not JSON: %s", (long long)n, je.text);
	else if (!json_is_object(o))
		snprintf(l->err, sizeof(l->err), "line %lld is not a JSON object", (long long)n);
	else if (!json_is_string(cid) || !json_string_length(cid) ||
		 json_string_length(cid) >= sizeof(l->custom_id))
		snprintf(l->err, sizeof(l->err), "line %lld: custom_id must be a string of 1..%zu bytes",
			 (long long)n, sizeof(l->custom_id) - 1);
	else if (!json_is_string(method) || strcmp(json_string_value(method), "POST"))
		snprintf(l->err, sizeof(l->err), "line %lld: method must be \"POST\"", (long long)n);
	else if (!json_is_string(url) || strcmp(json_string_value(url), endpoint))
		snprintf(l->err, sizeof(l->err), "line %lld: url must be the batch's endpoint, %s",
			 (long long)n, endpoint);
	else if (!json_is_object(body))
		snprintf(l->err, sizeof(l->err), "line %lld: body must be a JSON object", (long long)n);
	if (json_is_string(cid))
		snprintf(l->custom_id, sizeof(l->custom_id), "%s", json_string_value(cid));
	if (!l->err[0]) {
		l->body = json_dumps(body, JSON_COMPACT);
		if (!l->body)
			snprintf(l->err, sizeof(l->err), "line %lld: out of memory", (long long)n);
	}
	json_decref(o);
}

char *srv__bs_error_json(const char *code, const char *message)
{
	json_t *e = json_pack("{s:s,s:s}", "code", code ? code : "error", "message",
			      message ? message : "");
	char *t = e ? json_dumps(e, JSON_COMPACT) : NULL;
	json_decref(e);
	return t;
}

/* Insert item n with its state and, for a failed one, its error. */
static int bs_insert_item(sqlite3_stmt *st, const char *id, int64_t n, const struct bs_line *l)
{
	int rc = 0;
	void *z = NULL;
	size_t zlen = 0;
	char *e = l->body ? NULL : srv__bs_error_json("invalid_request", l->err);
	if (!l->body && (!e || srv__bs_compress(e, strlen(e), &z, &zlen)))
		rc = -ST_NOMEM;
	sqlite3_reset(st);
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, n);
	sqlite3_bind_text(st, 3, l->custom_id, -1, SQLITE_STATIC);
	if (l->body)
		sqlite3_bind_text(st, 4, l->body, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, 4);
	sqlite3_bind_int(st, 5, l->body ? SRV_BITEM_PENDING : SRV_BITEM_FAILED);
	sqlite3_bind_int64(st, 6, e ? (int64_t)strlen(e) : 0);
	if (z)
		sqlite3_bind_blob64(st, 7, z, zlen, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, 7);
	if (!rc && sqlite3_step(st) != SQLITE_DONE)
		rc = -ST_IO;
	mem_free(z);
	free(e); /* jansson's allocator */
	return rc;
}

/* Every non-empty line of text [len] as an item of batch id. A
 * custom_id seen before fails its later line. */
static int bs_insert_lines(struct srv_bstore *s, const char *id, const char *endpoint,
			   const char *text, size_t len, size_t max_lines, int64_t *n_items,
			   char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL, *dup = NULL;
	if (sqlite3_prepare_v2(s->db,
			       "INSERT INTO items (batch_id, line, custom_id, body, state, size, "
			       "result) VALUES (?, ?, ?, ?, ?, ?, ?)",
			       -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(s->db,
			       "SELECT 1 FROM items WHERE batch_id = ? AND custom_id = ? LIMIT 1", -1,
			       &dup, NULL) != SQLITE_OK) {
		sqlite3_finalize(st);
		return srv__bs_fail(s->db, err, errlen);
	}
	int rc = 0;
	int64_t n = 0, items = 0;
	for (size_t at = 0; at < len && !rc;) {
		const char *nl = memchr(text + at, '\n', len - at);
		size_t end = nl ? (size_t)(nl - text) : len, l_len = end - at;
		n++;
		if (l_len && text[at + l_len - 1] == '\r')
			l_len--;
		bool blank = strspn(text + at, " \t\r") >= l_len;
		if (!blank && (size_t)items == max_lines) {
			rc = st_errf(-ST_INVAL, err, errlen,
				     "the input file has more than %zu requests", max_lines);
			break;
		}
		if (!blank) {
			struct bs_line l;
			bs_parse_line(text + at, l_len, n, endpoint, &l);
			sqlite3_reset(dup);
			sqlite3_bind_text(dup, 1, id, -1, SQLITE_STATIC);
			sqlite3_bind_text(dup, 2, l.custom_id, -1, SQLITE_STATIC);
			if (l.body && sqlite3_step(dup) == SQLITE_ROW) {
				free(l.body); /* jansson's allocator */
				l.body = NULL;
				snprintf(l.err, sizeof(l.err), "line %lld: custom_id \"%s\" is used by "
					 "an earlier line", (long long)n, l.custom_id);
			}
			rc = bs_insert_item(st, id, n, &l);
			free(l.body); /* jansson's allocator */
			items++;
		}
		at = end + 1;
	}
	sqlite3_finalize(st);
	sqlite3_finalize(dup);
	if (!rc && items == 0)
		rc = st_errf(-ST_INVAL, err, errlen, "the input file has no request line");
	if (rc == -ST_IO)
		srv__bs_fail(s->db, err, errlen);
	*n_items = items;
	return rc;
}

int srv__bstore_batch_create(struct srv_bstore *s, struct srv_batch *b, size_t max_lines,
			     char *err, size_t errlen)
{
	struct srv_bfile f;
	char *text = NULL;
	int rc = srv__bstore_file_get(s, b->input_file_id, &f, &text);
	if (rc == -ST_NOTFOUND)
		return st_errf(rc, err, errlen, "no file %s", b->input_file_id);
	if (rc)
		return st_errf(rc, err, errlen, "file %s: %s", b->input_file_id, st_str(rc));
	srv__bs_new_id("batch_", b->id);
	snprintf(b->status, sizeof(b->status), "in_progress");
	if (sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
		mem_free(text);
		return srv__bs_fail(s->db, err, errlen);
	}
	sqlite3_stmt *st = NULL;
	rc = sqlite3_prepare_v2(s->db,
				"INSERT INTO batches (id, endpoint, input_file_id, completion_window, "
				"status, created_at, expires_at, in_progress_at, metadata) "
				"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
				-1, &st, NULL) == SQLITE_OK ? 0 : -ST_IO;
	if (!rc) {
		sqlite3_bind_text(st, 1, b->id, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, b->endpoint, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 3, b->input_file_id, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 4, b->completion_window, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 5, b->status, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 6, b->created_at);
		sqlite3_bind_int64(st, 7, b->expires_at);
		sqlite3_bind_int64(st, 8, b->created_at);
		sqlite3_bind_text(st, 9, b->metadata[0] ? b->metadata : "null", -1, SQLITE_STATIC);
		rc = sqlite3_step(st) == SQLITE_DONE ? 0 : -ST_IO;
	}
	sqlite3_finalize(st);
	if (rc)
		srv__bs_fail(s->db, err, errlen);
	int64_t items = 0;
	if (!rc)
		rc = bs_insert_lines(s, b->id, b->endpoint, text, (size_t)f.bytes, max_lines, &items,
				     err, errlen);
	mem_free(text);
	if (!rc && sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
		rc = srv__bs_fail(s->db, err, errlen);
	if (rc) {
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
		return rc;
	}
	return srv__bstore_batch_get(s, b->id, b);
}

/* The columns bs_batch_row reads, from "batches b". */
#define BS_BATCH_COLS                                                                        \
	"b.id, endpoint, input_file_id, output_file_id, error_file_id, completion_window, "   \
	"status, metadata, created_at, in_progress_at, finalizing_at, completed_at, "         \
	"failed_at, expired_at, cancelling_at, cancelled_at, expires_at, "                    \
	"(SELECT count(*) FROM items WHERE batch_id = b.id), "                               \
	"(SELECT count(*) FROM items WHERE batch_id = b.id AND state = 1), "                 \
	"(SELECT count(*) FROM items WHERE batch_id = b.id AND state = 2), "                 \
	"(SELECT total(audio_ms) FROM items WHERE batch_id = b.id), "                        \
	"(SELECT total(prompt_tokens) FROM items WHERE batch_id = b.id), "                   \
	"(SELECT total(completion_tokens) FROM items WHERE batch_id = b.id)"

/* The row of st (BS_BATCH_COLS) into *b. */
static void bs_batch_row(sqlite3_stmt *st, struct srv_batch *b)
{
	srv__bs_copy(b->id, sizeof(b->id), sqlite3_column_text(st, 0));
	srv__bs_copy(b->endpoint, sizeof(b->endpoint), sqlite3_column_text(st, 1));
	srv__bs_copy(b->input_file_id, sizeof(b->input_file_id), sqlite3_column_text(st, 2));
	srv__bs_copy(b->output_file_id, sizeof(b->output_file_id), sqlite3_column_text(st, 3));
	srv__bs_copy(b->error_file_id, sizeof(b->error_file_id), sqlite3_column_text(st, 4));
	srv__bs_copy(b->completion_window, sizeof(b->completion_window), sqlite3_column_text(st, 5));
	srv__bs_copy(b->status, sizeof(b->status), sqlite3_column_text(st, 6));
	srv__bs_copy(b->metadata, sizeof(b->metadata), sqlite3_column_text(st, 7));
	int64_t *t[] = { &b->created_at,  &b->in_progress_at, &b->finalizing_at,
			 &b->completed_at, &b->failed_at,      &b->expired_at,
			 &b->cancelling_at, &b->cancelled_at,  &b->expires_at,
			 &b->total,       &b->done,           &b->failed };
	for (int i = 0; i < (int)(sizeof(t) / sizeof(t[0])); i++)
		*t[i] = sqlite3_column_int64(st, 8 + i);
	b->audio_s = sqlite3_column_double(st, 20) / 1000.0;
	b->prompt_tokens = sqlite3_column_int64(st, 21);
	b->completion_tokens = sqlite3_column_int64(st, 22);
}

int srv__bstore_batch_get(struct srv_bstore *s, const char *id_in, struct srv_batch *b)
{
	char id[SRV_BSTORE_ID_MAX]; /* id_in may be b->id */
	snprintf(id, sizeof(id), "%s", id_in);
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(s->db, "SELECT " BS_BATCH_COLS " FROM batches b WHERE id = ?", -1,
			       &st, NULL) != SQLITE_OK)
		return -ST_IO;
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		bs_batch_row(st, b);
		rc = 0;
	} else {
		rc = rc == SQLITE_DONE ? -ST_NOTFOUND : -ST_IO;
	}
	sqlite3_finalize(st);
	return rc;
}

/* Whether batch id exists. */
static bool bs_batch_exists(struct srv_bstore *s, const char *id)
{
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(s->db, "SELECT 1 FROM batches WHERE id = ?", -1, &st, NULL) !=
	    SQLITE_OK)
		return false;
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	bool yes = sqlite3_step(st) == SQLITE_ROW;
	sqlite3_finalize(st);
	return yes;
}

int srv__bstore_batch_list(struct srv_bstore *s, const char *after, bool open_only,
			   struct srv_batch *out, size_t max, size_t *n, bool *has_more)
{
	*n = 0;
	*has_more = false;
	sqlite3_stmt *st = NULL;
	/* rowid: the order of creation (created_at has whole seconds; the
	 * store is never VACUUMed, which could renumber it) */
	const char *sql =
		open_only ? "SELECT " BS_BATCH_COLS " FROM batches b WHERE status IN "
			    "('in_progress', 'finalizing', 'cancelling') AND rowid > "
			    "coalesce((SELECT rowid FROM batches WHERE id = ?1), -1) "
			    "ORDER BY rowid LIMIT ?2"
			  : "SELECT " BS_BATCH_COLS " FROM batches b WHERE rowid < "
			    "coalesce((SELECT rowid FROM batches WHERE id = ?1), 1 << 62) "
			    "ORDER BY rowid DESC LIMIT ?2";
	if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
		return -ST_IO;
	sqlite3_bind_text(st, 1, after ? after : "", -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, (int64_t)max + 1);
	if (after && *after && !bs_batch_exists(s, after)) {
		sqlite3_finalize(st);
		return -ST_NOTFOUND;
	}
	int step;
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		if (*n == max) {
			*has_more = true;
			break;
		}
		bs_batch_row(st, &out[(*n)++]);
	}
	int rc = step == SQLITE_ROW || step == SQLITE_DONE ? 0 : -ST_IO;
	sqlite3_finalize(st);
	return rc;
}

int srv__bstore_batch_set_status(struct srv_bstore *s, const char *id, const char *status,
				 int64_t now)
{
	static const char *const statuses[] = { "in_progress", "finalizing", "completed",
						 "failed",      "expired",    "cancelling",
						 "cancelled" };
	size_t i = 0;
	while (i < sizeof(statuses) / sizeof(statuses[0]) && strcmp(statuses[i], status))
		i++;
	if (i == sizeof(statuses) / sizeof(statuses[0]))
		return -ST_INVAL;
	char sql[160];
	snprintf(sql, sizeof(sql), "UPDATE batches SET status = ?, %s_at = %lld WHERE id = ?",
		 statuses[i], (long long)now);
	return srv__bs_exec2(s, sql, status, id);
}

int srv__bstore_batch_set_files(struct srv_bstore *s, const char *id, const char *output_file_id,
				const char *error_file_id)
{
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(s->db,
			       "UPDATE batches SET output_file_id = ?, error_file_id = ? WHERE id = ?",
			       -1, &st, NULL) != SQLITE_OK)
		return -ST_IO;
	sqlite3_bind_text(st, 1, output_file_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, error_file_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, id, -1, SQLITE_STATIC);
	int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : -ST_IO;
	if (!rc && sqlite3_changes(s->db) == 0)
		rc = -ST_NOTFOUND;
	sqlite3_finalize(st);
	return rc;
}

int srv__bstore_items_pending(struct srv_bstore *s, const char *id, int64_t after,
			      struct srv_bitem *items, size_t max, size_t *n)
{
	*n = 0;
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(s->db,
			       "SELECT line, custom_id, body FROM items WHERE batch_id = ? AND "
			       "state = 0 AND line > ? ORDER BY line LIMIT ?",
			       -1, &st, NULL) != SQLITE_OK)
		return -ST_IO;
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, after);
	sqlite3_bind_int64(st, 3, (int64_t)max);
	int rc = 0, step;
	while (!rc && (step = sqlite3_step(st)) == SQLITE_ROW) {
		struct srv_bitem *it = &items[*n];
		it->line = sqlite3_column_int64(st, 0);
		srv__bs_copy(it->custom_id, sizeof(it->custom_id), sqlite3_column_text(st, 1));
		it->body = mem_strdup((const char *)sqlite3_column_text(st, 2));
		if (!it->body)
			rc = -ST_NOMEM;
		else
			(*n)++;
	}
	if (!rc && step != SQLITE_DONE)
		rc = -ST_IO;
	sqlite3_finalize(st);
	if (rc) {
		srv__bstore_items_free(items, *n);
		*n = 0;
	}
	return rc;
}

void srv__bstore_items_free(struct srv_bitem *items, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		mem_free(items[i].body);
		items[i].body = NULL;
	}
}

/* 1 when item line of batch id exists (so it had ended), else
 * -ST_NOTFOUND or -ST_IO. */
static int bs_item_exists(struct srv_bstore *s, const char *id, int64_t line)
{
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(s->db, "SELECT 1 FROM items WHERE batch_id = ? AND line = ?", -1,
			       &st, NULL) != SQLITE_OK)
		return -ST_IO;
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, line);
	int step = sqlite3_step(st);
	sqlite3_finalize(st);
	return step == SQLITE_ROW ? 1 : step == SQLITE_DONE ? -ST_NOTFOUND : -ST_IO;
}

void srv__bstore_usage(const char *body, size_t len, int64_t *audio_ms, int64_t *prompt,
		     int64_t *completion)
{
	*audio_ms = *prompt = *completion = 0;
	json_t *o = json_loadb(body, len, 0, NULL);
	json_t *u = json_object_get(o, "usage"), *dur = json_object_get(o, "duration");
	double secs = json_is_number(dur) ? json_number_value(dur)
					  : json_number_value(json_object_get(u, "seconds"));
	if (secs > 0 && secs < 1e9)
		*audio_ms = (int64_t)(secs * 1000.0 + 0.5);
	*prompt = json_integer_value(json_object_get(u, "prompt_tokens"));
	*completion = json_integer_value(json_object_get(u, "completion_tokens"));
	json_decref(o);
}

int srv__bstore_item_end(struct srv_bstore *s, const char *id, int64_t line, bool ok,
			 int status_code, const char *body, size_t len, double audio_s,
			 const char *code, const char *message)
{
	bool response = status_code > 0;
	char *e = response ? NULL : srv__bs_error_json(code, message);
	const char *res = response ? body : e;
	size_t res_len = response ? len : e ? strlen(e) : 0;
	void *z = NULL;
	size_t zlen = 0;
	int rc = !res || srv__bs_compress(res, res_len, &z, &zlen) ? -ST_NOMEM : 0;
	sqlite3_stmt *st = NULL;
	if (!rc && sqlite3_prepare_v2(s->db,
				      "UPDATE items SET state = ?, status_code = ?, size = ?, "
				      "result = ?, body = NULL, audio_ms = ?, prompt_tokens = ?, "
				      "completion_tokens = ? WHERE batch_id = ? AND line = ? AND "
				      "state = 0",
				      -1, &st, NULL) != SQLITE_OK)
		rc = -ST_IO;
	if (!rc) {
		sqlite3_bind_int(st, 1, ok && response ? SRV_BITEM_DONE : SRV_BITEM_FAILED);
		sqlite3_bind_int(st, 2, status_code);
		sqlite3_bind_int64(st, 3, (int64_t)res_len);
		sqlite3_bind_blob64(st, 4, z, zlen, SQLITE_STATIC);
		int64_t u[3] = { 0, 0, 0 };
		if (ok && response)
			srv__bstore_usage(body, len, &u[0], &u[1], &u[2]);
		if (ok && response && audio_s >= 0)
			u[0] = (int64_t)(audio_s * 1000.0 + 0.5);
		for (int i = 0; i < 3; i++)
			sqlite3_bind_int64(st, 5 + i, u[i]);
		sqlite3_bind_text(st, 8, id, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 9, line);
		int step = sqlite3_step(st);
		rc = step == SQLITE_DONE ? 0 : step == SQLITE_FULL ? -ST_TOOBIG : -ST_IO;
	}
	bool none = !rc && sqlite3_changes(s->db) == 0;
	sqlite3_finalize(st);
	if (none) /* ended already, or no such item */
		rc = bs_item_exists(s, id, line);
	mem_free(z);
	free(e); /* jansson's allocator */
	return rc;
}
