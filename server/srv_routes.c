/* srv_routes.c - the route table and the handlers of the routes that work
 * at this stage: health (KServe v2), model lists (OpenAI, KServe v2) and
 * Prometheus metrics; the audio routes' handlers live in srv_openai_audio.c
 * and srv_deepgram.c, the text generation routes' in
 * srv_openai_gen.c (srv_openai_gen.h), KServe's in srv_kserve.c. A new
 * protocol is a new block of rows here (or its own srv_routes_<proto>.c
 * when it grows). srv.c hands srv__req_route and srv__req_begin_handling to
 * the connection layer (struct srv_conn_cbs).
 *
 * Dispatch: decode the body (zstd on the thread pool, never on the loop
 * thread), match path then method (404 / 405 with Allow), check the API key
 * unless the route is a probe, then call the handler.
 */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <zstd.h>

#include "common/mem.h"
#include "common/st.h"
#include "server/batch/srv_batch.h"
#include "server/deepgram/srv_deepgram.h"
#include "server/demo/srv_demo.h"
#include "server/kserve/srv_kserve.h"
#include "server/openai/srv_openai_audio.h"
#include "server/openai/srv_openai_gen.h"
#include "server/srv_int.h"
#include "server/srv_model_stats.h"

typedef void (*srv_handler_fn)(struct srv_req *req);

struct srv_route {
	const char *pattern;  /* path; one "{name}" segment may stand for a model */
	int method;           /* llhttp method; HEAD is accepted wherever GET is */
	enum srv_proto proto; /* error shape */
	bool public;          /* reachable without an API key (probes, metrics) */
	srv_handler_fn handler;
};

static void srv_h_live(struct srv_req *req);
static void srv_h_ready(struct srv_req *req);
static void srv_h_server_meta(struct srv_req *req);
static void srv_h_openai_models(struct srv_req *req);
static void srv_h_kserve_model(struct srv_req *req);
static void srv_h_kserve_model_ready(struct srv_req *req);
static void srv_h_kserve_config(struct srv_req *req);
static void srv_h_metrics(struct srv_req *req);
static void srv_h_openai_model(struct srv_req *req);
static void srv_h_stats(struct srv_req *req);
static void srv_h_model_stats(struct srv_req *req);

