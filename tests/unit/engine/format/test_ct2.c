/* test_ct2.c - the CTranslate2 reader (engine/format/eng_ct2.h) on the real
 * default Whisper tiny.en folder, on corrupted views of its model.bin, on
 * folders missing a file, and on the seed files tests/fuzz/make-seeds.py
 * writes.
 *
 * Expected values for the real model.bin were read independently with a
 * few lines of Python struct.unpack following model_spec.py's _serialize
 * (version 6, "WhisperSpec", revision 3, 148 variables, one alias); the
 * config.json values with python3 -m json.tool.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/mem.h"
#include "common/st.h"
#include "engine/format/eng_ct2.h"

#define WHISPER "whisper-tiny.en"
#define BIN_SIZE 75537502u /* model.bin bytes */

struct mapped {
	char path[4096]; /* file path */
	uint8_t *p;      /* mapping */
	size_t size;     /* bytes */
};

static void map_env(struct mapped *m, const char *env, const char *rel, bool writable)
{
	const char *dir = getenv(env);
	assert_non_null(dir);
	snprintf(m->path, sizeof(m->path), "%s/%s", dir, rel);
	int fd = open(m->path, O_RDONLY);
	assert_true(fd >= 0);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	m->size = (size_t)st.st_size;
	m->p = mmap(NULL, m->size, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_PRIVATE, fd, 0);
	assert_true(m->p != MAP_FAILED);
	close(fd);
}

static void unmap(struct mapped *m)
{
	munmap(m->p, m->size);
}

static void whisper_dir(char *buf, size_t n)
{
	snprintf(buf, n, "%s/" WHISPER, getenv("INFERD_MODELS"));
}

/* ---- the real folder ----------------------------------------------------- */

static void test_real_header(void **state)
{
	(void)state;
	char dir[4096], err[512];
	struct eng_ct2 *c;
	whisper_dir(dir, sizeof(dir));
	assert_int_equal(eng_ct2_open(dir, &c, err, sizeof(err)), 0);
	assert_int_equal(eng_ct2_binary_version(c), 6);
	assert_string_equal(eng_ct2_spec_name(c), "WhisperSpec");
	assert_int_equal(eng_ct2_spec_revision(c), 3);
	assert_int_equal(eng_ct2_n_vars(c), 148);
	assert_int_equal(eng_ct2_file_size(c), BIN_SIZE);
	assert_int_equal(eng_ct2_var_bytes(c), 75529741u);
	assert_non_null(strstr(eng_ct2_vocab_path(c), "/vocabulary.txt"));
	assert_non_null(strstr(eng_ct2_tokenizer_path(c), "/tokenizer.json"));
	eng_ct2_close(c);
	eng_ct2_close(NULL);
}

static void test_real_variables(void **state)
{
	(void)state;
	char dir[4096], err[512];
	struct eng_ct2 *c;
	const char *alias, *target;
	whisper_dir(dir, sizeof(dir));
	assert_int_equal(eng_ct2_open(dir, &c, err, sizeof(err)), 0);
	const struct eng_ct2_var *v = eng_ct2_var_find(c, "encoder/conv1/weight");
	assert_non_null(v);
	assert_int_equal(v->rank, 3);
	assert_int_equal(v->dims[0], 384);
	assert_int_equal(v->dims[1], 80);
	assert_int_equal(v->dims[2], 3);
	assert_int_equal(v->dtype, ENG_CT2_DTYPE_FLOAT16);
	assert_int_equal(v->size_bytes, 184320);
	assert_int_equal(v->offset, 59115536);
	v = eng_ct2_var_find(c, "encoder/conv2/weight");
	assert_int_equal(v->dims[1], 384);
	assert_int_equal(v->size_bytes, 884736);
	v = eng_ct2_var_at(c, 4);
	assert_string_equal(v->name, "decoder/embeddings/weight");
	assert_int_equal(v->dims[0], 51864);
	assert_int_equal(v->dims[1], 384);
	assert_int_equal(v->n_elems, 51864u * 384u);
	/* The one alias: the output projection shares the embedding. */
	assert_int_equal(eng_ct2_n_aliases(c), 1);
	assert_int_equal(eng_ct2_alias_at(c, 0, &alias, &target), 0);
	assert_string_equal(alias, "decoder/projection/weight");
	assert_string_equal(target, "decoder/embeddings/weight");
	assert_ptr_equal(eng_ct2_var_find(c, alias), v);
	assert_int_equal(eng_ct2_alias_at(c, 1, &alias, &target), -ST_NOTFOUND);
	/* A scalar: encoder/num_heads = 6 (int16). */
	v = eng_ct2_var_find(c, "encoder/num_heads");
	assert_int_equal(v->rank, 0);
	assert_int_equal(v->dtype, ENG_CT2_DTYPE_INT16);
	int16_t heads;
	memcpy(&heads, v->data, 2);
	assert_int_equal(heads, 6);
	assert_null(eng_ct2_var_find(c, "no/such/var"));
	assert_null(eng_ct2_var_at(c, 148));
	eng_ct2_close(c);
}

