/* Looking after the remote tier (latch cache --remote): listing and verifying entries with
 * SCAN (never KEYS, which stops the server while it runs), clearing them, the server's memory
 * figures, and copying entries between a disk cache and the server. Every scan matches the
 * configured namespace's keys only: other users' and teams' entries on a shared server are
 * never listed, checked or deleted. Leases count as the remote tier's temporary files. */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "remote_internal.h"

enum { PATH_MAX_BYTES = 4096 };

static hlo_status unreachable(const cache_remote *remote, hlo_diag *diag) {
  return hlo_diag_set(diag, HLO_ERR_INTERNAL, "remote compile cache %s: no usable answer (see the warning above)",
                      cache_remote_name(remote));
}

/* Calls each(ctx, key, len) for every key of the namespace matching "latch:<namespace>:" and
 * tail (a glob; the namespace's characters are none of glob's); false when the server failed. */
static bool scan_keys(cache_remote *remote, const char *tail, void (*each)(void *, const char *, size_t), void *ctx) {
  char cursor[32] = "0", pattern[REMOTE_KEY_MAX];
  snprintf(pattern, sizeof pattern, "latch:%s:%s", cache_remote_config_of(remote)->namespace_name, tail);
  do {
    const char *argv[6] = {"SCAN", cursor, "MATCH", pattern, "COUNT", "500"};
    redisReply *reply = NULL;
    if (!remote_call(remote, 6, argv, NULL, &reply)) return false;
    bool ok = reply->type == REDIS_REPLY_ARRAY && reply->elements == 2 &&
              reply->element[0]->type == REDIS_REPLY_STRING && reply->element[1]->type == REDIS_REPLY_ARRAY;
    if (ok) {
      snprintf(cursor, sizeof cursor, "%.*s", (int)reply->element[0]->len, reply->element[0]->str);
      for (size_t i = 0; i < reply->element[1]->elements; i++) {
        redisReply *key = reply->element[1]->element[i];
        if (key->type == REDIS_REPLY_STRING) each(ctx, key->str, key->len);
      }
    }
    freeReplyObject(reply);
    if (!ok) return false;
  } while (strcmp(cursor, "0") != 0);
  return true;
}

/* One command with one key argument; its reply or NULL. */
static redisReply *call1(cache_remote *remote, const char *command, const char *name) {
  const char *argv[2] = {command, name};
  redisReply *reply = NULL;
  return remote_call(remote, 2, argv, NULL, &reply) ? reply : NULL;
}

/* Seconds since the entry was last read or written (0 when the server does not say). */
static time_t idle_seconds(cache_remote *remote, const char *name) {
  const char *argv[3] = {"OBJECT", "IDLETIME", name};
  redisReply *reply = NULL;
  if (!remote_call(remote, 3, argv, NULL, &reply)) return 0;
  time_t idle = reply->type == REDIS_REPLY_INTEGER ? (time_t)reply->integer : 0;
  freeReplyObject(reply);
  return idle;
}

/* ---- scan ---- */

typedef struct scan_state {
  cache_remote *remote;
  bool check, fix, failed;
  cache_disk_visit_fn visit;
  void *ctx;
  cache_disk_summary *summary;
  cache_disk_entry_info *info;
} scan_state;

/* The entry's problem, and its info, from its value. */
static cache_disk_problem check_value(scan_state *s, const char *name, const redisReply *value) {
  if (value->type != REDIS_REPLY_STRING) return CACHE_DISK_MAGIC;
  size_t secret_len;
  const unsigned char *secret = remote_secret(s->remote, &secret_len);
  const cache_remote_config *config = cache_remote_config_of(s->remote);
  cache_disk_problem problem = remote_entry_decode((const unsigned char *)value->str, value->len, NULL, NULL, secret,
                                                   s->check ? secret_len : 0, config->allow_unsigned, s->info, NULL);
  if (problem) return problem;
  char want[REMOTE_KEY_MAX];
  remote_entry_key(config->namespace_name, s->info->key, s->info->fingerprint, want);
  return strcmp(want, name) == 0 ? CACHE_DISK_OK : CACHE_DISK_MISMATCH;
}

