/* fuzz_bpe.c - libFuzzer target for the byte-level BPE tokenizer
 * (engine/tok/eng_bpe.h). LLVMFuzzerInitialize loads the real Whisper tiny.en
 * tokenizer.json once ($INFERD_MODELS, default ./models); each input is
 * encoded as raw bytes (any bytes: invalid UTF-8 is one "other" character
 * per bad byte, see eng_bpe.h) and must decode back to itself exactly, with
 * every id in range and no more ids than bytes. Seeds: corpus/bpe (any text).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/mem.h"
#include "engine/tok/eng_bpe.h"

static struct eng_bpe *bpe; /* loaded once, read-only afterwards */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char path[4096], err[512];
	const char *models = getenv("INFERD_MODELS");

	(void)argc, (void)argv;
	snprintf(path, sizeof(path), "%s/whisper-tiny.en/tokenizer.json", models ? models : "models");
	if (eng_bpe_load_hf(path, &bpe, err, sizeof(err)) != 0) {
		fprintf(stderr, "fuzz_bpe: %s\n", err);
		abort();
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t n = 0, out_len = 0;
	int32_t *ids = mem_alloc((size + 1) * sizeof(*ids));
	char *out = mem_alloc(size + 1);

	if (!ids || !out)
		abort();
	if (eng_bpe_encode(bpe, (const char *)data, size, ids, size + 1, &n) != 0 || n > size)
		abort(); /* every byte is at least one symbol, merges only shrink */
	for (size_t i = 0; i < n; i++)
		if (eng_bpe_token_str(bpe, ids[i]) == NULL || eng_bpe_is_special(bpe, ids[i]))
			abort();
	if (eng_bpe_decode(bpe, ids, n, false, out, size + 1, &out_len) != 0 || out_len != size ||
	    memcmp(out, data, size) != 0)
		abort();
	mem_free(ids);
	mem_free(out);
	return 0;
}