static const struct srv_route srv_routes[] = {
	{ "/v2/health/live", HTTP_GET, SRV_PROTO_KSERVE, true, srv_h_live },
	{ "/v2/health/ready", HTTP_GET, SRV_PROTO_KSERVE, true, srv_h_ready },
	{ "/v2", HTTP_GET, SRV_PROTO_KSERVE, false, srv_h_server_meta },
	{ "/v2/models/stats", HTTP_GET, SRV_PROTO_KSERVE, false, srv_h_stats }, /* before {name} */
	{ "/v2/models/{name}", HTTP_GET, SRV_PROTO_KSERVE, false, srv_h_kserve_model },
	{ "/v2/models/{name}/ready", HTTP_GET, SRV_PROTO_KSERVE, false, srv_h_kserve_model_ready },
	{ "/v2/models/{name}/stats", HTTP_GET, SRV_PROTO_KSERVE, false, srv_h_model_stats },
	{ "/v2/models/{name}/config", HTTP_GET, SRV_PROTO_KSERVE, false, srv_h_kserve_config },
	{ "/v2/models/{name}/versions/1", HTTP_GET, SRV_PROTO_KSERVE, false, srv_h_kserve_model },
	{ "/v2/models/{name}/versions/1/ready", HTTP_GET, SRV_PROTO_KSERVE, false,
	  srv_h_kserve_model_ready },
	{ "/v2/models/{name}/infer", HTTP_POST, SRV_PROTO_KSERVE, false,
	  srv__h_kserve_infer }, /* srv_kserve.c */
	{ "/v2/models/{name}/versions/1/infer", HTTP_POST, SRV_PROTO_KSERVE, false,
	  srv__h_kserve_infer },
	{ "/v2/models/{name}/generate", HTTP_POST, SRV_PROTO_KSERVE, false,
	  srv__h_kserve_generate },
	{ "/v2/models/{name}/generate_stream", HTTP_POST, SRV_PROTO_KSERVE, false,
	  srv__h_kserve_generate_stream },
	{ "/v1/models", HTTP_GET, SRV_PROTO_OPENAI, false, srv_h_openai_models },
	{ "/v1/models/{name}", HTTP_GET, SRV_PROTO_OPENAI, false, srv_h_openai_model },
	{ "/v1/audio/transcriptions", HTTP_POST, SRV_PROTO_OPENAI, false,
	  srv__h_openai_transcriptions }, /* srv_openai_audio.c */
	{ "/v1/audio/translations", HTTP_POST, SRV_PROTO_OPENAI, false,
	  srv__h_openai_translations },
	{ "/v1/completions", HTTP_POST, SRV_PROTO_OPENAI, false,
	  srv__h_openai_completions }, /* srv_openai_gen.c */
	{ "/v1/chat/completions", HTTP_POST, SRV_PROTO_OPENAI, false,
	  srv__h_openai_chat_completions }, /* srv_openai_gen.c */
	{ "/v1/files", HTTP_POST, SRV_PROTO_OPENAI, false, srv__h_files_create }, /* batch/ */
	{ "/v1/files", HTTP_GET, SRV_PROTO_OPENAI, false, srv__h_files_list },
	{ "/v1/files/{name}", HTTP_GET, SRV_PROTO_OPENAI, false, srv__h_file_get },
	{ "/v1/files/{name}", HTTP_DELETE, SRV_PROTO_OPENAI, false, srv__h_file_delete },
	{ "/v1/files/{name}/content", HTTP_GET, SRV_PROTO_OPENAI, false, srv__h_file_content },
	{ "/v1/batches", HTTP_POST, SRV_PROTO_OPENAI, false, srv__h_batches_create },
	{ "/v1/batches", HTTP_GET, SRV_PROTO_OPENAI, false, srv__h_batches_list },
	{ "/v1/batches/{name}", HTTP_GET, SRV_PROTO_OPENAI, false, srv__h_batch_get },
	{ "/v1/batches/{name}/cancel", HTTP_POST, SRV_PROTO_OPENAI, false, srv__h_batch_cancel },
	{ "/v1/listen", HTTP_POST, SRV_PROTO_DEEPGRAM, false, srv__h_deepgram_listen }, /* srv_deepgram.c */
	{ "/v1/listen", HTTP_GET, SRV_PROTO_DEEPGRAM, false, srv__h_deepgram_live }, /* srv_dg_live.c */
	{ "/metrics", HTTP_GET, SRV_PROTO_PLAIN, true, srv_h_metrics },
	{ "/", HTTP_GET, SRV_PROTO_PLAIN, true, srv__h_demo }, /* demo/srv_demo.c */
	{ "/demo", HTTP_GET, SRV_PROTO_PLAIN, true, srv__h_demo },
};
#define SRV_N_ROUTES ((int)(sizeof(srv_routes) / sizeof(srv_routes[0])))
static_assert(SRV_N_ROUTES < SRV_METRICS_MAX_ROUTES, "metrics need a row per route + 1");

/* --- matching ---------------------------------------------------------- */

/* Match path against pattern; the {name} segment is copied to param. */
static bool srv_route_match(const char *pattern, const char *path, char *param, size_t cap)
{
	const char *brace = strstr(pattern, "{name}");
	if (!brace)
		return !strcmp(pattern, path);
	size_t pre = (size_t)(brace - pattern);
	if (strncmp(pattern, path, pre))
		return false;
	const char *seg = path + pre;
	size_t n = strcspn(seg, "/");
	if (n == 0 || n >= cap || strcmp(seg + n, brace + 6))
		return false;
	memcpy(param, seg, n);
	param[n] = '\0';
	return true;
}

int srv__route_count(void)
{
	return SRV_N_ROUTES;
}

static const char *srv_route_name(int i)
{
	return i >= 0 && i < SRV_N_ROUTES ? srv_routes[i].pattern : "unmatched";
}

