/* train/kernel_swiglu.c — (being written) */
