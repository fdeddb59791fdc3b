/* ib_main.c - inferd-bench's command line: options (docs/bench.md), the
 * target's address, the stages of a run one after the other, and the
 * outputs (table, JSON, CSV, HTML); `inferd-bench report` draws saved runs
 * into one HTML report.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <netdb.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ib_html.h"
#include "ib_int.h"

static void ib_usage(FILE *f)
{
	fprintf(f,
		"usage: inferd-bench [options]\n"
		"       inferd-bench report --html OUT.html RUN.json [RUN.json ...]\n"
		"target:\n"
		"  --url URL              server base URL, http://host[:port][/prefix]\n"
		"                         (default http://127.0.0.1:8080)\n"
		"  --endpoint E           openai-transcriptions | deepgram-listen |\n"
		"                         openai-completions | openai-chat | kserve-infer |\n"
		"                         http-get | deepgram-live (a WebSocket stream each)\n"
		"  --workload FILE        mixed workload JSON instead of --endpoint\n"
		"  --model NAME           model (default whisper-tiny.en / gemma-3-270m)\n"
		"  --path PATH            request path (http-get: default /v2/health/live)\n"
		"  --api-key KEY          Authorization: Bearer KEY (Token KEY for Deepgram)\n"
		"  --header 'N: v'        extra request header (repeatable)\n"
		"  --label NAME           name of this run in reports (default host:port)\n"
		"load:\n"
		"  --concurrency N        closed loop with N clients (default 1)\n"
		"  --rate R               open loop, Poisson arrivals at R requests/s\n"
		"  --sweep LIST           one stage per concurrency, e.g. 1,2,4,8\n"
		"  --sweep-rate LIST      one stage per rate, e.g. 1,2,4\n"
		"  --duration S           measurement window per stage (default 10)\n"
		"  --warmup S             warm-up per stage, not counted (default 2)\n"
		"  --requests N           end a stage's window after N answers\n"
		"  --timeout S            per-request timeout (default 60)\n"
		"  --max-connections N    open-loop connection cap (default 1024)\n"
		"  --seed N               random seed (default 1)\n"
		"inputs:\n"
		"  --audio DIR|FILE       audio files (wav, flac, ogg, mp3, opus)\n"
		"  --audio-order rr|random, --prompts FILE.jsonl, --prompt-order rr|random\n"
		"  --max-tokens N (default 128), --temperature T (default 0), --stream\n"
		"  --speed X              deepgram-live: stream at X times real time (default 1)\n"
		"  --keep-up S            deepgram-live: the most a stream may fall behind and\n"
		"                         still count as kept up (default 1.5)\n"
		"output:\n"
		"  --price-per-hour USD   add cost per audio hour and per million tokens\n"
		"  --json FILE, --csv FILE, --html FILE, --quiet, --no-progress\n"
		"  --help, --version\n");
}

enum {
	OPT_URL = 256, OPT_ENDPOINT, OPT_WORKLOAD, OPT_MODEL, OPT_PATH, OPT_API_KEY, OPT_HEADER,
	OPT_LABEL, OPT_CONCURRENCY, OPT_RATE, OPT_SWEEP, OPT_SWEEP_RATE, OPT_DURATION,
	OPT_WARMUP, OPT_REQUESTS, OPT_TIMEOUT, OPT_MAX_CONN, OPT_SEED, OPT_AUDIO,
	OPT_AUDIO_ORDER, OPT_PROMPTS, OPT_PROMPT_ORDER, OPT_MAX_TOKENS, OPT_TEMPERATURE,
	OPT_STREAM, OPT_SPEED, OPT_KEEP_UP, OPT_PRICE, OPT_JSON, OPT_CSV, OPT_HTML, OPT_QUIET,
	OPT_NO_PROGRESS, OPT_HELP, OPT_VERSION,
};

static const struct option ib_long_opts[] = {
	{"url", required_argument, NULL, OPT_URL},
	{"endpoint", required_argument, NULL, OPT_ENDPOINT},
	{"workload", required_argument, NULL, OPT_WORKLOAD},
	{"model", required_argument, NULL, OPT_MODEL},
	{"path", required_argument, NULL, OPT_PATH},
	{"api-key", required_argument, NULL, OPT_API_KEY},
	{"header", required_argument, NULL, OPT_HEADER},
	{"label", required_argument, NULL, OPT_LABEL},
	{"concurrency", required_argument, NULL, OPT_CONCURRENCY},
	{"rate", required_argument, NULL, OPT_RATE},
	{"sweep", required_argument, NULL, OPT_SWEEP},
	{"sweep-rate", required_argument, NULL, OPT_SWEEP_RATE},
	{"duration", required_argument, NULL, OPT_DURATION},
	{"warmup", required_argument, NULL, OPT_WARMUP},
	{"requests", required_argument, NULL, OPT_REQUESTS},
	{"timeout", required_argument, NULL, OPT_TIMEOUT},
	{"max-connections", required_argument, NULL, OPT_MAX_CONN},
	{"seed", required_argument, NULL, OPT_SEED},
	{"audio", required_argument, NULL, OPT_AUDIO},
	{"audio-order", required_argument, NULL, OPT_AUDIO_ORDER},
	{"prompts", required_argument, NULL, OPT_PROMPTS},
	{"prompt-order", required_argument, NULL, OPT_PROMPT_ORDER},
	{"max-tokens", required_argument, NULL, OPT_MAX_TOKENS},
	{"temperature", required_argument, NULL, OPT_TEMPERATURE},
	{"stream", no_argument, NULL, OPT_STREAM},
	{"speed", required_argument, NULL, OPT_SPEED},
	{"keep-up", required_argument, NULL, OPT_KEEP_UP},
	{"price-per-hour", required_argument, NULL, OPT_PRICE},
	{"json", required_argument, NULL, OPT_JSON},
	{"csv", required_argument, NULL, OPT_CSV},
	{"html", required_argument, NULL, OPT_HTML},
	{"quiet", no_argument, NULL, OPT_QUIET},
	{"no-progress", no_argument, NULL, OPT_NO_PROGRESS},
	{"help", no_argument, NULL, OPT_HELP},
	{"version", no_argument, NULL, OPT_VERSION},
	{NULL, 0, NULL, 0},
};

/* Whether s is valid UTF-8 (what goes into the JSON must be). */
static bool ib_utf8(const char *s)
{
	json_t *j = json_string(s);
	json_decref(j);
	return j != NULL;
}

