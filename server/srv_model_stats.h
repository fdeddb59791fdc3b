/* srv_model_stats.h - the engine's scheduler stats for /metrics and the
 * KServe/Triton-style statistics routes. Internal to server/. Loop thread. */
#ifndef SRV_MODEL_STATS_H
#define SRV_MODEL_STATS_H

#include <jansson.h>

#include "engine/eng.h"
#include "server/srv_buf.h"

/* srv__model_stats_prometheus - every model's scheduler metrics (requests
 * by outcome, queue depth and wait, batch sizes, busy time per replica,
 * tokens, audio seconds, TTFT, inter-token latency) in the Prometheus
 * text format, appended to out. 0, or -ST_NOMEM / -ST_TOOBIG. */
int srv__model_stats_prometheus(const struct eng *eng, struct srv_buf *out);

/* srv__model_stats_json - {"model_stats": [...]} for every model, or only
 * `only` when not NULL; new, or NULL when out of memory. */
json_t *srv__model_stats_json(const struct eng *eng, const struct eng_model *only);

#endif /* SRV_MODEL_STATS_H */
