/* srv_resp.c - building responses: status line and headers, each
 * protocol's error shape, zstd response bodies, and the per-request
 * bookkeeping done when a response is queued (access log, metrics).
 *
 * Error shapes (each protocol's own, so existing clients parse them):
 *   OpenAI   {"error":{"message":M,"type":T,"param":P,"code":C}} (P null
 *            unless the caller names the request field at fault)
 *   KServe   {"error":M}
 *   Deepgram {"err_code":C,"err_msg":M,"request_id":ID}
 */
#include <stdarg.h>
#include <stdio.h>
#include <errno.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <zstd.h>

#include "common/mem.h"
#include "common/st.h"
#include "common/utf8.h"
#include "server/srv_int.h"
#include "server/srv_status.h"

#define SRV_ZSTD_MIN_BYTES 256 /* smaller bodies go out uncompressed */
#define SRV_ZSTD_LEVEL 3

/* The Date header's value, formatted once a second. */
const char *srv__date(struct srv *srv)
{
	time_t now = time(NULL);
	if (now != srv->date_sec) {
		struct tm tm;
		gmtime_r(&now, &tm);
		strftime(srv->date, sizeof(srv->date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
		srv->date_sec = now;
	}
	return srv->date;
}

int srv__req_sched_opts(const struct srv_req *req, struct eng_req_opts *o, char *err,
			size_t errlen)
{
	*o = (struct eng_req_opts){ 0 };
	const char *p = srv__req_header(req, "Inferd-Priority");
	if (p && !strcasecmp(p, "high"))
		o->priority = ENG_PRIORITY_HIGH;
	else if (p && !strcasecmp(p, "batch"))
		o->priority = ENG_PRIORITY_BATCH;
	else if (p && strcasecmp(p, "normal")) {
		snprintf(err, errlen, "Inferd-Priority: expected \"high\", \"normal\" or \"batch\"");
		return -ST_INVAL;
	}
	const char *t = srv__req_header(req, "Inferd-Timeout-Ms");
	if (t) {
		char *end;
		errno = 0;
		long long v = strtoll(t, &end, 10);
		if (!*t || *end || errno || v < 1 || v > 86400000) {
			snprintf(err, errlen, "Inferd-Timeout-Ms: expected milliseconds 1..86400000");
			return -ST_INVAL;
		}
		o->timeout_ms = (int)v;
	}
	return 0;
}

static json_t *srv_error_json(const struct srv_req *req, int status, const char *code,
			      const char *param, const char *msg)
{
	switch (req->proto) {
	case SRV_PROTO_KSERVE:
		return json_pack("{s:s}", "error", msg);
	case SRV_PROTO_DEEPGRAM:
		return json_pack("{s:s,s:s,s:s}", "err_code",
				 code ? code : srv__status_reason(status), "err_msg", msg,
				 "request_id", req->request_id);
	default:
		return json_pack("{s:{s:s,s:s,s:s?,s:s?}}", "error", "message", msg, "type",
				 srv__status_openai_type(status), "param", param, "code", code);
	}
}

/* in (NUL-terminated) into out [cap] with every byte that is not part of
 * a valid UTF-8 character as U+FFFD: a message that echoes what a client
 * sent (a model name, a language) stays text JSON can carry. */
static void srv_msg_utf8(const char *in, char *out, size_t cap)
{
	size_t n = strlen(in), o = 0;
	uint32_t cp;
	for (size_t i = 0; i < n;) {
		size_t k = st_utf8_decode(in + i, n - i, &cp);
		const char *src = k ? in + i : "\xef\xbf\xbd";
		size_t len = k ? k : 3;
		if (o + len >= cap)
			break;
		memcpy(out + o, src, len);
		o += len;
		i += k ? k : 1;
	}
	out[o] = '\0';
}

static int srv_req_respond_verror(struct srv_req *req, int status, const char *code,
				  const char *param, const char *fmt, va_list ap)
{
	char raw[512], msg[3 * sizeof(raw)];
	vsnprintf(raw, sizeof(raw), fmt, ap);
	srv_msg_utf8(raw, msg, sizeof(msg));
	if (!req->request_id[0])
		snprintf(req->request_id, sizeof(req->request_id), "%08x%016llx",
			 (unsigned)req->conn->srv->request_id_salt,
			 (unsigned long long)++req->conn->srv->next_request_id);
	if (req->proto == SRV_PROTO_DEEPGRAM) {
		/* Deepgram names the error in a dg-error header too (the live
		 * API's handshake refusals carry nothing else a browser sees). */
		char line[sizeof(msg)];
		size_t n = strlen(msg);
		for (size_t i = 0; i <= n; i++)
			line[i] = i < n && (unsigned char)msg[i] < 0x20 ? ' ' : msg[i];
		srv__req_add_header(req, "dg-error", line);
	}
	json_t *obj = srv_error_json(req, status, code, param, msg);
	if (!obj)
		return srv__req_respond(req, status, "text/plain", msg, strlen(msg));
	return srv__req_respond_json(req, status, obj);
}

int srv__req_respond_error(struct srv_req *req, int status, const char *code,
			   const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = srv_req_respond_verror(req, status, code, NULL, fmt, ap);
	va_end(ap);
	return rc;
}

int srv__req_respond_error_param(struct srv_req *req, int status, const char *code,
				 const char *param, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = srv_req_respond_verror(req, status, code, param, fmt, ap);
	va_end(ap);
	return rc;
}

int srv__req_respond_json(struct srv_req *req, int status, json_t *obj)
{
	char *text = json_dumps(obj, JSON_COMPACT);
	json_decref(obj);
	if (!text)
		return srv__req_respond(req, 503, "text/plain", "out of memory\n", 14);
	int rc = srv__req_respond(req, status, "application/json", text, strlen(text));
	free(text); /* jansson's allocator */
	return rc;
}

/* Compress body into a new buffer when the client accepts zstd and it is
 * worth it; returns NULL to send the body as it is. */
static char *srv_zstd_body(const struct srv_req *req, const char *body, size_t len,
			   size_t *out_len)
{
	if (!req->accept_zstd || len < SRV_ZSTD_MIN_BYTES)
		return NULL;
	size_t cap = ZSTD_compressBound(len);
	char *z = mem_alloc(cap);
	if (!z)
		return NULL;
	size_t n = ZSTD_compress(z, cap, body, len, SRV_ZSTD_LEVEL);
	if (ZSTD_isError(n) || n >= len) {
		mem_free(z);
		return NULL;
	}
	*out_len = n;
	return z;
}

/* Copy s into out (cap bytes) for a quoted log field: printable ASCII as
 * is, '"', '\\' and every other byte as \xHH (nginx's escaping). */
static void srv_log_escape(const char *s, char *out, size_t cap)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;
	for (; s && *s && o + 5 < cap; s++) {
		unsigned char c = (unsigned char)*s;
		if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
			out[o++] = (char)c;
			continue;
		}
		out[o++] = '\\';
		out[o++] = 'x';
		out[o++] = hex[c >> 4];
		out[o++] = hex[c & 15];
	}
	out[o] = '\0';
}