static void scan_one(void *ctx, const char *key, size_t len) {
  scan_state *s = ctx;
  if (s->failed || !remote_is_entry_key(cache_remote_config_of(s->remote)->namespace_name, key, len)) return;
  char name[REMOTE_KEY_MAX];
  memcpy(name, key, len + 1);
  time_t idle = idle_seconds(s->remote, name); /* before the GET, which makes it 0 */
  redisReply *value = call1(s->remote, "GET", name);
  if (!value) {
    s->failed = true;
    return;
  }
  if (value->type == REDIS_REPLY_NIL) { /* deleted since the SCAN */
    freeReplyObject(value);
    return;
  }
  memset(s->info, 0, sizeof *s->info);
  snprintf(s->info->name, sizeof s->info->name, "%s", name);
  s->info->problem = check_value(s, name, value);
  s->info->file_bytes = value->type == REDIS_REPLY_STRING ? value->len : 0;
  freeReplyObject(value);
  s->info->mtime.tv_sec = time(NULL) - idle;
  s->summary->entries++;
  s->summary->entry_bytes += s->info->file_bytes;
  if (s->info->problem) {
    s->summary->bad_entries++;
    bool signature_only = s->info->problem == CACHE_DISK_BAD_SIGNATURE || s->info->problem == CACHE_DISK_UNSIGNED;
    if (signature_only) s->summary->other_secret++;
    redisReply *gone = s->fix && !signature_only ? call1(s->remote, "DEL", name) : NULL;
    if (gone && gone->type == REDIS_REPLY_INTEGER && gone->integer == 1) {
      s->summary->removed++;
      s->summary->removed_bytes += s->info->file_bytes;
    }
    if (gone) freeReplyObject(gone);
  }
  if (s->visit) s->visit(s->ctx, s->info);
}

static void count_lease(void *ctx, const char *key, size_t len) {
  (void)key, (void)len;
  ((cache_disk_summary *)ctx)->temps++;
}

hlo_status cache_remote_scan(cache_remote *remote, bool check, bool fix, cache_disk_visit_fn visit, void *ctx,
                             cache_disk_summary *summary, hlo_diag *diag) {
  memset(summary, 0, sizeof *summary);
  scan_state s = {remote, check, fix, false, visit, ctx, summary, hlo_malloc(sizeof(cache_disk_entry_info))};
  if (!s.info) return hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory");
  bool ok = scan_keys(remote, "????????????????????????????????", scan_one, &s) && !s.failed &&
            scan_keys(remote, "lease:*", count_lease, summary);
  free(s.info);
  return ok ? HLO_OK : unreachable(remote, diag);
}

/* ---- clear ---- */

typedef struct clear_state {
  cache_remote *remote;
  cache_disk_summary *summary;
  bool failed;
} clear_state;

static void clear_one(void *ctx, const char *key, size_t len) {
  clear_state *c = ctx;
  if (c->failed || len >= REMOTE_KEY_MAX) return;
  char name[REMOTE_KEY_MAX];
  memcpy(name, key, len + 1);
  redisReply *size = call1(c->remote, "STRLEN", name);
  redisReply *gone = size ? call1(c->remote, "DEL", name) : NULL;
  if (!gone) c->failed = true;
  else if (gone->type == REDIS_REPLY_INTEGER && gone->integer == 1) {
    size_t prefix = 7 + strlen(cache_remote_config_of(c->remote)->namespace_name);
    bool lease = strncmp(name + prefix, "lease:", 6) == 0;
    if (lease) c->summary->temps++;
    else c->summary->entries++;
    c->summary->removed++;
    c->summary->removed_bytes += size->type == REDIS_REPLY_INTEGER ? (uint64_t)size->integer : 0;
  }
  if (size) freeReplyObject(size);
  if (gone) freeReplyObject(gone);
}

hlo_status cache_remote_clear(cache_remote *remote, cache_disk_summary *summary, hlo_diag *diag) {
  memset(summary, 0, sizeof *summary);
  clear_state c = {remote, summary, false};
  bool ok = scan_keys(remote, "*", clear_one, &c) && !c.failed;
  return ok ? HLO_OK : unreachable(remote, diag);
}

/* ---- the server ---- */

static void info_field(const char *text, const char *name, char *out, size_t size) {
  const char *at = strstr(text, name);
  out[0] = '\0';
  if (at) snprintf(out, size, "%.*s", (int)strcspn(at + strlen(name), "\r\n"), at + strlen(name));
}

hlo_status cache_remote_server_info(cache_remote *remote, cache_remote_server *server, hlo_diag *diag) {
  memset(server, 0, sizeof *server);
  const char *argv[1] = {"INFO"};
  redisReply *reply = NULL;
  if (!remote_call(remote, 1, argv, NULL, &reply)) return unreachable(remote, diag);
  char number[32];
  if (reply->type == REDIS_REPLY_STRING || reply->type == REDIS_REPLY_STATUS) {
    info_field(reply->str, "\nredis_version:", server->version, sizeof server->version);
    info_field(reply->str, "\nmaxmemory_policy:", server->maxmemory_policy, sizeof server->maxmemory_policy);
    info_field(reply->str, "\nused_memory:", number, sizeof number);
    server->used_memory = strtoull(number, NULL, 10);
    info_field(reply->str, "\nmaxmemory:", number, sizeof number);
    server->maxmemory = strtoull(number, NULL, 10);
    info_field(reply->str, "\nevicted_keys:", number, sizeof number);
    server->evicted_keys = strtoull(number, NULL, 10);
  }
  freeReplyObject(reply);
  return HLO_OK;
}

/* ---- push and pull ---- */

typedef struct copy_state {
  cache_remote *remote;
  cache_disk *disk;
  const char *dir;
  uint64_t copied, skipped, refused;
  bool failed;
} copy_state;

