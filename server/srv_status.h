/* srv_status.h - the one table from a project status (common/st.h) to
 * what each protocol answers with it: the HTTP status of a plain error,
 * the gRPC status code, and the HTTP status, OpenAI error code and faulty
 * field of the text generation routes (OpenAI's; KServe's send only the
 * status and message), which answer 400 where a plain route says 415 and
 * 500 for statuses a generation request cannot cause. Also the
 * gRPC status codes and OpenAI's error "type" of an HTTP status, so that
 * no protocol keeps a mapping of its own. Internal to server/; any thread
 * (the table is constant).
 */
#ifndef SRV_STATUS_H
#define SRV_STATUS_H

/* gRPC status codes (grpc/grpc doc/statuscodes.md). */
enum srv_grpc_status {
	SRV_GRPC_OK = 0,
	SRV_GRPC_CANCELLED = 1,
	SRV_GRPC_UNKNOWN = 2,
	SRV_GRPC_INVALID_ARGUMENT = 3,
	SRV_GRPC_DEADLINE_EXCEEDED = 4,
	SRV_GRPC_NOT_FOUND = 5,
	SRV_GRPC_RESOURCE_EXHAUSTED = 8,
	SRV_GRPC_UNIMPLEMENTED = 12,
	SRV_GRPC_INTERNAL = 13,
	SRV_GRPC_UNAVAILABLE = 14,
};

/* Which request field an OpenAI generation error names as its "param". */
enum srv_status_param {
	SRV_STATUS_PARAM_NONE = 0, /* null */
	SRV_STATUS_PARAM_INPUT,    /* "prompt" (completions) or "messages" (chat) */
	SRV_STATUS_PARAM_MODEL,    /* "model" */
};

/* What one status becomes. */
struct srv_status_row {
	int http;                        /* HTTP status of a plain error response */
	enum srv_grpc_status grpc;       /* gRPC status code */
	int gen_http;                    /* text generation routes: HTTP status */
	const char *gen_code;            /* ... their error code (static) */
	enum srv_status_param gen_param; /* ... the field at fault */
	const char *gen_msg;             /* ... a fixed message, or NULL: the engine's */
};

/* srv__status_row - the row of st (either sign); a status outside the enum
 * gets the row of an internal error (500, INTERNAL). Never NULL. */
const struct srv_status_row *srv__status_row(int st);

/* srv__status_from_st - the HTTP status of st (either sign): 200 for
 * ST_OK, 500 for statuses no request causes. */
int srv__status_from_st(int st);

/* srv__status_grpc - the gRPC status code of st (either sign). */
enum srv_grpc_status srv__status_grpc(int st);

/* srv__status_openai_type - OpenAI's error "type" for an HTTP status
 * ("invalid_request_error", "not_found_error", ...); static, never NULL. */
const char *srv__status_openai_type(int http_status);

/* srv__status_reason - the reason phrase of an HTTP status ("Not Found"),
 * "Unknown" for one we never send; static. */
const char *srv__status_reason(int status);

/* srv__status_detail - a sentence for the statuses the HTTP parser
 * chooses on its own (400, 413, 415, 417, 431, 501, 503, 505), else the
 * reason phrase; static. */
const char *srv__status_detail(int status);

/* srv__status_code - the error code that goes with srv__status_detail's
 * sentence (OpenAI's "code", Deepgram's "err_code"): "body_too_large"
 * for 413, "headers_too_large" for 431, ... as the routes name the same
 * errors; NULL for a status the parser never chooses; static. */
const char *srv__status_code(int status);

#endif /* SRV_STATUS_H */
