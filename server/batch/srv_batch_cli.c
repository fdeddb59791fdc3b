/* srv_batch_cli.c - a Batch API job run from the command line
 * (srv_batch_run, `inferd batch run`): the server without a listening
 * socket, its loop on a thread of its own, the batch service running the
 * manifest's job, and the calling thread watching the job in the store
 * and writing its results when it ends.
 *
 * Resuming: the job is found again by its manifest's SHA-256, kept in the
 * batch's metadata ("inferd_manifest_sha256"); the service resumes it at
 * its start, as it resumes every open batch.
 */
#include <errno.h>
#include <jansson.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/mem.h"
#include "common/st.h"
#include "server/batch/srv_batch_int.h"

#define BC_POLL_MS 200

/* The file at path, *out new (mem_free), at most max bytes. */
static int bc_read(const char *path, int64_t max, char **out, size_t *len, char *err,
		   size_t errlen)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return st_errf(-ST_IO, err, errlen, "%s: %s", path, strerror(errno));
	struct srv_buf b;
	srv_buf_init(&b, (size_t)max);
	char chunk[65536];
	size_t n;
	int rc = 0;
	while (!rc && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		rc = srv_buf_append(&b, chunk, n);
	if (!rc && ferror(f))
		rc = -ST_IO;
	fclose(f);
	if (rc) {
		srv_buf_fini(&b);
		return st_errf(rc, err, errlen, "%s: %s", path,
			       rc == -ST_TOOBIG ? "larger than batch.max_file_bytes" : st_str(rc));
	}
	*len = b.len;
	*out = b.len ? srv_buf_steal(&b) : mem_strdup("");
	srv_buf_fini(&b);
	return *out ? 0 : st_errf(-ST_NOMEM, err, errlen, "out of memory");
}

/* The endpoint of the manifest: its first line's "url". */
static int bc_endpoint(const char *data, size_t len, char *out, size_t cap, char *err,
		       size_t errlen)
{
	for (size_t at = 0; at < len;) {
		const char *nl = memchr(data + at, '\n', len - at);
		size_t end = nl ? (size_t)(nl - data) : len;
		json_t *o = json_loadb(data + at, end - at, 0, NULL);
		json_t *url = json_object_get(o, "url");
		bool found = json_is_string(url);
		if (found)
			snprintf(out, cap, "%s", json_string_value(url));
		json_decref(o);
		if (found)
			return 0;
		at = end + 1;
	}
	return st_errf(-ST_INVAL, err, errlen,
		       "the manifest has no line with a \"url\" (JSONL of {\"custom_id\", "
		       "\"method\", \"url\", \"body\"})");
}

/* The job of manifest sha (hex) in store s into *b: 0, -ST_NOTFOUND. */
static int bc_find(struct srv_bstore *s, const char *sha, struct srv_batch *b)
{
	char want[96], after[SRV_BSTORE_ID_MAX] = "";
	snprintf(want, sizeof(want), "\"inferd_manifest_sha256\":\"%s\"", sha);
	bool more = true;
	size_t n;
	while (more) {
		int rc = srv__bstore_batch_list(s, after, false, b, 1, &n, &more);
		if (rc || !n)
			return rc ? rc : -ST_NOTFOUND;
		if (strstr(b->metadata, want))
			return 0;
		memcpy(after, b->id, sizeof(after));
	}
	return -ST_NOTFOUND;
}

/* Find the job of manifest (its bytes data [len]; b->endpoint read) in
 * s, or make it: *b. */
static int bc_job(const struct cfg *cfg, struct srv_bstore *s, const char *manifest,
		  const char *data, size_t len, struct srv_batch *b, char *err, size_t errlen)
{
	char endpoint[sizeof(b->endpoint)];
	memcpy(endpoint, b->endpoint, sizeof(endpoint));
	int rc;
	struct sha256_ctx h;
	uint8_t dig[SHA256_DIGEST_SIZE];
	sha256_init(&h);
	sha256_update(&h, len, (const uint8_t *)data);
	sha256_digest(&h, sizeof(dig), dig);
	char sha[2 * SHA256_DIGEST_SIZE + 1];
	for (int i = 0; i < SHA256_DIGEST_SIZE; i++)
		snprintf(sha + 2 * i, 3, "%02x", dig[i]);
	rc = bc_find(s, sha, b);
	if (rc != -ST_NOTFOUND)
		return rc ? st_errf(rc, err, errlen, "batch store: %s", st_str(rc)) : 0;
	memset(b, 0, sizeof(*b));
	memcpy(b->endpoint, endpoint, sizeof(endpoint));
	int64_t now = srv__batch_now();
	struct srv_bfile f = { .created_at = now, .expires_at = now + cfg->batch_file_ttl_s };
	snprintf(f.purpose, sizeof(f.purpose), "batch");
	const char *base = strrchr(manifest, '/');
	snprintf(f.filename, sizeof(f.filename), "%s", base ? base + 1 : manifest);
	rc = srv__bstore_file_put(s, &f, data, len, err, errlen);
	if (rc)
		return rc;
	memcpy(b->input_file_id, f.id, sizeof(b->input_file_id));
	/* a job on the command line has a year, not the API's 24 hours */
	snprintf(b->completion_window, sizeof(b->completion_window), "8760h");
	snprintf(b->metadata, sizeof(b->metadata), "{\"inferd_manifest_sha256\":\"%s\"}", sha);
	b->created_at = now;
	b->expires_at = now + 8760 * 3600;
	return srv__bstore_batch_create(s, b, (size_t)cfg->batch_max_lines, err, errlen);
}

