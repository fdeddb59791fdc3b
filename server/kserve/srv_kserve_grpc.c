/* srv_kserve_grpc.c - the methods of KServe v2's GRPCInferenceService
 * (server/kserve/kserve_v2.proto): health, metadata and ModelInfer for the
 * two model kinds, with the tensors of docs/kserve.md. Loop thread, except
 * the engine callbacks (replica threads), which only store results and
 * post the job back.
 *
 * ModelInfer inputs: a tensor's data is in its typed contents
 * (bytes_contents / fp32_contents) or in raw_input_contents[i] for the
 * i-th input (BYTES raw: each element a 4-byte little-endian length and
 * its bytes; FP32 raw: little-endian floats). Outputs go back as
 * raw_output_contents, as Triton answers. Parameters: vad_filter (bool,
 * transcription, an inferd extension as over REST), sample_rate (FP32
 * AUDIO), max_tokens, temperature, top_p, top_k, min_p, seed,
 * repetition_penalty (generation). Status codes: INVALID_ARGUMENT (a bad
 * tensor or parameter), NOT_FOUND (model or version), RESOURCE_EXHAUSTED
 * (queue full, message too big), DEADLINE_EXCEEDED (grpc-timeout or the
 * model's timeout_ms), UNAVAILABLE (shutting down, out of memory),
 * CANCELLED (the client reset the stream).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "kserve_v2.pb-c.h"
#include "engine/sched/eng_stats.h"
#include "server/grpc/srv_grpc.h"
#include "server/kserve/srv_kserve_grpc.h"
#include "server/kserve/srv_kserve.h"

#define SRV_GRPC_MAX_SAMPLES (16000u * 60u * 60u)

typedef void (*srv_grpc_method_fn)(struct srv_grpc_stream *s, const uint8_t *msg, size_t n);

void srv__grpc_send(struct srv_grpc_stream *s, const ProtobufCMessage *m)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	uint8_t *buf = mem_alloc(n ? n : 1);
	if (!buf) {
		srv__grpc_respond(s, SRV_GRPC_UNAVAILABLE, NULL, 0, "out of memory");
		return;
	}
	protobuf_c_message_pack(m, buf);
	srv__grpc_respond(s, SRV_GRPC_OK, buf, n, NULL);
	mem_free(buf);
}

struct srv *srv__grpc_srv(struct srv_grpc_stream *s)
{
	return s->conn->srv;
}

/* The model name / version of a request, or NULL after answering. */
static const struct eng_model *srv_grpc_model(struct srv_grpc_stream *s, const char *name,
					      const char *version)
{
	const struct eng_model *m = eng_model_find(srv__grpc_srv(s)->eng, name ? name : "");
	char msg[300];
	if (!m)
		snprintf(msg, sizeof(msg), "unknown model '%s'", name ? name : "");
	else if (version && *version && strcmp(version, "1"))
		snprintf(msg, sizeof(msg), "model '%s' has only version 1", name);
	else
		return m;
	srv__grpc_respond(s, SRV_GRPC_NOT_FOUND, NULL, 0, msg);
	return NULL;
}

/* msg [n] unpacked as a message of d (new: protobuf_c_message_free_unpacked),
 * or NULL after answering INVALID_ARGUMENT. */
static void *srv_grpc_unpack(struct srv_grpc_stream *s, const ProtobufCMessageDescriptor *d,
			     const uint8_t *msg, size_t n)
{
	ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, n, msg);
	if (!m) {
		char text[160];
		snprintf(text, sizeof(text), "the request is not a valid %s message", d->name);
		srv__grpc_respond(s, SRV_GRPC_INVALID_ARGUMENT, NULL, 0, text);
	}
	return m;
}

#define SRV_GRPC_UNPACK(type, desc, s, msg, n) ((type *)srv_grpc_unpack(s, &desc, msg, n))

/* --- health and metadata ---------------------------------------------------- */

static void srv_grpc_server_live(struct srv_grpc_stream *s, const uint8_t *msg, size_t n)
{
	Inference__ServerLiveRequest *r = SRV_GRPC_UNPACK(
		Inference__ServerLiveRequest, inference__server_live_request__descriptor, s, msg, n);
	if (!r)
		return;
	inference__server_live_request__free_unpacked(r, NULL);
	Inference__ServerLiveResponse out = INFERENCE__SERVER_LIVE_RESPONSE__INIT;
	out.live = 1;
	srv__grpc_send(s, &out.base);
}

