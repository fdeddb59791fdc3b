/* test_dev.c - the device interface (devices/dev.h) on the cpu back end:
 * spec parsing and canonical names, availability errors, hwloc against
 * sched_getaffinity, aligned memory, and queues (FIFO order across
 * submitters, sync, drain on destroy, pinning of every compute thread,
 * thread counts, OpenBLAS kept at one thread).
 *
 * cmocka's assertions longjmp, so they run on the test's own thread only:
 * work items and pool tasks record what they see and the test checks it
 * after dev_queue_sync. Tests that need two cores take the first two this
 * process may use, so they run under any affinity mask of >= 2 CPUs.
 * test_blas_one_thread must stay first: kn_init sets OpenBLAS to one
 * thread once per process, and it checks that dev_open gets that done.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <cblas.h>
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/mem.h"
#include "common/st.h"
#include "devices/dev.h"
#include "devices/dev_int.h"
#include "devices/dev_pool.h"
#include "kernels/kn.h"
#include "kernels/kn_blas.h"
#include "kernels/kn_half.h"
#include "tests/unit/kernels/kn_test_rng.h"

#define ERR_LEN	 256
#define MAX_TIDS 512

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* The CPUs this process may use per sched_getaffinity, ascending. */
static int affinity_cpus(pid_t tid, int *ids, int max)
{
	cpu_set_t set;
	if (sched_getaffinity(tid, sizeof(set), &set))
		return -1;
	int n = 0;
	for (int i = 0; i < CPU_SETSIZE && n < max; i++)
		if (CPU_ISSET(i, &set))
			ids[n++] = i;
	return n;
}

/* The first two available CPUs as "cpu:A,B" (or "cpu:A-B") and their
 * canonical name. */
static void two_cpus(int *a, int *b, char *spec, size_t len)
{
	int ids[DEV_MAX_CPUS];
	int n = dev_cpus_available(ids, DEV_MAX_CPUS);
	assert_true(n >= 2); /* these tests pin to two different cores */
	*a = ids[0];
	*b = ids[1];
	if (*b == *a + 1)
		snprintf(spec, len, "cpu:%d-%d", *a, *b);
	else
		snprintf(spec, len, "cpu:%d,%d", *a, *b);
}

/* ---- OpenBLAS ----------------------------------------------------- */

struct gemm_item {
	int blas_threads; /* openblas_get_num_threads inside the item */
	float sum;	  /* of C, checked against the exact value */
};

static void gemm_fn(void *arg, struct dev_pool *pool)
{
	(void)pool;
	struct gemm_item *g = arg;
	enum { N = 256 };
	float *a = malloc(N * N * sizeof(*a)), *b = malloc(N * N * sizeof(*b));
	float *c = malloc(N * N * sizeof(*c));
	for (int i = 0; i < N * N; i++) {
		a[i] = 1.0f;
		b[i] = 2.0f;
	}
	kn_gemm(false, N, N, N, 1.0f, a, N, b, N, 0.0f, c, N);
	g->sum = 0;
	for (int i = 0; i < N * N; i++)
		g->sum += c[i];
	g->blas_threads = openblas_get_num_threads();
	free(a);
	free(b);
	free(c);
}

static void test_blas_one_thread(void **state)
{
	(void)state;
	openblas_set_num_threads(2); /* as a fresh process on >= 2 cores would be */
	assert_int_equal(openblas_get_num_threads(), 2);
	struct dev *d;
	assert_int_equal(dev_open("cpu", &d, NULL, 0), 0);
	assert_int_equal(openblas_get_num_threads(), 1); /* dev_open ran kn's detection */
	kn_init(KN_ISA_COUNT);
	assert_int_equal(openblas_get_num_threads(), 1);
	struct dev_queue *q;
	assert_int_equal(dev_queue_create(d, dev_caps(d)->n_cores, &q, NULL, 0), 0);
	struct gemm_item g = {0};
	assert_int_equal(dev_queue_submit(q, gemm_fn, &g), 0);
	assert_int_equal(dev_queue_sync(q), 0);
	assert_int_equal(g.blas_threads, 1);
	assert_true(g.sum == 256.0f * 256.0f * 512.0f);
	dev_queue_destroy(q);
	dev_close(d);
}

/* ---- spec parsing --------------------------------------------------- */

