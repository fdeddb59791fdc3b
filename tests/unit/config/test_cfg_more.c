/* test_cfg_more.c - unit tests of config/ (cmocka), continued from
 * test_cfg.c: compute_type, agreement with config/inferd.schema.json
 * (every limit's and per-model integer's default and bounds probed
 * through the loader, the replicas forms), the array ceilings, and
 * allocation failure at every k (curl torture style) for both load
 * functions. Shared helpers: cfg_test.h.
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

/* One model entry {"name": "m", "path": "p", key: value (JSON text)}
 * loaded into *cfg; load's status. */
static int load_model_key(const char *key, const char *value, struct cfg **cfg)
{
	char text[200];
	snprintf(text, sizeof(text), "{\"models\": [{\"name\": \"m\", \"path\": \"p\", \"%s\": %s}]}",
		 key, value);
	return load(text, cfg, NULL, 0);
}

/* "compute_type": absent is "default"; each faster-whisper name loads. */
static void test_compute_type(void **state)
{
	(void)state;
	static const char *const names[] = { "default",	 "float32",  "int8",
					     "int8_float32", "bfloat16", "int8_bfloat16" };
	struct cfg *cfg;
	assert_int_equal(load("{" MIN_MODELS "}", &cfg, NULL, 0), 0);
	assert_int_equal(cfg->models[0].compute_type, CFG_COMPUTE_DEFAULT);
	cfg_destroy(cfg);
	for (int i = 0; i < 6; i++) {
		char quoted[32];
		snprintf(quoted, sizeof(quoted), "\"%s\"", names[i]);
		assert_int_equal(load_model_key("compute_type", quoted, &cfg), 0);
		assert_int_equal(cfg->models[0].compute_type, i);
		assert_string_equal(cfg_compute_type_str(cfg->models[0].compute_type), names[i]);
		assert_int_equal(cfg_compute_type_parse(names[i]), i);
		cfg_destroy(cfg);
	}
	assert_int_equal(cfg_compute_type_parse("INT8"), -1);
	assert_int_equal(cfg_compute_type_parse("int8_float16"), -1);
	assert_int_equal(cfg_compute_type_parse(NULL), -1);
	assert_string_equal(cfg_compute_type_str(CFG_COMPUTE_COUNT), "unknown");
}

/* "kv_cache_f16": absent is false; true and false load; a string is
 * refused naming the key. */
static void test_kv_cache_f16(void **state)
{
	(void)state;
	struct cfg *cfg;
	char err[256];
	assert_int_equal(load("{" MIN_MODELS "}", &cfg, NULL, 0), 0);
	assert_int_equal(cfg->models[0].kv_cache_f16, 0);
	cfg_destroy(cfg);
	static const char *const vals[] = { "false", "true" };
	for (int i = 0; i < 2; i++) {
		assert_int_equal(load_model_key("kv_cache_f16", vals[i], &cfg), 0);
		assert_int_equal(cfg->models[0].kv_cache_f16, i);
		cfg_destroy(cfg);
	}
	assert_int_equal(load("{\"models\": [{\"name\": \"m\", \"path\": \"p\", "
			      "\"kv_cache_f16\": \"f16\"}]}", &cfg, err, sizeof(err)), -ST_INVAL);
	assert_string_equal(err, "models[0].kv_cache_f16: expected true or false");
}

