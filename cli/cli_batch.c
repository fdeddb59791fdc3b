/* cli_batch.c - `inferd batch run MANIFEST --out RESULTS`: a Batch API
 * job from the command line (server/srv.h srv_batch_run), with a progress
 * bar on a terminal (items, audio hours, rate, ETA) and plain progress
 * lines otherwise; run again, it resumes the job where it stopped.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli_cmd.h"
#include "common/mem.h"
#include "common/st.h"
#include "config/cfg.h"
#include "engine/eng.h"
#include "server/srv.h"

#define CB_LINE_EVERY_S 10.0 /* plain progress lines, not on a terminal */

static int cb_usage(FILE *to)
{
	fprintf(to,
		"usage: inferd batch run MANIFEST --out RESULTS [--config FILE] [--store DB]\n"
		"                        [--input-dir DIR]\n"
		"\n"
		"Run MANIFEST, a JSONL of OpenAI Batch API requests ({\"custom_id\", \"method\":\n"
		"\"POST\", \"url\", \"body\"} per line, one url: /v1/chat/completions,\n"
		"/v1/completions or /v1/audio/transcriptions with \"file\" naming an audio\n"
		"file), on the config's models, without a server. The output file's lines\n"
		"go to RESULTS, the failed items' to RESULTS.errors.jsonl. Progress goes to\n"
		"stderr. The job is kept in --store (default RESULTS.db, SQLite): run the\n"
		"same command again after a crash or Ctrl-C and it goes on where it stopped.\n"
		"\n"
		"  --config FILE     the models (default config/default.json, $INFERD_CONFIG)\n"
		"  --store DB        the job's database (default RESULTS.db)\n"
		"  --input-dir DIR   where audio lines' files are (default: MANIFEST's folder)\n");
	return to == stdout ? 0 : 2;
}

struct cb_args {
	const char *manifest, *out, *config, *store, *input_dir;
};

static int cb_parse(int argc, char **argv, struct cb_args *a)
{
	if (argc < 3 || strcmp(argv[2], "run"))
		return argc >= 3 && (!strcmp(argv[2], "--help") || !strcmp(argv[2], "-h"))
			       ? cb_usage(stdout)
			       : cb_usage(stderr);
	for (int i = 3; i < argc; i++) {
		const char *o = argv[i];
		const char **to = !strcmp(o, "--out")	      ? &a->out
				  : !strcmp(o, "--config")    ? &a->config
				  : !strcmp(o, "--store")     ? &a->store
				  : !strcmp(o, "--input-dir") ? &a->input_dir
							      : NULL;
		if (!strcmp(o, "--help") || !strcmp(o, "-h"))
			return cb_usage(stdout);
		if (to && i + 1 < argc) {
			*to = argv[++i];
		} else if (!to && o[0] != '-' && !a->manifest) {
			a->manifest = o;
		} else {
			fprintf(stderr, "inferd batch: unknown or incomplete argument '%s'\n", o);
			return cb_usage(stderr);
		}
	}
	if (!a->manifest || !a->out) {
		fprintf(stderr, "inferd batch run: MANIFEST and --out RESULTS are required\n");
		return cb_usage(stderr);
	}
	return -1; /* go on */
}

struct cb_view {
	bool tty;
	bool seen;         /* a progress call came */
	double audio0_s;   /* audio done when this run started */
	double next_line_s;
};

