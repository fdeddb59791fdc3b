/* srv_kserve_grpc_stream.c - KServe v2 ModelStreamInfer over the gRPC-lite
 * transport (srv_grpc.h): each request message of the call runs as its own
 * job; generation answers piece by piece as the engine releases text,
 * transcription once (docs/kserve.md). Loop thread, except the engine
 * callbacks (replica threads), which only append under the job's mutex and
 * post it back.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "server/kserve/srv_kserve_grpc.h"

/* One request of a ModelStreamInfer call. Generation streams its text: the
 * replica appends pieces under mu and posts the job to the loop (once at a
 * time: posted), which sends them as ModelStreamInferResponse messages;
 * the last message carries the parameter triton_final_response = true
 * (Triton's decoupled-response convention). Transcription answers once. */
struct srv_grpc_sjob {
	struct srv_grpc_job base;	/* first: the request, the engine results */
	pthread_mutex_t mu;
	struct srv_buf pieces;		/* text released and not yet sent, under mu */
	bool posted;			/* on the post queue, under mu */
	bool done;			/* the engine is finished with it, under mu */
	int slot;			/* its index in the stream's cancels[] */
};

/* A ModelStreamInferResponse: an error, or TEXT_OUTPUT / transcript
 * outputs of base with final set on the last. Packed and queued on s. */
static int srv_grpc_stream_reply(struct srv_grpc_stream *s, struct srv_grpc_job *job,
				 const char *text, size_t n, bool final, const char *error)
{
	static int64_t one[] = { 1 };
	Inference__ModelStreamInferResponse sr = INFERENCE__MODEL_STREAM_INFER_RESPONSE__INIT;
	Inference__ModelInferResponse r = INFERENCE__MODEL_INFER_RESPONSE__INIT;
	Inference__ModelInferResponse__InferOutputTensor t =
		INFERENCE__MODEL_INFER_RESPONSE__INFER_OUTPUT_TENSOR__INIT, *tp[1] = { &t };
	Inference__InferParameter fin = INFERENCE__INFER_PARAMETER__INIT;
	Inference__ModelInferResponse__ParametersEntry pe =
		INFERENCE__MODEL_INFER_RESPONSE__PARAMETERS_ENTRY__INIT, *pes[1] = { &pe };
	ProtobufCBinaryData raw = { 0, NULL };
	r.model_name = job->model ? (char *)eng_model_name(job->model) : job->req->model_name;
	r.model_version = "1";
	r.id = job->req->id;
	if (error) {
		sr.error_message = (char *)error;
	} else {
		t.name = job->t ? "TRANSCRIPT" : "TEXT_OUTPUT";
		t.datatype = "BYTES";
		t.n_shape = 1;
		t.shape = one;
		if (srv__grpc_raw_bytes(&raw, text, n))
			return -ST_NOMEM;
		r.n_outputs = 1;
		r.outputs = tp;
		r.n_raw_output_contents = 1;
		r.raw_output_contents = &raw;
		fin.parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM;
		fin.bool_param = final;
		pe.key = "triton_final_response";
		pe.value = &fin;
		r.n_parameters = 1;
		r.parameters = pes;
	}
	sr.infer_response = &r;
	size_t len = protobuf_c_message_get_packed_size(&sr.base);
	uint8_t *buf = mem_alloc(len ? len : 1);
	int rc = buf ? 0 : -ST_NOMEM;
	if (buf) {
		protobuf_c_message_pack(&sr.base, buf);
		rc = srv__grpc_stream_send(s, buf, len);
	}
	mem_free(buf);
	mem_free(raw.data);
	return rc;
}

static void srv_grpc_sjob_free(struct srv_grpc_sjob *j)
{
	srv_buf_fini(&j->pieces);
	pthread_mutex_destroy(&j->mu);
	srv__grpc_job_free(&j->base); /* base is first: this frees j */
}

/* Loop thread: send what the replica released; finish the request when
 * the engine is done with it. */
static void srv_grpc_sjob_after(struct srv_post *post)
{
	struct srv_grpc_sjob *j = (struct srv_grpc_sjob *)post;
	struct srv_grpc_job *job = &j->base;
	struct srv_grpc_conn *c = job->conn;
	struct srv *srv = c->srv;
	pthread_mutex_lock(&j->mu);
	struct srv_buf text = j->pieces;
	srv_buf_init(&j->pieces, j->pieces.max_len);
	bool done = j->done;
	j->posted = false;
	pthread_mutex_unlock(&j->mu);
	struct srv_grpc_stream *s = srv__grpc_stream_of(c, job->stream_id);
	if (s && s->status == SRV_GRPC_OK && (text.len || done)) {
		int rc = 0;
		if (done && job->rc)
			rc = srv_grpc_stream_reply(s, job, NULL, 0, true,
						   job->err[0] ? job->err : st_str(job->rc));
		else if (done && job->t)
			rc = srv_grpc_stream_reply(s, job, job->t->text, strlen(job->t->text), true,
						   NULL);
		else if (text.len || done)
			rc = srv_grpc_stream_reply(s, job, text.data ? text.data : "", text.len, done,
						   NULL);
		if (rc)
			job->cancel = 1;
	}
	srv_buf_fini(&text);
	if (!done)
		return;
	if (s) {
		s->cancels[j->slot] = NULL;
		s->n_running--;
		srv__grpc_stream_maybe_end(s);
	}
	srv_grpc_sjob_free(j);
	srv__grpc_work_done(c);
	srv__jobs_end(srv);
}