/* limit_value - the loaded value of limits.<key>, via a small name table. */
static int64_t limit_value(const struct cfg *cfg, const char *key)
{
	if (strcmp(key, "max_connections") == 0)
		return cfg->max_connections;
	if (strcmp(key, "max_header_bytes") == 0)
		return cfg->max_header_bytes;
	if (strcmp(key, "max_body_bytes") == 0)
		return cfg->max_body_bytes;
	if (strcmp(key, "header_timeout_ms") == 0)
		return cfg->header_timeout_ms;
	if (strcmp(key, "idle_timeout_ms") == 0)
		return cfg->idle_timeout_ms;
	if (strcmp(key, "body_timeout_ms") == 0)
		return cfg->body_timeout_ms;
	if (strcmp(key, "drain_timeout_ms") == 0)
		return cfg->drain_timeout_ms;
	if (strcmp(key, "live_idle_timeout_ms") == 0)
		return cfg->live_idle_timeout_ms;
	if (strcmp(key, "send_timeout_ms") == 0)
		return cfg->send_timeout_ms;
	if (strcmp(key, "max_file_bytes") == 0)
		return cfg->batch_max_file_bytes;
	if (strcmp(key, "max_lines") == 0)
		return cfg->batch_max_lines;
	if (strcmp(key, "max_jobs") == 0)
		return cfg->batch_max_jobs;
	if (strcmp(key, "max_store_bytes") == 0)
		return cfg->batch_max_store_bytes;
	if (strcmp(key, "file_ttl_s") == 0)
		return cfg->batch_file_ttl_s;
	if (strcmp(key, "concurrency") == 0)
		return cfg->batch_concurrency;
	fail_msg("schema has a limit the test does not know: %s", key);
	return -1;
}

/* try_limit - load {section: {key: value}} plus a model; returns rc. */
static int try_limit(const char *section, const char *key, int64_t value, struct cfg **out)
{
	char json[256];
	snprintf(json, sizeof(json), "{\"%s\": {\"%s\": %lld}, " MIN_MODELS "}", section,
		 key, (long long)value);
	return load(json, out, NULL, 0);
}

/* model_value - the loaded value of models[0].<key>, an integer knob. */
static int64_t model_value(const struct cfg *cfg, const char *key)
{
	const struct cfg_model *m = &cfg->models[0];
	if (strcmp(key, "max_batch_size") == 0)
		return m->max_batch_size;
	if (strcmp(key, "max_queue_delay_ms") == 0)
		return m->max_queue_delay_ms;
	if (strcmp(key, "max_queue_size") == 0)
		return m->max_queue_size;
	if (strcmp(key, "max_num_seqs") == 0)
		return m->max_num_seqs;
	if (strcmp(key, "max_batch_tokens") == 0)
		return m->max_batch_tokens;
	if (strcmp(key, "prefix_cache_mb") == 0)
		return m->prefix_cache_mb;
	if (strcmp(key, "timeout_ms") == 0)
		return m->timeout_ms;
	if (strcmp(key, "live_window_ms") == 0)
		return m->live_window_ms;
	if (strcmp(key, "slow_replica_factor") == 0)
		return m->slow_replica_factor;
	if (strcmp(key, "max_model_len") == 0)
		return m->max_model_len;
	fail_msg("schema has a model integer the test does not know: %s", key);
	return -1;
}

/* try_model - load one model with key: value; returns rc. */
static int try_model(const char *key, int64_t value, struct cfg **out)
{
	char json[256];
	snprintf(json, sizeof(json), MODEL_WITH("\"%s\": %lld"), key,
		 (long long)value);
	return load(json, out, NULL, 0);
}

/* check_schema_model_int - as check_schema_limit for a model's integer
 * (no "default": absent is 0, outside the range, as max_model_len's). */
static void check_schema_model_int(const char *key, json_t *prop,
				   const struct cfg *defaults)
{
	assert_string_equal(json_string_value(json_object_get(prop, "type")),
			    "integer");
	int64_t min = json_integer_value(json_object_get(prop, "minimum"));
	int64_t max = json_integer_value(json_object_get(prop, "maximum"));
	json_t *jdef = json_object_get(prop, "default");
	assert_true(!jdef || json_is_integer(jdef));
	int64_t def = jdef ? json_integer_value(jdef) : 0;
	assert_int_equal(model_value(defaults, key), def);
	struct cfg *cfg;
	assert_int_equal(try_model(key, min, &cfg), 0);
	assert_int_equal(model_value(cfg, key), min);
	cfg_destroy(cfg);
	assert_int_equal(try_model(key, max, &cfg), 0);
	assert_int_equal(model_value(cfg, key), max);
	cfg_destroy(cfg);
	assert_int_equal(try_model(key, min - 1, &cfg), -ST_INVAL);
	assert_int_equal(try_model(key, max + 1, &cfg), -ST_INVAL);
}

