/* ib_work.c - what inferd-bench sends and how it reads the answers: the
 * endpoints of docs/bench.md, the inputs (audio files, prompts), the
 * workload file, one prebuilt request per input, and the checks of 2xx
 * bodies and event-stream payloads.
 *
 * Request shapes follow each protocol's published API: OpenAI's
 * /v1/audio/transcriptions (multipart), /v1/completions and
 * /v1/chat/completions (JSON, "stream": true for SSE ending "[DONE]");
 * Deepgram's pre-recorded /v1/listen (the audio as the body, options in the
 * query); KServe v2's /v2/models/{name}/infer (JSON tensors, and the binary
 * tensor data extension for audio).
 */
#include <ctype.h>
#include <stdarg.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <libavformat/avformat.h>
#include <libavutil/log.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "ib_int.h"

static const char *const ib_ep_names[IB_EP_COUNT] = {
	[IB_EP_OPENAI_TRANSCRIPTIONS] = "openai-transcriptions",
	[IB_EP_DEEPGRAM_LISTEN] = "deepgram-listen",
	[IB_EP_OPENAI_COMPLETIONS] = "openai-completions",
	[IB_EP_OPENAI_CHAT] = "openai-chat",
	[IB_EP_KSERVE_INFER] = "kserve-infer",
	[IB_EP_HTTP_GET] = "http-get",
	[IB_EP_DEEPGRAM_LIVE] = "deepgram-live",
};

int ib_endpoint_parse(const char *name)
{
	for (int i = 0; i < IB_EP_COUNT; i++)
		if (!strcmp(name, ib_ep_names[i]))
			return i;
	return -1;
}

const char *ib_endpoint_name(enum ib_endpoint ep)
{
	return ep < IB_EP_COUNT ? ib_ep_names[ep] : "?";
}

bool ib_endpoint_is_audio(enum ib_endpoint ep)
{
	return ep == IB_EP_OPENAI_TRANSCRIPTIONS || ep == IB_EP_DEEPGRAM_LISTEN ||
	       ep == IB_EP_DEEPGRAM_LIVE;
}

const char *ib_kind_name(enum ib_kind k)
{
	static const char *const names[IB_KIND_COUNT] = {"ok", "http", "connect", "timeout",
							 "protocol", "close"};
	return k < IB_KIND_COUNT ? names[k] : "?";
}

