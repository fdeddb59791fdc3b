/* fuzz_srv.h - what the libFuzzer targets that drive the server over a
 * socketpair share (fuzz_http, fuzz_grpc, fuzz_ws): the set-up from a
 * config text with no models loaded, the client side's drain, and the
 * loop that feeds an input to the server. Included by one target each;
 * static inline, no state of its own. */
#ifndef FUZZ_SRV_H
#define FUZZ_SRV_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/srv_int.h"

/* Load cfg_json (len bytes) into *cfg and create an engine with no models
 * into *eng; SIGPIPE ignored (a target's client hangs up early). Aborts,
 * naming the target, when either fails. */
static inline void fuzz_srv_setup(const char *name, const char *cfg_json, size_t len, struct cfg **cfg,
				  struct eng **eng)
{
	char err[256];
	signal(SIGPIPE, SIG_IGN);
	if (cfg_load_string(cfg_json, len, cfg, err, sizeof(err)) ||
	    eng_create(NULL, 0, eng, err, sizeof(err))) {
		fprintf(stderr, "%s: set-up failed: %s\n", name, err);
		abort();
	}
}

/* Read and drop the server's responses so its writes never block. */
static inline void fuzz_drain(int fd)
{
	char buf[4096];
	while (read(fd, buf, sizeof(buf)) > 0)
		;
}

/* Feed data (size bytes) to the server srv through the client end fd of
 * a socketpair, half-closing it once all is written, and run the loop
 * until the server has no connection left (or 100 000 turns); then destroy
 * srv and close fd. */
static inline void fuzz_srv_pump(struct srv *srv, int fd, const uint8_t *data, size_t size)
{
	size_t off = 0;
	for (int spins = 0; spins < 100000 && srv->n_conns > 0; spins++) {
		if (off < size) {
			ssize_t n = write(fd, data + off, size - off);
			if (n > 0)
				off += (size_t)n;
			if (off == size)
				shutdown(fd, SHUT_WR);
		} else if (size == 0 && spins == 0) {
			shutdown(fd, SHUT_WR);
		}
		uv_run(&srv->loop, UV_RUN_NOWAIT);
		fuzz_drain(fd);
	}
	srv_destroy(srv);
	close(fd);
}

#endif /* FUZZ_SRV_H */
