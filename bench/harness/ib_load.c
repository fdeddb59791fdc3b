/* ib_load.c - one stage of load: a closed loop of N clients or an open
 * loop of Poisson arrivals, through warm-up, the measurement window and
 * the drain (docs/bench.md "Load shapes").
 *
 * Closed loop: client i keeps one connection and sends its next request
 * when the last is answered; a failed connection is retried after
 * IB_RETRY_MS (each failure is a request of kind "connect"); a request a
 * stale keep-alive connection lost goes out again at once on a new one
 * (ib_load_on_stale).
 * Open loop: arrival k comes at t_k = t_{k-1} + Exp(rate) (inverse
 * transform of the seeded uniform); it goes out on an idle connection, or
 * a new one while fewer than --max-connections are open, or waits in a
 * FIFO; its latency counts from its arrival (no coordinated omission).
 * A request's phase is the stage's phase when it ends; the window's
 * requests are the ones the summary counts.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ib_int.h"

#define IB_RETRY_MS 100

static void ib_load_on_connected(struct ib_conn *c, int status);
static void ib_load_on_done(struct ib_conn *c, size_t rec, bool reusable);
static void ib_load_on_closed(struct ib_conn *c);
static bool ib_load_on_stale(struct ib_conn *c, size_t rec);

/* What each connection the load loop opens tells it (ib_conn.c calls). */
static const struct ib_conn_cbs ib_load_conn_cbs = {
	.on_connected = ib_load_on_connected,
	.on_done = ib_load_on_done,
	.on_closed = ib_load_on_closed,
	.on_stale = ib_load_on_stale,
};

/* --- phases ------------------------------------------------------------- */

static bool ib_may_send(const struct ib_run *run)
{
	if (run->phase >= 2 || run->aborted)
		return false;
	return !(run->o->requests > 0 && run->phase == 1 && run->sent_in_window >= run->o->requests);
}

static void ib_stage_maybe_done(struct ib_run *run);

static void ib_window_end(struct ib_run *run)
{
	if (run->phase >= 2)
		return;
	if (run->phase == 0)
		run->w0 = ib_now(run);
	run->w1 = ib_now(run);
	run->phase = 2;
	uv_timer_stop(&run->phase_timer);
	uv_timer_stop(&run->arrival);
	ib_stage_maybe_done(run);
}

static void ib_on_phase_timer(uv_timer_t *t)
{
	struct ib_run *run = t->data;
	if (run->phase == 0) {
		run->phase = 1;
		run->w0 = ib_now(run);
		if (run->o->requests <= 0)
			uv_timer_start(&run->phase_timer, ib_on_phase_timer,
				       (uint64_t)(run->o->duration_s * 1000.0 + 0.5), 0);
		return;
	}
	ib_window_end(run);
}

static void ib_close_conn_cb(struct ib_run *run)
{
	for (size_t i = 0; i < run->n_idle; i++)
		ib_conn_close(run->idle[i]);
	run->n_idle = 0;
	for (int i = 0; i < run->n_clients; i++)
		if (run->clients[i].conn)
			ib_conn_close(run->clients[i].conn);
}

static void ib_on_client_timer_close(uv_handle_t *h)
{
	struct ib_client *cl = h->data;
	cl->run->n_handles--;
	ib_stage_maybe_done(cl->run);
}

/* The stage ends once the window is over, nothing is in flight and every
 * connection and timer of it is closed. */
static void ib_stage_maybe_done(struct ib_run *run)
{
	if (run->phase != 2 || run->in_flight > 0)
		return;
	if (run->n_conns > 0 || run->n_handles > 0) {
		ib_close_conn_cb(run);
		for (int i = 0; i < run->n_clients; i++) {
			uv_handle_t *h = (uv_handle_t *)&run->clients[i].retry;
			if (!uv_is_closing(h))
				uv_close(h, ib_on_client_timer_close);
		}
		return;
	}
	run->phase = 3;
	uv_stop(run->loop);
}

/* --- sending ------------------------------------------------------------ */

/* A record for a request starting at t_start (phase counters updated). */
static size_t ib_start_rec(struct ib_run *run, double t_start, const struct ib_tmpl *tmpl,
			   int entry)
{
	size_t rec = ib_rec_new(run);
	struct ib_rec *r = &run->recs[rec];
	r->t_start = t_start;
	r->entry = entry;
	r->input = tmpl->input;
	if (run->phase == 1)
		run->sent_in_window++;
	run->in_flight++;
	return rec;
}

