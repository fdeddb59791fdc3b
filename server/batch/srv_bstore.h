/* srv_bstore.h - the batch store: OpenAI Batch API files, batches and
 * their items, in one SQLite database (WAL mode). Internal to server/.
 *
 * What it promises (issue 20's durability):
 *   - a file's bytes are kept zstd-compressed; an item's result is
 *     written, compressed, in the same transaction that marks it ended,
 *     so a process killed at any moment (SIGKILL) loses at most the items
 *     in flight and never an ended one (WAL with synchronous=NORMAL is
 *     durable against a process crash; a power cut may lose the last
 *     transactions, never corrupt the database);
 *   - an item ends once: srv__bstore_item_end on an item already ended
 *     changes nothing and says so, so work redone after a restart cannot
 *     give an item a second result;
 *   - "running" is not stored: after a restart every item not ended is
 *     pending again.
 *
 * The shapes follow OpenAI's Batch API (platform.openai.com/docs/api-reference/batch):
 * an input file holds JSONL lines {"custom_id", "method", "url", "body"};
 * an output line is {"id", "custom_id", "response": {"status_code",
 * "request_id", "body"}, "error": null}, an error line has "response":
 * null and "error": {"code", "message"}.
 *
 * Thread: one struct srv_bstore per thread (SQLite's own connections);
 * several may open one path at once (WAL readers and one writer, a busy
 * timeout of 5 s).
 */
#ifndef SRV_BSTORE_H
#define SRV_BSTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SRV_BSTORE_ID_MAX 40 /* "file-" / "batch_" + 24 hex digits, with its NUL */
#define SRV_BSTORE_META_MAX 4096 /* a batch's metadata as JSON text, with its NUL */

struct srv_bstore;

/* srv__bstore_open - open (creating it and its tables if new) the
 * database at path. *out new, closed with srv__bstore_close (NULL: no-op).
 * Errors: -ST_IO (cannot open or not a database, err says SQLite's
 * reason), -ST_NOMEM. */
int srv__bstore_open(const char *path, struct srv_bstore **out, char *err, size_t errlen);
void srv__bstore_close(struct srv_bstore *s);

/* A file's record. */
struct srv_bfile {
	char id[SRV_BSTORE_ID_MAX];
	char purpose[32];     /* "batch", "batch_output" */
	char filename[256];   /* as uploaded, cut to fit */
	int64_t bytes;        /* uncompressed */
	int64_t created_at;   /* Unix seconds */
	int64_t expires_at;   /* Unix seconds, 0: never */
};

/* srv__bstore_file_put - store data [len] as a new file (compressed),
 * its id into f->id; f's purpose, filename, created_at and expires_at
 * are the caller's. -ST_IO (the disk, err says), -ST_NOMEM. */
int srv__bstore_file_put(struct srv_bstore *s, struct srv_bfile *f, const void *data, size_t len,
			 char *err, size_t errlen);

/* srv__bstore_file_get - the record of file id into *f; with data
 * non-NULL also its bytes, *data new (mem_free; NUL-terminated past
 * f->bytes). -ST_NOTFOUND, -ST_CORRUPT (the stored frame does not
 * decompress to its size), -ST_IO, -ST_NOMEM. */
int srv__bstore_file_get(struct srv_bstore *s, const char *id, struct srv_bfile *f, char **data);

/* srv__bstore_file_list - up to max file records (not their bytes),
 * newest first (in the order of creation), of purpose (NULL: any) after
 * file `after` in that order
 * (NULL or "": from the newest), into out[] (*n); *has_more when more
 * follow. -ST_NOTFOUND (no file `after`), -ST_IO. */
int srv__bstore_file_list(struct srv_bstore *s, const char *purpose, const char *after,
			  struct srv_bfile *out, size_t max, size_t *n, bool *has_more);

/* srv__bstore_file_delete - remove file id. -ST_NOTFOUND, -ST_IO. */
int srv__bstore_file_delete(struct srv_bstore *s, const char *id);

/* Item states, as stored. */
enum srv_bitem_state { SRV_BITEM_PENDING = 0, SRV_BITEM_DONE = 1, SRV_BITEM_FAILED = 2 };

/* A batch's record, its item counts computed from the items. */
struct srv_batch {
	char id[SRV_BSTORE_ID_MAX];
	char endpoint[64];         /* "/v1/chat/completions", ... */
	char input_file_id[SRV_BSTORE_ID_MAX];
	char output_file_id[SRV_BSTORE_ID_MAX]; /* "" until the batch ends */
	char error_file_id[SRV_BSTORE_ID_MAX];  /* "" until it ends with failed items */
	char completion_window[16]; /* "24h" */
	char status[16];           /* OpenAI's: validating, in_progress, finalizing,
				    * completed, failed, expired, cancelling, cancelled */
	char metadata[SRV_BSTORE_META_MAX]; /* JSON text: an object of strings, or "null" */
	/* Unix seconds, 0: not yet; each status's time is set by
	 * srv__bstore_batch_set_status when the batch enters it */
	int64_t created_at, in_progress_at, finalizing_at, completed_at, failed_at, expired_at,
		cancelling_at, cancelled_at, expires_at;
	int64_t total, done, failed; /* items: all, ended with a 2xx response, ended otherwise */
	/* what the done items used, from their answers' OpenAI fields
	 * (srv__bstore_item_end) */
	double audio_s;              /* audio transcribed, seconds */
	int64_t prompt_tokens, completion_tokens;
};

