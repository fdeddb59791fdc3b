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
	size_t offset_chars[SRV_GEN_MAX_N]; /* completions: text_offset of the next token */
};

/* srv__openai_gen_render - OpenAI's render table (srv_openai_gen_out.c):
 * text_completion / chat.completion bodies, their streamed chunks and
 * "data: [DONE]", errors in OpenAI's shape. */
extern const struct srv_gen_render srv__openai_gen_render;

/* srv__openai_gen_respond_error - answer req with e in OpenAI's shape
 * (Retry-After on 429 and 503). Loop thread. */
void srv__openai_gen_respond_error(struct srv_req *req, const struct srv_gen_err *e);

/* srv__json_number_key - the key of the object member whose value is the
 * number ending at byte pos of text (len bytes, need not be NUL-ended),
 * as jansson's json_error_t.position reports a number it refused
 * (json_error_numeric_overflow: "too big integer", "real number
 * overflow"); its error names no key. Scans back over the number to the
 * `"key":` before it and unescapes that key into out (out_size bytes,
 * NUL-ended; nested members give the innermost key). false, out "",
 * when the number is no member's value (an array element, the whole
 * text), the key does not fit or its copy runs out of memory. Any thread. */
bool srv__json_number_key(const char *text, size_t len, size_t pos, char *out, size_t out_size);

/* Route handlers (srv_openai_gen.c). Loop thread. */
void srv__h_openai_completions(struct srv_req *req);
void srv__h_openai_chat_completions(struct srv_req *req);

#endif /* SRV_OPENAI_GEN_H */
