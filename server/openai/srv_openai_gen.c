/* srv_openai_gen.c - POST /v1/completions and POST /v1/chat/completions,
 * OpenAI's text generation API
 * (https://platform.openai.com/docs/api-reference/completions,
 *  https://platform.openai.com/docs/api-reference/chat/create): parsing and
 * validation of the JSON body into the generation job
 * (server/job/srv_gen_job.h, which describes its life), queued with
 * OpenAI's render table (srv_openai_gen_out.c).
 *
 *   model                  required; unknown -> 404 model_not_found; not a
 *                          generation model -> 400
 *   prompt                 completions: a string (or an array of one);
 *                          control tokens written in it ("<end_of_turn>")
 *                          are parsed as tokens, as llama.cpp's server does
 *   messages               chat: [{role, content}], role system, developer
 *                          (as system), user or assistant; content a
 *                          string or [{"type":"text","text":...}] parts
 *                          (joined with "\n"). Control tokens written in
 *                          content are text: only the chat template's own
 *                          markers are tokens (eng_chat_format's mask), so
 *                          a message cannot close its turn and forge the
 *                          model's
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
 * best_of other than n, tools / tool_choice / functions / function_call
 * (but for the values that ask for none: [] and "none"), response_format
 * other than {"type": "text"}, audio / modalities other than text. A null
 * value counts as absent; other unknown fields are
 * ignored (SDKs add fields over time). Errors: 400 invalid_json /
 * invalid_type / invalid_value / missing_required_parameter /
 * unsupported_parameter / context_length_exceeded /
 * unsupported_chat_template, 404 model_not_found, 429 rate_limit_exceeded
 * (the model's queue is full; Retry-After), 503 server_overloaded, 504
 * timeout (the Inferd-Timeout-Ms deadline or the model's timeout_ms).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/mem.h"
#include "common/st.h"
#include "common/utf8.h"
#include "server/openai/srv_openai_gen.h"

/* --- the fields ------------------------------------------------------- */

static int srv_gen_parse_sampling(struct srv_openai_gen_job *job, json_t *b, struct srv_gen_err *e)
{
	struct eng_gen_params *p = &job->base.params;
	json_int_t n = 1, top_k = 0, seed = 0;
	float top_p = 1;
	int rc = srv__gen_json_num(b, "temperature", 0, 2, &p->temperature, e);
	if (!rc)
		rc = srv__gen_json_num(b, "top_p", 0, 1, &top_p, e);
	if (!rc)
		rc = srv__gen_json_num(b, "presence_penalty", -2, 2, &p->presence_penalty, e);
	if (!rc)
		rc = srv__gen_json_num(b, "frequency_penalty", -2, 2, &p->frequency_penalty, e);
	if (!rc)
		rc = srv__gen_json_num(b, "min_p", 0, 1, &p->min_p, e);
	if (!rc)
		rc = srv__gen_json_num(b, "repetition_penalty", 1e-6, 10, &p->repetition_penalty,
				       e);
	if (!rc)
		rc = srv__gen_json_int(b, "top_k", 0, 1 << 30, &top_k, e);
	if (!rc)
		rc = srv__gen_json_int(b, "n", 1, SRV_GEN_MAX_N, &n, e);
	if (!rc)
		rc = srv__gen_json_int(b, "seed", INT64_MIN, INT64_MAX, &seed, e);
	p->top_p = top_p > 0 ? top_p : 1e-9f; /* 0: only the most likely token */
	p->top_k = (int)top_k;
	job->base.n = (int)n;
	job->base.seed = (uint64_t)seed;
	if (!srv__gen_json_opt(b, "seed") &&
	    uv_random(NULL, NULL, &job->base.seed, sizeof(job->base.seed), 0, NULL))
		job->base.seed = (uint64_t)uv_hrtime(); /* getrandom failed: still varies */
	return rc;
}

/* logit_bias: {"<token id>": bias -100..100}, added to the logits before
 * sampling (OpenAI's semantics; ids checked against the vocabulary when the
 * model is known, srv_gen_check_bias). */
