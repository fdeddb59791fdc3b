/* srv_batch_run.c - the Batch API's runners (srv_batch.h): each takes
 * the next item of the oldest open batch, sends it to its endpoint as an
 * HTTP/1.1 request over its own socketpair connection to this server
 * (keep-alive, "Inferd-Priority: batch"), reads the answer with llhttp,
 * and ends the item in the store with it.
 *
 * Outcomes of one item:
 *   - an answer other than 429 and 503: the item ends with it (2xx: done,
 *     in the output file; else failed, in the error file, with the
 *     response as OpenAI's error file carries it);
 *   - 429 or 503 (a full queue, a server starting or stopping), or the
 *     connection lost: the item stays pending and is tried again after a
 *     pause, or at the next start when the server is stopping;
 *   - a line that cannot be sent (a streamed request, an audio file
 *     outside batch.input_dir or unreadable): the item fails with the
 *     reason, no request made.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <llhttp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/container_of.h"
#include "common/mem.h"
#include "common/st.h"
#include "server/batch/srv_batch_int.h"

#define BR_RETRY_MS 200               /* pause after a 429 / 503 / lost connection */
#define BR_MAX_RESPONSE (256u << 20)  /* the largest answer read */

enum br_outcome {
	BR_ENDED = 0, /* the item has its result in the store */
	BR_RETRY,     /* still pending: try again after a pause */
	BR_STOP,      /* still pending: the server is stopping */
};

/* --- the connection ------------------------------------------------------ */

void srv__brunner_connect(struct srv_post *p)
{
	struct srv_brunner *r = container_of(p, struct srv_brunner, post);
	struct srv_batchd *d = r->d;
	int sv[2] = { -1, -1 };
	if (!d->srv->draining && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0 &&
	    srv__conn_open_internal(d->srv, sv[0])) {
		close(sv[1]); /* sv[0] closed by srv__conn_open_internal */
		sv[1] = -1;
	}
	pthread_mutex_lock(&d->mu);
	r->handed_fd = sv[1];
	r->asked = false;
	pthread_cond_broadcast(&d->work_cv);
	pthread_mutex_unlock(&d->mu);
}

/* Make sure r has a connection: ask the loop thread for one and wait.
 * Under d->mu. false when the server is stopping or none could be made. */
static bool br_connect(struct srv_brunner *r)
{
	struct srv_batchd *d = r->d;
	if (r->fd >= 0)
		return true;
	if (d->stopping)
		return false;
	if (!r->asked && r->handed_fd < 0) {
		r->asked = true;
		srv__post(d->srv, &r->post, srv__brunner_connect);
	}
	while (r->asked && !d->quit)
		pthread_cond_wait(&d->work_cv, &d->mu);
	r->fd = r->handed_fd;
	r->handed_fd = -1;
	return r->fd >= 0;
}

static void br_disconnect(struct srv_brunner *r)
{
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
}

static int br_send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -ST_IO;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* The answer being read. */
struct br_resp {
	struct srv_buf body;
	bool complete;
	char field[32];   /* the header name being read (cut) */
	size_t field_len;
	bool in_value;    /* its value follows */
	char secs[32];    /* Inferd-Audio-Seconds' value (cut), or "" */
	size_t secs_len;
	bool in_secs;
};

/* Append at [n] to the string buf [cap] of *len bytes, cut to fit. */
static void br_append_cut(char *buf, size_t cap, size_t *len, const char *at, size_t n)
{
	size_t k = n < cap - 1 - *len ? n : cap - 1 - *len;
	memcpy(buf + *len, at, k);
	*len += k;
	buf[*len] = '\0';
}

/* Header callbacks: keep Inferd-Audio-Seconds (the exact audio length
 * the audio routes report beside their usage's whole seconds). */
static int br_on_field(llhttp_t *p, const char *at, size_t n)
{
	struct br_resp *rs = p->data;
	if (rs->in_value)
		rs->field_len = 0;
	rs->in_value = false;
	br_append_cut(rs->field, sizeof(rs->field), &rs->field_len, at, n);
	return 0;
}

static int br_on_value(llhttp_t *p, const char *at, size_t n)
{
	struct br_resp *rs = p->data;
	if (!rs->in_value)
		rs->in_secs = !strcasecmp(rs->field, "Inferd-Audio-Seconds");
	rs->in_value = true;
	if (rs->in_secs)
		br_append_cut(rs->secs, sizeof(rs->secs), &rs->secs_len, at, n);
	return 0;
}

