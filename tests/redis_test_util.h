/* A private redis-server for a test: 127.0.0.1 on a free port, a temporary directory, no
 * persistence; started and stopped (or killed) by the test itself. A missing redis-server is
 * a failure with a message saying so, never a silent skip. Header-only, like the other test
 * helpers. */
#ifndef LATCH_REDIS_TEST_UTIL_H
#define LATCH_REDIS_TEST_UTIL_H
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

typedef struct redis_server {
  pid_t pid; /* 0: not running */
  int port;
  char dir[64];
  char socket[128]; /* the unix socket, in dir */
} redis_server;

static inline int redis_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof addr;
  int port = -1;
  if (fd >= 0 && bind(fd, (struct sockaddr *)&addr, sizeof addr) == 0 &&
      getsockname(fd, (struct sockaddr *)&addr, &len) == 0)
    port = ntohs(addr.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

static inline void redis_sleep_ms(int ms) {
  struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

/* A blocking client of the test's own (hiredis), for setting things up; NULL if none. */
static inline redisContext *redis_client(const redis_server *s, const char *password) {
  struct timeval tv = {.tv_sec = 2};
  redisContext *c = redisConnectWithTimeout("127.0.0.1", s->port, tv);
  if (!c || c->err) {
    if (c) redisFree(c);
    return NULL;
  }
  redisSetTimeout(c, tv);
  if (password) {
    redisReply *r = redisCommand(c, "AUTH %s", password);
    if (r) freeReplyObject(r);
  }
  return c;
}

/* Starts the server with extra arguments (NULL-terminated list after password, which may be
 * NULL); false with a message on stderr when it does not come up. */
static inline bool redis_start(redis_server *s, const char *password, ...) {
  memset(s, 0, sizeof *s);
  snprintf(s->dir, sizeof s->dir, "/tmp/latch-redis-XXXXXX");
  if (!mkdtemp(s->dir)) return false;
  snprintf(s->socket, sizeof s->socket, "%s/redis.sock", s->dir);
  s->port = redis_free_port();
  char port[16], log[128];
  snprintf(port, sizeof port, "%d", s->port);
  snprintf(log, sizeof log, "%s/log", s->dir);
  const char *argv[40] = {"redis-server", "--port", port, "--bind", "127.0.0.1", "--dir", s->dir, "--save", "",
                          "--appendonly", "no", "--enable-debug-command", "yes", "--unixsocket", s->socket,
                          "--unixsocketperm", "700", "--logfile", log};
  int argc = 19;
  if (password) argv[argc++] = "--requirepass", argv[argc++] = password;
  va_list extra;
  va_start(extra, password);
  for (const char *a; argc < 38 && (a = va_arg(extra, const char *));) argv[argc++] = a;
  va_end(extra);
  argv[argc] = NULL;
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    execvp("redis-server", (char *const *)argv);
    _exit(127);
  }
  s->pid = pid;
  for (int i = 0; i < 200; i++) { /* up to 4 s for it to listen */
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      s->pid = 0;
      if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        fprintf(stderr, "redis-server was not found: the remote-cache tests need it (install-deps.sh installs "
                        "the redis-server package)\n");
      else fprintf(stderr, "redis-server exited at start; see its log\n");
      return false;
    }
    redisContext *c = redis_client(s, password);
    redisReply *r = c ? redisCommand(c, "PING") : NULL;
    /* an error still answers: a password given here, or one a config file asks for */
    bool up = r && (r->type == REDIS_REPLY_STATUS ||
                    (r->type == REDIS_REPLY_ERROR && (password || strncmp(r->str, "NOAUTH", 6) == 0)));
    if (r) freeReplyObject(r);
    if (c) redisFree(c);
    if (up) return true;
    redis_sleep_ms(20);
  }
  fprintf(stderr, "redis-server did not answer on port %d\n", s->port);
  return false;
}

static inline void redis_signal(redis_server *s, int signum) {
  if (s->pid <= 0) return;
  kill(s->pid, signum);
  int status;
  while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR) {
  }
  s->pid = 0;
}

static inline void redis_stop(redis_server *s) {
  redis_signal(s, SIGKILL);
  char command[128];
  snprintf(command, sizeof command, "rm -rf '%s'", s->dir);
  if (s->dir[0] && system(command) != 0) fprintf(stderr, "could not remove %s\n", s->dir);
  s->dir[0] = '\0';
}

/* "redis://127.0.0.1:PORT/0?" plus the query (may be ""). A test's server is its own, so
 * unless the query says unsigned=0 or unsigned=1 the URL opts in to unsigned entries
 * (unsigned=1): the tests of the default say unsigned=0. */
static inline void redis_url(const redis_server *s, const char *userinfo, const char *query, char *out, size_t size) {
  bool opted = query && strstr(query, "unsigned=");
  snprintf(out, size, "redis://%s%s127.0.0.1:%d/0?%s%s%s", userinfo ? userinfo : "", userinfo ? "@" : "", s->port,
           opted ? "" : "unsigned=1", query && *query && !opted ? "&" : "", query ? query : "");
}

#endif
