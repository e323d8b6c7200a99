/* latch cache: look at and maintain the on-disk compile cache (stats, ls, verify, clear). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache/cache.h"
#include "capture/capture.h"
#include "cli.h"

void cmd_cache_usage(void) {
  fputs("usage: latch cache stats|ls|verify|clear [--dir DIR] [--fix] [--remote] [--cache-url URL]\n"
        "       latch cache push|pull [--dir DIR] [--cache-url URL]\n"
        "\n"
        "Looks at or maintains the on-disk compile cache, where 'latch run' keeps compiled\n"
        "graphs so the next process loads them instead of compiling again.\n"
        "\n"
        "  stats    the directory, its entries and bytes, the size limit, leftover temporary files\n"
        "  ls       one line per entry, most recently used first: key, size, age (time since it\n"
        "           was written or last loaded), fingerprint\n"
        "           (backend name/version, latch version, CPU architecture and features, options)\n"
        "  verify   reads every entry whole and checks its header and checksums; names each bad\n"
        "           entry and exits 1 if there is any. With --fix it removes them and exits 0\n"
        "           (a bad entry is only a miss for 'run', which replaces it; verify is for\n"
        "           looking, or for cleaning a directory up ahead of time)\n"
        "  clear    removes every entry and temporary file (other files are left alone)\n"
        "  push     copies the disk cache's valid entries to the remote tier (those not there yet)\n"
        "  pull     copies the remote tier's valid entries into the disk cache\n"
        "\n"
        "  --dir DIR   the cache directory; default LATCH_CACHE_DIR, else $XDG_CACHE_HOME/latch,\n"
        "              else ~/.cache/latch\n"
        "  --fix       with verify: remove the bad entries\n"
        "  --remote    stats, ls, verify, clear: the remote tier (Redis) instead of the directory;\n"
        "              its leases are shown as temporary files\n"
        "  --cache-url URL  the remote tier, redis://[user:password@]host[:port][/db] or\n"
        "              unix:///path; default LATCH_CACHE_URL. LATCH_CACHE_SECRET: verify and pull\n"
        "              accept only entries signed with it, push signs what it writes (without it\n"
        "              push and pull refuse unless the URL says unsigned=1). Only the namespace's\n"
        "              keys are touched (LATCH_CACHE_NAMESPACE or namespace=, default the user)\n"
        "\n"
        "Environment (also read by 'latch run'): LATCH_CACHE=off|memory|disk (default disk),\n"
        "LATCH_CACHE_DIR, LATCH_CACHE_MAX_BYTES (default 1G; K, M, G, T suffixes). Each put\n"
        "removes the least recently used entries beyond the limit.\n"
        "\n"
        "examples:\n"
        "  latch cache stats\n"
        "  latch cache ls --dir /tmp/cache\n"
        "  latch cache verify --fix\n"
        "  latch cache ls --remote --cache-url redis://10.0.0.5:6379/0\n"
        "  LATCH_CACHE_URL=redis://cache:6379 latch cache push\n",
        stdout);
}

static void human_bytes(uint64_t bytes, char *out, size_t size) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = (double)bytes;
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    unit++;
  }
  if (unit == 0) snprintf(out, size, "%" PRIu64 " B", bytes);
  else snprintf(out, size, "%.1f %s", value, units[unit]);
}

static void human_age(const struct timespec *mtime, char *out, size_t size) {
  double age = difftime(time(NULL), mtime->tv_sec);
  if (age < 0) age = 0;
  if (age < 120) snprintf(out, size, "%.0fs", age);
  else if (age < 7200) snprintf(out, size, "%.0fm", age / 60);
  else if (age < 172800) snprintf(out, size, "%.0fh", age / 3600);
  else snprintf(out, size, "%.0fd", age / 86400);
}

/* ---- where the entries are: a directory, or a Redis server (--remote) ---- */

typedef struct source {
  const char *dir;       /* the disk cache, or */
  cache_remote *remote;  /* the remote tier */
  const char *name;      /* for messages: the directory or the URL without credentials */
} source;

static hlo_status scan(const source *src, bool check, bool fix, cache_disk_visit_fn visit, void *ctx,
                       cache_disk_summary *summary, hlo_diag *diag) {
  if (src->remote) return cache_remote_scan(src->remote, check, fix, visit, ctx, summary, diag);
  return cache_disk_scan(src->dir, check, fix, visit, ctx, summary, diag);
}

/* ---- ls ---- */

typedef struct listed {
  cache_disk_problem problem;
  cache_key key;
  uint64_t bytes;
  struct timespec mtime;
  char *fingerprint;
} listed;

typedef struct listing {
  listed *items;
  size_t count, capacity;
  bool out_of_memory;
} listing;

static void collect(void *ctx, const cache_disk_entry_info *info) {
  listing *l = ctx;
  if (info->is_temp || l->out_of_memory) return;
  if (l->count == l->capacity) {
    size_t grown = l->capacity ? l->capacity * 2 : 64;
    listed *more = realloc(l->items, grown * sizeof *more);
    if (!more) {
      l->out_of_memory = true;
      return;
    }
    l->items = more;
    l->capacity = grown;
  }
  listed *item = &l->items[l->count];
  item->fingerprint = strdup(info->fingerprint);
  if (!item->fingerprint) {
    l->out_of_memory = true;
    return;
  }
  item->problem = info->problem;
  item->key = info->key;
  item->bytes = info->file_bytes;
  item->mtime = info->mtime;
  l->count++;
}

