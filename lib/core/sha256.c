/*
 * sha256.c - SHA-256 through OpenSSL's EVP digest interface (see sha256.h). libcrypto rather than
 * our own implementation: it is in Debian (libssl-dev), constant-reviewed and uses the CPU's SHA
 * extensions where present.
 */
#include "lib/core/sha256.h"

#include <string.h>

#include <openssl/evp.h>

int pdc_sha256(const void *a, size_t na, const void *b, size_t nb, uint8_t out[PDC_SHA256_BYTES])
{
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    unsigned int len = 0;
    int ok = c && EVP_DigestInit_ex(c, EVP_sha256(), NULL) == 1 && (!na || EVP_DigestUpdate(c, a, na) == 1) &&
             (!nb || EVP_DigestUpdate(c, b, nb) == 1) && EVP_DigestFinal_ex(c, out, &len) == 1 &&
             len == PDC_SHA256_BYTES;
    EVP_MD_CTX_free(c);
    if (!ok) memset(out, 0, PDC_SHA256_BYTES);
    return ok ? 0 : -1;
}
