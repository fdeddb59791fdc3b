/* cfg.h - inferd's configuration: a JSON file (jansson) parsed through a
 * declarative table of knobs (nginx ngx_command_t style) into a frozen
 * struct cfg.
 *
 * Parsing runs JSON -> UNSET sentinels -> defaults -> range checks. Errors
 * name the JSON path and what was expected, e.g.
 *   "models[1].replicas: expected an integer >= 1".
 * Unknown keys are errors (a typo must not silently fall back to a default).
 * The struct is immutable after cfg_load_*() returns and may be shared
 * read-only by every thread. Documented in config/README.md, schema in
 * config/inferd.schema.json; cfg_help_print() prints the same table.
 */
#ifndef CFG_H
#define CFG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum cfg_model_format {
	CFG_MODEL_FORMAT_AUTO = 0, /* decided from the path at load time */
	CFG_MODEL_FORMAT_GGUF,     /* one .gguf file */
	CFG_MODEL_FORMAT_CT2,      /* a CTranslate2 folder (model.bin, config.json) */
	CFG_MODEL_FORMAT_COUNT
};

/* "compute_type" of a model, as faster-whisper / CTranslate2 name them:
 * "default" keeps the weights' stored type (float16/float32 folders run
 * float32), "float32" runs float32 (int8 weights dequantized), "int8" and
 * "int8_float32" run the Whisper linears in int8 (weights quantized per
 * output row at load, activations per row at run time). */
enum cfg_compute_type {
	CFG_COMPUTE_DEFAULT = 0,
	CFG_COMPUTE_FLOAT32,
	CFG_COMPUTE_INT8,
	CFG_COMPUTE_INT8_FLOAT32,
	CFG_COMPUTE_BFLOAT16,
	CFG_COMPUTE_INT8_BFLOAT16,
	CFG_COMPUTE_COUNT
};

/* One placement of "replicas": [{"device": "cpu:0-1", "threads": 2}, ...]. */
struct cfg_replica {
	char *device;                 /* device spec, "cpu", "cpu:N", "cpu:A-B", "cpu:0,2-3" */
	int threads;                  /* compute threads, >= 1; 0 (absent): one per core of the device */
};

/* One entry of "models". */
struct cfg_model {
	char *name;                   /* unique, [A-Za-z0-9._-]{1,64} */
	char *path;                   /* file or folder, relative to the cwd */
	enum cfg_model_format format; /* "gguf", "ct2" or absent (auto) */
	/* "replicas": an integer N or {"count": N} (N replicas spread over the
	 * available cores), or a list of placements. Absent: {"count": 1}. */
	int replica_count;            /* N; 0 when placements are listed */
	struct cfg_replica *replicas; /* listed placements [n_replicas], else NULL */
	size_t n_replicas;            /* 0..256 */
	/* scheduling (all optional) */
	int max_batch_size;           /* transcription: windows per encoder batch and sequences
				       * per decoder step; default 8, 1..256 */
	int max_queue_delay_ms;       /* wait up to this for a batch to fill; default 5, 0..60000 */
	int max_queue_size;           /* requests waiting to start before 429; default 64, 1..1000000 */
	int max_num_seqs;             /* generation: sequences in the running batch; default 16, 1..256 */
	int max_batch_tokens;         /* generation: tokens per forward pass; default 512, 16..65536 */
	int prefix_cache_mb;          /* generation: MiB of finished prompts' KV caches kept per
				       * replica; default 128, 0 (off)..1048576 */
	int timeout_ms;               /* request deadline (504 past it); default 0 = none, 0..86400000 */
	int slow_replica_factor;      /* a replica this many times slower than another takes only
				       * what that one cannot end sooner; default 4, 0 (off)..1000 */
	int live_window_ms;           /* transcription: a live stream's shortest encoder window;
				       * default 0 (full 30 s windows), 0..30000 */
	enum cfg_compute_type compute_type; /* "compute_type"; default "default" */
	int kv_cache_f16;             /* generation: "kv_cache_f16", bool; default false (float32) */
	int max_model_len;            /* generation: tokens (prompt + generated) per sequence;
				       * 16..1048576; 0 (absent): min(4096, the trained context) */
	int vad_filter;               /* transcription: "vad_filter", bool; requests' default */
	char *vad_model;              /* transcription: "vad_model", Silero VAD's safetensors;
				       * NULL when absent: the default beside the model */
};

/* Where a transcription model's "vad_model" is looked for when absent: in
 * the folder holding the model (engine/eng.h ENG_VAD_MODEL_BESIDE;
 * scripts/fetch-models puts it in models/); a missing file then only
 * means no VAD. */
#define CFG_VAD_MODEL_DEFAULT "silero-vad/silero_vad_16k.safetensors beside the model"