static int newer_first(const void *a, const void *b) {
  const listed *x = a, *y = b;
  if (x->mtime.tv_sec != y->mtime.tv_sec) return x->mtime.tv_sec > y->mtime.tv_sec ? -1 : 1;
  if (x->mtime.tv_nsec != y->mtime.tv_nsec) return x->mtime.tv_nsec > y->mtime.tv_nsec ? -1 : 1;
  return 0;
}

static int list(const source *src) {
  listing l = {0};
  cache_disk_summary summary;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  if (scan(src, false, false, collect, &l, &summary, &diag) != HLO_OK) return cli_fail(&diag);
  int status = CLI_OK;
  if (l.out_of_memory) {
    cli_error("cache ls: out of memory");
    status = CLI_INTERNAL;
  }
  if (l.count) qsort(l.items, l.count, sizeof *l.items, newer_first); /* items is NULL when empty */
  if (l.count) printf("%-32s  %10s  %5s  %s\n", "KEY", "SIZE", "AGE", "FINGERPRINT");
  for (size_t i = 0; i < l.count; i++) {
    char key[33], size[32], age[32];
    if (l.items[i].problem) snprintf(key, sizeof key, "%s", "(damaged)");
    else cache_key_hex(l.items[i].key, key);
    human_bytes(l.items[i].bytes, size, sizeof size);
    human_age(&l.items[i].mtime, age, sizeof age);
    printf("%-32s  %10s  %5s  %s\n", key, size, age,
           l.items[i].problem ? cache_disk_problem_name(l.items[i].problem) : l.items[i].fingerprint);
    free(l.items[i].fingerprint);
  }
  free(l.items);
  char total[32];
  human_bytes(summary.entry_bytes, total, sizeof total);
  printf("%" PRIu64 " entr%s, %s in %s\n", summary.entries, summary.entries == 1 ? "y" : "ies", total, src->name);
  return status;
}

/* ---- stats, verify, clear ---- */

static int stats(const char *dir) {
  cache_disk_summary summary;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  uint64_t limit = 0;
  if (cap_env_cache_max_bytes(&limit, &diag) != HLO_OK) return cli_fail(&diag);
  if (cache_disk_scan(dir, false, false, NULL, NULL, &summary, &diag) != HLO_OK) return cli_fail(&diag);
  char bytes[32], limit_text[32], temp_text[32];
  human_bytes(summary.entry_bytes, bytes, sizeof bytes);
  human_bytes(limit, limit_text, sizeof limit_text);
  human_bytes(summary.temp_bytes, temp_text, sizeof temp_text);
  printf("dir: %s\n", dir);
  printf("entries: %" PRIu64 "\n", summary.entries);
  printf("bytes: %" PRIu64 " (%s)\n", summary.entry_bytes, bytes);
  printf("limit: %" PRIu64 " (%s, LATCH_CACHE_MAX_BYTES)\n", limit, limit_text);
  printf("temporary files: %" PRIu64 " (%s)\n", summary.temps, temp_text);
  if (summary.bad_entries)
    printf("damaged entries: %" PRIu64 " (see 'latch cache verify')\n", summary.bad_entries);
  return CLI_OK;
}

static int remote_stats(const source *src) {
  cache_disk_summary summary;
  cache_remote_server server;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  if (cache_remote_server_info(src->remote, &server, &diag) != HLO_OK ||
      scan(src, false, false, NULL, NULL, &summary, &diag) != HLO_OK)
    return cli_fail(&diag);
  char bytes[32], used[32], limit[32];
  human_bytes(summary.entry_bytes, bytes, sizeof bytes);
  human_bytes(server.used_memory, used, sizeof used);
  human_bytes(server.maxmemory, limit, sizeof limit);
  printf("remote: %s (redis %s)\n", src->name, server.version);
  printf("entries: %" PRIu64 "\n", summary.entries);
  printf("bytes: %" PRIu64 " (%s)\n", summary.entry_bytes, bytes);
  printf("leases: %" PRIu64 "\n", summary.temps);
  printf("server memory: %s used, limit %s (%s), %" PRIu64 " keys evicted\n", used,
         server.maxmemory ? limit : "none", server.maxmemory_policy, server.evicted_keys);
  if (summary.bad_entries)
    printf("damaged entries: %" PRIu64 " (see 'latch cache verify --remote')\n", summary.bad_entries);
  return CLI_OK;
}

