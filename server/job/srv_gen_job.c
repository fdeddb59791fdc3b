/* srv_gen_job.c - the generation job every generation protocol shares
 * (srv_gen_job.h): submission of its choices to the model's scheduler,
 * streamed pieces and the end of each choice handed to the protocol's
 * render table on the replica threads, then the answer, the stream's end
 * or the error on the loop thread (srv__post).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "server/job/srv_gen_job.h"
#include "server/srv_status.h"

int srv__gen_err_set(struct srv_gen_err *e, int status, const char *code, const char *param,
		     const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = st_verrf(status == 404 ? -ST_NOTFOUND : -ST_INVAL, e->msg, sizeof(e->msg), NULL,
			  fmt, ap);
	va_end(ap);
	e->status = status;
	e->code = code;
	e->param = param;
	return rc;
}

void srv__gen_err_from_st(struct srv_gen_err *e, int rc, const char *input_param, const char *msg)
{
	const struct srv_status_row *row = srv__status_row(rc);
	const char *m = row->gen_msg ? row->gen_msg : msg && *msg ? msg : st_str(rc);
	const char *param = row->gen_param == SRV_STATUS_PARAM_INPUT   ? input_param
			    : row->gen_param == SRV_STATUS_PARAM_MODEL ? "model"
								       : NULL;
	srv__gen_err_set(e, row->gen_http, row->gen_code, param, "%s", m);
}

/* --- JSON field readers: absent and null leave *out as it is ------------ */

json_t *srv__gen_json_opt(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_null(v) ? NULL : v;
}

int srv__gen_json_num(json_t *o, const char *k, double lo, double hi, float *out,
		      struct srv_gen_err *e)
{
	json_t *v = srv__gen_json_opt(o, k);
	if (!v)
		return 0;
	if (!json_is_number(v))
		return srv__gen_err_set(e, 400, "invalid_type", k, "'%s' must be a number", k);
	double d = json_number_value(v);
	if (!(d >= lo && d <= hi))
		return srv__gen_err_set(e, 400, "invalid_value", k,
					"'%s' must be from %g to %g (got %g)", k, lo, hi, d);
	*out = (float)d;
	return 0;
}

int srv__gen_json_int(json_t *o, const char *k, json_int_t lo, json_int_t hi, json_int_t *out,
		      struct srv_gen_err *e)
{
	json_t *v = srv__gen_json_opt(o, k);
	if (!v)
		return 0;
	if (!json_is_integer(v))
		return srv__gen_err_set(e, 400, "invalid_type", k, "'%s' must be an integer", k);
	json_int_t i = json_integer_value(v);
	if (i < lo || i > hi)
		return srv__gen_err_set(e, 400, "invalid_value", k,
					"'%s' must be from %lld to %lld (got %lld)", k,
					(long long)lo, (long long)hi, (long long)i);
	*out = i;
	return 0;
}

int srv__gen_json_bool(json_t *o, const char *k, bool *out, struct srv_gen_err *e)
{
	json_t *v = srv__gen_json_opt(o, k);
	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return srv__gen_err_set(e, 400, "invalid_type", k, "'%s' must be a boolean", k);
	*out = json_is_true(v);
	return 0;
}

int srv__gen_json_stop(struct srv_gen_job *job, json_t *b, struct srv_gen_err *e)
{
	json_t *v = srv__gen_json_opt(b, "stop"), *item;
	size_t i;
	if (!v)
		return 0;
	if (json_is_string(v)) {
		job->stop[0] = mem_strdup(json_string_value(v));
		job->params.n_stop = 1;
	} else if (json_is_array(v) && json_array_size(v) <= ENG_GEN_MAX_STOP) {
		json_array_foreach(v, i, item) {
			if (!json_is_string(item))
				return srv__gen_err_set(
					e, 400, "invalid_type", "stop",
					"'stop' must be a string or an array of strings");
			job->stop[i] = mem_strdup(json_string_value(item));
			job->params.n_stop = (int)i + 1;
		}
	} else {
		return srv__gen_err_set(e, 400, json_is_array(v) ? "invalid_value" : "invalid_type",
					"stop",
					"'stop' must be a string or an array of at most %d strings",
					ENG_GEN_MAX_STOP);
	}
	for (int k = 0; k < job->params.n_stop; k++) {
		if (!job->stop[k])
			return srv__gen_err_set(e, 503, "server_overloaded", NULL, "out of memory");
		job->params.stop[k] = job->stop[k];
	}
	return 0;
}

