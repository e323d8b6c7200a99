/* The remote tier over TLS (rediss://) against a private redis-server with --tls-port and a
 * test CA made here with openssl: entries stored and loaded through TLS, the server's
 * certificate verified (a server whose certificate another CA signed, or one made for another
 * host, is refused with a warning naming the certificate, and the program's results stay
 * right), a client certificate sent when the server asks for one, and a plain redis:// to the
 * TLS port failing as a protocol error rather than hanging. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"
#include "disk_test_util.h"
#include "redis_test_util.h"
#include "remote_test_util.h"
#include "test.h"

static char pki[64];

/* Runs a shell command; false (with its text) when it fails. */
static bool shell(const char *command) {
  int rc = system(command);
  if (rc != 0) fprintf(stderr, "failed (%d): %s\n", rc, command);
  return rc == 0;
}

/* In pki/NAME: a CA (NAME-ca.crt) and a server certificate it signed for host and address
 * (NAME.crt, NAME.key), and a client certificate (NAME-client.crt, .key). */
static bool make_pki(const char *name, const char *san) {
  char command[2048];
  snprintf(command, sizeof command,
           "cd '%s' && "
           "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=%s-ca -keyout %s-ca.key -out %s-ca.crt "
           ">/dev/null 2>&1 && "
           "openssl req -newkey rsa:2048 -nodes -subj /CN=server -keyout %s.key -out %s.csr >/dev/null 2>&1 && "
           "printf 'subjectAltName=%s\\n' > %s.ext && "
           "openssl x509 -req -in %s.csr -CA %s-ca.crt -CAkey %s-ca.key -CAcreateserial -days 2 -extfile %s.ext "
           "-out %s.crt >/dev/null 2>&1 && "
           "openssl req -newkey rsa:2048 -nodes -subj /CN=client -keyout %s-client.key -out %s-client.csr "
           ">/dev/null 2>&1 && "
           "openssl x509 -req -in %s-client.csr -CA %s-ca.crt -CAkey %s-ca.key -CAcreateserial -days 2 "
           "-out %s-client.crt >/dev/null 2>&1",
           pki, name, name, name, name, name, san, name, name, name, name, name, name, name, name, name, name, name,
           name);
  return shell(command);
}

/* A server on a TLS port only, its certificate from pki/NAME; auth_clients: ask for a client
 * certificate. */
static bool start_tls(redis_server *s, const char *name, bool auth_clients, int *tls_port) {
  static char port[16], cert[128], key[128], ca[128];
  *tls_port = redis_free_port();
  snprintf(port, sizeof port, "%d", *tls_port);
  snprintf(cert, sizeof cert, "%s/%s.crt", pki, name);
  snprintf(key, sizeof key, "%s/%s.key", pki, name);
  snprintf(ca, sizeof ca, "%s/%s-ca.crt", pki, name);
  return redis_start(s, NULL, "--tls-port", port, "--tls-cert-file", cert, "--tls-key-file", key,
                     "--tls-ca-cert-file", ca, "--tls-auth-clients", auth_clients ? "yes" : "no", NULL);
}

static void tls_url(char *out, size_t size, const char *host, int port, const char *ca_name, const char *extra) {
  snprintf(out, size, "rediss://%s:%d/0?unsigned=1&tls_ca=%s/%s-ca.crt%s", host, port, pki, ca_name, extra);
}

/* A server from pki/NAME (start_tls) and, in url, the URL to it at 127.0.0.1 that trusts
 * NAME's CA; false, the test failed, when the server did not start. */
static bool tls_server(redis_server *s, const char *name, bool auth_clients, int *port, char *url, size_t size) {
  if (!start_tls(s, name, auth_clients, port)) {
    CHECK_MSG(false, "redis-server with TLS did not start");
    return false;
  }
  tls_url(url, size, "127.0.0.1", *port, name, "");
  return true;
}

/* Graphs [0, 2) in a fresh runtime with url; the warnings it printed in text. */
static int run_capturing(const char *url, latch_stats *st, const char **text) {
  cache_remote_reset_warnings();
  capture_begin();
  int wrong = run_all(url, NULL, NULL, 2, st);
  *text = capture_end();
  return wrong;
}

