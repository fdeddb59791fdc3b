/* test_cfg.c - unit tests of config/ (cmocka): loading, the knob table, errors, --help.
 *
 * Covers: config/default.json (found through INFERD_SOURCE_ROOT), defaults,
 * every knob read back, each error message word for word, the listen forms,
 * the three forms of "replicas" and the per-model scheduling knobs,
 * JSON syntax errors and duplicate keys, the input-size ceiling, file
 * errors and --help output. compute_type, the schema's agreement, the
 * array ceilings and allocation failures: test_cfg_more.c (shared
 * helpers: cfg_test.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "common/mem.h"
#include "common/st.h"
#include "config/cfg.h"

#include "tests/unit/config/cfg_test.h"

static void test_default_json(void **state)
{
	(void)state;
	char path[4096];
	source_path(path, sizeof(path), "config/default.json");
	struct cfg *cfg;
	char err[256];
	assert_int_equal(cfg_load_file(path, &cfg, err, sizeof(err)), 0);
	assert_string_equal(err, "");
	assert_string_equal(cfg->listen_host, "127.0.0.1");
	assert_int_equal(cfg->listen_port, 8080);
	assert_int_equal(cfg->n_api_keys, 0);
	assert_int_equal(cfg->access_log, 1);
	assert_int_equal(cfg->n_models, 4);
	assert_string_equal(cfg->models[0].name, "whisper-tiny.en");
	assert_string_equal(cfg->models[0].path, "models/whisper-tiny.en");
	assert_int_equal(cfg->models[0].format, CFG_MODEL_FORMAT_CT2);
	expect_count(&cfg->models[0], 1);
	expect_sched_defaults(&cfg->models[0]);
	assert_int_equal(cfg->models[0].live_window_ms, 10000); /* measured: bench/live */
	assert_int_equal(cfg->models[0].compute_type, CFG_COMPUTE_INT8); /* bench/live */
	assert_int_equal(cfg->models[1].live_window_ms, 0);
	assert_int_equal(cfg->models[1].compute_type, CFG_COMPUTE_DEFAULT);
	assert_string_equal(cfg->models[1].name, "whisper-base");
	assert_string_equal(cfg->models[1].path, "models/whisper-base");
	assert_int_equal(cfg->models[1].format, CFG_MODEL_FORMAT_CT2);
	expect_count(&cfg->models[1], 1);
	expect_sched_defaults(&cfg->models[1]);
	assert_string_equal(cfg->models[2].name, "gemma-3-270m");
	assert_string_equal(cfg->models[2].path,
			    "models/gemma-3-270m-q4_k_m.gguf");
	assert_int_equal(cfg->models[2].format, CFG_MODEL_FORMAT_GGUF);
	expect_count(&cfg->models[2], 1);
	expect_sched_defaults(&cfg->models[2]);
	assert_string_equal(cfg->models[3].name, "smollm2-135m-instruct");
	assert_string_equal(cfg->models[3].path,
			    "models/smollm2-135m-instruct-q4_1.gguf");
	assert_int_equal(cfg->models[3].format, CFG_MODEL_FORMAT_GGUF);
	expect_count(&cfg->models[3], 1);
	expect_sched_defaults(&cfg->models[3]);
	cfg_destroy(cfg);
}

