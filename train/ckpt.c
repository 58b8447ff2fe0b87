/* train/ckpt.c — (being written) */
