/* fuzz_http.c - libFuzzer target for the HTTP request path: the bytes are
 * one client's whole input on a connection (socketpair), parsed by llhttp,
 * checked against the limits, decoded (zstd), routed and answered, exactly
 * as the daemon does; then the client hangs up. The server runs with small
 * limits so that ceilings are reached often, and with no models loaded. */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/srv_int.h"
#include "tests/fuzz/fuzz_srv.h"

static const char fuzz_cfg_json[] =
	"{\"access_log\": false,"
	" \"api_keys\": [\"fuzz-key\"],"
	" \"limits\": {\"max_header_bytes\": 2048, \"max_body_bytes\": 4096,"
	"             \"header_timeout_ms\": 1000, \"body_timeout_ms\": 1000},"
	" \"models\": [{\"name\": \"m\", \"path\": \"unused\"}]}";

static struct cfg *fuzz_cfg;
static struct eng *fuzz_eng;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_srv_setup("fuzz_http", fuzz_cfg_json, sizeof(fuzz_cfg_json) - 1, &fuzz_cfg, &fuzz_eng);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct srv *srv;
	int sv[2];
	if (srv__create_unbound(fuzz_cfg, fuzz_eng, NULL, &srv))
		return 0;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
		srv_destroy(srv);
		return 0;
	}
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	srv__conn_open_fd(srv, sv[0]);
	fuzz_srv_pump(srv, sv[1], data, size);
	return 0;
}
