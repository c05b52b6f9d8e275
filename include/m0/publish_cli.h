/*
 * publish_cli.h — the `m0serve publish` subcommand (src/master/publish_cli.c).
 */
#ifndef M0_PUBLISH_CLI_H
#define M0_PUBLISH_CLI_H

/* argv[0] is "publish". Returns the process exit status: 0 published (the
 * id printed on stdout), 1 the broker failed, 2 a bad argument. */
int m0_publish_main(int argc, char **argv);

#endif
