/* The remote tier's configuration from the options, one path for latch_open and the command:
 * the URL, then the namespace and the password given beside it (LATCH_CACHE_NAMESPACE,
 * LATCH_CACHE_PASSWORD or LATCH_CACHE_PASSWORD_FILE, read by settings.c), so a password need
 * not sit in a URL that shows in ps. A password file must be a regular file of this user's
 * that nobody else may read or write, as ssh asks of a private key. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capture.h"

/* The file's first line into out (NUL-terminated, at most size - 1 bytes); the checks above. */
static hlo_status read_password_file(const char *path, char *out, size_t size, hlo_diag *diag) {
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return hlo_diag_set(diag, HLO_ERR_INPUT, "LATCH_CACHE_PASSWORD_FILE %s: %s", path, strerror(errno));
  struct stat st;
  hlo_status status = HLO_OK;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    status = hlo_diag_set(diag, HLO_ERR_INPUT, "LATCH_CACHE_PASSWORD_FILE %s: not a regular file", path);
  else if (st.st_uid != geteuid())
    status = hlo_diag_set(diag, HLO_ERR_INPUT, "LATCH_CACHE_PASSWORD_FILE %s: owned by another user (uid %lu)", path,
                          (unsigned long)st.st_uid);
  else if (st.st_mode & (S_IRWXG | S_IRWXO))
    status = hlo_diag_set(diag, HLO_ERR_INPUT,
                          "LATCH_CACHE_PASSWORD_FILE %s: group or others may read or write it (mode %03o); "
                          "chmod 600 it", path, (unsigned)(st.st_mode & 0777));
  ssize_t n = status == HLO_OK ? read(fd, out, size - 1) : 0;
  close(fd);
  if (status != HLO_OK) return status;
  if (n < 0) return hlo_diag_set(diag, HLO_ERR_INPUT, "LATCH_CACHE_PASSWORD_FILE %s: %s", path, strerror(errno));
  out[n] = '\0';
  out[strcspn(out, "\r\n")] = '\0';
  if ((size_t)n == size - 1 && strlen(out) == size - 1) {
    explicit_bzero(out, size);
    return hlo_diag_set(diag, HLO_ERR_INPUT, "LATCH_CACHE_PASSWORD_FILE %s: longer than %zu bytes", path, size - 2);
  }
  return HLO_OK;
}

static hlo_status set_password(const latch_options *options, cache_remote_config *config, hlo_diag *diag) {
  if (options->cache_password && options->cache_password_file)
    return hlo_diag_set(diag, HLO_ERR_INPUT,
                        "LATCH_CACHE_PASSWORD and LATCH_CACHE_PASSWORD_FILE are both set: give the password once");
  if (options->cache_password) return cache_remote_set_password(config, options->cache_password, diag);
  if (!options->cache_password_file) return HLO_OK;
  char password[CACHE_REMOTE_TEXT_MAX + 1];
  hlo_status status = read_password_file(options->cache_password_file, password, sizeof password, diag);
  if (status == HLO_OK) status = cache_remote_set_password(config, password, diag);
  explicit_bzero(password, sizeof password);
  return status;
}

hlo_status cap_remote_config(const latch_options *options, const char *url, cache_remote_config *config,
                             hlo_diag *diag) {
  if (cache_remote_parse_url(url, config, diag) != HLO_OK) return diag->status;
  if (options->cache_namespace && cache_remote_set_namespace(config, options->cache_namespace, diag) != HLO_OK)
    return diag->status;
  return set_password(options, config, diag);
}
