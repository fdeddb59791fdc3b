/* fuzz_srv.h - what the libFuzzer targets that drive the server over a
 * socketpair share (fuzz_http, fuzz_grpc, fuzz_ws): the set-up from a
 * config text with no models loaded, and the client side's drain. Included
 * by one target each; static, no state of its own. */
#ifndef FUZZ_SRV_H
#define FUZZ_SRV_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "server/srv_int.h"

/* Load cfg_json (len bytes) into *cfg and create an engine with no models
 * into *eng; SIGPIPE ignored (a target's client hangs up early). Aborts,
 * naming the target, when either fails. */
static void fuzz_srv_setup(const char *name, const char *cfg_json, size_t len, struct cfg **cfg,
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
static void fuzz_drain(int fd)
{
	char buf[4096];
	while (read(fd, buf, sizeof(buf)) > 0)
		;
}

#endif /* FUZZ_SRV_H */
