/*
 * jobctl/main.c — the `jobctl` program: a thin shell over the stage library.
 */
#include "jobctl/jobctl.h"

int main(int argc, char **argv) { return lt_cli_main(&jobctl_program, argc, argv); }