static void srv_grpc_server_ready(struct srv_grpc_stream *s, const uint8_t *msg, size_t n)
{
	Inference__ServerReadyRequest *r = SRV_GRPC_UNPACK(
		Inference__ServerReadyRequest, inference__server_ready_request__descriptor, s, msg, n);
	if (!r)
		return;
	inference__server_ready_request__free_unpacked(r, NULL);
	Inference__ServerReadyResponse out = INFERENCE__SERVER_READY_RESPONSE__INIT;
	out.ready = eng_is_ready(srv__grpc_srv(s)->eng) && !srv__grpc_srv(s)->draining;
	srv__grpc_send(s, &out.base);
}

static void srv_grpc_model_ready(struct srv_grpc_stream *s, const uint8_t *msg, size_t n)
{
	Inference__ModelReadyRequest *r = SRV_GRPC_UNPACK(
		Inference__ModelReadyRequest, inference__model_ready_request__descriptor, s, msg, n);
	if (!r)
		return;
	const struct eng_model *m = srv_grpc_model(s, r->name, r->version);
	inference__model_ready_request__free_unpacked(r, NULL);
	if (!m)
		return;
	Inference__ModelReadyResponse out = INFERENCE__MODEL_READY_RESPONSE__INIT;
	out.ready = eng_model_is_ready(m);
	srv__grpc_send(s, &out.base);
}

static void srv_grpc_server_metadata(struct srv_grpc_stream *s, const uint8_t *msg, size_t n)
{
	Inference__ServerMetadataRequest *r =
		SRV_GRPC_UNPACK(Inference__ServerMetadataRequest,
				inference__server_metadata_request__descriptor, s, msg, n);
	if (!r)
		return;
	inference__server_metadata_request__free_unpacked(r, NULL);
	static char *ext[] = { "binary_tensor_data", "statistics", "generate" };
	Inference__ServerMetadataResponse out = INFERENCE__SERVER_METADATA_RESPONSE__INIT;
	out.name = "inferd";
	out.version = INFERD_VERSION;
	out.n_extensions = 3;
	out.extensions = ext;
	srv__grpc_send(s, &out.base);
}

static void srv_grpc_model_metadata(struct srv_grpc_stream *s, const uint8_t *msg, size_t n)
{
	Inference__ModelMetadataRequest *r =
		SRV_GRPC_UNPACK(Inference__ModelMetadataRequest,
				inference__model_metadata_request__descriptor, s, msg, n);
	if (!r)
		return;
	const struct eng_model *m = srv_grpc_model(s, r->name, r->version);
	inference__model_metadata_request__free_unpacked(r, NULL);
	if (!m)
		return;
	const struct srv_ks_tensors *tn = srv__ks_tensors(m);
	static int64_t one[] = { 1 };
	Inference__ModelMetadataResponse__TensorMetadata t[3], *ins[1] = { &t[0] }, *outs[2];
	for (int i = 0; i <= tn->n_outputs; i++) {
		inference__model_metadata_response__tensor_metadata__init(&t[i]);
		t[i].name = (char *)(i ? tn->outputs[i - 1] : tn->input);
		t[i].datatype = "BYTES";
		t[i].n_shape = 1;
		t[i].shape = one;
		if (i)
			outs[i - 1] = &t[i];
	}
	char platform[96];
	srv__ks_platform(m, platform, sizeof(platform));
	static char *versions[] = { "1" };
	Inference__ModelMetadataResponse out = INFERENCE__MODEL_METADATA_RESPONSE__INIT;
	out.name = (char *)eng_model_name(m);
	out.n_versions = 1;
	out.versions = versions;
	out.platform = platform;
	out.n_inputs = 1;
	out.inputs = ins;
	out.n_outputs = (size_t)tn->n_outputs;
	out.outputs = outs;
	srv__grpc_send(s, &out.base);
}

/* ModelConfig (Triton's extension): max_batch_size 0 (requests are not
 * batched along a tensor dimension; the scheduler batches them), the
 * tensors of ModelMetadata as TYPE_STRING [1]. */
