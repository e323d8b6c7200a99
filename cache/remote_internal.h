/* Pieces the remote tier's files share: the connection (remote_conn.c) and its TLS
 * (remote_tls.c), the value format and its signature (remote_entry.c, remote_sign.c) and the
 * tier's calls (remote.c). Not for use
 * outside cache/remote*.c. */
#ifndef CACHE_REMOTE_INTERNAL_H
#define CACHE_REMOTE_INTERNAL_H
#include <stdbool.h>
#include <stddef.h>

#include <gnutls/gnutls.h>
#include <hiredis/hiredis.h>
#include <sys/types.h>

#include "disk_internal.h"
#include "cache.h"

/* ---- one connection (remote_conn.c) ----
 *
 * Our own socket under hiredis's protocol writer and reader: hiredis 0.14 writes with write(),
 * so a server that goes away would raise SIGPIPE and kill the host program; send() with
 * MSG_NOSIGNAL does not. Every call has a deadline (poll), so a slow or paused server costs
 * at most the timeout, and a server that answers garbage is a protocol error. */
typedef struct remote_conn {
  int fd; /* -1: not connected */
  redisReader *reader;
  gnutls_session_t tls; /* rediss://: the session over fd; NULL otherwise */
  gnutls_certificate_credentials_t creds;
} remote_conn;

typedef enum remote_fail {
  REMOTE_OK,
  REMOTE_UNREACHABLE, /* connect refused, no route, name not found */
  REMOTE_TIMEOUT,     /* no whole answer within the deadline */
  REMOTE_LOST,        /* the connection closed or reset */
  REMOTE_PROTOCOL,    /* the answer is not Redis's protocol */
  REMOTE_NOMEM,       /* out of memory here */
} remote_fail;

/* Connects (fd non-blocking); REMOTE_OK or why not, with a reason in why. */
remote_fail remote_conn_open(remote_conn *conn, const cache_remote_config *config, int timeout_ms, char *why,
                             size_t why_size);
void remote_conn_close(remote_conn *conn);
/* Sends one command and reads its reply (a Redis error reply is REMOTE_OK with that reply). */
remote_fail remote_conn_call(remote_conn *conn, int argc, const char **argv, const size_t *lens, int timeout_ms,
                             redisReply **reply, char *why, size_t why_size);
/* Waits for events on fd until deadline (ms on the monotonic clock): 1 ready, 0 timed out,
 * -1 error (errno). */
int remote_wait_for(int fd, short events, double deadline);

/* ---- TLS over the connection's socket (remote_tls.c) ---- */
/* The handshake on conn->fd (connected), the certificate verified; REMOTE_OK or why not. */
remote_fail remote_tls_start(remote_conn *conn, const cache_remote_config *config, double deadline, char *why,
                             size_t why_size);
remote_fail remote_tls_send(remote_conn *conn, const char *data, size_t len, double deadline, char *why,
                            size_t why_size);
/* Bytes read (> 0), or 0 / -1 with *fail and why set. */
ssize_t remote_tls_recv(remote_conn *conn, char *buf, size_t size, double deadline, remote_fail *fail, char *why,
                        size_t why_size);
/* Frees the session without a word to the server (the socket may be a forked parent's too). */
void remote_tls_close(remote_conn *conn);

/* ---- a value: the disk entry's bytes [+ "LATCHMAC" + HMAC-SHA256] (remote_entry.c) ---- */
enum { REMOTE_MAC_BYTES = 32, REMOTE_TRAILER_BYTES = 8 + REMOTE_MAC_BYTES };

/* "latch:<namespace>:<32 hex>" and "latch:<namespace>:lease:<32 hex>". */
enum { REMOTE_KEY_MAX = 128 };
void remote_entry_key(const char *namespace_name, cache_key key, const char *fingerprint, char out[REMOTE_KEY_MAX]);
void remote_lease_key(const char *namespace_name, cache_key key, const char *fingerprint, char out[REMOTE_KEY_MAX]);
/* Whether name is an entry's key in the namespace: "latch:<namespace>:" and 32 hex digits. */
bool remote_is_entry_key(const char *namespace_name, const char *name, size_t len);

/* The value for an entry (malloc'd), signed when secret_len > 0; NULL when memory runs out. */
unsigned char *remote_entry_encode(cache_key key, const char *fingerprint, const void *payload, size_t len,
                                   const unsigned char *secret, size_t secret_len, size_t *value_len);
/* Checks a value: its format and checksums, its signature when secret_len > 0 (an unsigned
 * value then refused unless allow_unsigned), and, when
 * fingerprint is not NULL, that it is the entry for (key, fingerprint). On CACHE_DISK_OK,
 * info gets the key, fingerprint and payload size, and *payload (when not NULL) points into
 * value. */
cache_disk_problem remote_entry_decode(const unsigned char *value, size_t value_len, const cache_key *key,
                                       const char *fingerprint, const unsigned char *secret, size_t secret_len,
                                       bool allow_unsigned, cache_disk_entry_info *info,
                                       const unsigned char **payload);

/* ---- HMAC-SHA256 (remote_sign.c) ---- */
void remote_mac(const unsigned char *secret, size_t secret_len, const void *data, size_t len,
                unsigned char out[REMOTE_MAC_BYTES]);
/* Compared in constant time. */
bool remote_mac_equal(const unsigned char a[REMOTE_MAC_BYTES], const unsigned char b[REMOTE_MAC_BYTES]);

/* ---- calls through the tier's connection (remote.c) ---- */

/* One command under the lock, with the rest and the warnings handled: false when there is no
 * answer (resting, unreachable, failed) or the answer is an error reply (warned about once
 * per kind); *reply is the answer otherwise, for the caller to free with freeReplyObject. */
bool remote_call(cache_remote *remote, int argc, const char **argv, const size_t *lens, redisReply **reply);
/* Counts a wait for another process's compile, and whether it ended without the entry. */
void remote_count_wait(cache_remote *remote, bool timed_out);
/* The secret, for the admin's checks. */
const unsigned char *remote_secret(const cache_remote *remote, size_t *len);
/* One warning per kind of entry problem per process, naming the Redis key. */
void remote_warn_entry(cache_remote *remote, const char *name, cache_disk_problem problem);

#endif
