/* plans/build_cmd.c — being written. */
#include "plans/planner.h"
int build_command(lt_cli_ctx *ctx) { (void)ctx; return 1; }
