/* eng_inspect.c - `inferd inspect FILE`: a readable dump of a model file's
 * metadata and tensor table (eng_inspect in eng.h). Read-only; opens the
 * file with the same validating readers as eng_create.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/st.h"
#include "engine/eng.h"
#include "engine/format/eng_ct2.h"
#include "engine/format/eng_gguf.h"
#include "engine/format/eng_file.h"

#define INSPECT_ARRAY_ITEMS 5 /* array elements shown before "…" */
#define INSPECT_STR_BYTES 60  /* string bytes shown before "…" */

/* put_str - a quoted string, escaped, cut after INSPECT_STR_BYTES. */
static void put_str(FILE *out, const char *s, uint64_t len)
{
	fputc('"', out);
	for (uint64_t i = 0; i < len && i < INSPECT_STR_BYTES; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch == '"' || ch == '\\')
			fprintf(out, "\\%c", ch);
		else if (ch < 0x20 || ch == 0x7f)
			fprintf(out, "\\x%02x", ch);
		else
			fputc(ch, out);
	}
	fputs(len > INSPECT_STR_BYTES ? "\"…" : "\"", out);
}

static void put_val(FILE *out, const struct eng_gguf_val *v);

/* put_arr - "[type; n] e0, e1, …". */
static void put_arr(FILE *out, const struct eng_gguf_val *arr)
{
	enum eng_gguf_vtype et;
	uint64_t n, cursor = 0, i = 0;
	struct eng_gguf_val e;

	eng_gguf_arr_info(arr, &et, &n);
	fprintf(out, "[%s; %" PRIu64 "]", eng_gguf_vtype_name(et), n);
	for (; i < INSPECT_ARRAY_ITEMS && eng_gguf_arr_next(arr, &cursor, &e); i++) {
		fputs(i ? ", " : " ", out);
		if (et == ENG_GGUF_VTYPE_ARRAY)
			fputc('(', out);
		put_val(out, &e);
		if (et == ENG_GGUF_VTYPE_ARRAY)
			fputc(')', out);
	}
	if (n > i)
		fputs(", …", out);
}

static void put_val(FILE *out, const struct eng_gguf_val *v)
{
	uint64_t u, len;
	int64_t s;
	double d;
	bool b;
	const char *str;

	if (v->type == ENG_GGUF_VTYPE_ARRAY)
		put_arr(out, v);
	else if (!eng_gguf_val_str(v, &str, &len))
		put_str(out, str, len);
	else if (!eng_gguf_val_bool(v, &b))
		fputs(b ? "true" : "false", out);
	else if (!eng_gguf_val_f64(v, &d))
		fprintf(out, "%.9g", d);
	else if (!eng_gguf_val_u64(v, &u))
		fprintf(out, "%" PRIu64, u);
	else if (!eng_gguf_val_i64(v, &s))
		fprintf(out, "%" PRId64, s);
}

/* put_dims - "[d0, d1, ...]" left-aligned in a column of width chars. */
static void put_dims(FILE *out, const uint64_t *dims, uint32_t n, int width)
{
	char buf[128] = "[";
	size_t at = 1;

	for (uint32_t d = 0; d < n && at < sizeof(buf); d++)
		at += (size_t)snprintf(buf + at, sizeof(buf) - at, "%s%" PRIu64, d ? ", " : "", dims[d]);
	if (at < sizeof(buf) - 1)
		snprintf(buf + at, sizeof(buf) - at, "]");
	fprintf(out, "%-*s", width, buf);
}

static void inspect_gguf(const struct eng_gguf *g, const char *path, FILE *out)
{
	struct eng_gguf_val v;

	fprintf(out, "format: gguf\nfile: %s (%" PRIu64 " bytes)\nversion: %" PRIu32 "\n", path,
		eng_gguf_file_size(g), eng_gguf_version(g));
	fprintf(out, "alignment: %" PRIu32 "\ndata section: byte %" PRIu64 "\n", eng_gguf_alignment(g),
		eng_gguf_data_offset(g));
	fprintf(out, "\nmetadata (%zu keys):\n", eng_gguf_n_kv(g));
	for (size_t i = 0; i < eng_gguf_n_kv(g); i++) {
		eng_gguf_kv_val(g, i, &v);
		fprintf(out, "  %s: ", eng_gguf_kv_key(g, i));
		if (v.type != ENG_GGUF_VTYPE_ARRAY)
			fprintf(out, "%s = ", eng_gguf_vtype_name(v.type));
		put_val(out, &v);
		fputc('\n', out);
	}
	fprintf(out, "\ntensors (%zu):\n  %5s  %-40s %-7s %-22s %12s %12s\n", eng_gguf_n_tensors(g), "index",
		"name", "type", "dims", "offset", "bytes");
	for (size_t i = 0; i < eng_gguf_n_tensors(g); i++) {
		const struct eng_gguf_tensor *t = eng_gguf_tensor_at(g, i);
		fprintf(out, "  %5zu  %-40s %-7s ", i, t->name, eng_ggml_type_name(t->type));
		put_dims(out, t->dims, t->n_dims, 22);
		fprintf(out, " %12" PRIu64 " %12" PRIu64 "\n", t->offset, t->size_bytes);
	}
	fprintf(out, "\ntotal: %zu tensors, %" PRIu64 " bytes of tensor data (%.1f MiB), file %" PRIu64 " bytes\n",
		eng_gguf_n_tensors(g), eng_gguf_tensor_bytes(g), eng_gguf_tensor_bytes(g) / 1048576.0,
		eng_gguf_file_size(g));
}

