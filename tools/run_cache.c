/* latch run's compile step through the compile cache: the backend's compile, serialize and
 * deserialize wrapped as a cache codec (cache/ cannot call runtime/ itself). */
#include "run_cache.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "runtime/fingerprint.h"

typedef struct backend_codec {
  const rt_backend *backend;
  const hlo_module *module;
} backend_codec;

static void *codec_compile(void *ctx, hlo_diag *diag) {
  const backend_codec *c = ctx;
  return c->backend->compile(c->module, diag);
}

static hlo_status codec_serialize(void *ctx, const void *value, void **bytes, size_t *len, hlo_diag *diag) {
  const backend_codec *c = ctx;
  return c->backend->serialize(value, bytes, len, diag);
}

static void *codec_deserialize(void *ctx, const void *bytes, size_t len, hlo_diag *diag) {
  const backend_codec *c = ctx;
  return c->backend->deserialize(bytes, len, diag);
}

rt_executable *run_cache_compile(const rt_backend *backend, const hlo_module *module, run_cache_report *report,
                                 hlo_diag *diag) {
  memset(report, 0, sizeof *report);
  if (cache_mode_from_env(CACHE_MODE_DISK, &report->mode, diag) != HLO_OK) return NULL;
  char fingerprint[RT_FINGERPRINT_MAX];
  /* latch run has no options that change generated code yet; they would go here. */
  bool fits = rt_fingerprint(backend, "", fingerprint, sizeof fingerprint) < sizeof fingerprint;
  cache_disk *disk = NULL;
  if (report->mode == CACHE_MODE_DISK && fits && backend->serialize && backend->deserialize) {
    disk = cache_disk_open(NULL, 0, diag);
    if (!disk) return NULL;
    snprintf(report->dir, sizeof report->dir, "%s", cache_disk_dir(disk));
    report->disk_used = true;
  }
  backend_codec ctx = {backend, module};
  cache_codec codec = {&ctx, codec_compile, codec_serialize, codec_deserialize};
  rt_executable *exe = cache_disk_get_or_compile(disk, cache_hash_module(module), fingerprint, &codec,
                                                 &report->origin, &report->seconds, diag);
  if (disk) cache_disk_get_stats(disk, &report->stats);
  cache_disk_close(disk);
  return exe;
}

void run_cache_print(const run_cache_report *report) {
  bool hit = report->origin == CACHE_ORIGIN_DISK;
  if (hit) printf("loaded compiled graph from cache in %.2f ms\n", report->seconds * 1e3);
  else printf("compiled in %.2f ms\n", report->seconds * 1e3);
  printf("cache: %d hit%s, %d compile%s", hit, hit ? "" : "s", !hit, hit ? "s" : "");
  if (!report->disk_used) {
    printf(" (disk cache off%s)\n", report->mode == CACHE_MODE_DISK ? ": backend cannot serialize" : "");
    return;
  }
  const cache_disk_stats *s = &report->stats;
  printf(" (disk %s", report->dir);
  if (s->writes) printf(", saved %" PRIu64 " bytes", s->bytes_written);
  else if (!hit) printf(", not saved");
  if (s->corrupt) printf(", %" PRIu64 " damaged entr%s removed", s->corrupt, s->corrupt == 1 ? "y" : "ies");
  if (s->evictions) printf(", %" PRIu64 " evicted", s->evictions);
  printf(")\n");
}
