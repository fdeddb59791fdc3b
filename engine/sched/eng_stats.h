/* eng_stats.h - what a model's scheduler counts, for /metrics (Prometheus)
 * and GET /v2/models/{name}/stats: request outcomes, tokens and audio
 * seconds processed, queue depth and wait, batch sizes, per-replica busy
 * time, time to first token and inter-token latency.
 *
 * Histograms have fixed upper bounds (Prometheus "le" buckets); counts are
 * per bucket here, the renderer makes them cumulative. Thread: the
 * scheduler updates its stats under its mutex; eng_model_stats_get copies
 * them under the same mutex, so a snapshot is consistent.
 */
#ifndef ENG_STATS_H
#define ENG_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "devices/dev.h"

#define ENG_HIST_MAX 16 /* finite bucket bounds per histogram */
#define ENG_STATS_MAX_BATCH 256

struct eng_hist {
	int n_bounds;
	double bounds[ENG_HIST_MAX];       /* ascending upper bounds */
	uint64_t counts[ENG_HIST_MAX + 1]; /* observations per bucket; last: above every bound */
	double sum;
	uint64_t count;
};

/* eng_hist_init - bounds[n] (n <= ENG_HIST_MAX, ascending) and zero counts. */
void eng_hist_init(struct eng_hist *h, const double *bounds, int n);
/* eng_hist_add - count v in the first bucket whose bound is >= v. */
void eng_hist_add(struct eng_hist *h, double v);

/* One replica. */
struct eng_replica_stats {
	char device[DEV_NAME_MAX]; /* its device's canonical name, "cpu:0-1" */
	int threads;
	double started_ms;     /* monotonic ms when its loop began */
	double busy_ms;        /* time spent in batched compute steps */
	uint64_t batches;      /* steps run */
	uint64_t running;      /* requests taken and not finished (gauge) */
};

/* One model (all replicas). */
struct eng_model_stats {
	uint64_t submitted;    /* accepted by submit */
	uint64_t completed;    /* ended with success */
	uint64_t failed;       /* ended with an error other than the three below */
	uint64_t cancelled;    /* client gone or asked to stop */
	uint64_t timed_out;    /* deadline passed */
	uint64_t rejected;     /* refused at submit: queue full (-ST_BUSY) */
	uint64_t prompt_tokens, generated_tokens;
	double audio_seconds;  /* transcribed */
	double compute_ms;     /* sum over replicas of batched compute time */
	struct eng_hist queue_wait_ms; /* submit -> admitted into a batch */
	struct eng_hist batch_size;    /* sequences (generation) or windows (transcription) per step */
	struct eng_hist ttft_ms;       /* submit -> first generated token */
	struct eng_hist itl_ms;        /* between consecutive generated tokens */
	struct eng_hist request_ms;    /* submit -> end, successful requests */
	/* exact batch sizes (Triton's batch_stats): steps and their compute
	 * time per size 1..ENG_STATS_MAX_BATCH (larger ones in the last) */
	uint64_t batch_count[ENG_STATS_MAX_BATCH + 1];
	double batch_ms[ENG_STATS_MAX_BATCH + 1];
	double last_ms;                /* Unix ms of the last successful end (0: none) */
};

/* eng_stats_batch - one compute step of `size` sequences or windows that
 * took ms: the histogram and the exact per-size counts. */
void eng_stats_batch(struct eng_model_stats *s, int size, double ms);

/* eng_model_stats_init - zero counters, the histograms' standard bounds. */
void eng_model_stats_init(struct eng_model_stats *s);

struct eng_model;

/* A consistent copy of one model's stats. */
struct eng_stats {
	struct eng_model_stats model;
	uint64_t queue_depth;              /* waiting in the model's queue */
	int n_replicas;
	struct eng_replica_stats *replicas; /* [n_replicas], new (eng_stats_fini) */
	double now_ms;                     /* monotonic ms of the copy (busy ratios) */
};

/* eng_model_stats_get - copy m's stats into *out (eng_stats_fini after).
 * Any thread. Returns 0 or -ST_NOMEM. */
int eng_model_stats_get(const struct eng_model *m, struct eng_stats *out);
void eng_stats_fini(struct eng_stats *s);

#endif /* ENG_STATS_H */
