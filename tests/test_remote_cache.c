/* The compile cache's remote tier on Redis. Each test starts its own redis-server
 * on 127.0.0.1 (tests/redis_test_util.h) and stops it. Covered: the URL and HMAC-SHA256 on
 * their own; hits across processes with separate disk caches; 8 processes with empty disks
 * racing on the same graphs compile each once; a lease whose holder died or never finishes;
 * the server killed mid-run, paused (CLIENT PAUSE) and asleep (DEBUG SLEEP) past the timeout,
 * out of memory, answering garbage, asking for a password or given a wrong one; a poisoned
 * entry (a valid entry of another graph) and unsigned or mis-signed ones under a secret; a
 * unix socket. Every run's outputs are checked against values worked out here, and nothing is
 * timed: a hang would show as the test never ending. */
#include <pthread.h>
#include <sys/stat.h>

#include "cache/remote_internal.h"
#include "capture/capture.h"
#include "disk_test_util.h"
#include "latch.h"
#include "redis_test_util.h"
#include "remote_test_util.h"
#include "test.h"

static int count_keys(redis_server *s, const char *pattern) {
  redisContext *c = redis_client(s, NULL);
  redisReply *r = c ? redisCommand(c, "KEYS %s", pattern) : NULL;
  int n = r && r->type == REDIS_REPLY_ARRAY ? (int)r->elements : -1;
  if (r) freeReplyObject(r);
  if (c) redisFree(c);
  return n;
}

/* ---- the URL ---- */

static void url_parsing(void) {
  cache_remote_config c;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  CHECK(cache_remote_parse_url("redis://127.0.0.1:6390/2", &c, &diag) == HLO_OK);
  CHECK(!c.unix_socket && strcmp(c.host, "127.0.0.1") == 0 && c.port == 6390 && c.db == 2 && !c.password[0]);
  CHECK(strcmp(c.shown, "redis://127.0.0.1:6390/2") == 0);
  CHECK(cache_remote_parse_url("redis://cache.example", &c, &diag) == HLO_OK);
  CHECK(c.port == 6379 && c.db == 0 && c.timeout_ms == 250 && c.wait_ms == 10000);
  CHECK(cache_remote_parse_url("redis://ann:p%40ss:w@h:1/0?timeout_ms=50&wait_ms=0&lease_ms=7", &c, &diag) == HLO_OK);
  CHECK(strcmp(c.user, "ann") == 0 && strcmp(c.password, "p@ss:w") == 0);
  CHECK(c.timeout_ms == 50 && c.wait_ms == 0 && c.lease_ms == 7 && c.port == 1);
  CHECK(strcmp(c.shown, "redis://***@h:1/0") == 0);
  CHECK(cache_remote_parse_url("redis://:se@cret@[::1]:7000", &c, &diag) == HLO_OK);
  CHECK(strcmp(c.host, "::1") == 0 && c.port == 7000 && strcmp(c.password, "se@cret") == 0 && !c.user[0]);
  CHECK(strcmp(c.shown, "redis://***@[::1]:7000/0") == 0);
  CHECK(cache_remote_parse_url("unix:///tmp/r.sock?db=3", &c, &diag) == HLO_OK);
  CHECK(c.unix_socket && strcmp(c.host, "/tmp/r.sock") == 0 && c.db == 3);
  /* the defaults: the user's namespace, a week's expiry, 256 MiB per entry, signed only */
  CHECK(c.namespace_name[0] != '\0' && c.ttl_s == 604800 && c.max_entry_bytes == 256 << 20 && !c.allow_unsigned);
  CHECK(cache_remote_parse_url("redis://h?namespace=team-a.1&ttl_s=0&max_entry_bytes=1000&unsigned=1", &c, &diag) ==
        HLO_OK);
  CHECK(strcmp(c.namespace_name, "team-a.1") == 0 && c.ttl_s == 0 && c.max_entry_bytes == 1000 && c.allow_unsigned);
  static const char *const bad[] = {
      "http://h", "redis://h:0", "redis://h:99999", "redis://h:x", "redis://h/x", "redis://user@h", "redis://h?bogus=1",
      "redis://h?timeout_ms=0", "rediss:/h", "redis://:@h", "redis://:p%4@h", "unix://rel/path", "redis://", "redis://[::1",
      "redis://h?namespace=a:b", "redis://h?namespace=a*", "redis://h?namespace=", "redis://h?unsigned=2",
      "redis://h?ttl_s=-1", "redis://h?max_entry_bytes=0",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    hlo_diag_clear(&diag);
    CHECK_MSG(cache_remote_parse_url(bad[i], &c, &diag) == HLO_ERR_INPUT, "%s was accepted", bad[i]);
    CHECK_MSG(strstr(diag.message, "cache URL") != NULL || strstr(diag.message, "cache namespace") != NULL, "%s: %s",
              bad[i], diag.message);
  }
  /* a password never comes back in a message */
  static const char *const secret_bad[] = {"redis://u:hunter2@h:port", "redis://u:hunter2@h?x=1", "redis://u:hunter2%zz@h"};
  for (size_t i = 0; i < sizeof secret_bad / sizeof secret_bad[0]; i++) {
    hlo_diag_clear(&diag);
    CHECK(cache_remote_parse_url(secret_bad[i], &c, &diag) == HLO_ERR_INPUT);
    CHECK_MSG(strstr(diag.message, "hunter2") == NULL, "%s", diag.message);
  }
  /* and a bad URL stops latch_open, naming the variable's problem */
  CHECK(open_rt("redis://h:99999", NULL, NULL) == NULL);
  CHECK(strstr(latch_last_error(), "port") != NULL);
}

