/* cli_cmd.c - the commands that run without a server:
 *   inferd inspect MODEL                      metadata and tensor table
 *   inferd transcribe [--config FILE] [--model NAME|PATH] [--threads N]
 *                     [--timestamps | --json] [--beam-size N] [--language L]
 *                     [--task transcribe|translate]
 *                     [--prompt TEXT] [--temperature T]
 *                     [--compute-type T] [--batched] [--word-timestamps]
 *                     [--vad-filter | --no-vad-filter] FILE...
 *   inferd generate   (gen_usage below)
 * transcribe prints each file's transcript on stdout and a timing line per
 * file on stderr (audio seconds, wall seconds, real-time factor): what
 * bench/transcribe-vs-peers times. --help prints a command's usage on
 * stdout (exit 0); a bad option or value is said on stderr (exit 2)
 * before any model loads.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/mem.h"
#include "common/st.h"
#include "config/cfg.h"
#include "engine/eng.h"
#include "cli/cli_cmd.h"

int cli_inspect(int argc, char **argv)
{
	char err[512];
	if (argc != 3) {
		fprintf(stderr, "usage: inferd inspect MODEL_FILE_OR_FOLDER\n");
		return 2;
	}
	if (eng_inspect(argv[2], stdout, err, sizeof(err))) {
		fprintf(stderr, "inferd: %s\n", err);
		return 1;
	}
	return 0;
}

/* --- option values -------------------------------------------------------- */

/* CLI_HELP: what a parser returns after printing --help (exit status 0). */
#define CLI_HELP (-1)

/* *out = v as an integer in [lo, hi]; else a message naming opt and 2. */
static int cli_int(const char *opt, const char *v, long lo, long hi, int *out)
{
	char *end;
	long x = strtol(v, &end, 10);
	if (end == v || *end || x < lo || x > hi) {
		fprintf(stderr, "inferd: %s: expected an integer from %ld to %ld, not '%s'\n", opt,
			lo, hi, v);
		return 2;
	}
	*out = (int)x;
	return 0;
}

/* *out = v as a finite number in [lo, hi]; else a message naming opt and 2. */
static int cli_float(const char *opt, const char *v, double lo, double hi, float *out)
{
	char *end;
	double x = strtod(v, &end);
	if (end == v || *end || !(x >= lo && x <= hi)) {
		fprintf(stderr, "inferd: %s: expected a number from %g to %g, not '%s'\n", opt, lo,
			hi, v);
		return 2;
	}
	*out = (float)x;
	return 0;
}

/* *out = v as an unsigned 64-bit integer (decimal digits only); else a
 * message naming opt and 2. */
static int cli_u64(const char *opt, const char *v, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long x = strtoull(v, &end, 10);
	if (*v < '0' || *v > '9' || *end || errno == ERANGE) {
		fprintf(stderr, "inferd: %s: expected an integer from 0 to 18446744073709551615, "
				"not '%s'\n", opt, v);
		return 2;
	}
	*out = (uint64_t)x;
	return 0;
}

/* Says on stderr why option o was not taken (an unknown name, the
 * --name=VALUE form, or no value after it), then the command's usage;
 * returns what usage returns (2). */
static int cli_bad_option(const char *o, bool no_value, int (*usage)(FILE *))
{
	if (strchr(o, '='))
		fprintf(stderr, "inferd: %s: unknown option (the value goes after a space: "
				"--name VALUE)\n", o);
	else if (no_value)
		fprintf(stderr, "inferd: %s: unknown option, or its value is missing\n", o);
	else
		fprintf(stderr, "inferd: %s: unknown option\n", o);
	return usage(stderr);
}

/* Is any argument from argv[2] on --help or -h? */
static bool cli_wants_help(int argc, char **argv)
{
	for (int k = 2; k < argc; k++)
		if (!strcmp(argv[k], "--help") || !strcmp(argv[k], "-h"))
			return true;
	return false;
}

struct tx_args {
	const char *config;
	const char *model;
	int threads;
	int compute_type; /* enum cfg_compute_type, or -1: the config's (else default) */
	bool timestamps;
	bool json; /* one JSON object per file: text, segments with tokens */
	struct eng_transcribe_params params;
	int first_file;
};

