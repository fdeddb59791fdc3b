/* srv_cli.h - inferd's commands that run without a server (srv_cli.c).
 * Each takes main's argc/argv (argv[1] is the command) and returns the
 * process exit status: 0 ok, 1 failure, 2 usage error. */
#ifndef SRV_CLI_H
#define SRV_CLI_H

int srv_cli_inspect(int argc, char **argv);
int srv_cli_transcribe(int argc, char **argv);
int srv_cli_generate(int argc, char **argv);

#endif /* SRV_CLI_H */
