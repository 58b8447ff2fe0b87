/* train/cmd_eval.c — (being written) */
