/* srv_kserve_gen.c - generation over KServe v2 REST: the request
 * parameters read straight into the engine's generation parameters, and
 * the render table of the answers, for the infer route on a generation
 * model (TEXT_OUTPUT, JSON or binary tensor data) and Triton's generate
 * extension ({"model_name", "model_version", "text_output"};
 * generate_stream: one server-sent event of that shape per piece of text,
 * no closing event, {"error": "..."} on failure). The parameters follow
 * /v1/completions' names, ranges and messages (one choice; no logprobs).
 * Renderers run on replica threads, the rest on the loop thread.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "server/job/srv_audio_job.h"
#include "server/job/srv_gen_job.h"
#include "server/kserve/srv_kserve.h"

/* A KServe generation request: the shared job first, then its options. */
struct srv_ks_gen_job {
	struct srv_gen_job base;
	bool triton;	   /* Triton's generate shape, not infer's tensors */
	bool binary;	   /* infer: TEXT_OUTPUT as binary tensor data */
	size_t header_len; /* > 0: Inference-Header-Content-Length of out */
	char id[128];	   /* infer: the request's "id", echoed */
};

/* --- the answers (replica threads) ---------------------------------------- */

static int srv_ks_gen_body(struct srv_gen_job *base)
{
	struct srv_ks_gen_job *job = (struct srv_ks_gen_job *)base;
	const struct eng_gen_result *r = base->res[0];
	const char *model = eng_model_name(base->model);
	if (job->triton) {
		json_t *text = srv__audio_json_str(r->text, r->text_len);
		json_t *o = text ? json_pack("{s:s,s:s,s:o}", "model_name", model, "model_version",
					     "1", "text_output", text)
				 : NULL;
		size_t none;
		struct srv_buf empty;
		srv_buf_init(&empty, 0);
		return srv__ks_finish(o, &empty, &base->out, &none);
	}
	json_t *outputs = json_array();
	struct srv_buf bin;
	srv_buf_init(&bin, SRV_GEN_OUT_MAX);
	int rc = outputs ? srv__ks_output(outputs, &bin, "TEXT_OUTPUT", r->text, r->text_len,
					  job->binary)
			 : -ST_NOMEM;
	if (!rc)
		rc = srv__ks_finish(srv__ks_response(model, job->id, outputs), &bin, &base->out,
				    &job->header_len);
	else
		json_decref(outputs);
	srv_buf_fini(&bin);
	return rc;
}

static int srv_ks_gen_piece(struct srv_gen_choice *c, const char *text, size_t len,
			    const struct eng_gen_token *toks, size_t n_toks)
{
	(void)toks;
	(void)n_toks;
	struct srv_gen_job *job = c->job;
	json_t *str = srv__audio_json_str(text, len);
	return srv__gen_push_json(job, str ? json_pack("{s:s,s:s,s:o}", "model_name",
						eng_model_name(job->model), "model_version", "1",
						"text_output", str)
				    : NULL);
}

static void srv_ks_gen_stream_error(struct srv_gen_job *job, const struct srv_gen_err *e)
{
	srv__gen_push_json(job, json_pack("{s:s}", "error", e->msg));
}

/* --- the answers (loop thread) --------------------------------------------- */

static void srv_ks_gen_respond(struct srv_gen_job *base, struct srv_req *req)
{
	struct srv_ks_gen_job *job = (struct srv_ks_gen_job *)base;
	char n[32];
	if (job->header_len) {
		snprintf(n, sizeof(n), "%zu", job->header_len);
		srv__req_add_header(req, "Inference-Header-Content-Length", n);
	}
	srv__req_respond(req, 200,
			 job->header_len ? "application/octet-stream" : "application/json",
			 base->out.data, base->out.len);
}

static void srv_ks_gen_respond_error(struct srv_req *req, const struct srv_gen_err *e)
{
	if (e->status == 503 || e->status == 429)
		srv__req_add_header(req, "Retry-After", "1");
	srv__req_respond_error(req, e->status, e->code, "%s", e->msg);
}

