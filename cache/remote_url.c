/* The remote tier's URL: redis://[user:password@]host[:port][/db][?query] or
 * unix://[user:password@]/path[?query], into a cache_remote_config. Messages name what is
 * wrong and never echo the user part, where a password may be. */
#include <ctype.h>
#include <errno.h>
#include <pwd.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache.h"

static bool namespace_char(char c) {
  return isalnum((unsigned char)c) || c == '.' || c == '_' || c == '-';
}

/* The default namespace: the effective user's name (characters outside the namespace's own
 * made '_'), or "uid<N>" when the user has no name. */
static void user_namespace(char out[CACHE_REMOTE_NAMESPACE_MAX]) {
  struct passwd entry, *found = NULL;
  char buf[1024];
  uid_t uid = geteuid();
  if (getpwuid_r(uid, &entry, buf, sizeof buf, &found) != 0 || !found || !found->pw_name[0]) {
    snprintf(out, CACHE_REMOTE_NAMESPACE_MAX, "uid%lu", (unsigned long)uid);
    return;
  }
  snprintf(out, CACHE_REMOTE_NAMESPACE_MAX, "%s", found->pw_name);
  for (char *c = out; *c; c++)
    if (!namespace_char(*c)) *c = '_';
}

static void defaults(cache_remote_config *c) {
  memset(c, 0, sizeof *c);
  c->port = 6379;
  c->connect_timeout_ms = 250;
  c->timeout_ms = 250;
  c->lease_ms = 10000;
  c->wait_ms = 10000;
  c->rest_ms = 30000;
  c->failures_before_rest = 3;
  c->ttl_s = 7 * 24 * 3600;
  c->max_entry_bytes = 256 << 20;
  user_namespace(c->namespace_name);
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = (char)tolower((unsigned char)c);
  return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Copies text[0, len) into out, %XX decoded; false when malformed or too long. */
static bool decode(const char *text, size_t len, char *out, size_t size) {
  size_t n = 0;
  for (size_t i = 0; i < len; i++) {
    char c = text[i];
    if (c == '%') {
      int hi = i + 2 < len ? hex_value(text[i + 1]) : -1, lo = i + 2 < len ? hex_value(text[i + 2]) : -1;
      if (hi < 0 || lo < 0) return false;
      c = (char)(hi * 16 + lo);
      i += 2;
    }
    if (c == '\0' || n + 1 >= size) return false;
    out[n++] = c;
  }
  out[n] = '\0';
  return true;
}

/* A whole decimal number in [low, high]. */
static bool number(const char *text, size_t len, long low, long high, int *out) {
  char buf[24];
  if (len == 0 || len >= sizeof buf) return false;
  memcpy(buf, text, len);
  buf[len] = '\0';
  for (size_t i = 0; i < len; i++)
    if (!isdigit((unsigned char)buf[i])) return false;
  errno = 0;
  long v = strtol(buf, NULL, 10);
  if (errno || v < low || v > high) return false;
  *out = (int)v;
  return true;
}

static hlo_status user_part(const char *text, size_t len, cache_remote_config *c, hlo_diag *diag) {
  const char *colon = memchr(text, ':', len);
  if (!colon)
    return hlo_diag_set(diag, HLO_ERR_INPUT, "cache URL: the part before '@' must be user:password or :password");
  size_t user_len = (size_t)(colon - text);
  if (!decode(text, user_len, c->user, sizeof c->user) ||
      !decode(colon + 1, len - user_len - 1, c->password, sizeof c->password) || !c->password[0])
    return hlo_diag_set(diag, HLO_ERR_INPUT,
                        "cache URL: the user or password is empty, too long or badly %%-encoded");
  return HLO_OK;
}

/* tls_ca, tls_cert, tls_key: a file's path, %-decoded. */
static hlo_status query_path(const char *name, size_t name_len, const char *value, size_t len, cache_remote_config *c,
                             bool *known, hlo_diag *diag) {
  static const struct {
    const char *name;
    size_t offset;
  } paths[] = {
      {"tls_ca", offsetof(cache_remote_config, tls_ca)},
      {"tls_cert", offsetof(cache_remote_config, tls_cert)},
      {"tls_key", offsetof(cache_remote_config, tls_key)},
  };
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
    if (strlen(paths[i].name) != name_len || strncmp(name, paths[i].name, name_len) != 0) continue;
    *known = true;
    if (len == 0 || !decode(value, len, (char *)c + paths[i].offset, CACHE_REMOTE_TEXT_MAX))
      return hlo_diag_set(diag, HLO_ERR_INPUT, "cache URL: %s is empty, too long or badly %%-encoded", paths[i].name);
  }
  return HLO_OK;
}

