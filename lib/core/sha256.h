/*
 * sha256.h - internal: SHA-256 (FIPS 180-4) of one or two byte ranges, from OpenSSL's libcrypto
 * (EVP interface; Debian package libssl-dev). Used by the kernel cache to check an entry's key and
 * object before the object is loaded. pdc_sha256("abc", 3, NULL, 0, h) gives ba7816bf...f20015ad.
 */
#ifndef PDC_LIB_SHA256_H
#define PDC_LIB_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define PDC_SHA256_BYTES 32

/* out = SHA-256 of a[0..na) followed by b[0..nb) (either may be NULL when its length is 0).
 * Returns 0, or -1 if libcrypto failed (out is then all zero). Thread-safety: any thread. */
int pdc_sha256(const void *a, size_t na, const void *b, size_t nb, uint8_t out[PDC_SHA256_BYTES]);

#endif
