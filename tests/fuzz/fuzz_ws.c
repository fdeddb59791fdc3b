/* fuzz_ws.c - libFuzzer target for the live API's WebSocket: the opening
 * handshake and the framing.
 *
 * Input starting with "GET ": one client's bytes on an HTTP connection (as
 * fuzz_http), so that the handshake's checks (srv_ws.c) and the live query
 * parser (srv_dg_live_query.c) run on hostile requests; no model is
 * loaded, so a request that passes them is refused at the model lookup.
 * Any other input: the bytes a client sends after a 101, on a connection
 * upgraded to a WebSocket whose owner here echoes text messages, closes
 * when one says "close", and hangs up with the client - libwslay's framing
 * (masking, fragments, control frames, the 64 KiB message ceiling used
 * here), our feed/flush glue and the connection's upgraded state. The
 * query parser also gets the input's first line. */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/deepgram/srv_dg_int.h"
#include "server/srv_int.h"
#include "tests/fuzz/fuzz_srv.h"
#include "server/ws/srv_ws.h"

static const char fuzz_cfg_json[] =
	"{\"access_log\": false,"
	" \"limits\": {\"max_header_bytes\": 2048, \"max_body_bytes\": 4096,"
	"             \"header_timeout_ms\": 1000, \"body_timeout_ms\": 1000},"
	" \"models\": [{\"name\": \"m\", \"path\": \"unused\"}]}";

static struct cfg *fuzz_cfg;
static struct eng *fuzz_eng;

/* The upgraded connection's owner. */
struct fuzz_owner {
	struct srv_conn *conn;
	struct srv_ws *ws;
};

static void fuzz_on_text(void *ud, const uint8_t *msg, size_t n)
{
	struct fuzz_owner *o = ud;
	if (n >= 5 && !memcmp(msg, "close", 5))
		srv__ws_close(o->ws, SRV_WS_CLOSE_NORMAL, "bye");
	else
		srv__ws_send_text(o->ws, (const char *)msg, n);
}

static void fuzz_on_binary(void *ud, const uint8_t *msg, size_t n)
{
	(void)ud;
	(void)msg;
	(void)n;
}

static void fuzz_on_end(void *ud, uint16_t code)
{
	(void)ud;
	(void)code;
}

static const struct srv_ws_cbs fuzz_ws_cbs = {
	.on_text = fuzz_on_text, .on_binary = fuzz_on_binary, .on_end = fuzz_on_end,
};

static void fuzz_on_data(void *ud, const char *data, size_t n)
{
	struct fuzz_owner *o = ud;
	srv__ws_feed(o->ws, data, n);
}

static void fuzz_on_eof(void *ud)
{
	struct fuzz_owner *o = ud;
	srv__conn_close(o->conn);
}

static void fuzz_on_timeout(void *ud)
{
	(void)ud;
}

static void fuzz_on_close(void *ud)
{
	struct fuzz_owner *o = ud;
	srv__ws_destroy(o->ws);
	o->ws = NULL;
	srv__conn_work_done(o->conn);
}

static const struct srv_conn_upgrade fuzz_up = {
	.on_data = fuzz_on_data, .on_eof = fuzz_on_eof, .on_timeout = fuzz_on_timeout,
	.on_drain = fuzz_on_timeout, .on_close = fuzz_on_close,
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_srv_setup("fuzz_ws", fuzz_cfg_json, sizeof(fuzz_cfg_json) - 1, &fuzz_cfg, &fuzz_eng);
	return 0;
}


/* The query parser on the first line (NUL-terminated copy). */
static void fuzz_query(const uint8_t *data, size_t size)
{
	size_t n = 0;
	while (n < size && n < 4096 && data[n] != '\n')
		n++;
	char *q = malloc(n + 1);
	if (!q)
		return;
	memcpy(q, data, n);
	q[n] = '\0';
	for (size_t i = 0; i < n; i++)
		q[i] = q[i] ? q[i] : ' ';
	struct srv_dg_live_opts o;
	char err[256];
	srv__dg_live_query_parse(q, &o, err, sizeof(err));
	free(q);
}

/* Hand the connection just opened to a WebSocket owner, as after a 101. */
static int fuzz_upgrade(struct srv *srv, struct fuzz_owner *o)
{
	o->conn = srv->conns;
	if (srv__ws_create(o->conn, 65536, &fuzz_ws_cbs, o, &o->ws))
		return -1;
	o->conn->n_work++; /* released in on_close */
	srv__conn_upgrade(o->conn, &fuzz_up, o);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct srv *srv;
	struct fuzz_owner owner = { 0 };
	int sv[2];
	fuzz_query(data, size);
	if (srv__create_unbound(fuzz_cfg, fuzz_eng, NULL, &srv))
		return 0;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
		srv_destroy(srv);
		return 0;
	}
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	srv__conn_open_fd(srv, sv[0]);
	bool http = size >= 4 && !memcmp(data, "GET ", 4);
	if (!http && fuzz_upgrade(srv, &owner))
		srv__conns_close_all(srv);
	fuzz_srv_pump(srv, sv[1], data, size);
	return 0;
}
