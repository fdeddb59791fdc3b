/* cfg_knobs.c - the declarative table of the configuration (nginx's
 * ngx_command_t): one row per knob with its JSON path, type (cfg_types.c),
 * offsetof() the field, default, range and the line --help prints. The
 * parser (cfg.c), --help (cfg_help.c), README.md and inferd.schema.json
 * all follow these rows.
 */
#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "common/sched_defaults.h"
#include "config/cfg_int.h"

/* ---- the tables ------------------------------------------------------- */

/* "replicas" as an object: {"count": N}; offsets into struct cfg_model. */
static const struct cfg_knob cfg_replicas_count_knobs[] = {
	{ .path = "count", .type = &cfg__type_int,
	  .offset = offsetof(struct cfg_model, replica_count), .min = 1,
	  .max = INT_MAX, .required = true,
	  .doc = "replicas spread over the available cores, as \"replicas\": N" },
};

/* One placement of "replicas": [...]; offsets into struct cfg_replica. */
static const struct cfg_knob cfg_replica_knobs[] = {
	{ .path = "device", .type = &cfg__type_device,
	  .offset = offsetof(struct cfg_replica, device), .min = 1,
	  .max = CFG_DEVICE_MAX, .required = true,
	  .doc = "cores the replica runs on: \"cpu\" (all), \"cpu:N\", "
		 "\"cpu:A-B\" or a list \"cpu:0,2-3\"; checked at start-up" },
	{ .path = "threads", .type = &cfg__type_int_opt,
	  .offset = offsetof(struct cfg_replica, threads), .def = 0, .min = 1,
	  .max = 1024, .def_str = "one per core of the device",
	  .doc = "compute threads of the replica" },
};