static void cb_hms(double s, char *out, size_t cap)
{
	long t = s > 0 && s < 1e8 ? (long)(s + 0.5) : 0;
	snprintf(out, cap, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
}

/* srv_batch_run's progress: a bar redrawn in place on a terminal, a line
 * every CB_LINE_EVERY_S otherwise (and the last one always). */
static void cb_progress(void *ud, const struct srv_batch_progress *p, bool last)
{
	struct cb_view *v = ud;
	if (!v->seen)
		v->audio0_s = p->audio_s;
	v->seen = true;
	if (!v->tty && !last && p->elapsed_s < v->next_line_s)
		return;
	v->next_line_s = p->elapsed_s + CB_LINE_EVERY_S;
	long long ended = p->done + p->failed, now = ended - p->ended_before;
	double rate = p->elapsed_s > 0 ? (double)now / p->elapsed_s : 0;
	double ah = p->audio_s / 3600.0;
	char eta[32] = "-", el[32];
	if (rate > 0 && ended < p->total)
		cb_hms((double)(p->total - ended) / rate, eta, sizeof(eta));
	cb_hms(p->elapsed_s, el, sizeof(el));
	char bar[32];
	int w = 24, fill = p->total ? (int)((double)w * (double)ended / (double)p->total) : w;
	for (int i = 0; i < w; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[w] = '\0';
	fprintf(stderr,
		"%s[%s] %lld/%lld items (%lld failed) %.3f audio h | %.2f items/s%s | %s "
		"elapsed, ETA %s | %s%s",
		v->tty ? "\r" : "", bar, ended, p->total, p->failed, ah, rate, "", el, eta,
		p->status, v->tty && !last ? "  " : "\n");
	double run_ah = (p->audio_s - v->audio0_s) / 3600.0;
	if (last && now == 0)
		fprintf(stderr, "inferd batch: the job had ended already (%lld items before)\n",
			p->ended_before);
	else if (last && run_ah > 0 && p->elapsed_s > 0)
		fprintf(stderr, "inferd batch: %.3f audio hours in %.1f s: %.1f audio hours per "
			"hour\n", run_ah, p->elapsed_s, run_ah * 3600.0 / p->elapsed_s);
	fflush(stderr);
}

/* Ctrl-C (or SIGTERM): say how to go on and leave at once; the job's
 * ended items are in the store already (async-signal-safe calls only). */
static void cb_on_signal(int sig)
{
	static const char msg[] = "\ninferd batch: interrupted; run the same command again to "
				  "resume the job\n";
	ssize_t unused = write(2, msg, sizeof(msg) - 1);
	(void)unused;
	_exit(128 + sig);
}

int cli_batch(int argc, char **argv, const char *config_path)
{
	struct cb_args a = { .config = config_path };
	int st = cb_parse(argc, argv, &a);
	if (st >= 0)
		return st;
	char err[1024], store[4096], dir[4096];
	struct cfg *cfg = NULL;
	struct eng *eng = NULL;
	struct eng_model_spec *specs = NULL;
	int rc = cfg_load_file(a.config, &cfg, err, sizeof(err));
	if (!rc) {
		snprintf(store, sizeof(store), "%s%s", a.store ? a.store : a.out, a.store ? "" : ".db");
		const char *slash = strrchr(a.manifest, '/');
		snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - a.manifest) : 1,
			 slash ? a.manifest : ".");
		cfg->access_log = 0; /* the progress is the command's output */
		mem_free(cfg->batch_store);
		mem_free(cfg->batch_input_dir);
		cfg->batch_store = mem_strdup(store);
		cfg->batch_input_dir = mem_strdup(a.input_dir ? a.input_dir : dir[0] ? dir : "/");
		specs = cli_specs_from_cfg(cfg);
		if (!cfg->batch_store || !cfg->batch_input_dir || !specs)
			rc = st_errf(-ST_NOMEM, err, sizeof(err), "out of memory");
	}
	if (!rc)
		rc = eng_create(specs, cfg->n_models, &eng, err, sizeof(err));
	struct cb_view v = { .tty = isatty(2) };
	signal(SIGINT, cb_on_signal);
	signal(SIGTERM, cb_on_signal);
	struct srv_batch_run_opts o = { .manifest = a.manifest, .out = a.out,
					.progress = cb_progress, .ud = &v };
	if (!rc)
		rc = srv_batch_run(cfg, eng, &o, err, sizeof(err));
	if (rc)
		fprintf(stderr, "inferd batch: %s\n", err);
	else
		fprintf(stderr, "inferd batch: results in %s\n", a.out);
	eng_destroy(eng);
	mem_free(specs);
	cfg_destroy(cfg);
	return rc ? 1 : 0;
}