static int ib_bad(const char *opt, const char *val, const char *want)
{
	fprintf(stderr, "inferd-bench: --%s '%s': expected %s\n", opt, val, want);
	return -1;
}

static int ib_num_arg(const char *opt, const char *val, double lo, double hi, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(val, &end);
	if (errno || end == val || *end || !isfinite(v) || v < lo || v > hi) {
		char want[96];
		snprintf(want, sizeof(want), "a number in [%g, %g]", lo, hi);
		return ib_bad(opt, val, want);
	}
	*out = v;
	return 0;
}

static int ib_int_arg(const char *opt, const char *val, long lo, long hi, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(val, &end, 10);
	if (errno || end == val || *end || v < lo || v > hi) {
		char want[96];
		snprintf(want, sizeof(want), "an integer in [%ld, %ld]", lo, hi);
		return ib_bad(opt, val, want);
	}
	*out = v;
	return 0;
}

static int ib_list_arg(const char *opt, const char *val, bool ints, struct ib_opts *o)
{
	char *copy = strdup(val), *save = NULL;
	int rc = -1;
	free(o->sweep);
	o->sweep = NULL;
	o->n_sweep = 0;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		double v;
		long l;
		if (ints ? ib_int_arg(opt, tok, 1, 100000, &l) : ib_num_arg(opt, tok, 1e-3, 1e7, &v))
			goto out;
		double *s = realloc(o->sweep, (o->n_sweep + 1) * sizeof(*s));
		if (!s)
			goto out;
		o->sweep = s;
		o->sweep[o->n_sweep++] = ints ? (double)l : v;
	}
	rc = o->n_sweep ? 0 : ib_bad(opt, val, "a comma-separated list");
out:
	free(copy);
	return rc;
}

static int ib_order_arg(const char *opt, const char *val, bool *random)
{
	if (!strcmp(val, "rr") || !strcmp(val, "random")) {
		*random = !strcmp(val, "random");
		return 0;
	}
	return ib_bad(opt, val, "rr or random");
}