uint64_t ib_rng_next(uint64_t *s)
{
	uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ull;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

double ib_rng_unit(uint64_t *s)
{
	return (double)(ib_rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* --- growable text buffer (start-up only: out of memory aborts) -------- */

struct ib_sb {
	char *p;
	size_t len, cap;
};

static void ib_sb_add(struct ib_sb *b, const void *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			fprintf(stderr, "inferd-bench: out of memory\n");
			exit(2);
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void ib_sb_str(struct ib_sb *b, const char *s)
{
	ib_sb_add(b, s, strlen(s));
}

static void ib_sb_fmt(struct ib_sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ib_sb_fmt(struct ib_sb *b, const char *fmt, ...)
{
	char tmp[512], *big = NULL;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n <= 0)
		return;
	if ((size_t)n >= sizeof(tmp)) { /* a long path, host or key: never cut */
		big = malloc((size_t)n + 1);
		if (!big) {
			fprintf(stderr, "inferd-bench: out of memory\n");
			exit(2);
		}
		va_start(ap, fmt);
		vsnprintf(big, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	ib_sb_add(b, big ? big : tmp, (size_t)n);
	free(big);
}

/* --- inputs ------------------------------------------------------------ */

static const char *ib_audio_ctype(const char *path)
{
	const char *dot = strrchr(path, '.');
	static const struct {
		const char *ext, *ctype;
	} map[] = {{".wav", "audio/wav"}, {".flac", "audio/flac"}, {".mp3", "audio/mpeg"},
		   {".ogg", "audio/ogg"},  {".opus", "audio/ogg"}};
	for (size_t i = 0; dot && i < sizeof(map) / sizeof(map[0]); i++)
		if (!strcasecmp(dot, map[i].ext))
			return map[i].ctype;
	return NULL;
}

/* Read a regular file whole: 0, or -1 with a reason in *why. */
static int ib_read_file(const char *path, unsigned char **data, size_t *len, const char **why)
{
	FILE *f = fopen(path, "rb");
	*why = strerror(errno);
	if (!f)
		return -1;
	int rc = -1;
	struct stat st;
	if (fstat(fileno(f), &st) != 0)
		goto out_close;
	*why = !S_ISREG(st.st_mode) ? "not a regular file"
	       : st.st_size <= 0    ? "empty file"
				    : "larger than 1 GiB";
	if (!S_ISREG(st.st_mode) || st.st_size <= 0 || st.st_size > (1l << 30))
		goto out_close;
	*why = "short read";
	*len = (size_t)st.st_size;
	*data = malloc(*len);
	if (!*data || fread(*data, 1, *len, f) != *len) {
		free(*data);
		*data = NULL;
		goto out_close;
	}
	rc = 0;
out_close:
	fclose(f);
	return rc;
}

/* Seconds of audio in the file at path, as libavformat states them (the
 * first audio stream's duration, else the container's), or -1. */
static double ib_audio_seconds(const char *path)
{
	AVFormatContext *fmt = NULL;
	double s = -1.0;
	av_log_set_level(AV_LOG_ERROR);
	if (avformat_open_input(&fmt, path, NULL, NULL) < 0)
		return -1.0;
	if (avformat_find_stream_info(fmt, NULL) < 0)
		goto out_close;
	for (unsigned i = 0; i < fmt->nb_streams && s < 0; i++) {
		const AVStream *st = fmt->streams[i];
		if (st->codecpar->codec_type == AVMEDIA_TYPE_AUDIO && st->duration > 0)
			s = (double)st->duration * av_q2d(st->time_base);
	}
	if (s < 0 && fmt->duration > 0)
		s = (double)fmt->duration / AV_TIME_BASE;
out_close:
	avformat_close_input(&fmt);
	return s;
}

static int ib_audio_load(struct ib_audio *a, const char *path)
{
	memset(a, 0, sizeof(*a));
	a->ctype = ib_audio_ctype(path);
	const char *why;
	if (ib_read_file(path, &a->data, &a->len, &why) != 0) {
		fprintf(stderr, "inferd-bench: cannot read %s: %s\n", path, why);
		return -1;
	}
	a->seconds = ib_audio_seconds(path);
	if (!(a->seconds > 0.0)) {
		fprintf(stderr, "inferd-bench: %s: not audio FFmpeg can read\n", path);
		free(a->data);
		return -1;
	}
	a->path = strdup(path);
	return a->path ? 0 : -1;
}

static int ib_cmp_str(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

/* The regular files of folder path with an audio extension, sorted by
 * name, into *names / *n_names (a FIFO or a folder named x.wav is
 * skipped: opening a FIFO would block). Returns 0 or -1 (out of memory, or
 * the folder cannot be read). */
static int ib_audio_list(const char *path, char ***names, size_t *n_names)
{
	DIR *d = opendir(path);
	struct dirent *e;
	if (!d) {
		fprintf(stderr, "inferd-bench: --audio %s: %s\n", path, strerror(errno));
		return -1;
	}
	while ((e = readdir(d))) {
		struct stat st;
		if (!ib_audio_ctype(e->d_name))
			continue;
		size_t l = strlen(path) + strlen(e->d_name) + 2;
		char *full = malloc(l);
		char **nn = full ? realloc(*names, (*n_names + 1) * sizeof(**names)) : NULL;
		if (!nn) {
			free(full);
			closedir(d);
			return -1;
		}
		*names = nn;
		snprintf(full, l, "%s/%s", path, e->d_name);
		if (stat(full, &st) != 0 || !S_ISREG(st.st_mode)) {
			free(full);
			continue;
		}
		(*names)[(*n_names)++] = full;
	}
	closedir(d);
	if (*n_names)
		qsort(*names, *n_names, sizeof(**names), ib_cmp_str);
	return 0;
}

/* Append the audio files of path (a file, or a folder's audio files by
 * name) to run->audio; *first / *n the range added. */
static int ib_audio_add(struct ib_run *run, const char *path, size_t *first, size_t *n)
{
	struct stat st;
	char **names = NULL;
	size_t n_names = 0;
	int rc = -1;
	if (stat(path, &st) != 0) {
		fprintf(stderr, "inferd-bench: --audio %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (S_ISDIR(st.st_mode)) {
		if (ib_audio_list(path, &names, &n_names) != 0)
			goto out_free;
	} else if (!S_ISREG(st.st_mode)) {
		fprintf(stderr, "inferd-bench: --audio %s: not a regular file or a folder\n", path);
		return -1;
	} else {
		names = malloc(sizeof(*names));
		if (!names || !(names[0] = strdup(path)))
			goto out_free;
		n_names = 1;
	}
	if (!n_names) {
		fprintf(stderr, "inferd-bench: --audio %s: no regular .wav/.flac/.ogg/.mp3/.opus "
				"file\n", path);
		goto out_free;
	}
	struct ib_audio *a = realloc(run->audio, (run->n_audio + n_names) * sizeof(*a));
	if (!a)
		goto out_free;
	run->audio = a;
	*first = run->n_audio;
	*n = 0;
	for (size_t i = 0; i < n_names; i++) {
		if (ib_audio_load(&run->audio[run->n_audio], names[i]) != 0)
			goto out_free;
		run->n_audio++;
		(*n)++;
	}
	rc = 0;
out_free:
	for (size_t i = 0; i < n_names; i++)
		free(names[i]);
	free(names);
	return rc;
}

static const char *const ib_builtin_prompts[] = {
	"Explain in two sentences why the sky is blue.",
	"Write a short poem about a lighthouse.",
	"List three uses of a paperclip.",
	"What is the capital of France, and why is it famous?",
	"Summarise the plot of Romeo and Juliet in three sentences.",
	"Give me a recipe for a simple tomato soup.",
	"Describe how a bicycle works to a child.",
	"What are the benefits of regular exercise?",
};

/* Prompts: an array of JSON values, each a string or an object with
 * "prompt" or "messages". */
static json_t *ib_prompts_load(const char *file)
{
	json_t *arr = json_array();
	if (!file) {
		for (size_t i = 0; i < sizeof(ib_builtin_prompts) / sizeof(ib_builtin_prompts[0]); i++)
			json_array_append_new(arr, json_string(ib_builtin_prompts[i]));
		return arr;
	}
	FILE *f = fopen(file, "r");
	if (!f) {
		fprintf(stderr, "inferd-bench: --prompts %s: %s\n", file, strerror(errno));
		json_decref(arr);
		return NULL;
	}
	char *line = NULL;
	size_t cap = 0, lineno = 0;
	ssize_t n;
	while ((n = getline(&line, &cap, f)) >= 0) {
		lineno++;
		size_t i = 0;
		while (i < (size_t)n && isspace((unsigned char)line[i]))
			i++;
		if (i == (size_t)n)
			continue;
		json_error_t e;
		json_t *v = json_loadb(line, (size_t)n, JSON_DECODE_ANY, &e);
		bool ok = v && (json_is_string(v) ||
				(json_is_object(v) && (json_is_string(json_object_get(v, "prompt")) ||
						       json_is_array(json_object_get(v, "messages")))));
		if (!ok) {
			fprintf(stderr,
				"inferd-bench: %s:%zu: expected a JSON string or an object with "
				"\"prompt\" or \"messages\"%s%s\n",
				file, lineno, v ? "" : ": ", v ? "" : e.text);
			json_decref(v);
			json_decref(arr);
			free(line);
			fclose(f);
			return NULL;
		}
		json_array_append_new(arr, v);
	}
	free(line);
	fclose(f);
	if (!json_array_size(arr)) {
		fprintf(stderr, "inferd-bench: --prompts %s: no prompt\n", file);
		json_decref(arr);
		return NULL;
	}
	return arr;
}

/* The prompt text of p (messages' contents joined by newlines). */
static void ib_prompt_text(json_t *p, struct ib_sb *out)
{
	if (json_is_string(p)) {
		ib_sb_str(out, json_string_value(p));
		return;
	}
	json_t *s = json_object_get(p, "prompt");
	if (json_is_string(s)) {
		ib_sb_str(out, json_string_value(s));
		return;
	}
	size_t i;
	json_t *m;
	json_array_foreach(json_object_get(p, "messages"), i, m)
	{
		json_t *c = json_object_get(m, "content");
		if (i)
			ib_sb_str(out, "\n");
		if (json_is_string(c))
			ib_sb_str(out, json_string_value(c));
	}
}

/* The messages of p (a prompt becomes one user message); new reference. */
static json_t *ib_prompt_messages(json_t *p)
{
	json_t *m = json_is_object(p) ? json_object_get(p, "messages") : NULL;
	if (json_is_array(m))
		return json_incref(m);
	struct ib_sb t = {0};
	ib_prompt_text(p, &t);
	json_t *arr = json_pack("[{s:s, s:s}]", "role", "user", "content", t.p ? t.p : "");
	free(t.p);
	return arr;
}

/* --- requests ---------------------------------------------------------- */

/* Percent-encode s for a query value (RFC 3986 unreserved kept). */
static void ib_sb_query(struct ib_sb *b, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~')
			ib_sb_add(b, s, 1);
		else
			ib_sb_fmt(b, "%%%02X", c);
	}
}

static void ib_head(struct ib_sb *h, const struct ib_opts *o, const char *method,
		    const char *path, const char *ctype, size_t body_len, bool token_auth,
		    bool sse)
{
	bool v6 = strchr(o->host, ':') != NULL; /* an IPv6 literal goes in brackets */
	ib_sb_fmt(h, "%s %s%s HTTP/1.1\r\nHost: %s%s%s:%s\r\nUser-Agent: inferd-bench/%s\r\n",
		  method, o->prefix, path, v6 ? "[" : "", o->host, v6 ? "]" : "", o->port,
		  IB_VERSION);
	if (ctype)
		ib_sb_fmt(h, "Content-Type: %s\r\nContent-Length: %zu\r\n", ctype, body_len);
	ib_sb_str(h, sse ? "Accept: text/event-stream\r\n" : "Accept: application/json\r\n");
	if (o->api_key)
		ib_sb_fmt(h, "Authorization: %s %s\r\n", token_auth ? "Token" : "Bearer",
			  o->api_key);
	for (size_t i = 0; i < o->n_headers; i++) {
		ib_sb_str(h, o->headers[i]);
		ib_sb_str(h, "\r\n");
	}
	ib_sb_str(h, "\r\n");
}

#define IB_BOUNDARY "inferd-bench-8c1f4e7a2b9d"

static void ib_multipart_field(struct ib_sb *b, const char *name, const char *value)
{
	ib_sb_fmt(b, "--" IB_BOUNDARY "\r\nContent-Disposition: form-data; name=\"%s\"\r\n\r\n",
		  name);
	ib_sb_str(b, value);
	ib_sb_str(b, "\r\n");
}

/* KServe's /v2/models/{model}/infer, the model name percent-encoded. */
static void ib_kserve_path(struct ib_sb *p, const char *model)
{
	ib_sb_str(p, "/v2/models/");
	ib_sb_query(p, model);
	ib_sb_str(p, "/infer");
}

static const char *ib_basename(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

/* The head of a deepgram-live stream's upgrade request (RFC 6455 4.1)
 * without its blank line: ib_live.c adds a Sec-WebSocket-Key of its own
 * to each stream's. The audio goes as 16 kHz s16le (ib_pcm.c). */
static void ib_build_live(struct ib_sb *h, const struct ib_opts *o, const struct ib_entry *e)
{
	struct ib_sb path = {0};
	ib_sb_str(&path, e->path ? e->path : "/v1/listen");
	ib_sb_str(&path, strchr(path.p, '?') ? "&" : "?");
	ib_sb_str(&path, "encoding=linear16&sample_rate=16000&interim_results=true&model=");
	ib_sb_query(&path, e->model);
	ib_head(h, o, "GET", path.p, NULL, 0, true, false);
	h->len -= 2;
	ib_sb_str(h, "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n");
	free(path.p);
}

/* The body and head of one audio request. */
static void ib_build_audio(struct ib_sb *h, struct ib_sb *b, const struct ib_opts *o,
			   const struct ib_entry *e, const struct ib_audio *a)
{
	struct ib_sb path = {0};
	switch (e->ep) {
	case IB_EP_OPENAI_TRANSCRIPTIONS:
		ib_multipart_field(b, "model", e->model);
		ib_multipart_field(b, "response_format", "json");
		ib_sb_str(b, "--" IB_BOUNDARY "\r\nContent-Disposition: form-data; name=\"file\"; "
			     "filename=\"");
		for (const char *s = ib_basename(a->path); *s; s++)
			ib_sb_add(b, *s == '"' || *s == '\r' || *s == '\n' ? "_" : s, 1);
		ib_sb_fmt(b, "\"\r\nContent-Type: %s\r\n\r\n", a->ctype);
		ib_sb_add(b, a->data, a->len);
		ib_sb_str(b, "\r\n--" IB_BOUNDARY "--\r\n");
		ib_head(h, o, "POST", e->path ? e->path : "/v1/audio/transcriptions",
			"multipart/form-data; boundary=" IB_BOUNDARY, b->len, false, false);
		break;
	case IB_EP_DEEPGRAM_LISTEN:
		ib_sb_str(&path, e->path ? e->path : "/v1/listen");
		ib_sb_str(&path, strchr(path.p, '?') ? "&model=" : "?model=");
		ib_sb_query(&path, e->model);
		ib_sb_add(b, a->data, a->len);
		ib_head(h, o, "POST", path.p, a->ctype, b->len, true, false);
		break;
	default: { /* kserve-infer: AUDIO as one BYTES element, binary extension */
		json_t *hdr = json_pack("{s:[{s:s, s:[i], s:s, s:{s:I}}], s:[{s:s, s:{s:b}}]}",
					"inputs", "name", "AUDIO", "shape", 1, "datatype", "BYTES",
					"parameters", "binary_data_size", (json_int_t)(a->len + 4),
					"outputs", "name", "TRANSCRIPT", "parameters",
					"binary_data", 0);
		char *js = json_dumps(hdr, JSON_COMPACT);
		json_decref(hdr);
		size_t hl = strlen(js);
		ib_sb_add(b, js, hl);
		free(js);
		unsigned char len4[4] = {(unsigned char)a->len, (unsigned char)(a->len >> 8),
					 (unsigned char)(a->len >> 16),
					 (unsigned char)(a->len >> 24)};
		ib_sb_add(b, len4, 4);
		ib_sb_add(b, a->data, a->len);
		ib_kserve_path(&path, e->model);
		char extra[64];
		snprintf(extra, sizeof(extra), "Inference-Header-Content-Length: %zu", hl);
		struct ib_opts o2 = *o;
		char **hs = malloc((o->n_headers + 1) * sizeof(*hs));
		if (!hs) {
			fprintf(stderr, "inferd-bench: out of memory\n");
			exit(2);
		}
		memcpy(hs, o->headers, o->n_headers * sizeof(*hs));
		hs[o->n_headers] = extra;
		o2.headers = hs;
		o2.n_headers = o->n_headers + 1;
		ib_head(h, &o2, "POST", e->path ? e->path : path.p, "application/octet-stream",
			b->len, false, false);
		free(hs);
		break;
	}
	}
	free(path.p);
}

/* The body and head of one text request. */
static void ib_build_text(struct ib_sb *h, struct ib_sb *b, const struct ib_opts *o,
			  const struct ib_entry *e, json_t *prompt)
{
	json_t *body = NULL;
	const char *path = e->path;
	struct ib_sb text = {0}, kpath = {0};
	switch (e->ep) {
	case IB_EP_OPENAI_COMPLETIONS:
		ib_prompt_text(prompt, &text);
		body = json_pack("{s:s, s:s, s:i, s:f, s:b}", "model", e->model, "prompt",
				 text.p ? text.p : "", "max_tokens", e->max_tokens, "temperature",
				 e->temperature, "stream", e->stream);
		path = path ? path : "/v1/completions";
		break;
	case IB_EP_OPENAI_CHAT:
		body = json_pack("{s:s, s:o, s:i, s:f, s:b}", "model", e->model, "messages",
				 ib_prompt_messages(prompt), "max_tokens", e->max_tokens,
				 "temperature", e->temperature, "stream", e->stream);
		path = path ? path : "/v1/chat/completions";
		break;
	default: /* kserve-infer, TEXT_INPUT */
		ib_prompt_text(prompt, &text);
		body = json_pack("{s:[{s:s, s:[i], s:s, s:[s]}], s:{s:i, s:f}}", "inputs", "name",
				 "TEXT_INPUT", "shape", 1, "datatype", "BYTES", "data",
				 text.p ? text.p : "", "parameters", "max_tokens", e->max_tokens,
				 "temperature", e->temperature);
		ib_kserve_path(&kpath, e->model);
		path = path ? path : kpath.p;
		break;
	}
	char *js = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	free(text.p);
	if (!js) {
		fprintf(stderr, "inferd-bench: out of memory\n");
		exit(2);
	}
	ib_sb_str(b, js);
	free(js);
	ib_head(h, o, "POST", path, "application/json", b->len, false, e->stream);
	free(kpath.p);
}

static void ib_tmpl_set(struct ib_tmpl *t, struct ib_sb *h, struct ib_sb *b, double audio_s,
			int input)
{
	if (b->len)
		ib_sb_add(h, b->p, b->len);
	t->bytes = h->p;
	t->len = h->len;
	t->audio_s = audio_s;
	t->input = input;
	free(b->p);
}

/* The requests of audio entry e, one per file of e->audio_dir (added to
 * run->audio; decoded to PCM too for deepgram-live). */
static int ib_entry_build_audio(struct ib_run *run, const struct ib_opts *o, struct ib_entry *e)
{
	if (!e->audio_dir) {
		fprintf(stderr, "inferd-bench: %s needs --audio (a file or a folder)\n",
			ib_endpoint_name(e->ep));
		return -1;
	}
	size_t first = 0, n = 0;
	if (ib_audio_add(run, e->audio_dir, &first, &n) != 0)
		return -1;
	e->tmpl = calloc(n, sizeof(*e->tmpl));
	if (!e->tmpl)
		return -1;
	for (size_t i = 0; i < n; i++) {
		struct ib_sb h = {0}, b = {0};
		struct ib_audio *a = &run->audio[first + i];
		if (!a->ctype) {
			fprintf(stderr, "inferd-bench: %s: unknown audio type\n", a->path);
			return -1;
		}
		bool live = e->ep == IB_EP_DEEPGRAM_LIVE;
		if (live && ib_pcm_decode(a->path, &a->pcm, &a->n_pcm) != 0)
			return -1;
		if (live)
			ib_build_live(&h, o, e);
		else
			ib_build_audio(&h, &b, o, e, a);
		ib_tmpl_set(&e->tmpl[i], &h, &b, a->seconds, (int)(first + i));
	}
	e->n_tmpl = n;
	return 0;
}

static int ib_entry_build(struct ib_run *run, const struct ib_opts *o, struct ib_entry *e)
{
	if (e->ep == IB_EP_HTTP_GET) {
		e->tmpl = calloc(1, sizeof(*e->tmpl));
		if (!e->tmpl)
			return -1;
		struct ib_sb h = {0}, b = {0};
		ib_head(&h, o, "GET", e->path ? e->path : "/v2/health/live", NULL, 0, false, false);
		ib_tmpl_set(&e->tmpl[0], &h, &b, 0.0, 0);
		e->n_tmpl = 1;
		return 0;
	}
	if (ib_endpoint_is_audio(e->ep) || (e->ep == IB_EP_KSERVE_INFER && e->audio_dir))
		return ib_entry_build_audio(run, o, e);
	json_t *prompts = ib_prompts_load(e->prompts_file);
	if (!prompts)
		return -1;
	size_t n = json_array_size(prompts);
	e->tmpl = calloc(n, sizeof(*e->tmpl));
	if (!e->tmpl) {
		json_decref(prompts);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		struct ib_sb h = {0}, b = {0};
		ib_build_text(&h, &b, o, e, json_array_get(prompts, i));
		ib_tmpl_set(&e->tmpl[i], &h, &b, 0.0, (int)i);
	}
	e->n_tmpl = n;
	json_decref(prompts);
	return 0;
}

/* --- workload file ----------------------------------------------------- */

/* Field key of entry j as a new string, or a copy of dflt (may be NULL)
 * when it is absent; -1 when it is there but not a string. */
static int ib_str_field(json_t *j, const char *key, const char *dflt, char **out, size_t i)
{
	json_t *v = json_object_get(j, key);
	if (v && !json_is_string(v)) {
		fprintf(stderr, "inferd-bench: requests[%zu].%s: expected a string\n", i, key);
		return -1;
	}
	const char *s = v ? json_string_value(v) : dflt;
	*out = s ? strdup(s) : NULL;
	return 0;
}

static int ib_order(json_t *v, bool dflt, bool *out, const char *what, size_t i)
{
	*out = dflt;
	if (!v)
		return 0;
	const char *s = json_string_value(v);
	if (s && !strcmp(s, "rr"))
		*out = false;
	else if (s && !strcmp(s, "random"))
		*out = true;
	else {
		fprintf(stderr, "inferd-bench: requests[%zu].%s: expected \"rr\" or \"random\"\n", i,
			what);
		return -1;
	}
	return 0;
}

static const char *const ib_entry_keys[] = {
	"endpoint", "weight", "model", "path", "audio", "audio_order", "prompts",
	"prompt_order", "max_tokens", "temperature", "stream",
};

/* Entry i (j) is an object of known keys only; -1 with a message if not. */
static int ib_entry_keys_check(json_t *j, size_t i)
{
	const char *k;
	json_t *v;
	if (!json_is_object(j)) {
		fprintf(stderr, "inferd-bench: requests[%zu]: expected an object\n", i);
		return -1;
	}
	json_object_foreach(j, k, v)
	{
		bool known = false;
		for (size_t n = 0; n < sizeof(ib_entry_keys) / sizeof(ib_entry_keys[0]); n++)
			known |= !strcmp(k, ib_entry_keys[n]);
		if (!known) {
			fprintf(stderr, "inferd-bench: requests[%zu]: unknown field \"%s\"\n", i, k);
			return -1;
		}
	}
	return 0;
}

/* Entry i's "weight" (w, NULL: 1) into *out, in (0, 1e9]. */
static int ib_entry_weight(json_t *w, size_t i, double *out)
{
	*out = w ? json_number_value(w) : 1.0;
	if (!json_is_number(w) && w) {
		fprintf(stderr, "inferd-bench: requests[%zu].weight: expected a number\n", i);
		return -1;
	}
	if (!(*out > 0) || !(*out <= 1e9)) { /* their sum stays finite */
		fprintf(stderr, "inferd-bench: requests[%zu].weight: expected a number in (0, 1e9]\n",
			i);
		return -1;
	}
	return 0;
}

static int ib_workload_entry(json_t *j, size_t i, const struct ib_entry *dflt, struct ib_entry *e)
{
	if (ib_entry_keys_check(j, i) != 0)
		return -1;
	int ep = ib_endpoint_parse(json_string_value(json_object_get(j, "endpoint")) ?: "");
	if (ep < 0) {
		fprintf(stderr, "inferd-bench: requests[%zu].endpoint: expected one of "
				"openai-transcriptions, deepgram-listen, openai-completions, "
				"openai-chat, kserve-infer, http-get, deepgram-live\n", i);
		return -1;
	}
	*e = (struct ib_entry){.ep = (enum ib_endpoint)ep};
	if (ib_entry_weight(json_object_get(j, "weight"), i, &e->weight) != 0)
		return -1;
	json_t *mt = json_object_get(j, "max_tokens"), *t = json_object_get(j, "temperature");
	json_t *st = json_object_get(j, "stream");
	if ((mt && (!json_is_integer(mt) || json_integer_value(mt) < 1 ||
		    json_integer_value(mt) > 1000000)) ||
	    (t && (!json_is_number(t) || json_number_value(t) < 0 || json_number_value(t) > 100)) ||
	    (st && !json_is_boolean(st))) {
		fprintf(stderr, "inferd-bench: requests[%zu]: max_tokens must be an integer in "
				"[1, 1000000], temperature a number in [0, 100], stream a boolean\n", i);
		return -1;
	}
	e->max_tokens = mt ? (int)json_integer_value(mt) : dflt->max_tokens;
	e->temperature = t ? json_number_value(t) : dflt->temperature;
	e->stream = st ? json_is_true(st) : dflt->stream;
	const char *dm = ib_endpoint_is_audio(e->ep) ? "whisper-tiny.en" : "gemma-3-270m";
	if (ib_str_field(j, "model", dflt->model ? dflt->model : dm, &e->model, i) ||
	    ib_str_field(j, "path", NULL, &e->path, i) ||
	    ib_str_field(j, "audio", dflt->audio_dir, &e->audio_dir, i) ||
	    ib_str_field(j, "prompts", dflt->prompts_file, &e->prompts_file, i) ||
	    ib_order(json_object_get(j, "audio_order"), dflt->audio_random, &e->audio_random,
		     "audio_order", i) ||
	    ib_order(json_object_get(j, "prompt_order"), dflt->prompt_random, &e->prompt_random,
		     "prompt_order", i))
		return -1;
	return 0;
}

/* Whether s can go into a request line as it is: printable ASCII without
 * spaces or '#' (anything else must be percent-encoded). */
static bool ib_target_ok(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s <= ' ' || (unsigned char)*s >= 0x7f || *s == '#')
			return false;
	return true;
}

/* Whether s (or NULL) is valid UTF-8: the run's JSON holds it. */
static bool ib_utf8_or_null(const char *s)
{
	json_t *j = s ? json_string(s) : NULL;
	json_decref(j);
	return !s || j;
}

/* An entry's path fits a request line, and its model and file names fit
 * JSON strings (what names the field in messages: "--" or
 * "requests[i]."). */
static int ib_entry_check(const struct ib_entry *e, const char *what)
{
	if (e->path && (e->path[0] != '/' || !ib_target_ok(e->path))) {
		fprintf(stderr, "inferd-bench: %spath '%s': expected a path starting with / without "
				"spaces, control or non-ASCII bytes (percent-encode them)\n", what,
			e->path);
		return -1;
	}
	const char *names[] = {"model", "audio", "prompts"};
	const char *vals[] = {e->model, e->audio_dir, e->prompts_file};
	for (size_t k = 0; k < 3; k++)
		if (!ib_utf8_or_null(vals[k])) {
			fprintf(stderr, "inferd-bench: %s%s: not UTF-8\n", what, names[k]);
			return -1;
		}
	return 0;
}

int ib_work_load(struct ib_run *run, const struct ib_opts *o)
{
	if (!o->workload_file) {
		run->entries = calloc(1, sizeof(*run->entries));
		if (!run->entries)
			return -1;
		run->entries[0] = o->proto;
		struct ib_entry *e = &run->entries[0];
		e->weight = 1.0;
		e->model = strdup(o->proto.model ? o->proto.model
				  : ib_endpoint_is_audio(e->ep) || (e->ep == IB_EP_KSERVE_INFER &&
								    e->audio_dir)
					  ? "whisper-tiny.en"
					  : "gemma-3-270m");
		e->path = o->proto.path ? strdup(o->proto.path) : NULL;
		e->audio_dir = o->proto.audio_dir ? strdup(o->proto.audio_dir) : NULL;
		e->prompts_file = o->proto.prompts_file ? strdup(o->proto.prompts_file) : NULL;
		run->n_entries = 1;
	} else {
		json_error_t err;
		json_t *w = json_load_file(o->workload_file, 0, &err);
		json_t *reqs = json_object_get(w, "requests");
		if (!w || !json_is_array(reqs) || !json_array_size(reqs)) {
			fprintf(stderr, "inferd-bench: --workload %s: %s\n", o->workload_file,
				w ? "expected {\"requests\": [ENTRY, ...]} with at least one entry"
				  : err.text);
			json_decref(w);
			return -1;
		}
		run->entries = calloc(json_array_size(reqs), sizeof(*run->entries));
		if (!run->entries) {
			json_decref(w);
			return -1;
		}
		for (size_t i = 0; i < json_array_size(reqs); i++) {
			run->n_entries++;
			if (ib_workload_entry(json_array_get(reqs, i), i, &o->proto,
					      &run->entries[i]) != 0) {
				json_decref(w);
				return -1;
			}
		}
		json_decref(w);
	}
	run->weight_sum = 0.0;
	for (size_t i = 0; i < run->n_entries; i++) {
		char what[40] = "--";
		if (o->workload_file)
			snprintf(what, sizeof(what), "requests[%zu].", i);
		if (ib_entry_check(&run->entries[i], what) != 0 ||
		    ib_entry_build(run, o, &run->entries[i]) != 0)
			return -1;
		run->weight_sum += run->entries[i].weight;
	}
	return 0;
}

void ib_work_free(struct ib_run *run)
{
	for (size_t i = 0; i < run->n_entries; i++) {
		struct ib_entry *e = &run->entries[i];
		for (size_t t = 0; t < e->n_tmpl; t++)
			free(e->tmpl[t].bytes);
		free(e->tmpl);
		free(e->model);
		free(e->path);
		free(e->audio_dir);
		free(e->prompts_file);
	}
	free(run->entries);
	for (size_t i = 0; i < run->n_audio; i++) {
		free(run->audio[i].path);
		free(run->audio[i].data);
		free(run->audio[i].pcm);
	}
	free(run->audio);
	run->entries = NULL;
	run->audio = NULL;
	run->n_entries = run->n_audio = 0;
}

const struct ib_tmpl *ib_work_pick(struct ib_run *run, int *entry)
{
	size_t i = 0;
	if (run->n_entries > 1) {
		double x = ib_rng_unit(&run->rng) * run->weight_sum;
		for (i = 0; i + 1 < run->n_entries && x >= run->entries[i].weight; i++)
			x -= run->entries[i].weight;
	}
	struct ib_entry *e = &run->entries[i];
	*entry = (int)i;
	bool audio = ib_endpoint_is_audio(e->ep) || (e->ep == IB_EP_KSERVE_INFER && e->audio_dir);
	bool random = audio ? e->audio_random : e->prompt_random;
	size_t k;
	if (random)
		k = (size_t)(ib_rng_unit(&run->rng) * (double)e->n_tmpl);
	else
		k = e->next++ % e->n_tmpl;
	return &e->tmpl[k < e->n_tmpl ? k : 0];
}
