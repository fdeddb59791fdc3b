/* fuzz_grpc.c - libFuzzer target for the gRPC-lite front end: the bytes
 * follow the HTTP/2 client connection preface on one connection
 * (socketpair) and go through nghttp2, the gRPC message framing (gzip
 * included), protobuf-c decoding of the KServe v2 messages and the method
 * handlers, exactly as the daemon serves them; then the client hangs up.
 * The server runs with small limits and no models loaded (ModelInfer
 * reaches its model lookup and answers NOT_FOUND). Seeds
 * (tests/fuzz/corpus/grpc/) are client byte streams of tritonclient.grpc
 * calls, recorded once (see the corpus README). */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/grpc/srv_grpc.h"
#include "server/srv_int.h"
#include "tests/fuzz/fuzz_srv.h"

static const char fuzz_cfg_json[] =
	"{\"access_log\": false,"
	" \"limits\": {\"max_body_bytes\": 4096},"
	" \"models\": [{\"name\": \"m\", \"path\": \"unused\"}]}";

static struct cfg *fuzz_cfg;
static struct eng *fuzz_eng;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_srv_setup("fuzz_grpc", fuzz_cfg_json, sizeof(fuzz_cfg_json) - 1, &fuzz_cfg, &fuzz_eng);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
	struct srv *srv;
	int sv[2];
	uint8_t *buf = malloc(size + sizeof(preface));
	if (!buf || srv__create_unbound(fuzz_cfg, fuzz_eng, NULL, &srv)) {
		free(buf);
		return 0;
	}
	/* seeds recorded from real clients start with the preface already */
	size_t skip = size >= 24 && !memcmp(data, preface, 24) ? 0 : 24;
	memcpy(buf, preface, 24);
	memcpy(buf + 24, data, size);
	const uint8_t *in = buf + (24 - skip);
	size_t n = size + skip;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
		srv_destroy(srv);
		free(buf);
		return 0;
	}
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	srv__grpc_conn_open_fd(srv, sv[0]);
	size_t off = 0;
	for (int spins = 0; spins < 100000 && srv->n_grpc_conns > 0; spins++) {
		if (off < n) {
			ssize_t w = write(sv[1], in + off, n - off);
			if (w > 0)
				off += (size_t)w;
			if (off == n)
				shutdown(sv[1], SHUT_WR);
		}
		uv_run(&srv->loop, UV_RUN_NOWAIT);
		fuzz_drain(sv[1]);
	}
	srv_destroy(srv);
	close(sv[1]);
	free(buf);
	return 0;
}
