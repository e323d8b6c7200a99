/* The remote tier (promises in cache.h): the connection made on first use (and refused when
 * the server is a Cluster node or a Sentinel), the rest after repeated failures, warnings once
 * per kind, and the entry calls get, put and the lease.
 *
 * fork: a child must not talk over its parent's connection (their commands and answers would
 * interleave on one socket), nor find the lock held by a thread that the child does not have.
 * fork waits for each tier's command in flight to end (it takes every lock: at most
 * timeout_ms); the child then closes its copy of the socket, so its first call connects
 * afresh, and the parent goes on with its own (pthread_atfork handlers). */
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "remote_internal.h"

struct cache_remote {
  cache_remote_config config; /* its password kept for reconnecting, zeroed at close */
  unsigned char *secret;
  size_t secret_len;
  bool off;                /* no secret and no unsigned=1: nothing read or written */
  atomic_bool unsupported; /* the server is a Cluster node or a Sentinel */
  pthread_mutex_t lock; /* conn, failures_in_a_row, resting_until */
  struct cache_remote *next_open, *prev_open; /* every tier, for fork (under open_lock) */
  remote_conn conn;
  int failures_in_a_row;
  double resting_until; /* seconds on the monotonic clock */
  atomic_uint_fast64_t hits, misses, writes, rejected, failures, rests, skipped, lease_waits, wait_timeouts, oversized,
      refused;
};

/* ---- warnings, once per kind per process ---- */

typedef enum warning_kind {
  WARN_UNAVAILABLE,
  WARN_AUTH,
  WARN_REFUSED,
  WARN_OFF,
  WARN_MODE,
  WARN_TOO_BIG,
  WARN_KIND_COUNT
} warning_kind;
static atomic_bool warned[WARN_KIND_COUNT];
static atomic_bool warned_entry[CACHE_DISK_PROBLEM_COUNT];