static void test_parse_good(void **state)
{
	(void)state;
	static const struct {
		const char *list, *canon;
		int n;
	} cases[] = {
		{"0", "0", 1},
		{"7", "7", 1},
		{"007", "7", 1},
		{"0-3", "0-3", 4},
		{"0,2-3", "0,2-3", 3},
		{"3,2,1,0", "0-3", 4},
		{"0-1,1-2", "0-2", 3},
		{"5,1,3", "1,3,5", 3},
		{"1,1,1", "1", 1},
		{"0,1", "0-1", 2},
		{"2-2", "2", 1},
		{"1023", "1023", 1},
		{"0-3,8-11", "0-3,8-11", 8},
		{"0-1023", "0-1023", 1024},
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		int ids[DEV_MAX_CPUS];
		char err[ERR_LEN] = "", name[DEV_NAME_MAX];
		int n = dev__cpus_parse(cases[k].list, ids, err, sizeof(err));
		assert_int_equal(n, cases[k].n);
		for (int i = 1; i < n; i++)
			assert_true(ids[i] > ids[i - 1]);
		dev__cpus_format(ids, n, name, sizeof(name));
		assert_string_equal(name, cases[k].canon);
		assert_string_equal(err, "");
	}
}

static void test_parse_bad(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"",   ",",   "0,",  ",0",    "0,,1",   "-1",
		"1-", "-",   "3-1", "1024",  "0-1024", "99999999999999999999",
		" 0", "0 ",  "0;1", "0-1-2", "a",      "0x1",
		"+1", "1.5", "0,a", "0-",
	};
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		int ids[DEV_MAX_CPUS];
		char err[ERR_LEN] = "";
		assert_int_equal(dev__cpus_parse(bad[k], ids, err, sizeof(err)), -ST_INVAL);
		assert_non_null(strstr(err, "CPU list"));
	}
}

static void test_format_truncates(void **state)
{
	(void)state;
	int ids[DEV_MAX_CPUS / 2];
	for (int i = 0; i < DEV_MAX_CPUS / 2; i++)
		ids[i] = 2 * i; /* "0,2,4,...": nothing merges */
	char buf[32];
	dev__cpus_format(ids, DEV_MAX_CPUS / 2, buf, sizeof(buf));
	assert_true(strlen(buf) < sizeof(buf));
	assert_string_equal(buf + strlen(buf) - 3, "...");
	assert_int_equal(strncmp(buf, "0,2,4,6,8,10,", 13), 0);
	/* Exactly full: the last item may use the room kept for "...". */
	int three[] = {100, 200, 300};
	char small[12];
	dev__cpus_format(three, 3, small, sizeof(small));
	assert_string_equal(small, "100,200,300");
	char smaller[11];
	dev__cpus_format(three, 3, smaller, sizeof(smaller));
	assert_string_equal(smaller, "100,200...");
	dev__cpus_format(three, 0, smaller, sizeof(smaller));
	assert_string_equal(smaller, "");
}

/* ---- availability --------------------------------------------------- */

static void test_available_matches_affinity(void **state)
{
	(void)state;
	int got[DEV_MAX_CPUS], want[DEV_MAX_CPUS];
	int n = dev_cpus_available(got, DEV_MAX_CPUS);
	int m = affinity_cpus(0, want, DEV_MAX_CPUS);
	assert_true(n > 0);
	assert_int_equal(n, m);
	assert_memory_equal(got, want, (size_t)n * sizeof(*got));
	/* Both probes directly: hwloc and the fallback agree. */
	static struct dev__hw hw, os;
	assert_int_equal(dev__probe_hwloc(&hw), 0);
	assert_int_equal(dev__probe_os(&os), 0);
	assert_int_equal(hw.n_cpus, os.n_cpus);
	assert_memory_equal(hw.cpus, os.cpus, (size_t)hw.n_cpus * sizeof(*hw.cpus));
	assert_true(hw.mem_bytes > 0 && os.mem_bytes > 0);
	/* A short buffer gets the first ids; a bad one is refused. */
	int one = -1;
	assert_int_equal(dev_cpus_available(&one, 1), 1);
	assert_int_equal(one, want[0]);
	assert_int_equal(dev_cpus_available(&one, 0), -ST_INVAL);
	assert_int_equal(dev_cpus_available(NULL, 4), -ST_INVAL);
}

