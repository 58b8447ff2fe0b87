/* plans/compare_cmd.c — being written. */
#include "plans/plan.h"