static void warn(atomic_bool *flag, const cache_remote *remote, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
static void warn(atomic_bool *flag, const cache_remote *remote, const char *format, ...) {
  if (atomic_exchange(flag, true)) return;
  char line[1024];
  va_list args;
  va_start(args, format);
  vsnprintf(line, sizeof line, format, args);
  va_end(args);
  /* One fprintf so lines from racing threads do not interleave. */
  fprintf(stderr, "latch: warning: compile cache: remote %s: %s (further warnings of this kind are not shown)\n",
          remote->config.shown, line);
}

void cache_remote_reset_warnings(void) {
  for (int i = 0; i < WARN_KIND_COUNT; i++) atomic_store(&warned[i], false);
  for (int i = 0; i < CACHE_DISK_PROBLEM_COUNT; i++) atomic_store(&warned_entry[i], false);
}

void remote_warn_entry(cache_remote *remote, const char *name, cache_disk_problem problem) {
  atomic_fetch_add(&remote->rejected, 1);
  if ((unsigned)problem < CACHE_DISK_PROBLEM_COUNT)
    warn(&warned_entry[problem], remote, "%s: %s; treated as a miss", name, cache_disk_problem_name(problem));
}

/* ---- fork ---- */

static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static cache_remote *open_remotes;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void fork_prepare(void) {
  pthread_mutex_lock(&open_lock);
  for (cache_remote *r = open_remotes; r; r = r->next_open) pthread_mutex_lock(&r->lock);
}

static void fork_parent(void) {
  for (cache_remote *r = open_remotes; r; r = r->next_open) pthread_mutex_unlock(&r->lock);
  pthread_mutex_unlock(&open_lock);
}

static void fork_child(void) {
  for (cache_remote *r = open_remotes; r; r = r->next_open) {
    remote_conn_close(&r->conn); /* the child's copy of the socket; the parent's stays open */
    r->failures_in_a_row = 0;
    r->resting_until = 0;
    pthread_mutex_unlock(&r->lock);
  }
  pthread_mutex_unlock(&open_lock);
}

static void fork_setup(void) {
  pthread_atfork(fork_prepare, fork_parent, fork_child);
}

static void list_open(cache_remote *remote) {
  pthread_once(&fork_once, fork_setup);
  pthread_mutex_lock(&open_lock);
  remote->next_open = open_remotes;
  if (open_remotes) open_remotes->prev_open = remote;
  open_remotes = remote;
  pthread_mutex_unlock(&open_lock);
}

static void unlist_open(cache_remote *remote) {
  pthread_mutex_lock(&open_lock);
  if (remote->prev_open) remote->prev_open->next_open = remote->next_open;
  else open_remotes = remote->next_open;
  if (remote->next_open) remote->next_open->prev_open = remote->prev_open;
  pthread_mutex_unlock(&open_lock);
}

/* ---- open, close ---- */

cache_remote *cache_remote_open(cache_remote_config *config, const char *secret, hlo_diag *diag) {
  cache_remote *remote = hlo_calloc(1, sizeof *remote);
  size_t secret_len = secret ? strlen(secret) : 0;
  if (remote && secret_len && (remote->secret = hlo_malloc(secret_len))) memcpy(remote->secret, secret, secret_len);
  if (remote) remote->config = *config;
  explicit_bzero(config->password, sizeof config->password);
  if (!remote || (secret_len && !remote->secret)) {
    if (remote) explicit_bzero(remote->config.password, sizeof remote->config.password);
    free(remote);
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory opening the remote compile cache");
    return NULL;
  }
  remote->secret_len = secret_len;
  remote->off = secret_len == 0 && !remote->config.allow_unsigned;
  remote->conn.fd = -1;
  pthread_mutex_init(&remote->lock, NULL);
  list_open(remote);
  return remote;
}

void cache_remote_close(cache_remote *remote) {
  if (!remote) return;
  unlist_open(remote);
  remote_conn_close(&remote->conn);
  pthread_mutex_destroy(&remote->lock);
  if (remote->secret) explicit_bzero(remote->secret, remote->secret_len);
  explicit_bzero(remote->config.password, sizeof remote->config.password);
  free(remote->secret);
  free(remote);
}

const char *cache_remote_name(const cache_remote *remote) { return remote->config.shown; }

const cache_remote_config *cache_remote_config_of(const cache_remote *remote) { return &remote->config; }

const unsigned char *remote_secret(const cache_remote *remote, size_t *len) {
  *len = remote->secret_len;
  return remote->secret;
}

void cache_remote_get_stats(const cache_remote *remote, cache_remote_stats *stats) {
  cache_remote *r = (cache_remote *)remote;
  stats->hits = atomic_load(&r->hits);
  stats->misses = atomic_load(&r->misses);
  stats->writes = atomic_load(&r->writes);
  stats->rejected = atomic_load(&r->rejected);
  stats->failures = atomic_load(&r->failures);
  stats->rests = atomic_load(&r->rests);
  stats->skipped = atomic_load(&r->skipped);
  stats->lease_waits = atomic_load(&r->lease_waits);
  stats->wait_timeouts = atomic_load(&r->wait_timeouts);
  stats->oversized = atomic_load(&r->oversized);
  stats->refused = atomic_load(&r->refused);
}

/* ---- one command, with the rest and the warnings ---- */

/* A failure of the server or the link (lock held): drop the connection; after enough in a
 * row, rest. quiet: a warning of its own kind was given already. */
static void failed(cache_remote *remote, const char *why, bool quiet) {
  remote_conn_close(&remote->conn);
  atomic_fetch_add(&remote->failures, 1);
  if (!quiet)
    warn(&warned[WARN_UNAVAILABLE], remote, "%s; going on with the local tiers (after %d failures in a row the remote "
       "tier rests for %d ms)", why, remote->config.failures_before_rest, remote->config.rest_ms);
  if (++remote->failures_in_a_row >= remote->config.failures_before_rest) {
    remote->failures_in_a_row = 0;
    remote->resting_until = cache_now_seconds() + remote->config.rest_ms * 1e-3;
    atomic_fetch_add(&remote->rests, 1);
  }
}

/* An error reply to AUTH or SELECT, or a refusal for want of it: the connection is useless. */
static bool is_auth_error(const redisReply *reply) {
  static const char *const prefixes[] = {"NOAUTH", "WRONGPASS", "ERR invalid password", "ERR AUTH", "ERR Client sent AUTH"};
  for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
    if (reply->len >= strlen(prefixes[i]) && strncmp(reply->str, prefixes[i], strlen(prefixes[i])) == 0) return true;
  return false;
}

/* One command of the handshake (lock held); false after failed(). */
static bool handshake_step(cache_remote *remote, int argc, const char **argv) {
  char why[200];
  redisReply *reply = NULL;
  remote_fail fail = remote_conn_call(&remote->conn, argc, argv, NULL, remote->config.connect_timeout_ms, &reply, why,
                                      sizeof why);
  bool refused = fail == REMOTE_OK && reply->type == REDIS_REPLY_ERROR;
  if (refused && strcmp(argv[0], "AUTH") == 0) {
    warn(&warned[WARN_AUTH], remote, "authentication failed (%.60s); check the user and password", reply->str);
    snprintf(why, sizeof why, "authentication failed");
  } else if (refused) {
    snprintf(why, sizeof why, "%s refused (%.60s)", argv[0], reply->str);
  }
  if (reply) freeReplyObject(reply);
  if (fail == REMOTE_OK && !refused) return true;
  failed(remote, why, refused && strcmp(argv[0], "AUTH") == 0);
  return false;
}

/* The server's mode from INFO ("standalone", "cluster", "sentinel"); false after failed(). A
 * Cluster node answers MOVED for most keys and a Sentinel holds no data: both are refused for
 * good, with one warning, rather than counted as failures key by key. */
static bool standalone(cache_remote *remote) {
  const char *argv[2] = {"INFO", "server"};
  char why[200], mode[32] = "";
  redisReply *reply = NULL;
  remote_fail fail = remote_conn_call(&remote->conn, 2, argv, NULL, remote->config.connect_timeout_ms, &reply, why,
                                      sizeof why);
  if (fail == REMOTE_OK && (reply->type == REDIS_REPLY_STRING || reply->type == REDIS_REPLY_STATUS)) {
    const char *at = strstr(reply->str, "redis_mode:");
    if (at) snprintf(mode, sizeof mode, "%.*s", (int)strcspn(at + 11, "\r\n"), at + 11);
  }
  if (reply) freeReplyObject(reply);
  if (fail != REMOTE_OK) {
    failed(remote, why, false);
    return false;
  }
  if (strcmp(mode, "cluster") != 0 && strcmp(mode, "sentinel") != 0) return true;
  atomic_store(&remote->unsupported, true);
  warn(&warned[WARN_MODE], remote, "the server is a Redis %s; the remote tier wants one standalone server (for a "
       "cluster, a proxy that presents it as one), so it is off", strcmp(mode, "cluster") == 0 ? "Cluster node" : "Sentinel");
  remote_conn_close(&remote->conn);
  return false;
}

/* AUTH, the server's mode and SELECT on a new connection (lock held). */
static bool handshake(cache_remote *remote) {
  const cache_remote_config *c = &remote->config;
  if (c->password[0]) {
    const char *argv[3];
    int argc = 0;
    argv[argc++] = "AUTH";
    if (c->user[0]) argv[argc++] = c->user;
    argv[argc++] = c->password;
    if (!handshake_step(remote, argc, argv)) return false;
  }
  if (!standalone(remote)) return false;
  if (c->db) {
    char db[16];
    snprintf(db, sizeof db, "%d", c->db);
    const char *argv[2] = {"SELECT", db};
    if (!handshake_step(remote, 2, argv)) return false;
  }
  return true;
}

/* The stack below the caller, where the handshake's frames were: they may hold the password
 * in vector registers saved there (the dynamic linker saves them when it binds a symbol, and
 * copies of it passed through them). Overwritten, as crypto libraries burn their stacks: as
 * deep as a command goes (read_reply's 64 KiB buffer and what it calls). */
__attribute__((noinline)) static void scrub_stack(void) {
  unsigned char area[80 << 10];
  explicit_bzero(area, sizeof area);
  __asm__ __volatile__("" : : "r"(area) : "memory");
}

/* Connected, or false (lock held). */
static bool connected(cache_remote *remote) {
  if (remote->conn.fd >= 0) return true;
  char why[200];
  remote_fail fail = remote_conn_open(&remote->conn, &remote->config, remote->config.connect_timeout_ms, why, sizeof why);
  if (fail != REMOTE_OK) {
    failed(remote, why, false);
    return false;
  }
  bool ok = handshake(remote);
  if (remote->config.password[0]) scrub_stack();
  return ok;
}

bool remote_call(cache_remote *remote, int argc, const char **argv, const size_t *lens, redisReply **reply) {
  *reply = NULL;
  if (atomic_load(&remote->unsupported)) {
    atomic_fetch_add(&remote->skipped, 1);
    return false;
  }
  pthread_mutex_lock(&remote->lock);
  if (remote->resting_until > 0 && cache_now_seconds() < remote->resting_until) {
    pthread_mutex_unlock(&remote->lock);
    atomic_fetch_add(&remote->skipped, 1);
    return false;
  }
  remote->resting_until = 0;
  bool ok = connected(remote);
  if (ok) {
    char why[200];
    remote_fail fail = remote_conn_call(&remote->conn, argc, argv, lens, remote->config.timeout_ms, reply, why, sizeof why);
    if (fail != REMOTE_OK) {
      failed(remote, why, false);
      ok = false;
    } else if ((*reply)->type == REDIS_REPLY_ERROR && is_auth_error(*reply)) {
      warn(&warned[WARN_AUTH], remote, "the server wants authentication (%.60s)", (*reply)->str);
      failed(remote, "authentication needed", true);
      ok = false;
    } else if ((*reply)->type == REDIS_REPLY_ERROR) {
      /* The server answers but refuses (out of memory, read-only replica, busy): no rest,
       * the next call may well work. */
      warn(&warned[WARN_REFUSED], remote, "%s refused: %.120s", argv[0], (*reply)->str);
      atomic_fetch_add(&remote->refused, 1);
      remote->failures_in_a_row = 0;
      ok = false;
    } else {
      remote->failures_in_a_row = 0;
    }
  }
  pthread_mutex_unlock(&remote->lock);
  if (!ok && *reply) {
    freeReplyObject(*reply);
    *reply = NULL;
  }
  return ok;
}

/* ---- entries ---- */

/* Whether the tier is off for want of a secret (warned once, when first used). */
static bool off(cache_remote *remote) {
  if (remote->off)
    warn(&warned[WARN_OFF], remote, "no LATCH_CACHE_SECRET, and unsigned entries are refused (anyone who can write "
         "to the server could feed this process code): the remote tier is off; set LATCH_CACHE_SECRET, or add "
         "unsigned=1 to the URL's query to use unsigned entries");
  return remote->off;
}

/* A hit keeps the entry ttl_s longer: entries in use stay, an old build's expire. */
static void refresh(cache_remote *remote, const char *name) {
  if (remote->config.ttl_s <= 0) return;
  char seconds[16];
  snprintf(seconds, sizeof seconds, "%d", remote->config.ttl_s);
  const char *argv[3] = {"EXPIRE", name, seconds};
  redisReply *reply = NULL;
  if (remote_call(remote, 3, argv, NULL, &reply)) freeReplyObject(reply);
}

bool cache_remote_get(cache_remote *remote, cache_key key, const char *fingerprint, void **bytes, size_t *len) {
  if (off(remote)) {
    atomic_fetch_add(&remote->misses, 1);
    return false;
  }
  char name[REMOTE_KEY_MAX];
  remote_entry_key(remote->config.namespace_name, key, fingerprint, name);
  const char *argv[2] = {"GET", name};
  redisReply *reply = NULL;
  bool hit = false;
  if (remote_call(remote, 2, argv, NULL, &reply)) {
    if (reply->type == REDIS_REPLY_STRING) {
      cache_disk_entry_info *info = hlo_malloc(sizeof *info); /* 4 KiB of fingerprint: not on the stack */
      const unsigned char *payload = NULL;
      cache_disk_problem problem = info ? remote_entry_decode((const unsigned char *)reply->str, reply->len, &key,
                                                              fingerprint, remote->secret, remote->secret_len,
                                                              remote->config.allow_unsigned, info, &payload)
                                        : CACHE_DISK_READ_ERROR;
      if (problem == CACHE_DISK_OK) {
        *len = (size_t)info->payload_bytes;
        *bytes = hlo_malloc(*len ? *len : 1);
        if (*bytes) memcpy(*bytes, payload, *len);
        hit = *bytes != NULL;
      } else if (problem != CACHE_DISK_READ_ERROR) {
        remote_warn_entry(remote, name, problem);
      }
      free(info);
    } else if (reply->type != REDIS_REPLY_NIL) {
      remote_warn_entry(remote, name, CACHE_DISK_MAGIC);
    }
    freeReplyObject(reply);
  }
  if (hit) refresh(remote, name);
  atomic_fetch_add(hit ? &remote->hits : &remote->misses, 1);
  return hit;
}

bool cache_remote_put(cache_remote *remote, cache_key key, const char *fingerprint, const void *bytes, size_t len) {
  if (off(remote)) return false;
  char name[REMOTE_KEY_MAX];
  remote_entry_key(remote->config.namespace_name, key, fingerprint, name);
  if (len > (size_t)remote->config.max_entry_bytes) {
    atomic_fetch_add(&remote->oversized, 1);
    warn(&warned[WARN_TOO_BIG], remote, "%s: an entry of %zu bytes is over max_entry_bytes=%d; not written", name, len,
         remote->config.max_entry_bytes);
    return false;
  }
  size_t value_len = 0;
  unsigned char *value = remote_entry_encode(key, fingerprint, bytes, len, remote->secret, remote->secret_len, &value_len);
  if (!value) return false;
  char seconds[16];
  snprintf(seconds, sizeof seconds, "%d", remote->config.ttl_s);
  const char *argv[5] = {"SET", name, (const char *)value, "EX", seconds};
  size_t lens[5] = {3, strlen(name), value_len, 2, strlen(seconds)};
  redisReply *reply = NULL;
  bool ok = remote_call(remote, remote->config.ttl_s > 0 ? 5 : 3, argv, lens, &reply);
  free(value);
  if (reply) freeReplyObject(reply);
  if (ok) atomic_fetch_add(&remote->writes, 1);
  return ok;
}

void cache_remote_reject(cache_remote *remote, cache_key key, const char *fingerprint, cache_disk_problem problem) {
  char name[REMOTE_KEY_MAX];
  remote_entry_key(remote->config.namespace_name, key, fingerprint, name);
  remote_warn_entry(remote, name, problem);
}

/* ---- leases ---- */

static void new_token(char token[CACHE_LEASE_TOKEN]) {
  uint64_t r[2] = {0, 0};
  if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    r[0] = (uint64_t)now.tv_nsec * UINT64_C(0x9e3779b97f4a7c15) ^ (uint64_t)getpid();
    r[1] = (uint64_t)now.tv_sec ^ (uint64_t)(uintptr_t)token;
  }
  snprintf(token, CACHE_LEASE_TOKEN, "%016" PRIx64 "%016" PRIx64, r[0], r[1]);
}