/* RFC 4231's test cases 1 and 2: the published HMAC-SHA256 values. */
static void hmac_vectors(void) {
  unsigned char key1[20], mac[REMOTE_MAC_BYTES];
  memset(key1, 0x0b, sizeof key1);
  static const unsigned char want1[32] = {0xb0, 0x34, 0x4c, 0x61, 0xd8, 0xdb, 0x38, 0x53, 0x5c, 0xa8, 0xaf,
                                          0xce, 0xaf, 0x0b, 0xf1, 0x2b, 0x88, 0x1d, 0xc2, 0x00, 0xc9, 0x83,
                                          0x3d, 0xa7, 0x26, 0xe9, 0x37, 0x6c, 0x2e, 0x32, 0xcf, 0xf7};
  remote_mac(key1, sizeof key1, "Hi There", 8, mac);
  CHECK(memcmp(mac, want1, 32) == 0);
  CHECK(remote_mac_equal(mac, want1));
  static const unsigned char want2[32] = {0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e, 0x6a, 0x04, 0x24,
                                          0x26, 0x08, 0x95, 0x75, 0xc7, 0x5a, 0x00, 0x3f, 0x08, 0x9d, 0x27,
                                          0x39, 0x83, 0x9d, 0xec, 0x58, 0xb9, 0x64, 0xec, 0x38, 0x43};
  const char *data2 = "what do ya want for nothing?";
  remote_mac((const unsigned char *)"Jefe", 4, data2, strlen(data2), mac);
  CHECK(memcmp(mac, want2, 32) == 0);
  mac[31] ^= 1;
  CHECK(!remote_mac_equal(mac, want2));
}

/* ---- across processes ---- */

typedef struct report {
  int wrong;
  latch_stats stats;
} report;

/* Runs run_all in a child; start (may be -1) is a pipe it waits on to go. */
static pid_t spawn(const char *url, const char *dir, int graphs, int start, int out) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid != 0) return pid;
  char go;
  if (start >= 0 && read(start, &go, 1) < 0) _exit(2);
  report r;
  memset(&r, 0, sizeof r);
  r.wrong = run_all(url, dir, NULL, graphs, &r.stats);
  _exit(write(out, &r, sizeof r) == (ssize_t)sizeof r ? 0 : 1);
}

