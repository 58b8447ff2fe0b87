/* train/kernel_rope.c — (being written) */