/* Keys of one "models" entry; offsets into struct cfg_model. */
static const struct cfg_knob cfg_model_knobs[] = {
	{ .path = "name", .type = &cfg__type_name,
	  .offset = offsetof(struct cfg_model, name), .min = 1,
	  .max = CFG_NAME_MAX, .required = true,
	  .doc = "unique model id used in requests; characters [A-Za-z0-9._-]" },
	{ .path = "path", .type = &cfg__type_str,
	  .offset = offsetof(struct cfg_model, path), .min = 1, .max = PATH_MAX,
	  .required = true,
	  .doc = "GGUF file or CTranslate2 folder, relative to the working "
		 "directory" },
	{ .path = "format", .type = &cfg__type_format,
	  .offset = offsetof(struct cfg_model, format), .def_str = "auto",
	  .doc = "\"gguf\" or \"ct2\"; absent: decided from the path" },
	{ .path = "replicas", .type = &cfg__type_replicas,
	  .offset = offsetof(struct cfg_model, replica_count), .def = ST_SCHED_DEF_REPLICAS,
	  .min = 1, .max = INT_MAX, .sub = cfg_replicas_count_knobs,
	  .n_sub = CFG_N(cfg_replicas_count_knobs), .items = cfg_replica_knobs,
	  .n_items = CFG_N(cfg_replica_knobs),
	  .doc = "copies of the model serving in parallel: N or {\"count\": N} "
		 "(N replicas spread over the available cores), or a list of "
		 "placements [{\"device\": \"cpu:0-3\", \"threads\": 4}, ...] "
		 "(keys below); models given the same cores share them" },
	{ .path = "max_batch_size", .type = &cfg__type_int,
	  .offset = offsetof(struct cfg_model, max_batch_size), .def = ST_SCHED_DEF_MAX_BATCH_SIZE,
	  .min = 1, .max = 256,
	  .doc = "transcription: audio windows per encoder batch and sequences "
		 "per decoder step" },
	{ .path = "max_queue_delay_ms", .type = &cfg__type_int,
	  .offset = offsetof(struct cfg_model, max_queue_delay_ms),
	  .def = ST_SCHED_DEF_MAX_QUEUE_DELAY_MS,
	  .min = 0, .max = 60000,
	  .doc = "transcription: how long an idle replica waits for a batch to fill" },
	{ .path = "slow_replica_factor", .type = &cfg__type_int,
	  .offset = offsetof(struct cfg_model, slow_replica_factor),
	  .def = ST_SCHED_DEF_SLOW_REPLICA_FACTOR,
	  .min = 0, .max = 1000,
	  .doc = "a replica this many times slower than another (ms_per_work) takes a "
		 "request only when that one would end it later; 0: off" },
	{ .path = "max_queue_size", .type = &cfg__type_int,
	  .offset = offsetof(struct cfg_model, max_queue_size), .def = ST_SCHED_DEF_MAX_QUEUE_SIZE,
	  .min = 1, .max = 1000000,
	  .doc = "client requests waiting to start (n choices count once); past it 429" },
	{ .path = "max_num_seqs", .type = &cfg__type_int,
	  .offset = offsetof(struct cfg_model, max_num_seqs), .def = ST_SCHED_DEF_MAX_NUM_SEQS,
	  .min = 1, .max = 256,
	  .doc = "generation: sequences in the running batch" },
	{ .path = "max_batch_tokens", .type = &cfg__type_int,
	  .offset = offsetof(struct cfg_model, max_batch_tokens),
	  .def = ST_SCHED_DEF_MAX_BATCH_TOKENS,
	  .min = 16, .max = 65536,
	  .doc = "generation: most tokens in one forward pass" },
	{ .path = "prefix_cache_mb", .type = &cfg__type_int,
	  .offset = offsetof(struct cfg_model, prefix_cache_mb),
	  .def = ST_SCHED_DEF_PREFIX_CACHE_MB, .min = 0, .max = 1048576,
	  .doc = "generation: MiB of finished requests' prompt KV caches a replica keeps, "
		 "least recently used out first; a later prompt that begins alike copies "
		 "them instead of computing them (prefix caching); 0: off" },
	{ .path = "timeout_ms", .type = &cfg__type_int,
	  .offset = offsetof(struct cfg_model, timeout_ms), .def = ST_SCHED_DEF_TIMEOUT_MS, .min = 0,
	  .max = CFG_DAY_MS,
	  .doc = "request deadline, 504 past it; 0 = none; Inferd-Timeout-Ms may shorten it" },
	{ .path = "live_window_ms", .type = &cfg__type_int,
	  .offset = offsetof(struct cfg_model, live_window_ms), .def = ST_SCHED_DEF_LIVE_WINDOW_MS,
	  .min = 0, .max = 30000,
	  .doc = "transcription: the shortest encoder window of a live stream's "
		 "transcriptions: each covers its audio plus 2 s, at least this, instead of "
		 "Whisper's 30 s (whisper.cpp's audio_ctx); cheaper, less accurate; 0 = 30 s" },
	{ .path = "kv_cache_f16", .type = &cfg__type_bool,
	  .offset = offsetof(struct cfg_model, kv_cache_f16), .def = 0, .min = 0, .max = 1,
	  .doc = "generation: keep the KV cache in float16 (llama.cpp's default cache type): "
		 "half the memory per sequence and the bytes a decode step reads; "
		 "false: float32" },
	{ .path = "max_model_len", .type = &cfg__type_int_opt,
	  .offset = offsetof(struct cfg_model, max_model_len), .def = 0, .min = 16,
	  .max = 1048576, .def_str = "4096 or the model's trained context, whichever is smaller",
	  .doc = "generation: most tokens (prompt + generated) one sequence may hold "
		 "(vLLM's max_model_len); past the trained context refused at load" },
	{ .path = "vad_filter", .type = &cfg__type_bool,
	  .offset = offsetof(struct cfg_model, vad_filter), .def = 0, .min = 0, .max = 1,
	  .doc = "transcription: requests' default for vad_filter (Silero VAD: only speech "
		 "is transcribed, silence skipped, times mapped back); needs the VAD loaded" },
	{ .path = "vad_model", .type = &cfg__type_str_opt,
	  .offset = offsetof(struct cfg_model, vad_model), .min = 1, .max = PATH_MAX,
	  .def_str = CFG_VAD_MODEL_DEFAULT " when it exists",
	  .doc = "transcription: Silero VAD's silero_vad_16k.safetensors, relative to the "
		 "working directory; given, it must load" },
	{ .path = "compute_type", .type = &cfg__type_compute,
	  .offset = offsetof(struct cfg_model, compute_type), .def_str = "\"default\"",
	  .doc = "transcription: \"default\" (the stored type; float folders run float32), "
		 "\"float32\", \"int8\" or \"int8_float32\" (the linears in int8, as "
		 "CTranslate2's compute types), \"bfloat16\" (the encoder in bfloat16, AMX or AVX512-BF16) "
		 "or \"int8_bfloat16\" (that encoder, the int8 decoder)" },
};