static void ib_send(struct ib_run *run, struct ib_conn *c, double t_start)
{
	int entry;
	const struct ib_tmpl *tmpl = ib_work_pick(run, &entry);
	size_t rec = ib_start_rec(run, t_start, tmpl, entry);
	ib_conn_send(c, tmpl, run->entries[entry].ep, rec);
}

/* Record rec has ended: its phase, the stage's counters, the window's
 * end when --requests answers are in. */
static void ib_rec_end(struct ib_run *run, size_t rec)
{
	struct ib_rec *r = &run->recs[rec];
	r->phase = run->phase;
	run->in_flight--;
	if (run->phase == 1) {
		run->answered_in_window++;
		if (run->o->requests > 0 && run->answered_in_window >= run->o->requests)
			ib_window_end(run);
	}
}

/* A request that never got a connection, started at t_start and given up
 * at t_end: recorded as kind. */
static void ib_unsent(struct ib_run *run, double t_start, double t_end, enum ib_kind kind)
{
	int entry;
	const struct ib_tmpl *tmpl = ib_work_pick(run, &entry);
	size_t rec = ib_start_rec(run, t_start, tmpl, entry);
	struct ib_rec *r = &run->recs[rec];
	r->t_end = t_end;
	r->kind = kind;
	ib_rec_end(run, rec);
}

/* A request whose connection could not be made: kind connect. */
static void ib_connect_failed(struct ib_run *run, double t_start)
{
	ib_unsent(run, t_start, ib_now(run), IB_KIND_CONNECT);
}

/* --- closed loop -------------------------------------------------------- */

static void ib_client_next(struct ib_client *cl);

static void ib_on_retry(uv_timer_t *t)
{
	ib_client_next(t->data);
}

static void ib_client_next(struct ib_client *cl)
{
	struct ib_run *run = cl->run;
	if (!cl->resend && !ib_may_send(run))
		return;
	if (!cl->conn) {
		cl->conn = ib_conn_open(run, cl->id, &ib_load_conn_cbs);
		if (!cl->conn) {
			uv_timer_start(&cl->retry, ib_on_retry, IB_RETRY_MS, 0);
			return;
		}
		run->n_conns++;
		cl->waiting = true;
		return;
	}
	if (!cl->conn->connected || cl->conn->busy || cl->conn->closing) {
		cl->waiting = true;
		return;
	}
	cl->waiting = false;
	if (cl->resend) { /* the request a stale connection lost, from its start */
		cl->resend = false;
		ib_conn_send(cl->conn, cl->resend_tmpl, cl->resend_ep, cl->resend_rec);
		return;
	}
	ib_send(run, cl->conn, ib_now(run));
}

/* A closed-loop client's request lost by a stale keep-alive connection
 * goes out again at once on a new one, still counted from its start (what
 * a client library does); only a failure on the new one counts. The open
 * loop counts it as a connect error. */
static bool ib_load_on_stale(struct ib_conn *c, size_t rec)
{
	struct ib_run *run = c->run;
	if (c->client < 0)
		return false;
	struct ib_client *cl = &run->clients[c->client];
	if (cl->conn == c)
		cl->conn = NULL;
	cl->resend = true;
	cl->resend_rec = rec;
	cl->resend_tmpl = c->tmpl;
	cl->resend_ep = c->ep;
	ib_client_next(cl);
	return true;
}

/* --- open loop ---------------------------------------------------------- */

static double ib_next_gap(struct ib_run *run)
{
	return -log(1.0 - ib_rng_unit(&run->rng)) / run->load;
}

/* One more connection for the waiting arrivals, unless each of them has
 * one coming already or --max-connections are open. */
static void ib_open_more(struct ib_run *run)
{
	if (run->n_conns >= run->o->max_connections || (size_t)run->n_connecting >= run->n_pending)
		return;
	struct ib_conn *c = ib_conn_open(run, -1, &ib_load_conn_cbs);
	if (c) {
		run->n_conns++;
		run->n_connecting++;
	}
}

