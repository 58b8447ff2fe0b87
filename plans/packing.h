/* plans/packing.h — sample packing shared by the strategies (stub, being written). */
#ifndef LT_PACKING_H
#define LT_PACKING_H
#endif