static void test_defaults(void **state)
{
	(void)state;
	struct cfg *cfg;
	char err[256];
	assert_int_equal(load("{" MIN_MODELS "}", &cfg, err, sizeof(err)), 0);
	assert_string_equal(cfg->listen_host, "127.0.0.1");
	assert_int_equal(cfg->listen_port, 8080);
	assert_null(cfg->grpc_host); /* no gRPC port unless asked */
	assert_null(cfg->api_keys);
	assert_int_equal(cfg->n_api_keys, 0);
	assert_int_equal(cfg->access_log, 1);
	assert_int_equal(cfg->max_connections, 1024);
	assert_int_equal(cfg->max_header_bytes, 16384);
	assert_int_equal(cfg->max_body_bytes, 104857600);
	assert_int_equal(cfg->header_timeout_ms, 10000);
	assert_int_equal(cfg->idle_timeout_ms, 60000);
	assert_int_equal(cfg->body_timeout_ms, 60000);
	assert_int_equal(cfg->drain_timeout_ms, 30000);
	assert_int_equal(cfg->send_timeout_ms, 60000);
	assert_int_equal(cfg->n_models, 1);
	assert_int_equal(cfg->models[0].format, CFG_MODEL_FORMAT_AUTO);
	expect_count(&cfg->models[0], 1);
	expect_sched_defaults(&cfg->models[0]);
	cfg_destroy(cfg);

	/* An empty "limits" object and empty api_keys are defaults too. */
	assert_int_equal(load("{\"limits\": {}, \"api_keys\": [], " MIN_MODELS "}",
			      &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg->max_connections, 1024);
	assert_int_equal(cfg->n_api_keys, 0);
	cfg_destroy(cfg);
}

static void test_full(void **state)
{
	(void)state;
	struct cfg *cfg;
	char err[256];
	assert_int_equal(load(full_json, &cfg, err, sizeof(err)), 0);
	assert_string_equal(cfg->listen_host, "::1");
	assert_int_equal(cfg->listen_port, 9090);
	assert_string_equal(cfg->grpc_host, "127.0.0.1");
	assert_int_equal(cfg->grpc_port, 9091);
	assert_int_equal(cfg->n_api_keys, 2);
	assert_string_equal(cfg->api_keys[0], "k1");
	assert_string_equal(cfg->api_keys[1], "k2");
	assert_int_equal(cfg->access_log, 0);
	assert_int_equal(cfg->max_connections, 7);
	assert_int_equal(cfg->max_header_bytes, 2048);
	assert_int_equal(cfg->max_body_bytes, 4096);
	assert_int_equal(cfg->header_timeout_ms, 11);
	assert_int_equal(cfg->idle_timeout_ms, 12);
	assert_int_equal(cfg->body_timeout_ms, 13);
	assert_int_equal(cfg->drain_timeout_ms, 14);
	assert_int_equal(cfg->n_models, 3);
	const struct cfg_model *a = &cfg->models[0];
	assert_int_equal(a->format, CFG_MODEL_FORMAT_CT2);
	assert_int_equal(a->replica_count, 0);
	assert_int_equal(a->n_replicas, 2);
	assert_string_equal(a->replicas[0].device, "cpu:0-1");
	assert_int_equal(a->replicas[0].threads, 2);
	assert_string_equal(a->replicas[1].device, "cpu:2,4-5");
	assert_int_equal(a->replicas[1].threads, 0);
	assert_int_equal(a->max_batch_size, 4);
	assert_int_equal(a->max_queue_delay_ms, 0);
	assert_int_equal(a->max_queue_size, 9);
	assert_int_equal(a->max_num_seqs, 3);
	assert_int_equal(a->max_batch_tokens, 16);
	assert_int_equal(a->timeout_ms, 2500);
	assert_int_equal(cfg->models[1].format, CFG_MODEL_FORMAT_GGUF);
	expect_count(&cfg->models[1], 3);
	expect_sched_defaults(&cfg->models[1]);
	assert_int_equal(cfg->models[2].format, CFG_MODEL_FORMAT_AUTO);
	assert_string_equal(cfg->models[2].path, "pc");
	expect_count(&cfg->models[2], 2);
	cfg_destroy(cfg);
}

/* The messages the contract spells out, word for word. */
static void test_errors_contract(void **state)
{
	(void)state;
	expect_error("{\"models\": [{\"name\": \"a\", \"path\": \"p\"},"
		     " {\"name\": \"b\", \"path\": \"p\", \"replicas\": 0}]}",
		     -ST_INVAL, "models[1].replicas: expected an integer >= 1");
	expect_error("{\"limits\": {\"max_header_bytes\": 1023}, " MIN_MODELS "}",
		     -ST_INVAL,
		     "limits.max_header_bytes: expected an integer in 1024..1048576");
	expect_error("{\"grpc_listen\": \"nowhere\", " MIN_MODELS "}", -ST_INVAL,
		     "grpc_listen: expected \"HOST:PORT\"");
	expect_error("{\"grpc_listen\": 8081, " MIN_MODELS "}", -ST_INVAL,
		     "grpc_listen: expected \"HOST:PORT\" or \"\"");
	expect_error("{\"listen\": \"localhost\", " MIN_MODELS "}", -ST_INVAL,
		     "listen: expected \"HOST:PORT\"");
	expect_error("{\"models\": [{\"nmae\": \"a\", \"path\": \"p\"}]}",
		     -ST_INVAL, "models[0]: unknown key \"nmae\"");
	expect_error("{\"models\": [{\"name\": \"x\", \"path\": \"p\"},"
		     " {\"name\": \"y\", \"path\": \"p\"},"
		     " {\"name\": \"x\", \"path\": \"p\"}]}",
		     -ST_INVAL, "models[2].name: duplicate name \"x\"");
}

/* Type and range errors of the numbers and booleans. */
static void test_errors_numbers(void **state)
{
	(void)state;
	expect_error("{\"models\": [{\"name\": \"a\", \"path\": \"p\", "
		     "\"replicas\": 2147483648}]}",
		     -ST_INVAL, "models[0].replicas: expected an integer >= 1");
	expect_error("{\"limits\": {\"max_connections\": 4294967297}, " MIN_MODELS "}",
		     -ST_INVAL,
		     "limits.max_connections: expected an integer in 1..1048576");
	expect_error("{\"limits\": {\"max_connections\": -2147483648}, " MIN_MODELS "}",
		     -ST_INVAL,
		     "limits.max_connections: expected an integer in 1..1048576");
	expect_error("{\"limits\": {\"max_body_bytes\": -9223372036854775808}, "
		     MIN_MODELS "}", -ST_INVAL,
		     "limits.max_body_bytes: expected an integer in 1024..17179869184");
	expect_error("{\"limits\": {\"max_body_bytes\": 17179869185}, " MIN_MODELS "}",
		     -ST_INVAL,
		     "limits.max_body_bytes: expected an integer in 1024..17179869184");
	expect_error("{\"limits\": {\"idle_timeout_ms\": 0}, " MIN_MODELS "}",
		     -ST_INVAL,
		     "limits.idle_timeout_ms: expected an integer in 1..86400000");
	expect_error("{\"limits\": {\"drain_timeout_ms\": 86400001}, " MIN_MODELS "}",
		     -ST_INVAL,
		     "limits.drain_timeout_ms: expected an integer in 1..86400000");
	expect_error("{\"limits\": {\"header_timeout_ms\": null}, " MIN_MODELS "}",
		     -ST_INVAL,
		     "limits.header_timeout_ms: expected an integer in 1..86400000");
	expect_error("{\"access_log\": 1, " MIN_MODELS "}", -ST_INVAL,
		     "access_log: expected true or false");
}

/* Shape errors: objects, arrays, strings, names, formats, missing keys. */
static void test_errors_shape(void **state)
{
	(void)state;
	expect_error("[]", -ST_INVAL, "expected a JSON object at the top level");
	expect_error("{}", -ST_INVAL, "missing key \"models\"");
	expect_error("{\"models\": []}", -ST_INVAL,
		     "models: expected an array of 1..256 models");
	expect_error("{\"models\": {}}", -ST_INVAL,
		     "models: expected an array of 1..256 models");
	expect_error("{\"models\": [\"m\"]}", -ST_INVAL,
		     "models[0]: expected an object");
	expect_error("{\"models\": [{\"path\": \"p\"}]}", -ST_INVAL,
		     "models[0]: missing key \"name\"");
	expect_error("{\"models\": [{\"name\": \"a\"}]}", -ST_INVAL,
		     "models[0]: missing key \"path\"");
	expect_error("{\"models\": [{\"name\": \"a\", \"path\": \"\"}]}", -ST_INVAL,
		     "models[0].path: expected a non-empty string of at most 4096 bytes");
	expect_error("{\"models\": [{\"name\": \"a b\", \"path\": \"p\"}]}", -ST_INVAL,
		     "models[0].name: expected a name of 1..64 characters from "
		     "[A-Za-z0-9._-]");
	expect_error("{\"models\": [{\"name\": \"\", \"path\": \"p\"}]}", -ST_INVAL,
		     "models[0].name: expected a name of 1..64 characters from "
		     "[A-Za-z0-9._-]");
	expect_error("{\"models\": [{\"name\": \"a\", \"path\": \"p\", "
		     "\"format\": \"onnx\"}]}",
		     -ST_INVAL, "models[0].format: expected \"gguf\" or \"ct2\"");
	expect_error("{\"models\": [{\"name\": \"a\", \"path\": \"p\", "
		     "\"format\": 1}]}",
		     -ST_INVAL, "models[0].format: expected \"gguf\" or \"ct2\"");
	expect_error("{\"models\": [{\"name\": \"a\", \"path\": \"p\", "
		     "\"compute_type\": \"int4\"}]}",
		     -ST_INVAL, "models[0].compute_type: expected \"default\", \"float32\", "
				"\"int8\", \"int8_float32\", \"bfloat16\" or \"int8_bfloat16\"");
	expect_error("{\"models\": [{\"name\": \"a\", \"path\": \"p\", "
		     "\"compute_type\": 8}]}",
		     -ST_INVAL, "models[0].compute_type: expected \"default\", \"float32\", "
				"\"int8\", \"int8_float32\", \"bfloat16\" or \"int8_bfloat16\"");
	expect_error("{\"api_keys\": \"k\", " MIN_MODELS "}", -ST_INVAL,
		     "api_keys: expected an array of at most 1024 non-empty strings");
	expect_error("{\"api_keys\": [\"a\", \"\"], " MIN_MODELS "}", -ST_INVAL,
		     "api_keys[1]: expected a non-empty string");
	expect_error("{\"api_keys\": [\"a\", 3], " MIN_MODELS "}", -ST_INVAL,
		     "api_keys[1]: expected a non-empty string");
	expect_error("{\"limits\": [], " MIN_MODELS "}", -ST_INVAL,
		     "limits: expected an object");
}

/* The three forms of "replicas", each read back. */
static void test_replicas_forms(void **state)
{
	(void)state;
	struct cfg *cfg;
	char err[256];
	assert_int_equal(load(MODEL_WITH("\"replicas\": 4"), &cfg, err,
			      sizeof(err)), 0);
	expect_count(&cfg->models[0], 4);
	cfg_destroy(cfg);
	assert_int_equal(load(MODEL_WITH("\"replicas\": 2147483647"), &cfg, err,
			      sizeof(err)), 0);
	expect_count(&cfg->models[0], 2147483647);
	cfg_destroy(cfg);
	assert_int_equal(load(MODEL_WITH("\"replicas\": {\"count\": 1}"), &cfg,
			      err, sizeof(err)), 0);
	expect_count(&cfg->models[0], 1);
	cfg_destroy(cfg);
	assert_int_equal(load(MODEL_WITH("\"replicas\": {\"count\": 6}"), &cfg,
			      err, sizeof(err)), 0);
	expect_count(&cfg->models[0], 6);
	cfg_destroy(cfg);

	/* One placement, threads absent: 0 ("one per core of the device"). */
	assert_int_equal(load(MODEL_WITH("\"replicas\": [{\"device\": \"cpu\"}]"),
			      &cfg, err, sizeof(err)), 0);
	const struct cfg_model *m = &cfg->models[0];
	assert_int_equal(m->replica_count, 0);
	assert_int_equal(m->n_replicas, 1);
	assert_string_equal(m->replicas[0].device, "cpu");
	assert_int_equal(m->replicas[0].threads, 0);
	cfg_destroy(cfg);

	/* Every device form; threads at both ends of 1..1024; two models on
	 * the same cores are fine (they share them). */
	assert_int_equal(load("{\"models\": ["
			      "{\"name\": \"a\", \"path\": \"p\", \"replicas\": ["
			      "{\"device\": \"cpu:0\", \"threads\": 1},"
			      "{\"threads\": 1024, \"device\": \"cpu:1-3\"},"
			      "{\"device\": \"cpu:0,2-3\"}]},"
			      "{\"name\": \"b\", \"path\": \"p\", \"replicas\": ["
			      "{\"device\": \"cpu:0\"}]}]}",
			      &cfg, err, sizeof(err)), 0);
	m = &cfg->models[0];
	assert_int_equal(m->n_replicas, 3);
	assert_string_equal(m->replicas[0].device, "cpu:0");
	assert_int_equal(m->replicas[0].threads, 1);
	assert_string_equal(m->replicas[1].device, "cpu:1-3");
	assert_int_equal(m->replicas[1].threads, 1024);
	assert_string_equal(m->replicas[2].device, "cpu:0,2-3");
	assert_int_equal(m->replicas[2].threads, 0);
	assert_int_equal(cfg->models[1].n_replicas, 1);
	assert_string_equal(cfg->models[1].replicas[0].device, "cpu:0");
	cfg_destroy(cfg);

	/* A device of 63 bytes is the longest; the spec itself is not
	 * checked here (devices/ does that at start-up). */
	char json[256], dev[80];
	memset(dev, 'd', 63);
	dev[63] = '\0';
	snprintf(json, sizeof(json),
		 MODEL_WITH("\"replicas\": [{\"device\": \"%s\"}]"), dev);
	assert_int_equal(load(json, &cfg, err, sizeof(err)), 0);
	assert_int_equal(strlen(cfg->models[0].replicas[0].device), 63);
	cfg_destroy(cfg);
	strcat(dev, "d");
	snprintf(json, sizeof(json),
		 MODEL_WITH("\"replicas\": [{\"device\": \"%s\"}]"), dev);
	expect_error(json, -ST_INVAL, "models[0].replicas[0].device: expected a "
		     "non-empty string of at most 63 bytes");
}

/* Each "replicas" error, word for word. */
static void test_replicas_errors(void **state)
{
	(void)state;
	const char *shape = "models[0].replicas: expected an integer >= 1, "
			    "{\"count\": N} or an array of placements";
	const char *range = "models[0].replicas: expected an integer >= 1";
	const char *count = "models[0].replicas.count: expected an integer >= 1";
	const char *nonempty = "models[0].replicas[1].device: expected a "
			       "non-empty string";
	const char *spaces = "models[0].replicas[0].device: expected a device "
			     "spec without spaces, e.g. \"cpu:0-3\"";
	const char *threads = "models[0].replicas[0].threads: expected an "
			      "integer in 1..1024";
	const char *items = "models[0].replicas: expected an array of 1..256 "
			    "placements";
	/* N */
	expect_error(MODEL_WITH("\"replicas\": 0"), -ST_INVAL, range);
	expect_error(MODEL_WITH("\"replicas\": -1"), -ST_INVAL, range);
	expect_error(MODEL_WITH("\"replicas\": 2147483648"), -ST_INVAL, range);
	expect_error(MODEL_WITH("\"replicas\": -9223372036854775808"), -ST_INVAL,
		     range);
	/* not one of the three forms */
	expect_error(MODEL_WITH("\"replicas\": \"2\""), -ST_INVAL, shape);
	expect_error(MODEL_WITH("\"replicas\": 1.0"), -ST_INVAL, shape);
	expect_error(MODEL_WITH("\"replicas\": null"), -ST_INVAL, shape);
	expect_error(MODEL_WITH("\"replicas\": true"), -ST_INVAL, shape);
	/* {"count": N} */
	expect_error(MODEL_WITH("\"replicas\": {\"count\": 0}"), -ST_INVAL, count);
	expect_error(MODEL_WITH("\"replicas\": {\"count\": -3}"), -ST_INVAL, count);
	expect_error(MODEL_WITH("\"replicas\": {\"count\": \"2\"}"), -ST_INVAL,
		     count);
	expect_error(MODEL_WITH("\"replicas\": {\"count\": 2.0}"), -ST_INVAL,
		     count);
	expect_error(MODEL_WITH("\"replicas\": {\"count\": null}"), -ST_INVAL,
		     count);
	expect_error(MODEL_WITH("\"replicas\": {\"count\": 2147483648}"),
		     -ST_INVAL, count);
	expect_error(MODEL_WITH("\"replicas\": {}"), -ST_INVAL,
		     "models[0].replicas: missing key \"count\"");
	expect_error(MODEL_WITH("\"replicas\": {\"count\": 2, \"threads\": 1}"),
		     -ST_INVAL, "models[0].replicas: unknown key \"threads\"");
	expect_error(MODEL_WITH("\"replicas\": {\"cuont\": 2}"), -ST_INVAL,
		     "models[0].replicas: unknown key \"cuont\"");
	/* [placements] */
	expect_error(MODEL_WITH("\"replicas\": []"), -ST_INVAL, items);
	expect_error(MODEL_WITH("\"replicas\": [\"cpu:0\"]"), -ST_INVAL,
		     "models[0].replicas[0]: expected an object");
	expect_error(MODEL_WITH("\"replicas\": [{\"device\": \"cpu\"}, 2]"),
		     -ST_INVAL, "models[0].replicas[1]: expected an object");
	expect_error(MODEL_WITH("\"replicas\": [{\"threads\": 2}]"), -ST_INVAL,
		     "models[0].replicas[0]: missing key \"device\"");
	expect_error(MODEL_WITH("\"replicas\": [{}]"), -ST_INVAL,
		     "models[0].replicas[0]: missing key \"device\"");
	expect_error(MODEL_WITH("\"replicas\": [{\"device\": \"cpu\", "
				"\"cores\": 2}]"), -ST_INVAL,
		     "models[0].replicas[0]: unknown key \"cores\"");
	expect_error(MODEL_WITH("\"replicas\": [{\"device\": \"cpu\"}, "
				"{\"device\": \"\"}]"), -ST_INVAL, nonempty);
	expect_error(MODEL_WITH("\"replicas\": [{\"device\": \"cpu\"}, "
				"{\"device\": 0}]"), -ST_INVAL, nonempty);
	expect_error(MODEL_WITH("\"replicas\": [{\"device\": \"cpu\"}, "
				"{\"device\": null}]"), -ST_INVAL, nonempty);
	expect_error(MODEL_WITH("\"replicas\": [{\"device\": \"cpu\"}, "
				"{\"device\": [\"cpu\"]}]"), -ST_INVAL, nonempty);
	expect_error(MODEL_WITH("\"replicas\": [{\"device\": \"cpu 0\"}]"),
		     -ST_INVAL, spaces);
	expect_error(MODEL_WITH("\"replicas\": [{\"device\": \" cpu\"}]"),
		     -ST_INVAL, spaces);
	expect_error(MODEL_WITH("\"replicas\": [{\"device\": \"cpu:0,\\t1\"}]"),
		     -ST_INVAL, spaces);
	expect_error(MODEL_WITH("\"replicas\": [{\"device\": \"cpu\\n\"}]"),
		     -ST_INVAL, spaces);
	expect_error(MODEL_WITH("\"replicas\": [{\"device\": \"cpu\", "
				"\"threads\": 0}]"), -ST_INVAL, threads);
	expect_error(MODEL_WITH("\"replicas\": [{\"device\": \"cpu\", "
				"\"threads\": 1025}]"), -ST_INVAL, threads);
	expect_error(MODEL_WITH("\"replicas\": [{\"device\": \"cpu\", "
				"\"threads\": -1}]"), -ST_INVAL, threads);
	expect_error(MODEL_WITH("\"replicas\": [{\"device\": \"cpu\", "
				"\"threads\": \"2\"}]"), -ST_INVAL, threads);
	expect_error(MODEL_WITH("\"replicas\": [{\"device\": \"cpu\", "
				"\"threads\": null}]"), -ST_INVAL, threads);
	expect_error(MODEL_WITH("\"replicas\": [{\"device\": \"cpu\", "
				"\"threads\": 2147483648}]"), -ST_INVAL, threads);
	/* The path names the model and the placement. */
	expect_error("{\"models\": [{\"name\": \"a\", \"path\": \"p\"}, "
		     "{\"name\": \"b\", \"path\": \"p\", \"replicas\": "
		     "[{\"device\": \"cpu:0\"}, {\"device\": \"cpu:1\"}, "
		     "{\"device\": \"cpu:2\", \"threads\": 0}]}]}", -ST_INVAL,
		     "models[1].replicas[2].threads: expected an integer in 1..1024");
	expect_error("{\"models\": [{\"name\": \"a\", \"path\": \"p\"}, "
		     "{\"name\": \"b\", \"path\": \"p\", \"replicas\": {\"count\": 0}}]}",
		     -ST_INVAL, "models[1].replicas.count: expected an integer >= 1");
	/* "count" and the placement keys only mean something inside
	 * "replicas". */
	expect_error(MODEL_WITH("\"count\": 2"), -ST_INVAL,
		     "models[0]: unknown key \"count\"");
	expect_error(MODEL_WITH("\"device\": \"cpu\""), -ST_INVAL,
		     "models[0]: unknown key \"device\"");
	expect_error(MODEL_WITH("\"threads\": 2"), -ST_INVAL,
		     "models[0]: unknown key \"threads\"");
}

/* At most 256 placements. */
static void test_replicas_ceiling(void **state)
{
	(void)state;
	size_t cap = 64 * 1024;
	char *json = malloc(cap);
	assert_non_null(json);
	for (int n = 256; n <= 257; n++) {
		size_t o = (size_t)snprintf(json, cap, "{\"models\": [{\"name\": "
					    "\"m\", \"path\": \"p\", \"replicas\": [");
		for (int i = 0; i < n; i++)
			o += (size_t)snprintf(json + o, cap - o,
					      "%s{\"device\": \"cpu:%d\"}",
					      i ? "," : "", i);
		snprintf(json + o, cap - o, "]}]}");
		struct cfg *cfg;
		char err[256];
		int rc = load(json, &cfg, err, sizeof(err));
		if (n == 256) {
			assert_int_equal(rc, 0);
			assert_int_equal(cfg->models[0].n_replicas, 256);
			assert_string_equal(cfg->models[0].replicas[255].device,
					    "cpu:255");
			cfg_destroy(cfg);
		} else {
			assert_int_equal(rc, -ST_INVAL);
			assert_null(cfg);
			assert_string_equal(err, "models[0].replicas: expected an "
					    "array of 1..256 placements");
		}
	}
	free(json);
}

/* The scheduling knobs: read back, and each range's message. */
static void test_sched_knobs(void **state)
{
	(void)state;
	struct cfg *cfg;
	char err[256];
	assert_int_equal(load(MODEL_WITH("\"max_batch_size\": 256, "
					 "\"max_queue_delay_ms\": 60000, "
					 "\"max_queue_size\": 1000000, "
					 "\"max_num_seqs\": 256, "
					 "\"max_batch_tokens\": 65536, "
					 "\"timeout_ms\": 86400000, "
					 "\"slow_replica_factor\": 1000"),
			      &cfg, err, sizeof(err)), 0);
	const struct cfg_model *m = &cfg->models[0];
	assert_int_equal(m->max_batch_size, 256);
	assert_int_equal(m->max_queue_delay_ms, 60000);
	assert_int_equal(m->max_queue_size, 1000000);
	assert_int_equal(m->max_num_seqs, 256);
	assert_int_equal(m->max_batch_tokens, 65536);
	assert_int_equal(m->timeout_ms, 86400000);
	assert_int_equal(m->slow_replica_factor, 1000);
	expect_count(m, 1);
	cfg_destroy(cfg);
	assert_int_equal(load(MODEL_WITH("\"max_batch_size\": 1, "
					 "\"max_queue_delay_ms\": 0, "
					 "\"max_queue_size\": 1, "
					 "\"max_num_seqs\": 1, "
					 "\"max_batch_tokens\": 16, "
					 "\"timeout_ms\": 0, "
					 "\"slow_replica_factor\": 0"),
			      &cfg, err, sizeof(err)), 0);
	m = &cfg->models[0];
	assert_int_equal(m->max_batch_size, 1);
	assert_int_equal(m->max_queue_delay_ms, 0);
	assert_int_equal(m->max_queue_size, 1);
	assert_int_equal(m->max_num_seqs, 1);
	assert_int_equal(m->max_batch_tokens, 16);
	assert_int_equal(m->timeout_ms, 0);
	assert_int_equal(m->slow_replica_factor, 0);
	cfg_destroy(cfg);

	expect_error(MODEL_WITH("\"slow_replica_factor\": -1"), -ST_INVAL,
		     "models[0].slow_replica_factor: expected an integer in 0..1000");
	expect_error(MODEL_WITH("\"slow_replica_factor\": 1001"), -ST_INVAL,
		     "models[0].slow_replica_factor: expected an integer in 0..1000");
	expect_error(MODEL_WITH("\"max_batch_size\": 0"), -ST_INVAL,
		     "models[0].max_batch_size: expected an integer in 1..256");
	expect_error(MODEL_WITH("\"max_batch_size\": 257"), -ST_INVAL,
		     "models[0].max_batch_size: expected an integer in 1..256");
	expect_error(MODEL_WITH("\"max_queue_delay_ms\": -1"), -ST_INVAL,
		     "models[0].max_queue_delay_ms: expected an integer in 0..60000");
	expect_error(MODEL_WITH("\"max_queue_delay_ms\": 60001"), -ST_INVAL,
		     "models[0].max_queue_delay_ms: expected an integer in 0..60000");
	expect_error(MODEL_WITH("\"max_queue_size\": 0"), -ST_INVAL,
		     "models[0].max_queue_size: expected an integer in 1..1000000");
	expect_error(MODEL_WITH("\"max_queue_size\": 1000001"), -ST_INVAL,
		     "models[0].max_queue_size: expected an integer in 1..1000000");
	expect_error(MODEL_WITH("\"max_num_seqs\": 0"), -ST_INVAL,
		     "models[0].max_num_seqs: expected an integer in 1..256");
	expect_error(MODEL_WITH("\"max_num_seqs\": 257"), -ST_INVAL,
		     "models[0].max_num_seqs: expected an integer in 1..256");
	expect_error(MODEL_WITH("\"max_batch_tokens\": 15"), -ST_INVAL,
		     "models[0].max_batch_tokens: expected an integer in 16..65536");
	expect_error(MODEL_WITH("\"max_batch_tokens\": 65537"), -ST_INVAL,
		     "models[0].max_batch_tokens: expected an integer in 16..65536");
	expect_error(MODEL_WITH("\"timeout_ms\": -1"), -ST_INVAL,
		     "models[0].timeout_ms: expected an integer in 0..86400000");
	expect_error(MODEL_WITH("\"timeout_ms\": 86400001"), -ST_INVAL,
		     "models[0].timeout_ms: expected an integer in 0..86400000");
	/* Type errors get the same message. */
	expect_error(MODEL_WITH("\"max_batch_size\": \"8\""), -ST_INVAL,
		     "models[0].max_batch_size: expected an integer in 1..256");
	expect_error(MODEL_WITH("\"timeout_ms\": 1.5"), -ST_INVAL,
		     "models[0].timeout_ms: expected an integer in 0..86400000");
	expect_error(MODEL_WITH("\"max_queue_size\": null"), -ST_INVAL,
		     "models[0].max_queue_size: expected an integer in 1..1000000");
	expect_error(MODEL_WITH("\"max_num_seqs\": 4294967297"), -ST_INVAL,
		     "models[0].max_num_seqs: expected an integer in 1..256");
	/* The knobs belong to a model, not to the top level or "limits". */
	expect_error("{\"max_batch_size\": 8, " MIN_MODELS "}", -ST_INVAL,
		     "unknown key \"max_batch_size\"");
	expect_error("{\"limits\": {\"timeout_ms\": 8}, " MIN_MODELS "}",
		     -ST_INVAL, "limits: unknown key \"timeout_ms\"");
}

/* "max_model_len": absent is 0 (the engine's default), a value in range is
 * read back, one outside 16..1048576 gets the usual message. */
static void test_max_model_len(void **state)
{
	(void)state;
	struct cfg *cfg;
	char err[256];
	assert_int_equal(load("{" MIN_MODELS "}", &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg->models[0].max_model_len, 0);
	cfg_destroy(cfg);
	assert_int_equal(load(MODEL_WITH("\"max_model_len\": 64"), &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg->models[0].max_model_len, 64);
	cfg_destroy(cfg);
	assert_int_equal(load(MODEL_WITH("\"max_model_len\": 1048576"), &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg->models[0].max_model_len, 1048576);
	cfg_destroy(cfg);
	expect_error(MODEL_WITH("\"max_model_len\": 15"), -ST_INVAL,
		     "models[0].max_model_len: expected an integer in 16..1048576");
	expect_error(MODEL_WITH("\"max_model_len\": 0"), -ST_INVAL,
		     "models[0].max_model_len: expected an integer in 16..1048576");
	expect_error(MODEL_WITH("\"max_model_len\": 1048577"), -ST_INVAL,
		     "models[0].max_model_len: expected an integer in 16..1048576");
	expect_error(MODEL_WITH("\"max_model_len\": \"4096\""), -ST_INVAL,
		     "models[0].max_model_len: expected an integer in 16..1048576");
}

static void test_name_lengths(void **state)
{
	(void)state;
	char json[256], name[80];
	memset(name, 'n', 64);
	name[64] = '\0';
	snprintf(json, sizeof(json),
		 "{\"models\": [{\"name\": \"%s\", \"path\": \"p\"}]}", name);
	struct cfg *cfg;
	assert_int_equal(load(json, &cfg, NULL, 0), 0);
	assert_int_equal(strlen(cfg->models[0].name), 64);
	cfg_destroy(cfg);
	strcat(name, "n");
	snprintf(json, sizeof(json),
		 "{\"models\": [{\"name\": \"%s\", \"path\": \"p\"}]}", name);
	expect_error(json, -ST_INVAL,
		     "models[0].name: expected a name of 1..64 characters from "
		     "[A-Za-z0-9._-]");
	assert_int_equal(load("{\"models\": [{\"name\": \"A-z_0.9\", "
			      "\"path\": \"p\"}]}", &cfg, NULL, 0), 0);
	cfg_destroy(cfg);
}

static void test_unknown_keys(void **state)
{
	(void)state;
	expect_error("{\"lisen\": \"1.2.3.4:1\", " MIN_MODELS "}", -ST_INVAL,
		     "unknown key \"lisen\"");
	expect_error("{\"limits\": {\"max_conn\": 1}, " MIN_MODELS "}", -ST_INVAL,
		     "limits: unknown key \"max_conn\"");
	/* A key naming a limit at the top level is still unknown there. */
	expect_error("{\"max_connections\": 1, " MIN_MODELS "}", -ST_INVAL,
		     "unknown key \"max_connections\"");
	/* Quotes and control bytes are escaped, long keys cut. */
	expect_error("{\"a\\\"b\\n\": 1, " MIN_MODELS "}", -ST_INVAL,
		     "unknown key \"a\\\"b\\x0a\"");
	char json[512], key[201];
	memset(key, 'k', 200);
	key[200] = '\0';
	snprintf(json, sizeof(json), "{\"%s\": 1}", key);
	struct cfg *cfg;
	char err[256];
	assert_int_equal(load(json, &cfg, err, sizeof(err)), -ST_INVAL);
	assert_true(strlen(err) < 64);
	assert_non_null(strstr(err, "...\""));
}

static void expect_listen(const char *listen, const char *host, int port)
{
	char json[256];
	snprintf(json, sizeof(json), "{\"listen\": \"%s\", " MIN_MODELS "}",
		 listen);
	struct cfg *cfg;
	char err[256];
	assert_int_equal(load(json, &cfg, err, sizeof(err)), 0);
	assert_string_equal(cfg->listen_host, host);
	assert_int_equal(cfg->listen_port, port);
	cfg_destroy(cfg);
}

static void expect_listen_error(const char *listen, const char *msg)
{
	char json[256];
	snprintf(json, sizeof(json), "{\"listen\": \"%s\", " MIN_MODELS "}",
		 listen);
	expect_error(json, -ST_INVAL, msg);
}

static void test_listen(void **state)
{
	(void)state;
	const char *shape = "listen: expected \"HOST:PORT\"";
	const char *port = "listen: expected \"HOST:PORT\" with PORT in 0..65535";
	expect_listen("0.0.0.0:80", "0.0.0.0", 80);
	expect_listen("127.0.0.1:0", "127.0.0.1", 0);
	expect_listen("10.1.2.3:65535", "10.1.2.3", 65535);
	expect_listen("[::1]:9000", "::1", 9000);
	expect_listen("[::]:0", "::", 0);
	expect_listen("[2001:db8::7]:443", "2001:db8::7", 443);
	expect_listen_error("127.0.0.1", shape);       /* missing port */
	expect_listen_error("[::1]", shape);           /* missing port */
	expect_listen_error("[::1]9000", shape);
	expect_listen_error("::1:9000", shape);        /* v6 needs brackets */
	expect_listen_error(":8080", shape);           /* missing host */
	expect_listen_error("[]:8080", shape);
	expect_listen("localhost:8081", "127.0.0.1", 8081);
	expect_listen_error("example.com:8080", shape); /* numeric only */
	expect_listen_error("[localhost]:8080", shape);
	expect_listen_error("1.2.3:80", shape);
	expect_listen_error("[1.2.3.4]:80", shape);
	expect_listen_error("127.0.0.1:65536", port);  /* bad ports */
	expect_listen_error("127.0.0.1:", port);
	expect_listen_error("127.0.0.1:-1", port);
	expect_listen_error("127.0.0.1:80x", port);
	expect_listen_error("127.0.0.1:123456", port);
	expect_listen_error("[::1]:99999", port);
	expect_error("{\"listen\": 8080, " MIN_MODELS "}", -ST_INVAL, shape);
}

static void test_syntax_errors(void **state)
{
	(void)state;
	struct cfg *cfg;
	char err[256];
	assert_int_equal(load("{\n  \"listen\": ,\n}", &cfg, err, sizeof(err)),
			 -ST_INVAL);
	assert_null(cfg);
	assert_string_equal(err, "line 2 column 13: unexpected token near ','");
	assert_int_equal(load("", &cfg, err, sizeof(err)), -ST_INVAL);
	assert_true(strncmp(err, "line 1 column 0: ", 17) == 0);
	/* Duplicate keys, at the top and inside a model. */
	assert_int_equal(load("{\"listen\": \"1.2.3.4:1\", \"listen\": \"1.2.3.4:2\"}",
			      &cfg, err, sizeof(err)), -ST_INVAL);
	assert_string_equal(err, "line 1 column 32: duplicate object key near "
				 "'\"listen\"'");
	assert_int_equal(load("{\"models\": [{\"name\": \"a\", \"name\": \"b\", "
			      "\"path\": \"p\"}]}", &cfg, err, sizeof(err)),
			 -ST_INVAL);
	assert_non_null(strstr(err, "duplicate object key"));
	/* NUL bytes, inside a string or as raw bytes, are refused. */
	assert_int_equal(load("{\"models\": [{\"name\": \"a\\u0000b\", \"path\": \"p\"}]}",
			      &cfg, err, sizeof(err)), -ST_INVAL);
	static const char raw[] = "{\"models\": [{\"name\": \"a\", \"path\": \"p\"}]\0}";
	assert_int_equal(cfg_load_string(raw, sizeof(raw) - 1, &cfg, err,
					 sizeof(err)), -ST_INVAL);
	assert_null(cfg);
}

/* The text need not be NUL-terminated: only len bytes are read. */
static void test_length_bounded(void **state)
{
	(void)state;
	static const char text[] = "{" MIN_MODELS "}garbage";
	struct cfg *cfg;
	assert_int_equal(cfg_load_string(text, sizeof(text) - 1 - 7, &cfg, NULL, 0), 0);
	cfg_destroy(cfg);
	char err[256];
	assert_int_equal(cfg_load_string(text, sizeof(text) - 1, &cfg, err,
					 sizeof(err)), -ST_INVAL);
	assert_int_equal(cfg_load_string(NULL, 0, &cfg, err, sizeof(err)),
			 -ST_INVAL);
}

/* A tiny error buffer is cut, never overrun; no buffer at all is fine. */
static void test_err_buffer(void **state)
{
	(void)state;
	struct cfg *cfg;
	char err[8];
	memset(err, 'x', sizeof(err));
	assert_int_equal(load("{}", &cfg, err, 5), -ST_INVAL);
	assert_string_equal(err, "miss");
	assert_int_equal(err[5], 'x');
	assert_int_equal(load("{}", &cfg, NULL, 0), -ST_INVAL);
	assert_int_equal(load("{}", &cfg, err, 0), -ST_INVAL);
	assert_int_equal(cfg_load_file("/nonexistent/x.json", &cfg, err, 0), -ST_IO);
	cfg_destroy(NULL);
}

/* An input over 1 MiB is refused before parsing; 1 MiB exactly is fine. */
static void test_oversize(void **state)
{
	(void)state;
	size_t cap = 1024 * 1024;
	char *big = malloc(cap + 2);
	assert_non_null(big);
	const char *head = "{" MIN_MODELS "}";
	memset(big, ' ', cap + 1);
	memcpy(big, head, strlen(head));
	big[cap + 1] = '\0';
	struct cfg *cfg;
	char err[256];
	assert_int_equal(cfg_load_string(big, cap, &cfg, err, sizeof(err)), 0);
	cfg_destroy(cfg);
	assert_int_equal(cfg_load_string(big, cap + 1, &cfg, err, sizeof(err)),
			 -ST_TOOBIG);
	assert_null(cfg);
	assert_string_equal(err, "expected at most 1048576 bytes of JSON");

	char path[64], want[128];
	write_tmp(path, big, cap + 1);
	assert_int_equal(cfg_load_file(path, &cfg, err, sizeof(err)), -ST_TOOBIG);
	snprintf(want, sizeof(want), "%s: expected at most 1048576 bytes of JSON",
		 path);
	assert_string_equal(err, want);
	unlink(path);
	free(big);
}

static void test_files(void **state)
{
	(void)state;
	struct cfg *cfg;
	char err[256], want[256], path[64];
	assert_int_equal(cfg_load_file("/", &cfg, err, sizeof(err)), -ST_IO);
	assert_null(cfg);
	assert_string_equal(err, "/: not a regular file");
	assert_int_equal(cfg_load_file("/nonexistent/x.json", &cfg, err,
				       sizeof(err)), -ST_IO);
	assert_string_equal(err, "/nonexistent/x.json: No such file or directory");

	const char *bad = "{\"models\": [{\"name\": \"a\", \"path\": \"p\", "
			  "\"replicas\": -1}]}";
	write_tmp(path, bad, strlen(bad));
	assert_int_equal(cfg_load_file(path, &cfg, err, sizeof(err)), -ST_INVAL);
	snprintf(want, sizeof(want),
		 "%s: models[0].replicas: expected an integer >= 1", path);
	assert_string_equal(err, want);
	unlink(path);

	write_tmp(path, "{\n}x", 4);
	assert_int_equal(cfg_load_file(path, &cfg, err, sizeof(err)), -ST_INVAL);
	snprintf(want, sizeof(want), "%s: line 2 column 2: end of file expected "
		 "near 'x'", path);
	assert_string_equal(err, want);
	unlink(path);
}

static void test_help(void **state)
{
	(void)state;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	assert_non_null(f);
	cfg_help_print(f);
	fclose(f);
	static const char *const keys[] = {
		"listen", "api_keys", "access_log", "limits.max_connections",
		"limits.max_header_bytes", "limits.max_body_bytes",
		"limits.header_timeout_ms", "limits.idle_timeout_ms",
		"limits.body_timeout_ms", "limits.drain_timeout_ms",
		"limits.live_idle_timeout_ms (integer, default 10000, 1..86400000)",
		"limits.send_timeout_ms (integer, default 60000, 1..86400000)",
		"batch (object)", "batch.store (string, default $XDG_STATE_HOME/inferd/batch.db",
		"batch.input_dir (string, default none (no audio batches), 1..4096 bytes)",
		"batch.concurrency (integer, default the largest batch the models take",
		"batch.max_file_bytes (integer, default 209715200,",
		"batch.max_lines (integer, default 50000, 1..10000000)",
		"batch.max_jobs (integer, default 100, 1..100000)",
		"batch.max_store_bytes (integer, default 10737418240,",
		"batch.file_ttl_s (integer, default 2592000, 1..315360000)",
		"price_per_hour (number, default 0 (no cost figures))",
		"models[].name", "models[].path", "models[].format",
		"models[].replicas (integer, object or array, default 1, >= 1)",
		"models[].replicas.count (integer, required, >= 1)",
		"models[].replicas[].device (string, required, 1..63 bytes)",
		("models[].replicas[].threads (integer, default one per core of "
		 "the device, 1..1024)"),
		"models[].max_batch_size (integer, default 8, 1..256)",
		"models[].max_queue_delay_ms (integer, default 5, 0..60000)",
		"models[].max_queue_size (integer, default 64, 1..1000000)",
		"models[].slow_replica_factor (integer, default 4, 0..1000)",
		"models[].max_num_seqs (integer, default 16, 1..256)",
		"models[].max_batch_tokens (integer, default 512, 16..65536)",
		"models[].prefix_cache_mb (integer, default 128, 0..1048576)",
		"models[].timeout_ms (integer, default 0, 0..86400000)",
		"models[].live_window_ms (integer, default 0, 0..30000)",
		"models[].kv_cache_f16 (boolean, default false)",
		("models[].max_model_len (integer, default 4096 or the model's trained context, "
		 "whichever is smaller, 16..1048576)"),
		"models[].compute_type (string, default \"default\")",
		"models[].vad_filter (boolean, default false)",
		"models[].vad_model (string, default silero-vad/silero_vad_16k.safetensors beside the "
		"model when it exists, 1..4096 bytes)",
		/* the replicas doc names all three forms */
		"N or {\"count\": N}", "[{\"device\": \"cpu:0-3\", \"threads\": 4}",
		"models given the same cores share them",
	};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (!strstr(text, keys[i]))
			fail_msg("--help lacks %s in:\n%s", keys[i], text);
	assert_non_null(strstr(text, "default 16384, 1024..1048576"));
	assert_non_null(strstr(text, "default 1, >= 1"));
	/* Every entry is two lines: "  PATH (...)" and its doc. */
	size_t lines = 0;
	for (const char *p = text; *p; p++)
		lines += *p == '\n';
	assert_int_equal(lines, 2 * 46);
	free(text);
	assert_string_equal(cfg_model_format_str(CFG_MODEL_FORMAT_AUTO), "auto");
	assert_string_equal(cfg_model_format_str(CFG_MODEL_FORMAT_GGUF), "gguf");
	assert_string_equal(cfg_model_format_str(CFG_MODEL_FORMAT_CT2), "ct2");
	assert_string_equal(cfg_model_format_str(CFG_MODEL_FORMAT_COUNT), "unknown");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_default_json),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_full),
		cmocka_unit_test(test_errors_contract),
		cmocka_unit_test(test_errors_numbers),
		cmocka_unit_test(test_errors_shape),
		cmocka_unit_test(test_replicas_forms),
		cmocka_unit_test(test_replicas_errors),
		cmocka_unit_test(test_replicas_ceiling),
		cmocka_unit_test(test_sched_knobs),
		cmocka_unit_test(test_max_model_len),
		cmocka_unit_test(test_name_lengths),
		cmocka_unit_test(test_unknown_keys),
		cmocka_unit_test(test_listen),
		cmocka_unit_test(test_syntax_errors),
		cmocka_unit_test(test_length_bounded),
		cmocka_unit_test(test_err_buffer),
		cmocka_unit_test(test_oversize),
		cmocka_unit_test(test_files),
		cmocka_unit_test(test_help),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