void srv__req_log(const struct srv_req *req, int status, size_t bytes, double secs)
{
	const struct srv_conn *conn = req->conn;
	char path[1024];
	if (!conn->srv->cfg->access_log)
		return;
	srv_log_escape(req->path, path, sizeof(path));
	fprintf(stderr,
		"access remote=%s method=%s path=\"%s\" status=%d bytes=%zu duration_ms=%.3f request_id=%s\n",
		conn->remote, req->method >= 0 ? llhttp_method_name(req->method) : "-", path,
		status, bytes, secs * 1e3, req->request_id);
}

static int srv_resp_head(struct srv_req *req, struct srv_buf *h, int status,
			 const char *content_type, size_t len, bool zstd, bool close)
{
	struct srv *srv = req->conn->srv;
	int rc = srv_buf_printf(h,
		"HTTP/1.1 %d %s\r\nServer: inferd/" INFERD_VERSION "\r\nDate: %s\r\n"
		"Content-Type: %s\r\nContent-Length: %zu\r\nX-Request-Id: %s\r\n%s%s%s",
		status, srv__status_reason(status), srv__date(srv), content_type, len,
		req->request_id, zstd ? "Content-Encoding: zstd\r\n" : "",
		zstd || len >= SRV_ZSTD_MIN_BYTES ? "Vary: Accept-Encoding\r\n" : "",
		close ? "Connection: close\r\n" : "");
	if (!rc && req->resp_headers.len)
		rc = srv_buf_append(h, req->resp_headers.data, req->resp_headers.len);
	if (!rc)
		rc = srv_buf_append(h, "\r\n", 2);
	return rc;
}

int srv__req_respond(struct srv_req *req, int status, const char *content_type,
		     const char *body, size_t len)
{
	struct srv_conn *conn = req->conn;
	struct srv *srv = conn->srv;
	if (req->responded || conn->state == SRV_CONN_STATE_CLOSING)
		return -ST_INVAL;
	req->responded = true;
	bool close = !req->keep_alive || srv->draining;
	size_t zlen = 0;
	char *zbody = srv_zstd_body(req, body, len, &zlen);
	size_t out_len = zbody ? zlen : len;
	struct srv_buf h;
	srv_buf_init(&h, 16384);
	int rc = srv_resp_head(req, &h, status, content_type, out_len, zbody != NULL, close);
	char *out = zbody;
	if (!rc && !zbody && len && req->method != HTTP_HEAD) {
		out = mem_alloc(len);
		if (out)
			memcpy(out, body, len);
		else
			rc = -ST_NOMEM;
	}
	if (req->method == HTTP_HEAD)
		out_len = 0;
	double secs = (double)(uv_hrtime() - (req->start_ns ? req->start_ns : uv_hrtime())) / 1e9;
	srv_metrics_observe(&srv->metrics, req->route_index, req->method, status, secs);
	srv__req_log(req, status, out_len, secs);
	if (close)
		conn->close_after_write = true;
	size_t head_len = h.len;
	if (rc) {
		srv_buf_fini(&h);
		mem_free(out);
		srv__conn_close(conn);
		return rc;
	}
	rc = srv__conn_write(conn, srv_buf_steal(&h), head_len, out, out_len);
	srv__conn_request_done(conn);
	return rc;
}

void srv__req_log_gone(const struct srv_req *req)
{
	if (req->conn->refused)
		return; /* answered at the drain deadline, counted then */
	/* the client left (nginx's 499), or the drain deadline cut its stream */
	int status = req->conn->cut ? 503 : 499;
	struct srv *srv = req->conn->srv;
	double secs = (double)(uv_hrtime() - (req->start_ns ? req->start_ns : uv_hrtime())) / 1e9;
	srv_metrics_observe(&srv->metrics, req->route_index, req->method, status, secs);
	srv__req_log(req, status, 0, secs);
}