/* Replica thread: post j unless it is already on its way. */
static void srv_grpc_sjob_post(struct srv_grpc_sjob *j)
{
	bool post = !j->posted;
	j->posted = true;
	pthread_mutex_unlock(&j->mu);
	if (post)
		srv__post(j->base.conn->srv, &j->base.post, srv_grpc_sjob_after);
}

static int srv_grpc_sjob_text(void *ud, const char *text, size_t len,
			      const struct eng_gen_token *toks, size_t n_toks)
{
	(void)toks;
	(void)n_toks;
	struct srv_grpc_sjob *j = ud;
	if (j->base.cancel)
		return 1;
	pthread_mutex_lock(&j->mu);
	int rc = srv_buf_append(&j->pieces, text, len);
	srv_grpc_sjob_post(j); /* unlocks */
	return rc ? 1 : 0;
}

static void srv_grpc_sjob_gen_done(void *ud, int rc, struct eng_gen_result *res, const char *err)
{
	struct srv_grpc_sjob *j = ud;
	pthread_mutex_lock(&j->mu);
	j->base.rc = rc;
	j->base.res = res;
	snprintf(j->base.err, sizeof(j->base.err), "%s", err ? err : "");
	j->done = true;
	srv_grpc_sjob_post(j); /* unlocks */
}

static void srv_grpc_sjob_asr_done(void *ud, int rc, struct eng_transcript *t, const char *err)
{
	struct srv_grpc_sjob *j = ud;
	pthread_mutex_lock(&j->mu);
	j->base.rc = rc;
	j->base.t = t;
	snprintf(j->base.err, sizeof(j->base.err), "%s", err ? err : "");
	j->done = true;
	srv_grpc_sjob_post(j); /* unlocks */
}

static int srv_grpc_stream_submit(struct srv_grpc_stream *s, struct srv_grpc_sjob *j, char *err,
				  size_t errlen)
{
	return srv__grpc_infer_submit_cb(s, &j->base, srv_grpc_sjob_asr_done, srv_grpc_sjob_gen_done,
					srv_grpc_sjob_text, j, err, errlen);
}

void srv__ks_grpc_stream_message(struct srv_grpc_stream *s, const uint8_t *msg, size_t n)
{
	char err[512] = "";
	Inference__ModelInferRequest *r =
		inference__model_infer_request__unpack(NULL, n, msg);
	int slot = 0;
	while (slot < SRV_GRPC_STREAM_MAX_RUNNING && s->cancels[slot])
		slot++;
	const struct eng_model *m = r ? eng_model_find(srv__grpc_srv(s)->eng,
						       r->model_name ? r->model_name : "")
				      : NULL;
	struct srv_grpc_sjob *j = m && slot < SRV_GRPC_STREAM_MAX_RUNNING ? mem_calloc(1, sizeof(*j))
									 : NULL;
	if (!j) {
		struct srv_grpc_job tmp = { .model = m, .req = r };
		if (!r)
			snprintf(err, sizeof(err), "the message is not a ModelInferRequest");
		else if (!m)
			snprintf(err, sizeof(err), "unknown model '%s'",
				 r->model_name ? r->model_name : "");
		else
			snprintf(err, sizeof(err), "%s", slot >= SRV_GRPC_STREAM_MAX_RUNNING
							? "too many requests in flight on this stream"
							: "out of memory");
		if (r) /* this request fails; the call goes on */
			srv_grpc_stream_reply(s, &tmp, NULL, 0, true, err);
		else /* bytes that are no request: the call ends */
			srv__grpc_stream_fail(s, SRV_GRPC_INVALID_ARGUMENT, err);
		inference__model_infer_request__free_unpacked(r, NULL);
		return;
	}
	pthread_mutex_init(&j->mu, NULL);
	srv_buf_init(&j->pieces, (size_t)s->conn->srv->cfg->max_body_bytes);
	struct srv_grpc_job *job = &j->base;
	job->req = r;
	job->model = m;
	job->conn = s->conn;
	job->stream_id = s->id;
	j->slot = slot;
	int rc = srv_grpc_stream_submit(s, j, err, sizeof(err));
	if (rc) {
		srv_grpc_stream_reply(s, job, NULL, 0, true, err[0] ? err : st_str(rc));
		srv_grpc_sjob_free(j);
		return;
	}
	s->cancels[slot] = &job->cancel;
	s->n_running++;
	s->conn->n_work++;
	srv__jobs_begin(s->conn->srv);
}