static void srv_grpc_model_config(struct srv_grpc_stream *s, const uint8_t *msg, size_t n)
{
	Inference__ModelConfigRequest *r = SRV_GRPC_UNPACK(
		Inference__ModelConfigRequest, inference__model_config_request__descriptor, s, msg, n);
	if (!r)
		return;
	const struct eng_model *m = srv_grpc_model(s, r->name, r->version);
	inference__model_config_request__free_unpacked(r, NULL);
	if (!m)
		return;
	const struct srv_ks_tensors *tn = srv__ks_tensors(m);
	static int64_t one[] = { 1 };
	Inference__ModelInput in = INFERENCE__MODEL_INPUT__INIT, *ins[1] = { &in };
	Inference__ModelOutput o[2], *outs[2] = { &o[0], &o[1] };
	in.name = (char *)tn->input;
	in.data_type = INFERENCE__DATA_TYPE__TYPE_STRING;
	in.n_dims = 1;
	in.dims = one;
	for (int i = 0; i < tn->n_outputs; i++) {
		inference__model_output__init(&o[i]);
		o[i].name = (char *)tn->outputs[i];
		o[i].data_type = INFERENCE__DATA_TYPE__TYPE_STRING;
		o[i].n_dims = 1;
		o[i].dims = one;
	}
	char platform[96];
	srv__ks_platform(m, platform, sizeof(platform));
	Inference__ModelConfig cfg = INFERENCE__MODEL_CONFIG__INIT;
	cfg.name = (char *)eng_model_name(m);
	cfg.platform = platform;
	cfg.backend = "inferd";
	cfg.n_input = 1;
	cfg.input = ins;
	cfg.n_output = (size_t)tn->n_outputs;
	cfg.output = outs;
	Inference__ModelConfigResponse out = INFERENCE__MODEL_CONFIG_RESPONSE__INIT;
	out.config = &cfg;
	srv__grpc_send(s, &out.base);
}

/* ModelStatistics (Triton's extension): the figures of
 * /v2/models/{name}/stats, for one model or (name "") every model. */
struct srv_grpc_stats_one {
	Inference__ModelStatistics ms;
	Inference__InferStatistics is;
	Inference__StatisticDuration d[6]; /* success, fail, queue, compute_infer, _input, _output */
	Inference__InferBatchStatistics b[ENG_STATS_MAX_BATCH];
	Inference__StatisticDuration bd[ENG_STATS_MAX_BATCH];
	Inference__InferBatchStatistics *bp[ENG_STATS_MAX_BATCH];
};

static void srv_grpc_dur(Inference__StatisticDuration *d, uint64_t count, double ms)
{
	inference__statistic_duration__init(d);
	d->count = count;
	d->ns = (uint64_t)(ms * 1e6);
}

static void srv_grpc_stats_fill(struct srv_grpc_stats_one *o, const struct eng_model *m,
				const struct eng_stats *s)
{
	const struct eng_model_stats *st = &s->model;
	uint64_t batches = 0;
	for (int r = 0; r < s->n_replicas; r++)
		batches += s->replicas[r].batches;
	inference__model_statistics__init(&o->ms);
	inference__infer_statistics__init(&o->is);
	o->ms.name = (char *)eng_model_name(m);
	o->ms.version = "1";
	o->ms.last_inference = (uint64_t)st->last_ms;
	o->ms.inference_count = st->completed;
	o->ms.execution_count = batches;
	srv_grpc_dur(&o->d[0], st->completed, st->request_ms.sum);
	srv_grpc_dur(&o->d[1], st->failed + st->cancelled + st->timed_out, 0);
	srv_grpc_dur(&o->d[2], st->queue_wait_ms.count, st->queue_wait_ms.sum);
	srv_grpc_dur(&o->d[3], batches, st->compute_ms);
	/* input and output handling are inside the passes: zero time, the
	 * same count (clients check the three counts agree) */
	srv_grpc_dur(&o->d[4], batches, 0);
	srv_grpc_dur(&o->d[5], batches, 0);
	o->is.compute_input = &o->d[4];
	o->is.compute_output = &o->d[5];
	o->is.success = &o->d[0];
	o->is.fail = &o->d[1];
	o->is.queue = &o->d[2];
	o->is.compute_infer = &o->d[3];
	o->ms.inference_stats = &o->is;
	for (int b = 1; b <= ENG_STATS_MAX_BATCH; b++) {
		if (!st->batch_count[b])
			continue;
		Inference__InferBatchStatistics *e = &o->b[o->ms.n_batch_stats];
		inference__infer_batch_statistics__init(e);
		e->batch_size = (uint64_t)b;
		srv_grpc_dur(&o->bd[o->ms.n_batch_stats], st->batch_count[b], st->batch_ms[b]);
		e->compute_infer = &o->bd[o->ms.n_batch_stats];
		o->bp[o->ms.n_batch_stats++] = e;
	}
	o->ms.batch_stats = o->bp;
}

