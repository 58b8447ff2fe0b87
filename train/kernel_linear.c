/* train/kernel_linear.c — (being written) */