/* srv__bstore_batch_create - a batch of the lines of input file
 * b->input_file_id for b->endpoint, its id into b->id, status
 * "in_progress", each non-empty line an item. A line that is not a JSON
 * object with a string custom_id, method "POST", url equal to the
 * endpoint and an object body is an item failed at once, its reason its
 * error ("invalid_request": what is wrong, and the line number); two
 * lines with one custom_id likewise. b's endpoint, completion_window,
 * metadata ("" or "null": none), created_at and expires_at are the
 * caller's; in_progress_at is created_at. Errors: -ST_NOTFOUND (no
 * such file; err says), -ST_INVAL (no line at all, or more than
 * max_lines: err says), -ST_IO, -ST_NOMEM. */
int srv__bstore_batch_create(struct srv_bstore *s, struct srv_batch *b, size_t max_lines,
			     char *err, size_t errlen);

/* srv__bstore_batch_get - batch id into *b (counts current).
 * -ST_NOTFOUND, -ST_IO. */
int srv__bstore_batch_get(struct srv_bstore *s, const char *id, struct srv_batch *b);

/* srv__bstore_batch_set_status - b's status, and the time of that status
 * (in_progress_at, finalizing_at, ..., cancelled_at) now. -ST_NOTFOUND,
 * -ST_INVAL (not one of OpenAI's statuses), -ST_IO. */
int srv__bstore_batch_set_status(struct srv_bstore *s, const char *id, const char *status,
				 int64_t now);

/* srv__bstore_batch_set_files - record the output and error files of
 * batch id ("" for none). -ST_NOTFOUND, -ST_IO. */
int srv__bstore_batch_set_files(struct srv_bstore *s, const char *id, const char *output_file_id,
				const char *error_file_id);

/* srv__bstore_batch_list - up to max batches, newest first (in the
 * order of creation), after the
 * batch `after` in that order (NULL or "": from the newest), into out[]
 * (*n of them); *has_more when more follow. With open_only, only those
 * not ended (in_progress, finalizing, cancelling), oldest first.
 * -ST_NOTFOUND (no batch `after`), -ST_IO. */
int srv__bstore_batch_list(struct srv_bstore *s, const char *after, bool open_only,
			   struct srv_batch *out, size_t max, size_t *n, bool *has_more);

/* srv__bstore_bytes - the bytes the database's pages in use hold (the
 * pages freed by deletions are reused, not counted); -ST_IO. */
int64_t srv__bstore_bytes(struct srv_bstore *s);

/* srv__bstore_expire - remove the files whose expires_at has passed at
 * now, and the ended batches (with their items) whose files are all
 * gone or expired. Returns the files removed, or -ST_IO. */
int srv__bstore_expire(struct srv_bstore *s, int64_t now);

/* One item to run: its line (1-based) and request body (JSON text). */
struct srv_bitem {
	int64_t line;
	char custom_id[128];
	char *body; /* new (mem_free), NUL-terminated */
};

/* srv__bstore_items_pending - up to max pending items of batch id after
 * line `after`, in line order, into items[] (*n of them; free each body
 * with srv__bstore_items_free). -ST_IO, -ST_NOMEM. */
int srv__bstore_items_pending(struct srv_bstore *s, const char *id, int64_t after,
			      struct srv_bitem *items, size_t max, size_t *n);
void srv__bstore_items_free(struct srv_bitem *items, size_t n);

/* srv__bstore_item_end - end item `line` of batch id with a response
 * (status_code > 0 and its JSON body [len]: state done when ok, failed
 * otherwise, a non-2xx answer) or, with status_code 0, an error without
 * a response (code and message; failed). The result is compressed and
 * written in the transaction that marks the item ended, with what a 2xx
 * answer used: audio_s seconds of audio (< 0: its "duration" or
 * usage.seconds), its usage.prompt_tokens and usage.completion_tokens.
 * Returns 0, 1 when the item had ended already (nothing changed),
 * -ST_NOTFOUND, -ST_TOOBIG (the disk is full), -ST_IO, -ST_NOMEM. */
int srv__bstore_item_end(struct srv_bstore *s, const char *id, int64_t line, bool ok,
			 int status_code, const char *body, size_t len, double audio_s,
			 const char *code, const char *message);

/* srv__bstore_usage - what an endpoint's 2xx answer body [len] used,
 * from its OpenAI fields: audio seconds ("duration", verbose_json's exact
 * ones, else usage.seconds, whole ones) in ms, and usage.prompt_tokens,
 * usage.completion_tokens; 0 for what it does not say. */
void srv__bstore_usage(const char *body, size_t len, int64_t *audio_ms, int64_t *prompt,
		       int64_t *completion);

/* srv__bstore_results - the JSONL of batch id's ended items of one kind
 * (errors false: those done, OpenAI's output file; true: those failed,
 * its error file, with their non-2xx response or their error), in line
 * order, *out new
 * (mem_free), *len bytes. -ST_NOTFOUND, -ST_CORRUPT, -ST_IO, -ST_NOMEM. */
int srv__bstore_results(struct srv_bstore *s, const char *id, bool errors, char **out,
			size_t *len);

/* srv__bstore_batch_finish - end batch id in one transaction: with
 * fail_code, its items still pending fail with that error (code,
 * message: an expired batch's "batch_expired"); its output file (the
 * done items) and error file (the failed ones) are stored, purpose
 * "batch_output", when not empty, expiring file_ttl_s after now, and
 * recorded; its status becomes status ("completed", "cancelled",
 * "expired", "failed") at now. A crash before the commit leaves the
 * batch as it was, to be finished again. -ST_NOTFOUND, -ST_IO,
 * -ST_NOMEM, -ST_CORRUPT. */
int srv__bstore_batch_finish(struct srv_bstore *s, const char *id, const char *status,
			     int64_t now, int64_t file_ttl_s, const char *fail_code,
			     const char *fail_msg);

#endif /* SRV_BSTORE_H */