/* check_schema_replicas - "replicas" is a oneOf of the three forms with the
 * loader's bounds: N >= 1, {"count": N >= 1}, 1..256 placements of a
 * device (1..63 bytes) and threads (1..1024). */
static void check_schema_replicas(json_t *replicas)
{
	assert_int_equal(json_integer_value(json_object_get(replicas, "default")), 1);
	json_t *forms = json_object_get(replicas, "oneOf");
	assert_int_equal(json_array_size(forms), 3);
	json_t *n = json_array_get(forms, 0);
	assert_string_equal(json_string_value(json_object_get(n, "type")), "integer");
	assert_int_equal(json_integer_value(json_object_get(n, "minimum")), 1);
	assert_int_equal(json_integer_value(json_object_get(n, "maximum")), 2147483647);
	json_t *obj = json_array_get(forms, 1);
	assert_string_equal(json_string_value(json_object_get(obj, "type")), "object");
	assert_true(json_is_false(json_object_get(obj, "additionalProperties")));
	json_t *count = json_object_get(json_object_get(obj, "properties"), "count");
	assert_int_equal(json_integer_value(json_object_get(count, "minimum")), 1);
	assert_int_equal(json_integer_value(json_object_get(count, "maximum")), 2147483647);
	assert_string_equal(json_string_value(json_array_get(
		json_object_get(obj, "required"), 0)), "count");
	json_t *arr = json_array_get(forms, 2);
	assert_string_equal(json_string_value(json_object_get(arr, "type")), "array");
	assert_int_equal(json_integer_value(json_object_get(arr, "minItems")), 1);
	assert_int_equal(json_integer_value(json_object_get(arr, "maxItems")), 256);
	json_t *item = json_object_get(arr, "items");
	assert_true(json_is_false(json_object_get(item, "additionalProperties")));
	assert_string_equal(json_string_value(json_array_get(
		json_object_get(item, "required"), 0)), "device");
	json_t *iprops = json_object_get(item, "properties");
	assert_int_equal(json_object_size(iprops), 2);
	json_t *device = json_object_get(iprops, "device");
	assert_int_equal(json_integer_value(json_object_get(device, "minLength")), 1);
	assert_int_equal(json_integer_value(json_object_get(device, "maxLength")), 63);
	json_t *threads = json_object_get(iprops, "threads");
	assert_int_equal(json_integer_value(json_object_get(threads, "minimum")), 1);
	assert_int_equal(json_integer_value(json_object_get(threads, "maximum")), 1024);
	/* The same bounds through the loader. */
	static const struct {
		const char *json;
		int rc;
	} probes[] = {
		{ MODEL_WITH("\"replicas\": [{\"device\": \"c\", \"threads\": 1}]"), 0 },
		{ MODEL_WITH("\"replicas\": [{\"device\": \"c\", \"threads\": 1024}]"), 0 },
		{ MODEL_WITH("\"replicas\": [{\"device\": \"c\", \"threads\": 0}]"), -ST_INVAL },
		{ MODEL_WITH("\"replicas\": [{\"device\": \"c\", \"threads\": 1025}]"), -ST_INVAL },
		{ MODEL_WITH("\"replicas\": {\"count\": 1}"), 0 },
		{ MODEL_WITH("\"replicas\": {\"count\": 0}"), -ST_INVAL },
		{ MODEL_WITH("\"replicas\": 1"), 0 },
		{ MODEL_WITH("\"replicas\": 0"), -ST_INVAL },
	};
	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
		struct cfg *cfg;
		assert_int_equal(load(probes[i].json, &cfg, NULL, 0), probes[i].rc);
		cfg_destroy(cfg);
	}
}

/* check_schema_limit - the schema's default, minimum and maximum for one
 * integer of section ("limits", "batch") are what the loader applies
 * and accepts (no "default": absent is 0; no "maximum": INT64_MAX). */