struct srv_gen_job *srv__gen_job_new(struct srv_req *req, size_t size,
				     const struct srv_gen_render *render)
{
	if (size < sizeof(struct srv_gen_job))
		return NULL;
	struct srv_gen_job *job = mem_calloc(1, size);
	if (!job)
		return NULL;
	pthread_mutex_init(&job->mu, NULL);
	job->conn = req->conn;
	job->render = render;
	job->input_param = "prompt";
	job->n = 1;
	eng_gen_params_init(&job->params);
	job->params.cancel = &job->cancel;
	srv_buf_init(&job->out, SRV_GEN_OUT_MAX);
	return job;
}

void srv__gen_job_free(struct srv_gen_job *job)
{
	if (!job)
		return;
	for (int i = 0; i < SRV_GEN_MAX_N; i++)
		eng_gen_result_destroy(job->res[i]);
	for (int i = 0; i < ENG_GEN_MAX_STOP; i++)
		mem_free(job->stop[i]);
	srv__stream_destroy(job->st);
	srv_buf_fini(&job->out);
	mem_free(job->prompt);
	mem_free(job->prompt_plain);
	pthread_mutex_destroy(&job->mu);
	mem_free(job);
}

int srv__gen_push_json(struct srv_gen_job *job, json_t *obj)
{
	char *s = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
	json_decref(obj);
	if (!s)
		return -ST_NOMEM;
	struct srv_buf b;
	srv_buf_init(&b, SRV_GEN_OUT_MAX);
	int rc = srv_buf_printf(&b, "data: %s\n\n", s);
	free(s); /* jansson's allocator */
	if (!rc)
		rc = srv__stream_push(job->st, b.data, b.len);
	srv_buf_fini(&b);
	if (rc) {
		pthread_mutex_lock(&job->mu);
		if (!job->push_rc)
			job->push_rc = rc;
		pthread_mutex_unlock(&job->mu);
	}
	return rc;
}

/* The error event that ends a stream which has already begun. */
static void srv_gen_stream_error(struct srv_gen_job *job)
{
	struct srv_gen_err e;
	srv__gen_err_from_st(&e, job->rc, job->input_param, job->err);
	job->render->stream_error(job, &e);
}

/* The whole answer: the protocol's, or 200 with the JSON body. */
static void srv_gen_respond(struct srv_gen_job *job, struct srv_req *req)
{
	if (job->render->respond)
		job->render->respond(job, req);
	else
		srv__req_respond(req, 200, "application/json", job->out.data, job->out.len);
}

/* Loop thread, once every choice has ended: answer. */
static void srv_gen_after(struct srv_post *post)
{
	struct srv_gen_job *job = (struct srv_gen_job *)post;
	struct srv_conn *conn = job->conn;
	struct srv *srv = conn->srv;
	srv__conn_watch(conn, NULL);
	bool open = conn->state == SRV_CONN_STATE_HANDLING;
	if (job->st && (!open || !job->rc || !srv__stream_is_empty(job->st))) {
		if (open && job->rc)
			srv_gen_stream_error(job);
		srv__stream_finish(job->st);
		job->st = NULL;
	} else if (open && job->rc) {
		struct srv_gen_err e;
		srv__gen_err_from_st(&e, job->rc, job->input_param, job->err);
		job->render->respond_error(&conn->req, &e);
	} else if (open) {
		srv_gen_respond(job, &conn->req);
	} else {
		srv__req_log_gone(&conn->req);
	}
	srv__gen_job_free(job);
	srv__conn_work_done(conn);
	srv__jobs_end(srv);
}