static void test_open_caps(void **state)
{
	(void)state;
	int avail[DEV_MAX_CPUS];
	int n = dev_cpus_available(avail, DEV_MAX_CPUS);
	char want[DEV_NAME_MAX] = "cpu:";
	dev__cpus_format(avail, n, want + 4, sizeof(want) - 4);
	struct dev *d = NULL;
	char err[ERR_LEN] = "x";
	assert_int_equal(dev_open("cpu", &d, err, sizeof(err)), 0);
	assert_string_equal(err, "");
	const struct dev_caps *c = dev_caps(d);
	assert_int_equal(c->kind, DEV_KIND_CPU);
	assert_string_equal(c->name, want);
	assert_int_equal(c->n_cores, n);
	assert_string_equal(c->simd, kn_ops()->name);
	/* hwloc's machine memory (NUMA nodes' sum; some VMs report less there
	 * than sysconf does), never more than the OS's total. */
	static struct dev__hw hw;
	assert_int_equal(dev__probe_hwloc(&hw), 0);
	uint64_t phys = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
	assert_true(hw.mem_bytes > 0);
	assert_true(c->mem_bytes == hw.mem_bytes);
	assert_true(c->mem_bytes <= phys + phys / 64);
	int m;
	const int *ids = dev_cpu_ids(d, &m);
	assert_int_equal(m, n);
	assert_memory_equal(ids, avail, (size_t)n * sizeof(*ids));
	dev_close(d);
	dev_close(NULL);
}

static void test_open_canonical(void **state)
{
	(void)state;
	int a, b;
	char spec[64], want[64];
	two_cpus(&a, &b, want, sizeof(want));
	snprintf(spec, sizeof(spec), "cpu:%d,%d,%d", b, a, b); /* unsorted, a duplicate */
	struct dev *d;
	assert_int_equal(dev_open(spec, &d, NULL, 0), 0);
	assert_string_equal(dev_caps(d)->name, want);
	assert_int_equal(dev_caps(d)->n_cores, 2);
	dev_close(d);
	snprintf(spec, sizeof(spec), "cpu:%d", b);
	snprintf(want, sizeof(want), "cpu:%d", b);
	assert_int_equal(dev_open(spec, &d, NULL, 0), 0);
	assert_string_equal(dev_caps(d)->name, want);
	int n;
	assert_int_equal(dev_cpu_ids(d, &n)[0], b);
	assert_int_equal(n, 1);
	dev_close(d);
}

/* dev_open(spec) fails with rc and an err holding `has`. */
static void open_fails(const char *spec, int rc, const char *has)
{
	struct dev *d = (struct dev *)1;
	char err[ERR_LEN] = "";
	assert_int_equal(dev_open(spec, &d, err, sizeof(err)), rc);
	assert_null(d);
	if (!strstr(err, has))
		fail_msg("dev_open(\"%s\"): err \"%s\" lacks \"%s\"", spec, err, has);
}

static void test_open_errors(void **state)
{
	(void)state;
	struct dev *all;
	assert_int_equal(dev_open("cpu", &all, NULL, 0), 0);
	char avail[ERR_LEN];
	snprintf(avail, sizeof(avail), "(available: %s)", dev_caps(all)->name);
	dev_close(all);
	open_fails("cpu:1023", -ST_NOTFOUND, "cpu 1023 is not available");
	open_fails("cpu:1023", -ST_NOTFOUND, avail);
	open_fails("cpu:0-1023", -ST_NOTFOUND, avail);
	open_fails("cpu:1024", -ST_INVAL, "out of range");
	open_fails("cpu:", -ST_INVAL, "expected a CPU id");
	open_fails("cpu:0 ", -ST_INVAL, "unexpected character");
	open_fails("cpu:3-1", -ST_INVAL, "backwards");
	open_fails("cpu:0,", -ST_INVAL, "expected a CPU id");
	open_fails("cuda:0", -ST_UNSUPPORTED, "no cuda back end in this build");
	open_fails("cuda", -ST_UNSUPPORTED, "no cuda back end");
	open_fails("tpu:0", -ST_UNSUPPORTED, "unknown kind \"tpu\"");
	open_fails("", -ST_INVAL, "bad device spec");
	open_fails("cpu0", -ST_INVAL, "bad device spec");
	open_fails("CPU:0", -ST_INVAL, "bad device spec");
	open_fails(" cpu", -ST_INVAL, "bad device spec");
	open_fails(":0", -ST_INVAL, "bad device spec");
	open_fails(NULL, -ST_INVAL, "no device spec");
	struct dev *d;
	assert_int_equal(dev_open("cpu:1023", &d, NULL, 0), -ST_NOTFOUND); /* no err buffer */
}

/* ---- memory --------------------------------------------------------- */