/* Whether s is printable ASCII (no control bytes; spaces only if sp). */
static bool ib_printable(const char *s, bool sp)
{
	for (; *s; s++)
		if ((unsigned char)*s < (sp ? ' ' : '!') || (unsigned char)*s >= 0x7f)
			return false;
	return true;
}

/* http://host[:port][/prefix] into o->host, o->port, o->prefix. */
static int ib_url_parse(struct ib_opts *o)
{
	const char *u = o->url;
	if (strncmp(u, "http://", 7) != 0)
		return ib_bad("url", u, "http://host[:port][/prefix] (no TLS: put a proxy in front)");
	if (!ib_printable(u, false) || strpbrk(u, "?#"))
		return ib_bad("url", u, "http://host[:port][/prefix] without spaces, control or "
					"non-ASCII bytes, query or fragment");
	u += 7;
	const char *slash = strchr(u, '/');
	size_t hp = slash ? (size_t)(slash - u) : strlen(u);
	char *hostport = strndup(u, hp);
	if (!hostport)
		return -1;
	if (strchr(hostport, '@')) {
		free(hostport);
		return ib_bad("url", o->url, "http://host[:port][/prefix] (no user)");
	}
	bool v6 = hostport[0] == '[';
	char *colon = v6 ? strstr(hostport, "]:") : strrchr(hostport, ':');
	if (colon && v6)
		colon++;
	if (v6 && !strchr(hostport, ']')) {
		free(hostport);
		return ib_bad("url", o->url, "http://[IPv6 address]:port (a closing ])");
	}
	if (colon) {
		*colon = '\0';
		o->port = strdup(colon + 1);
	} else {
		o->port = strdup("80");
	}
	o->host = strdup(hostport[0] == '[' ? hostport + 1 : hostport);
	if (o->host && o->host[0] && o->host[strlen(o->host) - 1] == ']')
		o->host[strlen(o->host) - 1] = '\0';
	free(hostport);
	o->prefix = strdup(slash ? slash : "");
	if (o->prefix && o->prefix[0] && o->prefix[strlen(o->prefix) - 1] == '/')
		o->prefix[strlen(o->prefix) - 1] = '\0';
	char *end = NULL;
	long port = o->port && o->port[0] ? strtol(o->port, &end, 10) : 0;
	if (!o->host || !o->prefix || !o->host[0] || !end || *end || port < 1 || port > 65535)
		return ib_bad("url", o->url, "http://host[:port][/prefix], a port in [1, 65535]");
	return 0;
}

static void ib_opts_free(struct ib_opts *o)
{
	free(o->host);
	free(o->port);
	free(o->prefix);
	free(o->headers);
	free(o->sweep);
}

/* What the load options' checks need to know was given. */
struct ib_seen {
	bool concurrency; /* --concurrency */
	int sweeps;       /* 1: --sweep given, 2: --sweep-rate, 3: both */
};

/* Options of the help's "target:" group (and --header's list). Each
 * ib_opt_* returns 0 when it took option c (named name, argument arg), -1
 * when the argument is bad (message on stderr), 1 when c is not its own. */
static int ib_opt_target(int c, const char *name, char *arg, struct ib_opts *o)
{
	int ep;
	switch (c) {
	case OPT_URL: o->url = arg; return 0;
	case OPT_ENDPOINT:
		if ((ep = ib_endpoint_parse(arg)) < 0)
			return ib_bad(name, arg, "openai-transcriptions, deepgram-listen, "
					"openai-completions, openai-chat, kserve-infer, http-get "
					"or deepgram-live");
		o->proto.ep = (enum ib_endpoint)ep;
		return 0;
	case OPT_WORKLOAD:
		if (!ib_utf8(arg))
			return ib_bad(name, arg, "a UTF-8 file name");
		o->workload_file = arg;
		return 0;
	case OPT_MODEL: o->proto.model = arg; return 0;
	case OPT_PATH:
		if (arg[0] != '/')
			return ib_bad(name, arg, "a path starting with /");
		o->proto.path = arg;
		return 0;
	case OPT_API_KEY:
		if (!arg[0] || !ib_printable(arg, true))
			return ib_bad(name, arg, "a key of printable ASCII characters");
		o->api_key = arg;
		return 0;
	case OPT_HEADER: {
		const char *colon = strchr(arg, ':');
		if (!colon || colon == arg || strpbrk(arg, "\r\n"))
			return ib_bad(name, arg, "'Name: value' on one line");
		char **h = realloc(o->headers, (o->n_headers + 1) * sizeof(*h));
		if (!h)
			return -1;
		o->headers = h;
		o->headers[o->n_headers++] = arg;
		return 0;
	}
	case OPT_LABEL:
		if (!ib_utf8(arg))
			return ib_bad(name, arg, "UTF-8 text");
		o->label = arg;
		return 0;
	default: return 1;
	}
}