static void test_real_config(void **state)
{
	(void)state;
	char dir[4096], err[512];
	struct eng_ct2 *c;
	int64_t i;
	bool b;
	whisper_dir(dir, sizeof(dir));
	assert_int_equal(eng_ct2_open(dir, &c, err, sizeof(err)), 0);
	json_t *cfg = eng_ct2_config(c);
	assert_non_null(cfg);
	json_t *sup = json_object_get(cfg, "suppress_ids");
	assert_true(json_is_array(sup));
	assert_int_equal(json_array_size(sup), 90);
	json_t *lang = json_object_get(cfg, "lang_ids");
	assert_int_equal(json_array_size(lang), 98);
	assert_int_equal(json_integer_value(json_array_get(lang, 0)), 50259);
	json_t *begin = json_object_get(cfg, "suppress_ids_begin");
	assert_int_equal(json_integer_value(json_array_get(begin, 1)), 50256);
	assert_int_equal(json_array_size(json_object_get(cfg, "alignment_heads")), 8);
	assert_int_equal(eng_ct2_config_int(c, "lang_ids", &i), -ST_INVAL);
	assert_int_equal(eng_ct2_config_bool(c, "suppress_ids", &b), -ST_INVAL);
	assert_int_equal(eng_ct2_config_int(c, "no_such_key", &i), -ST_NOTFOUND);
	eng_ct2_close(c);
}

/* ---- truncations and corruptions ----------------------------------------- */

static int expect_fail(const void *p, size_t size, int want_rc, const char *want_text)
{
	char err[1024];
	struct eng_ct2 *c = (struct eng_ct2 *)1;
	int rc = eng_ct2_open_buffer(p, size, NULL, 0, "m.bin", &c, err, sizeof(err));
	if (rc == 0 || (want_rc && rc != want_rc) || (want_text && !strstr(err, want_text)))
		print_error("size %zu: rc %d (%s), err '%s', want %d '%s'\n", size, rc, st_str(rc),
			    rc ? err : "", want_rc, want_text ? want_text : "");
	assert_true(rc < 0);
	assert_null(c);
	assert_true(strncmp(err, "m.bin: ", 7) == 0);
	assert_null(strchr(err, '\n'));
	if (want_rc)
		assert_int_equal(rc, want_rc);
	if (want_text)
		assert_non_null(strstr(err, want_text));
	return rc;
}

static void test_truncations(void **state)
{
	(void)state;
	struct mapped m;
	map_env(&m, "INFERD_MODELS", WHISPER "/model.bin", false);
	for (size_t k = 0; k < 4096; k++)
		expect_fail(m.p, k, -ST_CORRUPT, NULL);
	for (double k = 4096; k < (double)m.size; k *= 1.05)
		expect_fail(m.p, (size_t)k, -ST_CORRUPT, NULL);
	for (size_t k = m.size - 80; k < m.size; k++) /* inside the alias table */
		expect_fail(m.p, k, -ST_CORRUPT, NULL);
	expect_fail(m.p, 10, -ST_CORRUPT, "truncated at byte 6 reading the spec name");
	expect_fail(m.p, 40, -ST_CORRUPT, "variable count 148 cannot fit in the 14 bytes left");
	expect_fail(m.p, 39831745, -ST_CORRUPT, "truncated at byte 39831741 reading the name of variable 5");
	expect_fail(m.p, 1400, -ST_CORRUPT,
		    "variable 'decoder/embeddings/weight' (index 4): data at byte 187 + 39831552 bytes runs past");
	unmap(&m);
}