struct cfg {
	char *listen_host;         /* "listen": "HOST:PORT", "[v6]:PORT"; default 127.0.0.1:8080.
				    * A numeric address without brackets ("::1"); "localhost" -> 127.0.0.1 */
	int listen_port;           /* 1..65535 (0 allowed: pick a free port) */
	char *grpc_host;           /* "grpc_listen": the gRPC (KServe v2) port, same forms as
				    * listen; NULL when "" (the default): no gRPC */
	int grpc_port;             /* 0..65535 */
	char **api_keys;           /* "api_keys": accepted bearer/token keys; NULL when none */
	size_t n_api_keys;         /* entries in api_keys, 0..1024 */
	int access_log;            /* "access_log": bool, default true */
	/* "limits": {...} */
	int max_connections;       /* default 1024, >= 1 */
	int64_t max_header_bytes;  /* default 16384 (16 KiB), >= 1024 */
	int64_t max_body_bytes;    /* default 104857600 (100 MiB), >= 1024; also caps decompressed size */
	int header_timeout_ms;     /* default 10000; headers must complete within it (slowloris) */
	int idle_timeout_ms;       /* default 60000; keep-alive connection with no request */
	int body_timeout_ms;       /* default 60000; max time between body bytes */
	int drain_timeout_ms;      /* default 30000; graceful shutdown waits this long */
	int live_idle_timeout_ms;  /* default 10000; a live stream with no audio and no
				    * KeepAlive this long closes (1011, NET-0001) */
	int send_timeout_ms;       /* default 60000; queued response bytes that do not
				    * move this long (a client not reading) close the
				    * connection (nginx's send_timeout) */
	/* "batch": {...}, the Batch API (server/batch/) */
	char *batch_store;         /* SQLite database of files, batches and results; NULL
				    * (default): $XDG_STATE_HOME/inferd/batch.db, else
				    * ~/.local/state/inferd/batch.db */
	char *batch_input_dir;     /* folder audio batch lines name files in; NULL: no audio batches */
	int batch_concurrency;     /* requests of batches in flight at once; 0 (default): the
				    * largest batch the models take, times their replicas */
	int64_t batch_max_file_bytes; /* default 209715200 (200 MiB, OpenAI's) */
	int batch_max_lines;       /* requests per input file; default 50000 (OpenAI's) */
	int batch_max_jobs;        /* batches not ended at once; default 100 */
	int64_t batch_max_store_bytes; /* database size past which uploads get 507; default 10 GiB */
	int64_t batch_file_ttl_s;  /* files (inputs and results) expire after this; default 30 days */
	double price_per_hour;     /* "price_per_hour": the machine's cost per hour, for the cost
				    * figures (per audio hour, per million tokens); 0: none */
	struct cfg_model *models;  /* "models": [...], at least one */
	size_t n_models;           /* entries in models, 1..256 */
};

/* cfg_load_file - read and parse the JSON file at path.
 * On success *out is new (free with cfg_destroy) and 0 is returned.
 * On failure *out is NULL, a negative ST_* is returned (-ST_IO unreadable,
 * -ST_INVAL invalid, -ST_TOOBIG over 1 MiB, -ST_NOMEM) and err (errlen bytes, may be NULL) holds
 * one line like "config/x.json: models[1].replicas: expected an integer >= 1".
 * Any thread; no global state. */
int cfg_load_file(const char *path, struct cfg **out, char *err, size_t errlen);

/* cfg_set_grpc_listen - replace cfg's grpc_listen with s ("HOST:PORT" as
 * the config takes it, or "" for none), as INFERD_GRPC_LISTEN does after
 * loading. 0, or -ST_INVAL / -ST_NOMEM with err. Before the cfg is shared. */
int cfg_set_grpc_listen(struct cfg *cfg, const char *s, char *err, size_t errlen);

/* cfg_load_string - as cfg_load_file on len bytes of JSON text (need not be
 * NUL-terminated); the error line has no file name prefix. */
int cfg_load_string(const char *json, size_t len, struct cfg **out, char *err,
		    size_t errlen);

/* cfg_destroy - free a config; NULL is a no-op. */
void cfg_destroy(struct cfg *cfg);

/* cfg_help_print - print every knob (JSON path, type, default, range, doc)
 * from the declarative table, for `inferd --help`. */
void cfg_help_print(FILE *out);

/* cfg_model_format_str - "auto", "gguf" or "ct2". */
const char *cfg_model_format_str(enum cfg_model_format f);

/* cfg_compute_type_str - "default", "float32", "int8", "int8_float32",
 * "bfloat16", "int8_bfloat16"
 * ("unknown" out of range). cfg_compute_type_parse - the value s names,
 * or -1 for any other string (NULL too); what the config knob and
 * `inferd transcribe --compute-type` accept. */
const char *cfg_compute_type_str(enum cfg_compute_type c);
int cfg_compute_type_parse(const char *s);

#endif /* CFG_H */
