/* srv_openai_gen.c - POST /v1/completions and POST /v1/chat/completions,
 * OpenAI's text generation API
 * (https://platform.openai.com/docs/api-reference/completions,
 *  https://platform.openai.com/docs/api-reference/chat/create): parsing and
 * validation of the JSON body, the job on the thread pool, and the answer
 * or the error in OpenAI's shape. Rendering lives in srv_openai_gen_out.c;
 * the job's life is described in srv_openai_gen.h.
 *
 *   model                  required; unknown -> 404 model_not_found; not a
 *                          generation model -> 400
 *   prompt                 completions: a string (or an array of one)
 *   messages               chat: [{role, content}], role system, developer
 *                          (as system), user or assistant; content a
 *                          string or [{"type":"text","text":...}] parts
 *                          (joined with "\n")
 *   max_tokens             >= 1; max_completion_tokens wins for chat.
 *                          Default 16 (completions), the rest of the
 *                          context up to 2048 (chat)
 *   temperature 0..2, top_p 0..1, presence_/frequency_penalty -2..2,
 *   n 1..8 (run side by side in the batch, seeds seed+i), stop (string
 *   or <= 4 strings), seed (integer; absent: a random one per request, as
 *   OpenAI's results vary without it), logit_bias ({"token id": -100..100},
 *   at most 300), logprobs (completions: 0..5; chat: boolean, with
 *   top_logprobs 0..20), stream, stream_options.include_usage, user
 *   (ignored); extensions top_k >= 0, min_p 0..1, repetition_penalty (0, 10]
 * Refused with 400 unsupported_parameter rather than ignored: echo, suffix,
 * best_of other than n, tools / tool_choice / functions / function_call,
 * response_format other than {"type": "text"}, audio / modalities other
 * than text. A null value counts as absent; other unknown fields are
 * ignored (SDKs add fields over time). Errors: 400 invalid_json /
 * invalid_type / invalid_value / missing_required_parameter /
 * unsupported_parameter / context_length_exceeded /
 * unsupported_chat_template, 404 model_not_found, 429 rate_limit_exceeded
 * (the model's queue is full; Retry-After), 503 server_overloaded, 504
 * timeout (the Inferd-Timeout-Ms deadline or the model's timeout_ms).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/mem.h"
#include "common/st.h"
#include "server/openai/srv_openai_gen.h"
#include "server/srv_status.h"


/* Why a request is refused: HTTP status, OpenAI code and param, message. */
struct srv_gen_err {
	int status;
	const char *code;  /* static */
	const char *param; /* static, or NULL */
	char msg[512];
};