static void poke(struct mapped *m, size_t off, uint64_t v, size_t n, int want_rc, const char *want)
{
	uint8_t saved[8];
	memcpy(saved, m->p + off, n);
	memcpy(m->p + off, &v, n);
	expect_fail(m->p, m->size, want_rc, want);
	memcpy(m->p + off, saved, n);
}

static void test_corruptions(void **state)
{
	(void)state;
	struct mapped m;
	map_env(&m, "INFERD_MODELS", WHISPER "/model.bin", true);
	/* Layout from the start: u32 version @0, u16 12 @4, "WhisperSpec\0" @6,
	 * u32 revision @18, u32 n_vars @22, var 0: u16 19 @26, name @28,
	 * rank @47, dtype @48, n_bytes @49, data @53. */
	poke(&m, 0, 7, 4, -ST_UNSUPPORTED, "binary version 7 is not supported");
	poke(&m, 0, 0, 4, -ST_UNSUPPORTED, "binary version 0");
	poke(&m, 4, 0xffff, 2, -ST_CORRUPT, "the spec name at byte 4 is not a NUL-terminated string of 65535 bytes");
	poke(&m, 17, 'x', 1, -ST_CORRUPT, "the spec name at byte 4 is not a NUL-terminated string");
	poke(&m, 22, 0xffffffff, 4, -ST_CORRUPT, "variable count 4294967295 cannot fit");
	poke(&m, 22, 149, 4, 0, NULL); /* reads the alias table as a variable */
	poke(&m, 26, 0, 2, -ST_CORRUPT, "the name of variable 0 at byte 26 is not a NUL-terminated");
	poke(&m, 47, 9, 1, -ST_UNSUPPORTED, "variable 'decoder/activation' (index 0): rank 9 exceeds 8");
	poke(&m, 48, 6, 1, -ST_UNSUPPORTED, "variable 'decoder/activation' (index 0): unknown dtype 6");
	poke(&m, 49, 2, 4, -ST_CORRUPT, "variable 'decoder/activation' (index 0): 2 bytes stored but 1 int8");
	poke(&m, 48, 0, 1, -ST_CORRUPT, "1 bytes stored but 1 float32 elements need 4");
	/* decoder/embeddings/weight: rank @0xad, dims @0xae. */
	poke(&m, 0xae, 0xffffffff, 4, -ST_CORRUPT, "bytes stored but");
	/* The alias target's last byte: the target no longer names a variable. */
	poke(&m, m.size - 3, 'X', 1, -ST_CORRUPT, "alias 'decoder/projection/weight' names a missing variable");
	/* The alias count: u32 then two 28-byte strings end the file. */
	poke(&m, m.size - 60, 0x7fffffff, 4, -ST_CORRUPT, "alias count 2147483647 cannot fit");
	unmap(&m);
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void test_random_mutations(void **state)
{
	(void)state;
	struct mapped m;
	char err[1024];
	uint64_t seed = 0x2545f4914f6cdd1dull;
	uint8_t saved[8];
	size_t where[8];
	map_env(&m, "INFERD_MODELS", WHISPER "/model.bin", true);
	for (int it = 0; it < 400; it++) {
		int n = 1 + (int)(rnd(&seed) % 8);
		for (int k = 0; k < n; k++) {
			where[k] = rnd(&seed) & 1 ? rnd(&seed) % 256 : m.size - 1 - rnd(&seed) % 200;
			saved[k] = m.p[where[k]];
			m.p[where[k]] = (uint8_t)rnd(&seed);
		}
		struct eng_ct2 *c;
		int rc = eng_ct2_open_buffer(m.p, m.size, NULL, 0, "m.bin", &c, err, sizeof(err));
		assert_true(rc <= 0);
		eng_ct2_close(c);
		for (int k = n - 1; k >= 0; k--)
			m.p[where[k]] = saved[k];
	}
	unmap(&m);
}

/* ---- folders missing a file ---------------------------------------------- */

static void link_into(const char *tmp, const char *name)
{
	char src[4096], dst[4096];
	snprintf(src, sizeof(src), "%s/" WHISPER "/%s", getenv("INFERD_MODELS"), name);
	snprintf(dst, sizeof(dst), "%s/%s", tmp, name);
	assert_int_equal(symlink(src, dst), 0);
}

static void write_file(const char *tmp, const char *name, const char *text)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", tmp, name);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void rm(const char *tmp, const char *name)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", tmp, name);
	unlink(path);
}

