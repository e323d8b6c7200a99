/* One connection to a Redis server: connect with a deadline, then one command at a time,
 * written with hiredis's formatter and read with its reply parser over our own non-blocking
 * socket (why: remote_internal.h). */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "remote_internal.h"

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

int remote_wait_for(int fd, short events, double deadline) {
  for (;;) {
    double left = deadline - now_ms();
    if (left <= 0) return 0;
    struct pollfd p = {.fd = fd, .events = events};
    int n = poll(&p, 1, (int)left + 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n;
    return 1;
  }
}

static remote_fail finish_connect(int fd, double deadline, char *why, size_t why_size) {
  int ready = remote_wait_for(fd, POLLOUT, deadline);
  if (ready == 0) {
    snprintf(why, why_size, "connect timed out");
    return REMOTE_TIMEOUT;
  }
  int err = 0;
  socklen_t len = sizeof err;
  if (ready < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err) {
    snprintf(why, why_size, "connect: %s", strerror(err));
    return REMOTE_UNREACHABLE;
  }
  return REMOTE_OK;
}

static remote_fail connect_to(int family, const struct sockaddr *addr, socklen_t addr_len, double deadline, int *fd_out,
                              char *why, size_t why_size) {
  int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    snprintf(why, why_size, "socket: %s", strerror(errno));
    return REMOTE_UNREACHABLE;
  }
  remote_fail fail = REMOTE_OK;
  if (connect(fd, addr, addr_len) != 0) {
    if (errno == EINPROGRESS || errno == EAGAIN) {
      fail = finish_connect(fd, deadline, why, why_size);
    } else {
      snprintf(why, why_size, "connect: %s", strerror(errno));
      fail = REMOTE_UNREACHABLE;
    }
  }
  if (fail == REMOTE_OK && family != AF_UNIX) {
    int one = 1; /* requests are small and answered one at a time: no Nagle delay */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  if (fail != REMOTE_OK) close(fd);
  else *fd_out = fd;
  return fail;
}

static remote_fail open_unix(const char *path, double deadline, int *fd, char *why, size_t why_size) {
  struct sockaddr_un addr;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  if (strlen(path) >= sizeof addr.sun_path) {
    snprintf(why, why_size, "socket path too long");
    return REMOTE_UNREACHABLE;
  }
  memcpy(addr.sun_path, path, strlen(path) + 1);
  return connect_to(AF_UNIX, (struct sockaddr *)&addr, sizeof addr, deadline, fd, why, why_size);
}

static remote_fail open_tcp(const cache_remote_config *c, double deadline, int *fd, char *why, size_t why_size) {
  char port[16];
  snprintf(port, sizeof port, "%d", c->port);
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *list = NULL;
  int rc = getaddrinfo(c->host, port, &hints, &list);
  if (rc != 0) {
    snprintf(why, why_size, "cannot resolve the host: %s", gai_strerror(rc));
    return rc == EAI_MEMORY ? REMOTE_NOMEM : REMOTE_UNREACHABLE;
  }
  remote_fail fail = REMOTE_UNREACHABLE;
  for (struct addrinfo *a = list; a && fail != REMOTE_OK && now_ms() < deadline; a = a->ai_next)
    fail = connect_to(a->ai_family, a->ai_addr, a->ai_addrlen, deadline, fd, why, why_size);
  freeaddrinfo(list);
  return fail;
}

remote_fail remote_conn_open(remote_conn *conn, const cache_remote_config *config, int timeout_ms, char *why,
                             size_t why_size) {
  memset(conn, 0, sizeof *conn);
  conn->fd = -1;
  double deadline = now_ms() + timeout_ms;
  int fd = -1;
  remote_fail fail = config->unix_socket ? open_unix(config->host, deadline, &fd, why, why_size)
                                         : open_tcp(config, deadline, &fd, why, why_size);
  if (fail != REMOTE_OK) return fail;
  conn->fd = fd;
  if (config->tls && (fail = remote_tls_start(conn, config, deadline, why, why_size)) != REMOTE_OK) {
    remote_conn_close(conn);
    return fail;
  }
  conn->reader = redisReaderCreate();
  if (!conn->reader) {
    remote_conn_close(conn);
    snprintf(why, why_size, "out of memory");
    return REMOTE_NOMEM;
  }
  return REMOTE_OK;
}

void remote_conn_close(remote_conn *conn) {
  remote_tls_close(conn);
  if (conn->fd >= 0) close(conn->fd);
  if (conn->reader) redisReaderFree(conn->reader);
  conn->fd = -1;
  conn->reader = NULL;
}

static remote_fail send_all(remote_conn *conn, const char *data, size_t len, double deadline, char *why,
                            size_t why_size) {
  if (conn->tls) return remote_tls_send(conn, data, len, deadline, why, why_size);
  int fd = conn->fd;
  while (len > 0) {
    ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
    if (n > 0) {
      data += n;
      len -= (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (remote_wait_for(fd, POLLOUT, deadline) > 0) continue;
      snprintf(why, why_size, "timed out sending a command");
      return REMOTE_TIMEOUT;
    }
    snprintf(why, why_size, "send: %s", strerror(errno));
    return REMOTE_LOST;
  }
  return REMOTE_OK;
}

static remote_fail read_reply(remote_conn *conn, double deadline, redisReply **reply, char *why, size_t why_size) {
  char buf[65536];
  for (;;) {
    void *got = NULL;
    if (redisReaderGetReply(conn->reader, &got) != REDIS_OK) {
      snprintf(why, why_size, "not a Redis answer (%.80s)", conn->reader->errstr);
      return conn->reader->err == REDIS_ERR_OOM ? REMOTE_NOMEM : REMOTE_PROTOCOL;
    }
    if (got) {
      *reply = got;
      return REMOTE_OK;
    }
    remote_fail fail = REMOTE_OK;
    ssize_t n = conn->tls ? remote_tls_recv(conn, buf, sizeof buf, deadline, &fail, why, why_size)
                          : recv(conn->fd, buf, sizeof buf, 0);
    if (conn->tls && n <= 0) return fail;
    if (n > 0) {
      if (redisReaderFeed(conn->reader, buf, (size_t)n) != REDIS_OK) {
        snprintf(why, why_size, "out of memory reading an answer");
        return REMOTE_NOMEM;
      }
      continue;
    }
    if (n == 0) {
      snprintf(why, why_size, "the server closed the connection");
      return REMOTE_LOST;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (remote_wait_for(conn->fd, POLLIN, deadline) > 0) continue;
      snprintf(why, why_size, "no answer within the timeout");
      return REMOTE_TIMEOUT;
    }
    snprintf(why, why_size, "recv: %s", strerror(errno));
    return REMOTE_LOST;
  }
}

remote_fail remote_conn_call(remote_conn *conn, int argc, const char **argv, const size_t *lens, int timeout_ms,
                             redisReply **reply, char *why, size_t why_size) {
  *reply = NULL;
  double deadline = now_ms() + timeout_ms;
  char *command = NULL;
  int len = redisFormatCommandArgv(&command, argc, argv, lens);
  if (len < 0 || !command) {
    snprintf(why, why_size, "out of memory formatting a command");
    return REMOTE_NOMEM;
  }
  remote_fail fail = send_all(conn, command, (size_t)len, deadline, why, why_size);
  if (strcmp(argv[0], "AUTH") == 0) explicit_bzero(command, (size_t)len); /* the password, in clear */
  redisFreeCommand(command);
  if (fail == REMOTE_OK) fail = read_reply(conn, deadline, reply, why, why_size);
  return fail;
}
