/* srv_bstore_out.c - a batch's output and error files (OpenAI's JSONL
 * result lines, srv_bstore.h) rendered from its ended items.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "server/batch/srv_bstore_int.h"
#include "server/srv_buf.h"

/* Append to o the result line of item `line` (custom_id cid) of batch
 * id: result [n] is the response body (status_code > 0) or the error
 * object, as JSON text, copied as it was stored (so numbers keep the
 * digits the endpoint wrote). -ST_CORRUPT when it is not one line of
 * JSON, -ST_NOMEM. */
static int bs_result_line(struct srv_buf *o, const char *id, int64_t line, const char *cid,
			  int status_code, const char *result, size_t n)
{
	while (n && (result[n - 1] == '\n' || result[n - 1] == '\r' || result[n - 1] == ' '))
		n--;
	json_t *v = json_loadb(result, n, JSON_DECODE_ANY, NULL);
	json_decref(v);
	if (!v || memchr(result, '\n', n) || memchr(result, '\r', n))
		return -ST_CORRUPT; /* our endpoints write compact JSON */
	json_t *js = json_string(cid);
	char *q = js ? json_dumps(js, JSON_ENCODE_ANY) : NULL;
	json_decref(js);
	/* stable across a rerun of the same item: the batch's id and the line */
	const char *hex = id + strlen("batch_");
	int rc = !q;
	if (!rc && status_code > 0)
		rc = srv_buf_printf(o,
				    "{\"id\":\"batch_req_%s_%lld\",\"custom_id\":%s,\"response\":"
				    "{\"status_code\":%d,\"request_id\":\"req_%s_%lld\",\"body\":",
				    hex, (long long)line, q, status_code, hex, (long long)line);
	else if (!rc)
		rc = srv_buf_printf(o,
				    "{\"id\":\"batch_req_%s_%lld\",\"custom_id\":%s,\"response\":"
				    "null,\"error\":",
				    hex, (long long)line, q);
	if (!rc)
		rc = srv_buf_append(o, result, n);
	if (!rc)
		rc = srv_buf_printf(o, status_code > 0 ? "},\"error\":null}\n" : "}\n");
	free(q); /* jansson's allocator */
	return rc ? -ST_NOMEM : 0;
}

int srv__bstore_results(struct srv_bstore *s, const char *id, bool errors, char **out,
			size_t *len)
{
	*out = NULL;
	*len = 0;
	struct srv_batch b;
	int rc = srv__bstore_batch_get(s, id, &b);
	if (rc)
		return rc;
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(s->db,
			       "SELECT line, custom_id, status_code, size, result FROM items "
			       "WHERE batch_id = ? AND state = ? ORDER BY line",
			       -1, &st, NULL) != SQLITE_OK)
		return -ST_IO;
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 2, errors ? SRV_BITEM_FAILED : SRV_BITEM_DONE);
	struct srv_buf o;
	srv_buf_init(&o, SIZE_MAX);
	int step;
	while (!rc && (step = sqlite3_step(st)) == SQLITE_ROW) {
		char *res = NULL;
		rc = srv__bs_decompress(sqlite3_column_blob(st, 4), (size_t)sqlite3_column_bytes(st, 4),
					(size_t)sqlite3_column_int64(st, 3), &res);
		if (!rc)
			rc = bs_result_line(&o, id, sqlite3_column_int64(st, 0),
					    (const char *)sqlite3_column_text(st, 1),
					    sqlite3_column_int(st, 2), res,
					    (size_t)sqlite3_column_int64(st, 3));
		mem_free(res);
	}
	if (!rc && step != SQLITE_DONE)
		rc = -ST_IO;
	sqlite3_finalize(st);
	if (rc) {
		srv_buf_fini(&o);
		return rc;
	}
	*len = o.len;
	*out = o.len ? srv_buf_steal(&o) : mem_strdup("");
	srv_buf_fini(&o);
	return *out ? 0 : -ST_NOMEM;
}

/* Fail every pending item of batch id with the error code: message. */
static int bs_fail_pending(struct srv_bstore *s, const char *id, const char *code,
			   const char *message)
{
	char *e = srv__bs_error_json(code, message);
	void *z = NULL;
	size_t zlen = 0;
	int rc = !e || srv__bs_compress(e, strlen(e), &z, &zlen) ? -ST_NOMEM : 0;
	sqlite3_stmt *st = NULL;
	if (!rc && sqlite3_prepare_v2(s->db,
				      "UPDATE items SET state = 2, status_code = 0, size = ?, "
				      "result = ?, body = NULL WHERE batch_id = ? AND state = 0",
				      -1, &st, NULL) != SQLITE_OK)
		rc = -ST_IO;
	if (!rc) {
		sqlite3_bind_int64(st, 1, (int64_t)strlen(e));
		sqlite3_bind_blob64(st, 2, z, zlen, SQLITE_STATIC);
		sqlite3_bind_text(st, 3, id, -1, SQLITE_STATIC);
		rc = sqlite3_step(st) == SQLITE_DONE ? 0 : -ST_IO;
	}
	sqlite3_finalize(st);
	mem_free(z);
	free(e); /* jansson's allocator */
	return rc;
}

/* Store the output (errors false) or error file of batch id when it has
 * a line, its id into fid ("" when none). */
static int bs_result_file(struct srv_bstore *s, const char *id, bool errors, int64_t now,
			  int64_t ttl, char fid[SRV_BSTORE_ID_MAX])
{
	fid[0] = '\0';
	char *text = NULL;
	size_t len = 0;
	int rc = srv__bstore_results(s, id, errors, &text, &len);
	if (!rc && len) {
		struct srv_bfile f = { .created_at = now, .expires_at = now + ttl };
		snprintf(f.purpose, sizeof(f.purpose), "batch_output");
		snprintf(f.filename, sizeof(f.filename), "%s_%s.jsonl", id,
			 errors ? "error" : "output");
		rc = srv__bstore_file_put(s, &f, text, len, NULL, 0);
		if (!rc)
			memcpy(fid, f.id, SRV_BSTORE_ID_MAX);
	}
	mem_free(text);
	return rc;
}

int srv__bstore_batch_finish(struct srv_bstore *s, const char *id, const char *status,
			     int64_t now, int64_t file_ttl_s, const char *fail_code,
			     const char *fail_msg)
{
	if (sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
		return -ST_IO;
	char out[SRV_BSTORE_ID_MAX], errf[SRV_BSTORE_ID_MAX];
	int rc = fail_code ? bs_fail_pending(s, id, fail_code, fail_msg) : 0;
	if (!rc)
		rc = bs_result_file(s, id, false, now, file_ttl_s, out);
	if (!rc)
		rc = bs_result_file(s, id, true, now, file_ttl_s, errf);
	if (!rc)
		rc = srv__bstore_batch_set_files(s, id, out, errf);
	if (!rc && !strcmp(status, "completed"))
		rc = srv__bstore_batch_set_status(s, id, "finalizing", now);
	if (!rc)
		rc = srv__bstore_batch_set_status(s, id, status, now);
	if (!rc && sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
		rc = -ST_IO;
	if (rc)
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	return rc;
}