static void srv_grpc_model_statistics(struct srv_grpc_stream *s, const uint8_t *msg, size_t n)
{
	Inference__ModelStatisticsRequest *r =
		SRV_GRPC_UNPACK(Inference__ModelStatisticsRequest,
				inference__model_statistics_request__descriptor, s, msg, n);
	if (!r)
		return;
	const struct eng *eng = srv__grpc_srv(s)->eng;
	const struct eng_model *only = r->name && *r->name ? srv_grpc_model(s, r->name, r->version)
							   : NULL;
	bool bad = r->name && *r->name && !only;
	inference__model_statistics_request__free_unpacked(r, NULL);
	if (bad)
		return;
	size_t cnt = eng_model_count(eng);
	struct srv_grpc_stats_one *o = mem_calloc(cnt ? cnt : 1, sizeof(*o));
	Inference__ModelStatistics **list = mem_calloc(cnt ? cnt : 1, sizeof(*list));
	size_t k = 0;
	int rc = o && list ? 0 : -ST_NOMEM;
	for (size_t i = 0; !rc && i < cnt; i++) {
		const struct eng_model *m = eng_model_at(eng, i);
		struct eng_stats st;
		if (only && m != only)
			continue;
		rc = eng_model_stats_get(m, &st);
		if (rc)
			break;
		srv_grpc_stats_fill(&o[k], m, &st);
		eng_stats_fini(&st);
		list[k] = &o[k].ms;
		k++;
	}
	if (rc) {
		srv__grpc_respond(s, SRV_GRPC_UNAVAILABLE, NULL, 0, "out of memory");
	} else {
		Inference__ModelStatisticsResponse out = INFERENCE__MODEL_STATISTICS_RESPONSE__INIT;
		out.n_model_stats = k;
		out.model_stats = list;
		srv__grpc_send(s, &out.base);
	}
	mem_free(list);
	mem_free(o);
}

/* --- ModelInfer ----------------------------------------------------------------- */



void srv__grpc_job_free(struct srv_grpc_job *job)
{
	if (!job)
		return;
	inference__model_infer_request__free_unpacked(job->req, NULL);
	eng_transcript_destroy(job->t);
	eng_gen_result_destroy(job->res);
	mem_free(job->owned_audio);
	mem_free(job);
}

/* One BYTES output element appended as raw output content. */
int srv__grpc_raw_bytes(ProtobufCBinaryData *raw, const char *s, size_t n)
{
	raw->data = mem_alloc(n + 4);
	if (!raw->data)
		return -ST_NOMEM;
	raw->data[0] = (uint8_t)n;
	raw->data[1] = (uint8_t)(n >> 8);
	raw->data[2] = (uint8_t)(n >> 16);
	raw->data[3] = (uint8_t)(n >> 24);
	memcpy(raw->data + 4, s, n);
	raw->len = n + 4;
	return 0;
}

/* The segments as JSON text (new, jansson's allocator): REST's SEGMENTS. */
static char *srv_grpc_segments(const struct eng_transcript *t)
{
	json_t *a = srv__ks_segments(t);
	char *s = a ? json_dumps(a, JSON_COMPACT | JSON_REAL_PRECISION(6)) : NULL;
	json_decref(a);
	return s;
}

/* The ModelInferResponse of a finished job, sent on s. */
static void srv_grpc_infer_answer(struct srv_grpc_stream *s, struct srv_grpc_job *job)
{
	static int64_t one[] = { 1 };
	const char *names[2];
	const char *data[2] = { NULL, NULL };
	size_t lens[2] = { 0, 0 };
	char *segs = NULL;
	int n_out = 0;
	if (job->t) {
		names[0] = "TRANSCRIPT";
		names[1] = "SEGMENTS";
		data[0] = job->t->text;
		lens[0] = strlen(job->t->text);
		segs = job->want[1] ? srv_grpc_segments(job->t) : NULL;
		data[1] = segs;
		lens[1] = segs ? strlen(segs) : 0;
	} else {
		names[0] = "TEXT_OUTPUT";
		data[0] = job->res->text;
		lens[0] = job->res->text_len;
	}
	Inference__ModelInferResponse__InferOutputTensor t[2], *tp[2];
	ProtobufCBinaryData raw[2] = { { 0, NULL }, { 0, NULL } };
	int rc = 0;
	for (int i = 0; i < 2 && !rc; i++) {
		if (!job->want[i] || !data[i])
			continue;
		inference__model_infer_response__infer_output_tensor__init(&t[n_out]);
		t[n_out].name = (char *)names[i];
		t[n_out].datatype = "BYTES";
		t[n_out].n_shape = 1;
		t[n_out].shape = one;
		tp[n_out] = &t[n_out];
		rc = srv__grpc_raw_bytes(&raw[n_out], data[i], lens[i]);
		n_out++;
	}
	Inference__ModelInferResponse out = INFERENCE__MODEL_INFER_RESPONSE__INIT;
	out.model_name = (char *)eng_model_name(job->model);
	out.model_version = "1";
	out.id = job->req->id;
	out.n_outputs = (size_t)n_out;
	out.outputs = tp;
	out.n_raw_output_contents = (size_t)n_out;
	out.raw_output_contents = raw;
	if (rc || (job->want[1] && job->t && !segs))
		srv__grpc_respond(s, SRV_GRPC_UNAVAILABLE, NULL, 0, "out of memory");
	else
		srv__grpc_send(s, &out.base);
	for (int i = 0; i < 2; i++)
		mem_free(raw[i].data);
	free(segs); /* jansson's allocator */
}

