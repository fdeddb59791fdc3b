/* dev_int.h - internals of devices/ shared by dev.c, the back ends
 * (dev_cpu.c, opencl/dev_ocl.c), dev_spec.c, dev_queue.c and the unit tests;
 * engine/ includes dev.h only.
 *
 * A back end is a struct dev_backend: dev.c parses the kind of a spec
 * ("cpu", "opencl") and hands the rest to that back end's open; every
 * other call of dev.h goes through the table of the device it is given.
 */
#ifndef DEV_INT_H
#define DEV_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "devices/dev.h"

struct dev_backend;

/* A back end's compute (dev.h's compute section, same arguments; the
 * dispatch in dev_ops.c has checked sizes and skips empty work). */
struct dev_ops {
	int (*rms_norm)(struct dev_queue *q, const float *x, const float *w, float *y,
			size_t rows, size_t d, float eps);
	int (*layer_norm)(struct dev_queue *q, const float *x, const float *gamma,
			  const float *beta, float *y, size_t rows, size_t d, float eps);
	int (*add)(struct dev_queue *q, float *y, const float *x, size_t n);
	int (*scale)(struct dev_queue *q, float *x, float s, size_t n);
	int (*softcap)(struct dev_queue *q, float *x, size_t n, float cap);
	int (*gelu)(struct dev_queue *q, float *x, size_t n);
	int (*glu)(struct dev_queue *q, enum dev_glu kind, float *g, const float *u, size_t n);
	int (*softmax)(struct dev_queue *q, float *x, size_t rows, size_t n);
	int (*memcpy)(struct dev_queue *q, void *dst, const void *src, size_t n);
	int (*kv_store)(struct dev_queue *q, void *y, size_t hs, bool f16, const float *x,
			size_t ldx, size_t n, size_t n_heads, size_t head_dim);
	int (*argmax)(struct dev_queue *q, const float *x, size_t rows, size_t n, int32_t *out);
	int (*rope)(struct dev_queue *q, float *x, size_t n_tok, size_t ld, size_t n_head,
		    size_t head_dim, size_t n_rot, const float *cs, bool neox);
	int (*attention)(struct dev_queue *q, const struct dev_attn *a,
			 const struct dev_attn_seq *seqs, size_t n_seqs);
	int (*scores)(struct dev_queue *q, const struct dev_scores *s);
	int (*kv16_pack)(struct dev_queue *q, const float *kv, size_t ldkv, size_t n_kv,
			 size_t n_heads, size_t head_dim, uint16_t *cache);
	/* fill m->impl (m's other fields set, row_bytes checked) */
	int (*mat_create)(struct dev_mat *m, const void *host, char *err, size_t errlen);
	void (*mat_destroy)(struct dev_mat *m);
	int (*linear)(struct dev_queue *q, const struct dev_mat *w, const float *x, size_t M,
		      const float *b, float *y);
	int (*linear_n)(struct dev_queue *q, const float *x, size_t M,
			const struct dev_linear_out *o, size_t n);
	int (*embed)(struct dev_queue *q, const struct dev_mat *m, const int32_t *ids, size_t n,
		     float *y);
	int (*conv1d)(struct dev_queue *q, const struct dev_mat *w, size_t c_in, size_t k,
		      size_t stride, size_t pad, const float *x, size_t t_in, const float *b,
		      float *y);
};

/* A weight matrix (dev.h): what every back end has, its own in impl. */
struct dev_mat {
	struct dev *dev;
	int type;
	size_t rows, cols, row_bytes;
	const void *host; /* the caller's rows (borrowed): dev_embed reads them */
	unsigned flags;	  /* DEV_MAT_LOOKUP: impl NULL, no products */
	void *impl;
};

/* A device: what every back end has, and its own state in impl. */
struct dev {
	const struct dev_backend *be;
	struct dev_caps caps;
	int n_cpus;		/* host cores its queue threads are pinned to (cpu:
				 * the device's cores; others: 0, unpinned) */
	int cpus[DEV_MAX_CPUS]; /* [n_cpus] ascending */
	void *impl;		/* the back end's, freed by its close */
};

