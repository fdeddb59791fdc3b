/* srv_batch_int.h - what the Batch API service's files share
 * (srv_batch.c: the service and its batch thread; srv_bqueue.c: the
 * open batches; srv_batch_api.c: the routes and their commands;
 * srv_batch_run.c: the runners). Contract of the service in srv_batch.h.
 *
 * Locking: one mutex, d->mu, guards the command queue, the open
 * batches (their queues of items, counts and endings), the runners'
 * connection hand-over and the stop flags. No store call and no socket
 * I/O is made while holding it, except a runner's refill of a batch's
 * queue (one indexed SELECT), so that two runners never fetch one item.
 */
#ifndef SRV_BATCH_INT_H
#define SRV_BATCH_INT_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "server/batch/srv_batch.h"
#include "server/batch/srv_bstore.h"
#include "server/srv_int.h"

#define SRV_BQ_FETCH 32 /* items a runner fetches from the store at once */

/* One fetched item, waiting for a runner (or for another try). */
struct srv_bq_item {
	struct srv_bq_item *next;
	struct srv_bitem it; /* it.body owned */
};

/* How an open batch is to end. */
enum srv_bq_ending {
	SRV_BQ_RUN = 0, /* run every item, then "completed" */
	SRV_BQ_CANCEL,  /* take no more: "cancelled" once those in flight end */
	SRV_BQ_EXPIRE,  /* past its window: "expired", the items not run fail */
};

/* An open batch (in_progress, finalizing or cancelling in the store). */
struct srv_bq {
	struct srv_bq *next;
	char id[SRV_BSTORE_ID_MAX];
	char endpoint[64];
	int64_t expires_at;        /* Unix seconds */
	int64_t cursor;            /* items up to this line have been fetched */
	bool exhausted;            /* no pending item after cursor in the store */
	struct srv_bq_item *head, *tail; /* fetched, not taken yet */
	int in_flight;             /* taken by runners, not ended */
	enum srv_bq_ending ending;
	bool finishing;            /* one thread is ending it */
};

/* A request to the batch thread, from a route's handler. The
 * connection is held (conn->n_work) until the answer is posted back. */
struct srv_bcmd {
	struct srv_post post;      /* the answer, back to the loop thread */
	struct srv_bcmd *next;     /* the batch thread's queue */
	struct srv_conn *conn;
	void (*run)(struct srv_batchd *d, struct srv_bcmd *c); /* batch thread */
	char param[128];           /* the {id} of the path */
	char query[512];           /* after '?' */
	char content_type[256];    /* the request's */
	/* the answer, set by run */
	int status;                /* HTTP status */
	const char *code;          /* error code (status >= 400), static */
	char msg[512];             /* its message */
	char *body;                /* new (mem.h) response body, or NULL */
	size_t len;
	const char *type;          /* its content type, static */
};

/* One runner: a client of this server over a socketpair. */
struct srv_brunner {
	struct srv_batchd *d;
	pthread_t th;
	bool started;
	int fd;                    /* the client end, -1 while none */
	int handed_fd;             /* the loop's answer to a connection asked (under mu) */
	bool asked;                /* a connection has been asked for (under mu) */
	struct srv_post post;      /* that ask, to the loop thread */
	struct srv_bstore *store;  /* this runner's connection, opened once the store exists */
};

struct srv_batchd {
	struct srv *srv;
	const struct cfg *cfg;
	char path[PATH_MAX];       /* the store's database */
	pthread_mutex_t mu;
	pthread_cond_t cmd_cv;     /* a command queued, or quit */
	pthread_cond_t work_cv;    /* an item to take, a connection handed, or stop */
	struct srv_bcmd *cmd_head, *cmd_tail;
	bool stopping;             /* draining: no new item is taken, no connection asked */
	bool quit;                 /* the threads end */
	bool store_ready;          /* the database exists: runners may open it */
	struct srv_bq *open;       /* open batches, oldest first */
	pthread_t thread;          /* the batch thread */
	bool thread_started;
	struct srv_bstore *store;  /* the batch thread's connection, NULL until the store exists */
	struct srv_brunner *runners;
	int n_runners;
	/* since the start, for /metrics (runner threads add, the loop reads) */
	_Atomic uint64_t n_done, n_failed;   /* items ended by this process */
	_Atomic uint64_t n_retried;          /* tries left pending (429, 503, connection lost) */
	_Atomic uint64_t audio_ms;           /* audio of the done items */
	_Atomic uint64_t prompt_tokens, completion_tokens;
	_Atomic int in_flight;               /* items sent, not answered */
	_Atomic int n_open;                  /* entries of open (read without d->mu: the
					      * loop thread never waits for a runner's
					      * store call) */
};

/* srv_bqueue.c */

/* srv__bq_add - add batch b to the open batches (no-op when there),
 * ending as its status says ("cancelling": SRV_BQ_CANCEL), and wake the
 * runners. Any thread but the loop's; takes d->mu. */
void srv__bq_add(struct srv_batchd *d, const struct srv_batch *b);

/* srv__bq_cancel - batch id is to be cancelled: its queued items are
 * dropped; returns true when none is in flight (the caller then ends it,
 * srv__bq_finish), false when the last runner to end one will. Takes
 * d->mu. Not open: true. */
bool srv__bq_cancel(struct srv_batchd *d, const char *id);

/* srv__bq_finish - end open batch q (q->finishing set by the caller
 * under d->mu) with store s: its final status per q->ending, its output
 * and error files; then remove and free q. Logs a failure (the batch
 * stays open in the store, finished at the next start). Takes d->mu. */
void srv__bq_finish(struct srv_batchd *d, struct srv_bstore *s, struct srv_bq *q);

/* srv__bq_drop_items - free q's queued items. Under d->mu. */
void srv__bq_drop_items(struct srv_bq *q);

/* srv__bq_free_all - free every open batch's record (at stop). */
void srv__bq_free_all(struct srv_batchd *d);

/* srv__batch_store_open - open a connection to the store for the
 * calling thread (create: make the database and its folder if absent).
 * -ST_NOTFOUND when absent and !create. */
int srv__batch_store_open(struct srv_batchd *d, bool create, struct srv_bstore **out,
			  char *err, size_t errlen);

/* srv__batch_now - Unix seconds. */
int64_t srv__batch_now(void);

/* srv_batch_run.c */

/* srv__brunner_main - a runner thread's body (arg: its struct
 * srv_brunner). */
void *srv__brunner_main(void *arg);

/* srv__brunner_connect - loop thread: a runner asked for a connection
 * (its post). */
void srv__brunner_connect(struct srv_post *p);

#endif /* SRV_BATCH_INT_H */
