/* srv_bstore.c - the batch store in SQLite (contract in srv_bstore.h).
 *
 * Tables: files (the bytes as one zstd frame), batches, items (one row per
 * input line: its request, its state, its result as one zstd frame).
 * Every write is one transaction; an item's result and its state change
 * are the same UPDATE.
 */
#include "server/batch/srv_bstore.h"

#include <jansson.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <zstd.h>

#include "common/mem.h"
#include "common/st.h"
#include "server/batch/srv_bstore_int.h"

#define BS_ZSTD_LEVEL 3

static const char bs_schema[] =
	"PRAGMA journal_mode=WAL;"
	"PRAGMA synchronous=NORMAL;"
	"CREATE TABLE IF NOT EXISTS files ("
	" id TEXT PRIMARY KEY, purpose TEXT NOT NULL, filename TEXT NOT NULL,"
	" bytes INTEGER NOT NULL, created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL,"
	" data BLOB NOT NULL);"
	"CREATE TABLE IF NOT EXISTS batches ("
	" id TEXT PRIMARY KEY, endpoint TEXT NOT NULL, input_file_id TEXT NOT NULL,"
	" completion_window TEXT NOT NULL, status TEXT NOT NULL, created_at INTEGER NOT NULL,"
	" expires_at INTEGER NOT NULL, in_progress_at INTEGER NOT NULL DEFAULT 0,"
	" finalizing_at INTEGER NOT NULL DEFAULT 0, completed_at INTEGER NOT NULL DEFAULT 0,"
	" failed_at INTEGER NOT NULL DEFAULT 0, expired_at INTEGER NOT NULL DEFAULT 0,"
	" cancelling_at INTEGER NOT NULL DEFAULT 0, cancelled_at INTEGER NOT NULL DEFAULT 0,"
	" output_file_id TEXT NOT NULL DEFAULT '', error_file_id TEXT NOT NULL DEFAULT '',"
	" metadata TEXT NOT NULL DEFAULT 'null');"
	"CREATE TABLE IF NOT EXISTS items ("
	" batch_id TEXT NOT NULL, line INTEGER NOT NULL, custom_id TEXT NOT NULL,"
	" body TEXT, state INTEGER NOT NULL, status_code INTEGER NOT NULL DEFAULT 0,"
	" size INTEGER NOT NULL DEFAULT 0, result BLOB, audio_ms INTEGER NOT NULL DEFAULT 0,"
	" prompt_tokens INTEGER NOT NULL DEFAULT 0, completion_tokens INTEGER NOT NULL DEFAULT 0,"
	" PRIMARY KEY (batch_id, line)) WITHOUT ROWID;"
	/* the duplicate custom_id check at creation: one lookup per line */
	"CREATE INDEX IF NOT EXISTS items_custom_id ON items (batch_id, custom_id);";

int srv__bs_fail(sqlite3 *db, char *err, size_t errlen)
{
	return st_errf(-ST_IO, err, errlen, "batch store: %s", db ? sqlite3_errmsg(db) : "?");
}

int srv__bstore_open(const char *path, struct srv_bstore **out, char *err, size_t errlen)
{
	*out = NULL;
	struct srv_bstore *s = mem_calloc(1, sizeof(*s));
	if (!s)
		return st_errf(-ST_NOMEM, err, errlen, "out of memory");
	int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
	int rc = 0;
	if (sqlite3_open_v2(path, &s->db, flags, NULL) != SQLITE_OK ||
	    sqlite3_busy_timeout(s->db, 5000) != SQLITE_OK ||
	    sqlite3_exec(s->db, bs_schema, NULL, NULL, NULL) != SQLITE_OK)
		rc = st_errf(-ST_IO, err, errlen, "batch store %s: %s", path,
			     s->db ? sqlite3_errmsg(s->db) : "cannot open");
	if (rc) {
		srv__bstore_close(s);
		return rc;
	}
	*out = s;
	return 0;
}

void srv__bstore_close(struct srv_bstore *s)
{
	if (!s)
		return;
	sqlite3_close(s->db);
	mem_free(s);
}