/* A back end's table. open fills d (caps, cpus, impl) from the part of
 * the spec after "kind:" (rest; NULL for a bare "kind"), err saying why
 * not; close frees impl. Memory: alloc/free/copy as dev_alloc/dev_free/
 * dev_copy (synchronous); upload/download order themselves after the
 * queue's earlier work and return when the bytes have arrived.
 * queue_open/queue_close make and free q's device-side stream (NULL:
 * the back end needs none); queue_finish waits until the device has run
 * every op enqueued on it (NULL: the back end's ops run synchronously),
 * 0 or -ST_DEVICE. list stores the caps of up to max devices of
 * this kind (returns how many, >= 0; a missing driver is 0 devices). */
struct dev_backend {
	const char *kind;
	int (*open)(struct dev *d, const char *spec, const char *rest, char *err, size_t errlen);
	void (*close)(struct dev *d);
	void *(*alloc)(struct dev *d, size_t n);
	void (*free)(struct dev *d, void *p);
	void (*copy)(struct dev *d, void *dst, const void *src, size_t n);
	int (*upload)(struct dev_queue *q, void *dst, const void *src, size_t n);
	int (*download)(struct dev_queue *q, void *dst, const void *src, size_t n);
	int (*queue_open)(struct dev_queue *q, char *err, size_t errlen);
	void (*queue_close)(struct dev_queue *q);
	int (*queue_finish)(struct dev_queue *q);
	int (*list)(struct dev_caps *out, int max);
	const struct dev_ops *ops;
};

extern const struct dev_backend dev__cpu_backend; /* dev_cpu.c */
extern const struct dev_backend dev__ocl_backend; /* opencl/dev_ocl.c */

extern const struct dev_ops dev__cpu_ops;
extern const struct dev_ops dev__ocl_ops;

/* dev__cpu_queue_open / close - the cpu back end's queue state (its
 * products' scratch), in dev_cpu_ops.c. */
int dev__cpu_queue_open(struct dev_queue *q, char *err, size_t errlen);
void dev__cpu_queue_close(struct dev_queue *q);

/* dev__cpu_causal - the cpu's causal attention (dev_attention without
 * full or ct2) of n_seqs sequences over pool p, in dev_cpu_attn.c; buf:
 * dev__cpu_causal_floats(dev_pool_size(p), ...) floats of scratch. */
size_t dev__cpu_causal_floats(int nth, const struct dev_attn *a, const struct dev_attn_seq *seqs,
			      size_t n_seqs);
void dev__cpu_causal(struct dev_pool *p, const struct dev_attn *a,
		     const struct dev_attn_seq *seqs, size_t n_seqs, float *buf);

/* dev__queue_pool - q's worker team (cpu back end; NULL elsewhere). */
struct dev_pool *dev__queue_pool(const struct dev_queue *q);

/* dev__queue_impl / dev__queue_set_impl - the back end's state of a
 * queue (its stream), set by its queue_open. */
void *dev__queue_impl(const struct dev_queue *q);
void dev__queue_set_impl(struct dev_queue *q, void *impl);

/* What the machine offers this process (filled by the probes). */
struct dev__hw {
	int n_cpus;		/* ids in cpus */
	int cpus[DEV_MAX_CPUS]; /* ascending CPU ids this process may use */
	uint64_t mem_bytes;	/* physical memory of the machine; 0: unknown */
};

/* dev__cpus_parse - parse a CPU list, "N", "A-B" or a comma list of those
 * ("0,2-3"), into ids[DEV_MAX_CPUS] ascending without duplicates. Strict:
 * digits, '-' and ',' only, no empty items, ids < DEV_MAX_CPUS, A <= B.
 * Returns how many ids (>= 1) or -ST_INVAL with err saying where. */
int dev__cpus_parse(const char *list, int *ids, char *err, size_t errlen);

/* dev__cpus_format - the canonical list of ids[n] (ascending, unique):
 * runs of consecutive ids as "A-B", joined by ','; "" for n == 0. Written
 * into buf[len] (len >= 4); when it does not fit, what fits of whole items
 * followed by "...". */
void dev__cpus_format(const int *ids, int n, char *buf, size_t len);

/* dev__probe_hwloc / dev__probe_os - fill hw from hwloc (the process
 * binding within the allowed cpuset; the root object's memory) or from
 * the OS alone (sched_getaffinity of the calling thread; sysconf).
 * Return 0, or -ST_IO when nothing usable came back. */
int dev__probe_hwloc(struct dev__hw *hw);
int dev__probe_os(struct dev__hw *hw);

#endif /* DEV_INT_H */
