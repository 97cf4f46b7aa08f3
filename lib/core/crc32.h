/*
 * crc32.h - internal: CRC-32 (IEEE 802.3, as in zlib, PNG and gzip): reflected, polynomial
 * 0xEDB88320, initial value and final xor 0xFFFFFFFF. pdc_crc32(0, "123456789", 9) == 0xCBF43926.
 */
#ifndef PDC_LIB_CRC32_H
#define PDC_LIB_CRC32_H

#include <stddef.h>
#include <stdint.h>

/*
 * Continues a CRC over n more bytes: start with crc = 0, and pass the previous result to checksum
 * data in pieces (pdc_crc32(pdc_crc32(0, a, n), b, m) == CRC of a followed by b). data may be NULL
 * when n is 0. Thread-safety: any thread (the tables are built once, under pthread_once).
 */
uint32_t pdc_crc32(uint32_t crc, const void *data, size_t n);

#endif
