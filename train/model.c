/* train/model.c — (being written) */