static void test_folders(void **state)
{
	(void)state;
	char tmp[] = "/tmp/inferd-ct2-XXXXXX", err[1024], want[4200];
	struct eng_ct2 *c;
	assert_non_null(mkdtemp(tmp));
	assert_int_equal(eng_ct2_open(tmp, &c, err, sizeof(err)), -ST_NOTFOUND);
	snprintf(want, sizeof(want), "%s/model.bin: No such file or directory", tmp);
	assert_string_equal(err, want);
	link_into(tmp, "model.bin");
	assert_int_equal(eng_ct2_open(tmp, &c, err, sizeof(err)), -ST_NOTFOUND);
	snprintf(want, sizeof(want), "%s/config.json: missing (a CTranslate2 model needs config.json)", tmp);
	assert_string_equal(err, want);
	write_file(tmp, "config.json", "{\"a\": 1,\n \"b\": }");
	assert_int_equal(eng_ct2_open(tmp, &c, err, sizeof(err)), -ST_CORRUPT);
	assert_non_null(strstr(err, "config.json: line 2: "));
	rm(tmp, "config.json");
	write_file(tmp, "config.json", "[1, 2]");
	assert_int_equal(eng_ct2_open(tmp, &c, err, sizeof(err)), -ST_CORRUPT);
	assert_non_null(strstr(err, "config.json: not a JSON object"));
	rm(tmp, "config.json");
	write_file(tmp, "config.json", "{\"n\": 3, \"flag\": true}");
	assert_int_equal(eng_ct2_open(tmp, &c, err, sizeof(err)), -ST_NOTFOUND);
	snprintf(want, sizeof(want), "%s: neither vocabulary.txt nor tokenizer.json found (the tokenizer needs one)", tmp);
	assert_string_equal(err, want);
	link_into(tmp, "tokenizer.json");
	assert_int_equal(eng_ct2_open(tmp, &c, err, sizeof(err)), 0);
	assert_non_null(strstr(eng_ct2_vocab_path(c), "/tokenizer.json"));
	int64_t n;
	bool flag;
	assert_int_equal(eng_ct2_config_int(c, "n", &n), 0);
	assert_int_equal(n, 3);
	assert_int_equal(eng_ct2_config_bool(c, "flag", &flag), 0);
	assert_true(flag);
	eng_ct2_close(c);
	rm(tmp, "tokenizer.json");
	rm(tmp, "config.json");
	rm(tmp, "model.bin");
	assert_int_equal(rmdir(tmp), 0);
}

/* ---- seed files ------------------------------------------------------------ */

/* The hostile variable tables of tests/fuzz/make-seeds.py (issue 17): each
 * is refused at open with the reason it was written for. */