cache_lease cache_remote_lease(cache_remote *remote, cache_key key, const char *fingerprint,
                               char token[CACHE_LEASE_TOKEN]) {
  if (off(remote)) return CACHE_LEASE_UNAVAILABLE;
  char name[REMOTE_KEY_MAX], ms[16];
  remote_lease_key(remote->config.namespace_name, key, fingerprint, name);
  new_token(token);
  snprintf(ms, sizeof ms, "%d", remote->config.lease_ms);
  const char *argv[6] = {"SET", name, token, "NX", "PX", ms};
  redisReply *reply = NULL;
  if (!remote_call(remote, 6, argv, NULL, &reply)) return CACHE_LEASE_UNAVAILABLE;
  cache_lease lease = reply->type == REDIS_REPLY_STATUS ? CACHE_LEASE_WON
                      : reply->type == REDIS_REPLY_NIL  ? CACHE_LEASE_HELD
                                                        : CACHE_LEASE_UNAVAILABLE;
  freeReplyObject(reply);
  return lease;
}

bool cache_remote_lease_holder(cache_remote *remote, cache_key key, const char *fingerprint,
                               char holder[CACHE_LEASE_TOKEN]) {
  char name[REMOTE_KEY_MAX];
  remote_lease_key(remote->config.namespace_name, key, fingerprint, name);
  const char *argv[3] = {"GETRANGE", name, "0"};
  char last[16];
  snprintf(last, sizeof last, "%d", CACHE_LEASE_TOKEN - 2);
  const char *args[4] = {argv[0], argv[1], argv[2], last};
  redisReply *reply = NULL;
  holder[0] = '\0';
  if (!remote_call(remote, 4, args, NULL, &reply)) return false;
  bool ok = reply->type == REDIS_REPLY_STRING;
  if (ok) snprintf(holder, CACHE_LEASE_TOKEN, "%.*s", (int)reply->len, reply->str);
  freeReplyObject(reply);
  return ok;
}

