/* Get or compile through every tier (see cache.h): disk, then Redis, then a lease so that
 * one process of the fleet compiles while the others wait for its entry, then a compile saved
 * to both. The lease is renewed while the compile runs, so a compile longer than lease_ms
 * keeps it. Whatever the remote tier does, the caller gets its value: waiting is bounded, and
 * an answer that never comes means compiling here. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache.h"
#include "remote_internal.h"

static void sleep_ms(double ms) {
  struct timespec t = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)((ms - 1000.0 * (double)(time_t)(ms / 1000)) * 1e6)};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

/* The value of the remote entry, also written to disk; NULL on a miss. */
static void *load_remote(cache_disk *disk, cache_remote *remote, cache_key key, const char *fingerprint,
                         const cache_codec *codec) {
  void *bytes = NULL;
  size_t len = 0;
  if (!cache_remote_get(remote, key, fingerprint, &bytes, &len)) return NULL;
  void *value = cache_codec_value(codec, bytes, len);
  if (!value) cache_remote_reject(remote, key, fingerprint, CACHE_DISK_UNLOADABLE);
  else if (disk) cache_disk_put_copy(disk, key, fingerprint, bytes, len);
  free(bytes);
  return value;
}

/* Rounds of waiting, each up to wait_ms, for holders that take a stalled lease over: past
 * them this process compiles, whoever holds the lease. */
enum { WAIT_ROUNDS = 3 };

typedef enum wait_end { WAIT_ENTRY, WAIT_LEASE_FREE, WAIT_TIMED_OUT } wait_end;

/* One round: polls for the entry (2 ms, doubling to 50 ms) until wait_ms pass. Takes the
 * lease if it goes away without an entry (its holder failed or died): *won then says so. */
static wait_end wait_round(cache_disk *disk, cache_remote *remote, cache_key key, const char *fingerprint,
                           const cache_codec *codec, char token[CACHE_LEASE_TOKEN], bool *won, void **value) {
  double deadline = cache_now_seconds() + cache_remote_config_of(remote)->wait_ms * 1e-3, delay = 2;
  while (cache_now_seconds() < deadline) {
    sleep_ms(delay);
    delay = delay * 2 < 50 ? delay * 2 : 50;
    if ((*value = load_remote(disk, remote, key, fingerprint, codec))) return WAIT_ENTRY;
    cache_lease lease = cache_remote_lease(remote, key, fingerprint, token);
    if (lease != CACHE_LEASE_HELD) {
      *won = lease == CACHE_LEASE_WON;
      return WAIT_LEASE_FREE;
    }
  }
  return WAIT_TIMED_OUT;
}

/* Another process holds the lease: waits a round for its entry. If the same holder kept the
 * lease the whole round (stalled, or a lease planted by someone who will never compile), one
 * of the waiters takes it over, atomically, and compiles; the others wait another round for
 * that one's entry. *won says this process compiles; NULL when it must compile. */
static void *wait_for_entry(cache_disk *disk, cache_remote *remote, cache_key key, const char *fingerprint,
                            const cache_codec *codec, char token[CACHE_LEASE_TOKEN], bool *won) {
  char holder[CACHE_LEASE_TOKEN];
  void *value = NULL;
  for (int round = 0; round < WAIT_ROUNDS; round++) {
    if (!cache_remote_lease_holder(remote, key, fingerprint, holder)) break;
    wait_end end = wait_round(disk, remote, key, fingerprint, codec, token, won, &value);
    if (end != WAIT_TIMED_OUT) {
      remote_count_wait(remote, false);
      return value;
    }
    cache_lease lease = cache_remote_take_over(remote, key, fingerprint, holder, token);
    if (lease != CACHE_LEASE_HELD) { /* taken over, or no answer: compile here */
      *won = lease == CACHE_LEASE_WON;
      break;
    }
  }
  remote_count_wait(remote, true);
  return NULL;
}

/* ---- renewing the lease while the compile runs ---- */

typedef struct renewer {
  cache_remote *remote;
  cache_key key;
  const char *fingerprint;
  const char *token;
  pthread_mutex_t lock;
  pthread_cond_t wake; /* on the monotonic clock */
  bool stop, started;
  pthread_t thread;
} renewer;

/* Every third of lease_ms, the lease's expiry pushed lease_ms on, until told to stop (or the
 * lease is no longer ours: taken over after wait_ms, or the server forgot it). */
