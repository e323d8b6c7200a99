/* `latch run` through the compile cache and `latch cache`, run as a user runs them: a second
 * process loads instead of compiling and says so, with the same outputs; damaged entries,
 * a cache that cannot be written and LATCH_CACHE=off never change results; stats, ls, verify
 * and clear report and act on the directory. The binary is $LATCH_BIN, else $BUILD/latch, else
 * build/latch; the corpus is $LATCH_CORPUS, else ../shared/corpus/xla. */
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "redis_test_util.h"
#include "test.h"
#include "cli_util.h"

static char cache_dir[128];
static const char *corpus;

/* The output lines (shape, sums, hash) of the last run, to compare runs bit for bit. */
static void output_lines(char *out, size_t size) {
  out[0] = '\0';
  size_t len = 0;
  for (const char *line = strstr(cli_out, "output "); line; line = strstr(line + 1, "\noutput ")) {
    if (*line == '\n') line++;
    const char *end = strchr(line, '\n');
    size_t n = end ? (size_t)(end - line) : strlen(line);
    if (len + n + 2 > size) break;
    memcpy(out + len, line, n);
    len += n;
    out[len++] = '\n';
    out[len] = '\0';
  }
}

/* The one entry file in the cache directory, or "" */
static void only_entry(char *out, size_t size) {
  char command[512];
  snprintf(command, sizeof command, "ls '%s'/*.latch 2>/dev/null | head -n 1", cache_dir);
  FILE *p = popen(command, "r");
  out[0] = '\0';
  if (p && fgets(out, (int)size, p)) out[strcspn(out, "\n")] = '\0';
  if (p) pclose(p);
}

static void truncate_file(const char *path, long size) {
  CHECK(truncate(path, size) == 0);
}

static void usage(void) {
  CLI_CHECK(0, "", "--help");
  CLI_HAS(cli_out, "cache ACTION");
  CLI_CHECK(0, "", "cache --help");
  CLI_HAS(cli_out, "verify");
  CLI_HAS(cli_out, "--fix");
  CLI_HAS(cli_out, "LATCH_CACHE_MAX_BYTES");
  CLI_CHECK(0, "", "help cache");
  CLI_HAS(cli_out, "clear");
  CLI_CHECK(0, "", "run --help");
  CLI_HAS(cli_out, "--compile");
  CLI_HAS(cli_out, "LATCH_CACHE");
  CLI_CHECK(1, "", "cache");
  CLI_HAS(cli_err, "stats, ls, verify, clear, push or pull");
  CLI_CHECK(1, "", "cache frobnicate");
  CLI_CHECK(1, "", "cache stats --fix");
  CLI_CHECK(1, "", "cache ls --dir");
  CLI_CHECK(1, "", "run %s/add.hlo --compile --fp64", corpus);
  CLI_CHECK(1, "LATCH_CACHE=dsik", "run %s/add.hlo --compile", corpus);
  CLI_HAS(cli_err, "LATCH_CACHE='dsik'");
  CLI_CHECK(1, "LATCH_CACHE_MAX_BYTES=lots", "run %s/add.hlo --compile", corpus);
  CLI_HAS(cli_err, "LATCH_CACHE_MAX_BYTES");
}

