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

#endif /* CLI_CMD_H */
