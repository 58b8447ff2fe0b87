/* plans/strategy.c — being written. */
#include "plans/plan.h"
