/* tests/train/test_model.c — (being written) */
int main(void) { return 77; }
