/* srv_openai_gen.h - OpenAI's text generation routes, POST /v1/completions
 * and POST /v1/chat/completions: their job (the shared generation job,
 * server/job/srv_gen_job.h, with OpenAI's options) and their render table.
 * Internal to server/.
 *
 * The handler (srv_openai_gen.c) parses and validates the JSON body on the
 * loop thread, picks the model, builds the prompt (the chat template for
 * chat) and queues the job's n choices. The render table
 * (srv_openai_gen_out.c) renders OpenAI's response objects, streamed
 * chunks and errors (429 with Retry-After when the model's queue is full,
 * 504 past the request's deadline).
 */
#ifndef SRV_OPENAI_GEN_H
#define SRV_OPENAI_GEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "engine/eng.h"
#include "server/job/srv_gen_job.h"
#include "server/srv_int.h"

#define SRV_GEN_CHAT_MAX_TOKENS 2048     /* chat's default max_tokens ceiling */
#define SRV_GEN_FINGERPRINT "fp_inferd_" INFERD_VERSION

/* One OpenAI generation request: the shared job first, then OpenAI's
 * options and per-choice streaming state. */
struct srv_openai_gen_job {
	struct srv_gen_job base;
	bool chat;                        /* /v1/chat/completions */
	bool include_usage;               /* stream_options.include_usage */
	bool want_logprobs;               /* report logprobs (params.logprobs alternatives) */
	size_t prompt_chars;              /* code points in the prompt (completions text_offset) */
	char id[SRV_REQUEST_ID_MAX + 16]; /* "cmpl-..." / "chatcmpl-..." */
	int64_t created;                  /* Unix seconds */
	struct eng_logit_bias bias[ENG_GEN_MAX_BIAS]; /* logit_bias, params.bias points here */
	/* streaming state per choice, replica thread */
	bool role_sent[SRV_GEN_MAX_N];    /* chat: the first delta (the role) went out */
	size_t offset_chars[SRV_GEN_MAX_N]; /* completions: code points sent (prompt's too) */
	size_t offset_bytes[SRV_GEN_MAX_N]; /* and the completion's bytes sent */
};

/* srv__openai_gen_render - OpenAI's render table (srv_openai_gen_out.c):
 * text_completion / chat.completion bodies, their streamed chunks and
 * "data: [DONE]", errors in OpenAI's shape. */
extern const struct srv_gen_render srv__openai_gen_render;

/* srv__openai_gen_respond_error - answer req with e in OpenAI's shape
 * (Retry-After on 429 and 503). Loop thread. */
void srv__openai_gen_respond_error(struct srv_req *req, const struct srv_gen_err *e);

/* srv__json_error_path - the path of the JSON value being read at byte
 * pos of text (len bytes, need not be NUL-ended), as jansson's
 * json_error_t.position reports a value it refused: a number too large
 * (json_error_numeric_overflow: the byte after the number), a string
 * holding \u0000 (a byte inside it); its error names no key. Scans text
 * [0, pos) for the open objects and arrays and writes their members'
 * keys (unescaped) and elements' indices into out (out_size bytes,
 * NUL-ended): "max_tokens", "messages[0].content[1].text", "stop[1]",
 * "logit_bias.50256". false, out "", when there is no path (the whole
 * text, an object between members), it nests past 32 levels, or it does
 * not fit. Any thread. */
bool srv__json_error_path(const char *text, size_t len, size_t pos, char *out, size_t out_size);

/* Route handlers (srv_openai_gen.c). Loop thread. */
void srv__h_openai_completions(struct srv_req *req);
void srv__h_openai_chat_completions(struct srv_req *req);

#endif /* SRV_OPENAI_GEN_H */