static int srv_gen_parse_bias(struct srv_openai_gen_job *job, json_t *b, struct srv_gen_err *e)
{
	json_t *v = srv__gen_json_opt(b, "logit_bias"), *val;
	const char *key;
	if (!v)
		return 0;
	if (!json_is_object(v))
		return srv__gen_err_set(e, 400, "invalid_type", "logit_bias",
					"'logit_bias' must be an object of token ids to numbers");
	if (json_object_size(v) > ENG_GEN_MAX_BIAS)
		return srv__gen_err_set(e, 400, "invalid_value", "logit_bias",
					"'logit_bias' takes at most %d tokens", ENG_GEN_MAX_BIAS);
	int k = 0;
	json_object_foreach(v, key, val) {
		char *end;
		long long id = strtoll(key, &end, 10);
		if (!*key || *end || id < 0 || id > INT32_MAX)
			return srv__gen_err_set(e, 400, "invalid_value", "logit_bias",
						"'logit_bias' keys must be token ids (got '%.32s')",
						key);
		if (!json_is_number(val) || json_number_value(val) < -100 ||
		    json_number_value(val) > 100)
			return srv__gen_err_set(
				e, 400, "invalid_value", "logit_bias",
				"'logit_bias' values must be numbers from -100 to 100");
		job->bias[k].id = (int32_t)id;
		job->bias[k].bias = (float)json_number_value(val);
		k++;
	}
	job->base.params.bias = job->bias;
	job->base.params.n_bias = k;
	return 0;
}

/* The values of the tool fields that ask for no tools, which clients send
 * by default: an empty tools / functions list, tool_choice or
 * function_call "none". */
static bool srv_gen_no_tools(const char *k, json_t *v)
{
	if (!strcmp(k, "tools") || !strcmp(k, "functions"))
		return json_is_array(v) && json_array_size(v) == 0;
	if (!strcmp(k, "tool_choice") || !strcmp(k, "function_call"))
		return json_is_string(v) && !strcmp(json_string_value(v), "none");
	return false;
}

/* Fields whose meaning we do not implement: refused, never ignored. */
static int srv_gen_parse_unsupported(struct srv_openai_gen_job *job, json_t *b,
				     struct srv_gen_err *e)
{
	static const char *const never[] = { "tools", "tool_choice", "functions", "function_call",
					     "audio", "prediction" };
	json_t *v;
	for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++)
		if ((v = srv__gen_json_opt(b, never[i])) && !srv_gen_no_tools(never[i], v))
			return srv__gen_err_set(e, 400, "unsupported_parameter", never[i],
						"'%s' is not supported by this server", never[i]);
	if ((v = srv__gen_json_opt(b, "echo")) && !json_is_false(v))
		return srv__gen_err_set(e, 400, "unsupported_parameter", "echo",
					"'echo' is not supported by this server");
	if ((v = srv__gen_json_opt(b, "suffix")) && !(json_is_string(v) && !json_string_length(v)))
		return srv__gen_err_set(e, 400, "unsupported_parameter", "suffix",
					"'suffix' (insertion) is not supported by this server");
	if ((v = srv__gen_json_opt(b, "best_of")) &&
	    !(json_is_integer(v) && json_integer_value(v) == job->base.n))
		return srv__gen_err_set(e, 400, "unsupported_parameter", "best_of",
					"'best_of' is not supported (only best_of == n); use n");
	if ((v = srv__gen_json_opt(b, "response_format")) &&
	    !(json_is_object(v) && json_is_string(json_object_get(v, "type")) &&
	      !strcmp(json_string_value(json_object_get(v, "type")), "text")))
		return srv__gen_err_set(e, 400, "unsupported_parameter", "response_format",
					"only response_format {\"type\": \"text\"} is supported");
	if ((v = srv__gen_json_opt(b, "modalities")) &&
	    !(json_is_array(v) && json_array_size(v) == 1 && json_is_string(json_array_get(v, 0)) &&
	      !strcmp(json_string_value(json_array_get(v, 0)), "text")))
		return srv__gen_err_set(e, 400, "unsupported_parameter", "modalities",
					"only the \"text\" modality is supported");
	return 0;
}