static void warm_start(void) {
  char cold[4096], warm[4096], direct[4096];
  CLI_CHECK(0, "", "run %s/single_gemm_fusion.hlo --seed 2", corpus);
  output_lines(direct, sizeof direct);
  CLI_LACKS(cli_out, "cache:"); /* the direct path compiles nothing */

  CLI_CHECK(0, "", "run %s/single_gemm_fusion.hlo --seed 2 --compile", corpus);
  CLI_HAS(cli_out, "cache: 0 hits, 1 compile");
  CLI_HAS(cli_out, "saved");
  output_lines(cold, sizeof cold);
  CLI_CHECK(0, "", "run %s/single_gemm_fusion.hlo --seed 2 --compile --backend reference", corpus);
  CLI_HAS(cli_out, "loaded compiled graph from cache");
  CLI_HAS(cli_out, "cache: 1 hit, 0 compiles");
  output_lines(warm, sizeof warm);
  CHECK(cold[0] != '\0');
  CHECK_STR(warm, cold);
  CHECK_STR(cold, direct);
  /* another seed is another input, not another graph: still a hit */
  CLI_CHECK(0, "", "run %s/single_gemm_fusion.hlo --seed 3 --compile", corpus);
  CLI_HAS(cli_out, "cache: 1 hit, 0 compiles");

  CLI_CHECK(0, "", "cache stats");
  CLI_HAS(cli_out, "entries: 1");
  CLI_HAS(cli_out, cache_dir);
  CLI_HAS(cli_out, "limit: 1073741824");
  CLI_CHECK(0, "LATCH_CACHE_MAX_BYTES=2M", "cache stats --dir '%s'", cache_dir);
  CLI_HAS(cli_out, "limit: 2097152");
  CLI_CHECK(0, "", "cache ls");
  CLI_HAS(cli_out, "backend=reference/1");
  CLI_HAS(cli_out, "1 entry");
  CLI_CHECK(0, "", "cache verify");
  CLI_HAS(cli_out, "0 bad");
}

static void damaged_and_unwritable(void) {
  char entry[512], cold[4096], again[4096];
  CLI_CHECK(0, "", "run %s/add.hlo --compile", corpus);
  output_lines(cold, sizeof cold);
  CLI_CHECK(0, "", "cache clear");
  CLI_CHECK(0, "", "run %s/add.hlo --compile", corpus);
  only_entry(entry, sizeof entry);
  CHECK(entry[0] != '\0');

  /* a truncated entry: verify names it and fails, --fix removes it */
  truncate_file(entry, 100);
  CLI_CHECK(1, "", "cache verify");
  CLI_HAS(cli_out, "truncated entry");
  CLI_HAS(cli_out, "1 bad");
  CLI_CHECK(0, "", "cache stats");
  CLI_HAS(cli_out, "damaged entries: 1");
  CLI_CHECK(0, "", "cache verify --fix");
  CLI_HAS(cli_out, "1 removed");
  CLI_CHECK(0, "", "cache verify");
  CLI_HAS(cli_out, "verified 0 entries");

  /* a damaged entry met by run: a warning, a compile, the same outputs, the entry replaced */
  CLI_CHECK(0, "", "run %s/add.hlo --compile", corpus);
  truncate_file(entry, 100);
  CLI_CHECK(0, "", "run %s/add.hlo --compile", corpus);
  CLI_HAS(cli_err, "warning: compile cache");
  CLI_HAS(cli_err, "truncated entry");
  CLI_HAS(cli_out, "cache: 0 hits, 1 compile");
  CLI_HAS(cli_out, "1 damaged entry removed");
  output_lines(again, sizeof again);
  CHECK_STR(again, cold);
  CLI_CHECK(0, "", "run %s/add.hlo --compile", corpus);
  CLI_HAS(cli_out, "cache: 1 hit, 0 compiles");

  /* a cache that cannot be written (test-only injected EROFS and ENOSPC): the run succeeds */
  CLI_CHECK(0, "", "cache clear");
  CLI_CHECK(0, "LATCH_CACHE_TEST_FAULT=open:EROFS", "run %s/add.hlo --compile", corpus);
  CLI_HAS(cli_err, "Read-only file system");
  CLI_HAS(cli_out, "not saved");
  output_lines(again, sizeof again);
  CHECK_STR(again, cold);
  CLI_CHECK(0, "LATCH_CACHE_TEST_FAULT=write:ENOSPC", "run %s/add.hlo --compile", corpus);
  CLI_HAS(cli_err, "No space left on device");
  output_lines(again, sizeof again);
  CHECK_STR(again, cold);
  CLI_CHECK(0, "", "cache stats");
  CLI_HAS(cli_out, "entries: 0");
  CLI_HAS(cli_out, "temporary files: 0");

  /* a cache directory that cannot be created: a path through a regular file */
  char blocked[256];
  snprintf(blocked, sizeof blocked, "%s/file", cli_dir);
  FILE *f = fopen(blocked, "w");
  if (f) fclose(f);
  CLI_CHECK(0, "", "run %s/add.hlo --compile", corpus); /* fills the real cache dir */
  char env[512];
  snprintf(env, sizeof env, "LATCH_CACHE_DIR='%s/sub'", blocked);
  CLI_CHECK(0, env, "run %s/add.hlo --compile", corpus);
  CLI_HAS(cli_err, "cannot create");
  CLI_HAS(cli_out, "cache: 0 hits, 1 compile");
  output_lines(again, sizeof again);
  CHECK_STR(again, cold);
}