/* Keys of "limits"; offsets into struct cfg. */
static const struct cfg_knob cfg_limit_knobs[] = {
	{ .path = "max_connections", .type = &cfg__type_int,
	  .offset = offsetof(struct cfg, max_connections), .def = 1024,
	  .min = 1, .max = 1048576,
	  .doc = "most client connections open at once" },
	{ .path = "max_header_bytes", .type = &cfg__type_int64,
	  .offset = offsetof(struct cfg, max_header_bytes), .def = 16384,
	  .min = 1024, .max = 1048576,
	  .doc = "most bytes of a request line plus its headers" },
	{ .path = "max_body_bytes", .type = &cfg__type_int64,
	  .offset = offsetof(struct cfg, max_body_bytes), .def = 104857600,
	  .min = 1024, .max = INT64_C(17179869184),
	  .doc = "most bytes of a request body, also after decompression" },
	{ .path = "header_timeout_ms", .type = &cfg__type_int,
	  .offset = offsetof(struct cfg, header_timeout_ms), .def = 10000,
	  .min = 1, .max = CFG_DAY_MS,
	  .doc = "time allowed to receive a request's headers (slowloris guard)" },
	{ .path = "idle_timeout_ms", .type = &cfg__type_int,
	  .offset = offsetof(struct cfg, idle_timeout_ms), .def = 60000,
	  .min = 1, .max = CFG_DAY_MS,
	  .doc = "how long a keep-alive connection may wait for a request" },
	{ .path = "body_timeout_ms", .type = &cfg__type_int,
	  .offset = offsetof(struct cfg, body_timeout_ms), .def = 60000,
	  .min = 1, .max = CFG_DAY_MS,
	  .doc = "longest wait between two reads of a request body" },
	{ .path = "drain_timeout_ms", .type = &cfg__type_int,
	  .offset = offsetof(struct cfg, drain_timeout_ms), .def = 30000,
	  .min = 1, .max = CFG_DAY_MS,
	  .doc = "on shutdown, how long in-flight requests may take to finish" },
	{ .path = "live_idle_timeout_ms", .type = &cfg__type_int,
	  .offset = offsetof(struct cfg, live_idle_timeout_ms), .def = 10000,
	  .min = 1, .max = CFG_DAY_MS,
	  .doc = "a live stream (Deepgram's WebSocket) with neither audio nor KeepAlive "
		 "this long is closed with 1011 NET-0001" },
	{ .path = "send_timeout_ms", .type = &cfg__type_int,
	  .offset = offsetof(struct cfg, send_timeout_ms), .def = 60000,
	  .min = 1, .max = CFG_DAY_MS,
	  .doc = "a connection whose queued response bytes do not move for this long "
		 "(the client stopped reading) is closed" },
};