static void *renew_loop(void *arg) {
  renewer *r = arg;
  int period_ms = cache_remote_config_of(r->remote)->lease_ms / 3;
  if (period_ms < 1) period_ms = 1;
  pthread_mutex_lock(&r->lock);
  while (!r->stop) {
    struct timespec at;
    clock_gettime(CLOCK_MONOTONIC, &at);
    at.tv_sec += period_ms / 1000;
    at.tv_nsec += (long)(period_ms % 1000) * 1000000L;
    if (at.tv_nsec >= 1000000000L) at.tv_sec++, at.tv_nsec -= 1000000000L;
    while (!r->stop && pthread_cond_timedwait(&r->wake, &r->lock, &at) != ETIMEDOUT) {
    }
    if (r->stop) break;
    pthread_mutex_unlock(&r->lock);
    bool ours = cache_remote_renew(r->remote, r->key, r->fingerprint, r->token);
    pthread_mutex_lock(&r->lock);
    if (!ours) break;
  }
  pthread_mutex_unlock(&r->lock);
  return NULL;
}

/* Starts renewing; without a thread (none to be had) the lease simply expires as before. */
static void renew_start(renewer *r) {
  pthread_condattr_t attr;
  pthread_mutex_init(&r->lock, NULL);
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&r->wake, &attr);
  pthread_condattr_destroy(&attr);
  r->stop = false;
  r->started = pthread_create(&r->thread, NULL, renew_loop, r) == 0;
}

static void renew_stop(renewer *r) {
  pthread_mutex_lock(&r->lock);
  r->stop = true;
  pthread_cond_signal(&r->wake);
  pthread_mutex_unlock(&r->lock);
  if (r->started) pthread_join(r->thread, NULL);
  pthread_cond_destroy(&r->wake);
  pthread_mutex_destroy(&r->lock);
}

/* The compile, under a renewed lease when this process holds one. */
static void *compile(cache_remote *remote, bool won, cache_key key, const char *fingerprint, const char *token,
                     const cache_codec *codec, hlo_diag *diag) {
  if (!won) return codec->compile(codec->ctx, diag);
  renewer r = {.remote = remote, .key = key, .fingerprint = fingerprint, .token = token};
  renew_start(&r);
  void *value = codec->compile(codec->ctx, diag);
  renew_stop(&r);
  return value;
}

/* Serializes once for both tiers. */
static void save(cache_disk *disk, cache_remote *remote, cache_key key, const char *fingerprint,
                 const cache_codec *codec, const void *value) {
  size_t len = 0;
  void *bytes = cache_codec_bytes(codec, value, &len);
  if (!bytes) return;
  if (disk) cache_disk_put(disk, key, fingerprint, bytes, len);
  if (remote) cache_remote_put(remote, key, fingerprint, bytes, len);
  free(bytes);
}

void cache_tiers_replace(cache_disk *disk, cache_remote *remote, cache_key key, const char *fingerprint,
                         const cache_codec *codec, const void *value) {
  save(disk, remote, key, fingerprint, codec, value);
}

void *cache_tiers_get_or_compile(cache_disk *disk, cache_remote *remote, cache_key key, const char *fingerprint,
                                 const cache_codec *codec, cache_origin *origin, double *seconds, hlo_diag *diag) {
  double start = cache_now_seconds();
  cache_origin from = CACHE_ORIGIN_DISK;
  char token[CACHE_LEASE_TOKEN] = "";
  bool won = false;
  void *value = disk ? cache_disk_load(disk, key, fingerprint, codec) : NULL;
  if (!value && remote) {
    from = CACHE_ORIGIN_REMOTE;
    value = load_remote(disk, remote, key, fingerprint, codec);
    cache_lease lease = value ? CACHE_LEASE_UNAVAILABLE : cache_remote_lease(remote, key, fingerprint, token);
    won = lease == CACHE_LEASE_WON;
    if (lease == CACHE_LEASE_HELD) value = wait_for_entry(disk, remote, key, fingerprint, codec, token, &won);
    /* The lease may be free because its holder just finished: its entry is there then. */
    if (won) value = load_remote(disk, remote, key, fingerprint, codec);
  }
  if (!value) {
    from = CACHE_ORIGIN_COMPILED;
    value = compile(remote, won, key, fingerprint, token, codec, diag);
    if (value) save(disk, remote, key, fingerprint, codec, value);
  }
  if (won) cache_remote_release(remote, key, fingerprint, token);
  if (origin) *origin = from;
  if (seconds) *seconds = cache_now_seconds() - start;
  return value;
}