/* Replica thread (or the loop thread when submission failed part way):
 * the last choice has ended; render and go back to the loop. */
static void srv_gen_last(struct srv_gen_job *job)
{
	int rc = job->rc;
	if (!rc && job->st)
		rc = job->render->stream_end ? job->render->stream_end(job) : 0;
	else if (!rc)
		rc = job->render->body(job);
	if (rc == -ST_CANCELED && job->push_rc)
		rc = job->push_rc;
	if (rc && (rc == -ST_NOMEM || rc == -ST_TOOBIG) && !job->err[0])
		snprintf(job->err, sizeof(job->err),
			 rc == -ST_NOMEM ? "out of memory"
					 : "the response is larger than the server's limit");
	job->rc = rc;
	srv__post(job->conn->srv, &job->post, srv_gen_after);
}

/* eng_gen_done_fn of one choice; replica thread. */
static void srv_gen_choice_done(void *ud, int rc, struct eng_gen_result *res, const char *err)
{
	struct srv_gen_choice *c = ud;
	struct srv_gen_job *job = c->job;
	pthread_mutex_lock(&job->mu);
	job->res[c->index] = res;
	if (rc && !job->rc) {
		job->rc = rc;
		snprintf(job->err, sizeof(job->err), "%s", err ? err : "");
		job->cancel = 1; /* the other choices stop at their next step */
	}
	bool finish = !rc && job->st && !job->rc && job->render->choice_end;
	pthread_mutex_unlock(&job->mu);
	if (finish && job->render->choice_end(c)) {
		pthread_mutex_lock(&job->mu);
		job->cancel = 1;
		pthread_mutex_unlock(&job->mu);
	}
	pthread_mutex_lock(&job->mu);
	bool last = --job->pending == 0;
	pthread_mutex_unlock(&job->mu);
	if (last)
		srv_gen_last(job);
}

/* eng_gen_params.on_text of streamed choices (ud: the choice); nonzero
 * stops the choice. Replica thread. */
static int srv_gen_on_text(void *ud, const char *text, size_t len, const struct eng_gen_token *toks,
			   size_t n_toks)
{
	struct srv_gen_choice *c = ud;
	if (c->job->cancel)
		return 1;
	return c->job->render->piece(c, text, len, toks, n_toks) ? 1 : 0;
}

/* Submit the n choices together (queued or refused as a whole); on
 * refusal nothing runs and req is answered at once. */
void srv__gen_job_queue(struct srv_req *req, struct srv_gen_job *job)
{
	struct srv_conn *conn = req->conn;
	const struct srv_gen_render *render = job->render;
	struct srv_gen_err e;
	char err[512] = "";
	const struct eng_gen_params *ps[SRV_GEN_MAX_N];
	void *uds[SRV_GEN_MAX_N];
	int rc = job->stream ? srv__stream_create(req, 200, "text/event-stream", &job->st) : 0;
	if (rc) {
		srv__gen_job_free(job);
		srv__gen_err_set(&e, 503, "server_overloaded", NULL, "out of memory");
		render->respond_error(req, &e);
		return;
	}
	for (int i = 0; i < job->n; i++) {
		struct srv_gen_choice *c = &job->ch[i];
		c->job = job;
		c->index = i;
		c->params = job->params;
		c->params.seed = job->seed + (uint64_t)i;
		if (job->st) {
			c->params.on_text = srv_gen_on_text;
			c->params.ud = c;
		}
		ps[i] = &c->params;
		uds[i] = c;
	}
	job->pending = job->n;
	rc = eng_generate_submit_group(job->model, ps, (size_t)job->n, &job->opts,
				       srv_gen_choice_done, uds, err, sizeof(err));
	if (rc) { /* nothing runs: answer now (the stream sent nothing yet) */
		const char *input_param = job->input_param; /* static */
		srv__gen_job_free(job);
		srv__gen_err_from_st(&e, rc, input_param, err);
		render->respond_error(req, &e);
		return;
	}
	conn->n_work++;
	srv__jobs_begin(conn->srv);
	srv__conn_watch(conn, &job->cancel);
}