static void test_alloc(void **state)
{
	(void)state;
	struct dev *d;
	assert_int_equal(dev_open("cpu", &d, NULL, 0), 0);
	static const size_t sizes[] = {0, 1, 7, 63, 64, 65, 1000, 1 << 20};
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		unsigned char *p = dev_alloc(d, sizes[k]), *q = dev_alloc(d, sizes[k]);
		assert_non_null(p);
		assert_non_null(q);
		assert_ptr_not_equal(p, q);
		assert_int_equal((uintptr_t)p % 64, 0);
		assert_int_equal((uintptr_t)q % 64, 0);
		for (size_t i = 0; i < sizes[k]; i++)
			p[i] = (unsigned char)(i * 7 + 1);
		dev_copy(d, q, p, sizes[k]);
		assert_memory_equal(p, q, sizes[k]);
		dev_free(d, p);
		dev_free(d, q);
	}
	dev_copy(d, NULL, NULL, 0);
	dev_free(d, NULL);
	assert_null(dev_alloc(d, SIZE_MAX));
	assert_null(dev_alloc(d, SIZE_MAX - 32));
	mem_fail_after(0); /* fault injection reaches dev_alloc */
	assert_null(dev_alloc(d, 16));
	mem_fail_after(-1);
	dev_close(d);
}

/* ---- queues: order and sync ----------------------------------------- */

#define FIFO_SUBMITTERS 4
#define FIFO_PER_THREAD 500
#define FIFO_TOTAL	(FIFO_SUBMITTERS * FIFO_PER_THREAD)

struct fifo {
	struct dev_queue *q;
	pthread_mutex_t mu;	 /* makes "take a ticket, submit" one step */
	int next_ticket;	 /* under mu */
	int tickets[FIFO_TOTAL]; /* item argument: its submission rank */
	int ran[FIFO_TOTAL];	 /* tickets in run order (queue thread only) */
	int n_ran;
	pthread_t runner[FIFO_TOTAL];
	int submit_errors; /* under mu */
};

struct fifo_arg {
	struct fifo *f;
	int ticket;
};

static struct fifo_arg fifo_args[FIFO_TOTAL];

static void fifo_item(void *arg, struct dev_pool *pool)
{
	(void)pool;
	struct fifo_arg *a = arg;
	a->f->runner[a->f->n_ran] = pthread_self();
	a->f->ran[a->f->n_ran++] = a->ticket;
}

static void *fifo_submitter(void *arg)
{
	struct fifo *f = arg;
	for (int i = 0; i < FIFO_PER_THREAD; i++) {
		pthread_mutex_lock(&f->mu);
		struct fifo_arg *a = &fifo_args[f->next_ticket];
		*a = (struct fifo_arg){.f = f, .ticket = f->next_ticket++};
		if (dev_queue_submit(f->q, fifo_item, a))
			f->submit_errors++;
		pthread_mutex_unlock(&f->mu);
		if (i % 64 == 0)
			sched_yield();
	}
	return NULL;
}

static void test_queue_fifo(void **state)
{
	(void)state;
	struct dev *d;
	assert_int_equal(dev_open("cpu", &d, NULL, 0), 0);
	static struct fifo f;
	memset(&f, 0, sizeof(f));
	pthread_mutex_init(&f.mu, NULL);
	assert_int_equal(dev_queue_create(d, 1, &f.q, NULL, 0), 0);
	assert_ptr_equal(dev_queue_device(f.q), d);
	assert_int_equal(dev_queue_threads(f.q), 1);
	pthread_t th[FIFO_SUBMITTERS];
	for (int i = 0; i < FIFO_SUBMITTERS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, fifo_submitter, &f), 0);
	for (int i = 0; i < FIFO_SUBMITTERS; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(dev_queue_sync(f.q), 0);
	assert_int_equal(f.submit_errors, 0);
	assert_int_equal(f.n_ran, FIFO_TOTAL);
	for (int i = 0; i < FIFO_TOTAL; i++) {
		assert_int_equal(f.ran[i], i); /* submission order, globally */
		assert_true(pthread_equal(f.runner[i], f.runner[0]));
	}
	assert_false(pthread_equal(f.runner[0], pthread_self()));
	dev_queue_destroy(f.q);
	pthread_mutex_destroy(&f.mu);
	dev_close(d);
}

/* A one-shot gate an item can wait on, with a deadline so that a wrong
 * implementation fails an assertion instead of hanging the test (a hang
 * guard: far longer than a loaded machine needs to open it). */
#define GATE_TIMEOUT_MS 30000
struct gate {
	_Atomic bool open;
};

static bool gate_wait(struct gate *g, long timeout_ms)
{
	for (long t = 0; t < timeout_ms; t++) {
		if (atomic_load(&g->open))
			return true;
		sleep_ms(1);
	}
	return atomic_load(&g->open);
}