static int tx_usage(FILE *to)
{
	fprintf(to, "usage: inferd transcribe [--config FILE] [--model NAME|PATH] [--threads N]\n"
		    "                         [--timestamps | --json] [--beam-size N] [--language L]\n"
		    "                         [--prompt TEXT] [--temperature T]\n"
		    "                         [--compute-type T] [--batched] [--word-timestamps]\n"
		    "                         [--task transcribe|translate]\n"
		    "                         [--vad-filter | --no-vad-filter] FILE...\n"
		    "Transcribes each FILE without a server: the text on stdout (--timestamps:\n"
		    "segments with times; --json: one JSON object per file with segments and\n"
		    "tokens) and a timing line per file on stderr. --model: a model name from\n"
		    "--config (default config/default.json) or a CTranslate2 Whisper folder;\n"
		    "--compute-type: default, float32, int8, int8_float32, bfloat16 or\n"
		    "int8_bfloat16; --batched: long audio cut into chunks transcribed together;\n"
		    "--temperature 0..1 (absent: the fallback list 0, 0.2, ..., 1.0);\n"
		    "--beam-size 1..16 (default 1, greedy); --threads: default every core;\n"
		    "--language: an ISO 639-1 code (absent: detected on a multilingual model);\n"
		    "--task translate: English text from speech in another language\n"
		    "(multilingual models); --word-timestamps: each word's start, end and\n"
		    "probability (--json: a \"words\" list per segment; --timestamps: a\n"
		    "line per word); --vad-filter / --no-vad-filter: transcribe only the\n"
		    "speech Silero VAD finds (silence skipped, times those of the file) or\n"
		    "all of it; absent: the config entry's vad_filter (else off).\n");
	return to == stdout ? CLI_HELP : 2;
}

/* An option without a value: set in a, true; else false. */
static bool tx_flag(const char *o, struct tx_args *a)
{
	if (!strcmp(o, "--timestamps") || !strcmp(o, "--json"))
		*(o[2] == 't' ? &a->timestamps : &a->json) = true;
	else if (!strcmp(o, "--batched") || !strcmp(o, "--word-timestamps"))
		*(o[2] == 'b' ? &a->params.batched : &a->params.word_timestamps) = true;
	else if (!strcmp(o, "--vad-filter") || !strcmp(o, "--no-vad-filter"))
		a->params.vad_filter = o[2] == 'v' ? ENG_VAD_FILTER_ON : ENG_VAD_FILTER_OFF;
	else
		return false;
	return true;
}

/* 0, CLI_HELP (usage printed on stdout) or 2 (a usage error, said on stderr). */
static int tx_parse(int argc, char **argv, struct tx_args *a)
{
	*a = (struct tx_args){ .config = "config/default.json", .compute_type = -1 };
	eng_transcribe_params_init(&a->params);
	if (cli_wants_help(argc, argv))
		return tx_usage(stdout);
	int i = 2, rc = 0;
	for (; i < argc && !rc && !strncmp(argv[i], "--", 2); i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (tx_flag(o, a))
			continue;
		if (!v)
			return cli_bad_option(o, true, tx_usage);
		i++;
		if (!strcmp(o, "--config"))
			a->config = v;
		else if (!strcmp(o, "--model"))
			a->model = v;
		else if (!strcmp(o, "--threads"))
			rc = cli_int(o, v, 1, 1024, &a->threads);
		else if (!strcmp(o, "--beam-size"))
			rc = cli_int(o, v, 1, 16, &a->params.beam_size);
		else if (!strcmp(o, "--compute-type")) {
			if ((a->compute_type = cfg_compute_type_parse(v)) < 0) {
				fprintf(stderr, "inferd: --compute-type: expected default, float32, int8, "
						"int8_float32, bfloat16 or int8_bfloat16, not '%s'\n", v);
				return tx_usage(stderr);
			}
		} else if (!strcmp(o, "--language"))
			a->params.language = v;
		else if (!strcmp(o, "--task"))
			a->params.task = v; /* checked by the engine */
		else if (!strcmp(o, "--prompt"))
			a->params.prompt = v;
		else if (!strcmp(o, "--temperature")) {
			rc = cli_float(o, v, 0.0, 1.0, &a->params.temperatures[0]);
			a->params.n_temperatures = 1;
		} else
			return cli_bad_option(o, false, tx_usage);
	}
	if (rc)
		return rc;
	if (a->timestamps && a->json) {
		fprintf(stderr, "inferd: --timestamps and --json: choose one (--json holds the "
				"segments' times)\n");
		return 2;
	}
	a->first_file = i;
	for (int j = i; j < argc; j++)
		if (!strncmp(argv[j], "--", 2)) { /* not silently a file name */
			fprintf(stderr, "inferd: %s: options go before the files\n", argv[j]);
			return tx_usage(stderr);
		}
	return i < argc ? 0 : tx_usage(stderr);
}

