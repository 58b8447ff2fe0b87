/* tests/train/test_kernels.c — (being written) */
int main(void) { return 77; }
