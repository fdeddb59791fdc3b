/* srv.h - the HTTP front end: one libuv loop thread that accepts
 * connections, parses HTTP/1.1 with llhttp, routes requests and writes
 * responses. Nothing but I/O runs on the loop thread.
 *
 * Used by cli_main.c: srv_create() once the config and the engine exist,
 * srv_run() until SIGTERM/SIGINT has drained the connections, then
 * srv_destroy().
 */
#ifndef SRV_H
#define SRV_H

#include <stdbool.h>
#include <stddef.h>

struct cfg;
struct eng;
struct srv;

/* srv_create - bind cfg's listen address (or listen_override, "HOST:PORT",
 * when not NULL) and get ready to serve eng's models. cfg and eng are
 * borrowed and must outlive the server. extra_api_key (may be NULL) is
 * accepted besides cfg->api_keys (the INFERD_API_KEY variable).
 * Returns 0 with *out new, or a negative ST_* with err holding one line
 * ("listen 127.0.0.1:80: permission denied"). Main thread only. */
int srv_create(const struct cfg *cfg, struct eng *eng,
	       const char *listen_override, const char *extra_api_key,
	       struct srv **out, char *err, size_t errlen);

/* srv_set_engine - the engine whose models the server serves (borrowed);
 * srv_create may be given NULL so that the address is bound - and a busy
 * port reported - before the models load. Main thread, before srv_run. */
void srv_set_engine(struct srv *srv, struct eng *eng);

/* srv_run - run the loop until a SIGTERM or SIGINT has stopped accepting,
 * in-flight requests have finished (or drain_timeout_ms passed) and every
 * handle is closed. Returns 0, or a negative ST_* on a loop failure. */
int srv_run(struct srv *srv);

/* srv_destroy - free the server after srv_run returned; NULL is a no-op. */
void srv_destroy(struct srv *srv);

/* Where a command-line batch stands (srv_batch_run's progress). */
struct srv_batch_progress {
	const char *status;        /* the batch's: in_progress, completed, ... */
	long long total, done, failed; /* items: all, done, failed */
	long long ended_before;    /* of them, ended before this run (resumed) */
	double audio_s;            /* audio of the done items, seconds */
	double elapsed_s;          /* since this run started */
};

struct srv_batch_run_opts {
	const char *manifest;      /* JSONL of Batch API request lines (one endpoint) */
	const char *out;           /* the results (OpenAI's output file) go here; the error
				    * file, when an item failed, to OUT.errors.jsonl */
	/* progress - every 200 ms from the calling thread, and once more
	 * (last true) when the batch has ended */
	void (*progress)(void *ud, const struct srv_batch_progress *p, bool last);
	void *ud;
};

/* srv_batch_run - run the manifest as one Batch API job on eng, with no
 * listening socket: the store is cfg's batch.store (created if absent),
 * audio lines read from cfg's batch.input_dir. A job of the same
 * manifest (by its SHA-256) already in the store is resumed where it
 * stopped - the command run again after a crash or Ctrl-C goes on - and
 * one already ended only has its results written again. Blocks until
 * the job ends and its results are written. 0, or -ST_* with err (the
 * manifest unreadable or refused, the store, the results' files). */
int srv_batch_run(const struct cfg *cfg, struct eng *eng, const struct srv_batch_run_opts *o,
		  char *err, size_t errlen);

#endif /* SRV_H */
