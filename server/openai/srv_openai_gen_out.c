/* srv_openai_gen_out.c - OpenAI's render table for the generation job
 * (srv__openai_gen_render): its response objects, streamed chunks,
 * logprobs and errors, rendered on the replica threads.
 *
 *   text_completion   {id, object, created, model, system_fingerprint,
 *                      choices: [{index, text, logprobs, finish_reason}], usage}
 *   chat.completion   {..., choices: [{index, message: {role: "assistant",
 *                      content, refusal: null}, logprobs, finish_reason}], usage}
 *   streamed          "data: {chunk}\n\n" per piece of text: chat chunks
 *                      (object chat.completion.chunk) carry choices[0].delta -
 *                      first {role: "assistant", content: ""}, then {content},
 *                      then {} with finish_reason; completion chunks carry
 *                      text. With stream_options.include_usage every chunk
 *                      has "usage": null and a last chunk has "choices": []
 *                      and the usage. Then "data: [DONE]\n\n".
 *   logprobs          completions: {tokens, token_logprobs, top_logprobs
 *                      [{token: logprob}], text_offset (code points from the
 *                      start of the prompt)}; chat: {content: [{token,
 *                      logprob, bytes, top_logprobs: [{token, logprob,
 *                      bytes}]}], refusal: null}. A streamed chunk carries the
 *                      logprobs of every token whose text begins in it.
 * Text that is not valid UTF-8 (a token's bytes can be part of a character)
 * is sent with U+FFFD in place of the bad bytes.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "common/utf8.h"
#include "server/job/srv_audio_job.h"
#include "server/openai/srv_openai_gen.h"
#include "server/srv_status.h"

#define SRV_GEN_PIECE_MAX 256 /* bytes of one token's text kept for logprobs */

static json_t *srv_gen_error_json(int status, const char *code, const char *param, const char *msg)
{
	return json_pack("{s:{s:s,s:s,s:s?,s:s?}}", "error", "message", msg, "type",
			 srv__status_openai_type(status), "param", param, "code", code);
}

static const char *srv_gen_finish_str(enum eng_finish f)
{
	return f == ENG_FINISH_LENGTH ? "length" : "stop";
}

/* jansson refuses non-finite reals; a token the sampler could never pick
 * gets a very low number instead. */
static json_t *srv_gen_real(float v)
{
	return json_real(isfinite(v) ? (double)v : -9999.0);
}

/* --- logprobs ------------------------------------------------------------ */

/* The bytes of token id into buf (SRV_GEN_PIECE_MAX); returns the count kept. */
static size_t srv_gen_piece(const struct srv_openai_gen_job *job, int32_t id, char *buf)
{
	size_t n = eng_token_text(job->base.model, id, buf, SRV_GEN_PIECE_MAX);
	return n < SRV_GEN_PIECE_MAX ? n : SRV_GEN_PIECE_MAX - 1;
}

/* {token, logprob, bytes} (chat). */
static json_t *srv_gen_chat_entry(const struct srv_openai_gen_job *job, int32_t id, float logprob)
{
	char buf[SRV_GEN_PIECE_MAX];
	size_t n = srv_gen_piece(job, id, buf);
	json_t *bytes = json_array();
	for (size_t i = 0; bytes && i < n; i++)
		if (json_array_append_new(bytes, json_integer((unsigned char)buf[i]))) {
			json_decref(bytes);
			bytes = NULL;
		}
	return json_pack("{s:o,s:o,s:o}", "token", srv__audio_json_str(buf, n), "logprob",
			 srv_gen_real(logprob), "bytes", bytes);
}

static json_t *srv_gen_chat_logprobs(const struct srv_openai_gen_job *job,
				     const struct eng_gen_token *toks, size_t n)
{
	json_t *content = json_array();
	for (size_t i = 0; content && i < n; i++) {
		json_t *e = srv_gen_chat_entry(job, toks[i].id, toks[i].logprob);
		json_t *top = json_array();
		for (int k = 0; top && k < toks[i].n_top; k++)
			if (json_array_append_new(top, srv_gen_chat_entry(job, toks[i].top[k].id,
									  toks[i].top[k].logprob))) {
				json_decref(top);
				top = NULL;
			}
		if (!e || !top || json_object_set_new(e, "top_logprobs", top) ||
		    json_array_append_new(content, e)) {
			json_decref(e);
			json_decref(content);
			content = NULL;
		}
	}
	return json_pack("{s:o,s:n}", "content", content, "refusal");
}