static bool exists(cache_remote *remote, const char *name, bool *failed) {
  redisReply *reply = call1(remote, "EXISTS", name);
  if (!reply) *failed = true;
  bool there = reply && reply->type == REDIS_REPLY_INTEGER && reply->integer > 0;
  if (reply) freeReplyObject(reply);
  return there;
}

static void push_one(void *ctx, const cache_disk_entry_info *entry) {
  copy_state *c = ctx;
  if (entry->is_temp || c->failed) return;
  char name[REMOTE_KEY_MAX], path[PATH_MAX_BYTES];
  if (entry->problem || (remote_entry_key(cache_remote_config_of(c->remote)->namespace_name, entry->key,
                                          entry->fingerprint, name),
                         exists(c->remote, name, &c->failed))) {
    c->skipped++;
    return;
  }
  snprintf(path, sizeof path, "%s/%s", c->dir, entry->name);
  cache_disk_entry_info *info = hlo_malloc(sizeof *info);
  cache_disk_reading r = {.check_payload = true, .keep_payload = true};
  if (!info || cache_disk_read_entry(AT_FDCWD, path, &r, info) != CACHE_DISK_OK) c->skipped++;
  else if (cache_remote_put(c->remote, info->key, info->fingerprint, r.payload, (size_t)info->payload_bytes))
    c->copied++;
  else c->refused++; /* too big, refused by the server (out of memory), or no answer: warned about */
  free(r.payload);
  free(info);
}

/* Without a secret the tier writes and reads nothing unless the URL says unsigned=1. */
static hlo_status unsigned_refused(cache_remote *remote, hlo_diag *diag) {
  size_t secret_len;
  remote_secret(remote, &secret_len);
  if (secret_len || cache_remote_config_of(remote)->allow_unsigned) return HLO_OK;
  return hlo_diag_set(diag, HLO_ERR_INPUT, "remote compile cache %s: no LATCH_CACHE_SECRET to sign or check entries "
                      "with; set it, or add unsigned=1 to the URL's query to copy unsigned entries",
                      cache_remote_name(remote));
}

hlo_status cache_remote_push(cache_remote *remote, const char *dir, uint64_t *copied, uint64_t *skipped,
                             uint64_t *refused, hlo_diag *diag) {
  copy_state c = {remote, NULL, dir, 0, 0, 0, false};
  *copied = *skipped = *refused = 0;
  if (unsigned_refused(remote, diag) != HLO_OK) return diag->status;
  cache_disk_summary summary;
  hlo_status status = cache_disk_scan(dir, false, false, push_one, &c, &summary, diag);
  *copied = c.copied;
  *skipped = c.skipped;
  *refused = c.refused;
  if (status == HLO_OK && c.failed) status = unreachable(remote, diag);
  if (status == HLO_OK && c.refused)
    status = hlo_diag_set(diag, HLO_ERR_INTERNAL, "remote compile cache %s: %" PRIu64 " entr%s not written (see the "
                          "warning above)", cache_remote_name(remote), c.refused, c.refused == 1 ? "y was" : "ies were");
  return status;
}

static void pull_one(void *ctx, const cache_disk_entry_info *entry) {
  copy_state *c = ctx;
  if (entry->problem || c->failed) {
    c->skipped++;
    return;
  }
  redisReply *value = call1(c->remote, "GET", entry->name);
  if (!value) {
    c->failed = true;
    return;
  }
  size_t secret_len;
  const unsigned char *secret = remote_secret(c->remote, &secret_len), *payload = NULL;
  cache_disk_entry_info *info = hlo_malloc(sizeof *info);
  bool ok = info && value->type == REDIS_REPLY_STRING &&
            remote_entry_decode((const unsigned char *)value->str, value->len, &entry->key, entry->fingerprint, secret,
                                secret_len, cache_remote_config_of(c->remote)->allow_unsigned, info,
                                &payload) == CACHE_DISK_OK &&
            cache_disk_put(c->disk, info->key, info->fingerprint, payload, (size_t)info->payload_bytes);
  if (ok) c->copied++;
  else c->skipped++;
  free(info);
  freeReplyObject(value);
}

hlo_status cache_remote_pull(cache_remote *remote, const char *dir, uint64_t max_bytes, uint64_t *copied,
                             uint64_t *skipped, hlo_diag *diag) {
  *copied = *skipped = 0;
  if (unsigned_refused(remote, diag) != HLO_OK) return diag->status;
  copy_state c = {remote, cache_disk_open(dir, max_bytes, NULL, diag), dir, 0, 0, 0, false};
  if (!c.disk) return diag->status;
  cache_disk_summary summary;
  hlo_status status = cache_remote_scan(remote, true, false, pull_one, &c, &summary, diag);
  cache_disk_close(c.disk);
  *copied = c.copied;
  *skipped = c.skipped;
  if (status == HLO_OK && c.failed) status = unreachable(remote, diag);
  return status;
}