/* Loop thread: the job ended; answer if its stream is still there. */
static void srv_grpc_job_after(struct srv_post *post)
{
	struct srv_grpc_job *job = (struct srv_grpc_job *)post;
	struct srv_grpc_conn *c = job->conn;
	struct srv *srv = c->srv;
	struct srv_grpc_stream *s = srv__grpc_stream_of(c, job->stream_id);
	if (s) {
		s->job = NULL;
		s->cancel = NULL;
		if (job->rc)
			srv__grpc_respond(s, srv__status_grpc(job->rc), NULL, 0,
					  job->err[0] ? job->err : st_str(job->rc));
		else
			srv_grpc_infer_answer(s, job);
	}
	srv__grpc_job_free(job);
	srv__grpc_work_done(c);
	srv__jobs_end(srv);
}

static void srv_grpc_asr_done(void *ud, int rc, struct eng_transcript *t, const char *err)
{
	struct srv_grpc_job *job = ud;
	job->rc = rc;
	job->t = t;
	snprintf(job->err, sizeof(job->err), "%s", err ? err : "");
	srv__post(job->conn->srv, &job->post, srv_grpc_job_after);
}

static void srv_grpc_gen_done(void *ud, int rc, struct eng_gen_result *res, const char *err)
{
	struct srv_grpc_job *job = ud;
	job->rc = rc;
	job->res = res;
	snprintf(job->err, sizeof(job->err), "%s", err ? err : "");
	if (!rc && !res)
		job->rc = -ST_IO;
	srv__post(job->conn->srv, &job->post, srv_grpc_job_after);
}

/* A parameter of the request or of input t, as a number; absent: false. */
static bool srv_grpc_param(Inference__ModelInferRequest *r,
			   Inference__ModelInferRequest__InferInputTensor *t, const char *key,
			   double *out)
{
	for (int pass = 0; pass < 2; pass++) {
		size_t n = pass ? r->n_parameters : t ? t->n_parameters : 0;
		for (size_t i = 0; i < n; i++) {
			const char *k = pass ? r->parameters[i]->key : t->parameters[i]->key;
			Inference__InferParameter *v = pass ? r->parameters[i]->value
							    : t->parameters[i]->value;
			if (!k || strcmp(k, key) || !v)
				continue;
			switch (v->parameter_choice_case) {
			case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM:
				*out = (double)v->int64_param;
				return true;
			case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM:
				*out = (double)v->uint64_param;
				return true;
			case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_DOUBLE_PARAM:
				*out = v->double_param;
				return true;
			default: /* bool or string: not a number */
				*out = NAN; /* a string: not a number */
				return true;
			}
		}
	}
	return false;
}

/* A bool_param's value into *out; false (not a bool) otherwise. */
static bool srv_grpc_bool(const Inference__InferParameter *v, bool *out)
{
	if (!v || v->parameter_choice_case != INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM)
		return false;
	*out = v->bool_param;
	return true;
}

/* The transcription's request parameters, as REST reads them (inferd's
 * extensions): vad_filter and word_timestamps (bool_param), language and
 * task (string_param; borrowed from r, which the job keeps). 0 or
 * -ST_INVAL with err. */
static int srv_grpc_asr_params(Inference__ModelInferRequest *r, struct eng_transcribe_params *p,
			       char *err, size_t errlen)
{
	p->vad_filter = ENG_VAD_FILTER_DEFAULT;
	for (size_t i = 0; i < r->n_parameters; i++) {
		const char *k = r->parameters[i]->key;
		const Inference__InferParameter *v = r->parameters[i]->value;
		bool str = v && v->parameter_choice_case ==
				       INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM &&
			   v->string_param;
		bool b;
		if (!k)
			continue;
		if (!strcmp(k, "vad_filter")) {
			if (!srv_grpc_bool(v, &b))
				return snprintf(err, errlen, "parameter vad_filter must be true or false"),
				       -ST_INVAL;
			p->vad_filter = b ? ENG_VAD_FILTER_ON : ENG_VAD_FILTER_OFF;
		} else if (!strcmp(k, "word_timestamps")) {
			if (!srv_grpc_bool(v, &p->word_timestamps))
				return snprintf(err, errlen,
						"parameter word_timestamps must be true or false"),
				       -ST_INVAL;
		} else if (!strcmp(k, "language")) {
			if (!str || !v->string_param[0] || strlen(v->string_param) >= 16)
				return snprintf(err, errlen, "parameter language must be an ISO 639-1 "
							     "code such as 'en'"),
				       -ST_INVAL;
			p->language = v->string_param;
		} else if (!strcmp(k, "task")) {
			if (!str || (strcmp(v->string_param, "transcribe") &&
				     strcmp(v->string_param, "translate")))
				return snprintf(err, errlen, "parameter task must be \"transcribe\" or "
							     "\"translate\""),
				       -ST_INVAL;
			p->task = v->string_param;
		}
	}
	return 0;
}