/* The text of the completion from byte text0 on (text [n]), where token
 * rows' text_offset counts from: chars0 code points before text0 (the
 * prompt's and the text already sent). A chunk's or the whole answer's. */
struct srv_gen_span {
	const char *text;
	size_t n, text0, chars0;
};

/* The completions text_offset of a token beginning at byte start of the
 * completion: code points of the text before it, so tokens with no text
 * of their own (special ones) do not move it. */
static json_int_t srv_gen_offset(const struct srv_gen_span *sp, size_t start)
{
	size_t k = start > sp->text0 ? start - sp->text0 : 0;
	return (json_int_t)(sp->chars0 + st_utf8_count(sp->text, k < sp->n ? k : sp->n));
}

/* Legacy completions' top_logprobs of a token: its alternatives and, as
 * OpenAI's (and vLLM's) always have it, the sampled token itself (up to
 * logprobs + 1 entries). */
static json_t *srv_gen_cmpl_top(const struct srv_openai_gen_job *job,
				const struct eng_gen_token *t, const char *piece, size_t n)
{
	json_t *top = json_object();
	for (int k = 0; top && k <= t->n_top; k++) {
		char alt[SRV_GEN_PIECE_MAX];
		bool alt_k = k < t->n_top; /* else the sampled token, unless among them */
		size_t an = alt_k ? srv_gen_piece(job, t->top[k].id, alt) : n;
		json_t *key = srv__audio_json_str(alt_k ? alt : piece, an);
		const char *ks = json_string_value(key);
		float lp = alt_k ? t->top[k].logprob : t->logprob;
		bool have = ks && !alt_k && json_object_get(top, ks);
		if (!key || (!have && json_object_set_new(top, ks, srv_gen_real(lp)))) {
			json_decref(top);
			top = NULL;
		}
		json_decref(key);
	}
	return top;
}

/* One token's row of the four completions arrays. */
static int srv_gen_cmpl_row(const struct srv_openai_gen_job *job, const struct eng_gen_token *t,
			    json_t *lp, const struct srv_gen_span *sp)
{
	char buf[SRV_GEN_PIECE_MAX];
	size_t n = srv_gen_piece(job, t->id, buf);
	int rc = json_array_append_new(json_object_get(lp, "tokens"), srv__audio_json_str(buf, n));
	rc |= json_array_append_new(json_object_get(lp, "token_logprobs"), srv_gen_real(t->logprob));
	rc |= json_array_append_new(json_object_get(lp, "top_logprobs"),
				    srv_gen_cmpl_top(job, t, buf, n));
	rc |= json_array_append_new(json_object_get(lp, "text_offset"),
				    json_integer(srv_gen_offset(sp, t->text_start)));
	return rc ? -ST_NOMEM : 0;
}

static json_t *srv_gen_cmpl_logprobs(const struct srv_openai_gen_job *job,
				     const struct eng_gen_token *toks, size_t n,
				     const struct srv_gen_span *sp)
{
	json_t *lp = json_pack("{s:[],s:[],s:[],s:[]}", "tokens", "token_logprobs", "top_logprobs",
			       "text_offset");
	for (size_t i = 0; lp && i < n; i++)
		if (srv_gen_cmpl_row(job, &toks[i], lp, sp)) {
			json_decref(lp);
			lp = NULL;
		}
	return lp;
}

/* The logprobs value of a choice or chunk: null unless asked for. */
static json_t *srv_gen_logprobs(const struct srv_openai_gen_job *job,
				const struct eng_gen_token *toks, size_t n,
				const struct srv_gen_span *sp)
{
	if (!job->want_logprobs)
		return json_null();
	if (job->chat)
		return srv_gen_chat_logprobs(job, toks, n);
	return srv_gen_cmpl_logprobs(job, toks, n, sp);
}

/* --- whole responses ------------------------------------------------------ */

/* OpenAI's usage: the prompt counted once for the n choices, and so its
 * cached_tokens (prompt_tokens_details: the prompt tokens the first
 * choice copied instead of computing them, prefix caching); the choices'
 * completions summed. */
