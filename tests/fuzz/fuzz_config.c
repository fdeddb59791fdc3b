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
		if (!m->name || !m->path || m->format >= CFG_MODEL_FORMAT_COUNT)
			abort();
		/* "replicas": a count >= 1 and no placements, or 1..256 of them */
		if (m->n_replicas == 0 ? m->replica_count < 1 || m->replicas
				       : m->replica_count != 0 || !m->replicas ||
					 m->n_replicas > 256)
			abort();
		for (size_t j = 0; j < m->n_replicas; j++) {
			const struct cfg_replica *r = &m->replicas[j];
			size_t len = r->device ? strlen(r->device) : 0;
			if (len < 1 || len > 63 || strpbrk(r->device, " \t\n\v\f\r") ||
			    r->threads < 0 || r->threads > 1024)
				abort();
		}
		if (m->max_batch_size < 1 || m->max_batch_size > 256 ||
		    m->max_queue_delay_ms < 0 || m->max_queue_delay_ms > 60000 ||
		    m->max_queue_size < 1 || m->max_queue_size > 1000000 ||
		    m->max_num_seqs < 1 || m->max_num_seqs > 256 ||
		    m->max_batch_tokens < 16 || m->max_batch_tokens > 65536 ||
		    m->timeout_ms < 0 || m->timeout_ms > 86400000)
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
