/* tests/train/test_optim_ckpt.c — (being written) */
int main(void) { return 77; }
