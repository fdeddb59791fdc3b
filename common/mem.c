/* mem.c - allocation wrapper with a fault-injection counter for tests.
 *
 * The counter is the one piece of process-wide mutable state outside the
 * server and engine structs: it exists only so tests can fail the k-th
 * allocation (curl's torture tests, SQLite's *fault.test). */
#include "common/mem.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef INFERD_JEMALLOC
#include <jemalloc/jemalloc.h>
#elif defined(__GLIBC__)
#include <malloc.h>
#endif
#ifdef __linux__
#include <sys/mman.h>
#include <unistd.h>
#endif

static atomic_long mem_budget = -1; /* < 0: never fail */

static int mem_should_fail(void)
{
	long b = atomic_load_explicit(&mem_budget, memory_order_relaxed);
	if (b < 0)
		return 0;
	while (b > 0) {
		if (atomic_compare_exchange_weak(&mem_budget, &b, b - 1))
			return 0;
	}
	return b == 0;
}

#ifdef INFERD_JEMALLOC
/* jemalloc reads this at its first allocation, before main (MALLOC_CONF in
 * the environment, read after it, may override). oversize_threshold:0: no
 * separate arena for blocks of 8 MiB and more, whose freed pages jemalloc
 * would hand back at once; a Whisper window's 18 MB cross-attention keys
 * and values are such blocks, reused by every window. background_thread:
 * purging on its own thread, so that an idle daemon's dirty pages still go
 * back after the decay time (without it jemalloc purges only when some
 * thread allocates); one such thread for every arena, started at once, so
 * that the daemon's thread count does not grow the first time a thread
 * takes a new arena. */
const char *malloc_conf = "oversize_threshold:0,background_thread:true,max_background_threads:1";

/* mallctl names for every arena at once (MALLCTL_ARENAS_ALL, a literal) */
#define MEM_STR_(x) #x
#define MEM_STR(x) MEM_STR_(x)
#define MEM_ARENAS_ALL(what) "arena." MEM_STR(MALLCTL_ARENAS_ALL) "." what
#define MEM_STATS_ALL(what) "stats.arenas." MEM_STR(MALLCTL_ARENAS_ALL) "." what

void mem_keep_freed(void)
{
	/* nothing to do at run time: malloc_conf above set jemalloc up */
}

void mem_release_freed(void)
{
	(void)mallctl(MEM_ARENAS_ALL("purge"), NULL, NULL, NULL, 0);
}

/* One size_t statistic, 0 when jemalloc does not know it. */
static size_t mem_je_size(const char *name)
{
	size_t v = 0, len = sizeof(v);
	return mallctl(name, &v, &len, NULL, 0) == 0 ? v : 0;
}

void mem_stats_read(struct mem_stats *out)
{
	uint64_t epoch = 1;
	size_t len = sizeof(epoch);
	(void)mallctl("epoch", &epoch, &len, &epoch, len); /* refresh the statistics */
	size_t pages = mem_je_size(MEM_STATS_ALL("pdirty")) + mem_je_size(MEM_STATS_ALL("pmuzzy"));
	*out = (struct mem_stats){ .allocator = "jemalloc",
				   .allocated = mem_je_size("stats.allocated"),
				   .kept = pages * mem_je_size("arenas.page") };
}
#else
void mem_keep_freed(void)
{
#ifdef __GLIBC__
	/* 32 MB is glibc's largest mmap threshold on 64-bit (its
	 * DEFAULT_MMAP_THRESHOLD_MAX); a larger value would be refused. */
	mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
	mallopt(M_TRIM_THRESHOLD, 1024 * 1024 * 1024);
	/* One arena per CPU, not glibc's 8: an arena other than the main
	 * one keeps its freed top even through malloc_trim. */
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	mallopt(M_ARENA_MAX, ncpu > 2 ? (int)ncpu : 2);
#endif
}

void mem_release_freed(void)
{
#ifdef __GLIBC__
	malloc_trim(0);
#endif
}

