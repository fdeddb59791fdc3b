/* fuzz_config.c - libFuzzer target for the configuration parser.
 *
 * Feeds arbitrary bytes to cfg_load_string (which must never crash, leak or
 * write past the error buffer) and, on success, checks the invariants the
 * rest of the daemon relies on. Seeds: tests/fuzz/corpus/config/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/cfg.h"

/* check - the frozen struct's promises (cfg.h); abort so libFuzzer saves the
 * input as a crash when one is broken. */
static void check(const struct cfg *cfg)
{
	if (!cfg->listen_host || cfg->listen_port < 0 || cfg->listen_port > 65535)
		abort();
	if (cfg->n_models < 1 || !cfg->models)
		abort();
	for (size_t i = 0; i < cfg->n_models; i++) {
		const struct cfg_model *m = &cfg->models[i];
		if (!m->name || !m->path || m->replicas < 1 ||
		    m->format >= CFG_MODEL_FORMAT_COUNT)
			abort();
		for (size_t j = 0; j < i; j++)
			if (strcmp(cfg->models[j].name, m->name) == 0)
				abort();
	}
	for (size_t i = 0; i < cfg->n_api_keys; i++)
		if (!cfg->api_keys[i] || !cfg->api_keys[i][0])
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cfg *cfg = NULL;
	char err[160];
	/* A small error buffer, so truncation is exercised too. */
	if (cfg_load_string((const char *)data, size, &cfg, err, sizeof(err)) == 0)
		check(cfg);
	else if (cfg || strlen(err) >= sizeof(err))
		abort();
	cfg_destroy(cfg);
	return 0;
}