/* Room at the FIFO's tail: the waiting arrivals moved to the front when
 * the head has passed half the array, else a bigger array. */
static void ib_pending_room(struct ib_run *run)
{
	if (run->pending_head + run->n_pending < run->cap_pending)
		return;
	if (run->pending_head > 0 && run->pending_head >= run->cap_pending / 2) {
		memmove(run->pending, run->pending + run->pending_head,
			run->n_pending * sizeof(*run->pending));
		run->pending_head = 0;
		return;
	}
	run->cap_pending = run->cap_pending ? run->cap_pending * 2 : 256;
	run->pending = ib_xrealloc(run->pending, run->cap_pending * sizeof(*run->pending));
}

static void ib_open_dispatch(struct ib_run *run, double t_arrival)
{
	if (run->n_idle > 0) {
		ib_send(run, run->idle[--run->n_idle], t_arrival);
		return;
	}
	ib_pending_room(run);
	run->pending[run->pending_head + run->n_pending++] = t_arrival;
	ib_open_more(run);
}

static double ib_pending_pop(struct ib_run *run)
{
	double t = run->pending[run->pending_head++];
	if (--run->n_pending == 0)
		run->pending_head = 0;
	return t;
}

/* Arrivals that have waited --timeout for a connection (every one busy
 * with a server that does not answer): kind timeout, at their deadline. */
static void ib_pending_expire(struct ib_run *run, double now)
{
	double timeout = run->o->timeout_s;
	while (run->n_pending > 0 && ib_may_send(run) &&
	       now - run->pending[run->pending_head] >= timeout) {
		double t = ib_pending_pop(run);
		ib_unsent(run, t, t + timeout, IB_KIND_TIMEOUT);
	}
}

static void ib_on_arrival(uv_timer_t *t)
{
	struct ib_run *run = t->data;
	double now = ib_now(run);
	ib_pending_expire(run, now);
	while (run->t_next <= now && ib_may_send(run)) {
		ib_open_dispatch(run, run->t_next);
		run->t_next += ib_next_gap(run);
	}
	if (!ib_may_send(run))
		return;
	double wait_ms = ceil((run->t_next - now) * 1000.0);
	uv_timer_start(&run->arrival, ib_on_arrival, wait_ms > 0 ? (uint64_t)wait_ms : 0, 0);
}

/* --- callbacks from ib_conn.c -------------------------------------------- */

static void ib_load_on_connected(struct ib_conn *c, int status)
{
	struct ib_run *run = c->run;
	if (c->client >= 0) {
		struct ib_client *cl = &run->clients[c->client];
		if (status != 0) {
			/* ib_conn.c has closed it; the request that wanted it failed */
			if (cl->resend) { /* the one a stale connection lost */
				struct ib_rec *r = &run->recs[cl->resend_rec];
				cl->resend = false;
				r->t_end = ib_now(run);
				r->kind = IB_KIND_CONNECT;
				ib_rec_end(run, cl->resend_rec);
			} else if (ib_may_send(run)) {
				ib_connect_failed(run, c->t_connect);
			}
			if (cl->conn == c)
				cl->conn = NULL;
			if (ib_may_send(run))
				uv_timer_start(&cl->retry, ib_on_retry, IB_RETRY_MS, 0);
			ib_stage_maybe_done(run);
			return;
		}
		if (cl->waiting)
			ib_client_next(cl);
		return;
	}
	run->n_connecting--;
	if (status != 0) {
		if (run->n_pending > 0) /* the oldest arrival fails, from its arrival */
			ib_connect_failed(run, ib_pending_pop(run));
		return;
	}
	ib_pending_expire(run, ib_now(run));
	if (run->n_pending > 0 && ib_may_send(run))
		ib_send(run, c, ib_pending_pop(run));
	else if (ib_may_send(run))
		run->idle[run->n_idle++] = c;
	else
		ib_conn_close(c); /* connected after the window: not needed */
}

static void ib_load_on_done(struct ib_conn *c, size_t rec, bool reusable)
{
	struct ib_run *run = c->run;
	ib_rec_end(run, rec);
	if (c->client >= 0) {
		struct ib_client *cl = &run->clients[c->client];
		if (!reusable && cl->conn == c)
			cl->conn = NULL;
		ib_client_next(cl);
	} else if (reusable) {
		ib_pending_expire(run, ib_now(run));
		if (run->n_pending > 0 && ib_may_send(run))
			ib_send(run, c, ib_pending_pop(run));
		else
			run->idle[run->n_idle++] = c;
	}
	ib_stage_maybe_done(run);
}

