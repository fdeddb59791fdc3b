/* eng_sched.h - a model's scheduler: its replicas, their device queues and
 * the requests waiting for them. Internal to engine/.
 *
 * The shape follows Triton's instance groups behind a dynamic batcher:
 * every model has one or more replicas, each bound to a device queue
 * (devices/dev.h) and owning its scratch and caches; the weights are the
 * model's, mapped once and read by all. Submitted requests wait in the
 * model's queue (urgent, then high priority first, then arrival order). Each replica
 * runs one long work item on its device queue, the task's loop
 * (eng_gen_replica.c for generation, eng_asr_replica.c for transcription),
 * which takes requests when it has room and runs them batched. Work goes
 * to the replica with the least outstanding work: a replica takes a
 * waiting request only while no other replica has fewer running (one that
 * has none is waiting in eng__sched_take and takes it at once), so no
 * replica idles while requests wait and none runs ahead of the others.
 *
 * Back-pressure: at most max_queue_size client requests wait un-admitted
 * (the n choices of one request are a group: one request, queued or
 * refused whole); more are -ST_BUSY at submission. Deadlines are absolute (monotonic ms) and
 * checked by the loops between steps, as are cancel flags.
 *
 * Memory: a replica idle for ENG_SCHED_IDLE_RELEASE_MS, when nothing runs
 * on any model of the process, hands the heap's freed memory back to the
 * system once (mem_release_freed), so that a burst's peak does not stay
 * in the process's RSS (bench/soak). Under load that never pauses, the
 * first request to end after ENG_SCHED_BUSY_RELEASE_MS since the last
 * release does it (on its replica's thread). With glibc's malloc, 10
 * minutes at 10x capacity grew the RSS by 16 % without it and 9.8 % with
 * it, its arenas fragmenting while the heap in use stayed flat; with
 * jemalloc (the default build, common/mem.c) the overload's peak RSS held
 * flat (bench/soak: 1350.8 -> 1352.1 MB, first half to second).
 *
 * Thread: submit from any thread; the loops on their queue threads; one
 * mutex per model guards the queue and counters.
 */
#ifndef ENG_SCHED_H
#define ENG_SCHED_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/eng.h"
#include "engine/sched/eng_stats.h"

/* ms a replica waits with nothing to do before it releases freed memory */
#define ENG_SCHED_IDLE_RELEASE_MS 2000
#define ENG_SCHED_BUSY_RELEASE_MS 30000

struct dev;
struct dev_queue;
struct dev_pool;
struct eng_model;
struct eng_sched;

/* One request in the queue. Task code embeds it first in its own struct. */
struct eng__req {
	struct eng__req *next;
	enum eng_priority priority;
	double t_submit;            /* monotonic ms */
	double t_deadline;          /* monotonic ms; 0: none */
	const _Atomic int *cancel; /* the caller's flag, or NULL */
	bool counts;                /* first of its group: counts against max_queue_size */
	/* end - report the end (rc, err) to the caller and free the request;
	 * called once by the loop (or by the scheduler when it shuts down
	 * with the request still waiting: -ST_CLOSED). */
	void (*end)(struct eng__req *r, int rc, const char *err);
};

/* What a model family gives its scheduler (eng_model.c): loop - a
 * replica's work loop, one work item on its queue, arg the struct
 * eng__replica; hold - the model's weights on a replica's device, held
 * from before its loop starts (made now if the device has none: err says
 * why not); release - after its loop has returned, before its device
 * closes. */
struct eng__family {
	void (*loop)(void *arg, struct dev_pool *pool);
	int (*hold)(struct eng_model *m, struct dev *d, void **set, char *err, size_t errlen);
	void (*release)(struct eng_model *m, void *set);
};

struct eng__replica {
	struct eng_sched *s;
	int index;
	struct dev *dev;
	struct dev_queue *q;
	void *weights;              /* the model's weights on dev, held for the replica's
				     * life (eng__model_weights_hold) */
	int threads;
	size_t running;             /* taken and not yet finished */
	bool released;              /* under s->mu: freed memory released since its last work */
	struct eng_replica_stats st; /* under s->mu */
};

