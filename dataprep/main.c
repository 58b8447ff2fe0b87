/*
 * dataprep/main.c — the `dataprep` program: a thin shell over the stage library.
 */
#include "dataprep/dataprep.h"

int main(int argc, char **argv) { return lt_cli_main(&dataprep_program, argc, argv); }
