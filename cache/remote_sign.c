/* HMAC-SHA256 of remote entries, through Nettle: a keyed MAC, so only writers holding the
 * secret can make entries that readers with the secret accept (a checksum such as XXH3 can
 * be recomputed by anyone who changes the bytes). */
#include <nettle/hmac.h>
#include <nettle/memops.h>

#include "remote_internal.h"

void remote_mac(const unsigned char *secret, size_t secret_len, const void *data, size_t len,
                unsigned char out[REMOTE_MAC_BYTES]) {
  struct hmac_sha256_ctx ctx;
  hmac_sha256_set_key(&ctx, secret_len, secret);
  hmac_sha256_update(&ctx, len, data);
  hmac_sha256_digest(&ctx, REMOTE_MAC_BYTES, out);
}

bool remote_mac_equal(const unsigned char a[REMOTE_MAC_BYTES], const unsigned char b[REMOTE_MAC_BYTES]) {
  return memeql_sec(a, b, REMOTE_MAC_BYTES) != 0;
}
