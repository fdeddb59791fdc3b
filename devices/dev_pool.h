/* dev_pool.h - a fixed team of worker threads that runs one parallel-for
 * at a time: the CPU device's execution engine.
 *
 * dev_pool_run(pool, fn, arg) calls fn(arg, ith, nth) once for every ith
 * in 0..nth-1 - ith 0 on the calling thread, the others on the pool's
 * threads - and returns when all have returned (a barrier). Kernels split
 * their rows by (ith, nth), as ggml does; nothing in the pool knows about
 * them. Workers spin briefly between runs (a decode step makes hundreds
 * of short runs) and then sleep on a condition variable.
 *
 * Thread: dev_pool_run from one thread at a time per pool (callers
 * serialise: a pool belongs to one replica). create/destroy on any thread.
 */
#ifndef DEV_POOL_H
#define DEV_POOL_H

struct dev_pool;

typedef void (*dev_task_fn)(void *arg, int ith, int nth);

/* dev_pool_create - a pool of n_threads (1..256) counting the caller, so
 * n_threads - 1 new threads. cpus (may be NULL) holds n_threads CPU ids:
 * worker i (1..n-1) is pinned to cpus[i]; the caller's affinity (cpus[0])
 * is the caller's business. Returns 0, -ST_INVAL, -ST_NOMEM or -ST_IO
 * (thread creation failed). */
int dev_pool_create(int n_threads, const int *cpus, struct dev_pool **out);

/* dev_pool_destroy - stop and join the workers; NULL is a no-op. */
void dev_pool_destroy(struct dev_pool *pool);

/* dev_pool_size - nth of every run. */
int dev_pool_size(const struct dev_pool *pool);

/* dev_pool_run - run fn(arg, ith, nth) on every thread of the pool and
 * wait for all of them. A NULL pool runs fn(arg, 0, 1) inline. */
void dev_pool_run(struct dev_pool *pool, dev_task_fn fn, void *arg);

/* dev_pool_barrier - inside a task of dev_pool_run: return once every
 * thread of the run has called it (all must, the same number of times).
 * It spins, then yields its core, as the run's own wait does. A NULL or
 * one-thread pool returns at once. */
void dev_pool_barrier(struct dev_pool *pool);

/* dev_split - the [*begin, *end) share of n items for thread ith of nth,
 * in contiguous blocks aligned to `align` items (1 for none). */
void dev_split(long n, int ith, int nth, long align, long *begin, long *end);

#endif /* DEV_POOL_H */
