/* Whether a cache directory can be trusted. Its entries are executables this process loads
 * and runs, so whoever may write them may run code here: a directory owned by another user,
 * or one that group or others may write to, is refused, as ssh refuses such a key directory.
 * The directory is opened once (O_NOFOLLOW: not through a symlink) and checked through that
 * descriptor, and every entry is reached relative to it, so nobody can swap the directory
 * between the check and a read. Its parents are checked too, up to the first one root owns:
 * someone who may write to a parent may rename the cache directory away and put their own in
 * its place before the next process opens it. Entries owned by another user are refused when
 * read (disk_io.c). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "disk_internal.h"

bool cache_disk_dir_is_private(int dirfd, char *why, size_t why_size) {
  struct stat st;
  if (fstat(dirfd, &st) != 0) {
    snprintf(why, why_size, "cannot stat it: %s", strerror(errno));
    return false;
  }
  if (st.st_uid != geteuid()) {
    snprintf(why, why_size, "it belongs to uid %ld, not to this user (uid %ld)", (long)st.st_uid, (long)geteuid());
    return false;
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    snprintf(why, why_size, "group or others may write to it (mode %03o; chmod 700 makes it private)",
             (unsigned)(st.st_mode & 0777));
    return false;
  }
  return true;
}

/* One parent: this user's or root's; others may write to it only when root owns it with the
 * sticky bit (/tmp), where nobody may rename what another user made. */
static bool parent_is_safe(const char *path, const struct stat *st, char *why, size_t why_size) {
  uid_t me = geteuid();
  if (st->st_uid != me && st->st_uid != 0) {
    snprintf(why, why_size, "its parent %s belongs to uid %ld, not to this user (uid %ld) or root", path,
             (long)st->st_uid, (long)me);
    return false;
  }
  bool shared = (st->st_mode & (S_IWGRP | S_IWOTH)) != 0;
  if (shared && !(st->st_uid == 0 && (st->st_mode & S_ISVTX))) {
    snprintf(why, why_size, "group or others may write to its parent %s (mode %03o), so they could replace it", path,
             (unsigned)(st->st_mode & 0777));
    return false;
  }
  return true;
}

bool cache_disk_parents_are_safe(const char *dir, char *why, size_t why_size) {
  char path[4096];
  if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) return true; /* cache_disk_open refused it */
  for (;;) {
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/') path[--len] = '\0'; /* "a/b/" is "a/b" */
    char *slash = strrchr(path, '/');
    if (!slash) return true; /* a relative name's parents from the working directory are not checked */
    if (slash == path) slash[1] = '\0'; /* the parent is "/" */
    else *slash = '\0';
    struct stat st;
    if (stat(path, &st) != 0) {
      snprintf(why, why_size, "cannot stat its parent %s: %s", path, strerror(errno));
      return false;
    }
    if (!parent_is_safe(path, &st, why, why_size)) return false;
    if (st.st_uid == 0 || strcmp(path, "/") == 0) return true; /* root's: only root could swap it */
  }
}
