/* plans/build_cmd.c — being written. */
#include "plans/plan.h"