static int srv_gen_bad(struct srv_gen_err *e, int status, const char *code, const char *param,
		       const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int srv_gen_bad(struct srv_gen_err *e, int status, const char *code, const char *param,
		       const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	e->status = status;
	e->code = code;
	e->param = param;
	return status == 404 ? -ST_NOTFOUND : -ST_INVAL;
}

static void srv_gen_respond_err(struct srv_req *req, const struct srv_gen_err *e)
{
	if (e->status == 503 || e->status == 429)
		srv__req_add_header(req, "Retry-After", "1");
	if (req->proto != SRV_PROTO_OPENAI) { /* KServe routes: their own error shape */
		srv__req_respond_error(req, e->status, e->code, "%s", e->msg);
		return;
	}
	json_t *obj = srv__gen_error_json(e->status, e->code, e->param, e->msg);
	if (obj)
		srv__req_respond_json(req, e->status, obj);
	else
		srv__req_respond_error(req, e->status, e->code, "%s", e->msg);
}

/* An engine status and message as OpenAI's error (srv_status.h's table). */
static void srv_gen_err_from_st(struct srv_gen_err *e, int rc, bool chat, const char *msg)
{
	const struct srv_status_row *row = srv__status_row(rc);
	const char *m = row->gen_msg ? row->gen_msg : msg && *msg ? msg : st_str(rc);
	const char *param = row->gen_param == SRV_STATUS_PARAM_INPUT ? (chat ? "messages" : "prompt")
			  : row->gen_param == SRV_STATUS_PARAM_MODEL ? "model"
								      : NULL;
	srv_gen_bad(e, row->gen_http, row->gen_code, param, "%s", m);
}

/* --- field readers: absent and null leave *out as it is ---------------- */

static json_t *srv_gen_opt(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_null(v) ? NULL : v;
}

static int srv_gen_num(json_t *o, const char *k, double lo, double hi, float *out,
		       struct srv_gen_err *e)
{
	json_t *v = srv_gen_opt(o, k);
	if (!v)
		return 0;
	if (!json_is_number(v))
		return srv_gen_bad(e, 400, "invalid_type", k, "'%s' must be a number", k);
	double d = json_number_value(v);
	if (!(d >= lo && d <= hi))
		return srv_gen_bad(e, 400, "invalid_value", k, "'%s' must be from %g to %g (got %g)",
				   k, lo, hi, d);
	*out = (float)d;
	return 0;
}

static int srv_gen_int(json_t *o, const char *k, json_int_t lo, json_int_t hi, json_int_t *out,
		       struct srv_gen_err *e)
{
	json_t *v = srv_gen_opt(o, k);
	if (!v)
		return 0;
	if (!json_is_integer(v))
		return srv_gen_bad(e, 400, "invalid_type", k, "'%s' must be an integer", k);
	json_int_t i = json_integer_value(v);
	if (i < lo || i > hi)
		return srv_gen_bad(e, 400, "invalid_value", k,
				   "'%s' must be from %lld to %lld (got %lld)", k, (long long)lo,
				   (long long)hi, (long long)i);
	*out = i;
	return 0;
}

static int srv_gen_bool(json_t *o, const char *k, bool *out, struct srv_gen_err *e)
{
	json_t *v = srv_gen_opt(o, k);
	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return srv_gen_bad(e, 400, "invalid_type", k, "'%s' must be a boolean", k);
	*out = json_is_true(v);
	return 0;
}

/* --- the fields ------------------------------------------------------- */

static int srv_gen_parse_sampling(struct srv_gen_job *job, json_t *b, struct srv_gen_err *e)
{
	struct eng_gen_params *p = &job->params;
	json_int_t n = 1, top_k = 0, seed = 0;
	float top_p = 1;
	int rc = srv_gen_num(b, "temperature", 0, 2, &p->temperature, e);
	if (!rc)
		rc = srv_gen_num(b, "top_p", 0, 1, &top_p, e);
	if (!rc)
		rc = srv_gen_num(b, "presence_penalty", -2, 2, &p->presence_penalty, e);
	if (!rc)
		rc = srv_gen_num(b, "frequency_penalty", -2, 2, &p->frequency_penalty, e);
	if (!rc)
		rc = srv_gen_num(b, "min_p", 0, 1, &p->min_p, e);
	if (!rc)
		rc = srv_gen_num(b, "repetition_penalty", 1e-6, 10, &p->repetition_penalty, e);
	if (!rc)
		rc = srv_gen_int(b, "top_k", 0, 1 << 30, &top_k, e);
	if (!rc)
		rc = srv_gen_int(b, "n", 1, SRV_GEN_MAX_N, &n, e);
	if (!rc)
		rc = srv_gen_int(b, "seed", INT64_MIN, INT64_MAX, &seed, e);
	p->top_p = top_p > 0 ? top_p : 1e-9f; /* 0: only the most likely token */
	p->top_k = (int)top_k;
	job->n = (int)n;
	job->seed = (uint64_t)seed;
	if (!srv_gen_opt(b, "seed") && uv_random(NULL, NULL, &job->seed, sizeof(job->seed), 0, NULL))
		job->seed = (uint64_t)uv_hrtime(); /* getrandom failed: still varies */
	return rc;
}

/* logit_bias: {"<token id>": bias -100..100}, added to the logits before
 * sampling (OpenAI's semantics; ids checked against the vocabulary when the
 * model is known, in srv_gen_parse_model's caller). */
static int srv_gen_parse_bias(struct srv_gen_job *job, json_t *b, struct srv_gen_err *e)
{
	json_t *v = srv_gen_opt(b, "logit_bias"), *val;
	const char *key;
	if (!v)
		return 0;
	if (!json_is_object(v))
		return srv_gen_bad(e, 400, "invalid_type", "logit_bias",
				   "'logit_bias' must be an object of token ids to numbers");
	if (json_object_size(v) > ENG_GEN_MAX_BIAS)
		return srv_gen_bad(e, 400, "invalid_value", "logit_bias",
				   "'logit_bias' takes at most %d tokens", ENG_GEN_MAX_BIAS);
	int k = 0;
	json_object_foreach(v, key, val) {
		char *end;
		long long id = strtoll(key, &end, 10);
		if (!*key || *end || id < 0 || id > INT32_MAX)
			return srv_gen_bad(e, 400, "invalid_value", "logit_bias",
					   "'logit_bias' keys must be token ids (got '%.32s')", key);
		if (!json_is_number(val) || json_number_value(val) < -100 ||
		    json_number_value(val) > 100)
			return srv_gen_bad(e, 400, "invalid_value", "logit_bias",
					   "'logit_bias' values must be numbers from -100 to 100");
		job->bias[k].id = (int32_t)id;
		job->bias[k].bias = (float)json_number_value(val);
		k++;
	}
	job->params.bias = job->bias;
	job->params.n_bias = k;
	return 0;
}

/* Fields whose meaning we do not implement: refused, never ignored. */
static int srv_gen_parse_unsupported(struct srv_gen_job *job, json_t *b, struct srv_gen_err *e)
{
	static const char *const never[] = { "tools", "tool_choice", "functions", "function_call",
					     "audio", "prediction" };
	for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++)
		if (srv_gen_opt(b, never[i]))
			return srv_gen_bad(e, 400, "unsupported_parameter", never[i],
					   "'%s' is not supported by this server", never[i]);
	json_t *v;
	if ((v = srv_gen_opt(b, "echo")) && !json_is_false(v))
		return srv_gen_bad(e, 400, "unsupported_parameter", "echo",
				   "'echo' is not supported by this server");
	if ((v = srv_gen_opt(b, "suffix")) && !(json_is_string(v) && !json_string_length(v)))
		return srv_gen_bad(e, 400, "unsupported_parameter", "suffix",
				   "'suffix' (insertion) is not supported by this server");
	if ((v = srv_gen_opt(b, "best_of")) && !(json_is_integer(v) &&
						  json_integer_value(v) == job->n))
		return srv_gen_bad(e, 400, "unsupported_parameter", "best_of",
				   "'best_of' is not supported (only best_of == n); use n");
	if ((v = srv_gen_opt(b, "response_format")) &&
	    !(json_is_object(v) && json_is_string(json_object_get(v, "type")) &&
	      !strcmp(json_string_value(json_object_get(v, "type")), "text")))
		return srv_gen_bad(e, 400, "unsupported_parameter", "response_format",
				   "only response_format {\"type\": \"text\"} is supported");
	if ((v = srv_gen_opt(b, "modalities")) &&
	    !(json_is_array(v) && json_array_size(v) == 1 &&
	      json_is_string(json_array_get(v, 0)) &&
	      !strcmp(json_string_value(json_array_get(v, 0)), "text")))
		return srv_gen_bad(e, 400, "unsupported_parameter", "modalities",
				   "only the \"text\" modality is supported");
	return 0;
}

