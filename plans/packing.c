/* plans/packing.c — being written. */
#include "plans/plan.h"