static void off_and_memory(void) {
  CLI_CHECK(0, "", "cache clear");
  CLI_CHECK(0, "LATCH_CACHE=off", "run %s/add.hlo --compile", corpus);
  CLI_HAS(cli_out, "disk cache off: LATCH_CACHE=off");
  CLI_CHECK(0, "LATCH_CACHE=memory", "run %s/add.hlo --compile", corpus);
  CLI_HAS(cli_out, "cache: 0 hits, 1 compile (disk cache off: LATCH_CACHE=memory)");
  CLI_CHECK(0, "", "cache stats");
  CLI_HAS(cli_out, "entries: 0");
}

static void clear_removes_leftovers(void) {
  CLI_CHECK(0, "", "run %s/add.hlo --compile", corpus);
  char temp[512];
  snprintf(temp, sizeof temp, "%s/.latch-tmp-leftover", cache_dir);
  FILE *f = fopen(temp, "w");
  if (f) fclose(f);
  CLI_CHECK(0, "", "cache stats");
  CLI_HAS(cli_out, "temporary files: 1");
  CLI_CHECK(0, "", "cache clear --dir '%s'", cache_dir);
  CLI_HAS(cli_out, "removed 1 entry and 1 temporary file");
  CLI_CHECK(0, "", "cache ls");
  CLI_HAS(cli_out, "0 entries");
  /* a directory that does not exist is an empty cache */
  CLI_CHECK(0, "", "cache stats --dir '%s/none'", cli_dir);
  CLI_HAS(cli_out, "entries: 0");
  /* no directory to be had: the run goes on without the cache */
  CLI_CHECK(0, "env -u HOME -u XDG_CACHE_HOME -u LATCH_CACHE_DIR", "run %s/add.hlo --compile", corpus);
  CLI_HAS(cli_err, "set LATCH_CACHE_DIR");
  CLI_HAS(cli_out, "disk cache off: no cache directory");
  CLI_HAS(cli_out, "output 0");
}

/* latch cache --remote and push/pull against a private redis-server (one with a password):
 * the entries a bench run wrote are counted, listed, verified (a bad one found and fixed),
 * pulled to a directory, cleared, pushed back; passwords never appear in the output. */
static int redis_keys(redis_server *s) {
  redisContext *c = redis_client(s, "pw-cli-789");
  redisReply *r = c ? redisCommand(c, "KEYS latch:*") : NULL;
  int n = r && r->type == REDIS_REPLY_ARRAY ? (int)r->elements : -1;
  if (r) freeReplyObject(r);
  if (c) redisFree(c);
  return n;
}