static int srv_gen_parse_stop(struct srv_gen_job *job, json_t *b, struct srv_gen_err *e)
{
	json_t *v = srv_gen_opt(b, "stop"), *item;
	size_t i;
	if (!v)
		return 0;
	if (json_is_string(v)) {
		job->stop[0] = mem_strdup(json_string_value(v));
		job->params.n_stop = 1;
	} else if (json_is_array(v) && json_array_size(v) <= ENG_GEN_MAX_STOP) {
		json_array_foreach(v, i, item) {
			if (!json_is_string(item))
				return srv_gen_bad(e, 400, "invalid_type", "stop",
						   "'stop' must be a string or an array of strings");
			job->stop[i] = mem_strdup(json_string_value(item));
			job->params.n_stop = (int)i + 1;
		}
	} else {
		return srv_gen_bad(e, 400, json_is_array(v) ? "invalid_value" : "invalid_type",
				   "stop", "'stop' must be a string or an array of at most %d strings",
				   ENG_GEN_MAX_STOP);
	}
	for (int k = 0; k < job->params.n_stop; k++) {
		if (!job->stop[k])
			return srv_gen_bad(e, 503, "server_overloaded", NULL, "out of memory");
		job->params.stop[k] = job->stop[k];
	}
	return 0;
}

static int srv_gen_parse_limits(struct srv_gen_job *job, json_t *b, struct srv_gen_err *e)
{
	json_int_t max = 0;
	int rc = srv_gen_int(b, "max_tokens", 1, INT32_MAX, &max, e);
	if (!rc && job->chat)
		rc = srv_gen_int(b, "max_completion_tokens", 1, INT32_MAX, &max, e);
	if (rc)
		return rc;
	/* chat without max_tokens: the rest of the context, at most 2048 */
	job->params.max_tokens_fit = job->chat && max == 0;
	if (max)
		job->params.max_tokens = (int)max;
	else if (job->chat)
		job->params.max_tokens = SRV_GEN_CHAT_MAX_TOKENS;
	return srv_gen_parse_stop(job, b, e);
}