/* Elements of t: -1 when a dimension is < 1 or the product passes
 * SRV_GRPC_MAX_SAMPLES (checked while multiplying: no overflow). */
static int64_t srv_grpc_elements(const Inference__ModelInferRequest__InferInputTensor *t)
{
	int64_t n = 1;
	if (t->n_shape < 1)
		return -1;
	for (size_t d = 0; d < t->n_shape; d++) {
		if (t->shape[d] < 1 || t->shape[d] > (int64_t)SRV_GRPC_MAX_SAMPLES / n)
			return -1;
		n *= t->shape[d];
	}
	return n;
}

/* Input i's raw content, or NULL. */
static const ProtobufCBinaryData *srv_grpc_raw_in(Inference__ModelInferRequest *r, size_t i)
{
	return i < r->n_raw_input_contents ? &r->raw_input_contents[i] : NULL;
}

/* The one BYTES element of input i: *p, *n. */
static int srv_grpc_one_bytes(Inference__ModelInferRequest *r, size_t i, const uint8_t **p,
			      size_t *n, char *err, size_t errlen)
{
	Inference__ModelInferRequest__InferInputTensor *t = r->inputs[i];
	if (strcmp(t->datatype ? t->datatype : "", "BYTES") || srv_grpc_elements(t) != 1) {
		snprintf(err, errlen, "input '%s' must be BYTES with one element (shape [1])", t->name);
		return -ST_INVAL;
	}
	const ProtobufCBinaryData *raw = srv_grpc_raw_in(r, i);
	if (raw) {
		size_t l = raw->len >= 4 ? (size_t)raw->data[0] | (size_t)raw->data[1] << 8 |
						   (size_t)raw->data[2] << 16 |
						   (size_t)raw->data[3] << 24
					 : 0;
		if (raw->len < 4 || l != raw->len - 4) {
			snprintf(err, errlen, "input '%s': raw BYTES content is one 4-byte length "
					      "and that many bytes", t->name);
			return -ST_INVAL;
		}
		*p = raw->data + 4;
		*n = l;
		return 0;
	}
	if (!t->contents || t->contents->n_bytes_contents != 1) {
		snprintf(err, errlen, "input '%s' needs one element in bytes_contents or "
				      "raw_input_contents", t->name);
		return -ST_INVAL;
	}
	*p = t->contents->bytes_contents[0].data;
	*n = t->contents->bytes_contents[0].len;
	return 0;
}

/* FP32 samples of input i as little-endian float bytes for the decoder. */
static int srv_grpc_samples(struct srv_grpc_job *job, size_t i, const uint8_t **p, size_t *n,
			    char *err, size_t errlen)
{
	Inference__ModelInferRequest *r = job->req;
	Inference__ModelInferRequest__InferInputTensor *t = r->inputs[i];
	int64_t count = srv_grpc_elements(t);
	double rate;
	if (!srv_grpc_param(r, t, "sample_rate", &rate) || !(rate >= ENG_AUDIO_MIN_RATE) ||
	    rate > ENG_AUDIO_MAX_RATE || rate != floor(rate)) {
		snprintf(err, errlen, "FP32 AUDIO needs an integer sample_rate parameter from %d to "
				      "%d", ENG_AUDIO_MIN_RATE, ENG_AUDIO_MAX_RATE);
		return -ST_INVAL;
	}
	if (count < 1 || t->n_shape > 2 || (t->n_shape == 2 && t->shape[0] != 1)) {
		snprintf(err, errlen, "input '%s': FP32 samples are shaped [N] or [1, N]", t->name);
		return -ST_INVAL;
	}
	job->raw = (struct eng_audio_raw){ ENG_AUDIO_ENCODING_LINEAR32, (int)rate, 1 };
	const ProtobufCBinaryData *raw = srv_grpc_raw_in(r, i);
	if (raw) {
		*p = raw->data;
		*n = raw->len;
	} else if (t->contents && (int64_t)t->contents->n_fp32_contents == count) {
		job->owned_audio = mem_alloc((size_t)count * 4);
		if (!job->owned_audio)
			return -ST_NOMEM;
		memcpy(job->owned_audio, t->contents->fp32_contents, (size_t)count * 4);
		*p = job->owned_audio;
		*n = (size_t)count * 4;
	} else {
		*n = 0;
	}
	if (*n != (size_t)count * 4) {
		snprintf(err, errlen, "input '%s': %lld FP32 elements expected", t->name,
			 (long long)count);
		return -ST_INVAL;
	}
	for (size_t k = 0; k < *n; k += 4) {
		float f;
		memcpy(&f, *p + k, 4);
		if (!isfinite(f)) {
			snprintf(err, errlen, "input '%s': element %zu is not a finite number",
				 t->name, k / 4);
			return -ST_INVAL;
		}
	}
	return 0;
}