enum srv_proto srv__proto_for_path(const char *path)
{
	if (!strncmp(path, "/v2/", 4) || !strcmp(path, "/v2"))
		return SRV_PROTO_KSERVE;
	if (!strncmp(path, "/v1/listen", 10))
		return SRV_PROTO_DEEPGRAM;
	return SRV_PROTO_OPENAI;
}

/* Every method the routes matching path accept, as an Allow value. */
static void srv_allow(const char *path, char *out, size_t cap)
{
	char param[128];
	out[0] = '\0';
	for (int i = 0; i < SRV_N_ROUTES; i++) {
		const char *m = llhttp_method_name(srv_routes[i].method);
		if (!srv_route_match(srv_routes[i].pattern, path, param, sizeof(param)) ||
		    strstr(out, m))
			continue;
		snprintf(out + strlen(out), cap - strlen(out), "%s%s%s", out[0] ? ", " : "", m,
			 srv_routes[i].method == HTTP_GET ? ", HEAD" : "");
	}
}

/* --- auth -------------------------------------------------------------- */

/* Compare in time independent of where the strings differ. */
static bool srv_key_equal(const char *a, const char *b)
{
	size_t na = strlen(a), nb = strlen(b);
	unsigned char d = (unsigned char)(na != nb);
	for (size_t i = 0; i < na; i++)
		d |= (unsigned char)(a[i] ^ b[i % (nb ? nb : 1)]);
	return d == 0;
}

/* A browser cannot set Authorization on a WebSocket: Deepgram's live API
 * takes the key as the second subprotocol, "Sec-WebSocket-Protocol:
 * token, KEY" (the handshake echoes "token"). */
static bool srv_req_ws_token_ok(const struct srv_req *req)
{
	const struct srv *srv = req->conn->srv;
	const char *v = srv__req_header(req, "Sec-WebSocket-Protocol");
	if (!v || req->method != HTTP_GET)
		return false;
	v += strspn(v, " \t");
	if (strncasecmp(v, "token", 5))
		return false;
	v += 5;
	v += strspn(v, " \t");
	if (*v != ',')
		return false;
	v++;
	v += strspn(v, " \t");
	char key[512];
	size_t n = strcspn(v, ", \t");
	if (n == 0 || n >= sizeof(key))
		return false;
	memcpy(key, v, n);
	key[n] = '\0';
	bool ok = false;
	for (size_t i = 0; i < srv->n_api_keys; i++)
		ok |= srv_key_equal(key, srv->api_keys[i]);
	return ok;
}

/* Accept "Bearer KEY" (OpenAI, KServe) or "Token KEY" (Deepgram). */
static bool srv_req_is_authorized(const struct srv_req *req)
{
	const struct srv *srv = req->conn->srv;
	if (srv->n_api_keys == 0 || req->route->public || req->conn->internal)
		return true;
	const char *v = srv__req_header(req, "Authorization");
	if (!v)
		return srv_req_ws_token_ok(req);
	if (!strncasecmp(v, "Bearer ", 7) || !strncasecmp(v, "Token ", 6))
		v = strchr(v, ' ') + 1;
	else
		return false;
	v += strspn(v, " ");
	bool ok = false;
	for (size_t i = 0; i < srv->n_api_keys; i++)
		ok |= srv_key_equal(v, srv->api_keys[i]);
	return ok;
}

/* --- dispatch ---------------------------------------------------------- */

