/* train/kvctx.c — (being written) */