/* The generation parameters of the request; ranges as /v1/completions. */
static int srv_grpc_gen_params(struct srv_grpc_job *job, char *err, size_t errlen)
{
	static const struct {
		const char *key;
		double lo, hi;
		bool integer;
	} keys[] = { { "max_tokens", 1, 1000000, true },    { "temperature", 0, 2, false },
		     { "top_p", 0, 1, false },		     { "top_k", 0, 1000000, true },
		     { "min_p", 0, 1, false },		     { "repetition_penalty", 1e-9, 10, false },
		     { "seed", 0, 9007199254740992.0, true } }; /* seed: exact in a double */
	struct eng_gen_params *g = &job->gparams;
	g->max_tokens = 16;
	g->seed = uv_hrtime() ^ (uint64_t)(uintptr_t)job;
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		double v;
		if (!srv_grpc_param(job->req, NULL, keys[k].key, &v))
			continue;
		if (!(v >= keys[k].lo && v <= keys[k].hi) || (keys[k].integer && v != floor(v))) {
			snprintf(err, errlen, "parameter '%s' must be %s from %g to %g", keys[k].key,
				 keys[k].integer ? "an integer" : "a number", keys[k].lo, keys[k].hi);
			return -ST_INVAL;
		}
		switch (k) {
		case 0: g->max_tokens = (int)v; break;
		case 1: g->temperature = (float)v; break;
		case 2: g->top_p = (float)v; break;
		case 3: g->top_k = (int)v; break;
		case 4: g->min_p = (float)v; break;
		case 5: g->repetition_penalty = (float)v; break;
		default: g->seed = (uint64_t)v; break;
		}
	}
	return 0;
}

/* Requested outputs into job->want (all when none are named). */
static int srv_grpc_outputs(struct srv_grpc_job *job, const char *a, const char *b, char *err,
			    size_t errlen)
{
	Inference__ModelInferRequest *r = job->req;
	job->want[0] = r->n_outputs == 0;
	job->want[1] = r->n_outputs == 0 && b;
	for (size_t i = 0; i < r->n_outputs; i++) {
		const char *name = r->outputs[i]->name ? r->outputs[i]->name : "";
		if (!strcmp(name, a))
			job->want[0] = true;
		else if (b && !strcmp(name, b))
			job->want[1] = true;
		else {
			snprintf(err, errlen, "unknown output '%s'", name);
			return -ST_INVAL;
		}
	}
	return 0;
}

/* Validate and submit; on failure *err says why. asr_done / gen_done get
 * ud; on_text (may be NULL) streams generated text to ud. */
int srv__grpc_infer_submit_cb(struct srv_grpc_stream *s, struct srv_grpc_job *job,
				    eng_transcribe_done_fn asr_done, eng_gen_done_fn gen_done,
				    int (*on_text)(void *, const char *, size_t,
						   const struct eng_gen_token *, size_t),
				    void *ud, char *err, size_t errlen)
{
	Inference__ModelInferRequest *r = job->req;
	bool asr = eng_model_task(job->model) == ENG_TASK_TRANSCRIPTION;
	const struct srv_ks_tensors *tn = srv__ks_tensors(job->model);
	const char *in_name = tn->input;
	if (r->n_inputs != 1 || strcmp(r->inputs[0]->name ? r->inputs[0]->name : "", in_name)) {
		snprintf(err, errlen, "the model '%s' takes one input, %s", eng_model_name(job->model),
			 in_name);
		return -ST_INVAL;
	}
	int rc = srv_grpc_outputs(job, tn->outputs[0], tn->outputs[1], err, errlen);
	const uint8_t *p = NULL;
	size_t n = 0;
	struct eng_req_opts opts = { ENG_PRIORITY_NORMAL, s->timeout_ms };
	if (!rc && asr) {
		bool fp32 = !strcmp(r->inputs[0]->datatype ? r->inputs[0]->datatype : "", "FP32");
		rc = fp32 ? srv_grpc_samples(job, 0, &p, &n, err, errlen)
			  : srv_grpc_one_bytes(r, 0, &p, &n, err, errlen);
		eng_transcribe_params_init(&job->tparams);
		job->tparams.cancel = &job->cancel;
		if (!rc)
			rc = srv_grpc_asr_params(r, &job->tparams, err, errlen);
		struct eng_asr_input in = { .data = p, .len = n, .raw = fp32 ? &job->raw : NULL };
		if (!rc)
			rc = eng_transcribe_submit(job->model, &in, &job->tparams, &opts, asr_done,
						   ud, err, errlen);
		return rc;
	}
	if (!rc)
		rc = srv_grpc_one_bytes(r, 0, &p, &n, err, errlen);
	eng_gen_params_init(&job->gparams);
	job->gparams.prompt = (const char *)p;
	job->gparams.prompt_len = n;
	job->gparams.cancel = &job->cancel;
	if (!rc)
		rc = srv_grpc_gen_params(job, err, errlen);
	job->gparams.on_text = on_text;
	job->gparams.ud = ud;
	if (!rc)
		rc = eng_generate_submit(job->model, &job->gparams, &opts, gen_done, ud, err,
					 errlen);
	return rc;
}