void srv__bs_new_id(const char *prefix, char id[SRV_BSTORE_ID_MAX])
{
	unsigned char r[12];
	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		memset(r, 0, sizeof(r)); /* unreachable on Linux >= 3.17 */
	int o = snprintf(id, SRV_BSTORE_ID_MAX, "%s", prefix);
	for (size_t i = 0; i < sizeof(r) && o + 2 < SRV_BSTORE_ID_MAX; i++)
		o += snprintf(id + o, (size_t)(SRV_BSTORE_ID_MAX - o), "%02x", r[i]);
}

int srv__bs_compress(const void *data, size_t len, void **out, size_t *zlen)
{
	size_t cap = ZSTD_compressBound(len);
	void *z = mem_alloc(cap ? cap : 1);
	if (!z)
		return -ST_NOMEM;
	size_t n = ZSTD_compress(z, cap, data, len, BS_ZSTD_LEVEL);
	if (ZSTD_isError(n)) {
		mem_free(z);
		return -ST_NOMEM;
	}
	*out = z;
	*zlen = n;
	return 0;
}

int srv__bs_decompress(const void *z, size_t zlen, size_t size, char **out)
{
	char *p = mem_alloc(size + 1);
	if (!p)
		return -ST_NOMEM;
	size_t n = ZSTD_decompress(p, size, z, zlen);
	if (ZSTD_isError(n) || n != size) {
		mem_free(p);
		return -ST_CORRUPT;
	}
	p[size] = '\0';
	*out = p;
	return 0;
}

void srv__bs_copy(char *dst, size_t cap, const unsigned char *src)
{
	snprintf(dst, cap, "%s", src ? (const char *)src : "");
}

int srv__bstore_file_put(struct srv_bstore *s, struct srv_bfile *f, const void *data, size_t len,
			 char *err, size_t errlen)
{
	void *z;
	size_t zlen;
	if (srv__bs_compress(data, len, &z, &zlen))
		return st_errf(-ST_NOMEM, err, errlen, "out of memory");
	srv__bs_new_id("file-", f->id);
	f->bytes = (int64_t)len;
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(s->db,
				    "INSERT INTO files (id, purpose, filename, bytes, created_at, "
				    "expires_at, data) VALUES (?, ?, ?, ?, ?, ?, ?)",
				    -1, &st, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_bind_text(st, 1, f->id, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, f->purpose, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 3, f->filename, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 4, f->bytes);
		sqlite3_bind_int64(st, 5, f->created_at);
		sqlite3_bind_int64(st, 6, f->expires_at);
		sqlite3_bind_blob64(st, 7, z, zlen, SQLITE_STATIC);
		rc = sqlite3_step(st);
	}
	rc = rc == SQLITE_DONE ? 0 : srv__bs_fail(s->db, err, errlen);
	sqlite3_finalize(st);
	mem_free(z);
	return rc;
}

int srv__bstore_file_get(struct srv_bstore *s, const char *id, struct srv_bfile *f, char **data)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(s->db,
				    "SELECT purpose, filename, bytes, created_at, expires_at, data "
				    "FROM files WHERE id = ?",
				    -1, &st, NULL);
	if (rc != SQLITE_OK)
		return -ST_IO;
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		if (f->id != id) /* f->id may be the id asked for */
			srv__bs_copy(f->id, sizeof(f->id), (const unsigned char *)id);
		srv__bs_copy(f->purpose, sizeof(f->purpose), sqlite3_column_text(st, 0));
		srv__bs_copy(f->filename, sizeof(f->filename), sqlite3_column_text(st, 1));
		f->bytes = sqlite3_column_int64(st, 2);
		f->created_at = sqlite3_column_int64(st, 3);
		f->expires_at = sqlite3_column_int64(st, 4);
		rc = data ? srv__bs_decompress(sqlite3_column_blob(st, 5),
					  (size_t)sqlite3_column_bytes(st, 5), (size_t)f->bytes, data)
			  : 0;
	} else {
		rc = rc == SQLITE_DONE ? -ST_NOTFOUND : -ST_IO;
	}
	sqlite3_finalize(st);
	return rc;
}

