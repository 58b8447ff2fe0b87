/* train/cmd_generate.c — (being written) */