/* A model by path (a CT2 folder or GGUF file) or by name from the config;
 * NULL name: the config's first model of format `want`. compute_type:
 * enum cfg_compute_type, or -1 for the config entry's (default for a
 * path); kv_f16: true turns the float16 KV cache on (config kv_cache_f16),
 * false keeps the config entry's (off for a path); max_model_len: tokens
 * of context (config max_model_len), 0 for the config entry's (the
 * engine's default for a path). */
static int cli_load(const char *config, const char *model, enum cfg_model_format want,
		    int threads, int compute_type, bool kv_f16, int max_model_len,
		    struct eng **eng, const struct eng_model **m, char *err, size_t errlen)
{
	struct stat st;
	struct cfg *cfg = NULL;
	/* one replica on every core this process may use, `threads` of them
	 * computing (0: all) */
	struct eng_replica_spec rep = { .device = "cpu", .threads = threads > 0 ? threads : 0 };
	/* named by its path in messages until a config entry names it */
	struct eng_model_spec spec = { .name = model ? model : "", .path = model,
				       .replicas = &rep, .n_replicas = 1,
				       .vad_model_optional = true };
	int rc = 0;
	if (!model || stat(model, &st) != 0) {
		if ((rc = cfg_load_file(config, &cfg, err, errlen)) != 0)
			return rc;
		spec.path = NULL;
		for (size_t i = 0; i < cfg->n_models && !spec.path; i++) {
			const struct cfg_model *cm = &cfg->models[i];
			if (model ? !strcmp(cm->name, model) : cm->format == want) {
				spec.name = cm->name;
				spec.path = cm->path;
				spec.compute_type = (enum eng_compute_type)cm->compute_type;
				spec.kv_cache_f16 = cm->kv_cache_f16 != 0;
				spec.vad_filter = cm->vad_filter != 0;
				spec.max_model_len = cm->max_model_len;
				if (cm->vad_model) {
					spec.vad_model = cm->vad_model;
					spec.vad_model_optional = false;
				}
			}
		}
	}
	if (!spec.path) {
		snprintf(err, errlen, "no model '%s' in %s", model ? model : "", config);
		rc = -ST_NOTFOUND;
	}
	if (compute_type >= 0) /* the command line's wins */
		spec.compute_type = (enum eng_compute_type)compute_type;
	spec.kv_cache_f16 = spec.kv_cache_f16 || kv_f16;
	if (max_model_len > 0)
		spec.max_model_len = max_model_len;
	if (!rc)
		rc = eng_create(&spec, 1, eng, err, errlen);
	if (!rc)
		*m = eng_model_at(*eng, 0);
	cfg_destroy(cfg);
	return rc;
}

static int tx_read_file(const char *path, char **data, size_t *len)
{
	FILE *f = fopen(path, "rb");
	*data = NULL;
	if (!f)
		return -ST_IO;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	*data = n >= 0 ? mem_alloc((size_t)n + 1) : NULL;
	int rc = *data && fread(*data, 1, (size_t)n, f) == (size_t)n ? 0 : -ST_IO;
	fclose(f);
	*len = (size_t)n;
	return rc;
}

static double tx_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* {"file", "duration", "language", "language_probability", "text",
 * "segments": [{"start", "end", "text", "tokens", "avg_logprob",
 * "no_speech_prob", "temperature" [, "words": [{"word", "start", "end",
 * "probability"}]]}]} */
static void tx_print_json(const char *path, const struct eng_transcript *t)
{
	json_t *segs = json_array();
	for (size_t i = 0; i < t->n_segments; i++) {
		const struct eng_segment *s = &t->segments[i];
		json_t *tok = json_array();
		for (size_t k = 0; k < s->n_tokens; k++)
			json_array_append_new(tok, json_integer(s->tokens[k]));
		json_t *seg = json_pack("{s:f,s:f,s:s,s:o,s:f,s:f,s:f}", "start", s->start_s, "end",
					s->end_s, "text", s->text, "tokens", tok, "avg_logprob",
					s->avg_logprob, "no_speech_prob", (double)s->no_speech_prob,
					"temperature", (double)s->temperature);
		json_t *words = s->words ? json_array() : NULL;
		for (size_t k = 0; words && k < s->n_words; k++)
			json_array_append_new(words, json_pack("{s:s,s:f,s:f,s:f}", "word",
				s->words[k].word, "start", s->words[k].start_s, "end", s->words[k].end_s,
				"probability", (double)s->words[k].probability));
		if (seg && words)
			json_object_set_new(seg, "words", words);
		json_array_append_new(segs, seg);
	}
	json_t *o = json_pack("{s:s,s:f,s:s,s:f,s:s,s:o}", "file", path, "duration", t->duration_s,
			      "language", t->language, "language_probability",
			      (double)t->language_prob, "text", t->text, "segments", segs);
	char *text = o ? json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
	if (text)
		printf("%s\n", text);
	free(text); /* jansson's allocator */
	json_decref(o);
}

