/* cfg_test.h - what the config/ unit tests (test_cfg.c, test_cfg_more.c)
 * share: small JSON fragments, the loader on a string, and the checks
 * every test uses. */
#ifndef CFG_TEST_H
#define CFG_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/st.h"
#include "config/cfg.h"

#define MIN_MODELS "\"models\": [{\"name\": \"m\", \"path\": \"p\"}]"
/* One model "m" with KEYS (a JSON fragment) added to it. */
#define MODEL_WITH(KEYS) \
	"{\"models\": [{\"name\": \"m\", \"path\": \"p\", " KEYS "}]}"

/* Every knob set away from its default. */
static const char full_json[] __attribute__((unused)) =
	"{\n"
	"  \"listen\": \"[::1]:9090\",\n"
	"  \"grpc_listen\": \"127.0.0.1:9091\",\n"
	"  \"api_keys\": [\"k1\", \"k2\"],\n"
	"  \"access_log\": false,\n"
	"  \"limits\": {\"max_connections\": 7, \"max_header_bytes\": 2048,\n"
	"    \"max_body_bytes\": 4096, \"header_timeout_ms\": 11,\n"
	"    \"idle_timeout_ms\": 12, \"body_timeout_ms\": 13,\n"
	"    \"drain_timeout_ms\": 14},\n"
	"  \"models\": [\n"
	"    {\"name\": \"a\", \"path\": \"pa\", \"format\": \"ct2\",\n"
	"     \"replicas\": [{\"device\": \"cpu:0-1\", \"threads\": 2},\n"
	"                  {\"device\": \"cpu:2,4-5\"}],\n"
	"     \"max_batch_size\": 4, \"max_queue_delay_ms\": 0,\n"
	"     \"max_queue_size\": 9, \"max_num_seqs\": 3,\n"
	"     \"max_batch_tokens\": 16, \"timeout_ms\": 2500},\n"
	"    {\"name\": \"b\", \"path\": \"pb\", \"format\": \"gguf\", \"replicas\": 3},\n"
	"    {\"name\": \"c\", \"path\": \"pc\", \"replicas\": {\"count\": 2}}\n"
	"  ]\n"
	"}\n";

/* load - cfg_load_string on a NUL-terminated text. */
static inline int load(const char *json, struct cfg **out, char *err, size_t errlen)
{
	return cfg_load_string(json, strlen(json), out, err, errlen);
}

/* expect_sched_defaults - m's scheduling knobs are cfg.h's defaults. */
static inline void expect_sched_defaults(const struct cfg_model *m)
{
	assert_int_equal(m->max_batch_size, 8);
	assert_int_equal(m->max_queue_delay_ms, 5);
	assert_int_equal(m->max_queue_size, 64);
	assert_int_equal(m->max_num_seqs, 16);
	assert_int_equal(m->max_batch_tokens, 512);
	assert_int_equal(m->timeout_ms, 0);
	assert_int_equal(m->slow_replica_factor, 4);
}

/* expect_count - m has "replicas": N (or {"count": N}, or none: 1). */
static inline void expect_count(const struct cfg_model *m, int n)
{
	assert_int_equal(m->replica_count, n);
	assert_null(m->replicas);
	assert_int_equal(m->n_replicas, 0);
}

/* expect_error - json must fail with rc and exactly msg. */
static inline void expect_error(const char *json, int rc, const char *msg)
{
	struct cfg *cfg = (struct cfg *)1;
	char err[256] = "unset";
	int got = load(json, &cfg, err, sizeof(err));
	if (got != rc || strcmp(err, msg) != 0)
		print_error("input: %s\n", json);
	assert_int_equal(got, rc);
	assert_null(cfg);
	assert_string_equal(err, msg);
}

/* write_tmp - a new temporary file holding len bytes of data; its path is
 * written to path (at least 64 bytes). */
static inline void write_tmp(char *path, const char *data, size_t len)
{
	const char *dir = getenv("TMPDIR");
	snprintf(path, 64, "%s/test_cfg_XXXXXX", dir && strlen(dir) < 40 ? dir : "/tmp");
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
}

/* source_path - INFERD_SOURCE_ROOT/rel into out. */
static inline void source_path(char *out, size_t outlen, const char *rel)
{
	const char *root = getenv("INFERD_SOURCE_ROOT");
	snprintf(out, outlen, "%s/%s", root ? root : ".", rel);
}

#endif /* CFG_TEST_H */