static void check_schema_limit(const char *section, const char *key, json_t *prop,
			       const struct cfg *defaults)
{
	int64_t min = json_integer_value(json_object_get(prop, "minimum"));
	json_t *jmax = json_object_get(prop, "maximum");
	int64_t max = jmax ? json_integer_value(jmax) : INT64_MAX;
	int64_t def = json_integer_value(json_object_get(prop, "default"));
	assert_int_equal(limit_value(defaults, key), def);
	struct cfg *cfg;
	assert_int_equal(try_limit(section, key, min, &cfg), 0);
	assert_int_equal(limit_value(cfg, key), min);
	cfg_destroy(cfg);
	assert_int_equal(try_limit(section, key, max, &cfg), 0);
	assert_int_equal(limit_value(cfg, key), max);
	cfg_destroy(cfg);
	assert_int_equal(try_limit(section, key, min - 1, &cfg), -ST_INVAL);
	if (jmax)
		assert_int_equal(try_limit(section, key, max + 1, &cfg), -ST_INVAL);
}

static void test_schema_agrees(void **state)
{
	(void)state;
	char path[4096];
	source_path(path, sizeof(path), "config/inferd.schema.json");
	json_error_t jerr;
	json_t *schema = json_load_file(path, 0, &jerr);
	if (!schema)
		fail_msg("%s: %s", path, jerr.text);
	json_t *props = json_object_get(schema, "properties");
	/* The same top-level keys as the loader knows (and no more). */
	assert_int_equal(json_object_size(props), 8);
	static const char *const top[] = { "listen", "grpc_listen", "api_keys", "access_log",
					   "limits", "batch", "price_per_hour", "models" };
	for (size_t i = 0; i < 8; i++)
		assert_non_null(json_object_get(props, top[i]));
	assert_string_equal(json_string_value(json_object_get(
				    json_object_get(props, "grpc_listen"), "default")), "");
	struct cfg *defaults;
	assert_int_equal(load("{" MIN_MODELS "}", &defaults, NULL, 0), 0);
	json_t *listen = json_object_get(json_object_get(props, "listen"), "default");
	char want[64];
	snprintf(want, sizeof(want), "%s:%d", defaults->listen_host,
		 defaults->listen_port);
	assert_string_equal(json_string_value(listen), want);
	assert_true(json_is_true(json_object_get(json_object_get(props, "access_log"),
						 "default")));
	assert_int_equal(defaults->access_log, 1);

	json_t *limits = json_object_get(json_object_get(props, "limits"), "properties");
	assert_int_equal(json_object_size(limits), 9);
	const char *key;
	json_t *prop;
	json_object_foreach(limits, key, prop)
		check_schema_limit("limits", key, prop, defaults);
	/* batch: its integers as the limits', its paths strings */
	json_t *batch = json_object_get(json_object_get(props, "batch"), "properties");
	assert_int_equal(json_object_size(batch), 8);
	json_object_foreach(batch, key, prop)
		if (!strcmp(json_string_value(json_object_get(prop, "type")), "integer"))
			check_schema_limit("batch", key, prop, defaults);
	assert_null(defaults->batch_store);
	assert_null(defaults->batch_input_dir);
	assert_true(defaults->price_per_hour == 0);
	cfg_destroy(defaults);

	json_t *models = json_object_get(props, "models");
	assert_int_equal(json_integer_value(json_object_get(models, "minItems")), 1);
	assert_int_equal(json_integer_value(json_object_get(models, "maxItems")), 256);
	json_t *mprops = json_object_get(json_object_get(models, "items"), "properties");
	assert_int_equal(json_object_size(mprops), 18);
	static const char *const mkeys[] = { "name",	     "path",	     "format",
					     "replicas", "compute_type", "kv_cache_f16",
					     "vad_filter", "vad_model" };
	for (size_t i = 0; i < 8; i++)
		assert_non_null(json_object_get(mprops, mkeys[i]));
	json_t *kvp = json_object_get(mprops, "kv_cache_f16");
	assert_string_equal(json_string_value(json_object_get(kvp, "type")), "boolean");
	assert_true(json_is_false(json_object_get(kvp, "default")));
	check_schema_replicas(json_object_get(mprops, "replicas"));
	/* Every other model key is a scheduling integer: probe it. */
	assert_int_equal(load("{" MIN_MODELS "}", &defaults, NULL, 0), 0);
	size_t n_ints = 0;
	json_object_foreach(mprops, key, prop) {
		bool known = false;
		for (size_t i = 0; i < 8; i++)
			known = known || strcmp(key, mkeys[i]) == 0;
		if (known)
			continue;
		check_schema_model_int(key, prop, defaults);
		n_ints++;
	}
	assert_int_equal(n_ints, 10);
	cfg_destroy(defaults);
	json_decref(schema);
}

