/* train/cmd_init.c — (being written) */