static int srv_gen_parse_logprobs(struct srv_gen_job *job, json_t *b, struct srv_gen_err *e)
{
	json_int_t top = -1;
	if (!job->chat) {
		int rc = srv_gen_int(b, "logprobs", 0, 5, &top, e);
		job->want_logprobs = top >= 0;
		job->params.logprobs = (int)top;
		return rc;
	}
	bool want = false;
	int rc = srv_gen_bool(b, "logprobs", &want, e);
	if (!rc)
		rc = srv_gen_int(b, "top_logprobs", 0, ENG_GEN_MAX_TOP, &top, e);
	if (!rc && top >= 0 && !want)
		rc = srv_gen_bad(e, 400, "invalid_value", "top_logprobs",
				 "'top_logprobs' needs 'logprobs' set to true");
	job->want_logprobs = want;
	job->params.logprobs = want ? (top < 0 ? 0 : (int)top) : -1;
	return rc;
}

static int srv_gen_parse_stream(struct srv_gen_job *job, json_t *b, struct srv_gen_err *e)
{
	int rc = srv_gen_bool(b, "stream", &job->stream, e);
	json_t *so = srv_gen_opt(b, "stream_options");
	if (rc || !so)
		return rc;
	if (!json_is_object(so))
		return srv_gen_bad(e, 400, "invalid_type", "stream_options",
				   "'stream_options' must be an object");
	if (!job->stream)
		return srv_gen_bad(e, 400, "invalid_value", "stream_options",
				   "'stream_options' is only allowed when 'stream' is true");
	return srv_gen_bool(so, "include_usage", &job->include_usage, e);
}

static int srv_gen_parse_model(struct srv_gen_job *job, struct srv_req *req, json_t *b,
			       struct srv_gen_err *e)
{
	json_t *v = srv_gen_opt(b, "model");
	if (!v)
		return srv_gen_bad(e, 400, "missing_required_parameter", "model",
				   "you must provide a model parameter");
	if (!json_is_string(v))
		return srv_gen_bad(e, 400, "invalid_type", "model", "'model' must be a string");
	const char *name = json_string_value(v);
	job->model = eng_model_find(req->conn->srv->eng, name);
	if (!job->model)
		return srv_gen_bad(e, 404, "model_not_found", "model",
				   "The model '%.64s' does not exist", name);
	if (eng_model_task(job->model) != ENG_TASK_GENERATION)
		return srv_gen_bad(e, 400, "invalid_value", "model",
				   "model '%.64s' is a %s model, not a text generation model", name,
				   eng_task_str(eng_model_task(job->model)));
	return 0;
}

/* --- the prompt --------------------------------------------------------- */

static size_t srv_gen_utf8_chars(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		n += ((unsigned char)*s & 0xC0) != 0x80;
	return n;
}

static int srv_gen_parse_prompt(struct srv_gen_job *job, json_t *b, struct srv_gen_err *e)
{
	json_t *v = srv_gen_opt(b, "prompt");
	if (json_is_array(v) && json_array_size(v) == 1)
		v = json_array_get(v, 0);
	if (!v)
		return srv_gen_bad(e, 400, "missing_required_parameter", "prompt",
				   "you must provide a prompt parameter");
	if (!json_is_string(v))
		return srv_gen_bad(e, 400, "invalid_type", "prompt",
				   "'prompt' must be a string (or an array of one string)");
	job->prompt = mem_strndup(json_string_value(v), json_string_length(v));
	if (!job->prompt)
		return srv_gen_bad(e, 503, "server_overloaded", NULL, "out of memory");
	return 0;
}