static void ib_load_on_closed(struct ib_conn *c)
{
	struct ib_run *run = c->run;
	run->n_conns--;
	for (size_t i = 0; i < run->n_idle; i++)
		if (run->idle[i] == c) {
			run->idle[i] = run->idle[--run->n_idle];
			break;
		}
	if (c->client >= 0 && run->clients && run->clients[c->client].conn == c)
		run->clients[c->client].conn = NULL;
	/* a connection the server closed: the waiting arrivals need another */
	if (c->client < 0 && run->n_pending > 0 && ib_may_send(run))
		ib_open_more(run);
	ib_stage_maybe_done(run);
}

/* --- progress, interrupt, the stage ---------------------------------------- */

static void ib_on_progress(uv_timer_t *t)
{
	struct ib_run *run = t->data;
	if (run->o->quiet)
		return;
	char line[256];
	double now = ib_now(run);
	if (run->tty) {
		ib_stats_progress(run, line, sizeof(line));
		fprintf(stderr, "\r\033[K%s", line);
		fflush(stderr);
	} else if (now - run->last_plain >= 5.0) {
		run->last_plain = now;
		ib_stats_progress(run, line, sizeof(line));
		fprintf(stderr, "%s\n", line);
	}
}

void ib_load_on_sigint(uv_signal_t *s, int signum)
{
	(void)signum;
	struct ib_run *run = s->data;
	if (run->aborted) {
		fprintf(stderr, "\ninferd-bench: interrupted twice, exiting\n");
		_exit(130);
	}
	run->aborted = true;
	fprintf(stderr, "\ninferd-bench: interrupted: ending the stage (again to quit now)\n");
	ib_window_end(run);
}

int ib_load_stage(struct ib_run *run, int i, double load)
{
	const struct ib_opts *o = run->o;
	run->stage = i;
	run->load = load;
	run->phase = 0;
	run->sent_in_window = run->answered_in_window = run->in_flight = 0;
	run->n_idle = run->n_pending = 0;
	run->pending_head = 0;
	run->n_conns = run->n_connecting = run->n_handles = 0;
	run->last_plain = ib_now(run);
	run->open_loop = o->sweep_rate || (o->rate > 0 && !o->n_sweep);
	/* the loop's clock stood still while the inputs loaded or the last
	 * stage's figures were computed: timers started now would be short */
	uv_update_time(run->loop);
	run->idle = ib_xrealloc(run->idle, (size_t)o->max_connections * sizeof(*run->idle));
	run->w0 = run->w1 = ib_now(run) + o->warmup_s;

	uv_timer_start(&run->progress, ib_on_progress, 1000, 1000);
	if (o->warmup_s > 0) {
		uv_timer_start(&run->phase_timer, ib_on_phase_timer,
			       (uint64_t)(o->warmup_s * 1000.0 + 0.5), 0);
	} else {
		run->phase = 0;
		ib_on_phase_timer(&run->phase_timer);
	}
	if (run->open_loop) {
		run->n_clients = 0;
		run->t_next = ib_now(run) + ib_next_gap(run);
		ib_on_arrival(&run->arrival);
	} else {
		run->n_clients = (int)load;
		run->clients = calloc((size_t)run->n_clients, sizeof(*run->clients));
		if (!run->clients)
			return -1;
		for (int c = 0; c < run->n_clients; c++) {
			struct ib_client *cl = &run->clients[c];
			cl->run = run;
			cl->id = c;
			uv_timer_init(run->loop, &cl->retry);
			cl->retry.data = cl;
			run->n_handles++;
		}
		for (int c = 0; c < run->n_clients; c++)
			ib_client_next(&run->clients[c]);
	}
	uv_run(run->loop, UV_RUN_DEFAULT);
	uv_timer_stop(&run->progress);
	if (run->tty && !o->quiet)
		fprintf(stderr, "\r\033[K");
	free(run->clients);
	run->clients = NULL;
	run->n_clients = 0;
	return run->phase == 3 ? 0 : -1;
}