struct eng_sched {
	struct eng_model *m;
	pthread_mutex_t mu;
	pthread_cond_t cv;          /* loops wait here for work (with mu) */
	struct eng__replica *reps;
	int n_reps;
	struct eng__req *queue[ENG_PRIORITY_COUNT]; /* [rank] FIFO heads: es_rank, batch 0,
						     * normal 1, high 2, urgent 3 */
	struct eng__req *tail[ENG_PRIORITY_COUNT];
	size_t n_waiting;           /* requests in the queue */
	size_t n_waiting_batch;     /* of them, of the batch class (queue[0]) */
	size_t n_waiting_groups;    /* groups among them (what max_queue_size limits) */
	bool closing;
	/* settings, resolved from the spec */
	int max_batch_size, max_queue_delay_ms, max_queue_size;
	int max_num_seqs, max_batch_tokens, timeout_ms;
	size_t prefix_cache_bytes;  /* prefix_cache_mb in bytes; 0: off */
	int slow_factor;            /* slow_replica_factor; 0: off */
	struct eng_model_stats st;  /* under mu */
	const struct eng__family *fam;
};

/* eng__sched_create - open the replicas' devices and queues for m from
 * spec, hold the model's weights on each device (fam->hold) and start
 * each replica's loop (fam->loop); every pass goes through the device interface,
 * so a placement may name any device. A replica on a non-cpu device gets
 * one thread unless its placement says more.
 * Errors as dev_open / dev_queue_create give them, -ST_INVAL for
 * placements that ask more threads than the cores given or replicas than
 * cores, with err naming the model. */
int eng__sched_create(struct eng_model *m, const struct eng_model_spec *spec,
		      const struct eng__family *fam, struct eng_sched **out, char *err,
		      size_t errlen);

/* eng__sched_destroy - refuse new requests, end waiting ones with
 * -ST_CLOSED, tell the loops to finish what they run and return, join.
 * NULL is a no-op. */
void eng__sched_destroy(struct eng_sched *s);

/* eng__sched_submit - queue the n requests rs[] (a group: all or none)
 * and wake the replicas. t_submit and t_deadline are set here from opts
 * (the deadline: the model's timeout_ms, or the request's when shorter;
 * timeout_ms < 0 in opts: none beyond the model's). Returns 0, -ST_BUSY
 * (max_queue_size groups wait already), -ST_CLOSED; on error nothing is
 * queued (the caller still owns them). */
int eng__sched_submit(struct eng_sched *s, struct eng__req *const *rs, size_t n,
		      const struct eng_req_opts *o);

/* eng__sched_take - for a replica's loop: move waiting requests to out
 * (high priority first), up to max_other of the interactive classes
 * (urgent, high, normal) and max_batch of the batch class, one at a time
 * while no other replica runs fewer (see above); taking stops at the
 * first request whose class has no more room. When it can take none and
 * block is true, wait until it can, the absolute time until_ms passes (0:
 * no limit) or the scheduler closes. Returns how many were taken;
 * *closing is set when the loop should finish its running work and
 * return. */
size_t eng__sched_take(struct eng__replica *rp, struct eng__req **out, size_t max_other,
		       size_t max_batch, bool block, double until_ms, bool *closing);

/* eng__sched_sweep - end the waiting requests whose client left or whose
 * deadline passed (-ST_CANCELED / -ST_TIMEDOUT, counted in the stats), so
 * they do not wait for a busy loop to notice. Returns whether the
 * scheduler is closing. For the loops, between steps. */
bool eng__sched_sweep(struct eng__replica *rp);

/* eng__sched_count - add an ended request's outcome (rc) to the stats;
 * request_ms is counted for successes. */
void eng__sched_count(struct eng_sched *s, int rc, double request_ms);

/* eng__sched_finish - the loop ended a request it took (after r->end). */
void eng__sched_finish(struct eng__replica *rp);

/* A caller waiting for one submitted request to end (the synchronous
 * eng_generate / eng_transcribe): the done callback stores the outcome and
 * calls eng__waiter_done; the caller blocks in eng__waiter_wait. */
struct eng__waiter {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool finished;
	int rc;
	void *result;      /* the done callback's result pointer */
	char *err;         /* the caller's message buffer [errlen] */
	size_t errlen;
};

void eng__waiter_init(struct eng__waiter *w, char *err, size_t errlen);
/* eng__waiter_done - from the done callback (any thread): keep rc, result
 * and err (copied), wake the caller. */
void eng__waiter_done(struct eng__waiter *w, int rc, void *result, const char *err);
/* eng__waiter_wait - block until done; returns rc, *result the pointer
 * given (NULL on error); destroys w. */
int eng__waiter_wait(struct eng__waiter *w, void **result);
/* eng__waiter_fini - destroy a waiter whose request was never submitted. */
void eng__waiter_fini(struct eng__waiter *w);

/* eng__req_expired - the error r should end with at now_ms (a st_now_ms
 * reading), or 0: -ST_CANCELED when its cancel flag is set, -ST_TIMEDOUT
 * past its deadline. */
int eng__req_expired(const struct eng__req *r, double now_ms);

#endif /* ENG_SCHED_H */
