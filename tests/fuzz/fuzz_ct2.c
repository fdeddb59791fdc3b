/* fuzz_ct2.c - libFuzzer target for the CTranslate2 model.bin reader
 * (engine/format/eng_ct2.h). Parses the input with eng_ct2_open_buffer (no
 * config) and, when it opens, touches every variable's first and last data
 * byte and resolves every alias. Seeds: corpus/ct2 (make-seeds.py).
 */
#include <stddef.h>
#include <stdint.h>

#include "engine/format/eng_ct2.h"

static volatile uint64_t sink; /* keeps the reads from being optimized out */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[256];
	struct eng_ct2 *c;
	const char *alias, *target;

	if (eng_ct2_open_buffer(data, size, NULL, 0, "fuzz", &c, err, sizeof(err)) != 0)
		return 0;
	for (size_t k = 0; k < eng_ct2_n_vars(c); k++) {
		const struct eng_ct2_var *v = eng_ct2_var_at(c, k);
		const uint8_t *p = v->data;
		if (v->size_bytes)
			sink += p[0] + p[v->size_bytes - 1];
		sink += eng_ct2_var_find(c, v->name) == v;
	}
	for (size_t k = 0; eng_ct2_alias_at(c, k, &alias, &target) == 0; k++)
		sink += eng_ct2_var_find(c, alias) == eng_ct2_var_find(c, target);
	eng_ct2_close(c);
	return 0;
}