static void remote_actions(void) {
  redis_server s;
  if (!redis_start(&s, "pw-cli-789", NULL)) {
    CHECK_MSG(false, "redis-server did not start");
    return;
  }
  char url[160], strict[160], env[256], pulled[200], text[64];
  redis_url(&s, ":pw-cli-789", "namespace=cli", url, sizeof url);
  redis_url(&s, ":pw-cli-789", "namespace=cli&unsigned=0", strict, sizeof strict);
  snprintf(env, sizeof env, "LATCH_CACHE_URL='%s'", url);
  snprintf(pulled, sizeof pulled, "%s/pulled", cli_dir);
  CLI_CHECK(1, "", "cache ls --remote"); /* no URL anywhere */
  CLI_HAS(cli_err, "LATCH_CACHE_URL");
  CLI_CHECK(0, "LATCH_CACHE=memory", "bench --model mlp --mode every --repeat 1 --cache-url '%s'", url);
  int entries = redis_keys(&s);
  CHECK(entries > 0);
  CLI_CHECK(0, env, "cache stats --remote");
  snprintf(text, sizeof text, "entries: %d\n", entries);
  CLI_HAS(cli_out, text);
  CLI_HAS(cli_out, "redis 7");
  CLI_LACKS(cli_out, "pw-cli-789");
  CLI_CHECK(0, "", "cache ls --remote --cache-url '%s'", url);
  CLI_HAS(cli_out, "backend=cpu");
  CLI_HAS(cli_out, "redis://***@127.0.0.1");
  CLI_CHECK(0, env, "cache verify --remote");
  CLI_HAS(cli_out, ": 0 bad");
  redisContext *c = redis_client(&s, "pw-cli-789");
  redisReply *r = c ? redisCommand(c, "SET latch:cli:0123456789abcdef0123456789abcdef garbage") : NULL;
  if (r) freeReplyObject(r);
  if (c) redisFree(c);
  CLI_CHECK(1, env, "cache verify --remote");
  CLI_HAS(cli_out, "bad: latch:cli:0123456789abcdef0123456789abcdef");
  CLI_CHECK(0, env, "cache verify --remote --fix");
  CLI_HAS(cli_out, "1 bad, 1 removed");
  CHECK_EQ_INT(redis_keys(&s), entries);
  char env_secret[300];
  snprintf(env_secret, sizeof env_secret, "LATCH_CACHE_URL='%s' LATCH_CACHE_SECRET=s1", strict);
  CLI_CHECK(1, env_secret, "cache verify --remote"); /* unsigned entries, under a secret */
  CLI_HAS(cli_out, "unsigned entry");
  /* --fix under another secret than the writer's removes none of them: the secret may be
   * what is wrong */
  CLI_CHECK(1, env_secret, "cache verify --remote --fix");
  snprintf(text, sizeof text, "%d bad, 0 removed", entries);
  CLI_HAS(cli_out, text);
  CLI_HAS(cli_out, "LATCH_CACHE_SECRET may differ");
  CHECK_EQ_INT(redis_keys(&s), entries);
  CLI_CHECK(0, env, "cache pull --dir '%s'", pulled);
  snprintf(text, sizeof text, "pulled %d entr", entries);
  CLI_HAS(cli_out, text);
  CLI_CHECK(0, "", "cache verify --dir '%s'", pulled);
  snprintf(text, sizeof text, "verified %d entr", entries);
  CLI_HAS(cli_out, text);
  CLI_CHECK(0, env, "cache clear --remote");
  CHECK_EQ_INT(redis_keys(&s), 0);
  CLI_CHECK(0, env, "cache push --dir '%s'", pulled);
  snprintf(text, sizeof text, "pushed %d entr", entries);
  CLI_HAS(cli_out, text);
  CHECK_EQ_INT(redis_keys(&s), entries);
  CLI_CHECK(0, env, "cache push --dir '%s'", pulled);
  CLI_HAS(cli_out, "pushed 0 entries");
  /* pushed signed by team A, verified and fixed by team B: all kept */
  char env_a[300], env_b[300];
  snprintf(env_a, sizeof env_a, "LATCH_CACHE_URL='%s' LATCH_CACHE_SECRET=teamA", strict);
  snprintf(env_b, sizeof env_b, "LATCH_CACHE_URL='%s' LATCH_CACHE_SECRET=teamB", strict);
  CLI_CHECK(0, env, "cache clear --remote");
  CLI_CHECK(0, env_a, "cache push --dir '%s'", pulled);
  CLI_CHECK(0, env_a, "cache verify --remote");
  CLI_CHECK(1, env_b, "cache verify --remote --fix");
  snprintf(text, sizeof text, "%d bad, 0 removed", entries);
  CLI_HAS(cli_out, text);
  CLI_HAS(cli_out, "signature");
  CHECK_EQ_INT(redis_keys(&s), entries);
  CLI_CHECK(0, env_a, "cache verify --remote");
  /* a wrong password: an error naming the server, never the password */
  redis_url(&s, ":wrong-pw-000", "", url, sizeof url);
  CLI_CHECK(3, "", "cache stats --remote --cache-url '%s'", url);
  CLI_HAS(cli_err, "authentication failed");
  CLI_LACKS(cli_err, "wrong-pw-000");
  CLI_LACKS(cli_out, "wrong-pw-000");
  redis_stop(&s);
}

