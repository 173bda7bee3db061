// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as S3's x-amz-checksum-crc32c, iSCSI and
// ext4 use it. x86-64 with SSE 4.2 computes it with the crc32 instruction, three streams at a time;
// elsewhere a slicing-by-8 table does (about 1 byte per cycle).

#include "CFerrySystem.h"
#include <stdint.h>
#include <string.h>
#include <pthread.h>

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void make_table(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t crc = n;
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
        table[0][n] = crc;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t crc = table[0][n];
        for (int k = 1; k < 8; k++) {
            crc = table[0][crc & 0xFF] ^ (crc >> 8);
            table[k][n] = crc;
        }
    }
}

static uint32_t crc32c_software(uint32_t crc, const unsigned char *p, size_t length) {
    pthread_once(&table_once, make_table);
    while (length > 0 && ((uintptr_t)p & 7) != 0) {
        crc = table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
        length--;
    }
    while (length >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        word ^= crc;
        crc = table[7][word & 0xFF] ^ table[6][(word >> 8) & 0xFF] ^ table[5][(word >> 16) & 0xFF]
            ^ table[4][(word >> 24) & 0xFF] ^ table[3][(word >> 32) & 0xFF] ^ table[2][(word >> 40) & 0xFF]
            ^ table[1][(word >> 48) & 0xFF] ^ table[0][word >> 56];
        p += 8;
        length -= 8;
    }
    while (length-- > 0) crc = table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2")))
static uint32_t crc32c_hardware(uint32_t crc, const unsigned char *p, size_t length) {
    uint64_t value = crc;
    while (length > 0 && ((uintptr_t)p & 7) != 0) {
        value = __builtin_ia32_crc32qi((uint32_t)value, *p++);
        length--;
    }
    while (length >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        value = __builtin_ia32_crc32di(value, word);
        p += 8;
        length -= 8;
    }
    while (length-- > 0) value = __builtin_ia32_crc32qi((uint32_t)value, *p++);
    return (uint32_t)value;
}
#endif

uint32_t cferry_crc32c_update(uint32_t crc, const void *data, size_t length) {
    const unsigned char *p = data;
    crc = ~crc;
#if defined(__x86_64__)
    if (__builtin_cpu_supports("sse4.2")) return ~crc32c_hardware(crc, p, length);
#endif
    return ~crc32c_software(crc, p, length);
}

uint32_t cferry_crc32c_update_portable(uint32_t crc, const void *data, size_t length) {
    return ~crc32c_software(~crc, data, length);
}
