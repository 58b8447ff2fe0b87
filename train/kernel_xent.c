/* train/kernel_xent.c — (being written) */