static int srv_gen_parse_limits(struct srv_openai_gen_job *job, json_t *b, struct srv_gen_err *e)
{
	json_int_t max = 0;
	int rc = srv__gen_json_int(b, "max_tokens", 1, INT32_MAX, &max, e);
	if (!rc && job->chat)
		rc = srv__gen_json_int(b, "max_completion_tokens", 1, INT32_MAX, &max, e);
	if (rc)
		return rc;
	/* chat without max_tokens: the rest of the context, at most 2048 */
	job->base.params.max_tokens_fit = job->chat && max == 0;
	if (max)
		job->base.params.max_tokens = (int)max;
	else if (job->chat)
		job->base.params.max_tokens = SRV_GEN_CHAT_MAX_TOKENS;
	return srv__gen_json_stop(&job->base, b, e);
}

static int srv_gen_parse_logprobs(struct srv_openai_gen_job *job, json_t *b, struct srv_gen_err *e)
{
	json_int_t top = -1;
	if (!job->chat) {
		int rc = srv__gen_json_int(b, "logprobs", 0, 5, &top, e);
		job->want_logprobs = top >= 0;
		job->base.params.logprobs = (int)top;
		return rc;
	}
	bool want = false;
	int rc = srv__gen_json_bool(b, "logprobs", &want, e);
	if (!rc)
		rc = srv__gen_json_int(b, "top_logprobs", 0, ENG_GEN_MAX_TOP, &top, e);
	if (!rc && top >= 0 && !want)
		rc = srv__gen_err_set(e, 400, "invalid_value", "top_logprobs",
				      "'top_logprobs' needs 'logprobs' set to true");
	job->want_logprobs = want;
	job->base.params.logprobs = want ? (top < 0 ? 0 : (int)top) : -1;
	return rc;
}

static int srv_gen_parse_stream(struct srv_openai_gen_job *job, json_t *b, struct srv_gen_err *e)
{
	int rc = srv__gen_json_bool(b, "stream", &job->base.stream, e);
	json_t *so = srv__gen_json_opt(b, "stream_options");
	if (rc || !so)
		return rc;
	if (!json_is_object(so))
		return srv__gen_err_set(e, 400, "invalid_type", "stream_options",
					"'stream_options' must be an object");
	if (!job->base.stream)
		return srv__gen_err_set(e, 400, "invalid_value", "stream_options",
					"'stream_options' is only allowed when 'stream' is true");
	json_t *iu = srv__gen_json_opt(so, "include_usage");
	if (iu && !json_is_boolean(iu))
		return srv__gen_err_set(e, 400, "invalid_type", "stream_options.include_usage",
					"'stream_options.include_usage' must be a boolean");
	job->include_usage = json_is_true(iu);
	return 0;
}

static int srv_gen_parse_model(struct srv_openai_gen_job *job, struct srv_req *req, json_t *b,
			       struct srv_gen_err *e)
{
	json_t *v = srv__gen_json_opt(b, "model");
	if (!v)
		return srv__gen_err_set(e, 400, "missing_required_parameter", "model",
					"you must provide a model parameter");
	if (!json_is_string(v))
		return srv__gen_err_set(e, 400, "invalid_type", "model",
					"'model' must be a string");
	const char *name = json_string_value(v);
	job->base.model = eng_model_find(req->conn->srv->eng, name);
	if (!job->base.model)
		return srv__gen_err_set(e, 404, "model_not_found", "model",
					"The model '%.64s' does not exist", name);
	if (eng_model_task(job->base.model) != ENG_TASK_GENERATION)
		return srv__gen_err_set(e, 400, "invalid_value", "model",
					"model '%.64s' is a %s model, not a text generation model",
					name, eng_task_str(eng_model_task(job->base.model)));
	return 0;
}