static json_t *srv_gen_usage(const struct srv_openai_gen_job *job)
{
	const struct eng_gen_result *r0 = job->base.res[0];
	json_int_t prompt = r0 ? (json_int_t)r0->n_prompt_tokens : 0, done = 0;
	json_int_t cached = r0 ? (json_int_t)r0->n_cached_tokens : 0;
	for (int i = 0; i < job->base.n; i++)
		done += job->base.res[i] ? (json_int_t)job->base.res[i]->n_completion_tokens : 0;
	return json_pack("{s:I,s:I,s:I,s:{s:I}}", "prompt_tokens", prompt, "completion_tokens",
			 done, "total_tokens", prompt + done, "prompt_tokens_details",
			 "cached_tokens", cached);
}

static json_t *srv_gen_choice(const struct srv_openai_gen_job *job, int i)
{
	const struct eng_gen_result *r = job->base.res[i];
	struct srv_gen_span sp = { r->text, r->text_len, 0, job->prompt_chars };
	json_t *text = srv__audio_json_str(r->text, r->text_len);
	/* not the tokens of a stop string, which the text leaves out: the
	 * ones the streamed chunks carry */
	json_t *lp = srv_gen_logprobs(job, r->tokens, r->tokens ? r->n_text_tokens : 0, &sp);
	if (!job->chat)
		return json_pack("{s:i,s:o,s:o,s:s}", "index", i, "text", text, "logprobs", lp,
				 "finish_reason", srv_gen_finish_str(r->finish));
	return json_pack("{s:i,s:{s:s,s:o,s:n},s:o,s:s}", "index", i, "message", "role", "assistant",
			 "content", text, "refusal", "logprobs", lp, "finish_reason",
			 srv_gen_finish_str(r->finish));
}

static int srv_gen_dump_cb(const char *buf, size_t size, void *data)
{
	return srv_buf_append(data, buf, size) ? -1 : 0;
}

static int srv_gen_body(struct srv_gen_job *base)
{
	struct srv_openai_gen_job *job = (struct srv_openai_gen_job *)base;
	json_t *choices = json_array();
	for (int i = 0; choices && i < job->base.n; i++)
		if (json_array_append_new(choices, srv_gen_choice(job, i))) {
			json_decref(choices);
			choices = NULL;
		}
	json_t *obj = json_pack("{s:s,s:s,s:I,s:s,s:s,s:o,s:o}", "id", job->id, "object",
				job->chat ? "chat.completion" : "text_completion", "created",
				(json_int_t)job->created, "model", eng_model_name(job->base.model),
				"system_fingerprint", SRV_GEN_FINGERPRINT, "choices", choices,
				"usage", srv_gen_usage(job));
	if (!obj)
		return -ST_NOMEM;
	int rc = json_dump_callback(obj, srv_gen_dump_cb, &job->base.out, JSON_COMPACT);
	json_decref(obj);
	if (rc)
		return job->base.out.len + 4096 > job->base.out.max_len ? -ST_TOOBIG : -ST_NOMEM;
	return 0;
}

/* --- streamed chunks -------------------------------------------------------- */

/* A chunk around choices (stolen). */
static json_t *srv_gen_chunk(const struct srv_openai_gen_job *job, json_t *choices)
{
	json_t *o = json_pack("{s:s,s:s,s:I,s:s,s:s,s:o}", "id", job->id, "object",
			      job->chat ? "chat.completion.chunk" : "text_completion", "created",
			      (json_int_t)job->created, "model", eng_model_name(job->base.model),
			      "system_fingerprint", SRV_GEN_FINGERPRINT, "choices", choices);
	if (o && job->include_usage && json_object_set_new(o, "usage", json_null())) {
		json_decref(o);
		o = NULL;
	}
	return o;
}

/* Chat: the first delta of choice c, {role, content: ""}. */
static int srv_gen_push_role(struct srv_gen_choice *c)
{
	struct srv_openai_gen_job *job = (struct srv_openai_gen_job *)c->job;
	job->role_sent[c->index] = true;
	return srv__gen_push_json(
		c->job, srv_gen_chunk(job, json_pack("[{s:i,s:{s:s,s:s},s:n,s:n}]", "index",
						     c->index, "delta", "role", "assistant",
						     "content", "", "logprobs", "finish_reason")));
}