cache_lease cache_remote_take_over(cache_remote *remote, cache_key key, const char *fingerprint,
                                   const char holder[CACHE_LEASE_TOKEN], char token[CACHE_LEASE_TOKEN]) {
  /* The holder's value compared by its first bytes, as cache_remote_lease_holder read it. */
  static const char script[] =
      "local v = redis.call('getrange', KEYS[1], 0, tonumber(ARGV[4])) "
      "if v == ARGV[1] then redis.call('set', KEYS[1], ARGV[2], 'px', ARGV[3]) return 1 end return 0";
  char name[REMOTE_KEY_MAX], ms[16], last[16];
  remote_lease_key(remote->config.namespace_name, key, fingerprint, name);
  new_token(token);
  snprintf(ms, sizeof ms, "%d", remote->config.lease_ms);
  snprintf(last, sizeof last, "%d", CACHE_LEASE_TOKEN - 2);
  const char *argv[8] = {"EVAL", script, "1", name, holder, token, ms, last};
  redisReply *reply = NULL;
  if (!remote_call(remote, 8, argv, NULL, &reply)) return CACHE_LEASE_UNAVAILABLE;
  cache_lease lease = reply->type == REDIS_REPLY_INTEGER ? (reply->integer == 1 ? CACHE_LEASE_WON : CACHE_LEASE_HELD)
                                                         : CACHE_LEASE_UNAVAILABLE;
  freeReplyObject(reply);
  return lease;
}

