/* srv_bstore_int.h - what the batch store's files share (srv_bstore.c:
 * the database, files; srv_bstore_batch.c: batches and items). */
#ifndef SRV_BSTORE_INT_H
#define SRV_BSTORE_INT_H

#include <sqlite3.h>
#include <stddef.h>

#include "server/batch/srv_bstore.h"

struct srv_bstore {
	sqlite3 *db; /* this thread's connection */
};

/* srv__bs_fail - SQLite's message for the last failure on db as err,
 * returns -ST_IO. */
int srv__bs_fail(sqlite3 *db, char *err, size_t errlen);

/* srv__bs_new_id - prefix and 24 random hex digits (getrandom). */
void srv__bs_new_id(const char *prefix, char id[SRV_BSTORE_ID_MAX]);

/* srv__bs_compress - data [len] as one zstd frame, *out new (mem_free),
 * *zlen bytes; -ST_NOMEM. srv__bs_decompress - the frame z [zlen] back
 * to its size bytes, *out new and NUL-ended; -ST_CORRUPT when it does
 * not give exactly size bytes, -ST_NOMEM. */
int srv__bs_compress(const void *data, size_t len, void **out, size_t *zlen);
int srv__bs_decompress(const void *z, size_t zlen, size_t size, char **out);

/* srv__bs_error_json - the error object {"code", "message"} of a failed
 * item, as JSON text (json_dumps: free()), or NULL out of memory. */
char *srv__bs_error_json(const char *code, const char *message);

/* srv__bs_copy - the column text src (NULL: "") into dst [cap], cut. */
void srv__bs_copy(char *dst, size_t cap, const unsigned char *src);

/* srv__bs_exec2 - run sql with text arguments a, b (NULL: unbound): 0,
 * -ST_NOTFOUND when it changed no row, -ST_IO. */
int srv__bs_exec2(struct srv_bstore *s, const char *sql, const char *a, const char *b);

#endif /* SRV_BSTORE_INT_H */
