/* Compile leases in a shared Redis. One planted (set with no expiry by someone who will never
 * compile) costs a fleet one bounded wait, not a herd: eight processes missing the same entry
 * wait wait_ms for the planted holder, then exactly one takes the lease over (atomically:
 * only while the planted value is still there) and compiles for 150 ms, and the other seven
 * wait for its entry and load it. One held by a compile longer than lease_ms is renewed: a
 * process arriving after lease_ms has passed three times still finds it held and loads the
 * holder's entry rather than compiling too. The compiles are counted in memory the processes
 * share. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache.h"
#include "cache/remote_internal.h"
#include "redis_test_util.h"
#include "test.h"

enum { PROCESSES = 8 };

static atomic_int *compiles; /* shared by the processes */
static int compile_ms = 150;
static const char value_text[] = "the compiled value";

static void *compile(void *ctx, hlo_diag *diag) {
  (void)ctx, (void)diag;
  atomic_fetch_add(compiles, 1);
  struct timespec t = {compile_ms / 1000, (long)(compile_ms % 1000) * 1000000L};
  while (nanosleep(&t, &t) != 0) {
  }
  return strdup(value_text);
}

static hlo_status serialize(void *ctx, const void *value, void **bytes, size_t *len, hlo_diag *diag) {
  (void)ctx, (void)diag;
  *len = strlen(value) + 1;
  *bytes = strdup(value);
  return HLO_OK;
}

static void *deserialize(void *ctx, const void *bytes, size_t len, hlo_diag *diag) {
  (void)ctx, (void)diag;
  return len && ((const char *)bytes)[len - 1] == '\0' ? strdup(bytes) : NULL;
}

static const cache_key key = {.lo = 0x1234, .hi = 0x5678};
static const char fingerprint[] = "backend=test/1 options=";
static const char config_namespace[] = "lease-test";

/* One process: gets or compiles the value; exits 0 when it is right. */
static int one_process(const char *url) {
  cache_remote_config config;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  if (cache_remote_parse_url(url, &config, &diag) != HLO_OK) return 2;
  cache_remote *remote = cache_remote_open(&config, NULL, &diag);
  if (!remote) return 3;
  cache_codec codec = {.compile = compile, .serialize = serialize, .deserialize = deserialize};
  cache_origin origin;
  char *value = cache_tiers_get_or_compile(NULL, remote, key, fingerprint, &codec, &origin, NULL, &diag);
  int status = value && strcmp(value, value_text) == 0 ? 0 : 4;
  free(value);
  cache_remote_close(remote);
  return status;
}

static void planted_lease_compiles_once(void) {
  redis_server s;
  if (!redis_start(&s, NULL, NULL)) {
    CHECK_MSG(false, "redis-server did not start");
    return;
  }
  compiles = mmap(NULL, sizeof *compiles, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  atomic_store(compiles, 0);
  char url[160], name[REMOTE_KEY_MAX];
  redis_url(&s, NULL, "wait_ms=1000&lease_ms=10000&namespace=lease-test", url, sizeof url);
  remote_lease_key(config_namespace, key, fingerprint, name);
  redisContext *c = redis_client(&s, NULL);
  redisReply *r = c ? redisCommand(c, "SET %s planted-by-someone-else", name) : NULL; /* no expiry */
  CHECK(r && r->type == REDIS_REPLY_STATUS);
  if (r) freeReplyObject(r);
  pid_t pids[PROCESSES];
  for (int i = 0; i < PROCESSES; i++) {
    pids[i] = fork();
    if (pids[i] == 0) _exit(one_process(url));
  }
  for (int i = 0; i < PROCESSES; i++) {
    int status = -1;
    waitpid(pids[i], &status, 0);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "process %d: status %d", i, status);
  }
  CHECK_EQ_INT(atomic_load(compiles), 1);
  /* the lease was released after the put: nothing is left held */
  r = c ? redisCommand(c, "EXISTS %s", name) : NULL;
  CHECK(r && r->type == REDIS_REPLY_INTEGER && r->integer == 0);
  if (r) freeReplyObject(r);
  if (c) redisFree(c);
  munmap(compiles, sizeof *compiles);
  redis_stop(&s);
}

/* Whether the lease key exists. */
static bool lease_exists(redisContext *c, const char *name) {
  redisReply *r = redisCommand(c, "EXISTS %s", name);
  bool there = r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
  if (r) freeReplyObject(r);
  return there;
}

static void long_compile_keeps_its_lease(void) {
  redis_server s;
  if (!redis_start(&s, NULL, NULL)) {
    CHECK_MSG(false, "redis-server did not start");
    return;
  }
  compiles = mmap(NULL, sizeof *compiles, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  atomic_store(compiles, 0);
  compile_ms = 1500; /* five times lease_ms */
  char url[160], name[REMOTE_KEY_MAX];
  redis_url(&s, NULL, "wait_ms=20000&lease_ms=300&namespace=lease-test", url, sizeof url);
  remote_lease_key(config_namespace, key, fingerprint, name);
  redisContext *c = redis_client(&s, NULL);
  pid_t first = fork();
  if (first == 0) _exit(one_process(url));
  /* the first process takes the lease, then compiles; three lease_ms later the second comes */
  while (c && !lease_exists(c, name) && atomic_load(compiles) == 0) redis_sleep_ms(5);
  redis_sleep_ms(900);
  pid_t second = fork();
  if (second == 0) _exit(one_process(url));
  pid_t pids[2] = {first, second};
  for (int i = 0; i < 2; i++) {
    int status = -1;
    waitpid(pids[i], &status, 0);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "process %d: status %d", i, status);
  }
  CHECK_EQ_INT(atomic_load(compiles), 1);
  CHECK(c && !lease_exists(c, name)); /* released after the put, renewals stopped */
  if (c) redisFree(c);
  munmap(compiles, sizeof *compiles);
  compile_ms = 150;
  redis_stop(&s);
}

int main(void) {
  RUN(planted_lease_compiles_once);
  RUN(long_compile_keeps_its_lease);
  return TEST_REPORT();
}