static void test_hostile_seeds(void **state)
{
	(void)state;
	static const struct {
		const char *file, *reason;
	} cases[] = {
		{ "hostile-dims-wrap.bin", "dims overflow" },
		{ "hostile-bytes-mismatch.bin", "17179869184" },
		{ "hostile-nbytes-past-end.bin", "4294967295 bytes stored" },
		{ "hostile-dtype.bin", "unknown dtype 99" },
		{ "hostile-rank255.bin", "rank 255 exceeds" },
		{ "hostile-item0-v3.bin", "unknown item size 0" },
		{ "hostile-nvars.bin", "variable count 4294967295" },
		{ "hostile-alias-cycle.bin", "missing variable" },
		{ "hostile-name-len.bin", "reading the name of variable 0" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char rel[256], err[512] = "";
		struct mapped m;
		struct eng_ct2 *c = NULL;
		snprintf(rel, sizeof(rel), "tests/fuzz/corpus/ct2/%s", cases[i].file);
		map_env(&m, "INFERD_SOURCE_ROOT", rel, false);
		assert_int_not_equal(eng_ct2_open_buffer(m.p, m.size, NULL, 0, rel, &c, err, sizeof(err)), 0);
		assert_null(c);
		if (!strstr(err, cases[i].reason))
			fail_msg("%s: \"%s\" lacks \"%s\"", cases[i].file, err, cases[i].reason);
		unmap(&m);
	}
}

static void test_seed_v6(void **state)
{
	(void)state;
	struct mapped m;
	char err[512];
	struct eng_ct2 *c;
	const char cfg[] = "{\"suppress_ids\": [1, 2], \"x\": 5}";
	int64_t x;
	map_env(&m, "INFERD_SOURCE_ROOT", "tests/fuzz/corpus/ct2/all-types-v6.bin", false);
	assert_int_equal(eng_ct2_open_buffer(m.p, m.size, cfg, strlen(cfg), "seed", &c, err, sizeof(err)), 0);
	assert_int_equal(eng_ct2_n_vars(c), 6);
	static const int want[] = { ENG_CT2_DTYPE_FLOAT32, ENG_CT2_DTYPE_INT8, ENG_CT2_DTYPE_INT16,
				    ENG_CT2_DTYPE_FLOAT16, ENG_CT2_DTYPE_INT32, ENG_CT2_DTYPE_BFLOAT16 };
	for (size_t i = 0; i < 6; i++)
		assert_int_equal(eng_ct2_var_at(c, i)->dtype, want[i]);
	const struct eng_ct2_var *v = eng_ct2_var_find(c, "encoder/ids");
	int32_t ids[2];
	memcpy(ids, v->data, 8);
	assert_int_equal(ids[0], -1);
	assert_int_equal(ids[1], 9);
	assert_ptr_equal(eng_ct2_var_find(c, "decoder/projection/weight"), eng_ct2_var_at(c, 0));
	assert_int_equal(eng_ct2_config_int(c, "x", &x), 0);
	assert_int_equal(x, 5);
	assert_null(eng_ct2_vocab_path(c));
	assert_string_equal(eng_ct2_dtype_name(ENG_CT2_DTYPE_BFLOAT16), "bfloat16");
	assert_int_equal(eng_ct2_dtype_size(ENG_CT2_DTYPE_INT32), 4);
	assert_null(eng_ct2_dtype_name(6));
	eng_ct2_close(c);
	assert_int_equal(eng_ct2_open_buffer(m.p, m.size, "{", 1, "seed", &c, err, sizeof(err)), -ST_CORRUPT);
	assert_non_null(strstr(err, "config.json: line 1"));
	unmap(&m);
}

static void test_seed_v3(void **state)
{
	(void)state;
	struct mapped m;
	char err[512];
	struct eng_ct2 *c;
	map_env(&m, "INFERD_SOURCE_ROOT", "tests/fuzz/corpus/ct2/item-size-v3.bin", false);
	assert_int_equal(eng_ct2_open_buffer(m.p, m.size, NULL, 0, NULL, &c, err, sizeof(err)), 0);
	assert_int_equal(eng_ct2_binary_version(c), 3);
	assert_int_equal(eng_ct2_n_vars(c), 2);
	assert_int_equal(eng_ct2_var_at(c, 0)->dtype, ENG_CT2_DTYPE_FLOAT32);
	assert_int_equal(eng_ct2_var_at(c, 0)->size_bytes, 12);
	assert_int_equal(eng_ct2_var_at(c, 1)->dtype, ENG_CT2_DTYPE_INT8);
	assert_null(eng_ct2_config(c));
	assert_int_equal(eng_ct2_n_aliases(c), 0);
	eng_ct2_close(c);
	unmap(&m);
}

static void test_alloc_failures(void **state)
{
	(void)state;
	struct mapped m;
	char err[512];
	struct eng_ct2 *c;
	const char cfg[] = "{\"a\": [1, 2, 3]}";
	map_env(&m, "INFERD_SOURCE_ROOT", "tests/fuzz/corpus/ct2/all-types-v6.bin", false);
	int rc = -1;
	for (long k = 0; rc != 0 && k < 1000; k++) {
		mem_fail_after(k);
		rc = eng_ct2_open_buffer(m.p, m.size, cfg, strlen(cfg), "seed", &c, err, sizeof(err));
		mem_fail_after(-1);
		assert_true(rc == 0 || rc == -ST_NOMEM);
		eng_ct2_close(c);
	}
	assert_int_equal(rc, 0);
	unmap(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_real_header),
		cmocka_unit_test(test_real_variables),
		cmocka_unit_test(test_real_config),
		cmocka_unit_test(test_truncations),
		cmocka_unit_test(test_corruptions),
		cmocka_unit_test(test_random_mutations),
		cmocka_unit_test(test_folders),
		cmocka_unit_test(test_hostile_seeds),
		cmocka_unit_test(test_seed_v6),
		cmocka_unit_test(test_seed_v3),
		cmocka_unit_test(test_alloc_failures),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