static void tx_print(const struct tx_args *a, const char *path, const struct eng_transcript *t)
{
	if (a->json) {
		tx_print_json(path, t);
		return;
	}
	if (!a->timestamps) {
		printf("%s\n", t->text);
		return;
	}
	printf("# %s\n", path);
	for (size_t i = 0; i < t->n_segments; i++) {
		const struct eng_segment *s = &t->segments[i];
		printf("[%8.2f -> %8.2f]%s\n", s->start_s, s->end_s, s->text);
		for (size_t k = 0; k < s->n_words; k++)
			printf("    [%8.2f -> %8.2f] %.3f%s\n", s->words[k].start_s, s->words[k].end_s,
			       (double)s->words[k].probability, s->words[k].word);
	}
}

static int tx_one(const struct tx_args *a, const struct eng_model *m, const char *path)
{
	char err[512], *data;
	size_t len;
	struct eng_audio audio;
	struct eng_transcript *t = NULL;
	double t0 = tx_now();
	int rc = tx_read_file(path, &data, &len);
	if (rc) {
		fprintf(stderr, "inferd: %s: cannot read\n", path);
		mem_free(data);
		return rc;
	}
	rc = eng_audio_decode(data, len, NULL, &audio, err, sizeof(err));
	mem_free(data);
	if (!rc) {
		rc = eng_transcribe(m, audio.samples, audio.n_samples, &a->params, &t, err, sizeof(err));
		double secs = tx_now() - t0, dur = (double)audio.n_samples / 16000.0;
		if (!rc) {
			tx_print(a, path, t);
			fprintf(stderr, "inferd: %s: %.2f s of audio in %.3f s (RTFx %.1f)\n", path, dur,
				secs, dur / secs);
		}
		eng_audio_fini(&audio);
	}
	if (rc)
		fprintf(stderr, "inferd: %s: %s\n", path, err);
	eng_transcript_destroy(t);
	return rc;
}

int cli_transcribe(int argc, char **argv)
{
	struct tx_args a;
	struct eng *eng = NULL;
	const struct eng_model *m = NULL;
	char err[1024];
	int prc = tx_parse(argc, argv, &a);
	if (prc)
		return prc == CLI_HELP ? 0 : 2;
	int rc = cli_load(a.config, a.model, CFG_MODEL_FORMAT_CT2, a.threads, a.compute_type, false, 0,
			  &eng, &m, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "inferd: %s\n", err);
		return 1;
	}
	char kern[160];
	eng_kernels_describe(kern, sizeof(kern));
	fprintf(stderr, "inferd: kernels %s\n", kern);
	int failed = 0;
	double t0 = tx_now();
	for (int i = a.first_file; i < argc; i++)
		failed |= tx_one(&a, m, argv[i]) != 0;
	fprintf(stderr, "inferd: %d file(s) in %.3f s\n", argc - a.first_file, tx_now() - t0);
	eng_destroy(eng);
	return failed ? 1 : 0;
}

/* --- inferd generate ---------------------------------------------------- */

struct gen_args {
	const char *config, *model, *prompt;
	bool chat;
	bool kv_f16; /* --kv-cache-f16 */
	int threads;
	int max_model_len; /* --max-model-len; 0: the config's or the default */
	struct eng_gen_params params;
};

static int gen_usage(FILE *to)
{
	fprintf(to, "usage: inferd generate [--config FILE] [--model NAME|PATH] [--chat]\n"
			"                       [--max-tokens N] [--temperature T] [--top-p P]\n"
			"                       [--top-k K] [--seed S] [--threads N]\n"
			"                       [--kv-cache-f16] [--max-model-len N] PROMPT\n"
			"Streams a completion of PROMPT to stdout without a server. --model: a\n"
			"model name from --config (default config/default.json) or a GGUF path;\n"
			"--chat wraps PROMPT in the model's chat template; --kv-cache-f16 keeps\n"
			"the KV cache in float16 (config kv_cache_f16); --max-model-len: tokens\n"
			"of context, prompt and completion together (config max_model_len; at\n"
			"most the model's trained context); defaults: 128 tokens, temperature\n"
			"1, a random seed, every core, the config's context or min(4096, the\n"
			"trained one).\n");
	return to == stdout ? CLI_HELP : 2;
}