static void stores_and_loads_over_tls(void) {
  redis_server s;
  int port = 0;
  char url[512];
  if (!tls_server(&s, "good", false, &port, url, sizeof url)) return;
  latch_stats st;
  const char *text;
  CHECK_EQ_INT(run_capturing(url, &st, &text), 0);
  CHECK_EQ_INT((int)st.remote_writes, 2);
  CHECK_MSG(!strstr(text, "warning"), "%s", text);
  CHECK_EQ_INT(run_all(url, NULL, NULL, 2, &st), 0);
  CHECK_EQ_INT((int)st.compiles, 0);
  CHECK_EQ_INT((int)st.remote_loads, 2);
  /* the name in the certificate is checked: localhost is in it too */
  tls_url(url, sizeof url, "localhost", port, "good", "");
  CHECK_EQ_INT(run_all(url, NULL, NULL, 2, &st), 0);
  CHECK_EQ_INT((int)st.remote_loads, 2);
  /* a CA that did not sign the server's certificate: refused, the results still right */
  tls_url(url, sizeof url, "127.0.0.1", port, "other", "");
  CHECK_EQ_INT(run_capturing(url, &st, &text), 0);
  CHECK_EQ_INT((int)st.remote_loads, 0);
  CHECK_MSG(strstr(text, "certificate is refused") != NULL, "%s", text);
  /* plain Redis protocol to the TLS port: an error, not a hang */
  char plain[256];
  snprintf(plain, sizeof plain, "redis://127.0.0.1:%d/0?unsigned=1&timeout_ms=500", port);
  CHECK_EQ_INT(run_capturing(plain, &st, &text), 0);
  CHECK_EQ_INT((int)st.remote_loads, 0);
  CHECK_MSG(strstr(text, "latch: warning: compile cache: remote") != NULL, "%s", text);
  redis_stop(&s);
}

static void wrong_host_refused(void) {
  redis_server s;
  int port = 0;
  char url[512];
  if (!tls_server(&s, "named", false, &port, url, sizeof url)) return; /* made for cache.example only */
  latch_stats st;
  const char *text;
  CHECK_EQ_INT(run_capturing(url, &st, &text), 0);
  CHECK_EQ_INT((int)st.remote_writes, 0);
  CHECK_MSG(strstr(text, "certificate is refused") != NULL, "%s", text);
  redis_stop(&s);
}

static void client_certificate(void) {
  redis_server s;
  int port = 0;
  char url[768], extra[300];
  if (!tls_server(&s, "good", true, &port, url, sizeof url)) return;
  latch_stats st;
  const char *text;
  CHECK_EQ_INT(run_capturing(url, &st, &text), 0); /* no client certificate: refused */
  CHECK_EQ_INT((int)st.remote_writes, 0);
  snprintf(extra, sizeof extra, "&tls_cert=%s/good-client.crt&tls_key=%s/good-client.key", pki, pki);
  tls_url(url, sizeof url, "127.0.0.1", port, "good", extra);
  CHECK_EQ_INT(run_capturing(url, &st, &text), 0);
  CHECK_EQ_INT((int)st.remote_writes, 2);
  redis_stop(&s);
}

static void url_checks(void) {
  cache_remote_config c;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  CHECK(cache_remote_parse_url("rediss://h:6380/1?tls_ca=/etc/ca%20file.pem", &c, &diag) == HLO_OK);
  CHECK(c.tls && strcmp(c.tls_ca, "/etc/ca file.pem") == 0 && strcmp(c.shown, "rediss://h:6380/1") == 0);
  static const char *const bad[] = {"redis://h?tls_ca=/x", "rediss://h?tls_cert=/c", "rediss://h?tls_ca="};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    hlo_diag_clear(&diag);
    CHECK_MSG(cache_remote_parse_url(bad[i], &c, &diag) == HLO_ERR_INPUT, "%s was accepted", bad[i]);
  }
}

int main(void) {
  snprintf(pki, sizeof pki, "/tmp/latch-tls-XXXXXX");
  if (!mkdtemp(pki)) return 1;
  bool made = make_pki("good", "DNS:localhost,IP:127.0.0.1") && make_pki("other", "DNS:localhost,IP:127.0.0.1") &&
              make_pki("named", "DNS:cache.example");
  CHECK_MSG(made, "openssl could not make the test certificates");
  RUN(url_checks);
  if (made) {
    RUN(stores_and_loads_over_tls);
    RUN(wrong_host_refused);
    RUN(client_certificate);
  }
  remove_tree(pki);
  return TEST_REPORT();
}
