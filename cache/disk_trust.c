/* Whether a cache directory can be trusted. Its entries are executables this process loads
 * and runs, so whoever may write them may run code here: a directory owned by another user,
 * or one that group or others may write to, is refused, as ssh refuses such a key directory.
 * The directory is checked, not each entry: nobody else can add or replace a file in a
 * directory that only its owner may write. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "disk_internal.h"

bool cache_disk_dir_is_private(const char *dir, char *why, size_t why_size) {
  struct stat st;
  if (stat(dir, &st) != 0) {
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
