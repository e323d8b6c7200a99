/* The cache directory is private: created 0700; one owned by another user or
 * writable by group or others is refused with one warning, and a runtime on it still caches
 * in memory; an entry copied under another entry's name is rejected. The tests run as root,
 * who may chown a directory to another uid. */
#include <sys/stat.h>

#include "disk_test_util.h"
#include "latch.h"
#include "test.h"

static const char *const FP = "backend=test/1 latch=0 build=0 arch=x cpu= options=";

static cache_disk *open_quiet(const char *dir) {
  hlo_diag diag;
  hlo_diag_clear(&diag);
  cache_disk *disk = cache_disk_open(dir, 1 << 20, NULL, &diag);
  CHECK_MSG(disk != NULL, "%s", diag.message);
  return disk;
}

static void created_private(void) {
  char parent[64], dir[128];
  make_temp_dir(parent);
  snprintf(dir, sizeof dir, "%s/a/cache", parent);
  cache_disk *disk = open_quiet(dir);
  struct stat st;
  CHECK(stat(dir, &st) == 0 && (st.st_mode & 0777) == 0700);
  CHECK(disk && put_payload(disk, 1, FP) && get_matches(disk, 1, FP));
  if (disk) cache_disk_close(disk);
  remove_tree(parent);
}

/* A directory made unsafe by how: each is refused (no put, no get), with one warning that
 * names the directory and the reason. */
static void refused(const char *how) {
  char dir[64];
  make_temp_dir(dir);
  cache_disk *ok = open_quiet(dir); /* an entry written while the directory was private */
  CHECK(ok && put_payload(ok, 1, FP));
  if (ok) cache_disk_close(ok);
  if (strcmp(how, "group") == 0) CHECK(chmod(dir, 0770) == 0);
  else if (strcmp(how, "others") == 0) CHECK(chmod(dir, 0707) == 0);
  else CHECK(chown(dir, 4242, 4242) == 0);
  cache_disk_reset_warnings();
  capture_begin();
  cache_disk *disk = open_quiet(dir);
  cache_disk *again = open_quiet(dir);
  bool got = disk && get_matches(disk, 1, FP), put = disk && put_payload(disk, 2, FP);
  const char *text = capture_end();
  CHECK_MSG(!got && !put, "%s: the entries of a refused directory were used", how);
  CHECK_EQ_INT(count_occurrences(text, "latch: warning: compile cache:"), 1);
  CHECK(strstr(text, dir) != NULL);
  CHECK(strstr(text, strcmp(how, "owner") == 0 ? "belongs to uid 4242" : "group or others may write") != NULL);
  char path[512];
  entry_file(dir, 2, FP, path);
  CHECK(!file_exists(path));
  if (disk) cache_disk_close(disk);
  if (again) cache_disk_close(again);
  remove_tree(dir);
}

static void refused_group(void) { refused("group"); }
static void refused_others(void) { refused("others"); }
static void refused_owner(void) { refused("owner"); }

/* A runtime whose disk cache is refused still keeps compiled graphs in memory: the second
 * run of a graph is a hit, and the results are right. */
static void memory_still_works(void) {
  char dir[64];
  make_temp_dir(dir);
  CHECK(chmod(dir, 0777) == 0);
  latch_options options;
  latch_options_init(&options);
  options.backend = "reference";
  options.cache = "disk";
  options.cache_dir = dir;
  capture_begin();
  latch_runtime *rt = latch_open(&options);
  float want[3] = {2, 4, 6}, got[3] = {0};
  for (int round = 0; rt && round < 2; round++) {
    int64_t dims[1] = {3};
    float data[3] = {1, 2, 3};
    latch_tensor *x = latch_from_host(rt, LATCH_F32, 1, dims, data), *y = latch_binary(LATCH_ADD, x, x);
    CHECK(latch_read(y, got, sizeof got) == LATCH_OK);
    for (int i = 0; i < 3; i++) CHECK_NEAR(got[i], want[i], 0);
    latch_release(x), latch_release(y);
  }
  capture_end();
  CHECK(rt != NULL);
  if (!rt) return;
  latch_stats s;
  latch_get_stats(rt, &s);
  CHECK_EQ_INT((int)s.compiles, 1);
  CHECK_EQ_INT((int)s.cache_hits, 1);
  CHECK_EQ_INT((int)s.disk_writes, 0);
  latch_close(rt);
  CHECK_EQ_INT(count_files(dir, ""), 0);
  remove_tree(dir);
}