/* Options of the "load:" group. */
static int ib_opt_load(int c, const char *name, const char *arg, struct ib_opts *o,
		       struct ib_seen *seen)
{
	long l;
	int rc;
	switch (c) {
	case OPT_CONCURRENCY:
		rc = ib_int_arg(name, arg, 1, 100000, &l);
		o->concurrency = (int)l;
		seen->concurrency = true;
		return rc;
	case OPT_RATE: return ib_num_arg(name, arg, 1e-3, 1e7, &o->rate);
	case OPT_SWEEP:
		rc = ib_list_arg(name, arg, true, o);
		o->sweep_rate = false;
		seen->sweeps |= 1;
		return rc;
	case OPT_SWEEP_RATE:
		rc = ib_list_arg(name, arg, false, o);
		o->sweep_rate = true;
		seen->sweeps |= 2;
		return rc;
	case OPT_DURATION: return ib_num_arg(name, arg, 0.1, 1e6, &o->duration_s);
	case OPT_WARMUP: return ib_num_arg(name, arg, 0, 1e6, &o->warmup_s);
	case OPT_REQUESTS:
		rc = ib_int_arg(name, arg, 1, 1000000000, &l);
		o->requests = l;
		return rc;
	case OPT_TIMEOUT: return ib_num_arg(name, arg, 1e-3, 1e6, &o->timeout_s);
	case OPT_MAX_CONN:
		rc = ib_int_arg(name, arg, 1, 100000, &l);
		o->max_connections = (int)l;
		return rc;
	case OPT_SEED:
		rc = ib_int_arg(name, arg, 0, 0x7fffffffffffffffl, &l);
		o->seed = (uint64_t)l;
		return rc;
	default: return 1;
	}
}

/* Options of the "inputs:" group. */
static int ib_opt_inputs(int c, const char *name, char *arg, struct ib_opts *o)
{
	long l;
	int rc;
	switch (c) {
	case OPT_AUDIO: o->proto.audio_dir = arg; return 0;
	case OPT_AUDIO_ORDER: return ib_order_arg(name, arg, &o->proto.audio_random);
	case OPT_PROMPTS: o->proto.prompts_file = arg; return 0;
	case OPT_PROMPT_ORDER: return ib_order_arg(name, arg, &o->proto.prompt_random);
	case OPT_MAX_TOKENS:
		rc = ib_int_arg(name, arg, 1, 1000000, &l);
		o->proto.max_tokens = (int)l;
		return rc;
	case OPT_TEMPERATURE: return ib_num_arg(name, arg, 0, 100, &o->proto.temperature);
	case OPT_STREAM: o->proto.stream = true; return 0;
	case OPT_SPEED: return ib_num_arg(name, arg, 0.01, 1000, &o->speed);
	case OPT_KEEP_UP: return ib_num_arg(name, arg, 0, 1e6, &o->keep_up_s);
	default: return 1;
	}
}

/* Options of the "output:" group; --help and --version exit here. */
static int ib_opt_output(int c, const char *name, char *arg, struct ib_opts *o)
{
	switch (c) {
	case OPT_PRICE: return ib_num_arg(name, arg, 0, 1e9, &o->price_per_hour);
	case OPT_JSON: o->json_file = arg; return 0;
	case OPT_CSV: o->csv_file = arg; return 0;
	case OPT_HTML: o->html_file = arg; return 0;
	case OPT_QUIET: o->quiet = true; return 0;
	case OPT_NO_PROGRESS: o->progress_tty = 0; return 0;
	case OPT_HELP: ib_usage(stdout); exit(0);
	case OPT_VERSION: printf("inferd-bench %s\n", IB_VERSION); exit(0);
	default: return 1;
	}
}