/* The text of a message's content: a string, or text parts joined with
 * "\n" into *owned (new). NULL with e set when the content is bad. */
static const char *srv_gen_content(json_t *c, bool assistant, char **owned, struct srv_gen_err *e)
{
	json_t *part;
	size_t i;
	if (json_is_string(c))
		return json_string_value(c);
	if (!c && assistant)
		return ""; /* an assistant turn that only called tools */
	if (!json_is_array(c)) {
		srv_gen_bad(e, 400, "invalid_type", "messages",
			    "a message's 'content' must be a string or an array of text parts");
		return NULL;
	}
	struct srv_buf out;
	srv_buf_init(&out, SRV_GEN_OUT_MAX);
	int rc = 0;
	json_array_foreach(c, i, part) {
		json_t *text = json_object_get(part, "text");
		const char *type = json_string_value(json_object_get(part, "type"));
		if (!type || strcmp(type, "text") || !json_is_string(text)) {
			srv_buf_fini(&out);
			srv_gen_bad(e, 400, "invalid_value", "messages",
				    "only content parts {\"type\": \"text\", \"text\": ...} are supported");
			return NULL;
		}
		if (!rc && i)
			rc = srv_buf_append(&out, "\n", 1);
		if (!rc)
			rc = srv_buf_append(&out, json_string_value(text), json_string_length(text));
	}
	if (rc) {
		srv_buf_fini(&out);
		srv_gen_bad(e, 503, "server_overloaded", NULL, "out of memory");
		return NULL;
	}
	*owned = srv_buf_steal(&out);
	return *owned ? *owned : "";
}

static const char *srv_gen_role(json_t *msg, struct srv_gen_err *e)
{
	static const char *const roles[] = { "system", "user", "assistant" };
	const char *r = json_string_value(json_object_get(msg, "role"));
	if (!json_is_object(msg) || !r) {
		srv_gen_bad(e, 400, "invalid_type", "messages",
			    "each message must be an object with a string 'role'");
		return NULL;
	}
	if (!strcmp(r, "developer"))
		return "system"; /* OpenAI's newer name for system instructions */
	for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++)
		if (!strcmp(r, roles[i]))
			return roles[i];
	srv_gen_bad(e, 400, "invalid_value", "messages",
		    "unsupported role '%.32s' (system, developer, user and assistant are)", r);
	return NULL;
}

/* Fill msgs [n] from the array; owned[n] keeps joined contents. */
static int srv_gen_messages(json_t *arr, struct eng_chat_msg *msgs, char **owned,
			    struct srv_gen_err *e)
{
	json_t *m;
	size_t i;
	json_array_foreach(arr, i, m) {
		msgs[i].role = srv_gen_role(m, e);
		if (!msgs[i].role)
			return -ST_INVAL;
		msgs[i].content = srv_gen_content(srv_gen_opt(m, "content"),
						  msgs[i].role[0] == 'a', &owned[i], e);
		if (!msgs[i].content)
			return -ST_INVAL;
	}
	return 0;
}

static int srv_gen_parse_messages(struct srv_gen_job *job, json_t *b, struct srv_gen_err *e)
{
	json_t *arr = srv_gen_opt(b, "messages");
	char err[512] = "";
	if (!arr)
		return srv_gen_bad(e, 400, "missing_required_parameter", "messages",
				   "you must provide a messages parameter");
	if (!json_is_array(arr))
		return srv_gen_bad(e, 400, "invalid_type", "messages", "'messages' must be an array");
	size_t n = json_array_size(arr);
	if (n == 0)
		return srv_gen_bad(e, 400, "invalid_value", "messages",
				   "'messages' must hold at least one message");
	struct eng_chat_msg *msgs = mem_calloc(n, sizeof(*msgs));
	char **owned = mem_calloc(n, sizeof(*owned));
	int rc = msgs && owned ? srv_gen_messages(arr, msgs, owned, e)
			       : srv_gen_bad(e, 503, "server_overloaded", NULL, "out of memory");
	if (!rc) {
		rc = eng_chat_format(job->model, msgs, n, &job->prompt, err, sizeof(err));
		if (rc)
			srv_gen_err_from_st(e, rc, true, err);
	}
	for (size_t i = 0; owned && i < n; i++)
		mem_free(owned[i]);
	mem_free(owned);
	mem_free(msgs);
	return rc;
}