/* namespace=NAME and unsigned=0|1, the query's two names that are not bounds. */
static hlo_status query_text(const char *name, size_t name_len, const char *value, size_t len, cache_remote_config *c,
                             bool *known, hlo_diag *diag) {
  char text[CACHE_REMOTE_NAMESPACE_MAX];
  if (query_path(name, name_len, value, len, c, known, diag) != HLO_OK) return diag->status;
  if (*known) return HLO_OK;
  if (name_len == 9 && strncmp(name, "namespace", 9) == 0) {
    *known = true;
    if (!decode(value, len, text, sizeof text))
      return hlo_diag_set(diag, HLO_ERR_INPUT, "cache URL: namespace is empty, too long or badly %%-encoded");
    return cache_remote_set_namespace(c, text, diag);
  }
  if (name_len == 8 && strncmp(name, "unsigned", 8) == 0) {
    *known = true;
    if (len != 1 || (value[0] != '0' && value[0] != '1'))
      return hlo_diag_set(diag, HLO_ERR_INPUT, "cache URL: unsigned wants 0 or 1");
    c->allow_unsigned = value[0] == '1';
  }
  return HLO_OK;
}

static hlo_status query(const char *text, cache_remote_config *c, hlo_diag *diag) {
  static const struct {
    const char *name;
    size_t offset;
    long low, high;
  } names[] = {
      {"connect_timeout_ms", offsetof(cache_remote_config, connect_timeout_ms), 1, 600000},
      {"timeout_ms", offsetof(cache_remote_config, timeout_ms), 1, 600000},
      {"lease_ms", offsetof(cache_remote_config, lease_ms), 1, 3600000},
      {"wait_ms", offsetof(cache_remote_config, wait_ms), 0, 3600000},
      {"rest_ms", offsetof(cache_remote_config, rest_ms), 0, 3600000},
      {"db", offsetof(cache_remote_config, db), 0, 1 << 30},
      {"ttl_s", offsetof(cache_remote_config, ttl_s), 0, 1 << 30},
      {"max_entry_bytes", offsetof(cache_remote_config, max_entry_bytes), 1, 512 << 20},
  };
  while (*text) {
    size_t len = strcspn(text, "&");
    const char *eq = memchr(text, '=', len);
    size_t name_len = eq ? (size_t)(eq - text) : len;
    bool known = false;
    if (eq && query_text(text, name_len, eq + 1, len - name_len - 1, c, &known, diag) != HLO_OK) return diag->status;
    for (size_t i = 0; eq && i < sizeof names / sizeof names[0]; i++) {
      if (strlen(names[i].name) != name_len || strncmp(text, names[i].name, name_len) != 0) continue;
      known = true;
      int *field = (int *)((char *)c + names[i].offset);
      if (!number(eq + 1, len - name_len - 1, names[i].low, names[i].high, field))
        return hlo_diag_set(diag, HLO_ERR_INPUT, "cache URL: %s wants a whole number from %ld to %ld",
                            names[i].name, names[i].low, names[i].high);
    }
    if (!known)
      return hlo_diag_set(diag, HLO_ERR_INPUT,
                          "cache URL: unknown query parameter '%.*s' (connect_timeout_ms, timeout_ms, lease_ms, "
                          "wait_ms, rest_ms, db, namespace, ttl_s, max_entry_bytes, unsigned, tls_ca, tls_cert, "
                          "tls_key)",
                          (int)(name_len < 64 ? name_len : 64), text);
    text += len;
    if (*text == '&') text++;
  }
  return HLO_OK;
}

/* host[:port][/db], or [v6]:port. */
static hlo_status host_part(const char *text, size_t len, cache_remote_config *c, hlo_diag *diag) {
  const char *slash = memchr(text, '/', len);
  size_t host_len = slash ? (size_t)(slash - text) : len;
  if (slash && !number(slash + 1, len - host_len - 1, 0, 1 << 30, &c->db))
    return hlo_diag_set(diag, HLO_ERR_INPUT, "cache URL: the database after '/' must be a whole number");
  const char *port = NULL, *name = text;
  size_t name_len = host_len;
  if (host_len && text[0] == '[') {
    const char *close = memchr(text, ']', host_len);
    if (!close) return hlo_diag_set(diag, HLO_ERR_INPUT, "cache URL: '[' without ']' in the host");
    name = text + 1;
    name_len = (size_t)(close - text - 1);
    if (close + 1 < text + host_len) {
      if (close[1] != ':') return hlo_diag_set(diag, HLO_ERR_INPUT, "cache URL: want [address]:port");
      port = close + 2;
    }
  } else {
    const char *colon = memchr(text, ':', host_len);
    if (colon) {
      name_len = (size_t)(colon - text);
      port = colon + 1;
    }
  }
  if (port && !number(port, (size_t)(text + host_len - port), 1, 65535, &c->port))
    return hlo_diag_set(diag, HLO_ERR_INPUT, "cache URL: the port must be a number from 1 to 65535");
  if (name_len == 0 || name_len >= sizeof c->host)
    return hlo_diag_set(diag, HLO_ERR_INPUT, "cache URL: the host is empty or too long");
  memcpy(c->host, name, name_len);
  c->host[name_len] = '\0';
  return HLO_OK;
}

