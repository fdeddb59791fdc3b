/* srv_status.c - the table of srv_status.h: one row per project status. */
#include <assert.h>
#include <stddef.h>

#include "common/st.h"
#include "server/srv_status.h"

#define SRV_STATUS_INTERNAL { 500, SRV_GRPC_INTERNAL, 500, "server_error", 0, NULL }

static const struct srv_status_row srv_status_rows[] = {
	[ST_OK] = { 200, SRV_GRPC_OK, 500, "server_error", 0, NULL },
	[ST_NOMEM] = { 503, SRV_GRPC_UNAVAILABLE, 503, "server_overloaded", 0,
		       "out of memory for this request" },
	[ST_INVAL] = { 400, SRV_GRPC_INVALID_ARGUMENT, 400, "invalid_value", 0, NULL },
	[ST_TOOBIG] = { 413, SRV_GRPC_RESOURCE_EXHAUSTED, 400, "context_length_exceeded",
			SRV_STATUS_PARAM_INPUT, NULL },
	[ST_AGAIN] = { 429, SRV_GRPC_INTERNAL, 500, "server_error", 0, NULL },
	[ST_CANCELED] = { 499, SRV_GRPC_CANCELLED, 500, "server_error", 0, NULL },
	[ST_IO] = SRV_STATUS_INTERNAL,
	[ST_DEVICE] = SRV_STATUS_INTERNAL,
	[ST_NOTFOUND] = { 404, SRV_GRPC_NOT_FOUND, 500, "server_error", 0, NULL },
	[ST_CORRUPT] = SRV_STATUS_INTERNAL,
	[ST_UNSUPPORTED] = { 415, SRV_GRPC_INVALID_ARGUMENT, 400, "unsupported_chat_template",
			     SRV_STATUS_PARAM_MODEL, NULL },
	[ST_BUSY] = { 429, SRV_GRPC_RESOURCE_EXHAUSTED, 429, "rate_limit_exceeded", 0, NULL },
	[ST_TIMEDOUT] = { 504, SRV_GRPC_DEADLINE_EXCEEDED, 504, "timeout", 0, NULL },
	[ST_CLOSED] = { 503, SRV_GRPC_UNAVAILABLE, 503, "server_shutting_down", 0, NULL },
};
static_assert(sizeof(srv_status_rows) / sizeof(srv_status_rows[0]) == ST_COUNT,
	      "srv_status_rows must have one row per enum st value");

const struct srv_status_row *srv__status_row(int st)
{
	static const struct srv_status_row internal = SRV_STATUS_INTERNAL;
	int i = st < 0 ? -st : st;
	return i >= 0 && i < ST_COUNT ? &srv_status_rows[i] : &internal;
}

int srv__status_from_st(int st)
{
	return srv__status_row(st)->http;
}

enum srv_grpc_status srv__status_grpc(int st)
{
	return srv__status_row(st)->grpc;
}

const char *srv__status_openai_type(int http_status)
{
	if (http_status == 401)
		return "authentication_error";
	if (http_status == 404)
		return "not_found_error";
	if (http_status == 429)
		return "rate_limit_error";
	if (http_status == 503)
		return "server_overloaded";
	return http_status >= 500 ? "server_error" : "invalid_request_error";
}

const char *srv__status_reason(int status)
{
	switch (status) {
	case 100: return "Continue";
	case 200: return "OK";
	case 204: return "No Content";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 411: return "Length Required";
	case 413: return "Content Too Large";
	case 414: return "URI Too Long";
	case 415: return "Unsupported Media Type";
	case 417: return "Expectation Failed";
	case 422: return "Unprocessable Content";
	case 426: return "Upgrade Required";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	case 505: return "HTTP Version Not Supported";
	default: return "Unknown";
	}
}

/* A sentence for statuses that parser callbacks choose on their own. */
const char *srv__status_detail(int status)
{
	switch (status) {
	case 400: return "malformed request header";
	case 413: return "the request body is larger than limits.max_body_bytes";
	case 414: return "the request target alone is larger than limits.max_header_bytes";
	case 417: return "unsupported Expect value (only 100-continue is)";
	case 501: return "unsupported Transfer-Encoding (only chunked is)";
	case 505: return "unsupported HTTP version (HTTP/1.0 and HTTP/1.1 are)";
	case 415: return "unsupported Content-Encoding (use identity or zstd)";
	case 431: return "the request line and headers are larger than limits.max_header_bytes";
	case 503: return "the server is out of memory for this request";
	default: return srv__status_reason(status);
	}
}

const char *srv__status_code(int status)
{
	switch (status) {
	case 400: return "invalid_request";
	case 413: return "body_too_large";
	case 414: return "uri_too_long";
	case 415: return "unsupported_content_encoding";
	case 417: return "unsupported_expect";
	case 431: return "headers_too_large";
	case 501: return "unsupported_transfer_encoding";
	case 503: return "out_of_memory";
	case 505: return "unsupported_http_version";
	default: return NULL;
	}
}