/* latch run with LATCH_CACHE_URL uses the remote tier as a runtime does: a cold run compiles
 * and stores the graph in Redis too; a run on another, empty cache directory loads it from
 * Redis and keeps it on its disk; with LATCH_CACHE=memory (no disk) it still comes from Redis;
 * LATCH_CACHE=off uses no tier; a malformed URL is an error; a server that is gone only
 * costs the tier. */
static void run_remote(void) {
  redis_server s;
  if (!redis_start(&s, "pw-cli-789", NULL)) {
    CHECK_MSG(false, "redis-server did not start");
    return;
  }
  char url[160], env[600];
  redis_url(&s, ":pw-cli-789", "", url, sizeof url);
  snprintf(env, sizeof env, "LATCH_CACHE_URL='%s' LATCH_CACHE_DIR='%s/run-a'", url, cli_dir);
  CLI_CHECK(0, env, "run %s/add.hlo --compile", corpus);
  CLI_HAS(cli_out, "cache: 0 hits, 1 compile");
  CLI_HAS(cli_out, "; remote redis://***@127.0.0.1");
  CLI_HAS(cli_out, ", stored)");
  CLI_LACKS(cli_out, "pw-cli-789");
  CHECK_EQ_INT(redis_keys(&s), 1);
  snprintf(env, sizeof env, "LATCH_CACHE_URL='%s' LATCH_CACHE_DIR='%s/run-b'", url, cli_dir);
  CLI_CHECK(0, env, "run %s/add.hlo --compile", corpus);
  CLI_HAS(cli_out, "loaded compiled graph from the remote cache redis://***@127.0.0.1");
  CLI_HAS(cli_out, "cache: 1 hit, 0 compiles");
  CLI_CHECK(0, "", "cache stats --dir '%s/run-b'", cli_dir);
  CLI_HAS(cli_out, "entries: 1");
  snprintf(env, sizeof env, "LATCH_CACHE=memory LATCH_CACHE_URL='%s'", url);
  CLI_CHECK(0, env, "run %s/add.hlo --compile", corpus);
  CLI_HAS(cli_out, "loaded compiled graph from the remote cache");
  CLI_HAS(cli_out, "cache: 1 hit, 0 compiles (disk cache off: LATCH_CACHE=memory; remote ");
  snprintf(env, sizeof env, "LATCH_CACHE=off LATCH_CACHE_URL='%s'", url);
  CLI_CHECK(0, env, "run %s/add.hlo --compile", corpus);
  CLI_HAS(cli_out, "cache: 0 hits, 1 compile (disk cache off: LATCH_CACHE=off)");
  CLI_CHECK(1, "LATCH_CACHE_URL='redis://127.0.0.1:6379/zero'", "run %s/add.hlo --compile", corpus);
  CLI_HAS(cli_err, "cache URL");
  redis_stop(&s);
  snprintf(env, sizeof env, "LATCH_CACHE_URL='%s' LATCH_CACHE_DIR='%s/run-c'", url, cli_dir);
  CLI_CHECK(0, env, "run %s/add.hlo --compile", corpus);
  CLI_HAS(cli_out, "cache: 0 hits, 1 compile");
  CLI_HAS(cli_out, "not stored");
}

/* Keys matching pattern on s (password pw-ns-1). */
static int keys_matching(redis_server *s, const char *pattern) {
  redisContext *c = redis_client(s, "pw-ns-1");
  redisReply *r = c ? redisCommand(c, "KEYS %s", pattern) : NULL;
  int n = r && r->type == REDIS_REPLY_ARRAY ? (int)r->elements : -1;
  if (r) freeReplyObject(r);
  if (c) redisFree(c);
  return n;
}

/* The TTL of the one key matching pattern (-3 when there is not exactly one). */
static long long ttl_of(redis_server *s, const char *pattern) {
  redisContext *c = redis_client(s, "pw-ns-1");
  redisReply *r = c ? redisCommand(c, "KEYS %s", pattern) : NULL;
  long long ttl = -3;
  if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 1) {
    redisReply *t = redisCommand(c, "TTL %s", r->element[0]->str);
    if (t && t->type == REDIS_REPLY_INTEGER) ttl = t->integer;
    if (t) freeReplyObject(t);
  }
  if (r) freeReplyObject(r);
  if (c) redisFree(c);
  return ttl;
}

