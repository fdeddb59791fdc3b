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

/* One result line of item `line` (custom_id cid) of batch id: result
 * [n] is the response body (ok) or the error object, as JSON text. */
static json_t *bs_result_line(const char *id, int64_t line, const char *cid, bool ok,
			      int status_code, const char *result, size_t n)
{
	char rid[96], qid[96];
	/* stable across a rerun of the same item: the batch's id and the line */
	snprintf(rid, sizeof(rid), "batch_req_%s_%lld", id + strlen("batch_"), (long long)line);
	snprintf(qid, sizeof(qid), "req_%s_%lld", id + strlen("batch_"), (long long)line);
	json_t *v = json_loadb(result, n, 0, NULL);
	if (!v)
		return NULL;
	if (ok)
		return json_pack("{s:s,s:s,s:{s:i,s:s,s:o},s:n}", "id", rid, "custom_id", cid,
				 "response", "status_code", status_code, "request_id", qid, "body", v,
				 "error");
	return json_pack("{s:s,s:s,s:n,s:o}", "id", rid, "custom_id", cid, "response", "error", v);
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
		json_t *l = rc ? NULL
			       : bs_result_line(id, sqlite3_column_int64(st, 0),
						(const char *)sqlite3_column_text(st, 1), !errors,
						sqlite3_column_int(st, 2), res,
						(size_t)sqlite3_column_int64(st, 3));
		char *t = l ? json_dumps(l, JSON_COMPACT) : NULL;
		if (!rc && !l)
			rc = -ST_CORRUPT; /* a stored result that is not JSON */
		else if (!rc && (!t || srv_buf_append(&o, t, strlen(t)) || srv_buf_append(&o, "\n", 1)))
			rc = -ST_NOMEM;
		free(t); /* jansson's allocator */
		json_decref(l);
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
