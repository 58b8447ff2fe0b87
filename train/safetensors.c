/* train/safetensors.c — (being written) */