/* The options that exclude each other, and what else must be given. */
static int ib_opts_check(int argc, char **argv, const struct ib_opts *o,
			 const struct ib_seen *seen)
{
	if (optind < argc) {
		fprintf(stderr, "inferd-bench: unexpected argument '%s'\n", argv[optind]);
		return -1;
	}
	if (!o->workload_file && o->proto.ep == IB_EP_COUNT) {
		fprintf(stderr, "inferd-bench: give --endpoint or --workload (--help lists them)\n");
		return -1;
	}
	if (o->workload_file && o->proto.ep != IB_EP_COUNT) {
		fprintf(stderr, "inferd-bench: --endpoint and --workload exclude each other\n");
		return -1;
	}
	if ((o->rate > 0) + seen->concurrency + (o->n_sweep > 0) > 1 || seen->sweeps == 3) {
		fprintf(stderr, "inferd-bench: give one of --concurrency, --rate, --sweep, "
				"--sweep-rate\n");
		return -1;
	}
	return 0;
}

static int ib_opts_parse(int argc, char **argv, struct ib_opts *o)
{
	*o = (struct ib_opts){
		.url = "http://127.0.0.1:8080",
		.concurrency = 1,
		.duration_s = 10.0,
		.warmup_s = 2.0,
		.timeout_s = 60.0,
		.speed = 1.0,
		.keep_up_s = 1.5,
		.seed = 1,
		.max_connections = 1024,
		.progress_tty = -1,
		.proto = {.ep = IB_EP_COUNT, .max_tokens = 128},
	};
	struct ib_seen seen = {0};
	int c;
	while ((c = getopt_long(argc, argv, "", ib_long_opts, NULL)) != -1) {
		const char *name = NULL;
		for (const struct option *op = ib_long_opts; op->name; op++)
			if (op->val == c)
				name = op->name;
		int rc = ib_opt_target(c, name, optarg, o);
		if (rc == 1)
			rc = ib_opt_load(c, name, optarg, o, &seen);
		if (rc == 1)
			rc = ib_opt_inputs(c, name, optarg, o);
		if (rc == 1)
			rc = ib_opt_output(c, name, optarg, o);
		if (rc == 1) { /* not an option of ours: getopt_long said why */
			ib_usage(stderr);
			return -1;
		}
		if (rc)
			return -1;
	}
	if (ib_opts_check(argc, argv, o, &seen) != 0)
		return -1;
	return ib_url_parse(o);
}

static int ib_resolve(struct ib_run *run, const struct ib_opts *o)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
	struct addrinfo *res = NULL;
	int rc = getaddrinfo(o->host, o->port, &hints, &res);
	if (rc != 0 || !res) {
		fprintf(stderr, "inferd-bench: cannot resolve %s: %s\n", o->host, gai_strerror(rc));
		return -1;
	}
	memcpy(&run->addr, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	return 0;
}

static json_t *ib_opts_json(const struct ib_opts *o, const struct ib_run *run)
{
	json_t *entries = json_array();
	for (size_t i = 0; i < run->n_entries; i++) {
		const struct ib_entry *e = &run->entries[i];
		json_array_append_new(
			entries,
			json_pack("{s:s, s:f, s:s?, s:s?, s:s?, s:s?, s:i, s:f, s:b, s:I}", "endpoint",
				  ib_endpoint_name(e->ep), "weight", e->weight, "model", e->model,
				  "path", e->path, "audio", e->audio_dir, "prompts", e->prompts_file,
				  "max_tokens", e->max_tokens, "temperature", e->temperature, "stream",
				  e->stream, "inputs", (json_int_t)e->n_tmpl));
	}
	json_t *loads = json_array();
	for (size_t i = 0; i < o->n_sweep; i++)
		json_array_append_new(loads, json_real(o->sweep[i]));
	return json_pack("{s:o, s:s?, s:i, s:f, s:o, s:s, s:f, s:f, s:f, s:I, s:I, s:i, s:f, s:f,"
			 " s:f}",
			 "requests", entries, "workload", o->workload_file, "concurrency",
			 o->concurrency, "rate", o->rate, "sweep", loads, "sweep_of",
			 o->sweep_rate ? "rate" : "concurrency", "duration_s", o->duration_s,
			 "warmup_s", o->warmup_s, "timeout_s", o->timeout_s, "requests_per_stage",
			 (json_int_t)o->requests, "seed", (json_int_t)o->seed, "max_connections",
			 o->max_connections, "price_per_hour", o->price_per_hour, "speed", o->speed,
			 "keep_up_s", o->keep_up_s);
}

