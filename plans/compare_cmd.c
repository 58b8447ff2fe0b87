/* plans/compare_cmd.c — being written. */
#include "plans/planner.h"
int compare_command(lt_cli_ctx *ctx) { (void)ctx; return 1; }
