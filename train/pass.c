/* train/pass.c — (being written) */