int srv__bstore_file_list(struct srv_bstore *s, const char *purpose, const char *after,
			  struct srv_bfile *out, size_t max, size_t *n, bool *has_more)
{
	*n = 0;
	*has_more = false;
	struct srv_bfile a;
	int rc = after && *after ? srv__bstore_file_get(s, after, &a, NULL) : 0;
	if (rc)
		return rc;
	sqlite3_stmt *st = NULL;
	/* rowid: the order of creation (created_at has whole seconds; the
	 * store is never VACUUMed, which could renumber it) */
	if (sqlite3_prepare_v2(s->db,
			       "SELECT id, purpose, filename, bytes, created_at, expires_at FROM files "
			       "WHERE rowid < coalesce((SELECT rowid FROM files WHERE id = ?1), 1 << 62) "
			       "AND (?2 IS NULL OR purpose = ?2) ORDER BY rowid DESC LIMIT ?3",
			       -1, &st, NULL) != SQLITE_OK)
		return -ST_IO;
	sqlite3_bind_text(st, 1, after ? after : "", -1, SQLITE_STATIC);
	if (purpose)
		sqlite3_bind_text(st, 2, purpose, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, (int64_t)max + 1);
	int step;
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		if (*n == max) {
			*has_more = true;
			break;
		}
		struct srv_bfile *f = &out[(*n)++];
		srv__bs_copy(f->id, sizeof(f->id), sqlite3_column_text(st, 0));
		srv__bs_copy(f->purpose, sizeof(f->purpose), sqlite3_column_text(st, 1));
		srv__bs_copy(f->filename, sizeof(f->filename), sqlite3_column_text(st, 2));
		f->bytes = sqlite3_column_int64(st, 3);
		f->created_at = sqlite3_column_int64(st, 4);
		f->expires_at = sqlite3_column_int64(st, 5);
	}
	rc = step == SQLITE_ROW || step == SQLITE_DONE ? 0 : -ST_IO;
	sqlite3_finalize(st);
	return rc;
}

int srv__bs_exec2(struct srv_bstore *s, const char *sql, const char *a, const char *b)
{
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
		return -ST_IO;
	if (a)
		sqlite3_bind_text(st, 1, a, -1, SQLITE_STATIC);
	if (b)
		sqlite3_bind_text(st, 2, b, -1, SQLITE_STATIC);
	int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : -ST_IO;
	if (!rc && sqlite3_changes(s->db) == 0)
		rc = -ST_NOTFOUND;
	sqlite3_finalize(st);
	return rc;
}

int srv__bstore_file_delete(struct srv_bstore *s, const char *id)
{
	return srv__bs_exec2(s, "DELETE FROM files WHERE id = ?", id, NULL);
}

int64_t srv__bstore_bytes(struct srv_bstore *s)
{
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(s->db,
			       "SELECT (page_count - freelist_count) * page_size FROM "
			       "pragma_page_count(), pragma_freelist_count(), pragma_page_size()",
			       -1, &st, NULL) != SQLITE_OK)
		return -ST_IO;
	int64_t n = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -ST_IO;
	sqlite3_finalize(st);
	return n;
}

int srv__bstore_expire(struct srv_bstore *s, int64_t now)
{
	char sql[512];
	snprintf(sql, sizeof(sql),
		 "DELETE FROM files WHERE expires_at > 0 AND expires_at <= %lld;", (long long)now);
	if (sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
		return -ST_IO;
	int rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -ST_IO;
	int removed = rc ? 0 : sqlite3_changes(s->db);
	/* an ended batch goes with the last of its files */
	static const char gone[] =
		"DELETE FROM items WHERE batch_id IN (SELECT id FROM batches b WHERE status IN "
		"('completed', 'failed', 'expired', 'cancelled') AND NOT EXISTS (SELECT 1 FROM "
		"files f WHERE f.id IN (b.input_file_id, b.output_file_id, b.error_file_id)));"
		"DELETE FROM batches WHERE status IN ('completed', 'failed', 'expired', "
		"'cancelled') AND NOT EXISTS (SELECT 1 FROM files f WHERE f.id IN "
		"(batches.input_file_id, batches.output_file_id, batches.error_file_id));";
	if (!rc && sqlite3_exec(s->db, gone, NULL, NULL, NULL) != SQLITE_OK)
		rc = -ST_IO;
	if (!rc && sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
		rc = -ST_IO;
	if (rc)
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	return rc ? rc : removed;
}