/* Keys of "batch"; offsets into struct cfg. */
static const struct cfg_knob cfg_batch_knobs[] = {
	{ .path = "store", .type = &cfg__type_str_opt,
	  .offset = offsetof(struct cfg, batch_store), .min = 1, .max = PATH_MAX,
	  .def_str = "$XDG_STATE_HOME/inferd/batch.db (~/.local/state/inferd/batch.db)",
	  .doc = "SQLite database of the Batch API's files, batches and results; created "
		 "on the first upload" },
	{ .path = "input_dir", .type = &cfg__type_str_opt,
	  .offset = offsetof(struct cfg, batch_input_dir), .min = 1, .max = PATH_MAX,
	  .def_str = "none (no audio batches)",
	  .doc = "folder that /v1/audio/transcriptions batch lines name their audio files "
		 "in; a path outside it is refused" },
	{ .path = "concurrency", .type = &cfg__type_int_opt,
	  .offset = offsetof(struct cfg, batch_concurrency), .def = 0, .min = 1, .max = 1024,
	  .def_str = "the largest batch the models take, times their replicas",
	  .doc = "batch requests in flight at once" },
	{ .path = "max_file_bytes", .type = &cfg__type_int64,
	  .offset = offsetof(struct cfg, batch_max_file_bytes), .def = 209715200,
	  .min = 1, .max = INT64_C(17179869184),
	  .doc = "largest file uploaded to /v1/files (limits.max_body_bytes also applies)" },
	{ .path = "max_lines", .type = &cfg__type_int,
	  .offset = offsetof(struct cfg, batch_max_lines), .def = 50000, .min = 1,
	  .max = 10000000, .doc = "most requests in one batch's input file" },
	{ .path = "max_jobs", .type = &cfg__type_int,
	  .offset = offsetof(struct cfg, batch_max_jobs), .def = 100, .min = 1, .max = 100000,
	  .doc = "most batches not ended at once; more get 429" },
	{ .path = "max_store_bytes", .type = &cfg__type_int64,
	  .offset = offsetof(struct cfg, batch_max_store_bytes),
	  .def = INT64_C(10737418240), .min = 65536, .max = INT64_MAX,
	  .doc = "size of the database past which uploads and new batches get 507" },
	{ .path = "file_ttl_s", .type = &cfg__type_int64,
	  .offset = offsetof(struct cfg, batch_file_ttl_s), .def = 2592000, .min = 1,
	  .max = INT64_C(315360000),
	  .doc = "seconds after which a file (input, output or error) expires and is removed" },
};

/* The top level; offsets into struct cfg. */
const struct cfg_knob cfg__knobs[] = {
	{ .path = "listen", .type = &cfg__type_listen,
	  .offset = offsetof(struct cfg, listen_host),
	  .def_str = "127.0.0.1:8080",
	  .doc = "address to serve on: IPV4:PORT, localhost:PORT or [IPV6]:PORT; "
		 "port 0 = any free port" },
	{ .path = "grpc_listen", .type = &cfg__type_grpc_listen,
	  .offset = offsetof(struct cfg, grpc_host),
	  .def_str = "\"\"",
	  .doc = "address of the gRPC (KServe v2 GRPCInferenceService, h2c) port, same "
		 "forms as listen; \"\" = none" },
	{ .path = "api_keys", .type = &cfg__type_keys,
	  .offset = offsetof(struct cfg, api_keys), .max = CFG_MAX_API_KEYS,
	  .def_str = "[]",
	  .doc = "accepted API keys (non-empty); INFERD_API_KEY adds one" },
	{ .path = "access_log", .type = &cfg__type_bool,
	  .offset = offsetof(struct cfg, access_log), .def = 1, .min = 0,
	  .max = 1, .doc = "log one line per request" },
	{ .path = "limits", .type = &cfg__type_section, .sub = cfg_limit_knobs,
	  .n_sub = CFG_N(cfg_limit_knobs),
	  .doc = "resource limits and timeouts, keys below" },
	{ .path = "batch", .type = &cfg__type_section, .sub = cfg_batch_knobs,
	  .n_sub = CFG_N(cfg_batch_knobs),
	  .doc = "the Batch API (/v1/files, /v1/batches), keys below" },
	{ .path = "price_per_hour", .type = &cfg__type_price,
	  .offset = offsetof(struct cfg, price_per_hour), .def_str = "0 (no cost figures)",
	  .doc = "what the machine costs per hour, in any currency: batches report their "
		 "cost per audio hour and per million tokens from it" },
	{ .path = "models", .type = &cfg__type_models,
	  .offset = offsetof(struct cfg, models), .min = 1,
	  .max = CFG_MAX_MODELS, .required = true, .items = cfg_model_knobs,
	  .n_items = CFG_N(cfg_model_knobs),
	  .doc = "models to load and serve, entries below" },
};

const size_t cfg__n_knobs = CFG_N(cfg__knobs);
