/* train/hf.c — (being written) */
