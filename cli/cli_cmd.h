/* cli_cmd.h - inferd's commands that run without a server (cli_cmd.c,
 * cli_devices.c).
 * Each takes main's argc/argv (argv[1] is the command) and returns the
 * process exit status: 0 ok, 1 failure, 2 usage error. */
#ifndef CLI_CMD_H
#define CLI_CMD_H

int cli_inspect(int argc, char **argv);
int cli_transcribe(int argc, char **argv);
int cli_generate(int argc, char **argv);
/* inferd devices: dev_list's devices and their caps (cli_devices.c). */
int cli_devices(int argc, char **argv);

/* inferd batch run MANIFEST --out RESULTS (cli_batch.c): the config's
 * models load, the manifest runs as one Batch API job with a progress
 * bar, resumable; config_path the default --config. */
int cli_batch(int argc, char **argv, const char *config_path);

struct cfg;
struct eng_model_spec;
/* cli_specs_from_cfg - the config's models as the engine's load specs
 * (borrowed strings; one allocation, mem_free). NULL out of memory. */
struct eng_model_spec *cli_specs_from_cfg(const struct cfg *cfg);

#endif /* CLI_CMD_H */
