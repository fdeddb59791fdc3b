/* srv_kserve.c - KServe v2 (the Open Inference Protocol) inference over
 * REST: POST /v2/models/{name}/infer with JSON tensors or the binary
 * tensor data extension, and Triton's generate extension, POST
 * /v2/models/{name}/generate and /generate_stream. docs/kserve.md is the
 * user's view; the protocol is KServe's "Open Inference Protocol (V2)"
 * REST description and Triton's binary_data and generate extension
 * documents.
 *
 * Tensors:
 *   transcription  in:  AUDIO, BYTES [1]: one encoded audio file (binary
 *                       data; a JSON string cannot carry it), or FP32 [N]
 *                       / [1, N]: mono samples, with a sample_rate
 *                       parameter (on the input or the request), JSON or
 *                       binary;
 *                       Request parameters (inferd's, as Triton models
 *                       take their own): language (an ISO 639-1 code;
 *                       absent: detected on a multilingual model), task
 *                       ("transcribe" or "translate"), word_timestamps
 *                       (bool), vad_filter (bool): as the OpenAI
 *                       fields;
 *                  out: TRANSCRIPT, BYTES [1]: the text; SEGMENTS, BYTES
 *                       [1]: a JSON array of {id, start, end, text} (with
 *                       word_timestamps, each also "words": [{word, start,
 *                       end, probability}]).
 *   generation     in:  TEXT_INPUT, BYTES [1] (JSON string or binary);
 *                       request parameters max_tokens, temperature, top_p,
 *                       top_k, min_p, seed, stop, repetition_penalty;
 *                  out: TEXT_OUTPUT, BYTES [1]: the completion.
 * Binary tensor data: the request's Inference-Header-Content-Length is the
 * JSON part's length; each input with parameters.binary_data_size takes
 * that many bytes of the rest, in order (a BYTES element is a 4-byte
 * little-endian length, then the bytes). An output is sent as binary when
 * its requested parameters.binary_data is true, or every output when the
 * request's parameters.binary_data_output is; requested outputs limit the
 * answer to them. Errors: {"error": "..."} with 400 (a bad tensor), 404
 * (unknown model), 413, 429, 503, 504.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "server/job/srv_audio_job.h"
#include "server/kserve/srv_kserve.h"

#define SRV_KS_MAX_TENSORS 8
#define SRV_KS_MAX_SAMPLES (16000u * 60u * 60u) /* an hour at 16 kHz */

/* One input tensor as read. */
struct srv_ks_in {
	const char *name, *datatype;
	json_int_t shape[4];
	int ndim;
	json_t *data;	/* JSON data, borrowed, or NULL */
	const char *bin; /* binary data inside the body, or NULL */
	size_t bin_len;
	json_t *params; /* borrowed, or NULL */
};

/* The request as read: the JSON part (owned) and its inputs. */
struct srv_ks_req {
	json_t *root;
	struct srv_ks_in in[SRV_KS_MAX_TENSORS];
	int n_in;
	json_t *outputs; /* requested outputs, borrowed, or NULL */
	json_t *params;	 /* request parameters, borrowed, or NULL */
	char err[256];
};

/* Why jansson refused a request body (je), as the 400's message: its own
 * reason (a syntax error, a number too large) with the place, or for a
 * \u0000 in a string our words (its reason names its JSON_ALLOW_NUL flag). */
static void srv_ks_json_reason(const json_error_t *je, char *out, size_t n)
{
	if (strstr(je->text, "JSON_ALLOW_NUL"))
		snprintf(out, n, "a string in the request holds \\u0000 (NUL), which is not "
			 "accepted (line %d, column %d)", je->line, je->column);
	else
		snprintf(out, n, "the request is not valid JSON: %s (line %d, column %d)",
			 je->text, je->line, je->column);
}