/* Every field, in the order a client would fix them. */
static int srv_gen_parse(struct srv_gen_job *job, struct srv_req *req, json_t *b,
			 struct srv_gen_err *e)
{
	int rc = srv_gen_parse_sampling(job, b, e);
	if (!rc)
		rc = srv_gen_parse_unsupported(job, b, e);
	if (!rc)
		rc = srv_gen_parse_bias(job, b, e);
	if (!rc)
		rc = srv_gen_parse_limits(job, b, e);
	if (!rc)
		rc = srv_gen_parse_logprobs(job, b, e);
	if (!rc)
		rc = srv_gen_parse_stream(job, b, e);
	if (!rc && !job->chat)
		rc = srv_gen_parse_prompt(job, b, e);
	if (!rc)
		rc = srv_gen_parse_model(job, req, b, e);
	if (!rc && job->chat)
		rc = srv_gen_parse_messages(job, b, e);
	char msg[128];
	if (!rc && srv__req_sched_opts(req, &job->opts, msg, sizeof(msg)))
		rc = srv_gen_bad(e, 400, "invalid_value", NULL, "%s", msg);
	if (!rc) {
		job->params.prompt = job->prompt;
		job->prompt_chars = srv_gen_utf8_chars(job->prompt);
	}
	return rc;
}

/* --- the job ------------------------------------------------------------ */

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
	pthread_mutex_destroy(&job->mu);
	mem_free(job);
}

static struct srv_gen_job *srv_gen_job_new(struct srv_req *req, enum srv_gen_kind kind)
{
	struct srv_gen_job *job = mem_calloc(1, sizeof(*job));
	if (!job)
		return NULL;
	bool chat = kind == SRV_GEN_KIND_CHAT;
	pthread_mutex_init(&job->mu, NULL);
	job->conn = req->conn;
	job->kind = kind;
	job->chat = chat;
	job->n = 1;
	job->created = (int64_t)time(NULL);
	snprintf(job->id, sizeof(job->id), "%s-%s", chat ? "chatcmpl" : "cmpl", req->request_id);
	eng_gen_params_init(&job->params);
	job->params.cancel = &job->cancel;
	srv_buf_init(&job->out, SRV_GEN_OUT_MAX);
	return job;
}