/* A whole, valid entry copied under another key's name is never served for that key. */
static void copied_entry_rejected(void) {
  char dir[64];
  make_temp_dir(dir);
  cache_disk *disk = open_quiet(dir);
  CHECK(disk && put_payload(disk, 1, FP));
  char from[512], to[512], command[1200];
  entry_file(dir, 1, FP, from);
  entry_file(dir, 2, FP, to);
  snprintf(command, sizeof command, "cp '%s' '%s'", from, to);
  CHECK(system(command) == 0 && file_exists(to));
  capture_begin();
  CHECK(disk && !get_matches(disk, 2, FP));
  capture_end();
  CHECK(disk && get_matches(disk, 1, FP));
  if (disk) cache_disk_close(disk);
  remove_tree(dir);
}

/* The directory reached through a parent others may write to (/tmp/x mode 0777, no sticky
 * bit: anyone may rename the cache away and put theirs in its place), or through a symlink,
 * is refused with one warning naming why; a root-owned sticky parent (/tmp) is fine. */
static void refused_by_path(bool symlinked) {
  char parent[64], dir[128], real[128];
  make_temp_dir(parent);
  snprintf(real, sizeof real, "%s/real", parent);
  snprintf(dir, sizeof dir, symlinked ? "%s/link" : "%s/real/cache", parent);
  CHECK(mkdir(real, 0700) == 0);
  if (symlinked) CHECK(symlink(real, dir) == 0);
  else CHECK(chmod(real, 0777) == 0);
  cache_disk_reset_warnings();
  capture_begin();
  cache_disk *disk = open_quiet(dir);
  bool put = disk && put_payload(disk, 1, FP);
  const char *text = capture_end();
  CHECK_MSG(!put, "%s: an entry was written", dir);
  CHECK_EQ_INT(count_occurrences(text, "latch: warning: compile cache:"), 1);
  CHECK_MSG(strstr(text, symlinked ? "cannot create or open" : "group or others may write to its parent") != NULL,
            "%s", text);
  if (disk) cache_disk_close(disk);
  remove_tree(parent);
}

static void refused_writable_parent(void) { refused_by_path(false); }
static void refused_symlink(void) { refused_by_path(true); }

/* An entry file another user owns (root chowns it here) is refused: a miss, one warning,
 * and left in place; the directory's own entries still load. */
static void foreign_entry_refused(void) {
  char dir[64], path[512];
  make_temp_dir(dir);
  cache_disk *disk = open_quiet(dir);
  CHECK(disk && put_payload(disk, 1, FP) && put_payload(disk, 2, FP));
  entry_file(dir, 1, FP, path);
  CHECK(chown(path, 4242, 4242) == 0);
  cache_disk_reset_warnings();
  capture_begin();
  bool got = disk && get_matches(disk, 1, FP);
  const char *text = capture_end();
  CHECK(!got);
  CHECK_MSG(strstr(text, "owned by another user") != NULL, "%s", text);
  CHECK(file_exists(path));
  CHECK(disk && get_matches(disk, 2, FP));
  if (disk) cache_disk_close(disk);
  remove_tree(dir);
}

int main(void) {
  RUN(created_private);
  RUN(refused_group);
  RUN(refused_others);
  RUN(refused_owner);
  RUN(memory_still_works);
  RUN(copied_entry_rejected);
  RUN(refused_writable_parent);
  RUN(refused_symlink);
  RUN(foreign_entry_refused);
  return TEST_REPORT();
}
