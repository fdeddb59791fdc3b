/* cli_specs.c - the config's models as the engine's load specs, for the
 * commands that load them (serve, batch run). */
#include "cli/cli_cmd.h"
#include "common/mem.h"
#include "config/cfg.h"
#include "engine/eng.h"

/* One allocation: the specs, then every model's replica placements. */
struct eng_model_spec *cli_specs_from_cfg(const struct cfg *cfg)
{
	size_t n_rep = 0;
	for (size_t i = 0; i < cfg->n_models; i++)
		n_rep += cfg->models[i].n_replicas;
	struct eng_model_spec *specs = mem_calloc(1, cfg->n_models * sizeof(*specs) +
							 n_rep * sizeof(struct eng_replica_spec));
	if (!specs)
		return NULL;
	struct eng_replica_spec *reps = (struct eng_replica_spec *)(specs + cfg->n_models);
	for (size_t i = 0; i < cfg->n_models; i++) {
		const struct cfg_model *m = &cfg->models[i];
		for (size_t k = 0; k < m->n_replicas; k++)
			reps[k] = (struct eng_replica_spec){ m->replicas[k].device,
							     m->replicas[k].threads };
		specs[i] = (struct eng_model_spec){
			.name = m->name,
			.path = m->path,
			.format = m->format == CFG_MODEL_FORMAT_GGUF ? ENG_FORMAT_GGUF
				: m->format == CFG_MODEL_FORMAT_CT2 ? ENG_FORMAT_CT2
				: ENG_FORMAT_AUTO,
			.replicas = m->n_replicas ? reps : NULL,
			.n_replicas = m->n_replicas,
			.replica_count = m->replica_count,
			.max_batch_size = m->max_batch_size,
			.max_queue_delay_ms = m->max_queue_delay_ms > 0 ? m->max_queue_delay_ms : -1,
			.max_queue_size = m->max_queue_size,
			.max_num_seqs = m->max_num_seqs,
			.max_batch_tokens = m->max_batch_tokens,
			.prefix_cache_mb = m->prefix_cache_mb > 0 ? m->prefix_cache_mb : -1,
			.timeout_ms = m->timeout_ms,
			.slow_replica_factor = m->slow_replica_factor > 0 ? m->slow_replica_factor : -1,
			.compute_type = (enum eng_compute_type)m->compute_type,
			.kv_cache_f16 = m->kv_cache_f16 != 0,
			.max_model_len = m->max_model_len, /* 0: the default */
			.vad_model = m->vad_model, /* NULL: beside the model (optional) */
			.vad_model_optional = !m->vad_model,
			.vad_filter = m->vad_filter != 0,
			.live_window_ms = m->live_window_ms,
		};
		reps += m->n_replicas;
	}
	return specs;
}
