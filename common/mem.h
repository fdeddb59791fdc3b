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

/* mem_alloc_huge - mem_alloc for a large block read over and over (model
 * weights): from 2 MiB up, aligned to 2 MiB and offered to the kernel's
 * transparent huge pages (madvise MADV_HUGEPAGE, best effort: the
 * system's setting decides), so that a pass over hundreds of MB of
 * weights takes few TLB misses (a Q8_0 product over 178 MB: +3 % on an
 * EPYC Zen 4). Freed by mem_free. NULL on failure. */
void *mem_alloc_huge(size_t size_bytes);

/* mem_keep_freed - ask the allocator (glibc's malloc) to serve blocks up to
 * 32 MB from its heaps and to keep what is freed there for reuse, instead of
 * mapping each big block anew and returning it at free (M_MMAP_THRESHOLD,
 * M_TRIM_THRESHOLD; mallopt(3)). A request's buffers (a Whisper window's
 * cross-attention keys and values are 18 MB) then cost no page faults when
 * the next request takes them again. Also at most one arena per CPU
 * (M_ARENA_MAX), so that mem_release_freed can reach most of what is kept.
 * Call once at start-up, before any thread; the process keeps its peak
 * heap until mem_release_freed. A no-op where the C library has no
 * mallopt. */
void mem_keep_freed(void);

/* mem_release_freed - hand what the allocator keeps freed back to the
 * system (glibc's malloc_trim(0): every arena, free pages inside the heaps
 * too), undoing mem_keep_freed's hoard once the process goes idle: after a
 * burst of requests, each transcription's thread arena otherwise holds its
 * peak (bench/soak: +10 % RSS after an overload, heap in use unchanged).
 * Walks every arena: call off the event loop, when idle. A no-op where the
 * C library has no malloc_trim. */
void mem_release_freed(void);

/* mem_fail_after - test hook: the next n allocations succeed and every later one fails, until called
 * again with n < 0 (never fail, the default). Process-wide, for tests only. */
void mem_fail_after(long n);

#endif /* MEM_H */