/* Write the output (errors false) or error file of batch id to path
 * (through path.tmp and a rename); an empty error file is not written. */
static int bc_write(struct srv_bstore *s, const char *id, bool errors, const char *path,
		    char *err, size_t errlen)
{
	char *text = NULL;
	size_t len = 0;
	int rc = srv__bstore_results(s, id, errors, &text, &len);
	if (rc)
		return st_errf(rc, err, errlen, "batch %s: its results: %s", id, st_str(rc));
	char tmp[PATH_MAX];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = errors && !len ? NULL : fopen(tmp, "wb");
	if (errors && !len)
		remove(path); /* a stale one of an earlier run */
	else if (!f || fwrite(text, 1, len, f) != len || fclose(f) || rename(tmp, path))
		rc = st_errf(-ST_IO, err, errlen, "%s: %s", path, strerror(errno));
	mem_free(text);
	return rc;
}

struct bc_stop {
	struct srv_post post; /* first: the post is the struct */
	struct srv *srv;
};

static void bc_stop_cb(struct srv_post *p)
{
	srv__drain(((struct bc_stop *)p)->srv);
}

static void *bc_loop(void *arg)
{
	struct srv *srv = arg;
	uv_run(&srv->loop, UV_RUN_DEFAULT);
	return NULL;
}

static bool bc_ended(const char *status)
{
	return !strcmp(status, "completed") || !strcmp(status, "cancelled") ||
	       !strcmp(status, "expired") || !strcmp(status, "failed");
}

/* Watch batch b in s until it ends, reporting progress. */
static int bc_watch(struct srv_bstore *s, struct srv_batch *b,
		    const struct srv_batch_run_opts *o)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	long long before = b->done + b->failed;
	for (;;) {
		int rc = srv__bstore_batch_get(s, b->id, b);
		if (rc)
			return rc;
		clock_gettime(CLOCK_MONOTONIC, &t);
		struct srv_batch_progress p = {
			.status = b->status, .total = b->total, .done = b->done,
			.failed = b->failed, .ended_before = before, .audio_s = b->audio_s,
			.elapsed_s = (double)(t.tv_sec - t0.tv_sec) +
				     (double)(t.tv_nsec - t0.tv_nsec) / 1e9,
		};
		bool last = bc_ended(b->status);
		if (o->progress)
			o->progress(o->ud, &p, last);
		if (last)
			return 0;
		struct timespec nap = { 0, BC_POLL_MS * 1000000L };
		nanosleep(&nap, NULL);
	}
}

int srv_batch_run(const struct cfg *cfg, struct eng *eng, const struct srv_batch_run_opts *o,
		  char *err, size_t errlen)
{
	struct srv_bstore *s = NULL;
	struct srv *srv = NULL;
	struct srv_batch *b = mem_calloc(1, sizeof(*b));
	bool looping = false;
	pthread_t th;
	struct bc_stop stop;
	char *data = NULL;
	size_t len = 0;
	struct stat sb;
	int rc = b ? 0 : st_errf(-ST_NOMEM, err, errlen, "out of memory");
	if (!rc && !stat(o->out, &sb) && S_ISDIR(sb.st_mode))
		rc = st_errf(-ST_INVAL, err, errlen, "--out %s is a folder; name a file", o->out);
	/* the manifest is read and checked before the store is made */
	if (!rc)
		rc = bc_read(o->manifest, cfg->batch_max_file_bytes, &data, &len, err, errlen);
	if (!rc)
		rc = bc_endpoint(data, len, b->endpoint, sizeof(b->endpoint), err, errlen);
	if (!rc)
		rc = srv__bstore_open(cfg->batch_store, &s, err, errlen);
	if (!rc)
		rc = bc_job(cfg, s, o->manifest, data, len, b, err, errlen);
	mem_free(data);
	if (!rc && !bc_ended(b->status)) {
		rc = srv__create_unbound(cfg, eng, NULL, &srv);
		if (rc)
			st_errf(rc, err, errlen, "cannot create the server: %s", st_str(rc));
		if (!rc)
			rc = srv__batch_start(srv, err, errlen);
		if (!rc && pthread_create(&th, NULL, bc_loop, srv))
			rc = st_errf(-ST_IO, err, errlen, "cannot start the loop thread");
		looping = !rc;
	}
	if (!rc)
		rc = bc_watch(s, b, o);
	if (looping) {
		stop.srv = srv;
		srv__post(srv, &stop.post, bc_stop_cb);
		pthread_join(th, NULL);
	}
	srv_destroy(srv);
	char errs[PATH_MAX];
	snprintf(errs, sizeof(errs), "%s.errors.jsonl", o->out);
	if (!rc)
		rc = bc_write(s, b->id, false, o->out, err, errlen);
	if (!rc)
		rc = bc_write(s, b->id, true, errs, err, errlen);
	srv__bstore_close(s);
	mem_free(b);
	return rc;
}