/* push: disk -> Redis; pull: Redis -> disk. */
static int copy(const source *src, const char *dir, bool push) {
  uint64_t copied = 0, skipped = 0, refused = 0, max_bytes = 0;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  if (!push && cap_env_cache_max_bytes(&max_bytes, &diag) != HLO_OK) return cli_fail(&diag);
  hlo_status status = push ? cache_remote_push(src->remote, dir, &copied, &skipped, &refused, &diag)
                           : cache_remote_pull(src->remote, dir, max_bytes, &copied, &skipped, &diag);
  if (status == HLO_OK || refused)
    printf("%s %" PRIu64 " entr%s %s %s (%" PRIu64 " skipped: already there or not valid)\n", push ? "pushed" : "pulled",
           copied, copied == 1 ? "y" : "ies", push ? "to" : "from", src->name, skipped);
  return status == HLO_OK ? CLI_OK : cli_fail(&diag);
}

static void report_bad(void *ctx, const cache_disk_entry_info *info) {
  (void)ctx;
  if (!info->is_temp && info->problem) printf("bad: %s: %s\n", info->name, cache_disk_problem_name(info->problem));
}

static int verify(const source *src, bool fix) {
  cache_disk_summary summary;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  if (scan(src, true, fix, report_bad, NULL, &summary, &diag) != HLO_OK) return cli_fail(&diag);
  printf("verified %" PRIu64 " entr%s in %s: %" PRIu64 " bad", summary.entries, summary.entries == 1 ? "y" : "ies",
         src->name, summary.bad_entries);
  if (fix) printf(", %" PRIu64 " removed", summary.removed);
  if (summary.remove_failed)
    printf(", %" PRIu64 " could not be removed (%s)", summary.remove_failed, strerror(summary.remove_errno));
  printf("\n");
  if (summary.other_secret)
    printf("%" PRIu64 " of the bad entries are intact but signed with another secret, or unsigned: "
           "LATCH_CACHE_SECRET may differ from their writer's, so --fix keeps them\n", summary.other_secret);
  /* Entries that could not even be read (permissions) cannot be removed by --fix either. */
  return summary.bad_entries > (fix ? summary.removed : 0) ? CLI_USAGE : CLI_OK;
}

static int clear(const source *src) {
  cache_disk_summary summary;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  hlo_status status = src->remote ? cache_remote_clear(src->remote, &summary, &diag)
                                  : cache_disk_clear(src->dir, &summary, &diag);
  char bytes[32];
  human_bytes(summary.removed_bytes, bytes, sizeof bytes);
  printf("removed %" PRIu64 " entr%s and %" PRIu64 " %s%s (%s) from %s\n", summary.entries,
         summary.entries == 1 ? "y" : "ies", summary.temps, src->remote ? "lease" : "temporary file",
         summary.temps == 1 ? "" : "s", bytes, src->name);
  return status == HLO_OK ? CLI_OK : cli_fail(&diag);
}

static bool is_action(const char *action) {
  static const char *const actions[] = {"stats", "ls", "verify", "clear", "push", "pull"};
  for (size_t i = 0; action && i < sizeof actions / sizeof actions[0]; i++)
    if (strcmp(action, actions[i]) == 0) return true;
  return false;
}

int cmd_cache(int argc, char **argv) {
  const char *dir_flag = NULL, *fix = NULL, *help = NULL, *remote_flag = NULL, *url_flag = NULL;
  const cli_flag flags[] = {{"--help", false, &help},          {"--dir", true, &dir_flag},
                            {"--fix", false, &fix},            {"--remote", false, &remote_flag},
                            {"--cache-url", true, &url_flag}};
  const char *words[1];
  int word_count = 0;
  int status = cli_parse_flags("cache", argc, argv, flags, (int)(sizeof flags / sizeof flags[0]), words, &word_count, 1);
  if (status != CLI_OK) return status;
  if (help) {
    cmd_cache_usage();
    return CLI_OK;
  }
  const char *action = word_count ? words[0] : NULL;
  if (!is_action(action)) {
    if (action) cli_error("cache: unknown action '%s'; actions: stats, ls, verify, clear, push, pull", action);
    else cli_error("cache: which action? stats, ls, verify, clear, push or pull (see 'latch cache --help')");
    return CLI_USAGE;
  }
  if (fix && strcmp(action, "verify") != 0) {
    cli_error("cache: --fix goes with verify only");
    return CLI_USAGE;
  }
  bool copying = strcmp(action, "push") == 0 || strcmp(action, "pull") == 0;
  char dir[4096];
  hlo_diag diag;
  hlo_diag_clear(&diag);
  if (dir_flag) snprintf(dir, sizeof dir, "%s", dir_flag);
  else if (cap_env_cache_dir(dir, sizeof dir, &diag) != HLO_OK) return cli_fail(&diag);
  source src = {dir, NULL, dir};
  if (remote_flag || copying) {
    if ((status = cli_open_remote("cache: --remote, push and pull", url_flag, &src.remote)) != CLI_OK) return status;
    src.name = cache_remote_name(src.remote);
  }
  if (copying) status = copy(&src, dir, strcmp(action, "push") == 0);
  else if (strcmp(action, "stats") == 0) status = src.remote ? remote_stats(&src) : stats(dir);
  else if (strcmp(action, "ls") == 0) status = list(&src);
  else if (strcmp(action, "verify") == 0) status = verify(&src, fix != NULL);
  else status = clear(&src);
  cache_remote_close(src.remote);
  return status;
}
