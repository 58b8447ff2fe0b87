/*
 * tests/dataprep/unicode_dump.c — write the class byte of every code point, for
 * tests/dataprep/unicode_reference.py (which checks them against tiktoken).
 *
 * Output: 0x110000 raw bytes on stdout, byte i = lt_uc_class(i) (dataprep/unicode.h).
 * Links only dataprep/unicode_tables.c.
 */
#include <stdint.h>
#include <stdio.h>

#include "dataprep/unicode.h" /* lt_uc_class */

int main(void) {
    static uint8_t classes[LT_UC_MAX + 1];
    for (uint32_t cp = 0; cp <= LT_UC_MAX; cp++) classes[cp] = lt_uc_class(cp);
    if (fwrite(classes, 1, sizeof classes, stdout) != sizeof classes || fflush(stdout) != 0) {
        perror("unicode_dump: writing stdout");
        return 1;
    }
    return 0;
}
