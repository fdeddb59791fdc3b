/* srv_stream.h - a response whose body is produced while it is sent
 * (server-sent events): status line and headers first, then the body as
 * HTTP/1.1 chunks (RFC 9112 7.1) as it arrives, then the last chunk.
 * Internal to server/.
 *
 * Threads: a worker (the job generating the body) pushes bytes into a
 * mutex-protected queue and wakes the loop with uv_async_send; the loop
 * thread writes whatever has queued as one chunk per wake-up (so tokens that
 * arrive together go out in one write). Everything else is loop-thread only.
 *
 * Lifetime: the owner (a thread-pool job holding the connection through
 * conn->n_work) creates the stream on the loop thread, lets its worker push,
 * and, in its after-work callback - once the worker can no longer push -
 * calls srv__stream_finish or srv__stream_destroy exactly once. Both close
 * the async handle; its close callback frees the stream, so the handle and
 * the queue outlive the worker, the after-work callback and any wake-up
 * still pending on the loop. The headers are sent with the first bytes, so
 * a job that fails before producing any can still answer with a plain error
 * response (srv__stream_is_empty).
 */
#ifndef SRV_STREAM_H
#define SRV_STREAM_H

#include <stdbool.h>
#include <stddef.h>

#include "server/srv_int.h"

#define SRV_STREAM_QUEUE_MAX (8u << 20) /* bytes queued and not yet written */

struct srv_stream;

/* srv__stream_create - a stream answering req with status and
 * content_type (a static string). Nothing is sent yet. Loop thread.
 * Returns 0 with *out new, or -ST_NOMEM / -ST_IO (*out NULL). */
int srv__stream_create(struct srv_req *req, int status, const char *content_type,
		       struct srv_stream **out);

/* srv__stream_push - queue len bytes of body (copied) and wake the loop.
 * Any thread, until finish/destroy. Returns 0, -ST_TOOBIG when the queue
 * would pass SRV_STREAM_QUEUE_MAX (the client does not read), -ST_NOMEM. */
int srv__stream_push(struct srv_stream *st, const char *data, size_t len);

/* srv__stream_is_empty - true when nothing was sent or queued yet (the
 * owner may still answer with an ordinary response). Loop thread, after
 * the pushing worker has finished. */
bool srv__stream_is_empty(struct srv_stream *st);

/* srv__stream_finish - send what is queued (headers first if not sent),
 * the last chunk, log the response, complete the request (the connection
 * goes on to the next one, or closes), and release the stream. When the
 * connection has closed, only the release happens. Loop thread. */
void srv__stream_finish(struct srv_stream *st);

/* srv__stream_destroy - release the stream without sending anything more
 * (queued bytes are dropped). NULL is a no-op. Loop thread. */
void srv__stream_destroy(struct srv_stream *st);

#endif /* SRV_STREAM_H */