static const struct srv_gen_render srv_ks_gen_render = {
	.piece = srv_ks_gen_piece,
	.body = srv_ks_gen_body,
	.respond = srv_ks_gen_respond,
	.respond_error = srv_ks_gen_respond_error,
	.stream_error = srv_ks_gen_stream_error,
};

/* --- the request (loop thread) --------------------------------------------- */

/* The sampling parameters, in /v1/completions' order. */
static int srv_ks_gen_sampling(struct srv_gen_job *job, json_t *ps, struct srv_gen_err *e)
{
	struct eng_gen_params *p = &job->params;
	json_int_t top_k = 0, seed = 0;
	float top_p = 1;
	int rc = srv__gen_json_num(ps, "temperature", 0, 2, &p->temperature, e);
	if (!rc)
		rc = srv__gen_json_num(ps, "top_p", 0, 1, &top_p, e);
	if (!rc)
		rc = srv__gen_json_num(ps, "presence_penalty", -2, 2, &p->presence_penalty, e);
	if (!rc)
		rc = srv__gen_json_num(ps, "frequency_penalty", -2, 2, &p->frequency_penalty, e);
	if (!rc)
		rc = srv__gen_json_num(ps, "min_p", 0, 1, &p->min_p, e);
	if (!rc)
		rc = srv__gen_json_num(ps, "repetition_penalty", 1e-6, 10, &p->repetition_penalty,
				       e);
	if (!rc)
		rc = srv__gen_json_int(ps, "top_k", 0, 1 << 30, &top_k, e);
	if (!rc)
		rc = srv__gen_json_int(ps, "seed", INT64_MIN, INT64_MAX, &seed, e);
	p->top_p = top_p > 0 ? top_p : 1e-9f; /* 0: only the most likely token */
	p->top_k = (int)top_k;
	job->seed = (uint64_t)seed;
	if (!srv__gen_json_opt(ps, "seed") &&
	    uv_random(NULL, NULL, &job->seed, sizeof(job->seed), 0, NULL))
		job->seed = (uint64_t)uv_hrtime(); /* getrandom failed: still varies */
	return rc;
}

/* Every parameter, the prompt and the request headers' scheduling options. */
static int srv_ks_gen_parse(struct srv_gen_job *job, struct srv_req *req, const char *prompt,
			    size_t n, json_t *ps, struct srv_gen_err *e)
{
	json_int_t max = 0;
	int rc = srv_ks_gen_sampling(job, ps, e);
	if (!rc)
		rc = srv__gen_json_int(ps, "max_tokens", 1, INT32_MAX, &max, e);
	if (!rc && max)
		job->params.max_tokens = (int)max;
	if (!rc)
		rc = srv__gen_json_stop(job, ps, e);
	if (!rc) {
		job->prompt = mem_strndup(prompt, n);
		if (!job->prompt)
			rc = srv__gen_err_set(e, 503, "server_overloaded", NULL, "out of memory");
	}
	char msg[128];
	if (!rc && srv__req_sched_opts(req, &job->opts, msg, sizeof(msg)))
		rc = srv__gen_err_set(e, 400, "invalid_value", NULL, "%s", msg);
	if (!rc)
		job->params.prompt = job->prompt;
	return rc;
}

void srv__ks_gen_submit(struct srv_req *req, const struct eng_model *m, const char *prompt,
			size_t n, json_t *params, bool stream, bool triton, bool binary,
			const char *id)
{
	struct srv_gen_err e = {0};
	struct srv_ks_gen_job *job =
		(struct srv_ks_gen_job *)srv__gen_job_new(req, sizeof(*job), &srv_ks_gen_render);
	int rc = job ? srv_ks_gen_parse(&job->base, req, prompt, n, params, &e)
		     : srv__gen_err_set(&e, 503, "server_overloaded", NULL, "out of memory");
	if (rc) {
		srv__gen_job_free(job ? &job->base : NULL);
		srv_ks_gen_respond_error(req, &e);
		return;
	}
	job->base.model = m;
	job->base.stream = stream;
	job->triton = triton;
	job->binary = binary;
	snprintf(job->id, sizeof(job->id), "%s", id ? id : "");
	srv__gen_job_queue(req, &job->base);
}