static void show(cache_remote_config *c) {
  const char *auth = c->password[0] ? "***@" : "";
  if (c->unix_socket) snprintf(c->shown, sizeof c->shown, "unix://%s%s", auth, c->host);
  else if (strchr(c->host, ':'))
    snprintf(c->shown, sizeof c->shown, "%s://%s[%s]:%d/%d", c->tls ? "rediss" : "redis", auth, c->host, c->port, c->db);
  else snprintf(c->shown, sizeof c->shown, "%s://%s%s:%d/%d", c->tls ? "rediss" : "redis", auth, c->host, c->port, c->db);
}

hlo_status cache_remote_set_namespace(cache_remote_config *c, const char *name, hlo_diag *diag) {
  size_t len = strlen(name);
  bool ok = len > 0 && len < sizeof c->namespace_name;
  for (size_t i = 0; ok && i < len; i++) ok = namespace_char(name[i]);
  if (!ok)
    return hlo_diag_set(diag, HLO_ERR_INPUT,
                        "cache namespace '%.64s': want 1 to %d letters, digits, '.', '_' or '-'", name,
                        CACHE_REMOTE_NAMESPACE_MAX - 1);
  memcpy(c->namespace_name, name, len + 1);
  return HLO_OK;
}

hlo_status cache_remote_set_password(cache_remote_config *c, const char *password, hlo_diag *diag) {
  size_t len = strlen(password);
  if (len == 0 || len >= sizeof c->password)
    return hlo_diag_set(diag, HLO_ERR_INPUT, "cache password: empty or longer than %d bytes",
                        CACHE_REMOTE_TEXT_MAX - 1);
  memcpy(c->password, password, len + 1);
  show(c);
  return HLO_OK;
}

hlo_status cache_remote_parse_url(const char *url, cache_remote_config *c, hlo_diag *diag) {
  defaults(c);
  static const char redis[] = "redis://", rediss[] = "rediss://", unix_[] = "unix://";
  const char *rest;
  if (strncmp(url, redis, sizeof redis - 1) == 0) {
    rest = url + sizeof redis - 1;
  } else if (strncmp(url, rediss, sizeof rediss - 1) == 0) {
    rest = url + sizeof rediss - 1;
    c->tls = true;
  } else if (strncmp(url, unix_, sizeof unix_ - 1) == 0) {
    rest = url + sizeof unix_ - 1;
    c->unix_socket = true;
  } else {
    return hlo_diag_set(diag, HLO_ERR_INPUT,
                        "cache URL: want redis[s]://[user:password@]host[:port][/db] or unix:///path/to.sock");
  }
  size_t len = strcspn(rest, "?");
  hlo_status status = HLO_OK;
  /* The last '@' ends the user part: an unencoded password may hold '@' itself. */
  const char *at = NULL;
  for (const char *p = rest; p < rest + len; p++)
    if (*p == '@') at = p;
  if (at) status = user_part(rest, (size_t)(at - rest), c, diag);
  const char *where = at ? at + 1 : rest;
  size_t where_len = (size_t)(rest + len - where);
  if (status == HLO_OK && c->unix_socket) {
    if (where_len == 0 || where[0] != '/' || where_len >= sizeof c->host)
      status = hlo_diag_set(diag, HLO_ERR_INPUT, "cache URL: unix:// wants an absolute socket path (unix:///path)");
    else memcpy(c->host, where, where_len), c->host[where_len] = '\0';
  } else if (status == HLO_OK) {
    status = host_part(where, where_len, c, diag);
  }
  if (status == HLO_OK && rest[len] == '?') status = query(rest + len + 1, c, diag);
  if (status == HLO_OK && !c->tls && (c->tls_ca[0] || c->tls_cert[0] || c->tls_key[0]))
    status = hlo_diag_set(diag, HLO_ERR_INPUT, "cache URL: tls_ca, tls_cert and tls_key need rediss://");
  if (status == HLO_OK && !c->tls_cert[0] != !c->tls_key[0])
    status = hlo_diag_set(diag, HLO_ERR_INPUT, "cache URL: tls_cert and tls_key go together");
  if (status == HLO_OK) show(c);
  return status;
}
