/* cli_main.c - the inferd command line.
 *
 *   inferd [--config FILE] [--listen HOST:PORT]   serve
 *   inferd inspect FILE                           print a model's metadata
 *   inferd devices                                list the devices (cpu, opencl)
 *   inferd --help | --version
 *
 * Exit status: 0 after a clean shutdown, 1 on a start-up error (one line on
 * stderr naming the file and the fault), 2 on a usage error.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "config/cfg.h"
#include "engine/eng.h"
#include "server/srv.h"
#include "cli/cli_cmd.h"

/* config/'s compute types are engine/'s, value for value */
_Static_assert((int)CFG_COMPUTE_DEFAULT == (int)ENG_COMPUTE_DEFAULT &&
		       (int)CFG_COMPUTE_FLOAT32 == (int)ENG_COMPUTE_FLOAT32 &&
		       (int)CFG_COMPUTE_INT8 == (int)ENG_COMPUTE_INT8 &&
		       (int)CFG_COMPUTE_INT8_FLOAT32 == (int)ENG_COMPUTE_INT8_FLOAT32 &&
		       (int)CFG_COMPUTE_BFLOAT16 == (int)ENG_COMPUTE_BFLOAT16 &&
		       (int)CFG_COMPUTE_INT8_BFLOAT16 == (int)ENG_COMPUTE_INT8_BFLOAT16 &&
		       (int)CFG_COMPUTE_COUNT == (int)ENG_COMPUTE_COUNT,
	       "enum cfg_compute_type and enum eng_compute_type agree");

#define DEFAULT_CONFIG "config/default.json"

static void usage(FILE *out)
{
	fprintf(out,
		"usage: inferd [--config FILE] [--listen HOST:PORT]\n"
		"       inferd inspect MODEL_FILE_OR_FOLDER\n"
		"       inferd transcribe [--config FILE] [--model NAME|PATH] [--threads N]\n"
		"                         [--timestamps | --json] [--beam-size N] [--language L]\n"
		"                         [--prompt TEXT] [--temperature T] [--compute-type T]\n"
		"                         [--batched] [--word-timestamps] [--vad-filter]\n"
		"                         [--task transcribe|translate] FILE...\n"
		"       inferd generate [--config FILE] [--model NAME|PATH] [--chat]\n"
		"                       [--max-tokens N] [--temperature T] [--top-p P]\n"
		"                       [--top-k K] [--seed S] [--threads N]\n"
		"                       [--kv-cache-f16] [--max-model-len N] PROMPT\n"
		"       inferd devices\n"
		"       (inferd transcribe --help, inferd generate --help: each option)\n"
		"       inferd --help | --version\n"
		"\n"
		"Serves speech-to-text (Whisper, CTranslate2) and text generation (GGUF)\n"
		"over OpenAI, Deepgram and KServe v2 HTTP APIs.\n"
		"\n"
		"  --config FILE       JSON configuration (default " DEFAULT_CONFIG ")\n"
		"  --listen HOST:PORT  overrides \"listen\" (default 127.0.0.1:8080;\n"
		"                      port 0 picks a free port, printed at start-up)\n"
		"  inspect PATH        print a GGUF file's or CTranslate2 folder's metadata\n"
		"                      and tensor table, then exit\n"
		"  devices             list the devices a replica may run on (cpu,\n"
		"                      opencl): spec, kind, compute units, memory, model\n"
		"  batch run MANIFEST --out RESULTS\n"
		"                      run a JSONL of Batch API requests on the config's\n"
		"                      models, no server; run again to resume (--help)\n"
		"\n"
		"Environment: INFERD_CONFIG and INFERD_LISTEN set --config and --listen\n"
		"(the flags win); INFERD_GRPC_LISTEN replaces grpc_listen (\"\" = no gRPC\n"
		"port); INFERD_API_KEY adds one accepted API key.\n"
		"\n"
		"Configuration keys (config/README.md has the details):\n");
	cfg_help_print(out);
}


static int serve(const char *config_path, const char *listen)
{
	char err[1024];
	struct cfg *cfg = NULL;
	struct eng *eng = NULL;
	struct srv *srv = NULL;
	struct eng_model_spec *specs = NULL;
	int rc = cfg_load_file(config_path, &cfg, err, sizeof(err));
	const char *grpc = getenv("INFERD_GRPC_LISTEN");
	if (!rc && grpc)
		rc = cfg_set_grpc_listen(cfg, grpc, err, sizeof(err));
	if (rc)
		goto out_report;
	specs = cli_specs_from_cfg(cfg);
	if (!specs) {
		snprintf(err, sizeof(err), "out of memory");
		rc = -ST_NOMEM;
		goto out_report;
	}
	/* Bind first: a busy port is reported before minutes of loading. */
	rc = srv_create(cfg, NULL, listen, getenv("INFERD_API_KEY"), &srv, err, sizeof(err));
	if (rc)
		goto out_report;
	rc = eng_create(specs, cfg->n_models, &eng, err, sizeof(err));
	if (rc)
		goto out_report;
	char kern[160];
	eng_kernels_describe(kern, sizeof(kern));
	fprintf(stderr, "inferd: kernels %s\n", kern);
	for (size_t i = 0; i < eng_model_count(eng); i++) {
		const struct eng_model *m = eng_model_at(eng, i);
		const char *ct = eng_model_compute_type(m), *kv = eng_model_kv_cache(m);
		fprintf(stderr, "inferd: model '%s' loaded (%s, %s, %s, %.1f MB%s%s%s%s)\n",
			eng_model_name(m), eng_task_str(eng_model_task(m)),
			eng_format_str(eng_model_format(m)), eng_model_arch(m),
			(double)eng_model_size_bytes(m) / 1e6, ct ? ", compute type " : "",
			ct ? ct : "", kv ? ", KV cache " : "", kv ? kv : "");
	}
	srv_set_engine(srv, eng);
	rc = srv_run(srv);
	goto out_free;

out_report:
	fprintf(stderr, "inferd: %s\n", err);
out_free:
	srv_destroy(srv);
	eng_destroy(eng);
	mem_free(specs);
	cfg_destroy(cfg);
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	/* Flags win over the environment, which wins over the defaults (a
	 * container sets the environment, a person the flags). */
	const char *config_path = getenv("INFERD_CONFIG");
	const char *listen = getenv("INFERD_LISTEN");
	if (!config_path || !*config_path)
		config_path = DEFAULT_CONFIG;
	if (listen && !*listen)
		listen = NULL;
	/* A client that hangs up mid-write must cost an EPIPE, not the process. */
	signal(SIGPIPE, SIG_IGN);
	mem_keep_freed();
	if (argc > 1 && !strcmp(argv[1], "inspect"))
		return cli_inspect(argc, argv);
	if (argc > 1 && !strcmp(argv[1], "transcribe"))
		return cli_transcribe(argc, argv);
	if (argc > 1 && !strcmp(argv[1], "generate"))
		return cli_generate(argc, argv);
	if (argc > 1 && !strcmp(argv[1], "devices"))
		return cli_devices(argc, argv);
	if (argc > 1 && !strcmp(argv[1], "batch"))
		return cli_batch(argc, argv, config_path);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--version")) {
			printf("inferd " INFERD_VERSION "\n");
			return 0;
		} else if (!strcmp(a, "--config") && i + 1 < argc) {
			config_path = argv[++i];
		} else if (!strcmp(a, "--listen") && i + 1 < argc) {
			listen = argv[++i];
		} else {
			fprintf(stderr, "inferd: unknown or incomplete argument '%s'\n", a);
			usage(stderr);
			return 2;
		}
	}
	return serve(config_path, listen);
}
