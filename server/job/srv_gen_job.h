/* srv_gen_job.h - the text generation job every generation protocol shares
 * (OpenAI's /v1/completions and /v1/chat/completions, KServe v2's infer on
 * a generation model and Triton's generate / generate_stream). Internal to
 * server/.
 *
 * Life of a job: a protocol's handler parses and validates its request on
 * the loop thread, picks the model, fills a job (srv__gen_job_new: its own
 * struct, with this one embedded first) with the engine's parameters
 * (struct eng_gen_params) and the n choices wanted, and queues it
 * (srv__gen_job_queue): the choices (seeds seed+0 .. seed+n-1) go to the
 * model's scheduler together (eng_generate_submit_group), where they join
 * running batches like any other sequences. The job is counted in
 * conn->n_work so the connection outlives it. With stream, each piece of
 * text the engine releases goes to the protocol's render table (struct
 * srv_gen_render) on the replica thread, which pushes what it renders to
 * the job's srv_stream (srv_stream.h), written by the loop thread as it
 * comes. When the last choice ends (its done callback, on a replica
 * thread) the render table renders the whole body (not streaming) or the
 * stream's tail, and the job posts itself to the loop thread
 * (srv__post), which ends the stream or sends the body, or the error in
 * the protocol's shape. While the job runs the connection is watched
 * (srv__conn_watch): a client that hangs up sets job->cancel, and the
 * engine stops at its next step.
 */
#ifndef SRV_GEN_JOB_H
#define SRV_GEN_JOB_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>

#include "engine/eng.h"
#include "server/srv_buf.h"
#include "server/srv_int.h"
#include "server/srv_stream.h"

#define SRV_GEN_MAX_N 8             /* choices per request ("n") */
#define SRV_GEN_OUT_MAX (16u << 20) /* ceiling on a rendered response body */

struct srv_gen_job;

/* Why a request is refused: HTTP status, error code and param, message. */
struct srv_gen_err {
	int status;
	const char *code;  /* static */
	const char *param; /* static, NULL, or borrowed until e is answered */
	char msg[512];
};

/* One of the n choices: its own parameters (seed, streaming context). */
struct srv_gen_choice {
	struct srv_gen_job *job;
	int index;
	struct eng_gen_params params; /* the job's, with this choice's seed and ud */
};

/* What a protocol sends, filled once per protocol (a static const table).
 * The renderers run on replica threads and return 0, -ST_NOMEM,
 * -ST_TOOBIG or srv__stream_push's error (which stops the job). */
struct srv_gen_render {
	/* piece - one streamed piece of text of choice c, with the tokens
	 * whose text begins in it. */
	int (*piece)(struct srv_gen_choice *c, const char *text, size_t len,
		     const struct eng_gen_token *toks, size_t n_toks);
	/* choice_end - optional: choice c of a stream has finished. */
	int (*choice_end)(struct srv_gen_choice *c);
	/* stream_end - optional: every choice of a stream has finished. */
	int (*stream_end)(struct srv_gen_job *job);
	/* body - the whole non-streamed response body into job->out. */
	int (*body)(struct srv_gen_job *job);
	/* respond - optional, loop thread: send job->out as the answer to req
	 * (absent: 200, application/json). */
	void (*respond)(struct srv_gen_job *job, struct srv_req *req);
	/* respond_error - loop thread: answer req with e in the protocol's
	 * shape (and its Retry-After), before any byte of an answer. */
	void (*respond_error)(struct srv_req *req, const struct srv_gen_err *e);
	/* stream_error - replica or loop thread: push the event that ends a
	 * stream which has begun in error e. */
	void (*stream_error)(struct srv_gen_job *job, const struct srv_gen_err *e);
};

/* One generation request. Protocols embed it first in their own job
 * struct (so a pointer to theirs is a pointer to this) for their options. */
