/* eng_stats.h - what a model's scheduler counts, for /metrics (Prometheus)
 * and GET /v2/models/{name}/stats: request outcomes, tokens and audio
 * seconds processed, queue depth and wait, batch sizes, per-replica busy
 * time and requests, time to first token and inter-token latency, and the
 * last ENG_STATS_RECENT requests the replicas ended (which replica, when
 * it took and ended each: what ran where and at the same time).
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
#define ENG_STATS_RECENT 32 /* ended requests kept, newest last */

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
	uint64_t requests;     /* requests taken and ended, any outcome (a transcription
				* that could not start for want of memory or a thread aside) */
	double ms_per_work;    /* its pace: a completed request's time (admitted to
				* ended) per unit of its work (an audio second, or a
				* prompt or generated token), averaged with weight 1/4
				* for the newest; 0 before the first */
};

/* One request a replica took and ended. Times are monotonic ms (the
 * clock of eng_stats.now_ms); [admitted_ms, ended_ms] is when the replica
 * had it: two requests whose spans intersect ran at the same time. */
struct eng_recent_req {
	int replica;               /* index of the replica that ran it */
	int rc;                    /* 0, or the -ST_ code it ended with */
	int priority;              /* enum eng_priority */
	double submitted_ms;       /* queued (eng__sched_submit) */
	double admitted_ms;        /* taken by the replica */
	double ended_ms;           /* ended */
	uint64_t prompt_tokens, generated_tokens; /* generation; 0 for transcription */
	double audio_seconds;      /* transcription; 0 for generation */
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
	uint64_t prompt_tokens_shared; /* of prompt_tokens, keys and values copied from
					* another running sequence's cache, not computed */
	double audio_seconds;  /* transcribed */
	uint64_t encoder_windows, encoder_positions; /* Whisper encoder windows computed and
					* their positions (1500 a full 30 s window; fewer
					* trimmed: eng_transcribe_params.window_min_s) */
	double compute_ms;     /* sum over replicas of batched compute time */
	uint64_t batch_parked_steps; /* steps (generation) or rounds (transcription) computed
				      * while batch-class work was parked for interactive work */
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
	/* ring of the last ENG_STATS_RECENT ended requests: n_recent_total
	 * recorded ever, the newest at (n_recent_total - 1) % ENG_STATS_RECENT */
	struct eng_recent_req recent[ENG_STATS_RECENT];
	uint64_t n_recent_total;
};

/* eng_stats_ended - a replica (rs, its stats) ended request e: count it in
 * rs->requests and keep a copy of e in s's ring (dropping the oldest when
 * full). e is borrowed. Under the scheduler's mutex (the loops). */
void eng_stats_ended(struct eng_model_stats *s, struct eng_replica_stats *rs,
		     const struct eng_recent_req *e);

/* eng_stats_recent - the ended requests kept in s, oldest first: sets
 * out[0..n) to borrowed pointers into s (out has ENG_STATS_RECENT slots)
 * and returns n (<= ENG_STATS_RECENT). */
size_t eng_stats_recent(const struct eng_model_stats *s,
			const struct eng_recent_req *out[ENG_STATS_RECENT]);

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
