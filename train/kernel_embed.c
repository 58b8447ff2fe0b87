/* train/kernel_embed.c — (being written) */
