/* mem.h - the one allocation wrapper (STYLE practice 9).
 *
 * All heap allocation in inferd goes through these so that tests can fail
 * the k-th allocation (mem_fail_after) and see every error path. They
 * behave like their libc counterparts: NULL on failure, mem_free(NULL) is a
 * no-op. Thread-safe. Start-up code may treat NULL as fatal; request paths
 * must turn it into ST_NOMEM.
 */
#ifndef MEM_H
#define MEM_H

#include <stddef.h>

void *mem_alloc(size_t size_bytes);
void *mem_calloc(size_t n, size_t size_bytes);
void *mem_realloc(void *p, size_t size_bytes);
char *mem_strdup(const char *s);
char *mem_strndup(const char *s, size_t n);
void mem_free(void *p);

/* mem_alloc_huge - mem_alloc for a block read over and over (model
 * weights), 64-byte aligned, in memory offered to the kernel's
 * transparent huge pages (madvise MADV_HUGEPAGE, best effort: the
 * system's setting decides), so that a pass over hundreds of MB of
 * weights takes few TLB misses and its prefetches no page walks (a Q8_0
 * product over 178 MB: +3 % on an EPYC Zen 4; SmolLM2's 210 matrices of
 * 69 to 553 KB, two threads: 29 -> 34 GB/s). Blocks up to 4 MiB share
 * 16 MiB slabs, each slab handed back when its last block is freed (a
 * model's matrices come and go together); larger ones get their own.
 * Freed by mem_free_huge only. NULL on failure. Thread-safe. */
void *mem_alloc_huge(size_t size_bytes);
void mem_free_huge(void *p);

/* mem_keep_freed - set up the allocator at start-up, before any thread:
 * freed blocks stay in the process for reuse a while, so that a request's
 * big buffers (a Whisper window's cross-attention keys and values are
 * 18 MB) cost no page faults when the next request takes them again, and
 * what stays unused goes back to the system on its own.
 *   jemalloc (the default build): nothing at run time; mem.c's
 *   malloc_conf turned its background purging thread on, and unused dirty
 *   pages go back after jemalloc's decay time (opt.dirty_decay_ms, 10 s by
 *   default; MALLOC_CONF may change it).
 *   glibc (sanitizer builds, -Dallocator=libc): blocks up to 32 MB from
 *   its heaps, kept after free (M_MMAP_THRESHOLD, M_TRIM_THRESHOLD;
 *   mallopt(3)), at most one arena per CPU (M_ARENA_MAX) so that
 *   mem_release_freed reaches most of what is kept; the process keeps its
 *   peak heap until mem_release_freed.
 * A no-op where the C library is neither. */
void mem_keep_freed(void);

/* mem_release_freed - hand what the allocator keeps freed back to the
 * system now: jemalloc purges every arena's unused pages
 * ("arena.<MALLCTL_ARENAS_ALL>.purge"), glibc trims every arena and frees
 * the pages inside its heaps (malloc_trim(0)). The scheduler calls it when
 * the engine goes idle and every 30 s under load that never pauses. Walks
 * every arena: call it off the event loop. */
void mem_release_freed(void);

/* struct mem_stats - the allocator's own account, in bytes.
 *   allocated  what the program holds (allocated and not yet freed; may
 *              exceed the RSS: pages of a block never written are not
 *              resident, as in a KV cache sized for the whole context)
 *   kept       pages the program freed and the allocator keeps for reuse,
 *              not yet handed back (jemalloc's dirty and muzzy pages;
 *              glibc: the free chunks in its arenas, an upper bound, for
 *              pages malloc_trim gave back inside a heap stay counted)
 * allocator is "jemalloc", "glibc" or "" (unknown: both figures 0). */
struct mem_stats {
	size_t allocated;
	size_t kept;
	const char *allocator;
};

/* mem_stats_read - fill *out with the allocator's figures now (jemalloc:
 * refreshes its statistics epoch; glibc: mallinfo2(3), which locks each
 * arena in turn). Cheap enough for a metrics scrape. */
void mem_stats_read(struct mem_stats *out);

/* mem_fail_after - test hook: the next n allocations succeed and every later one fails, until called
 * again with n < 0 (never fail, the default). Process-wide, for tests only. */
void mem_fail_after(long n);

#endif /* MEM_H */
