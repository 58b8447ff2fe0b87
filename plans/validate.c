/* plans/validate.c — being written. */
#include "plans/plan.h"
