/* fuzz_safetensors.c - libFuzzer target for the safetensors reader
 * (engine/format/eng_safetensors.h) that loads Silero VAD's weights.
 * Parses the input with eng_st_open_buffer and, when it opens, touches
 * every tensor's first and last data byte and finds each by its name.
 * Seeds: corpus/safetensors (the real file's header over a few bytes of
 * data, and small hand-made files; make-seeds.py).
 */
#include <stddef.h>
#include <stdint.h>

#include "engine/format/eng_safetensors.h"

static volatile uint64_t sink; /* keeps the reads from being optimized out */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[256];
	struct eng_st *st;

	if (eng_st_open_buffer(data, size, "fuzz", &st, err, sizeof(err)) != 0)
		return 0;
	for (size_t k = 0; k < eng_st_n_tensors(st); k++) {
		const struct eng_st_tensor *t = eng_st_tensor(st, k);
		if (t->size_bytes)
			sink += t->data[0] + t->data[t->size_bytes - 1];
		sink += eng_st_find(st, t->name) == t;
	}
	eng_st_destroy(st);
	return 0;
}
