/* train/kernel_attention.c — (being written) */