/* Two namespaces on one server: each push lands in its own, clear --remote empties only its
 * own. Entries expire after ttl_s (a week unless the URL says); an entry over max_entry_bytes
 * is not written and push fails; without a secret push refuses unless unsigned=1; the
 * password may come from LATCH_CACHE_PASSWORD or a private file instead of the URL. */
static void remote_namespaces_and_limits(void) {
  redis_server s;
  if (!redis_start(&s, "pw-ns-1", NULL)) {
    CHECK_MSG(false, "redis-server did not start");
    return;
  }
  char url[200], env[700], dir[200], path[200];
  snprintf(dir, sizeof dir, "%s/ns-src", cli_dir);
  snprintf(env, sizeof env, "LATCH_CACHE_DIR='%s'", dir);
  CLI_CHECK(0, env, "run %s/add.hlo --compile", corpus);
  /* team A by the URL, team B by LATCH_CACHE_NAMESPACE over the same URL */
  redis_url(&s, ":pw-ns-1", "namespace=teamA&unsigned=0", url, sizeof url);
  snprintf(env, sizeof env, "LATCH_CACHE_URL='%s' LATCH_CACHE_SECRET=k1", url);
  CLI_CHECK(0, env, "cache push --dir '%s'", dir);
  CLI_HAS(cli_out, "pushed 1 entry");
  snprintf(env, sizeof env, "LATCH_CACHE_URL='%s' LATCH_CACHE_SECRET=k1 LATCH_CACHE_NAMESPACE=teamB", url);
  CLI_CHECK(0, env, "cache push --dir '%s'", dir);
  CLI_HAS(cli_out, "pushed 1 entry");
  CHECK_EQ_INT(keys_matching(&s, "latch:teamA:*"), 1);
  CHECK_EQ_INT(keys_matching(&s, "latch:teamB:*"), 1);
  long long ttl = ttl_of(&s, "latch:teamA:*");
  CHECK_MSG(ttl > 0 && ttl <= 7 * 24 * 3600, "TTL %lld", ttl);
  snprintf(env, sizeof env, "LATCH_CACHE_URL='%s'", url);
  CLI_CHECK(0, env, "cache clear --remote");
  CLI_HAS(cli_out, "1 entry");
  CHECK_EQ_INT(keys_matching(&s, "latch:teamA:*"), 0);
  CHECK_EQ_INT(keys_matching(&s, "latch:teamB:*"), 1);
  /* no expiry when ttl_s=0 */
  redis_url(&s, ":pw-ns-1", "namespace=teamC&unsigned=0&ttl_s=0", url, sizeof url);
  snprintf(env, sizeof env, "LATCH_CACHE_URL='%s' LATCH_CACHE_SECRET=k1", url);
  CLI_CHECK(0, env, "cache push --dir '%s'", dir);
  CHECK_EQ_INT((int)ttl_of(&s, "latch:teamC:*"), -1);
  /* over the cap: not written, said, and push fails */
  redis_url(&s, ":pw-ns-1", "namespace=teamD&unsigned=0&max_entry_bytes=16", url, sizeof url);
  snprintf(env, sizeof env, "LATCH_CACHE_URL='%s' LATCH_CACHE_SECRET=k1", url);
  CLI_CHECK(3, env, "cache push --dir '%s'", dir);
  CLI_HAS(cli_err, "over max_entry_bytes=16; not written");
  CLI_HAS(cli_err, "1 entry was not written");
  CHECK_EQ_INT(keys_matching(&s, "latch:teamD:*"), 0);
  /* no secret, no opt-in: push refuses */
  redis_url(&s, ":pw-ns-1", "namespace=teamE&unsigned=0", url, sizeof url);
  snprintf(env, sizeof env, "LATCH_CACHE_URL='%s'", url);
  CLI_CHECK(1, env, "cache push --dir '%s'", dir);
  CLI_HAS(cli_err, "unsigned=1");
  CHECK_EQ_INT(keys_matching(&s, "latch:teamE:*"), 0);
  /* the password beside the URL: the variable, then a file (refused while others may read it) */
  redis_url(&s, NULL, "namespace=teamB", url, sizeof url);
  snprintf(env, sizeof env, "LATCH_CACHE_URL='%s'", url);
  CLI_CHECK(3, env, "cache stats --remote");
  snprintf(env, sizeof env, "LATCH_CACHE_URL='%s' LATCH_CACHE_PASSWORD=pw-ns-1", url);
  CLI_CHECK(0, env, "cache stats --remote");
  CLI_HAS(cli_out, "entries: 1\n");
  CLI_HAS(cli_out, "redis://***@127.0.0.1");
  snprintf(path, sizeof path, "%s/password", cli_dir);
  FILE *f = fopen(path, "w");
  if (f) fputs("pw-ns-1\n", f), fclose(f);
  chmod(path, 0644);
  snprintf(env, sizeof env, "LATCH_CACHE_URL='%s' LATCH_CACHE_PASSWORD_FILE='%s'", url, path);
  CLI_CHECK(1, env, "cache stats --remote");
  CLI_HAS(cli_err, "chmod 600");
  CLI_LACKS(cli_err, "pw-ns-1");
  chmod(path, 0600);
  CLI_CHECK(0, env, "cache stats --remote");
  CLI_HAS(cli_out, "entries: 1\n");
  CLI_LACKS(cli_out, "pw-ns-1");
  redis_stop(&s);
}

