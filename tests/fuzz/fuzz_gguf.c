/* fuzz_gguf.c - libFuzzer target for the GGUF reader (engine/format/eng_gguf.h).
 *
 * Parses the input with eng_gguf_open_buffer and, when it opens, walks
 * every metadata value (arrays element by element, nested ones too) and
 * every tensor's first and last data byte, so that any view the reader
 * hands out is exercised under ASan. Seeds: corpus/gguf (make-seeds.py).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "engine/format/eng_gguf.h"

static volatile uint64_t sink; /* keeps the reads from being optimized out */

static void walk(const struct eng_gguf_val *v, int depth)
{
	uint64_t u, len, cursor = 0;
	int64_t i;
	double d;
	bool b;
	const char *s;
	struct eng_gguf_val e;

	if (v->type == ENG_GGUF_VTYPE_ARRAY) {
		while (depth < 16 && eng_gguf_arr_next(v, &cursor, &e))
			walk(&e, depth + 1);
		if (eng_gguf_arr_at(v, 0, &e) == 0)
			walk(&e, depth + 1);
		return;
	}
	if (!eng_gguf_val_str(v, &s, &len) && len)
		sink += (uint8_t)s[len - 1];
	if (!eng_gguf_val_u64(v, &u))
		sink += u;
	if (!eng_gguf_val_i64(v, &i))
		sink += (uint64_t)i;
	if (!eng_gguf_val_f64(v, &d))
		sink += d == d;
	if (!eng_gguf_val_bool(v, &b))
		sink += b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[256];
	struct eng_gguf *g;
	struct eng_gguf_val v;

	if (eng_gguf_open_buffer(data, size, "fuzz", &g, err, sizeof(err)) != 0)
		return 0;
	for (size_t k = 0; k < eng_gguf_n_kv(g); k++) {
		eng_gguf_kv_val(g, k, &v);
		walk(&v, 0);
		sink += eng_gguf_find_kv(g, eng_gguf_kv_key(g, k)) >= 0;
	}
	for (size_t k = 0; k < eng_gguf_n_tensors(g); k++) {
		const struct eng_gguf_tensor *t = eng_gguf_tensor_at(g, k);
		const uint8_t *p = t->data;
		if (t->size_bytes)
			sink += p[0] + p[t->size_bytes - 1];
		sink += eng_gguf_tensor_find(g, t->name) == t;
	}
	eng_gguf_close(g);
	return 0;
}
