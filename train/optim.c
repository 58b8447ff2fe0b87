/* train/optim.c — (being written) */