/* A Redis Cluster node is refused when first reached, with a message saying why. */
static void remote_cluster_refused(void) {
  redis_server s;
  char bus[16]; /* the cluster bus: its own free port (the default, port + 10000, may pass 65535) */
  snprintf(bus, sizeof bus, "%d", redis_free_port());
  if (!redis_start(&s, NULL, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-port", bus,
                   NULL)) {
    CHECK_MSG(false, "redis-server did not start");
    return;
  }
  char url[200];
  redis_url(&s, NULL, "", url, sizeof url);
  CLI_CHECK(3, "", "cache stats --remote --cache-url '%s'", url);
  CLI_HAS(cli_err, "Redis Cluster node");
  char env[600];
  snprintf(env, sizeof env, "LATCH_CACHE_URL='%s' LATCH_CACHE_DIR='%s/cluster-run'", url, cli_dir);
  CLI_CHECK(0, env, "run %s/add.hlo --compile", corpus);
  CLI_HAS(cli_err, "Redis Cluster node");
  CLI_HAS(cli_out, "output 0");
  redis_stop(&s);
}

/* A Redis Sentinel of the test's own (redis-server --sentinel on a config file in its
 * directory, watching a master that is not there); false with a message when it does not
 * come up. */
static bool sentinel_start(redis_server *s) {
  memset(s, 0, sizeof *s);
  snprintf(s->dir, sizeof s->dir, "/tmp/latch-redis-XXXXXX");
  if (!mkdtemp(s->dir)) return false;
  s->port = redis_free_port();
  char conf[160], text[512];
  snprintf(conf, sizeof conf, "%s/sentinel.conf", s->dir);
  snprintf(text, sizeof text, "port %d\nbind 127.0.0.1\ndir %s\nlogfile %s/log\n"
           "sentinel monitor latchmaster 127.0.0.1 %d 1\n", s->port, s->dir, s->dir, redis_free_port());
  cli_write_text(conf, text);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    execlp("redis-server", "redis-server", conf, "--sentinel", (char *)NULL);
    _exit(127);
  }
  s->pid = pid;
  for (int i = 0; i < 200; i++) { /* up to 4 s for it to listen */
    redisContext *c = redis_client(s, NULL);
    redisReply *r = c ? redisCommand(c, "PING") : NULL;
    bool up = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    if (c) redisFree(c);
    if (up) return true;
    redis_sleep_ms(20);
  }
  fprintf(stderr, "redis-server --sentinel did not answer on port %d\n", s->port);
  return false;
}

/* latch run on a server that refuses every write (out of memory): the run's outputs and exit
 * status are the run's, the refusal a warning and the cache line says the entry was not
 * stored and why; push, whose job the write is, fails. */
