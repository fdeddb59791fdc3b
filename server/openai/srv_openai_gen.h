/* srv_openai_gen.h - OpenAI's text generation routes, POST /v1/completions
 * and POST /v1/chat/completions: the job they share and the functions that
 * render its results. Internal to server/.
 *
 * Life of a job: the handler (srv_openai_gen.c) parses and validates the
 * JSON body on the loop thread, picks the model, builds the prompt (the
 * chat template for chat) and submits the n choices (seeds seed+0 ..
 * seed+n-1) to the model's scheduler (eng_generate_submit), where they
 * join running batches like any other sequences. The job is counted in
 * conn->n_work so the connection outlives it. With stream, each piece of
 * text the engine releases is rendered as an SSE event on the replica
 * thread and pushed to the job's srv_stream (srv_stream.h), which the loop
 * thread writes as it comes. When the last choice ends (its done callback,
 * on a replica thread) the job renders the whole JSON body (not
 * streaming) or the stream's tail, and posts itself to the loop thread
 * (srv__post), which ends the stream or sends the body, or the error in
 * OpenAI's shape (429 with Retry-After when the model's queue is full,
 * 504 past the request's deadline). While the job runs, the connection is
 * watched (srv__conn_watch): a client that hangs up sets job->cancel, and
 * the engine stops at its next step.
 */
#ifndef SRV_OPENAI_GEN_H
#define SRV_OPENAI_GEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "engine/eng.h"
#include "server/srv_buf.h"
#include "server/srv_int.h"
#include "server/srv_stream.h"

#define SRV_GEN_MAX_N 8                  /* choices per request ("n") */
#define SRV_GEN_CHAT_MAX_TOKENS 2048     /* chat's default max_tokens ceiling */
#define SRV_GEN_OUT_MAX (16u << 20)      /* ceiling on a rendered response body */
#define SRV_GEN_FINGERPRINT "fp_inferd_" INFERD_VERSION

struct srv_gen_job;

/* Which API a job answers: OpenAI's two, or KServe v2 / Triton's (their
 * bodies are translated to a completions body and parsed by the same
 * code; srv_kserve_gen.c renders their answers). */
enum srv_gen_kind {
	SRV_GEN_KIND_COMPLETIONS = 0,
	SRV_GEN_KIND_CHAT,
	SRV_GEN_KIND_KSERVE_INFER,	/* POST /v2/models/{name}/infer, TEXT_INPUT -> TEXT_OUTPUT */
	SRV_GEN_KIND_TRITON_GENERATE,	/* POST /v2/models/{name}/generate[_stream] */
	SRV_GEN_KIND_COUNT
};

/* One of the n choices: its own parameters (seed, streaming context). */
struct srv_gen_choice {
	struct srv_gen_job *job;
	int index;
	struct eng_gen_params params;     /* the job's, with this choice's seed and ud */
	/* streaming state, replica thread */
	bool role_sent;                   /* chat: the first delta (the role) went out */
	size_t offset_chars;              /* completions: text_offset of the next token */
};