static int br_on_body(llhttp_t *p, const char *at, size_t n)
{
	struct br_resp *rs = p->data;
	return srv_buf_append(&rs->body, at, n) ? -1 : 0;
}

static int br_on_complete(llhttp_t *p)
{
	struct br_resp *rs = p->data;
	rs->complete = true;
	return HPE_PAUSED;
}

/* One exchange on r's connection: the request head and body out, the
 * answer's status, body (*out new, mem_free) and Inferd-Audio-Seconds
 * (*audio_s, -1 when absent) in. -ST_IO when the connection failed (it
 * is then closed). */
static int br_exchange(struct srv_brunner *r, const char *path, const char *content_type,
		       const char *body, size_t len, int *status, char **out, size_t *out_len,
		       double *audio_s)
{
	char head[512];
	int hn = snprintf(head, sizeof(head),
			  "POST %s HTTP/1.1\r\nHost: inferd-batch\r\nContent-Type: %s\r\n"
			  "Content-Length: %zu\r\nInferd-Priority: batch\r\n\r\n",
			  path, content_type, len);
	if (br_send_all(r->fd, head, (size_t)hn) || br_send_all(r->fd, body, len)) {
		br_disconnect(r);
		return -ST_IO;
	}
	llhttp_settings_t st;
	llhttp_settings_init(&st);
	st.on_body = br_on_body;
	st.on_message_complete = br_on_complete;
	st.on_header_field = br_on_field;
	st.on_header_value = br_on_value;
	llhttp_t p;
	llhttp_init(&p, HTTP_RESPONSE, &st);
	struct br_resp rs = { .complete = false };
	*audio_s = -1;
	srv_buf_init(&rs.body, BR_MAX_RESPONSE);
	p.data = &rs;
	char buf[65536];
	int rc = 0;
	while (!rs.complete) {
		ssize_t k = recv(r->fd, buf, sizeof(buf), 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			rc = -ST_IO;
			break;
		}
		llhttp_errno_t e = llhttp_execute(&p, buf, (size_t)k);
		if (e != HPE_OK && e != HPE_PAUSED) {
			rc = -ST_IO;
			break;
		}
	}
	/* a request is answered only after its body is whole, and one at a
	 * time: nothing follows the answer on the connection */
	if (rc || !llhttp_should_keep_alive(&p))
		br_disconnect(r);
	if (!rc) {
		char *end;
		double a = strtod(rs.secs, &end);
		if (rs.secs[0] && !*end && a >= 0 && a < 1e9)
			*audio_s = a;
		*status = p.status_code;
		*out_len = rs.body.len;
		*out = rs.body.len ? srv_buf_steal(&rs.body) : mem_strdup("");
		rc = *out ? 0 : -ST_NOMEM;
	}
	srv_buf_fini(&rs.body);
	return rc;
}

/* --- audio lines --------------------------------------------------------- */

/* The bytes of file name inside batch.input_dir, *out new (mem_free).
 * Refuses a path that resolves outside it. err says why. */
