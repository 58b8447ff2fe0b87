/* tests/train/test_safetensors.c — (being written) */
int main(void) { return 77; }
