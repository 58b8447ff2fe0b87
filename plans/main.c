/*
 * plans/main.c — the `planner` program: a thin shell over the stage library.
 */
#include "plans/cmd/planner.h"

int main(int argc, char **argv) { return lt_cli_main(&planner_program, argc, argv); }