/* Record the answer a request gets without reaching its handler. */
static int srv_req_early(struct srv_req *req, int status, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int srv_req_early(struct srv_req *req, int status, const char *code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	st_verrf(0, req->early_msg, sizeof(req->early_msg), NULL, fmt, ap);
	va_end(ap);
	req->early_status = status;
	req->early_code = code;
	return status;
}

/* A KServe path naming a model version other than 1, the only one
 * (/v2/models/NAME/versions/V[/ready|/infer]): 404 saying so, as
 * Triton's "version V is not found" (it said "no route"); true then. */
static bool srv_route_version(struct srv_req *req)
{
	static const char pre[] = "/v2/models/";
	const char *p = req->path, *v;
	if (strncmp(p, pre, sizeof(pre) - 1) || !(v = strstr(p + sizeof(pre) - 1, "/versions/")))
		return false;
	const char *name = p + sizeof(pre) - 1, *ver = v + strlen("/versions/");
	size_t vn = strcspn(ver, "/");
	const char *rest = ver + vn;
	if (v == name || !vn || strchr(name, '/') != v ||
	    (*rest && strcmp(rest, "/ready") && strcmp(rest, "/infer")))
		return false;
	srv_req_early(req, 404, "not_found",
		      "model '%.*s' has no version '%.*s' (its only version is 1)", (int)(v - name),
		      name, (int)vn, ver);
	return true;
}

int srv__req_route(struct srv_req *req)
{
	const struct srv_route *path_hit = NULL;
	const char *method = llhttp_method_name(req->method);
	for (int i = 0; i < SRV_N_ROUTES && !req->route; i++) {
		const struct srv_route *r = &srv_routes[i];
		if (!srv_route_match(r->pattern, req->path, req->path_param, sizeof(req->path_param)))
			continue;
		path_hit = r;
		if (r->method == req->method ||
		    (r->method == HTTP_GET && req->method == HTTP_HEAD)) {
			req->route = r;
			req->route_index = i;
		}
	}
	if (!path_hit && srv_route_version(req))
		return req->early_status;
	if (!path_hit)
		return srv_req_early(req, 404, "not_found", "no route for %s %s", method, req->path);
	if (!req->route) {
		char allow[128];
		srv_allow(req->path, allow, sizeof(allow));
		srv__req_add_header(req, "Allow", allow);
		return srv_req_early(req, 405, "method_not_allowed",
				     "%s does not accept %s (allowed: %s)", req->path, method, allow);
	}
	if (!srv_req_is_authorized(req)) {
		srv__req_add_header(req, "WWW-Authenticate", "Bearer");
		return srv_req_early(req, 401, "invalid_api_key", "missing or invalid API key "
				     "(send Authorization: Bearer KEY, or Token KEY)");
	}
	return 0;
}

void srv__req_dispatch(struct srv_req *req)
{
	if (req->early_status)
		srv__req_respond_error(req, req->early_status, req->early_code, "%s", req->early_msg);
	else
		req->route->handler(req);
}

/* --- zstd request bodies, decoded on the thread pool -------------------- */

struct srv_unzstd {
	uv_work_t work;
	struct srv_conn *conn;
	struct srv_buf out; /* decoded body, same ceiling as the raw body */
	int rc;             /* 0, -ST_INVAL (corrupt), -ST_TOOBIG, -ST_NOMEM */
};

static void srv_unzstd_work(uv_work_t *w)
{
	struct srv_unzstd *u = w->data;
	const struct srv_buf *in = &u->conn->req.body;
	ZSTD_DStream *ds = ZSTD_createDStream();
	if (!ds) {
		u->rc = -ST_NOMEM;
		return;
	}
	ZSTD_inBuffer zin = { in->data, in->len, 0 };
	char chunk[16384];
	size_t ret = 1;
	while (!u->rc && (zin.pos < zin.size || ret != 0)) {
		ZSTD_outBuffer zout = { chunk, sizeof(chunk), 0 };
		size_t before = zin.pos;
		ret = ZSTD_decompressStream(ds, &zout, &zin);
		if (ZSTD_isError(ret) || (zout.pos == 0 && zin.pos == before && ret != 0))
			u->rc = -ST_INVAL; /* corrupt, or truncated with no progress */
		else
			u->rc = srv_buf_append(&u->out, chunk, zout.pos);
	}
	ZSTD_freeDStream(ds);
}

static void srv_unzstd_done(uv_work_t *w, int status)
{
	struct srv_unzstd *u = w->data;
	struct srv_conn *conn = u->conn;
	if (conn->state == SRV_CONN_STATE_HANDLING) {
		struct srv_req *req = &conn->req;
		if (status == 0 && u->rc == 0) {
			srv_buf_fini(&req->body);
			req->body = u->out;
			srv_buf_init(&u->out, 0);
			srv__req_dispatch(req);
		} else if (u->rc == -ST_TOOBIG) {
			srv__req_respond_error(req, 413, "body_too_large",
					       "the decompressed body is larger than limits.max_body_bytes");
		} else {
			srv__req_respond_error(req, 400, "invalid_body",
					       "the body is not valid zstd data (Content-Encoding: zstd)");
		}
	}
	srv_buf_fini(&u->out);
	mem_free(u);
	srv__conn_work_done(conn);
}

void srv__req_begin_handling(struct srv_req *req)
{
	struct srv_conn *conn = req->conn;
	if (req->coding != SRV_CODING_ZSTD || req->body.len == 0) {
		srv__req_dispatch(req);
		return;
	}
	struct srv_unzstd *u = mem_calloc(1, sizeof(*u));
	if (!u) {
		srv__req_respond_error(req, 503, "out_of_memory", "out of memory");
		return;
	}
	u->conn = conn;
	u->work.data = u;
	srv_buf_init(&u->out, (size_t)conn->srv->cfg->max_body_bytes);
	if (uv_queue_work(&conn->srv->loop, &u->work, srv_unzstd_work, srv_unzstd_done)) {
		mem_free(u);
		srv__req_respond_error(req, 503, "server_error", "could not queue the body decoder");
		return;
	}
	conn->n_work++;
}

/* --- handlers ---------------------------------------------------------- */

static void srv_h_live(struct srv_req *req)
{
	srv__req_respond_json(req, 200, json_pack("{s:b}", "live", 1));
}

static void srv_h_ready(struct srv_req *req)
{
	struct srv *srv = req->conn->srv;
	bool ready = eng_is_ready(srv->eng) && !srv->draining;
	srv__req_respond_json(req, ready ? 200 : 503, json_pack("{s:b}", "ready", ready));
}

static void srv_h_server_meta(struct srv_req *req)
{
	srv__req_respond_json(req, 200, json_pack("{s:s,s:s,s:[sss]}", "name", "inferd",
						  "version", INFERD_VERSION, "extensions",
						  "binary_tensor_data", "statistics", "generate"));
}

/* OpenAI's model object. */
static json_t *srv_openai_model_json(const struct eng_model *m)
{
	return json_pack("{s:s,s:s,s:I,s:s}", "id", eng_model_name(m), "object", "model",
			 "created", (json_int_t)eng_model_created(m), "owned_by", "inferd");
}

static void srv_h_openai_models(struct srv_req *req)
{
	const struct eng *eng = req->conn->srv->eng;
	json_t *data = json_array();
	for (size_t i = 0; data && i < eng_model_count(eng); i++)
		json_array_append_new(data, srv_openai_model_json(eng_model_at(eng, i)));
	srv__req_respond_json(req, 200, json_pack("{s:s,s:o}", "object", "list", "data", data));
}

/* GET /v1/models/{name}: the model object, or 404 in OpenAI's shape. */
static void srv_h_openai_model(struct srv_req *req)
{
	const struct eng_model *m = eng_model_find(req->conn->srv->eng, req->path_param);
	if (m)
		srv__req_respond_json(req, 200, srv_openai_model_json(m));
	else
		srv__req_respond_error(req, 404, "model_not_found",
				       "The model '%s' does not exist", req->path_param);
}

/* KServe v2 tensor metadata of m (srv__ks_tensors): name, datatype,
 * shape; key names the datatype field ("datatype" in metadata,
 * "data_type" in Triton's config, whose value is then TYPE_STRING). */
static json_t *srv_kserve_io(const struct eng_model *m, bool input, bool config)
{
	const struct srv_ks_tensors *t = srv__ks_tensors(m);
	json_t *a = json_array();
	int n = input ? 1 : t->n_outputs;
	for (int i = 0; a && i < n; i++)
		json_array_append_new(a, json_pack("{s:s,s:s,s:[i]}", "name",
						   input ? t->input : t->outputs[i],
						   config ? "data_type" : "datatype",
						   config ? "TYPE_STRING" : "BYTES",
						   config ? "dims" : "shape", 1));
	return a;
}

static const struct eng_model *srv_req_model(struct srv_req *req)
{
	const struct eng_model *m = eng_model_find(req->conn->srv->eng, req->path_param);
	if (!m)
		srv__req_respond_error(req, 404, "model_not_found", "unknown model '%s'",
				       req->path_param);
	return m;
}

static void srv_h_kserve_model(struct srv_req *req)
{
	const struct eng_model *m = srv_req_model(req);
	if (!m)
		return;
	char platform[96];
	srv__ks_platform(m, platform, sizeof(platform));
	srv__req_respond_json(req, 200, json_pack("{s:s,s:[s],s:s,s:o,s:o}", "name",
		eng_model_name(m), "versions", "1", "platform", platform,
		"inputs", srv_kserve_io(m, true, false), "outputs", srv_kserve_io(m, false, false)));
}

/* Triton's model configuration (GET /v2/models/{name}/config), the part
 * clients read: max_batch_size 0 (no batch dimension in the tensors; the
 * scheduler batches requests), the tensors as TYPE_STRING [1], and for a
 * transcription model the compute type it runs in among Triton's
 * backend "parameters" ({"compute_type": {"string_value": "int8"}}). */
static void srv_h_kserve_config(struct srv_req *req)
{
	const struct eng_model *m = srv_req_model(req);
	if (!m)
		return;
	char platform[96];
	srv__ks_platform(m, platform, sizeof(platform));
	json_t *cfg = json_pack("{s:s,s:s,s:s,s:i,s:o,s:o}", "name", eng_model_name(m), "platform",
				platform, "backend", "inferd", "max_batch_size", 0, "input",
				srv_kserve_io(m, true, true), "output", srv_kserve_io(m, false, true));
	const char *ct = eng_model_compute_type(m);
	if (cfg && ct)
		json_object_set_new(cfg, "parameters", json_pack("{s:{s:s}}", "compute_type",
								 "string_value", ct));
	srv__req_respond_json(req, 200, cfg);
}

static void srv_h_kserve_model_ready(struct srv_req *req)
{
	const struct eng_model *m = srv_req_model(req);
	if (!m)
		return;
	bool ready = eng_model_is_ready(m);
	srv__req_respond_json(req, ready ? 200 : 503, json_pack("{s:s,s:b}", "name",
		eng_model_name(m), "ready", ready));
}

static int srv_metrics_models(const struct srv *srv, struct srv_buf *out)
{
	int rc = srv_buf_printf(out,
		"# HELP inferd_model_ready 1 when the model is loaded and serving.\n"
		"# TYPE inferd_model_ready gauge\n");
	for (size_t i = 0; !rc && i < eng_model_count(srv->eng); i++) {
		const struct eng_model *m = eng_model_at(srv->eng, i);
		rc = srv_buf_printf(out, "inferd_model_ready{model=\"%s\",task=\"%s\"} %d\n",
				    eng_model_name(m), eng_task_str(eng_model_task(m)),
				    eng_model_is_ready(m) ? 1 : 0);
	}
	return rc;
}

static void srv_h_metrics(struct srv_req *req)
{
	const struct srv *srv = req->conn->srv;
	struct srv_buf out;
	srv_buf_init(&out, 4u << 20);
	int rc = srv_metrics_render(&srv->metrics, &out, srv_route_name, SRV_N_ROUTES + 1);
	if (!rc)
		rc = srv_metrics_models(srv, &out);
	if (!rc)
		rc = srv__batch_metrics(srv, &out);
	if (!rc)
		rc = srv__model_stats_prometheus(srv->eng, &out);
	if (rc)
		srv__req_respond_error(req, 503, "server_error", "could not render metrics");
	else
		srv__req_respond(req, 200, "text/plain; version=0.0.4; charset=utf-8", out.data,
				 out.len);
	srv_buf_fini(&out);
}

static void srv_stats_respond(struct srv_req *req, const struct eng_model *only)
{
	json_t *o = srv__model_stats_json(req->conn->srv->eng, only);
	if (o)
		srv__req_respond_json(req, 200, o);
	else
		srv__req_respond_error(req, 503, "server_error", "could not render the statistics");
}

static void srv_h_stats(struct srv_req *req)
{
	srv_stats_respond(req, NULL);
}

static void srv_h_model_stats(struct srv_req *req)
{
	const struct eng_model *m = srv_req_model(req);
	if (m)
		srv_stats_respond(req, m);
}