static int gen_parse(int argc, char **argv, struct gen_args *a)
{
	*a = (struct gen_args){ .config = "config/default.json" };
	eng_gen_params_init(&a->params);
	a->params.max_tokens = 128;
	/* no --seed: a different sample every run, as the server does */
	a->params.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	if (cli_wants_help(argc, argv))
		return gen_usage(stdout);
	int i = 2, rc = 0;
	for (; i < argc && !rc && !strncmp(argv[i], "--", 2); i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(o, "--")) { /* what follows is the prompt, '--' or not */
			i++;
			break;
		}
		if (!strcmp(o, "--chat") || !strcmp(o, "--kv-cache-f16")) { /* no value */
			*(o[2] == 'c' ? &a->chat : &a->kv_f16) = true;
			continue;
		}
		if (!v)
			return cli_bad_option(o, true, gen_usage);
		i++;
		if (!strcmp(o, "--config"))
			a->config = v;
		else if (!strcmp(o, "--model"))
			a->model = v;
		else if (!strcmp(o, "--max-tokens"))
			rc = cli_int(o, v, 1, 1 << 20, &a->params.max_tokens);
		else if (!strcmp(o, "--temperature"))
			rc = cli_float(o, v, 0.0, 2.0, &a->params.temperature);
		else if (!strcmp(o, "--top-p")) {
			rc = cli_float(o, v, 0.0, 1.0, &a->params.top_p);
			if (!rc && !(a->params.top_p > 0.0f))
				rc = (fprintf(stderr, "inferd: --top-p: expected a number above 0 and "
						      "at most 1, not '%s'\n", v), 2);
		}
		else if (!strcmp(o, "--top-k"))
			rc = cli_int(o, v, 0, 1 << 20, &a->params.top_k);
		else if (!strcmp(o, "--seed"))
			rc = cli_u64(o, v, &a->params.seed);
		else if (!strcmp(o, "--threads"))
			rc = cli_int(o, v, 1, 1024, &a->threads);
		else if (!strcmp(o, "--max-model-len"))
			rc = cli_int(o, v, 16, 1 << 20, &a->max_model_len);
		else
			return cli_bad_option(o, false, gen_usage);
	}
	if (rc)
		return rc;
	if (i != argc - 1) {
		fprintf(stderr, "inferd: %s\n",
			i >= argc ? "PROMPT is missing (after the options; a prompt starting with "
				    "'--' goes after '--')"
				  : "one PROMPT after the options (quote it if it has spaces)");
		return gen_usage(stderr);
	}
	a->prompt = argv[i];
	return 0;
}

static int gen_on_text(void *ud, const char *text, size_t len, const struct eng_gen_token *toks,
		       size_t n_toks)
{
	(void)ud;
	(void)toks;
	(void)n_toks;
	fwrite(text, 1, len, stdout);
	fflush(stdout);
	return 0;
}

int cli_generate(int argc, char **argv)
{
	struct gen_args a;
	struct eng *eng = NULL;
	const struct eng_model *m = NULL;
	struct eng_gen_result *r = NULL;
	char err[1024], *chat = NULL;
	uint8_t *plain = NULL;
	int prc = gen_parse(argc, argv, &a);
	if (prc)
		return prc == CLI_HELP ? 0 : 2;
	int rc = cli_load(a.config, a.model, CFG_MODEL_FORMAT_GGUF, a.threads, -1, a.kv_f16,
			  a.max_model_len, &eng, &m, err, sizeof(err));
	if (!rc && a.chat) {
		struct eng_chat_msg msg = { "user", a.prompt };
		rc = eng_chat_format(m, &msg, 1, &chat, &plain, err, sizeof(err));
	}
	a.params.prompt = chat ? chat : a.prompt;
	a.params.prompt_plain = plain;
	a.params.on_text = gen_on_text;
	if (!rc)
		rc = eng_generate(m, &a.params, &r, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "inferd: %s\n", err);
	} else {
		printf("\n");
		fprintf(stderr, "inferd: %zu prompt tokens in %.1f ms (%.1f tok/s), %zu generated in "
				"%.1f ms (%.1f tok/s), finish %s, KV cache %s\n",
			r->n_prompt_tokens, r->prompt_ms, 1e3 * (double)r->n_prompt_tokens / r->prompt_ms,
			r->n_completion_tokens, r->decode_ms,
			1e3 * (double)r->n_completion_tokens / (r->decode_ms > 0 ? r->decode_ms : 1),
			r->finish == ENG_FINISH_STOP ? "stop" : "length", eng_model_kv_cache(m));
	}
	eng_gen_result_destroy(r);
	mem_free(chat);
	mem_free(plain);
	eng_destroy(eng);
	return rc ? 1 : 0;
}
