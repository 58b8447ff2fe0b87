/* tests/train/parity_tool.c — (being written) */
int main(void) { return 77; }