/* --- the prompt --------------------------------------------------------- */

static int srv_gen_parse_prompt(struct srv_openai_gen_job *job, json_t *b, struct srv_gen_err *e)
{
	json_t *v = srv__gen_json_opt(b, "prompt");
	if (json_is_array(v) && json_array_size(v) == 1)
		v = json_array_get(v, 0);
	if (!v)
		return srv__gen_err_set(e, 400, "missing_required_parameter", "prompt",
					"you must provide a prompt parameter");
	if (!json_is_string(v))
		return srv__gen_err_set(e, 400, "invalid_type", "prompt",
					"'prompt' must be a string (or an array of one string)");
	job->base.prompt = mem_strndup(json_string_value(v), json_string_length(v));
	if (!job->base.prompt)
		return srv__gen_err_set(e, 503, "server_overloaded", NULL, "out of memory");
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
		srv__gen_err_set(
			e, 400, "invalid_type", "messages",
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
			srv__gen_err_set(e, 400, "invalid_value", "messages",
					 "only content parts {\"type\": \"text\", \"text\": ...} "
					 "are supported");
			return NULL;
		}
		if (!rc && i)
			rc = srv_buf_append(&out, "\n", 1);
		if (!rc)
			rc = srv_buf_append(&out, json_string_value(text), json_string_length(text));
	}
	if (rc) {
		srv_buf_fini(&out);
		srv__gen_err_set(e, 503, "server_overloaded", NULL, "out of memory");
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
		srv__gen_err_set(e, 400, "invalid_type", "messages",
				 "each message must be an object with a string 'role'");
		return NULL;
	}
	if (!strcmp(r, "developer"))
		return "system"; /* OpenAI's newer name for system instructions */
	for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++)
		if (!strcmp(r, roles[i]))
			return roles[i];
	srv__gen_err_set(e, 400, "invalid_value", "messages",
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
		msgs[i].content = srv_gen_content(srv__gen_json_opt(m, "content"),
						  msgs[i].role[0] == 'a', &owned[i], e);
		if (!msgs[i].content)
			return -ST_INVAL;
	}
	return 0;
}

static int srv_gen_parse_messages(struct srv_openai_gen_job *job, json_t *b, struct srv_gen_err *e)
{
	json_t *arr = srv__gen_json_opt(b, "messages");
	char err[512] = "";
	if (!arr)
		return srv__gen_err_set(e, 400, "missing_required_parameter", "messages",
					"you must provide a messages parameter");
	if (!json_is_array(arr))
		return srv__gen_err_set(e, 400, "invalid_type", "messages",
					"'messages' must be an array");
	size_t n = json_array_size(arr);
	if (n == 0)
		return srv__gen_err_set(e, 400, "invalid_value", "messages",
					"'messages' must hold at least one message");
	struct eng_chat_msg *msgs = mem_calloc(n, sizeof(*msgs));
	char **owned = mem_calloc(n, sizeof(*owned));
	int rc = msgs && owned
			 ? srv_gen_messages(arr, msgs, owned, e)
			 : srv__gen_err_set(e, 503, "server_overloaded", NULL, "out of memory");
	if (!rc) {
		rc = eng_chat_format(job->base.model, msgs, n, &job->base.prompt,
				     &job->base.prompt_plain, err, sizeof(err));
		if (rc)
			srv__gen_err_from_st(e, rc, "messages", err);
	}
	for (size_t i = 0; owned && i < n; i++)
		mem_free(owned[i]);
	mem_free(owned);
	mem_free(msgs);
	return rc;
}

/* logit_bias's ids against the model's vocabulary, once the model is
 * known (the engine checks them again at submission). */
static int srv_gen_check_bias(struct srv_openai_gen_job *job, struct srv_gen_err *e)
{
	size_t n_vocab = eng_model_vocab_size(job->base.model);
	for (int i = 0; n_vocab && i < job->base.params.n_bias; i++)
		if ((size_t)job->bias[i].id >= n_vocab)
			return srv__gen_err_set(e, 400, "invalid_value", "logit_bias",
						"'logit_bias' key %d is not a token of this model "
						"(its vocabulary has %zu)",
						(int)job->bias[i].id, n_vocab);
	return 0;
}