static void run_write_refused(void) {
  redis_server s;
  if (!redis_start(&s, NULL, "--maxmemory-policy", "noeviction", NULL)) {
    CHECK_MSG(false, "redis-server did not start");
    return;
  }
  redisContext *c = redis_client(&s, NULL);
  redisReply *r = c ? redisCommand(c, "CONFIG SET maxmemory 1") : NULL;
  CHECK(r && r->type == REDIS_REPLY_STATUS);
  if (r) freeReplyObject(r);
  if (c) redisFree(c);
  char url[200], env[600], want[4096], got[4096];
  snprintf(env, sizeof env, "LATCH_CACHE_DIR='%s/refused-ref'", cli_dir);
  CLI_CHECK(0, env, "run %s/add.hlo --compile", corpus);
  output_lines(want, sizeof want);
  redis_url(&s, NULL, "", url, sizeof url);
  snprintf(env, sizeof env, "LATCH_CACHE_URL='%s' LATCH_CACHE_DIR='%s/refused-run'", url, cli_dir);
  CLI_CHECK(0, env, "run %s/add.hlo --compile", corpus);
  CLI_HAS(cli_err, "warning: compile cache: remote");
  CLI_HAS(cli_err, "refused: OOM");
  CLI_HAS(cli_out, "not stored: the server refused the write");
  output_lines(got, sizeof got);
  CHECK(want[0] != '\0');
  CHECK_STR(got, want);
  CHECK_EQ_INT(redis_keys(&s), 0);
  snprintf(env, sizeof env, "LATCH_CACHE_URL='%s'", url);
  CLI_CHECK(3, env, "cache push --dir '%s/refused-run'", cli_dir);
  CLI_HAS(cli_err, "1 entry was not written");
  redis_stop(&s);
}

/* A Sentinel holds no data: refused when first reached, with a message saying why, and latch
 * run goes on without the tier. */
static void remote_sentinel_refused(void) {
  redis_server s;
  if (!sentinel_start(&s)) {
    CHECK_MSG(false, "redis-server --sentinel did not start");
    redis_stop(&s);
    return;
  }
  char url[200], env[600];
  redis_url(&s, NULL, "", url, sizeof url);
  CLI_CHECK(3, "", "cache stats --remote --cache-url '%s'", url);
  CLI_HAS(cli_err, "the server is a Redis Sentinel");
  snprintf(env, sizeof env, "LATCH_CACHE_URL='%s' LATCH_CACHE_DIR='%s/sentinel-run'", url, cli_dir);
  CLI_CHECK(0, env, "run %s/add.hlo --compile", corpus);
  CLI_HAS(cli_err, "the server is a Redis Sentinel");
  CLI_HAS(cli_out, "output 0");
  CLI_HAS(cli_out, "not stored");
  redis_stop(&s);
}

int main(void) {
  corpus = getenv("LATCH_CORPUS") ? getenv("LATCH_CORPUS") : "../shared/corpus/xla";
  unsetenv("LATCH_CACHE");
  unsetenv("LATCH_CACHE_MAX_BYTES");
  unsetenv("LATCH_CACHE_TEST_FAULT");
  unsetenv("LATCH_CACHE_TEST_WRITE_DELAY_MS");
  unsetenv("LATCH_CACHE_URL");
  unsetenv("LATCH_CACHE_SECRET");
  unsetenv("LATCH_CACHE_NAMESPACE");
  unsetenv("LATCH_CACHE_PASSWORD");
  unsetenv("LATCH_CACHE_PASSWORD_FILE");
  if (!cli_setup()) {
    perror("mkdtemp");
    return 1;
  }
  /* Every command runs on the test's own cache unless its env says otherwise. */
  snprintf(cache_dir, sizeof cache_dir, "%s/cache", cli_dir);
  setenv("LATCH_CACHE_DIR", cache_dir, 1);
  RUN(usage);
  RUN(warm_start);
  RUN(damaged_and_unwritable);
  RUN(off_and_memory);
  RUN(clear_removes_leftovers);
  RUN(remote_actions);
  RUN(run_remote);
  RUN(remote_namespaces_and_limits);
  RUN(remote_cluster_refused);
  RUN(remote_sentinel_refused);
  RUN(run_write_refused);
  cli_cleanup();
  return TEST_REPORT();
}