static int br_read_input(const struct cfg *cfg, const char *name, char **out, size_t *len,
			 char *err, size_t errlen)
{
	*out = NULL;
	char dir[PATH_MAX], want[PATH_MAX], real[PATH_MAX];
	if (!cfg->batch_input_dir)
		return st_errf(-ST_INVAL, err, errlen,
			       "audio batches need batch.input_dir in the server's config");
	if (!realpath(cfg->batch_input_dir, dir))
		return st_errf(-ST_IO, err, errlen, "batch.input_dir %s: %s", cfg->batch_input_dir,
			       strerror(errno));
	int n = snprintf(want, sizeof(want), "%s/%s", dir, name);
	if (n < 0 || (size_t)n >= sizeof(want) || !realpath(want, real))
		return st_errf(-ST_NOTFOUND, err, errlen, "file %s: %s", name,
			       n < 0 || (size_t)n >= sizeof(want) ? "name too long" : strerror(errno));
	size_t dl = strlen(dir);
	if (strncmp(real, dir, dl) || real[dl] != '/')
		return st_errf(-ST_INVAL, err, errlen, "file %s is outside batch.input_dir", name);
	int fd = open(real, O_RDONLY | O_CLOEXEC);
	struct stat sb;
	int rc = 0;
	if (fd < 0 || fstat(fd, &sb))
		rc = st_errf(-ST_IO, err, errlen, "file %s: %s", name, strerror(errno));
	else if (!S_ISREG(sb.st_mode))
		rc = st_errf(-ST_INVAL, err, errlen, "file %s is not a regular file", name);
	else if (sb.st_size > cfg->max_body_bytes)
		rc = st_errf(-ST_TOOBIG, err, errlen, "file %s is larger than limits.max_body_bytes",
			     name);
	char *p = rc ? NULL : mem_alloc((size_t)sb.st_size + 1);
	if (!rc && !p)
		rc = st_errf(-ST_NOMEM, err, errlen, "out of memory");
	size_t got = 0;
	while (!rc && got < (size_t)sb.st_size) {
		ssize_t k = read(fd, p + got, (size_t)sb.st_size - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			rc = st_errf(-ST_IO, err, errlen, "file %s: read failed", name);
		else
			got += (size_t)k;
	}
	if (fd >= 0)
		close(fd);
	if (rc) {
		mem_free(p);
		return rc;
	}
	*out = p;
	*len = got;
	return 0;
}

/* One form field name=value of a multipart body. */
static int br_field(struct srv_buf *b, const char *bnd, const char *name, const char *value)
{
	return srv_buf_printf(b, "--%s\r\nContent-Disposition: form-data; name=\"%s\"\r\n\r\n%s\r\n",
			      bnd, name, value);
}

/* A JSON scalar as a form value (strings as they are). */
static char *br_scalar(json_t *v)
{
	if (json_is_string(v))
		return mem_strdup(json_string_value(v));
	char *t = json_is_object(v) || json_is_array(v) ? NULL : json_dumps(v, JSON_ENCODE_ANY);
	char *c = t ? mem_strdup(t) : NULL;
	free(t); /* jansson's allocator */
	return c;
}

/* The multipart/form-data request of an audio line's body o: its "file"
 * (a name in batch.input_dir) as the file part, every other key a field
 * (an array as repeated "key[]" fields, as OpenAI's clients send
 * timestamp_granularities). *out new (mem_free). */
static int br_audio_form(const struct cfg *cfg, json_t *o, const char *bnd, char **out,
			 size_t *len, char *err, size_t errlen)
{
	json_t *file = json_object_get(o, "file");
	if (!json_is_string(file))
		return st_errf(-ST_INVAL, err, errlen,
			       "an audio line's body needs \"file\": the name of an audio file in "
			       "batch.input_dir");
	char *audio = NULL;
	size_t alen = 0;
	int rc = br_read_input(cfg, json_string_value(file), &audio, &alen, err, errlen);
	if (rc)
		return rc;
	struct srv_buf b;
	srv_buf_init(&b, SIZE_MAX);
	const char *key;
	json_t *v;
	json_object_foreach(o, key, v) {
		if (rc || !strcmp(key, "file"))
			continue;
		if (strpbrk(key, "\"\r\n")) {
			rc = st_errf(-ST_INVAL, err, errlen, "field name %s is not allowed", key);
			continue;
		}
		size_t n = json_is_array(v) ? json_array_size(v) : 1;
		for (size_t i = 0; !rc && i < n; i++) {
			char name[160];
			snprintf(name, sizeof(name), json_is_array(v) ? "%s[]" : "%s", key);
			char *s = br_scalar(json_is_array(v) ? json_array_get(v, i) : v);
			if (!s)
				rc = st_errf(-ST_INVAL, err, errlen,
					     "field %s: expected a string, number, boolean or an "
					     "array of them", key);
			else if (br_field(&b, bnd, name, s))
				rc = st_errf(-ST_NOMEM, err, errlen, "out of memory");
			mem_free(s);
		}
	}
	const char *base = strrchr(json_string_value(file), '/');
	base = base ? base + 1 : json_string_value(file);
	if (!rc && (srv_buf_printf(&b,
				   "--%s\r\nContent-Disposition: form-data; name=\"file\"; "
				   "filename=\"%s\"\r\nContent-Type: application/octet-stream\r\n\r\n",
				   bnd, strpbrk(base, "\"\r\n") ? "audio" : base) ||
		    srv_buf_append(&b, audio, alen) || srv_buf_printf(&b, "\r\n--%s--\r\n", bnd)))
		rc = st_errf(-ST_NOMEM, err, errlen, "out of memory");
	mem_free(audio);
	if (rc) {
		srv_buf_fini(&b);
		return rc;
	}
	*len = b.len;
	*out = srv_buf_steal(&b);
	srv_buf_fini(&b);
	return *out ? 0 : -ST_NOMEM;
}

/* --- one item ------------------------------------------------------------ */

/* End item it of batch q without a request: failed with code: msg. */
static enum br_outcome br_fail(struct srv_brunner *r, const struct srv_bq *q,
			       const struct srv_bitem *it, const char *code, const char *msg)
{
	int rc = srv__bstore_item_end(r->store, q->id, it->line, false, 0, NULL, 0, -1, code, msg);
	if (rc == 0)
		r->d->n_failed++;
	return rc < 0 ? BR_RETRY : BR_ENDED;
}

/* End item it of batch q with the answer status, resp [len]. */
static enum br_outcome br_store_answer(struct srv_brunner *r, const struct srv_bq *q,
				       const struct srv_bitem *it, int status, const char *resp,
				       size_t len, double audio_s)
{
	/* a body that is not JSON (a text response_format) is kept as a string */
	json_t *v = json_loadb(resp, len, 0, NULL);
	char *js = NULL;
	if (!v) {
		json_t *sv = json_stringn(resp, len);
		js = sv ? json_dumps(sv, JSON_ENCODE_ANY) : NULL;
		json_decref(sv);
	}
	json_decref(v);
	const char *b = v ? resp : js;
	int rc = b ? srv__bstore_item_end(r->store, q->id, it->line, status / 100 == 2, status, b,
					  v ? len : strlen(js), audio_s, NULL, NULL)
		   : -ST_NOMEM;
	free(js); /* jansson's allocator */
	if (rc == -ST_TOOBIG) /* the disk is full: the item fails with that, if it fits */
		return br_fail(r, q, it, "storage_full",
			       "the batch store's disk is full: this item's answer could not be kept");
	if (rc < 0) {
		fprintf(stderr, "inferd: batch %s line %lld: cannot store its result: %s\n", q->id,
			(long long)it->line, st_str(rc));
		return BR_RETRY;
	}
	struct srv_batchd *d = r->d;
	if (rc == 0 && status / 100 == 2) {
		int64_t a, p, c;
		srv__bstore_usage(resp, len, &a, &p, &c);
		if (audio_s >= 0)
			a = (int64_t)(audio_s * 1000.0 + 0.5);
		d->n_done++;
		d->audio_ms += (uint64_t)a;
		d->prompt_tokens += (uint64_t)p;
		d->completion_tokens += (uint64_t)c;
	} else if (rc == 0) {
		d->n_failed++;
	}
	return BR_ENDED;
}

static enum br_outcome br_run(struct srv_brunner *r, const struct srv_bq *q,
			      const struct srv_bitem *it)
{
	struct srv_batchd *d = r->d;
	char err[512];
	json_t *o = json_loads(it->body, 0, NULL);
	if (!o)
		return br_fail(r, q, it, "invalid_request", "the body is not JSON");
	if (json_is_true(json_object_get(o, "stream"))) {
		json_decref(o);
		return br_fail(r, q, it, "invalid_request",
			       "\"stream\": true is not supported in a batch");
	}
	bool audio = !strcmp(q->endpoint, "/v1/audio/transcriptions");
	char bnd[48], type[96];
	char *form = NULL;
	size_t form_len = 0;
	if (audio) {
		unsigned char rnd[12];
		uv_random(NULL, NULL, rnd, sizeof(rnd), 0, NULL);
		int n = snprintf(bnd, sizeof(bnd), "inferd-batch-");
		for (size_t i = 0; i < sizeof(rnd); i++)
			n += snprintf(bnd + n, sizeof(bnd) - (size_t)n, "%02x", rnd[i]);
		snprintf(type, sizeof(type), "multipart/form-data; boundary=%s", bnd);
		int rc = br_audio_form(d->cfg, o, bnd, &form, &form_len, err, sizeof(err));
		if (rc) {
			json_decref(o);
			return br_fail(r, q, it,
				       rc == -ST_NOTFOUND ? "file_not_found" : "invalid_request", err);
		}
	}
	json_decref(o);
	pthread_mutex_lock(&d->mu);
	bool up = br_connect(r);
	pthread_mutex_unlock(&d->mu);
	if (!up) {
		mem_free(form);
		return d->stopping ? BR_STOP : BR_RETRY;
	}
	int status = 0;
	char *resp = NULL;
	size_t resp_len = 0;
	double audio_s = -1;
	d->in_flight++;
	int rc = audio ? br_exchange(r, q->endpoint, type, form, form_len, &status, &resp,
				     &resp_len, &audio_s)
		       : br_exchange(r, q->endpoint, "application/json", it->body,
				     strlen(it->body), &status, &resp, &resp_len, &audio_s);
	mem_free(form);
	d->in_flight--;
	enum br_outcome out = rc || status == 429 || status == 503
				      ? (d->stopping ? BR_STOP : BR_RETRY)
				      : br_store_answer(r, q, it, status, resp, resp_len, audio_s);
	mem_free(resp);
	return out;
}

/* --- taking items -------------------------------------------------------- */

/* Fetch the next pending items of q into its queue (q->exhausted when
 * there are none). Under d->mu. */
static void br_refill(struct srv_brunner *r, struct srv_bq *q)
{
	struct srv_bitem items[SRV_BQ_FETCH];
	size_t n = 0;
	if (srv__bstore_items_pending(r->store, q->id, q->cursor, items, SRV_BQ_FETCH, &n))
		return; /* tried again at the next take */
	q->exhausted = n == 0;
	for (size_t i = 0; i < n; i++) {
		struct srv_bq_item *e = mem_calloc(1, sizeof(*e));
		if (!e) {
			srv__bstore_items_free(&items[i], n - i);
			return; /* cursor stays: the rest are fetched again */
		}
		e->it = items[i];
		q->cursor = items[i].line;
		if (q->tail)
			q->tail->next = e;
		else
			q->head = e;
		q->tail = e;
	}
}

/* Take the next item for r: of the open batch with work that has the
 * fewest items in flight (so that every open batch, and with it every
 * model, gets runners: a long batch does not hold back a later one);
 * *qp its batch. Or NULL, with *finish set to a batch this runner is to
 * end now. Under d->mu. */
static struct srv_bq_item *br_take(struct srv_brunner *r, struct srv_bq **qp,
				   struct srv_bq **finish)
{
	struct srv_batchd *d = r->d;
	*finish = NULL;
	if (!r->store && d->store_ready &&
	    srv__batch_store_open(d, false, &r->store, NULL, 0))
		return NULL;
	if (!r->store)
		return NULL;
	for (;;) {
		struct srv_bq *best = NULL;
		for (struct srv_bq *q = d->open; q; q = q->next) {
			if (q->finishing)
				continue;
			if (!q->head && (q->exhausted || q->ending != SRV_BQ_RUN) && !q->in_flight) {
				q->finishing = true;
				*finish = q;
				return NULL;
			}
			bool work = q->ending == SRV_BQ_RUN && (q->head || !q->exhausted);
			if (work && (!best || q->in_flight < best->in_flight))
				best = q;
		}
		if (!best)
			return NULL;
		if (!best->head) {
			br_refill(r, best);
			if (!best->head && !best->exhausted)
				return NULL; /* the store failed: wait, try again */
			continue; /* it may have none left: choose again */
		}
		struct srv_bq_item *e = best->head;
		best->head = e->next;
		if (!best->head)
			best->tail = NULL;
		e->next = NULL;
		best->in_flight++;
		*qp = best;
		return e;
	}
}

void *srv__brunner_main(void *arg)
{
	struct srv_brunner *r = arg;
	struct srv_batchd *d = r->d;
	pthread_mutex_lock(&d->mu);
	while (!d->stopping) {
		struct srv_bq *q = NULL, *finish = NULL;
		struct srv_bq_item *e = br_take(r, &q, &finish);
		if (finish) {
			pthread_mutex_unlock(&d->mu);
			srv__bq_finish(d, r->store, finish);
			pthread_mutex_lock(&d->mu);
			continue;
		}
		if (!e) {
			pthread_cond_wait(&d->work_cv, &d->mu);
			continue;
		}
		pthread_mutex_unlock(&d->mu);
		enum br_outcome out = br_run(r, q, &e->it);
		pthread_mutex_lock(&d->mu);
		q->in_flight--;
		if (out == BR_RETRY && q->ending == SRV_BQ_RUN) {
			e->next = q->head; /* first again, in line order */
			q->head = e;
			if (!q->tail)
				q->tail = e;
			e = NULL;
		}
		if (e) {
			srv__bstore_items_free(&e->it, 1);
			mem_free(e);
		}
		pthread_cond_broadcast(&d->work_cv); /* q may be ready to end */
		if (out == BR_RETRY)
			d->n_retried++;
		if (out == BR_RETRY && !d->stopping) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += BR_RETRY_MS * 1000000L;
			ts.tv_sec += ts.tv_nsec / 1000000000L;
			ts.tv_nsec %= 1000000000L;
			pthread_cond_timedwait(&d->work_cv, &d->mu, &ts);
		}
	}
	br_disconnect(r);
	pthread_mutex_unlock(&d->mu);
	return NULL;
}
