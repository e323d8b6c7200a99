/* TLS for the remote tier (rediss://) with GnuTLS, over the socket remote_conn.c owns: the
 * handshake and every record under the same poll deadlines as the plain protocol, records
 * written with send(MSG_NOSIGNAL) (a server gone never raises SIGPIPE), and the server's
 * certificate verified against the URL's tls_ca (else the system's trust store) and its host
 * name or address. A client certificate is sent when the URL names one (tls_cert, tls_key).
 * Closing never writes to the socket, so a forked child can drop its copy of the session
 * without disturbing the parent's. */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include "remote_internal.h"

static ssize_t push(gnutls_transport_ptr_t fd, const void *data, size_t len) {
  return send((int)(intptr_t)fd, data, len, MSG_NOSIGNAL);
}

static ssize_t pull(gnutls_transport_ptr_t fd, void *data, size_t len) {
  return recv((int)(intptr_t)fd, data, len, 0);
}

/* The credentials: the CA file or the system's trust store, and the client's pair if named. */
static bool credentials(remote_conn *conn, const cache_remote_config *c, char *why, size_t why_size) {
  if (gnutls_certificate_allocate_credentials(&conn->creds) < 0) {
    snprintf(why, why_size, "TLS: out of memory");
    return false;
  }
  int rc = c->tls_ca[0] ? gnutls_certificate_set_x509_trust_file(conn->creds, c->tls_ca, GNUTLS_X509_FMT_PEM)
                        : gnutls_certificate_set_x509_system_trust(conn->creds);
  if (rc <= 0) {
    snprintf(why, why_size, "TLS: no trusted certificate from %s (%s)", c->tls_ca[0] ? c->tls_ca : "the system's store",
             rc < 0 ? gnutls_strerror(rc) : "none found");
    return false;
  }
  if (c->tls_cert[0] &&
      (rc = gnutls_certificate_set_x509_key_file(conn->creds, c->tls_cert, c->tls_key, GNUTLS_X509_FMT_PEM)) < 0) {
    snprintf(why, why_size, "TLS: client certificate %s or key %s: %s", c->tls_cert, c->tls_key, gnutls_strerror(rc));
    return false;
  }
  return true;
}

/* Why the handshake failed: the certificate's problems in words, when that was it. */
static void handshake_failure(gnutls_session_t session, int rc, char *why, size_t why_size) {
  if (rc != GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR) {
    snprintf(why, why_size, "TLS handshake: %s", gnutls_strerror(rc));
    return;
  }
  gnutls_datum_t text = {NULL, 0};
  unsigned status = gnutls_session_get_verify_cert_status(session);
  if (gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &text, 0) == 0 && text.data)
    snprintf(why, why_size, "TLS: the server's certificate is refused: %s", (const char *)text.data);
  else snprintf(why, why_size, "TLS: the server's certificate is refused");
  gnutls_free(text.data);
}

remote_fail remote_tls_start(remote_conn *conn, const cache_remote_config *c, double deadline, char *why,
                             size_t why_size) {
  if (!credentials(conn, c, why, why_size)) return REMOTE_UNREACHABLE;
  if (gnutls_init(&conn->tls, GNUTLS_CLIENT | GNUTLS_NONBLOCK) < 0) {
    snprintf(why, why_size, "TLS: out of memory");
    return REMOTE_NOMEM;
  }
  gnutls_set_default_priority(conn->tls);
  gnutls_credentials_set(conn->tls, GNUTLS_CRD_CERTIFICATE, conn->creds);
  gnutls_transport_set_ptr(conn->tls, (gnutls_transport_ptr_t)(intptr_t)conn->fd);
  gnutls_transport_set_push_function(conn->tls, push);
  gnutls_transport_set_pull_function(conn->tls, pull);
  /* SNI names a host, never an address; verification covers both (an address against the
   * certificate's IP entries). */
  bool address = strspn(c->host, "0123456789.") == strlen(c->host) || strchr(c->host, ':');
  if (!address) gnutls_server_name_set(conn->tls, GNUTLS_NAME_DNS, c->host, strlen(c->host));
  gnutls_session_set_verify_cert(conn->tls, c->host, 0);
  for (;;) {
    int rc = gnutls_handshake(conn->tls);
    if (rc == GNUTLS_E_SUCCESS) return REMOTE_OK;
    if (rc == GNUTLS_E_INTERRUPTED) continue;
    if (rc != GNUTLS_E_AGAIN) {
      handshake_failure(conn->tls, rc, why, why_size);
      return rc == GNUTLS_E_MEMORY_ERROR ? REMOTE_NOMEM : REMOTE_PROTOCOL;
    }
    short events = gnutls_record_get_direction(conn->tls) ? POLLOUT : POLLIN;
    if (remote_wait_for(conn->fd, events, deadline) <= 0) {
      snprintf(why, why_size, "TLS handshake timed out");
      return REMOTE_TIMEOUT;
    }
  }
}

remote_fail remote_tls_send(remote_conn *conn, const char *data, size_t len, double deadline, char *why,
                            size_t why_size) {
  while (len > 0) {
    ssize_t n = gnutls_record_send(conn->tls, data, len);
    if (n > 0) {
      data += n;
      len -= (size_t)n;
      continue;
    }
    if (n == GNUTLS_E_INTERRUPTED) continue;
    if (n == GNUTLS_E_AGAIN) {
      if (remote_wait_for(conn->fd, POLLOUT, deadline) > 0) continue;
      snprintf(why, why_size, "timed out sending a command");
      return REMOTE_TIMEOUT;
    }
    snprintf(why, why_size, "TLS send: %s", gnutls_strerror((int)n));
    return REMOTE_LOST;
  }
  return REMOTE_OK;
}

ssize_t remote_tls_recv(remote_conn *conn, char *buf, size_t size, double deadline, remote_fail *fail, char *why,
                        size_t why_size) {
  for (;;) {
    ssize_t n = gnutls_record_recv(conn->tls, buf, size);
    if (n >= 0) {
      if (n == 0) {
        snprintf(why, why_size, "the server closed the connection");
        *fail = REMOTE_LOST;
      }
      return n;
    }
    if (n == GNUTLS_E_INTERRUPTED) continue;
    if (n == GNUTLS_E_AGAIN && remote_wait_for(conn->fd, POLLIN, deadline) > 0) continue;
    if (n == GNUTLS_E_AGAIN) {
      snprintf(why, why_size, "no answer within the timeout");
      *fail = REMOTE_TIMEOUT;
    } else {
      snprintf(why, why_size, "TLS receive: %s", gnutls_strerror((int)n));
      *fail = REMOTE_LOST;
    }
    return -1;
  }
}

void remote_tls_close(remote_conn *conn) {
  if (conn->tls) gnutls_deinit(conn->tls);
  if (conn->creds) gnutls_certificate_free_credentials(conn->creds);
  conn->tls = NULL;
  conn->creds = NULL;
}
