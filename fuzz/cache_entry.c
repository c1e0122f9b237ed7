/*
** cache_entry.c: libFuzzer target over the kernel cache's entry reader. Any bytes may sit
** in a cache file; the reader must accept exactly the well-formed entries for its key and
** never read out of bounds. Bytes 16..31 of the input (where an entry keeps its key) are used
** as the expected key when present, so that the fuzzer reaches the checks behind the key.
*/
#include "internal.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    unsigned char key[16] = {0};
    if (size >= 32) memcpy(key, data + 16, 16);
    uint64_t offset = 0, payload = 0;
    if (tocha_cache_parse_entry(data, size, key, &offset, &payload) == 0) {
        /* A valid entry: its payload fills the rest of the file exactly. */
        if (offset + payload != size) __builtin_trap();
    }
    return 0;
}
