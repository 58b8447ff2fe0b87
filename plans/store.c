/* plans/store.c — being written. */
#include "plans/plan.h"