struct sync_case {
	struct dev_queue *q;
	struct gate g1, g2;
	_Atomic bool x_done, y_done, y_gate_seen;
	_Atomic int sync_inside; /* dev_queue_sync from an item */
};

static void y_item(void *arg, struct dev_pool *pool)
{
	(void)pool;
	struct sync_case *s = arg;
	atomic_store(&s->y_gate_seen, gate_wait(&s->g2, GATE_TIMEOUT_MS));
	atomic_store(&s->y_done, true);
}

/* X: waits for g1, then submits Y (which the earlier sync must not wait
 * for) and tries a sync from inside an item. */
static void x_item(void *arg, struct dev_pool *pool)
{
	(void)pool;
	struct sync_case *s = arg;
	gate_wait(&s->g1, GATE_TIMEOUT_MS);
	dev_queue_submit(s->q, y_item, s);
	atomic_store(&s->sync_inside, dev_queue_sync(s->q));
	atomic_store(&s->x_done, true);
}

static void *open_g1_later(void *arg)
{
	struct sync_case *s = arg;
	sleep_ms(200);
	atomic_store(&s->g1.open, true);
	return NULL;
}

static void test_queue_sync(void **state)
{
	(void)state;
	struct dev *d;
	assert_int_equal(dev_open("cpu", &d, NULL, 0), 0);
	static struct sync_case s;
	memset(&s, 0, sizeof(s));
	assert_int_equal(dev_queue_create(d, 1, &s.q, NULL, 0), 0);
	assert_int_equal(dev_queue_sync(s.q), 0); /* idle: returns at once */
	assert_int_equal(dev_queue_submit(s.q, x_item, &s), 0);
	pthread_t opener;
	assert_int_equal(pthread_create(&opener, NULL, open_g1_later, &s), 0);
	assert_int_equal(dev_queue_sync(s.q), 0); /* waits for X (200 ms) ... */
	assert_true(atomic_load(&s.x_done));
	assert_false(atomic_load(&s.y_done)); /* ... but not for Y, submitted later */
	assert_int_equal(atomic_load(&s.sync_inside), -ST_INVAL);
	atomic_store(&s.g2.open, true);
	assert_int_equal(dev_queue_sync(s.q), 0);
	assert_true(atomic_load(&s.y_done));
	assert_true(atomic_load(&s.y_gate_seen));
	pthread_join(opener, NULL);
	dev_queue_destroy(s.q);
	dev_close(d);
}

/* ---- queues: destroy ------------------------------------------------ */

struct drain {
	struct dev_queue *q;
	_Atomic int ran;
	_Atomic int closed_rc; /* what a submit during destroy got */
};

static void drain_item(void *arg, struct dev_pool *pool)
{
	(void)pool;
	struct drain *dr = arg;
	if (atomic_fetch_add(&dr->ran, 1) % 16 == 0)
		sleep_ms(1);
}

static void noop_item(void *arg, struct dev_pool *pool)
{
	(void)arg;
	(void)pool;
}

/* Submits until destroy has begun (then -ST_CLOSED); gives up after a
 * minute (a hang guard, however slowly the test's thread gets there). */
static void late_item(void *arg, struct dev_pool *pool)
{
	(void)pool;
	struct drain *dr = arg;
	for (int i = 0; i < 60000; i++) {
		int rc = dev_queue_submit(dr->q, noop_item, NULL);
		if (rc) {
			atomic_store(&dr->closed_rc, rc);
			return;
		}
		sleep_ms(1);
	}
}

static void test_queue_destroy(void **state)
{
	(void)state;
	struct dev *d;
	assert_int_equal(dev_open("cpu", &d, NULL, 0), 0);
	struct drain dr = {0};
	assert_int_equal(dev_queue_create(d, 1, &dr.q, NULL, 0), 0);
	for (int i = 0; i < 200; i++)
		assert_int_equal(dev_queue_submit(dr.q, drain_item, &dr), 0);
	dev_queue_destroy(dr.q); /* runs all 200 first */
	assert_int_equal(atomic_load(&dr.ran), 200);

	struct drain late = {0};
	assert_int_equal(dev_queue_create(d, 1, &late.q, NULL, 0), 0);
	assert_int_equal(dev_queue_submit(late.q, late_item, &late), 0);
	dev_queue_destroy(late.q);
	assert_int_equal(atomic_load(&late.closed_rc), -ST_CLOSED);
	dev_queue_destroy(NULL);
	dev_close(d);
}