static int srv_gen_push_piece(struct srv_gen_choice *ch, const char *text, size_t len,
			      const struct eng_gen_token *toks, size_t n_toks)
{
	struct srv_openai_gen_job *job = (struct srv_openai_gen_job *)ch->job;
	if (job->chat && !job->role_sent[ch->index] && srv_gen_push_role(ch))
		return 1;
	struct srv_gen_span sp = { text, len, job->offset_bytes[ch->index],
				   job->offset_chars[ch->index] };
	json_t *lp = srv_gen_logprobs(job, toks, n_toks, &sp);
	json_t *str = srv__audio_json_str(text, len);
	json_t *c = job->chat ? json_pack("[{s:i,s:{s:o},s:o,s:n}]", "index", ch->index, "delta",
					  "content", str, "logprobs", lp, "finish_reason")
			      : json_pack("[{s:i,s:o,s:o,s:n}]", "index", ch->index, "text", str,
					  "logprobs", lp, "finish_reason");
	job->offset_chars[ch->index] += st_utf8_count(text, len);
	job->offset_bytes[ch->index] += len;
	return srv__gen_push_json(&job->base, srv_gen_chunk(job, c)) ? 1 : 0;
}

static int srv_gen_choice_end(struct srv_gen_choice *ch)
{
	struct srv_openai_gen_job *job = (struct srv_openai_gen_job *)ch->job;
	int i = ch->index;
	const char *fr = srv_gen_finish_str(job->base.res[i]->finish);
	if (job->chat && !job->role_sent[i] && srv_gen_push_role(ch))
		return -ST_CANCELED;
	json_t *c = job->chat ? json_pack("[{s:i,s:{},s:n,s:s}]", "index", i, "delta", "logprobs",
					  "finish_reason", fr)
			      : json_pack("[{s:i,s:s,s:n,s:s}]", "index", i, "text", "", "logprobs",
					  "finish_reason", fr);
	return srv__gen_push_json(&job->base, srv_gen_chunk(job, c));
}

static int srv_gen_stream_end(struct srv_gen_job *base)
{
	struct srv_openai_gen_job *job = (struct srv_openai_gen_job *)base;
	int rc = 0;
	if (job->include_usage) {
		json_t *o = json_pack("{s:s,s:s,s:I,s:s,s:s,s:[],s:o}", "id", job->id, "object",
				      job->chat ? "chat.completion.chunk" : "text_completion",
				      "created", (json_int_t)job->created, "model",
				      eng_model_name(job->base.model), "system_fingerprint",
				      SRV_GEN_FINGERPRINT, "choices", "usage", srv_gen_usage(job));
		rc = srv__gen_push_json(&job->base, o);
	}
	if (!rc)
		rc = srv__stream_push(job->base.st, "data: [DONE]\n\n", 14);
	return rc;
}

/* --- errors ------------------------------------------------------------------- */

void srv__openai_gen_respond_error(struct srv_req *req, const struct srv_gen_err *e)
{
	if (e->status == 503 || e->status == 429)
		srv__req_add_header(req, "Retry-After", "1");
	json_t *obj = srv_gen_error_json(e->status, e->code, e->param, e->msg);
	if (obj)
		srv__req_respond_json(req, e->status, obj);
	else
		srv__req_respond_error(req, e->status, e->code, "%s", e->msg);
}

/* "event: error" with OpenAI's error object, ending a stream. */
static void srv_gen_stream_error(struct srv_gen_job *job, const struct srv_gen_err *e)
{
	json_t *obj = srv_gen_error_json(e->status, e->code, e->param, e->msg);
	char *s = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
	json_decref(obj);
	struct srv_buf b;
	srv_buf_init(&b, SRV_GEN_OUT_MAX);
	if (s && !srv_buf_printf(&b, "event: error\ndata: %s\n\n", s))
		srv__stream_push(job->st, b.data, b.len);
	srv_buf_fini(&b);
	free(s); /* jansson's allocator */
}

const struct srv_gen_render srv__openai_gen_render = {
	.piece = srv_gen_push_piece,
	.choice_end = srv_gen_choice_end,
	.stream_end = srv_gen_stream_end,
	.body = srv_gen_body,
	.respond_error = srv__openai_gen_respond_error,
	.stream_error = srv_gen_stream_error,
};
