/*
 * train/main.c — the `trainer` program: a thin shell over the stage library.
 */
#include "train/cmd/cmd.h" /* trainer_program */

int main(int argc, char **argv) { return lt_cli_main(&trainer_program, argc, argv); }