struct srv_gen_job {
	struct srv_post post;              /* back to the loop thread when every choice ended */
	struct srv_conn *conn;             /* held through conn->n_work */
	const struct srv_gen_render *render; /* the protocol's, static */
	const struct eng_model *model;     /* borrowed (lives as long as the engine) */
	struct eng_gen_params params;      /* prompt and stop point into this job */
	char *prompt;                      /* new (mem.h): the text to complete */
	uint8_t *prompt_plain;             /* new (mem.h) or NULL: chat content's mask
					    * (eng_chat_format) */
	char *stop[ENG_GEN_MAX_STOP];      /* new (mem.h) */
	const char *input_param;           /* the request field an oversized prompt is blamed on */
	bool stream;                       /* answer piece by piece (server-sent events) */
	int n;                             /* choices, 1..SRV_GEN_MAX_N */
	uint64_t seed;                     /* seed of choice 0 */
	_Atomic int cancel;               /* set by the loop thread when the client leaves */
	struct eng_req_opts opts;          /* priority, deadline (request headers) */
	struct srv_stream *st;             /* when stream; released on the loop thread */
	struct srv_gen_choice ch[SRV_GEN_MAX_N];
	/* results, written by the replica threads under mu */
	pthread_mutex_t mu;
	int pending;                       /* choices submitted and not yet ended */
	int push_rc;                       /* first failed srv__stream_push, or 0 */
	int rc;                            /* 0 or the first choice's -ST_* */
	char err[512];                     /* message when rc != 0 */
	struct eng_gen_result *res[SRV_GEN_MAX_N]; /* new, one per finished choice */
	struct srv_buf out;                /* non-streamed body, SRV_GEN_OUT_MAX */
};

/* srv__gen_job_new - a zeroed job of size bytes (at least sizeof(struct
 * srv_gen_job)) for req, speaking render (static, borrowed): one choice,
 * the engine's default parameters with the job's cancel flag, input_param
 * "prompt". New, or NULL when out of memory. Loop thread. */
struct srv_gen_job *srv__gen_job_new(struct srv_req *req, size_t size,
				     const struct srv_gen_render *render);

/* srv__gen_job_free - free a job that was never queued (and what it owns);
 * NULL is a no-op. */
void srv__gen_job_free(struct srv_gen_job *job);

/* srv__gen_job_queue - submit job's n choices (job stolen), job->model
 * and job->params set; with job->stream the answer is a 200 event stream.
 * When the model refuses them (queue full, prompt too long...) nothing
 * runs and req is answered at once through render->respond_error. Loop
 * thread. */
void srv__gen_job_queue(struct srv_req *req, struct srv_gen_job *job);

/* srv__gen_push_json - push obj (stolen; NULL: out of memory) as one event
 * "data: <json>\n\n" on job->st; the first failure is kept in push_rc.
 * Replica thread. 0, -ST_NOMEM or srv__stream_push's error. */
int srv__gen_push_json(struct srv_gen_job *job, json_t *obj);

/* srv__gen_err_set - fill e (the message from fmt); returns -ST_NOTFOUND
 * for a 404, else -ST_INVAL, so a parser can `return srv__gen_err_set(...)`.
 * Any thread. */
int srv__gen_err_set(struct srv_gen_err *e, int status, const char *code, const char *param,
		     const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* srv__gen_err_from_st - e for an engine status rc with its message msg (may
 * be NULL or ""), per srv_status.h's table; input_param is the field an
 * oversized prompt is blamed on. Any thread. */
void srv__gen_err_from_st(struct srv_gen_err *e, int rc, const char *input_param,
			  const char *msg);

/* JSON request fields read with OpenAI's rules, which every generation
 * protocol follows: an absent or null field leaves *out as it is; a field
 * of the wrong type is a 400 invalid_type, one out of [lo, hi] a 400
 * invalid_value, each naming the field (e filled, -ST_INVAL returned).
 * Loop thread. */
/* srv__gen_json_opt - o's member k (borrowed), NULL when absent or null. */
json_t *srv__gen_json_opt(json_t *o, const char *k);
int srv__gen_json_num(json_t *o, const char *k, double lo, double hi, float *out,
		      struct srv_gen_err *e);
int srv__gen_json_int(json_t *o, const char *k, json_int_t lo, json_int_t hi, json_int_t *out,
		      struct srv_gen_err *e);
int srv__gen_json_bool(json_t *o, const char *k, bool *out, struct srv_gen_err *e);
/* srv__gen_json_stop - o's "stop", a string or at most ENG_GEN_MAX_STOP
 * strings, into job->stop (new) and job->params.stop / n_stop; 503
 * server_overloaded when out of memory. */
int srv__gen_json_stop(struct srv_gen_job *job, json_t *o, struct srv_gen_err *e);

#endif /* SRV_GEN_JOB_H */
