/* plans/show_cmd.c — being written. */
#include "plans/planner.h"
int show_command(lt_cli_ctx *ctx) { (void)ctx; return 1; }
int validate_command(lt_cli_ctx *ctx) { (void)ctx; return 1; }