static int srv_ks_bad(struct srv_ks_req *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int srv_ks_bad(struct srv_ks_req *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = st_verrf(-ST_INVAL, r->err, sizeof(r->err), NULL, fmt, ap);
	va_end(ap);
	return rc;
}

/* Elements of t, or -1 past SRV_KS_MAX_SAMPLES (checked while
 * multiplying, so the product never overflows; dimensions are >= 1). */
static json_int_t srv_ks_elements(const struct srv_ks_in *t)
{
	json_int_t n = 1;
	for (int i = 0; i < t->ndim; i++) {
		if (t->shape[i] > (json_int_t)SRV_KS_MAX_SAMPLES / n)
			return -1;
		n *= t->shape[i];
	}
	return n;
}

static int srv_ks_read_input(struct srv_ks_req *r, json_t *j, struct srv_ks_in *t,
			     const char **bin, size_t *bin_left)
{
	json_t *shape = json_object_get(j, "shape");
	t->name = json_string_value(json_object_get(j, "name"));
	t->datatype = json_string_value(json_object_get(j, "datatype"));
	t->params = json_object_get(j, "parameters");
	t->data = json_object_get(j, "data");
	if (!t->name || !t->datatype || !json_is_array(shape))
		return srv_ks_bad(r, "every input needs a name, a datatype and a shape");
	if (json_array_size(shape) < 1 || json_array_size(shape) > 4)
		return srv_ks_bad(r, "input '%s': a shape of 1 to 4 dimensions", t->name);
	t->ndim = (int)json_array_size(shape);
	for (int i = 0; i < t->ndim; i++) {
		json_t *d = json_array_get(shape, (size_t)i);
		if (!json_is_integer(d) || json_integer_value(d) < 1 ||
		    json_integer_value(d) > (json_int_t)SRV_KS_MAX_SAMPLES)
			return srv_ks_bad(r, "input '%s': shape dimensions are integers >= 1",
					  t->name);
		t->shape[i] = json_integer_value(d);
	}
	json_t *bsz = json_object_get(t->params, "binary_data_size");
	if (!bsz)
		return t->data ? 0 : srv_ks_bad(r, "input '%s' has no data", t->name);
	if (t->data)
		return srv_ks_bad(r, "input '%s': data and binary_data_size both given", t->name);
	if (!json_is_integer(bsz) || json_integer_value(bsz) < 0 ||
	    (size_t)json_integer_value(bsz) > *bin_left)
		return srv_ks_bad(r, "input '%s': binary_data_size is not within the body", t->name);
	t->bin = *bin;
	t->bin_len = (size_t)json_integer_value(bsz);
	*bin += t->bin_len;
	*bin_left -= t->bin_len;
	return 0;
}

/* Parse req's body: JSON, or JSON + binary data. 0, or -ST_* with r->err. */
static int srv_ks_parse(struct srv_req *req, struct srv_ks_req *r)
{
	memset(r, 0, sizeof(*r));
	const char *body = req->body.data ? req->body.data : "";
	size_t len = req->body.len, json_len = len;
	const char *h = srv__req_header(req, "Inference-Header-Content-Length");
	if (h) {
		char *end;
		unsigned long long v = strtoull(h, &end, 10);
		if (!*h || *end || v > len)
			return srv_ks_bad(r, "Inference-Header-Content-Length must be the JSON "
					     "part's length, at most the body's (%zu)", len);
		json_len = (size_t)v;
	}
	json_error_t je;
	r->root = json_loadb(body, json_len, 0, &je);
	if (!r->root) {
		char why[256];
		srv_ks_json_reason(&je, why, sizeof(why));
		return srv_ks_bad(r, "%s", why);
	}
	if (!json_is_object(r->root))
		return srv_ks_bad(r, "the request is not a JSON object");
	json_t *inputs = json_object_get(r->root, "inputs");
	if (!json_is_array(inputs) || !json_array_size(inputs))
		return srv_ks_bad(r, "'inputs' must be a non-empty array");
	if (json_array_size(inputs) > SRV_KS_MAX_TENSORS)
		return srv_ks_bad(r, "at most %d inputs", SRV_KS_MAX_TENSORS);
	const char *bin = body + json_len;
	size_t bin_left = len - json_len;
	for (size_t i = 0; i < json_array_size(inputs); i++) {
		int rc = srv_ks_read_input(r, json_array_get(inputs, i), &r->in[i], &bin, &bin_left);
		if (rc)
			return rc;
		r->n_in++;
	}
	if (bin_left)
		return srv_ks_bad(r, "%zu bytes of binary data belong to no input", bin_left);
	r->outputs = json_object_get(r->root, "outputs");
	r->params = json_object_get(r->root, "parameters");
	if ((r->outputs && !json_is_array(r->outputs)) || (r->params && !json_is_object(r->params)))
		return srv_ks_bad(r, "'outputs' must be an array and 'parameters' an object");
	return 0;
}

static const struct srv_ks_in *srv_ks_input(const struct srv_ks_req *r, const char *name)
{
	for (int i = 0; i < r->n_in; i++)
		if (!strcmp(r->in[i].name, name))
			return &r->in[i];
	return NULL;
}

/* The one BYTES element of t: *p, *n (binary: after its 4-byte length). */
static int srv_ks_one_bytes(struct srv_ks_req *r, const struct srv_ks_in *t, const char **p,
			    size_t *n)
{
	if (strcmp(t->datatype, "BYTES") || srv_ks_elements(t) != 1)
		return srv_ks_bad(r, "input '%s' must be BYTES with one element (shape [1])",
				  t->name);
	if (t->bin) {
		if (t->bin_len < 4)
			return srv_ks_bad(r, "input '%s': binary BYTES need a 4-byte length", t->name);
		const unsigned char *b = (const unsigned char *)t->bin;
		size_t l = (size_t)b[0] | (size_t)b[1] << 8 | (size_t)b[2] << 16 | (size_t)b[3] << 24;
		if (l != t->bin_len - 4)
			return srv_ks_bad(r, "input '%s': the element's length (%zu) does not match "
					     "binary_data_size - 4 (%zu)", t->name, l, t->bin_len - 4);
		*p = t->bin + 4;
		*n = l;
		return 0;
	}
	json_t *e = json_array_size(t->data) == 1 ? json_array_get(t->data, 0) : NULL;
	if (json_is_array(e)) /* [[ "..." ]] for shape [1, 1] */
		e = json_array_size(e) == 1 ? json_array_get(e, 0) : NULL;
	if (!json_is_array(t->data) || !json_is_string(e))
		return srv_ks_bad(r, "input '%s': data must hold one string", t->name);
	*p = json_string_value(e);
	*n = json_string_length(e);
	return 0;
}

/* Whether output name is wanted, and as binary data. */
static bool srv_ks_want(const struct srv_ks_req *r, const char *name, bool *binary)
{
	json_t *all = json_object_get(r->params, "binary_data_output");
	*binary = json_is_true(all);
	if (!r->outputs || !json_array_size(r->outputs))
		return true;
	size_t i;
	json_t *o;
	json_array_foreach(r->outputs, i, o)
	{
		if (strcmp(json_string_value(json_object_get(o, "name")) ?: "", name))
			continue;
		json_t *b = json_object_get(json_object_get(o, "parameters"), "binary_data");
		if (b)
			*binary = json_is_true(b);
		return true;
	}
	return false;
}

/* Requested outputs must be outputs of the model. */
static int srv_ks_check_outputs(struct srv_ks_req *r, const char *const *names, int n)
{
	size_t i;
	json_t *o;
	json_array_foreach(r->outputs, i, o)
	{
		const char *name = json_string_value(json_object_get(o, "name"));
		bool known = false;
		for (int k = 0; name && k < n; k++)
			known |= !strcmp(name, names[k]);
		if (!known)
			return srv_ks_bad(r, "unknown output '%s'", name ? name : "(no name)");
	}
	return 0;
}

/* --- transcription ------------------------------------------------------ */

struct srv_ks_asr_job {
	struct srv_audio_job base; /* first */
	bool want[2], binary[2];   /* TRANSCRIPT, SEGMENTS */
	char id[128];
};


/* The transcription's request parameters: language, task,
 * word_timestamps. 0 or a 400 (srv_ks_bad). */
static int srv_ks_asr_params(struct srv_ks_req *r, struct srv_audio_job *job)
{
	json_t *lang = json_object_get(r->params, "language");
	json_t *task = json_object_get(r->params, "task");
	json_t *words = json_object_get(r->params, "word_timestamps");
	if (lang && (!json_is_string(lang) ||
		     srv__audio_job_set_language(job, json_string_value(lang),
						 json_string_length(lang))))
		return srv_ks_bad(r, "parameter 'language' must be an ISO 639-1 code such as 'en'");
	if (task && (!json_is_string(task) || (strcmp(json_string_value(task), "transcribe") &&
					       strcmp(json_string_value(task), "translate"))))
		return srv_ks_bad(r, "parameter 'task' must be \"transcribe\" or \"translate\"");
	if (task)
		job->params.task = strcmp(json_string_value(task), "translate") ? "transcribe"
										  : "translate";
	if (words && !json_is_boolean(words))
		return srv_ks_bad(r, "parameter 'word_timestamps' must be true or false");
	job->params.word_timestamps = words && json_is_true(words);
	return 0;
}

static int srv_ks_asr_format(struct srv_audio_job *base)
{
	struct srv_ks_asr_job *job = (struct srv_ks_asr_job *)base;
	const struct eng_transcript *t = base->t;
	json_t *outputs = json_array();
	struct srv_buf bin;
	srv_buf_init(&bin, SRV_AUDIO_OUT_MAX);
	int rc = outputs ? 0 : -ST_NOMEM;
	if (!rc && job->want[0])
		rc = srv__ks_output(outputs, &bin, "TRANSCRIPT", t->text, strlen(t->text),
				   job->binary[0]);
	if (!rc && job->want[1]) {
		json_t *segs = srv__ks_segments(t);
		char *s = segs ? json_dumps(segs, JSON_COMPACT | JSON_REAL_PRECISION(6)) : NULL;
		json_decref(segs);
		rc = s ? srv__ks_output(outputs, &bin, "SEGMENTS", s, strlen(s), job->binary[1])
		       : -ST_NOMEM;
		free(s); /* jansson's allocator */
	}
	if (!rc)
		rc = srv__ks_finish(srv__ks_response(eng_model_name(base->model), job->id, outputs),
				    &bin, &base->out, &base->infer_header_len);
	else
		json_decref(outputs);
	srv_buf_fini(&bin);
	base->content_type = base->infer_header_len ? "application/octet-stream"
						    : "application/json";
	return rc;
}

/* FP32 samples of t (JSON numbers or binary floats) as the bytes of
 * headerless little-endian float PCM: pointed at (binary) or made (JSON,
 * job->owned_audio). */
static int srv_ks_samples(struct srv_ks_req *r, const struct srv_ks_in *t,
			  struct srv_audio_job *job)
{
	json_int_t n = srv_ks_elements(t);
	if (t->ndim > 2 || (t->ndim == 2 && t->shape[0] != 1) || n < 1)
		return srv_ks_bad(r, "input '%s': FP32 samples are shaped [N] or [1, N], at most "
				     "%u", t->name, SRV_KS_MAX_SAMPLES);
	if (t->bin) {
		if (t->bin_len != (size_t)n * 4)
			return srv_ks_bad(r, "input '%s': %lld FP32 elements need %lld bytes, not %zu",
					  t->name, (long long)n, (long long)n * 4, t->bin_len);
		for (json_int_t i = 0; i < n; i++) {
			float f;
			memcpy(&f, t->bin + i * 4, 4);
			if (!isfinite(f))
				return srv_ks_bad(r, "input '%s': element %lld is not a finite number",
						  t->name, (long long)i);
		}
		job->audio = t->bin;
		job->audio_len = t->bin_len;
		return 0;
	}
	json_t *d = t->data;
	if (t->ndim == 2 && json_is_array(json_array_get(d, 0)))
		d = json_array_get(d, 0); /* nested [[...]] */
	if (!json_is_array(d) || (json_int_t)json_array_size(d) != n)
		return srv_ks_bad(r, "input '%s': data must hold %lld numbers", t->name, (long long)n);
	unsigned char *b = mem_alloc((size_t)n * 4);
	if (!b)
		return -ST_NOMEM;
	for (json_int_t i = 0; i < n; i++) {
		json_t *v = json_array_get(d, (size_t)i);
		double x = json_number_value(v);
		if (!json_is_number(v)) {
			mem_free(b);
			return srv_ks_bad(r, "input '%s': element %lld is not a number", t->name,
					  (long long)i);
		}
		/* from FLT_MAX + half its last step up, a float32 rounds to infinity
		 * (and (float)x is undefined in C); just below, to FLT_MAX */
		if (!(fabs(x) < 0x1.ffffffp+127)) {
			mem_free(b);
			return srv_ks_bad(r, "input '%s': element %lld (%.9g) overflows FP32",
					  t->name, (long long)i, x);
		}
		float f = fabs(x) <= FLT_MAX ? (float)x : x > 0 ? FLT_MAX : -FLT_MAX;
		memcpy(b + i * 4, &f, 4); /* x86-64 and every target here: little-endian */
	}
	job->owned_audio = b;
	job->audio = (const char *)b;
	job->audio_len = (size_t)n * 4;
	return 0;
}

static int srv_ks_sample_rate(struct srv_ks_req *r, const struct srv_ks_in *t, int *rate)
{
	json_t *v = json_object_get(t->params, "sample_rate");
	if (!v)
		v = json_object_get(r->params, "sample_rate");
	if (!json_is_integer(v) || json_integer_value(v) < ENG_AUDIO_MIN_RATE ||
	    json_integer_value(v) > ENG_AUDIO_MAX_RATE)
		return srv_ks_bad(r, "FP32 AUDIO needs an integer sample_rate parameter from %d to "
				     "%d", ENG_AUDIO_MIN_RATE, ENG_AUDIO_MAX_RATE);
	*rate = (int)json_integer_value(v);
	return 0;
}

static void srv_ks_transcribe(struct srv_req *req, struct srv_ks_req *r,
			      const struct eng_model *m)
{
	const struct srv_ks_in *t = srv_ks_input(r, "AUDIO");
	int rc = t ? srv_ks_check_outputs(r, srv__ks_tensors(m)->outputs, 2)
		   : srv_ks_bad(r, "the model '%s' takes one input, AUDIO", eng_model_name(m));
	if (!rc && r->n_in != 1)
		rc = srv_ks_bad(r, "the model '%s' takes one input, AUDIO", eng_model_name(m));
	json_t *vad = json_object_get(r->params, "vad_filter");
	if (!rc && vad && !json_is_boolean(vad))
		rc = srv_ks_bad(r, "parameter vad_filter must be true or false");
	struct srv_ks_asr_job *job = NULL;
	if (!rc) {
		job = (struct srv_ks_asr_job *)srv__audio_job_new(req, sizeof(*job));
		rc = job ? 0 : -ST_NOMEM;
	}
	if (!rc)
		rc = srv_ks_asr_params(r, &job->base);
	if (!rc && !strcmp(t->datatype, "FP32")) {
		int rate = 0;
		rc = srv_ks_sample_rate(r, t, &rate);
		if (!rc)
			rc = srv_ks_samples(r, t, &job->base);
		job->base.has_raw = true;
		job->base.raw = (struct eng_audio_raw){ ENG_AUDIO_ENCODING_LINEAR32, rate, 1 };
	} else if (!rc) {
		const char *p = NULL;
		size_t n = 0;
		rc = srv_ks_one_bytes(r, t, &p, &n);
		if (!rc && !t->bin)
			rc = srv_ks_bad(r, "AUDIO bytes must come as binary data (a JSON string "
					   "cannot carry an audio file): see docs/kserve.md");
		job->base.audio = p;
		job->base.audio_len = n;
	}
	if (rc) {
		if (job)
			srv__audio_job_free(&job->base);
		srv__audio_fail(req, rc, rc == -ST_NOMEM ? "out of memory" : r->err);
		return;
	}
	for (int i = 0; i < 2; i++)
		job->want[i] = srv_ks_want(r, srv__ks_tensors(m)->outputs[i], &job->binary[i]);
	if (vad)
		job->base.params.vad_filter = json_is_true(vad) ? ENG_VAD_FILTER_ON
							       : ENG_VAD_FILTER_OFF;
	snprintf(job->id, sizeof(job->id), "%s",
		 json_string_value(json_object_get(r->root, "id")) ?: "");
	job->base.model = m;
	job->base.format = srv_ks_asr_format;
	srv__audio_job_queue(req, &job->base);
}

/* --- generation --------------------------------------------------------- */

static void srv_ks_generate_infer(struct srv_req *req, struct srv_ks_req *r,
				  const struct eng_model *m)
{
	const char *const *outs = srv__ks_tensors(m)->outputs;
	const struct srv_ks_in *t = srv_ks_input(r, "TEXT_INPUT");
	const char *p = NULL;
	size_t n = 0;
	int rc = t && r->n_in == 1 ? srv_ks_one_bytes(r, t, &p, &n)
				   : srv_ks_bad(r, "the model '%s' takes one input, TEXT_INPUT",
						eng_model_name(m));
	if (!rc)
		rc = srv_ks_check_outputs(r, outs, 1);
	json_t *utf8 = rc ? NULL : json_stringn(p, n);
	if (!rc && !utf8)
		rc = srv_ks_bad(r, "TEXT_INPUT is not valid UTF-8");
	json_decref(utf8);
	if (rc) {
		srv__req_respond_error(req, 400, NULL, "%s", r->err);
		return;
	}
	bool binary = false;
	srv_ks_want(r, "TEXT_OUTPUT", &binary);
	srv__ks_gen_submit(req, m, p, n, r->params, false, false, binary,
			   json_string_value(json_object_get(r->root, "id")));
}

static const struct eng_model *srv_ks_model(struct srv_req *req)
{
	const struct eng_model *m = eng_model_find(req->conn->srv->eng, req->path_param);
	if (!m)
		srv__req_respond_error(req, 404, NULL, "unknown model '%s'", req->path_param);
	return m;
}

void srv__h_kserve_infer(struct srv_req *req)
{
	const struct eng_model *m = srv_ks_model(req);
	if (!m)
		return;
	struct srv_ks_req r;
	int rc = srv_ks_parse(req, &r);
	if (rc)
		srv__req_respond_error(req, 400, NULL, "%s", r.err);
	else if (eng_model_task(m) == ENG_TASK_TRANSCRIPTION)
		srv_ks_transcribe(req, &r, m);
	else
		srv_ks_generate_infer(req, &r, m);
	json_decref(r.root);
}

/* Triton's generate body: {"text_input": "...", "parameters": {...}};
 * sampling fields may also be top-level (they are inputs to Triton). */
static void srv_ks_generate(struct srv_req *req, bool stream)
{
	const struct eng_model *m = srv_ks_model(req);
	if (!m)
		return;
	if (eng_model_task(m) != ENG_TASK_GENERATION) {
		srv__req_respond_error(req, 400, NULL, "the model '%s' does not generate text "
						       "(use /v2/models/%s/infer)",
				       eng_model_name(m), eng_model_name(m));
		return;
	}
	json_error_t je;
	json_t *b = json_loadb(req->body.data ? req->body.data : "", req->body.len, 0, &je);
	if (!b) {
		char why[256];
		srv_ks_json_reason(&je, why, sizeof(why));
		srv__req_respond_error(req, 400, NULL, "%s", why);
		return;
	}
	json_t *text = json_object_get(b, "text_input");
	json_t *params = json_object_get(b, "parameters");
	if (!json_is_object(b) || !json_is_string(text) || (params && !json_is_object(params))) {
		srv__req_respond_error(req, 400, NULL, "the body must be a JSON object with a "
						       "string 'text_input' (and an object "
						       "'parameters')");
		json_decref(b);
		return;
	}
	json_t *merged = json_object();
	const char *k;
	json_t *v;
	json_object_foreach(b, k, v)
	json_object_set(merged, k, v);
	if (params)
		json_object_update(merged, params);
	srv__ks_gen_submit(req, m, json_string_value(text), json_string_length(text), merged,
			   stream, true, false, NULL);
	json_decref(merged);
	json_decref(b);
}

void srv__h_kserve_generate(struct srv_req *req)
{
	srv_ks_generate(req, false);
}

void srv__h_kserve_generate_stream(struct srv_req *req)
{
	srv_ks_generate(req, true);
}