/* The report goes to FILE.tmp, renamed to FILE once whole: runs of the
 * wrong schema or a full disk leave an existing FILE as it was. */
static int ib_write_html(const char *file, json_t *const *runs, size_t n)
{
	size_t len = strlen(file) + 5;
	char *tmp = malloc(len), err[256] = "";
	FILE *f = tmp ? (snprintf(tmp, len, "%s.tmp", file), fopen(tmp, "w")) : NULL;
	if (!f) {
		fprintf(stderr, "inferd-bench: %s: %s\n", tmp ? tmp : file, strerror(errno));
		free(tmp);
		return -1;
	}
	int rc = ib_html_write(f, runs, n, err, sizeof(err));
	if (fclose(f) != 0 && rc == 0) {
		snprintf(err, sizeof(err), "%s", strerror(errno));
		rc = -1;
	}
	if (rc == 0 && rename(tmp, file) != 0) {
		snprintf(err, sizeof(err), "%s", strerror(errno));
		rc = -1;
	}
	if (rc) {
		fprintf(stderr, "inferd-bench: %s: %s\n", file, err);
		unlink(tmp);
	}
	free(tmp);
	return rc;
}

static int ib_report_main(int argc, char **argv)
{
	const char *html = NULL;
	int i = 1;
	if (i + 1 < argc && !strcmp(argv[i], "--html")) {
		html = argv[i + 1];
		i += 2;
	}
	if (!html || i >= argc) {
		fprintf(stderr, "usage: inferd-bench report --html OUT.html RUN.json [RUN.json ...]\n");
		return 2;
	}
	size_t n = (size_t)(argc - i);
	json_t **runs = calloc(n, sizeof(*runs));
	int rc = 1;
	if (!runs)
		return 1;
	for (size_t k = 0; k < n; k++) {
		json_error_t e;
		runs[k] = json_load_file(argv[i + (int)k], 0, &e);
		if (!runs[k] && e.line > 0)
			fprintf(stderr, "inferd-bench: %s:%d: %s\n", argv[i + (int)k], e.line, e.text);
		else if (!runs[k])
			fprintf(stderr, "inferd-bench: %s\n", e.text);
		if (!runs[k])
			goto out;
	}
	rc = ib_write_html(html, runs, n) ? 1 : 0;
	if (!rc)
		fprintf(stderr, "inferd-bench: wrote %s (%zu runs)\n", html, n);
out:
	for (size_t k = 0; k < n; k++)
		json_decref(runs[k]);
	free(runs);
	return rc;
}