static bool collect(pid_t pid, int in, report *r) {
  memset(r, 0, sizeof *r);
  ssize_t got = read(in, r, sizeof *r);
  int status = 0;
  waitpid(pid, &status, 0);
  return got == (ssize_t)sizeof *r && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void across_processes(void) {
  redis_server s;
  if (!redis_start(&s, NULL, NULL)) {
    CHECK_MSG(false, "redis-server did not start");
    return;
  }
  char url[128], a[64], b[64];
  redis_url(&s, NULL, "", url, sizeof url);
  make_temp_dir(a);
  make_temp_dir(b);
  int fds[2];
  CHECK(pipe(fds) == 0);
  report first, second;
  CHECK(collect(spawn(url, a, 3, -1, fds[1]), fds[0], &first));
  CHECK(collect(spawn(url, b, 3, -1, fds[1]), fds[0], &second));
  CHECK_EQ_INT(first.wrong, 0);
  CHECK_EQ_INT((int)first.stats.compiles, 3);
  CHECK_EQ_INT((int)first.stats.remote_writes, 3);
  CHECK_EQ_INT(second.wrong, 0);
  CHECK_EQ_INT((int)second.stats.compiles, 0); /* an empty disk and a warm Redis: nothing compiled */
  CHECK_EQ_INT((int)second.stats.remote_loads, 3);
  CHECK_EQ_INT(count_files(b, ""), 3); /* remote hits were written to the disk cache */
  CHECK_EQ_INT(count_keys(&s, "latch:*:lease:*"), 0);
  /* the disk comes first: a third process on b loads from disk with Redis gone */
  redis_signal(&s, SIGKILL);
  report third;
  CHECK(collect(spawn(url, b, 3, -1, fds[1]), fds[0], &third));
  CHECK_EQ_INT(third.wrong, 0);
  CHECK_EQ_INT((int)third.stats.compiles, 0);
  CHECK_EQ_INT((int)third.stats.disk_loads, 3);
  close(fds[0]);
  close(fds[1]);
  remove_tree(a);
  remove_tree(b);
  redis_stop(&s);
}

/* 8 processes with empty disks, let go together on the same 4 graphs: each is compiled once
 * in all, whatever the order. */
static void racing(void) {
  enum { PROCS = 8, GRAPHS = 4 };
  redis_server s;
  if (!redis_start(&s, NULL, NULL)) {
    CHECK_MSG(false, "redis-server did not start");
    return;
  }
  char url[128], dirs[PROCS][64];
  redis_url(&s, NULL, "", url, sizeof url);
  int go[2], out[2];
  CHECK(pipe(go) == 0 && pipe(out) == 0);
  pid_t pids[PROCS];
  for (int p = 0; p < PROCS; p++) {
    make_temp_dir(dirs[p]);
    pids[p] = spawn(url, dirs[p], GRAPHS, go[0], out[1]);
  }
  char bytes[PROCS] = {0};
  CHECK(write(go[1], bytes, PROCS) == PROCS); /* one byte each: they start together */
  close(go[0]);
  close(go[1]);
  int compiles = 0, remote_loads = 0, wrong = 0, ok = 0;
  for (int p = 0; p < PROCS; p++) {
    report r;
    ok += collect(pids[p], out[0], &r);
    compiles += (int)r.stats.compiles;
    remote_loads += (int)r.stats.remote_loads;
    wrong += r.wrong;
  }
  CHECK_EQ_INT(ok, PROCS);
  CHECK_EQ_INT(wrong, 0);
  CHECK_EQ_INT(compiles, GRAPHS);
  CHECK_EQ_INT(remote_loads, PROCS * GRAPHS - GRAPHS);
  CHECK_EQ_INT(count_keys(&s, "latch:*:lease:*"), 0);
  close(out[0]);
  close(out[1]);
  for (int p = 0; p < PROCS; p++) {
    char dir[64]; /* a whole row: GCC otherwise sizes the argument as the whole array */
    memcpy(dir, dirs[p], sizeof dir);
    remove_tree(dir);
  }
  redis_stop(&s);
}

/* ---- leases ---- */

/* The lease key for graph g under rt's fingerprint. */
static void lease_key_of(latch_runtime *rt, int g, char out[REMOTE_KEY_MAX]) {
  int64_t dims[1] = {4};
  latch_tensor *x = latch_from_host(rt, LATCH_F32, 1, dims, xs);
  latch_tensor *k = latch_scalar(rt, LATCH_F32, g + 2), *one = latch_scalar(rt, LATCH_F32, 1);
  latch_tensor *a = latch_binary(LATCH_MUL, x, k), *b = latch_binary(LATCH_SUB, a, one), *y = latch_relu(b);
  cache_key key = {0, 0};
  CHECK(cap_graph_key(rt, 1, &y, &key) == LATCH_OK);
  remote_lease_key(cache_remote_config_of(rt->remote)->namespace_name, key, rt->fingerprint, out);
  latch_tensor *all[] = {x, k, one, a, b, y};
  for (int i = 0; i < 6; i++) latch_release(all[i]);
}

/* A lease held by a process that died (it expires) is taken over; one that stays past the
 * wait bound is given up on. Either way the graph is compiled here, once, and right. */
static void dead_lease_holder(void) {
  redis_server s;
  if (!redis_start(&s, NULL, NULL)) {
    CHECK_MSG(false, "redis-server did not start");
    return;
  }
  char url[128], name[REMOTE_KEY_MAX];
  redis_url(&s, NULL, "wait_ms=5000", url, sizeof url);
  latch_runtime *rt = open_rt(url, NULL, NULL);
  redisContext *c = redis_client(&s, NULL);
  CHECK(rt && c);
  if (!rt || !c) return;
  lease_key_of(rt, 0, name);
  redisReply *r = redisCommand(c, "SET %s dead-holder PX 300", name);
  CHECK(r && r->type == REDIS_REPLY_STATUS);
  if (r) freeReplyObject(r);
  CHECK_EQ_INT(run_graph(rt, 0), 0);
  cache_remote_stats rs;
  cache_remote_get_stats(rt->remote, &rs);
  CHECK_EQ_INT((int)stats_of(rt).compiles, 1);
  CHECK_EQ_INT((int)rs.lease_waits, 1);
  CHECK_EQ_INT((int)rs.wait_timeouts, 0);
  latch_close(rt);

  redis_url(&s, NULL, "wait_ms=200", url, sizeof url);
  rt = open_rt(url, NULL, NULL);
  if (!rt) return;
  lease_key_of(rt, 1, name);
  r = redisCommand(c, "SET %s stuck-holder", name); /* no expiry: never goes away */
  if (r) freeReplyObject(r);
  CHECK_EQ_INT(run_graph(rt, 1), 0);
  cache_remote_get_stats(rt->remote, &rs);
  CHECK_EQ_INT((int)stats_of(rt).compiles, 1);
  CHECK_EQ_INT((int)rs.wait_timeouts, 1);
  CHECK_EQ_INT((int)stats_of(rt).remote_writes, 1); /* its entry is written all the same */
  latch_close(rt);
  redisFree(c);
  redis_stop(&s);
}

/* ---- faults ---- */

/* Runs graphs [0, 4) in one runtime on url, calling fault(ctx) after the first; checks every
 * output, the one warning (containing want, not containing never), and the compiles. */
static void faulty_run(const char *url, void (*fault)(void *), void *ctx, const char *want, const char *never) {
  cache_remote_reset_warnings();
  capture_begin();
  latch_runtime *rt = open_rt(url, NULL, NULL);
  int wrong = 0;
  for (int g = 0; rt && g < 4; g++) {
    wrong += run_graph(rt, g);
    if (g == 0 && fault) fault(ctx);
  }
  latch_stats st = rt ? stats_of(rt) : (latch_stats){0};
  if (rt) latch_close(rt);
  const char *text = capture_end();
  CHECK(rt != NULL);
  CHECK_EQ_INT(wrong, 0);
  CHECK_EQ_INT((int)st.compiles, 4);
  CHECK_MSG(count_occurrences(text, "latch: warning: compile cache: remote") == 1, "warnings:\n%s", text);
  CHECK_MSG(strstr(text, want) != NULL, "no \"%s\" in:\n%s", want, text);
  if (never) CHECK_MSG(strstr(text, never) == NULL, "\"%s\" leaked into:\n%s", never, text);
}

static void kill_server(void *ctx) { redis_signal(ctx, SIGKILL); }

static void killed_mid_run(void) {
  redis_server s;
  if (!redis_start(&s, NULL, NULL)) {
    CHECK_MSG(false, "redis-server did not start");
    return;
  }
  char url[128];
  redis_url(&s, NULL, "", url, sizeof url);
  faulty_run(url, kill_server, &s, "going on with the local tiers", NULL);
  /* nobody listens any more: refused from the start, then resting */
  cache_remote_reset_warnings();
  capture_begin();
  latch_runtime *rt = open_rt(url, NULL, NULL);
  int wrong = 0;
  for (int g = 0; rt && g < 6; g++) wrong += run_graph(rt, g);
  cache_remote_stats rs = {0};
  if (rt) cache_remote_get_stats(rt->remote, &rs);
  if (rt) latch_close(rt);
  capture_end();
  CHECK_EQ_INT(wrong, 0);
  CHECK_EQ_INT((int)rs.failures, 3); /* three in a row, then the tier rests */
  CHECK_EQ_INT((int)rs.rests, 1);
  CHECK(rs.skipped > 0);
  redis_stop(&s);
}

typedef struct pause_ctx {
  redis_server *server;
  const char *command;
} pause_ctx;

/* Sends the command without waiting for its answer (DEBUG SLEEP answers only when done). */
static void pause_server(void *ctx) {
  pause_ctx *p = ctx;
  redisContext *c = redis_client(p->server, NULL);
  if (!c) return;
  redisAppendCommand(c, p->command);
  int done = 0;
  while (!done && redisBufferWrite(c, &done) == REDIS_OK) {
  }
  redis_sleep_ms(20); /* the server has read it: redisFree's close must not cancel it */
  redisFree(c);
}

static void paused_past_timeout(void) {
  redis_server s;
  if (!redis_start(&s, NULL, NULL)) {
    CHECK_MSG(false, "redis-server did not start");
    return;
  }
  char url[128];
  redis_url(&s, NULL, "timeout_ms=100&wait_ms=100", url, sizeof url);
  pause_ctx pause = {&s, "CLIENT PAUSE 1500 ALL"};
  faulty_run(url, pause_server, &pause, "no answer within the timeout", NULL);
  redis_sleep_ms(1500);
  redisContext *c = redis_client(&s, NULL); /* graph 0 went in before the pause: start empty */
  redisReply *r = c ? redisCommand(c, "FLUSHALL") : NULL;
  CHECK(r && r->type == REDIS_REPLY_STATUS);
  if (r) freeReplyObject(r);
  if (c) redisFree(c);
  pause_ctx sleep = {&s, "DEBUG SLEEP 1.5"};
  faulty_run(url, pause_server, &sleep, "no answer within the timeout", NULL);
  redis_stop(&s);
}

static void wrong_password(void) {
  redis_server s;
  if (!redis_start(&s, "right-pw-123", NULL)) {
    CHECK_MSG(false, "redis-server did not start");
    return;
  }
  char url[128];
  redis_url(&s, ":wrong-pw-456", "", url, sizeof url);
  faulty_run(url, NULL, NULL, "authentication failed", "wrong-pw-456");
  redis_url(&s, NULL, "", url, sizeof url); /* no password at all */
  faulty_run(url, NULL, NULL, "authentication", NULL);
  /* the right one works: the second runtime compiles nothing */
  redis_url(&s, ":right-pw-123", "", url, sizeof url);
  latch_stats st;
  CHECK_EQ_INT(run_all(url, NULL, NULL, 2, &st), 0);
  CHECK_EQ_INT((int)st.remote_writes, 2);
  CHECK_EQ_INT(run_all(url, NULL, NULL, 2, &st), 0);
  CHECK_EQ_INT((int)st.compiles, 0);
  redis_stop(&s);
}

static void out_of_memory(void) {
  redis_server s;
  if (!redis_start(&s, NULL, "--maxmemory-policy", "noeviction", NULL)) {
    CHECK_MSG(false, "redis-server did not start");
    return;
  }
  redisContext *c = redis_client(&s, NULL);
  redisReply *r = c ? redisCommand(c, "CONFIG SET maxmemory 1") : NULL; /* every write refused: OOM */
  CHECK(r && r->type == REDIS_REPLY_STATUS);
  if (r) freeReplyObject(r);
  if (c) redisFree(c);
  char url[128];
  redis_url(&s, NULL, "", url, sizeof url);
  faulty_run(url, NULL, NULL, "OOM", NULL);
  redis_stop(&s);
}

/* A server that answers every request with an HTTP error: not Redis's protocol. */
typedef struct fake_server {
  int fd, port;
  pthread_t thread;
} fake_server;

static void *fake_serve(void *arg) {
  fake_server *f = arg;
  for (;;) {
    int client = accept(f->fd, NULL, NULL);
    if (client < 0) return NULL;
    char buf[256];
    if (recv(client, buf, sizeof buf, 0) > 0) {
      static const char garbage[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
      ssize_t sent = send(client, garbage, sizeof garbage - 1, MSG_NOSIGNAL);
      (void)sent;
    }
    close(client);
  }
}

static void garbage_answers(void) {
  fake_server f;
  f.fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof addr;
  CHECK(bind(f.fd, (struct sockaddr *)&addr, sizeof addr) == 0 && listen(f.fd, 16) == 0);
  CHECK(getsockname(f.fd, (struct sockaddr *)&addr, &len) == 0);
  f.port = ntohs(addr.sin_port);
  pthread_create(&f.thread, NULL, fake_serve, &f);
  char url[128];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d?unsigned=1", f.port);
  faulty_run(url, NULL, NULL, "not a Redis answer", NULL);
  shutdown(f.fd, SHUT_RDWR);
  close(f.fd);
  pthread_join(f.thread, NULL);
}

/* ---- trust ---- */

/* The value of the one entry key that is in after and not in before (KEYS lists). */
static void new_entry(redisContext *c, redisReply *before, char *name, size_t size) {
  redisReply *after = redisCommand(c, "KEYS latch:*");
  name[0] = '\0';
  for (size_t i = 0; after && i < after->elements; i++) {
    bool old = false;
    for (size_t j = 0; before && j < before->elements; j++) old = old || strcmp(before->element[j]->str, after->element[i]->str) == 0;
    if (!old && !strstr(after->element[i]->str, ":lease:"))
      snprintf(name, size, "%s", after->element[i]->str);
  }
  if (after) freeReplyObject(after);
}

/* Runs graph g in a fresh runtime with secret; the name of the entry it wrote. */
static void write_graph(redisContext *c, const char *url, const char *secret, int g, char *name, size_t size) {
  redisReply *before = redisCommand(c, "KEYS latch:*");
  latch_runtime *rt = open_rt(url, NULL, secret);
  CHECK(rt && run_graph(rt, g) == 0);
  if (rt) latch_close(rt);
  new_entry(c, before, name, size);
  if (before) freeReplyObject(before);
  CHECK(name[0] != '\0');
}

/* Graph g in a fresh runtime with secret: it must be right, compiled (never loaded), and
 * warned about once with want. */
static void expect_rejected(const char *url, const char *secret, int g, const char *want) {
  cache_remote_reset_warnings();
  capture_begin();
  latch_runtime *rt = open_rt(url, NULL, secret);
  int wrong = rt ? run_graph(rt, g) : 4;
  latch_stats st = rt ? stats_of(rt) : (latch_stats){0};
  if (rt) latch_close(rt);
  const char *text = capture_end();
  CHECK_EQ_INT(wrong, 0);
  CHECK_EQ_INT((int)st.compiles, 1);
  CHECK_EQ_INT((int)st.remote_loads, 0);
  CHECK_MSG(strstr(text, want) != NULL, "no \"%s\" in:\n%s", want, text);
}

static void poisoned_and_signed(void) {
  redis_server s;
  if (!redis_start(&s, NULL, NULL)) {
    CHECK_MSG(false, "redis-server did not start");
    return;
  }
  char url[128], strict[128], e0[REMOTE_KEY_MAX], e1[REMOTE_KEY_MAX];
  redis_url(&s, NULL, "", url, sizeof url);
  redis_url(&s, NULL, "unsigned=0", strict, sizeof strict);
  redisContext *c = redis_client(&s, NULL);
  if (!c) return;
  /* poisoned: graph 1's valid entry stored under graph 0's key */
  write_graph(c, url, NULL, 0, e0, sizeof e0);
  write_graph(c, url, NULL, 1, e1, sizeof e1);
  redisReply *r = redisCommand(c, "COPY %s %s REPLACE", e1, e0);
  CHECK(r && r->type == REDIS_REPLY_INTEGER && r->integer == 1);
  if (r) freeReplyObject(r);
  expect_rejected(url, NULL, 0, cache_disk_problem_name(CACHE_DISK_MISMATCH));
  /* the compile that followed replaced it: the next process loads graph 0 */
  latch_stats st;
  CHECK_EQ_INT(run_all(url, NULL, NULL, 1, &st), 0);
  CHECK_EQ_INT((int)st.remote_loads, 1);

  /* signed with one secret, read with another: mis-signed */
  write_graph(c, url, "secret-one", 2, e0, sizeof e0);
  expect_rejected(strict, "secret-two", 2, cache_disk_problem_name(CACHE_DISK_BAD_SIGNATURE));
  /* written unsigned (opted in), read under a secret without unsigned=1: refused */
  write_graph(c, url, NULL, 3, e0, sizeof e0);
  expect_rejected(strict, "secret-one", 3, cache_disk_problem_name(CACHE_DISK_UNSIGNED));
  /* a signed entry with one byte of its payload changed and its checksums made whole again
   * is what only a MAC catches */
  write_graph(c, url, "secret-one", 4, e0, sizeof e0);
  r = redisCommand(c, "GET %s", e0);
  if (r && r->type == REDIS_REPLY_STRING) {
    cache_disk_entry_info info;
    const unsigned char *payload = NULL;
    CHECK(remote_entry_decode((unsigned char *)r->str, r->len, NULL, NULL, NULL, 0, false, &info, &payload) == CACHE_DISK_OK);
    char *changed = malloc(info.payload_bytes);
    memcpy(changed, payload, info.payload_bytes);
    changed[info.payload_bytes - 2] ^= 0x01;
    size_t len = 0;
    unsigned char *forged = remote_entry_encode(info.key, info.fingerprint, changed, info.payload_bytes,
                                                (const unsigned char *)"forger", 6, &len);
    redisReply *w = redisCommand(c, "SET %s %b", e0, forged, len);
    if (w) freeReplyObject(w);
    free(forged);
    free(changed);
    expect_rejected(strict, "secret-one", 4, cache_disk_problem_name(CACHE_DISK_BAD_SIGNATURE));
  } else {
    CHECK_MSG(false, "graph 4's entry is missing");
  }
  if (r) freeReplyObject(r);
  /* with the right secret, signed entries are loaded */
  write_graph(c, url, "secret-one", 5, e0, sizeof e0);
  latch_runtime *rt = open_rt(strict, NULL, "secret-one");
  CHECK(rt && run_graph(rt, 5) == 0);
  CHECK(rt && stats_of(rt).remote_loads == 1);
  if (rt) latch_close(rt);
  redisFree(c);
  redis_stop(&s);
}

/* Without a secret and without unsigned=1 the tier is off: said once, nothing written or read,
 * the program's results unchanged. */
static void unsigned_off_by_default(void) {
  redis_server s;
  if (!redis_start(&s, NULL, NULL)) {
    CHECK_MSG(false, "redis-server did not start");
    return;
  }
  char url[128];
  redis_url(&s, NULL, "unsigned=0", url, sizeof url);
  cache_remote_reset_warnings();
  capture_begin();
  latch_stats st;
  int wrong = run_all(url, NULL, NULL, 2, &st);
  const char *text = capture_end();
  CHECK_EQ_INT(wrong, 0);
  CHECK_EQ_INT((int)st.compiles, 2);
  CHECK_EQ_INT((int)st.remote_writes, 0);
  CHECK_EQ_INT(count_keys(&s, "latch:*"), 0);
  CHECK_MSG(count_occurrences(text, "no LATCH_CACHE_SECRET") == 1, "warnings:\n%s", text);
  /* with a secret the same URL stores and loads signed entries */
  CHECK_EQ_INT(run_all(url, NULL, "k", 2, &st), 0);
  CHECK_EQ_INT((int)st.remote_writes, 2);
  CHECK_EQ_INT(run_all(url, NULL, "k", 2, &st), 0);
  CHECK_EQ_INT((int)st.remote_loads, 2);
  redis_stop(&s);
}

static void unix_socket(void) {
  redis_server s;
  if (!redis_start(&s, NULL, NULL)) {
    CHECK_MSG(false, "redis-server did not start");
    return;
  }
  char url[256];
  snprintf(url, sizeof url, "unix://%s?db=2&unsigned=1", s.socket);
  latch_stats st;
  CHECK_EQ_INT(run_all(url, NULL, NULL, 2, &st), 0);
  CHECK_EQ_INT((int)st.remote_writes, 2);
  CHECK_EQ_INT(run_all(url, NULL, NULL, 2, &st), 0);
  CHECK_EQ_INT((int)st.compiles, 0);
  CHECK_EQ_INT((int)st.remote_loads, 2);
  CHECK_EQ_INT(count_keys(&s, "latch:*"), 0); /* db 0 is empty: they went to db 2 */
  redis_stop(&s);
}

int main(void) {
  RUN(url_parsing);
  RUN(hmac_vectors);
  RUN(across_processes);
  RUN(racing);
  RUN(dead_lease_holder);
  RUN(killed_mid_run);
  RUN(paused_past_timeout);
  RUN(wrong_password);
  RUN(out_of_memory);
  RUN(garbage_answers);
  RUN(poisoned_and_signed);
  RUN(unsigned_off_by_default);
  RUN(unix_socket);
  return TEST_REPORT();
}
