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

static char temp_dir[64], cache_dir[128];
static char bin[512];
static const char *corpus;
static char out_text[1 << 16], err_text[1 << 16];

static void read_text(const char *path, char *out, size_t size) {
  FILE *f = fopen(path, "rb");
  size_t len = f ? fread(out, 1, size - 1, f) : 0;
  out[len] = 0;
  if (f) fclose(f);
}

/* Runs `ENV latch ARGS` (env: assignments placed before the command, may be "") with stdout
 * and stderr captured; returns the exit status, or 128 + signal when it crashed. */
static int latch(const char *env, const char *format, ...) __attribute__((format(printf, 2, 3)));
static int latch(const char *env, const char *format, ...) {
  char args[2048], command[4096], out_path[256], err_path[256];
  va_list list;
  va_start(list, format);
  vsnprintf(args, sizeof args, format, list);
  va_end(list);
  snprintf(out_path, sizeof out_path, "%s/stdout", temp_dir);
  snprintf(err_path, sizeof err_path, "%s/stderr", temp_dir);
  snprintf(command, sizeof command, "LATCH_CACHE_DIR='%s' %s '%s' %s >'%s' 2>'%s'", cache_dir, env, bin, args,
           out_path, err_path);
  int status = system(command);
  read_text(out_path, out_text, sizeof out_text);
  read_text(err_path, err_text, sizeof err_text);
  if (status == -1) return -1;
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

#define CHECK_LATCH(want_status, ...)                                                              \
  do {                                                                                             \
    int got_status_ = latch(__VA_ARGS__);                                                          \
    CHECK_MSG(got_status_ == (want_status), "exit %d, want %d\nstdout: %s\nstderr: %s", got_status_, \
              (want_status), out_text, err_text);                                                  \
  } while (0)

#define CHECK_HAS(text, fragment) CHECK_MSG(strstr((text), (fragment)) != NULL, "no \"%s\" in: %s", (fragment), (text))
#define CHECK_LACKS(text, fragment) CHECK_MSG(strstr((text), (fragment)) == NULL, "\"%s\" in: %s", (fragment), (text))

/* The output lines (shape, sums, hash) of the last run, to compare runs bit for bit. */
static void output_lines(char *out, size_t size) {
  out[0] = '\0';
  size_t len = 0;
  for (const char *line = strstr(out_text, "output "); line; line = strstr(line + 1, "\noutput ")) {
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
  CHECK_LATCH(0, "", "--help");
  CHECK_HAS(out_text, "cache ACTION");
  CHECK_LATCH(0, "", "cache --help");
  CHECK_HAS(out_text, "verify");
  CHECK_HAS(out_text, "--fix");
  CHECK_HAS(out_text, "LATCH_CACHE_MAX_BYTES");
  CHECK_LATCH(0, "", "help cache");
  CHECK_HAS(out_text, "clear");
  CHECK_LATCH(0, "", "run --help");
  CHECK_HAS(out_text, "--compile");
  CHECK_HAS(out_text, "LATCH_CACHE");
  CHECK_LATCH(1, "", "cache");
  CHECK_HAS(err_text, "stats, ls, verify, clear, push or pull");
  CHECK_LATCH(1, "", "cache frobnicate");
  CHECK_LATCH(1, "", "cache stats --fix");
  CHECK_LATCH(1, "", "cache ls --dir");
  CHECK_LATCH(1, "", "run %s/add.hlo --compile --fp64", corpus);
  CHECK_LATCH(1, "LATCH_CACHE=dsik", "run %s/add.hlo --compile", corpus);
  CHECK_HAS(err_text, "LATCH_CACHE='dsik'");
  CHECK_LATCH(1, "LATCH_CACHE_MAX_BYTES=lots", "run %s/add.hlo --compile", corpus);
  CHECK_HAS(err_text, "LATCH_CACHE_MAX_BYTES");
}

static void warm_start(void) {
  char cold[4096], warm[4096], direct[4096];
  CHECK_LATCH(0, "", "run %s/single_gemm_fusion.hlo --seed 2", corpus);
  output_lines(direct, sizeof direct);
  CHECK_LACKS(out_text, "cache:"); /* the direct path compiles nothing */

  CHECK_LATCH(0, "", "run %s/single_gemm_fusion.hlo --seed 2 --compile", corpus);
  CHECK_HAS(out_text, "cache: 0 hits, 1 compile");
  CHECK_HAS(out_text, "saved");
  output_lines(cold, sizeof cold);
  CHECK_LATCH(0, "", "run %s/single_gemm_fusion.hlo --seed 2 --compile --backend reference", corpus);
  CHECK_HAS(out_text, "loaded compiled graph from cache");
  CHECK_HAS(out_text, "cache: 1 hit, 0 compiles");
  output_lines(warm, sizeof warm);
  CHECK(cold[0] != '\0');
  CHECK_STR(warm, cold);
  CHECK_STR(cold, direct);
  /* another seed is another input, not another graph: still a hit */
  CHECK_LATCH(0, "", "run %s/single_gemm_fusion.hlo --seed 3 --compile", corpus);
  CHECK_HAS(out_text, "cache: 1 hit, 0 compiles");

  CHECK_LATCH(0, "", "cache stats");
  CHECK_HAS(out_text, "entries: 1");
  CHECK_HAS(out_text, cache_dir);
  CHECK_HAS(out_text, "limit: 1073741824");
  CHECK_LATCH(0, "LATCH_CACHE_MAX_BYTES=2M", "cache stats --dir '%s'", cache_dir);
  CHECK_HAS(out_text, "limit: 2097152");
  CHECK_LATCH(0, "", "cache ls");
  CHECK_HAS(out_text, "backend=reference/1");
  CHECK_HAS(out_text, "1 entry");
  CHECK_LATCH(0, "", "cache verify");
  CHECK_HAS(out_text, "0 bad");
}

static void damaged_and_unwritable(void) {
  char entry[512], cold[4096], again[4096];
  CHECK_LATCH(0, "", "run %s/add.hlo --compile", corpus);
  output_lines(cold, sizeof cold);
  CHECK_LATCH(0, "", "cache clear");
  CHECK_LATCH(0, "", "run %s/add.hlo --compile", corpus);
  only_entry(entry, sizeof entry);
  CHECK(entry[0] != '\0');

  /* a truncated entry: verify names it and fails, --fix removes it */
  truncate_file(entry, 100);
  CHECK_LATCH(1, "", "cache verify");
  CHECK_HAS(out_text, "truncated entry");
  CHECK_HAS(out_text, "1 bad");
  CHECK_LATCH(0, "", "cache stats");
  CHECK_HAS(out_text, "damaged entries: 1");
  CHECK_LATCH(0, "", "cache verify --fix");
  CHECK_HAS(out_text, "1 removed");
  CHECK_LATCH(0, "", "cache verify");
  CHECK_HAS(out_text, "verified 0 entries");

  /* a damaged entry met by run: a warning, a compile, the same outputs, the entry replaced */
  CHECK_LATCH(0, "", "run %s/add.hlo --compile", corpus);
  truncate_file(entry, 100);
  CHECK_LATCH(0, "", "run %s/add.hlo --compile", corpus);
  CHECK_HAS(err_text, "warning: compile cache");
  CHECK_HAS(err_text, "truncated entry");
  CHECK_HAS(out_text, "cache: 0 hits, 1 compile");
  CHECK_HAS(out_text, "1 damaged entry removed");
  output_lines(again, sizeof again);
  CHECK_STR(again, cold);
  CHECK_LATCH(0, "", "run %s/add.hlo --compile", corpus);
  CHECK_HAS(out_text, "cache: 1 hit, 0 compiles");

  /* a cache that cannot be written (test-only injected EROFS and ENOSPC): the run succeeds */
  CHECK_LATCH(0, "", "cache clear");
  CHECK_LATCH(0, "LATCH_CACHE_TEST_FAULT=open:EROFS", "run %s/add.hlo --compile", corpus);
  CHECK_HAS(err_text, "Read-only file system");
  CHECK_HAS(out_text, "not saved");
  output_lines(again, sizeof again);
  CHECK_STR(again, cold);
  CHECK_LATCH(0, "LATCH_CACHE_TEST_FAULT=write:ENOSPC", "run %s/add.hlo --compile", corpus);
  CHECK_HAS(err_text, "No space left on device");
  output_lines(again, sizeof again);
  CHECK_STR(again, cold);
  CHECK_LATCH(0, "", "cache stats");
  CHECK_HAS(out_text, "entries: 0");
  CHECK_HAS(out_text, "temporary files: 0");

  /* a cache directory that cannot be created: a path through a regular file */
  char blocked[256];
  snprintf(blocked, sizeof blocked, "%s/file", temp_dir);
  FILE *f = fopen(blocked, "w");
  if (f) fclose(f);
  CHECK_LATCH(0, "", "run %s/add.hlo --compile", corpus); /* fills the real cache dir */
  char env[512];
  snprintf(env, sizeof env, "LATCH_CACHE_DIR='%s/sub'", blocked);
  CHECK_LATCH(0, env, "run %s/add.hlo --compile", corpus);
  CHECK_HAS(err_text, "cannot create");
  CHECK_HAS(out_text, "cache: 0 hits, 1 compile");
  output_lines(again, sizeof again);
  CHECK_STR(again, cold);
}

static void off_and_memory(void) {
  CHECK_LATCH(0, "", "cache clear");
  CHECK_LATCH(0, "LATCH_CACHE=off", "run %s/add.hlo --compile", corpus);
  CHECK_HAS(out_text, "disk cache off: LATCH_CACHE=off");
  CHECK_LATCH(0, "LATCH_CACHE=memory", "run %s/add.hlo --compile", corpus);
  CHECK_HAS(out_text, "cache: 0 hits, 1 compile (disk cache off: LATCH_CACHE=memory)");
  CHECK_LATCH(0, "", "cache stats");
  CHECK_HAS(out_text, "entries: 0");
}

static void clear_removes_leftovers(void) {
  CHECK_LATCH(0, "", "run %s/add.hlo --compile", corpus);
  char temp[512];
  snprintf(temp, sizeof temp, "%s/.latch-tmp-leftover", cache_dir);
  FILE *f = fopen(temp, "w");
  if (f) fclose(f);
  CHECK_LATCH(0, "", "cache stats");
  CHECK_HAS(out_text, "temporary files: 1");
  CHECK_LATCH(0, "", "cache clear --dir '%s'", cache_dir);
  CHECK_HAS(out_text, "removed 1 entry and 1 temporary file");
  CHECK_LATCH(0, "", "cache ls");
  CHECK_HAS(out_text, "0 entries");
  /* a directory that does not exist is an empty cache */
  CHECK_LATCH(0, "", "cache stats --dir '%s/none'", temp_dir);
  CHECK_HAS(out_text, "entries: 0");
  /* no directory to be had: the run goes on without the cache */
  CHECK_LATCH(0, "env -u HOME -u XDG_CACHE_HOME -u LATCH_CACHE_DIR", "run %s/add.hlo --compile", corpus);
  CHECK_HAS(err_text, "set LATCH_CACHE_DIR");
  CHECK_HAS(out_text, "disk cache off: no cache directory");
  CHECK_HAS(out_text, "output 0");
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
  char url[160], env[256], pulled[200], text[64];
  redis_url(&s, ":pw-cli-789", "", url, sizeof url);
  snprintf(env, sizeof env, "LATCH_CACHE_URL='%s'", url);
  snprintf(pulled, sizeof pulled, "%s/pulled", temp_dir);
  CHECK_LATCH(1, "", "cache ls --remote"); /* no URL anywhere */
  CHECK_HAS(err_text, "LATCH_CACHE_URL");
  CHECK_LATCH(0, "LATCH_CACHE=memory", "bench --model mlp --mode every --repeat 1 --cache-url '%s'", url);
  int entries = redis_keys(&s);
  CHECK(entries > 0);
  CHECK_LATCH(0, env, "cache stats --remote");
  snprintf(text, sizeof text, "entries: %d\n", entries);
  CHECK_HAS(out_text, text);
  CHECK_HAS(out_text, "redis 7");
  CHECK_LACKS(out_text, "pw-cli-789");
  CHECK_LATCH(0, "", "cache ls --remote --cache-url '%s'", url);
  CHECK_HAS(out_text, "backend=cpu");
  CHECK_HAS(out_text, "redis://***@127.0.0.1");
  CHECK_LATCH(0, env, "cache verify --remote");
  CHECK_HAS(out_text, ": 0 bad");
  redisContext *c = redis_client(&s, "pw-cli-789");
  redisReply *r = c ? redisCommand(c, "SET latch:0123456789abcdef0123456789abcdef garbage") : NULL;
  if (r) freeReplyObject(r);
  if (c) redisFree(c);
  CHECK_LATCH(1, env, "cache verify --remote");
  CHECK_HAS(out_text, "bad: latch:0123456789abcdef0123456789abcdef");
  CHECK_LATCH(0, env, "cache verify --remote --fix");
  CHECK_HAS(out_text, "1 bad, 1 removed");
  CHECK_EQ_INT(redis_keys(&s), entries);
  char env_secret[300];
  snprintf(env_secret, sizeof env_secret, "%s LATCH_CACHE_SECRET=s1", env);
  CHECK_LATCH(1, env_secret, "cache verify --remote"); /* unsigned entries, under a secret */
  CHECK_HAS(out_text, "unsigned entry");
  CHECK_LATCH(0, env, "cache pull --dir '%s'", pulled);
  snprintf(text, sizeof text, "pulled %d entr", entries);
  CHECK_HAS(out_text, text);
  CHECK_LATCH(0, "", "cache verify --dir '%s'", pulled);
  snprintf(text, sizeof text, "verified %d entr", entries);
  CHECK_HAS(out_text, text);
  CHECK_LATCH(0, env, "cache clear --remote");
  CHECK_EQ_INT(redis_keys(&s), 0);
  CHECK_LATCH(0, env, "cache push --dir '%s'", pulled);
  snprintf(text, sizeof text, "pushed %d entr", entries);
  CHECK_HAS(out_text, text);
  CHECK_EQ_INT(redis_keys(&s), entries);
  CHECK_LATCH(0, env, "cache push --dir '%s'", pulled);
  CHECK_HAS(out_text, "pushed 0 entries");
  /* a wrong password: an error naming the server, never the password */
  redis_url(&s, ":wrong-pw-000", "", url, sizeof url);
  CHECK_LATCH(3, "", "cache stats --remote --cache-url '%s'", url);
  CHECK_HAS(err_text, "authentication failed");
  CHECK_LACKS(err_text, "wrong-pw-000");
  CHECK_LACKS(out_text, "wrong-pw-000");
  redis_stop(&s);
}

int main(void) {
  const char *env_bin = getenv("LATCH_BIN"), *build = getenv("BUILD");
  if (env_bin) snprintf(bin, sizeof bin, "%s", env_bin);
  else snprintf(bin, sizeof bin, "%s/latch", build ? build : "build");
  corpus = getenv("LATCH_CORPUS") ? getenv("LATCH_CORPUS") : "../shared/corpus/xla";
  unsetenv("LATCH_CACHE");
  unsetenv("LATCH_CACHE_MAX_BYTES");
  unsetenv("LATCH_CACHE_TEST_FAULT");
  unsetenv("LATCH_CACHE_TEST_WRITE_DELAY_MS");
  unsetenv("LATCH_CACHE_URL");
  unsetenv("LATCH_CACHE_SECRET");
  snprintf(temp_dir, sizeof temp_dir, "/tmp/latch-cli-cache-XXXXXX");
  if (!mkdtemp(temp_dir)) {
    perror("mkdtemp");
    return 1;
  }
  snprintf(cache_dir, sizeof cache_dir, "%s/cache", temp_dir);
  RUN(usage);
  RUN(warm_start);
  RUN(damaged_and_unwritable);
  RUN(off_and_memory);
  RUN(clear_removes_leftovers);
  RUN(remote_actions);
  char cleanup[256];
  snprintf(cleanup, sizeof cleanup, "rm -rf '%s'", temp_dir);
  if (system(cleanup) != 0) fprintf(stderr, "could not remove %s\n", temp_dir);
  return TEST_REPORT();
}