struct srv_gen_job {
	struct srv_post post;             /* back to the loop thread when every choice ended */
	struct srv_conn *conn;            /* held through conn->n_work */
	const struct eng_model *model;    /* borrowed (lives as long as the engine) */
	struct eng_gen_params params;     /* prompt and stop point into this job */
	char *prompt;                     /* new (mem.h): the text to complete */
	char *stop[ENG_GEN_MAX_STOP];     /* new (mem.h) */
	enum srv_gen_kind kind;
	bool chat;                        /* kind == SRV_GEN_KIND_CHAT */
	bool ks_binary;                   /* KServe: TEXT_OUTPUT as binary tensor data */
	size_t ks_header_len;             /* > 0: Inference-Header-Content-Length of out */
	char ks_id[128];                  /* KServe: the request's "id", echoed */
	bool stream;                      /* answer with server-sent events */
	bool include_usage;               /* stream_options.include_usage */
	bool want_logprobs;               /* report logprobs (params.logprobs alternatives) */
	int n;                            /* choices, 1..SRV_GEN_MAX_N */
	uint64_t seed;                    /* seed of choice 0 */
	size_t prompt_chars;              /* code points in the prompt (completions text_offset) */
	char id[SRV_REQUEST_ID_MAX + 16]; /* "cmpl-..." / "chatcmpl-..." */
	int64_t created;                  /* Unix seconds */
	volatile int cancel;              /* set by the loop thread when the client leaves */
	struct eng_req_opts opts;         /* priority, deadline (request headers) */
	struct eng_logit_bias bias[ENG_GEN_MAX_BIAS]; /* logit_bias, params.bias points here */
	struct srv_stream *st;            /* when stream; released on the loop thread */
	struct srv_gen_choice ch[SRV_GEN_MAX_N];
	/* results, written by the replica threads under mu */
	pthread_mutex_t mu;
	int pending;                      /* choices submitted and not yet ended */
	int push_rc;                      /* first failed srv__stream_push, or 0 */
	int rc;                           /* 0 or the first choice's -ST_* */
	char err[512];                    /* message when rc != 0 */
	struct eng_gen_result *res[SRV_GEN_MAX_N]; /* new, one per finished choice */
	struct srv_buf out;               /* non-streamed body, SRV_GEN_OUT_MAX */
};

/* Worker thread (srv_openai_gen_out.c). Each returns 0, -ST_NOMEM, or
 * (pushes) srv__stream_push's error. */

/* srv__gen_on_text - eng_gen_params.on_text for streamed jobs (ud: the
 * struct srv_gen_choice): one delta event for the text (and the logprobs
 * of the tokens in it when asked). */
int srv__gen_on_text(void *ud, const char *text, size_t len, const struct eng_gen_token *toks,
		     size_t n_toks);
/* srv__gen_push_finish - the event closing choice c (empty delta or
 * text, finish_reason). */
int srv__gen_push_finish(struct srv_gen_choice *c);
/* srv__gen_push_tail - the usage event when asked, then "data: [DONE]". */
int srv__gen_push_tail(struct srv_gen_job *job);
/* srv__gen_push_json - send obj (stolen; NULL: out of memory) as one event
 * "data: <json>\n\n" on job->st; the first failure is kept in push_rc. */
int srv__gen_push_json(struct srv_gen_job *job, json_t *obj);
/* srv__gen_render - the whole non-streamed response body into job->out. */
int srv__gen_render(struct srv_gen_job *job);

/* srv__gen_error_json - OpenAI's error object (new; NULL when out of
 * memory): {"error":{"message","type","param","code"}}. Any thread. */
json_t *srv__gen_error_json(int status, const char *code, const char *param, const char *msg);

/* srv__gen_prepare - a job of kind for req from body, a JSON object of
 * the /v1/completions shape (borrowed), parsed and validated as that route
 * does. Returns the job (new), or NULL with *status (HTTP) and msg set.
 * Loop thread. */
struct srv_gen_job *srv__gen_prepare(struct srv_req *req, enum srv_gen_kind kind, json_t *body,
				     int *status, char *msg, size_t n);
/* srv__gen_queue - submit job (stolen); on refusal req is answered in
 * the job's protocol. Loop thread. */
void srv__gen_queue(struct srv_req *req, struct srv_gen_job *job);
/* srv__gen_job_free - free a job that was never queued; NULL is a no-op. */
void srv__gen_job_free(struct srv_gen_job *job);

/* KServe / Triton renderers (srv_kserve_gen.c), worker thread: the whole
 * body, and one streamed piece of text (generate_stream). */
int srv__ks_gen_render(struct srv_gen_job *job);
int srv__ks_gen_on_text(struct srv_gen_choice *c, const char *text, size_t len);
/* srv__ks_gen_error_event - the event ending a KServe stream in error. */
int srv__ks_gen_error_event(struct srv_gen_job *job, const char *msg);

/* Route handlers (srv_openai_gen.c). Loop thread. */
void srv__h_openai_completions(struct srv_req *req);
void srv__h_openai_chat_completions(struct srv_req *req);

#endif /* SRV_OPENAI_GEN_H */