static void test_queue_bad_threads(void **state)
{
	(void)state;
	struct dev *d;
	assert_int_equal(dev_open("cpu", &d, NULL, 0), 0);
	int n = dev_caps(d)->n_cores;
	int bad[] = {0, -1, n + 1, 1000};
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		struct dev_queue *q = (struct dev_queue *)1;
		char err[ERR_LEN] = "", want[64];
		assert_int_equal(dev_queue_create(d, bad[k], &q, err, sizeof(err)), -ST_INVAL);
		assert_null(q);
		snprintf(want, sizeof(want), "it has %d cores", n);
		assert_non_null(strstr(err, want));
		assert_non_null(strstr(err, dev_caps(d)->name));
	}
	dev_close(d);
}

static void test_queue_nomem(void **state)
{
	(void)state;
	struct dev *d;
	mem_fail_after(0);
	assert_int_equal(dev_open("cpu", &d, NULL, 0), -ST_NOMEM);
	mem_fail_after(-1);
	assert_int_equal(dev_open("cpu", &d, NULL, 0), 0);
	int threads = dev_caps(d)->n_cores;
	struct dev_queue *q = NULL;
	int k = 0;
	for (;; k++) { /* fail the k-th allocation until none is left to fail */
		mem_fail_after(k);
		int rc = dev_queue_create(d, threads, &q, NULL, 0);
		mem_fail_after(-1);
		if (rc == 0)
			break;
		assert_int_equal(rc, -ST_NOMEM);
		assert_null(q);
	}
	assert_true(k >= 2); /* the queue and the pool's worker list at least */
	mem_fail_after(0);
	assert_int_equal(dev_queue_submit(q, noop_item, NULL), -ST_NOMEM);
	mem_fail_after(-1);
	assert_int_equal(dev_queue_submit(q, noop_item, NULL), 0);
	assert_int_equal(dev_queue_sync(q), 0);
	dev_queue_destroy(q);
	dev_close(d);
}

/* ---- queues: pinning and thread counts -------------------------------- */

#define PIN_RUNS 50

struct pin_check {
	const int *cpus;	   /* the device's ids: thread ith belongs on cpus[ith] */
	int pool_size;		   /* dev_pool_size seen by the item */
	_Atomic int calls[8];	   /* tasks run per ith */
	_Atomic int wrong_mask[8]; /* affinity was not exactly {cpus[ith]} */
	_Atomic int wrong_cpu[8];  /* sched_getcpu was not cpus[ith] */
	_Atomic int bad_nth;
	pthread_t ith0;	       /* who ran ith 0 */
	pthread_t item_thread; /* who ran the item */
};

static void pin_task(void *arg, int ith, int nth)
{
	struct pin_check *c = arg;
	if (nth != c->pool_size || ith < 0 || ith >= 8) {
		atomic_fetch_add(&c->bad_nth, 1);
		return;
	}
	atomic_fetch_add(&c->calls[ith], 1);
	int ids[4];
	if (affinity_cpus(0, ids, 4) != 1 || ids[0] != c->cpus[ith])
		atomic_fetch_add(&c->wrong_mask[ith], 1);
	if (sched_getcpu() != c->cpus[ith])
		atomic_fetch_add(&c->wrong_cpu[ith], 1);
	if (ith == 0)
		c->ith0 = pthread_self();
}

static void pin_item(void *arg, struct dev_pool *pool)
{
	struct pin_check *c = arg;
	c->pool_size = dev_pool_size(pool);
	c->item_thread = pthread_self();
	for (int r = 0; r < PIN_RUNS; r++)
		dev_pool_run(pool, pin_task, c);
}

static void check_pinning(const char *spec, int threads)
{
	struct dev *d;
	char err[ERR_LEN];
	if (dev_open(spec, &d, err, sizeof(err)))
		fail_msg("dev_open(\"%s\"): %s", spec, err);
	int n;
	static struct pin_check c;
	memset(&c, 0, sizeof(c));
	c.cpus = dev_cpu_ids(d, &n);
	struct dev_queue *q;
	assert_int_equal(dev_queue_create(d, threads, &q, NULL, 0), 0);
	for (int rep = 0; rep < 3; rep++)
		assert_int_equal(dev_queue_submit(q, pin_item, &c), 0);
	assert_int_equal(dev_queue_sync(q), 0);
	assert_int_equal(c.pool_size, threads);
	assert_int_equal(atomic_load(&c.bad_nth), 0);
	assert_true(pthread_equal(c.ith0, c.item_thread)); /* the queue thread is ith 0 */
	for (int i = 0; i < threads; i++) {
		assert_int_equal(atomic_load(&c.calls[i]), 3 * PIN_RUNS);
		assert_int_equal(atomic_load(&c.wrong_mask[i]), 0);
		assert_int_equal(atomic_load(&c.wrong_cpu[i]), 0);
	}
	dev_queue_destroy(q);
	dev_close(d);
}

