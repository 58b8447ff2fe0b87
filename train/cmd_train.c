/* train/cmd_train.c — (being written) */