/* Every field, in the order a client would fix them. */
static int srv_gen_parse(struct srv_openai_gen_job *job, struct srv_req *req, json_t *b,
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
	if (!rc)
		rc = srv_gen_check_bias(job, e);
	if (!rc && job->chat)
		rc = srv_gen_parse_messages(job, b, e);
	char msg[128];
	if (!rc && srv__req_sched_opts(req, &job->base.opts, msg, sizeof(msg)))
		rc = srv__gen_err_set(e, 400, "invalid_value", NULL, "%s", msg);
	if (!rc) {
		job->base.params.prompt = job->base.prompt;
		job->base.params.prompt_plain = job->base.prompt_plain;
		job->prompt_chars = st_utf8_count(job->base.prompt, strlen(job->base.prompt));
	}
	return rc;
}

/* --- the job ------------------------------------------------------------ */

static struct srv_openai_gen_job *srv_gen_job_new(struct srv_req *req, bool chat)
{
	struct srv_openai_gen_job *job = (struct srv_openai_gen_job *)srv__gen_job_new(
		req, sizeof(*job), &srv__openai_gen_render);
	if (!job)
		return NULL;
	job->chat = chat;
	job->base.input_param = chat ? "messages" : "prompt";
	job->created = (int64_t)time(NULL);
	snprintf(job->id, sizeof(job->id), "%s-%s", chat ? "chatcmpl" : "cmpl", req->request_id);
	return job;
}

/* --- the body's JSON --------------------------------------------------- */

/* One open container of srv__json_error_path's scan: an object (its
 * current member's key at text [key, key_end], the quotes included; key_end
 * 0 while it waits for one) or an array (the index of its current element). */
struct srv_json_level {
	bool array;
	size_t key, key_end, index;
};

#define SRV_JSON_PATH_DEPTH 32

/* The end of the JSON string whose opening quote is at text[i]: the index
 * of its closing quote, or len when the text ends first. */
static size_t srv_json_string_end(const char *text, size_t len, size_t i)
{
	for (i++; i < len; i++) {
		if (text[i] == '\\')
			i++;
		else if (text[i] == '"')
			return i;
	}
	return len;
}

/* Append level l's step of the path to out (at *n; out_size bytes); false
 * when it does not fit or its key cannot be read. */
static bool srv_json_path_step(const char *text, const struct srv_json_level *l, bool first,
			       char *out, size_t out_size, size_t *n)
{
	int w;
	if (l->array) {
		w = snprintf(out + *n, out_size - *n, "[%zu]", l->index);
	} else {
		/* jansson unescapes the key, as it would have had the body parsed */
		json_t *key = json_loadb(text + l->key, l->key_end - l->key + 1, JSON_DECODE_ANY,
					 NULL);
		const char *k = json_string_value(key);
		w = k ? snprintf(out + *n, out_size - *n, "%s%s", first ? "" : ".", k) : -1;
		json_decref(key);
	}
	if (w < 0 || (size_t)w >= out_size - *n)
		return false;
	*n += (size_t)w;
	return true;
}

