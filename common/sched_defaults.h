/* sched_defaults.h - the default of each per-model scheduling knob, in one
 * place for its two readers:
 *   - the config table (config/cfg_knobs.c), which fills them in for the keys a
 *     config file leaves out (and prints them in --help);
 *   - the scheduler (engine/sched/eng_sched.c), which applies them to the
 *     fields an eng_model_spec leaves 0 (callers without a config file:
 *     tests, the bench harness).
 * The header lives in common/ because it is the one folder both may
 * include: config/ depends only on jansson and common/, and engine/ may not
 * include config/. config/inferd.schema.json repeats the numbers for JSON
 * tools; tests/unit/config checks the schema against the table and
 * tests/unit/engine/sched the table against the scheduler.
 */
#ifndef ST_SCHED_DEFAULTS_H
#define ST_SCHED_DEFAULTS_H

#define ST_SCHED_DEF_REPLICAS 1             /* replicas of the model */
#define ST_SCHED_DEF_MAX_BATCH_SIZE 8       /* transcription: windows / sequences per batch */
#define ST_SCHED_DEF_MAX_QUEUE_DELAY_MS 5   /* wait for a batch to fill, ms */
#define ST_SCHED_DEF_MAX_QUEUE_SIZE 64      /* requests waiting before 429 */
#define ST_SCHED_DEF_MAX_NUM_SEQS 16        /* generation: sequences in the running batch */
#define ST_SCHED_DEF_MAX_BATCH_TOKENS 512   /* generation: tokens per forward pass */
#define ST_SCHED_DEF_TIMEOUT_MS 0           /* request deadline, ms; 0: none */
#define ST_SCHED_DEF_SLOW_REPLICA_FACTOR 4  /* a replica this many times slower than
					     * another takes only its overflow; 0: off */
#define ST_SCHED_DEF_PREFIX_CACHE_MB 128    /* generation: MiB of finished prompts' KV
					     * caches a replica keeps; 0: off */
#define ST_SCHED_DEF_LIVE_WINDOW_MS 0       /* transcription: a live stream's shortest
					     * encoder window, ms; 0: Whisper's full 30 s */

#endif /* ST_SCHED_DEFAULTS_H */