void mem_stats_read(struct mem_stats *out)
{
	*out = (struct mem_stats){ .allocator = "" };
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
	struct mallinfo2 mi = mallinfo2();
	out->allocator = "glibc";
	out->allocated = mi.uordblks + mi.hblkhd;
	out->kept = mi.fordblks;
#endif
}
#endif

void mem_fail_after(long n)
{
	atomic_store(&mem_budget, n);
}

void *mem_alloc(size_t size_bytes)
{
	return mem_should_fail() ? NULL : malloc(size_bytes ? size_bytes : 1);
}

void *mem_calloc(size_t n, size_t size_bytes)
{
	return mem_should_fail() ? NULL : calloc(n ? n : 1, size_bytes ? size_bytes : 1);
}

void *mem_realloc(void *p, size_t size_bytes)
{
	return mem_should_fail() ? NULL : realloc(p, size_bytes ? size_bytes : 1);
}

char *mem_strndup(const char *s, size_t n)
{
	size_t len = strnlen(s, n);
	char *d = mem_alloc(len + 1);
	if (!d)
		return NULL;
	memcpy(d, s, len);
	d[len] = '\0';
	return d;
}

char *mem_strdup(const char *s)
{
	return mem_strndup(s, strlen(s));
}

#define MEM_HUGE ((size_t)2 << 20) /* the huge page size the advice is for */
#define MEM_SLAB ((size_t)16 << 20) /* a shared slab's size, and every slab's alignment */
#define MEM_SLAB_HEAD 64	    /* the slab's header, before its first block */

/* A slab of mem_alloc_huge blocks: this header at its start, then the
 * blocks in the order they were asked for. A block finds its slab by
 * rounding its address down to MEM_SLAB (every block starts in its
 * slab's first MEM_SLAB bytes). */
struct mem_slab {
	size_t size; /* bytes, header included */
	size_t used; /* bytes handed out from the start, header included */
	size_t live; /* blocks not yet freed */
};

static pthread_mutex_t mem_slab_mu = PTHREAD_MUTEX_INITIALIZER;
static struct mem_slab *mem_slab_open; /* where small blocks go now, or NULL */

static struct mem_slab *mem_slab_new(size_t size)
{
	void *p = NULL;
	if (posix_memalign(&p, MEM_SLAB, size))
		return NULL;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
	(void)madvise(p, size, MADV_HUGEPAGE); /* advice only: refused is fine */
#endif
	struct mem_slab *s = p;
	*s = (struct mem_slab){ size, MEM_SLAB_HEAD, 0 };
	return s;
}

void *mem_alloc_huge(size_t size_bytes)
{
	if (mem_should_fail())
		return NULL;
	size_t need = size_bytes ? (size_bytes + 63) & ~(size_t)63 : 64;
	if (need > MEM_SLAB / 4) {
		/* its own slab, to a whole number of huge pages */
		size_t n = (MEM_SLAB_HEAD + need + MEM_HUGE - 1) & ~(MEM_HUGE - 1);
		struct mem_slab *s = n > need ? mem_slab_new(n) : NULL;
		if (!s)
			return NULL;
		s->used = n;
		s->live = 1;
		return (char *)s + MEM_SLAB_HEAD;
	}
	pthread_mutex_lock(&mem_slab_mu);
	struct mem_slab *s = mem_slab_open;
	if (!s || s->used + need > s->size) {
		/* the full one goes with its last block (mem_free_huge) */
		s = mem_slab_new(MEM_SLAB);
		if (s)
			mem_slab_open = s;
	}
	void *p = NULL;
	if (s) {
		p = (char *)s + s->used;
		s->used += need;
		s->live++;
	}
	pthread_mutex_unlock(&mem_slab_mu);
	return p;
}

void mem_free_huge(void *p)
{
	if (!p)
		return;
	struct mem_slab *s = (struct mem_slab *)((uintptr_t)p & ~(uintptr_t)(MEM_SLAB - 1));
	pthread_mutex_lock(&mem_slab_mu);
	bool last = --s->live == 0;
	if (last && s == mem_slab_open)
		mem_slab_open = NULL;
	pthread_mutex_unlock(&mem_slab_mu);
	if (last)
		free(s);
}

void mem_free(void *p)
{
	free(p);
}