void cache_remote_release(cache_remote *remote, cache_key key, const char *fingerprint,
                          const char token[CACHE_LEASE_TOKEN]) {
  /* Deleted only if still ours: a lease that expired may since belong to another process. */
  static const char script[] =
      "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0";
  char name[REMOTE_KEY_MAX];
  remote_lease_key(remote->config.namespace_name, key, fingerprint, name);
  const char *argv[5] = {"EVAL", script, "1", name, token};
  redisReply *reply = NULL;
  if (remote_call(remote, 5, argv, NULL, &reply)) freeReplyObject(reply);
}

bool cache_remote_renew(cache_remote *remote, cache_key key, const char *fingerprint,
                        const char token[CACHE_LEASE_TOKEN]) {
  static const char script[] =
      "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0";
  char name[REMOTE_KEY_MAX], ms[16];
  remote_lease_key(remote->config.namespace_name, key, fingerprint, name);
  snprintf(ms, sizeof ms, "%d", remote->config.lease_ms);
  const char *argv[6] = {"EVAL", script, "1", name, token, ms};
  redisReply *reply = NULL;
  if (!remote_call(remote, 6, argv, NULL, &reply)) return false;
  bool ours = reply->type == REDIS_REPLY_INTEGER && reply->integer == 1;
  freeReplyObject(reply);
  return ours;
}

void remote_count_wait(cache_remote *remote, bool timed_out) {
  atomic_fetch_add(timed_out ? &remote->wait_timeouts : &remote->lease_waits, 1);
}