/* The error event that ends a stream which has already begun. */
static void srv_gen_stream_error(struct srv_gen_job *job)
{
	struct srv_gen_err e;
	srv_gen_err_from_st(&e, job->rc, job->chat, job->err);
	if (job->kind >= SRV_GEN_KIND_KSERVE_INFER) {
		srv__ks_gen_error_event(job, e.msg);
		return;
	}
	json_t *obj = srv__gen_error_json(e.status, e.code, e.param, e.msg);
	char *s = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
	json_decref(obj);
	struct srv_buf b;
	srv_buf_init(&b, SRV_GEN_OUT_MAX);
	if (s && !srv_buf_printf(&b, "event: error\ndata: %s\n\n", s))
		srv__stream_push(job->st, b.data, b.len);
	srv_buf_fini(&b);
	free(s); /* jansson's allocator */
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
		srv_gen_err_from_st(&e, job->rc, job->chat, job->err);
		srv_gen_respond_err(&conn->req, &e);
	} else if (open) {
		char n[32];
		if (job->ks_header_len) {
			snprintf(n, sizeof(n), "%zu", job->ks_header_len);
			srv__req_add_header(&conn->req, "Inference-Header-Content-Length", n);
		}
		srv__req_respond(&conn->req, 200,
				 job->ks_header_len ? "application/octet-stream" : "application/json",
				 job->out.data, job->out.len);
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
	if (!rc)
		rc = job->st ? srv__gen_push_tail(job) : srv__gen_render(job);
	if (rc == -ST_CANCELED && job->push_rc)
		rc = job->push_rc;
	if (rc && (rc == -ST_NOMEM || rc == -ST_TOOBIG) && !job->err[0])
		snprintf(job->err, sizeof(job->err), rc == -ST_NOMEM ? "out of memory"
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
	bool finish = !rc && job->st && !job->rc;
	pthread_mutex_unlock(&job->mu);
	if (finish && srv__gen_push_finish(c)) {
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

/* Submit the n choices together (queued or refused as a whole); on
 * refusal nothing runs and req is answered at once. */
void srv__gen_queue(struct srv_req *req, struct srv_gen_job *job)
{
	struct srv_conn *conn = req->conn;
	struct srv_gen_err e;
	char err[512] = "";
	const struct eng_gen_params *ps[SRV_GEN_MAX_N];
	void *uds[SRV_GEN_MAX_N];
	int rc = job->stream ? srv__stream_create(req, 200, "text/event-stream", &job->st) : 0;
	if (rc) {
		srv__gen_job_free(job);
		srv_gen_bad(&e, 503, "server_overloaded", NULL, "out of memory");
		srv_gen_respond_err(req, &e);
		return;
	}
	for (int i = 0; i < job->n; i++) {
		struct srv_gen_choice *c = &job->ch[i];
		c->job = job;
		c->index = i;
		c->offset_chars = job->prompt_chars;
		c->params = job->params;
		c->params.seed = job->seed + (uint64_t)i;
		if (job->st) {
			c->params.on_text = srv__gen_on_text;
			c->params.ud = c;
		}
		ps[i] = &c->params;
		uds[i] = c;
	}
	job->pending = job->n;
	rc = eng_generate_submit_group(job->model, ps, (size_t)job->n, &job->opts,
				       srv_gen_choice_done, uds, err, sizeof(err));
	if (rc) { /* nothing runs: answer now (the stream sent nothing yet) */
		bool chat = job->chat;
		srv__gen_job_free(job);
		srv_gen_err_from_st(&e, rc, chat, err);
		srv_gen_respond_err(req, &e);
		return;
	}
	conn->n_work++;
	srv__jobs_begin(conn->srv);
	srv__conn_watch(conn, &job->cancel);
}

static void srv_gen_handle(struct srv_req *req, bool chat)
{
	struct srv_gen_err e = { 0 };
	json_error_t je;
	json_t *body = json_loadb(req->body.data ? req->body.data : "", req->body.len, 0, &je);
	if (!body || !json_is_object(body)) {
		if (body)
			srv_gen_bad(&e, 400, "invalid_json", NULL, "the request body must be a JSON object");
		else if (strstr(je.text, "too big integer"))
			srv_gen_bad(&e, 400, "invalid_value", NULL,
				    "an integer in the request does not fit in 64 bits (line %d, "
				    "column %d)", je.line, je.column);
		else
			srv_gen_bad(&e, 400, "invalid_json", NULL,
				    "the request body is not valid JSON: %s (line %d, column %d)",
				    je.text, je.line, je.column);
		json_decref(body);
		srv_gen_respond_err(req, &e);
		return;
	}
	struct srv_gen_job *job = srv_gen_job_new(req, chat ? SRV_GEN_KIND_CHAT
							     : SRV_GEN_KIND_COMPLETIONS);
	int rc = job ? srv_gen_parse(job, req, body, &e)
		     : srv_gen_bad(&e, 503, "server_overloaded", NULL, "out of memory");
	json_decref(body);
	if (rc) {
		srv__gen_job_free(job);
		srv_gen_respond_err(req, &e);
		return;
	}
	srv__gen_queue(req, job);
}

struct srv_gen_job *srv__gen_prepare(struct srv_req *req, enum srv_gen_kind kind, json_t *body,
				     int *status, char *msg, size_t n)
{
	struct srv_gen_err e = { 0 };
	struct srv_gen_job *job = srv_gen_job_new(req, kind);
	int rc = job ? srv_gen_parse(job, req, body, &e)
		     : srv_gen_bad(&e, 503, "server_overloaded", NULL, "out of memory");
	if (!rc)
		return job;
	srv__gen_job_free(job);
	*status = e.status;
	snprintf(msg, n, "%s", e.msg);
	return NULL;
}

void srv__h_openai_completions(struct srv_req *req)
{
	srv_gen_handle(req, false);
}

void srv__h_openai_chat_completions(struct srv_req *req)
{
	srv_gen_handle(req, true);
}