/* put_scalar - one JSON value, compact, cut at 80 bytes (no allocation). */
static void put_scalar(FILE *out, json_t *v)
{
	char buf[80];
	size_t n = json_dumpb(v, buf, sizeof(buf), JSON_COMPACT | JSON_ENCODE_ANY);

	fprintf(out, "%.*s%s", (int)(n < sizeof(buf) ? n : sizeof(buf)), buf, n > sizeof(buf) ? "…" : "");
}

/* put_json - one config value: scalars in full, arrays as "[n] first…". */
static void put_json(FILE *out, json_t *v)
{
	if (!json_is_array(v)) {
		put_scalar(out, v);
		return;
	}
	size_t n = json_array_size(v);
	fprintf(out, "[array; %zu]", n);
	for (size_t i = 0; i < n && i < INSPECT_ARRAY_ITEMS; i++) {
		fputs(i ? ", " : " ", out);
		put_scalar(out, json_array_get(v, i));
	}
	if (n > INSPECT_ARRAY_ITEMS)
		fputs(", …", out);
}

static void inspect_ct2(const struct eng_ct2 *c, const char *path, FILE *out)
{
	const char *key, *alias, *target;
	json_t *val;

	fprintf(out, "format: ct2\nfolder: %s (model.bin %" PRIu64 " bytes)\n", path, eng_ct2_file_size(c));
	fprintf(out, "binary version: %" PRIu32 "\nspec: %s\nspec revision: %" PRIu32 "\nvocabulary: %s\n",
		eng_ct2_binary_version(c), eng_ct2_spec_name(c), eng_ct2_spec_revision(c),
		eng_ct2_vocab_path(c) ? eng_ct2_vocab_path(c) : "(none)");
	json_t *cfg = eng_ct2_config(c);
	fprintf(out, "\nconfig.json (%zu keys):\n", cfg ? json_object_size(cfg) : 0);
	json_object_foreach(cfg, key, val) {
		fprintf(out, "  %s: ", key);
		put_json(out, val);
		fputc('\n', out);
	}
	fprintf(out, "\nvariables (%zu):\n  %5s  %-52s %-8s %-18s %12s %12s\n", eng_ct2_n_vars(c), "index", "name",
		"dtype", "dims", "offset", "bytes");
	for (size_t i = 0; i < eng_ct2_n_vars(c); i++) {
		const struct eng_ct2_var *v = eng_ct2_var_at(c, i);
		uint64_t dims[ENG_CT2_MAX_RANK];
		for (uint32_t d = 0; d < v->rank; d++)
			dims[d] = v->dims[d];
		fprintf(out, "  %5zu  %-52s %-8s ", i, v->name, eng_ct2_dtype_name(v->dtype));
		put_dims(out, dims, v->rank, 18);
		fprintf(out, " %12" PRIu64 " %12" PRIu64 "\n", v->offset, v->size_bytes);
	}
	fprintf(out, "\naliases (%zu):\n", eng_ct2_n_aliases(c));
	for (size_t i = 0; !eng_ct2_alias_at(c, i, &alias, &target); i++)
		fprintf(out, "  %s -> %s\n", alias, target);
	fprintf(out, "\ntotal: %zu variables, %" PRIu64 " bytes of data (%.1f MiB)\n", eng_ct2_n_vars(c),
		eng_ct2_var_bytes(c), eng_ct2_var_bytes(c) / 1048576.0);
}

int eng_inspect(const char *path, FILE *out, char *err, size_t errlen)
{
	enum eng_format fmt;
	struct eng_gguf *g;
	struct eng_ct2 *c;

	int rc = eng__detect_format(path, &fmt, err, errlen);
	if (rc)
		return rc;
	if (fmt == ENG_FORMAT_GGUF) {
		rc = eng_gguf_open(path, &g, err, errlen);
		if (!rc)
			inspect_gguf(g, path, out);
		eng_gguf_close(g);
		return rc;
	}
	rc = eng_ct2_open(path, &c, err, errlen);
	if (!rc)
		inspect_ct2(c, path, out);
	eng_ct2_close(c);
	return rc;
}
