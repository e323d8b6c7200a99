/* What both soak programs measure of their own process: the monotonic clock, the resident
 * set and the count of open files, read from /proc. Header-only, like the other test
 * helpers. */
#ifndef LATCH_SOAK_UTIL_H
#define LATCH_SOAK_UTIL_H
#include <dirent.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static inline double soak_now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static inline double soak_rss_mb(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = 0, resident = 0;
  if (f) {
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    fclose(f);
  }
  return (double)resident * (double)sysconf(_SC_PAGESIZE) / 1048576.0;
}

static inline int soak_open_files(void) {
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
  if (d) closedir(d);
  return n - 1; /* the directory's own */
}
#endif