bool srv__json_error_path(const char *text, size_t len, size_t pos, char *out, size_t out_size)
{
	struct srv_json_level st[SRV_JSON_PATH_DEPTH];
	size_t depth = 0, n = 0, end = pos < len ? pos : len;
	if (!out_size)
		return false;
	out[0] = '\0';
	for (size_t i = 0; i < end; i++) {
		char c = text[i];
		struct srv_json_level *top = depth ? &st[depth - 1] : NULL;
		if (c == '"') {
			size_t e = srv_json_string_end(text, len, i);
			if (top && !top->array && !top->key_end && e < end) { /* a key */
				top->key = i;
				top->key_end = e;
			}
			i = e;
		} else if (c == '{' || c == '[') {
			if (depth == SRV_JSON_PATH_DEPTH)
				return false; /* too deep to name */
			st[depth++] = (struct srv_json_level){ .array = c == '[' };
		} else if ((c == '}' || c == ']') && depth) {
			depth--;
		} else if (c == ',' && top) {
			top->index++;
			top->key_end = 0;
		}
	}
	for (size_t d = 0; d < depth; d++) {
		if (!st[d].array && !st[d].key_end)
			break; /* an object between members: no value of its own yet */
		if (!srv_json_path_step(text, &st[d], d == 0, out, out_size, &n)) {
			out[0] = '\0';
			return false;
		}
	}
	return n > 0;
}

/* Fill e for a body jansson refused with je; key (key_size bytes) receives
 * the param named, which e then borrows. */
static void srv_gen_body_error(const struct srv_req *req, const json_error_t *je,
			       struct srv_gen_err *e, char *key, size_t key_size)
{
	bool named = je->position >= 0 && req->body.data &&
		     srv__json_error_path(req->body.data, req->body.len, (size_t)je->position, key,
					  key_size);
	if (strstr(je->text, "JSON_ALLOW_NUL")) { /* jansson's flag, not ours to name */
		if (named)
			srv__gen_err_set(e, 400, "invalid_value", key,
					 "'%s' holds \\u0000 (NUL), which is not accepted (line %d, "
					 "column %d)",
					 key, je->line, je->column);
		else
			srv__gen_err_set(e, 400, "invalid_value", NULL,
					 "a string in the request holds \\u0000 (NUL), which is not "
					 "accepted (line %d, column %d)",
					 je->line, je->column);
		return;
	}
	if (json_error_code(je) != json_error_numeric_overflow) {
		srv__gen_err_set(e, 400, "invalid_json", NULL,
				 "the request body is not valid JSON: %s (line %d, column %d)",
				 je->text, je->line, je->column);
		return;
	}
	/* "too big integer" or "real number overflow": jansson names no key;
	 * the path found above is the number's. */
	const char *what = strstr(je->text, "integer") ? "an integer that does not fit in 64 bits"
						       : "a number too large for a double";
	if (named)
		srv__gen_err_set(e, 400, "invalid_value", key, "'%s' is %s (line %d, column %d)",
				 key, what, je->line, je->column);
	else
		srv__gen_err_set(e, 400, "invalid_value", NULL,
				 "the request holds %s (line %d, column %d)", what, je->line,
				 je->column);
}

static void srv_gen_handle(struct srv_req *req, bool chat)
{
	struct srv_gen_err e = { 0 };
	json_error_t je;
	char key[128]; /* the param of a body jansson refused, e borrows it */
	json_t *body = json_loadb(req->body.data ? req->body.data : "", req->body.len, 0, &je);
	if (!body || !json_is_object(body)) {
		if (body)
			srv__gen_err_set(&e, 400, "invalid_json", NULL,
					 "the request body must be a JSON object");
		else
			srv_gen_body_error(req, &je, &e, key, sizeof(key));
		json_decref(body);
		srv__openai_gen_respond_error(req, &e);
		return;
	}
	struct srv_openai_gen_job *job = srv_gen_job_new(req, chat);
	int rc = job ? srv_gen_parse(job, req, body, &e)
		     : srv__gen_err_set(&e, 503, "server_overloaded", NULL, "out of memory");
	json_decref(body);
	if (rc) {
		srv__gen_job_free(job ? &job->base : NULL);
		srv__openai_gen_respond_error(req, &e);
		return;
	}
	for (int i = 0; i < job->base.n; i++)
		job->offset_chars[i] = job->prompt_chars;
	srv__gen_job_queue(req, &job->base);
}

void srv__h_openai_completions(struct srv_req *req)
{
	srv_gen_handle(req, false);
}

void srv__h_openai_chat_completions(struct srv_req *req)
{
	srv_gen_handle(req, true);
}
