/* train/kernel_rmsnorm.c — (being written) */