static void test_queue_pinning(void **state)
{
	(void)state;
	int a, b;
	char pair[64], single[64];
	two_cpus(&a, &b, pair, sizeof(pair));
	check_pinning(pair, 1);
	check_pinning(pair, 2);
	snprintf(single, sizeof(single), "cpu:%d", b);
	check_pinning(single, 1);
}

/* The thread ids of this process, from /proc/self/task. */
static int list_tids(pid_t *tids, int max)
{
	DIR *dir = opendir("/proc/self/task");
	assert_non_null(dir);
	int n = 0;
	for (struct dirent *e = readdir(dir); e; e = readdir(dir))
		if (e->d_name[0] != '.' && n < max)
			tids[n++] = (pid_t)atoi(e->d_name);
	closedir(dir);
	return n;
}

/* The number of threads once it settles at want (a joined thread's task
 * can outlive pthread_join by a moment), or what it is after 20 s. */
static int count_tids_settled(int want)
{
	pid_t tids[MAX_TIDS];
	int n = list_tids(tids, MAX_TIDS);
	for (int i = 0; i < 20000 && n != want; i++) {
		sleep_ms(1);
		n = list_tids(tids, MAX_TIDS);
	}
	return n;
}

static bool tid_in(pid_t t, const pid_t *tids, int n)
{
	for (int i = 0; i < n; i++)
		if (tids[i] == t)
			return true;
	return false;
}

/* Create a queue of `threads` on d; exactly `threads` new threads appear,
 * each pinned to one core of d, no two on the same core. */
static struct dev_queue *queue_counted(struct dev *d, int threads)
{
	pid_t before[MAX_TIDS], after[MAX_TIDS];
	int nb = list_tids(before, MAX_TIDS);
	struct dev_queue *q;
	assert_int_equal(dev_queue_create(d, threads, &q, NULL, 0), 0);
	int na = list_tids(after, MAX_TIDS);
	assert_int_equal(na - nb, threads);
	int n_dev;
	const int *dev_ids = dev_cpu_ids(d, &n_dev);
	bool used[DEV_MAX_CPUS] = {false};
	for (int i = 0; i < na; i++) {
		if (tid_in(after[i], before, nb))
			continue;
		int ids[4];
		assert_int_equal(affinity_cpus(after[i], ids, 4), 1);
		bool on_dev = false;
		for (int k = 0; k < threads; k++)
			on_dev = on_dev || ids[0] == dev_ids[k];
		assert_true(on_dev);
		assert_false(used[ids[0]]);
		used[ids[0]] = true;
	}
	return q;
}

static void test_thread_counts(void **state)
{
	(void)state;
	int a, b;
	char pair[64], one[2][64];
	two_cpus(&a, &b, pair, sizeof(pair));
	snprintf(one[0], sizeof(one[0]), "cpu:%d", a);
	snprintf(one[1], sizeof(one[1]), "cpu:%d", b);
	pid_t tids[MAX_TIDS];
	int start = list_tids(tids, MAX_TIDS);
	struct dev *dp, *d0, *d1;
	assert_int_equal(dev_open(pair, &dp, NULL, 0), 0);
	assert_int_equal(dev_open(one[0], &d0, NULL, 0), 0);
	assert_int_equal(dev_open(one[1], &d1, NULL, 0), 0);
	assert_int_equal(list_tids(tids, MAX_TIDS), start); /* opening starts nothing */
	/* N queues x T threads: each adds exactly T, pinned within its device. */
	struct dev_queue *qs[8];
	int nq = 0, total = 0;
	for (int t = 1; t <= 2; t++)
		for (int rep = 0; rep < 2; rep++) {
			qs[nq++] = queue_counted(dp, t);
			total += t;
		}
	qs[nq++] = queue_counted(d0, 1);
	qs[nq++] = queue_counted(d1, 1);
	total += 2;
	assert_int_equal(list_tids(tids, MAX_TIDS), start + total);
	struct dev_queue *q = NULL;
	assert_int_equal(dev_queue_create(d0, 2, &q, NULL, 0), -ST_INVAL); /* more than its cores */
	assert_int_equal(list_tids(tids, MAX_TIDS), start + total);
	for (int i = 0; i < nq; i++)
		dev_queue_destroy(qs[i]);
	assert_int_equal(count_tids_settled(start), start); /* all joined */
	dev_close(dp);
	dev_close(d0);
	dev_close(d1);
}

