/* srv_post.c - hand work from engine threads back to the loop thread
 * (srv_int.h srv__post). An engine's done callback runs on a replica
 * thread; it fills its job and posts it; the loop thread runs the job's
 * function, which sends the response. One uv_async_t per server wakes
 * the loop; the nodes are the caller's (no allocation on this path).
 *
 * The async handle keeps the loop alive while engine jobs are in flight:
 * srv__jobs_begin / srv__jobs_end count them, and the handle is closed
 * only when the server stops and the count is zero, so a loop never ends
 * with an engine callback still to come.
 */
#include <pthread.h>

#include "server/srv_int.h"

static void srv_post_cb(uv_async_t *a)
{
	struct srv *srv = a->data;
	pthread_mutex_lock(&srv->post_mu);
	struct srv_post *list = srv->post_head;
	srv->post_head = srv->post_tail = NULL;
	pthread_mutex_unlock(&srv->post_mu);
	while (list) {
		struct srv_post *p = list;
		list = p->next;
		p->fn(p);
	}
}

int srv__post_init(struct srv *srv)
{
	srv->post_async.data = srv;
	if (uv_async_init(&srv->loop, &srv->post_async, srv_post_cb))
		return -1;
	pthread_mutex_init(&srv->post_mu, NULL);
	return 0;
}

void srv__post(struct srv *srv, struct srv_post *p, void (*fn)(struct srv_post *p))
{
	p->fn = fn;
	p->next = NULL;
	pthread_mutex_lock(&srv->post_mu);
	if (srv->post_tail)
		srv->post_tail->next = p;
	else
		srv->post_head = p;
	srv->post_tail = p;
	pthread_mutex_unlock(&srv->post_mu);
	uv_async_send(&srv->post_async);
}

static void srv_post_closed(uv_handle_t *h)
{
	struct srv *srv = h->data;
	pthread_mutex_destroy(&srv->post_mu);
}

static void srv_post_close(struct srv *srv)
{
	if (!uv_is_closing((uv_handle_t *)&srv->post_async))
		uv_close((uv_handle_t *)&srv->post_async, srv_post_closed);
}

void srv__jobs_begin(struct srv *srv)
{
	srv->n_jobs++;
}

void srv__jobs_end(struct srv *srv)
{
	if (--srv->n_jobs == 0 && srv->post_stopping)
		srv_post_close(srv);
}

void srv__post_stop(struct srv *srv)
{
	srv->post_stopping = true;
	if (srv->n_jobs == 0)
		srv_post_close(srv);
}