/* The array ceilings the schema states: 256 models, 1024 API keys. */
static void test_array_ceilings(void **state)
{
	(void)state;
	size_t cap = 64 * 1024;
	char *json = malloc(cap);
	assert_non_null(json);
	for (int n = 256; n <= 257; n++) {
		size_t o = (size_t)snprintf(json, cap, "{\"models\": [");
		for (int i = 0; i < n; i++)
			o += (size_t)snprintf(json + o, cap - o, "%s{\"name\": \"m%d\", "
					      "\"path\": \"p\"}", i ? "," : "", i);
		snprintf(json + o, cap - o, "]}");
		struct cfg *cfg;
		assert_int_equal(load(json, &cfg, NULL, 0), n == 256 ? 0 : -ST_INVAL);
		cfg_destroy(cfg);
	}
	for (int n = 1024; n <= 1025; n++) {
		size_t o = (size_t)snprintf(json, cap, "{" MIN_MODELS ", \"api_keys\": [");
		for (int i = 0; i < n; i++)
			o += (size_t)snprintf(json + o, cap - o, "%s\"k%d\"", i ? "," : "", i);
		snprintf(json + o, cap - o, "]}");
		struct cfg *cfg;
		assert_int_equal(load(json, &cfg, NULL, 0), n == 1024 ? 0 : -ST_INVAL);
		if (cfg)
			assert_int_equal(cfg->n_api_keys, 1024);
		cfg_destroy(cfg);
	}
	free(json);
}

/* Fail the k-th allocation for every k until a load succeeds; each failure
 * must be a clean -ST_NOMEM with no leak (ASan checks) and no crash. */
static void test_alloc_failures(void **state)
{
	(void)state;
	long k;
	for (k = 0; k < 1000; k++) {
		struct cfg *cfg = (struct cfg *)1;
		char err[256] = "";
		mem_fail_after(k);
		int rc = load(full_json, &cfg, err, sizeof(err));
		mem_fail_after(-1);
		if (rc == 0) {
			assert_int_equal(cfg->n_models, 3);
			cfg_destroy(cfg);
			break;
		}
		assert_int_equal(rc, -ST_NOMEM);
		assert_null(cfg);
		assert_string_equal(err, "out of memory");
	}
	assert_true(k > 5 && k < 1000); /* every allocation site was hit */

	char path[64];
	write_tmp(path, full_json, strlen(full_json));
	for (k = 0; k < 1000; k++) {
		struct cfg *cfg;
		char err[256];
		mem_fail_after(k);
		int rc = cfg_load_file(path, &cfg, err, sizeof(err));
		mem_fail_after(-1);
		if (rc == 0) {
			cfg_destroy(cfg);
			break;
		}
		assert_int_equal(rc, -ST_NOMEM);
		assert_non_null(strstr(err, ": out of memory"));
	}
	assert_true(k < 1000);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_schema_agrees),
		cmocka_unit_test(test_compute_type),
		cmocka_unit_test(test_kv_cache_f16),
		cmocka_unit_test(test_array_ceilings),
		cmocka_unit_test(test_alloc_failures),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