/* ---- causal attention: the same bits on any number of threads ---------- */

/* Decode rows of one or two sequences (dev__cpu_causal) over float32 and
 * binary16 caches laid out in per-head blocks as the LLM forward pass
 * lays them: one KV head of 4 query heads (Gemma 3's grouping) and 3 of
 * 3 (SmolLM2's), 1 to 3 parts of keys, with and without a window; the
 * output of pools of 2 to 4 threads (where few units split the query
 * heads of a KV head over the threads, and several parts of a head go in
 * one call) equals one thread's bit for bit. */
static void test_causal_thread_counts(void **state)
{
	(void)state;
	enum { CTX = 300, HD = 24 };
	static const size_t shapes[][2] = { { 1, 4 }, { 3, 3 } }; /* KV heads, query heads each */
	static const size_t pos[] = { 5, 127, 200, 299 };
	uint64_t rng = 0x2545f4914f6cdd1dull;
	for (size_t sh = 0; sh < 2; sh++)
		for (int variant = 0; variant < 4; variant++) {
			size_t nkv = shapes[sh][0], nh = nkv * shapes[sh][1], qw = nh * HD;
			size_t n = CTX * nkv * HD, esz = variant & 1 ? 2 : 4;
			float *q = malloc(2 * qw * sizeof(float)), *kv = malloc(2 * n * sizeof(float));
			uint16_t *kv16 = malloc(2 * n * sizeof(uint16_t));
			float *want = malloc(2 * qw * sizeof(float)), *got = malloc(2 * qw * sizeof(float));
			assert_true(q && kv && kv16 && want && got);
			for (size_t i = 0; i < 2 * qw; i++)
				q[i] = 0.5f * kn_test_uniform(&rng);
			for (size_t i = 0; i < 2 * n; i++) {
				kv[i] = kn_test_uniform(&rng);
				kv16[i] = kn_f32_to_f16(kv[i]);
			}
			const char *k = variant & 1 ? (const char *)kv16 : (const char *)kv;
			struct dev_attn a = { .n_head = nh, .n_head_kv = nkv, .head_dim = HD, .q = q,
					      .ldq = qw, .ldo = qw, .ldk = HD, .ldv = HD,
					      .kv_type = variant & 1, .window = variant & 2 ? 150 : 0,
					      .scale = 0.2f, .prec = DEV_ATTN_F32 };
			for (size_t pi = 0; pi < 4; pi++)
				for (size_t n_seqs = 1; n_seqs <= 2; n_seqs++) {
					struct dev_attn_seq seqs[2];
					for (size_t s = 0; s < n_seqs; s++)
						seqs[s] = (struct dev_attn_seq){
							.r0 = s, .n = 1, .pos0 = s ? pos[3 - pi] : pos[pi],
							.k = k + s * n * esz, .v = k + (1 - s) * n * esz,
							.hs = CTX * HD };
					for (int nth = 1; nth <= 4; nth++) {
						struct dev_pool *pool;
						assert_int_equal(dev_pool_create(nth, NULL, &pool), 0);
						float *buf = malloc(dev__cpu_causal_floats(nth, &a, seqs, n_seqs) *
								    sizeof(float));
						assert_non_null(buf);
						a.out = nth == 1 ? want : got;
						dev__cpu_causal(pool, &a, seqs, n_seqs, buf);
						if (nth > 1)
							assert_memory_equal(got, want,
									    n_seqs * qw * sizeof(float));
						free(buf);
						dev_pool_destroy(pool);
					}
				}
			free(q);
			free(kv);
			free(kv16);
			free(want);
			free(got);
		}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_blas_one_thread), /* first: see the file comment */
		cmocka_unit_test(test_parse_good),
		cmocka_unit_test(test_parse_bad),
		cmocka_unit_test(test_format_truncates),
		cmocka_unit_test(test_available_matches_affinity),
		cmocka_unit_test(test_open_caps),
		cmocka_unit_test(test_open_canonical),
		cmocka_unit_test(test_open_errors),
		cmocka_unit_test(test_alloc),
		cmocka_unit_test(test_queue_fifo),
		cmocka_unit_test(test_queue_sync),
		cmocka_unit_test(test_queue_destroy),
		cmocka_unit_test(test_queue_bad_threads),
		cmocka_unit_test(test_queue_nomem),
		cmocka_unit_test(test_queue_pinning),
		cmocka_unit_test(test_thread_counts),
		cmocka_unit_test(test_causal_thread_counts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
