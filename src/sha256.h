/* SHA-256 (FIPS 180-4), for fingerprints of kernels, problems and inputs. */
#ifndef MKB_SHA256_H
#define MKB_SHA256_H

#include <stddef.h>
#include <stdint.h>

struct sha256 {
	uint32_t h[8];
	uint64_t total;
	unsigned char block[64];
	size_t used;
};

void sha256_init(struct sha256 *c);
void sha256_update(struct sha256 *c, const void *data, size_t len);
void sha256_final(struct sha256 *c, unsigned char out[32]);
/* Hex digest of one buffer into hex (65 bytes with the NUL). */
void sha256_hex(const void *data, size_t len, char hex[65]);
void sha256_final_hex(struct sha256 *c, char hex[65]);

#endif
