/* srv_batch.h - the Batch API service (OpenAI's Files and Batches
 * shapes, platform.openai.com/docs/api-reference/batch): the routes'
 * handlers, and the threads that keep the batch store and run the
 * batches' items. Internal to server/.
 *
 * Threads (no SQLite and no blocking I/O on the loop thread):
 *   - the loop thread's handlers only queue a command (the request's
 *     connection held, as an engine job holds it) for
 *   - the batch thread, which owns one store connection, runs the
 *     commands one at a time and posts each answer back to the loop
 *     (srv__post);
 *   - runner threads (batch.concurrency of them), each an HTTP client of
 *     this very server over a socketpair (srv__conn_open_internal), with
 *     its own store connection: a runner takes the next pending item of
 *     the oldest open batch, sends it to its endpoint with
 *     "Inferd-Priority: batch" (the scheduler's class below every
 *     interactive request), and ends the item with the answer. A 429 or
 *     a 503 leaves the item pending to be tried again.
 */
#ifndef SRV_BATCH_H
#define SRV_BATCH_H

#include <stddef.h>

struct srv;
struct srv_req;

/* srv__batch_start - start the service of srv (its engine set): the
 * store is opened if it exists (its open batches resume) and the threads
 * started. 0, or -ST_* with err (the store cannot be read, no thread).
 * Loop thread, before uv_run. */
int srv__batch_start(struct srv *srv, char *err, size_t errlen);

/* srv__batch_drain - the server is stopping: runners take no new item,
 * and end once their request in flight is answered (an item cut by the
 * drain deadline stays pending for the next start). Loop thread; NULL
 * service: no-op. */
void srv__batch_drain(struct srv *srv);

/* srv__batch_stop - join the threads and close the store; after the
 * loop has ended. Safe twice. */
void srv__batch_stop(struct srv *srv);

/* srv__batch_metrics - append the service's Prometheus metrics to out
 * (nothing when it is not running): inferd_batch_items_total{state},
 * inferd_batch_retries_total, inferd_batch_audio_seconds_total,
 * inferd_batch_tokens_total{kind}, inferd_batch_open,
 * inferd_batch_items_in_flight, inferd_batch_runners. 0 or a srv_buf
 * error. Loop thread. */
struct srv_buf;
int srv__batch_metrics(const struct srv *srv, struct srv_buf *out);

/* The routes (srv_routes.c's table). Loop thread. */
void srv__h_files_create(struct srv_req *req);   /* POST /v1/files */
void srv__h_files_list(struct srv_req *req);     /* GET /v1/files */
void srv__h_file_get(struct srv_req *req);       /* GET /v1/files/{id} */
void srv__h_file_content(struct srv_req *req);   /* GET /v1/files/{id}/content */
void srv__h_file_delete(struct srv_req *req);    /* DELETE /v1/files/{id} */
void srv__h_batches_create(struct srv_req *req); /* POST /v1/batches */
void srv__h_batches_list(struct srv_req *req);   /* GET /v1/batches */
void srv__h_batch_get(struct srv_req *req);      /* GET /v1/batches/{id} */
void srv__h_batch_cancel(struct srv_req *req);   /* POST /v1/batches/{id}/cancel */

#endif /* SRV_BATCH_H */