static void ib_iso_now(char *buf, size_t n)
{
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int ib_write_outputs(const struct ib_opts *o, json_t *run_json)
{
	int rc = 0;
	if (o->json_file && json_dump_file(run_json, o->json_file, JSON_INDENT(1)) != 0) {
		fprintf(stderr, "inferd-bench: cannot write %s\n", o->json_file);
		rc = -1;
	}
	if (o->html_file && ib_write_html(o->html_file, &run_json, 1) != 0)
		rc = -1;
	return rc;
}

/* ib_run_init - run ready for its stages from o: the address, the
 * workload and the CSV file. -1 with a message on stderr. */
static int ib_run_init(struct ib_run *run, const struct ib_opts *o)
{
	signal(SIGPIPE, SIG_IGN);
	run->o = o;
	run->rng = o->seed * 0x9e3779b97f4a7c15ull + 1;
	run->loop = uv_default_loop();
	run->tty = o->progress_tty != 0 && isatty(fileno(stderr));
	if (ib_resolve(run, o) != 0 || ib_work_load(run, o) != 0)
		return -1;
	if (o->csv_file) {
		run->csv = fopen(o->csv_file, "w");
		if (!run->csv) {
			fprintf(stderr, "inferd-bench: %s: %s\n", o->csv_file, strerror(errno));
			return -1;
		}
		ib_stats_csv_header(run->csv);
	}
	return 0;
}

/* The run's timers and its SIGINT handler, on the loop for every stage. */
static void ib_handles_init(struct ib_run *run)
{
	uv_timer_init(run->loop, &run->arrival);
	uv_timer_init(run->loop, &run->phase_timer);
	uv_timer_init(run->loop, &run->progress);
	uv_signal_init(run->loop, &run->sigint);
	run->arrival.data = run->phase_timer.data = run->progress.data = run->sigint.data = run;
	uv_signal_start(&run->sigint, ib_load_on_sigint, SIGINT);
}

static void ib_handles_close(struct ib_run *run)
{
	uv_close((uv_handle_t *)&run->arrival, NULL);
	uv_close((uv_handle_t *)&run->phase_timer, NULL);
	uv_close((uv_handle_t *)&run->progress, NULL);
	uv_close((uv_handle_t *)&run->sigint, NULL);
	uv_run(run->loop, UV_RUN_DEFAULT);
	uv_loop_close(run->loop);
}

/* ib_run_stages - every stage in turn (one unless a sweep), its summary
 * appended to run->stages and its records to the CSV; stops after SIGINT.
 * Returns 0, or 1 when a stage failed. */
static int ib_run_stages(struct ib_run *run)
{
	const struct ib_opts *o = run->o;
	size_t n_stages = o->n_sweep ? o->n_sweep : 1;
	for (size_t i = 0; i < n_stages && !run->aborted; i++) {
		double load = o->n_sweep ? o->sweep[i] : o->rate > 0 ? o->rate : o->concurrency;
		bool rate = o->n_sweep ? o->sweep_rate : o->rate > 0;
		char name[64];
		snprintf(name, sizeof(name), "%s %g", rate ? "rate" : "concurrency", load);
		size_t first = run->n_recs;
		if (ib_load_stage(run, (int)i, load) != 0)
			return 1;
		json_t *st = ib_stats_stage(run, (int)i, name);
		if (!st)
			return 1;
		json_array_append_new(run->stages, st);
		for (size_t k = first; run->csv && k < run->n_recs; k++)
			ib_stats_csv_row(run->csv, run, &run->recs[k]);
	}
	return 0;
}

/* ib_run_report - the run's JSON (label, start time, options, stages):
 * the table on stdout, then the --json and --html files. 0, or 1 when
 * something could not be written. */
static int ib_run_report(const struct ib_run *run, const char *label, const char *started)
{
	const struct ib_opts *o = run->o;
	int rc = 0;
	json_t *run_json = json_pack("{s:s, s:i, s:s, s:s, s:s, s:s, s:o, s:O}", "tool",
				     "inferd-bench", "schema", 1, "version", IB_VERSION, "label", label,
				     "url", o->url, "started", started, "options", ib_opts_json(o, run),
				     "stages", run->stages);
	if (!run_json) {
		fprintf(stderr, "inferd-bench: out of memory\n");
		rc = 1;
	} else {
		ib_stats_table(stdout, run_json);
		if (ib_write_outputs(o, run_json) != 0)
			rc = 1;
	}
	json_decref(run_json);
	return rc;
}

/* What ib_run_init and the stages allocated (run is not used after). */
static void ib_run_free(struct ib_run *run)
{
	if (run->csv)
		fclose(run->csv);
	json_decref(run->stages);
	ib_work_free(run);
	ib_rec_free_all(run);
	free(run->idle);
	free(run->pending);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "report"))
		return ib_report_main(argc - 1, argv + 1);
	struct ib_opts o;
	struct ib_run run = {0};
	int rc = 2;
	if (ib_opts_parse(argc, argv, &o) != 0)
		goto out_opts;
	if (ib_run_init(&run, &o) != 0)
		goto out_run;
	ib_handles_init(&run);
	char host_port[300], started[32];
	snprintf(host_port, sizeof(host_port), "%s:%s", o.host, o.port);
	const char *label = o.label ? o.label : host_port;
	ib_iso_now(started, sizeof(started));
	run.stages = json_array();
	run.t0_ns = uv_hrtime();
	rc = ib_run_stages(&run);
	if (ib_run_report(&run, label, started) != 0)
		rc = 1;
	if (run.csv && fclose(run.csv) != 0) {
		fprintf(stderr, "inferd-bench: cannot write %s\n", o.csv_file);
		rc = 1;
	}
	run.csv = NULL;
	ib_handles_close(&run);
out_run:
	ib_run_free(&run);
out_opts:
	ib_opts_free(&o);
	return rc;
}