static int srv_grpc_infer_submit(struct srv_grpc_stream *s, struct srv_grpc_job *job, char *err,
				 size_t errlen)
{
	return srv__grpc_infer_submit_cb(s, job, srv_grpc_asr_done, srv_grpc_gen_done, NULL, job,
					err, errlen);
}

static void srv_grpc_model_infer(struct srv_grpc_stream *s, const uint8_t *msg, size_t n)
{
	Inference__ModelInferRequest *r = SRV_GRPC_UNPACK(
		Inference__ModelInferRequest, inference__model_infer_request__descriptor, s, msg, n);
	if (!r)
		return;
	const struct eng_model *m = srv_grpc_model(s, r->model_name, r->model_version);
	struct srv_grpc_job *job = m ? mem_calloc(1, sizeof(*job)) : NULL;
	if (!job) {
		if (m)
			srv__grpc_respond(s, SRV_GRPC_UNAVAILABLE, NULL, 0, "out of memory");
		inference__model_infer_request__free_unpacked(r, NULL);
		return;
	}
	job->req = r;
	job->model = m;
	job->conn = s->conn;
	job->stream_id = s->id;
	char err[512] = "";
	int rc = srv_grpc_infer_submit(s, job, err, sizeof(err));
	if (rc) {
		srv__grpc_respond(s, srv__status_grpc(rc), NULL, 0, err[0] ? err : st_str(rc));
		srv__grpc_job_free(job);
		return;
	}
	s->job = job;
	s->cancel = &job->cancel;
	s->conn->n_work++;
	srv__jobs_begin(s->conn->srv);
}

void srv__ks_grpc_stream_gone(struct srv_grpc_stream *s)
{
	if (s->cancel)
		*s->cancel = 1; /* the engine stops at its next step; the job finds no stream */
	s->cancel = NULL;
	s->job = NULL;
	for (int i = 0; i < SRV_GRPC_STREAM_MAX_RUNNING; i++)
		if (s->cancels[i])
			*s->cancels[i] = 1;
}

/* --- dispatch ---------------------------------------------------------------------- */

static const struct {
	const char *method;
	srv_grpc_method_fn fn;
} srv_grpc_methods[] = {
	{ "ServerLive", srv_grpc_server_live },
	{ "ServerReady", srv_grpc_server_ready },
	{ "ModelReady", srv_grpc_model_ready },
	{ "ServerMetadata", srv_grpc_server_metadata },
	{ "ModelMetadata", srv_grpc_model_metadata },
	{ "ModelConfig", srv_grpc_model_config },
	{ "ModelStatistics", srv_grpc_model_statistics },
	{ "ModelInfer", srv_grpc_model_infer },
};

void srv__ks_grpc_dispatch(struct srv_grpc_stream *s, const uint8_t *msg, size_t n)
{
	static const char prefix[] = "/inference.GRPCInferenceService/";
	const char *p = s->path;
	if (!strncmp(p, prefix, sizeof(prefix) - 1)) {
		p += sizeof(prefix) - 1;
		for (size_t i = 0; i < sizeof(srv_grpc_methods) / sizeof(srv_grpc_methods[0]); i++)
			if (!strcmp(p, srv_grpc_methods[i].method)) {
				srv_grpc_methods[i].fn(s, msg, n);
				return;
			}
	}
	char m[200];
	snprintf(m, sizeof(m), "method %s is not implemented", s->path[0] ? s->path : "(none)");
	srv__grpc_respond(s, SRV_GRPC_UNIMPLEMENTED, NULL, 0, m);
}
