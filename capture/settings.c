/* Settings from the environment: the one file in the library that reads it. latch_options_init
 * and latch_function_options_init fill the public options from the LATCH_* variables, once;
 * latch_open turns the options into what the layers below are told (the backend's compile
 * options, the log words, the fault wrapper, the disk cache's directory when none is named);
 * the command asks here for the same values. Nothing below latch_open reads the environment:
 * settings arrive as arguments, as SQLite's pager gets its cache size by a setter rather than
 * reading it. */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"

/* The variable's value, NULL when unset or empty. */
static const char *env_text(const char *name) {
  const char *text = getenv(name);
  return text && *text ? text : NULL;
}

/* A non-negative integer variable; false (with the error set) when present but unreadable. */
static bool env_int(const char *name, int *out) {
  const char *text = env_text(name);
  if (!text) return true;
  char *end;
  errno = 0;
  long value = strtol(text, &end, 10);
  if (errno || *end || value < 0 || value > 1 << 30) {
    cap_set_error("%s=%s: expected a non-negative integer", name, text);
    return false;
  }
  *out = (int)value;
  return true;
}

static bool env_bool(const char *name, bool *out) {
  const char *text = env_text(name);
  if (!text) return true;
  if (!strcmp(text, "1") || !strcmp(text, "true") || !strcmp(text, "yes"))
    *out = true;
  else if (!strcmp(text, "0") || !strcmp(text, "false") || !strcmp(text, "no"))
    *out = false;
  else {
    cap_set_error("%s=%s: expected 1 or 0", name, text);
    return false;
  }
  return true;
}

/* A non-negative (positive: when positive) number variable; false (with the error set)
 * when present but unreadable. */
static bool env_number(const char *name, bool positive, double *out) {
  const char *text = env_text(name);
  if (!text) return true;
  char *end;
  double value = strtod(text, &end);
  if (*end || !(positive ? value > 0 : value >= 0) || !isfinite(value)) {
    cap_set_error("%s=%s: expected a %s number", name, text, positive ? "positive" : "non-negative");
    return false;
  }
  *out = value;
  return true;
}

/* LATCH_REPRO_MAX_BYTES: 0 (unset) or at least 1. */
static bool env_repro_max_bytes(double *out) {
  const char *text = env_text("LATCH_REPRO_MAX_BYTES");
  if (!text) return true;
  char *end;
  double value = strtod(text, &end);
  if (*end || !(value >= 1) || !isfinite(value)) {
    cap_set_error("LATCH_REPRO_MAX_BYTES=%s: expected a number of bytes >= 1", text);
    return false;
  }
  *out = value;
  return true;
}

static bool env_cache_max_bytes(uint64_t *out) {
  hlo_diag diag = {0};
  if (cap_env_cache_max_bytes(out, &diag) == HLO_OK) return true;
  cap_set_error("%s", diag.message);
  return false;
}

latch_status latch_options_init(latch_options *options) {
  memset(options, 0, sizeof *options);
  options->backend = cap_backend_find("cpu") ? "cpu" : "reference";
  options->cache_capacity = 2048;
  options->check = "off";
  options->check_tol = RT_ACCURACY_DEFAULT_TOL;
  options->check_timeout = CAP_CHECK_DEFAULT_TIMEOUT;
  options->check_budget = CAP_CHECK_DEFAULT_BUDGET;
  options->keep_arena_mb = -1;
  options->choice_limit = -1;
  if (env_text("LATCH_BACKEND")) options->backend = env_text("LATCH_BACKEND");
  options->cache = env_text("LATCH_CACHE");
  options->cache_dir = env_text("LATCH_CACHE_DIR");
  options->cache_url = env_text("LATCH_CACHE_URL");
  options->cache_secret = env_text("LATCH_CACHE_SECRET");
  options->cache_namespace = env_text("LATCH_CACHE_NAMESPACE");
  options->cache_password = env_text("LATCH_CACHE_PASSWORD");
  options->cache_password_file = env_text("LATCH_CACHE_PASSWORD_FILE");
  if (env_text("LATCH_CHECK")) options->check = env_text("LATCH_CHECK");
  /* Every variable is read even after a bad one, so the other fields are still filled. */
  bool ok = env_int("LATCH_THREADS", &options->threads);
  ok = env_int("LATCH_CACHE_CAPACITY", &options->cache_capacity) && ok;
  ok = env_bool("LATCH_EAGER", &options->eager) && ok;
  ok = env_number("LATCH_CHECK_TOL", false, &options->check_tol) && ok;
  ok = env_number("LATCH_CHECK_TIMEOUT", true, &options->check_timeout) && ok;
  ok = env_number("LATCH_CHECK_BUDGET", true, &options->check_budget) && ok;
  ok = env_int("LATCH_CHECK_MAX_RUNS", &options->check_max_runs) && ok;
  ok = env_bool("LATCH_BISECT", &options->check_bisect) && ok;
  ok = env_cache_max_bytes(&options->cache_max_bytes) && ok;
  ok = env_int("LATCH_KEEP_ARENA_MB", &options->keep_arena_mb) && ok;
  ok = env_bool("LATCH_NO_FUSION", &options->no_fusion) && ok;
  ok = env_int("LATCH_CHOICES", &options->choice_limit) && ok;
  options->choice_avoid = env_text("LATCH_AVOID");
  options->log = env_text("LATCH_LOG");
  options->precision = env_text("LATCH_PRECISION");
  options->repro_dir = env_text("LATCH_REPRO_DIR");
  ok = env_repro_max_bytes(&options->repro_max_bytes) && ok;
  options->test_fault = env_text("LATCH_FAULT");
  options->test_cache_fault = env_text("LATCH_CACHE_TEST_FAULT");
  options->test_cache_write_delay_ms = env_text("LATCH_CACHE_TEST_WRITE_DELAY_MS");
  ok = env_bool("LATCH_MPI", &options->mpi) && ok;
  ok = env_number("LATCH_COLLECTIVE_TIMEOUT", true, &options->collective_timeout) && ok;
  return ok ? LATCH_OK : LATCH_ERR_INPUT;
}

void cap_compile_options(const latch_options *options, rt_compile_options *out) {
  *out = (rt_compile_options)RT_COMPILE_OPTIONS_INIT;
  out->no_fusion = options->no_fusion;
  out->limit_choices = options->choice_limit >= 0;
  out->choice_limit = options->choice_limit;
  out->choice_avoid = options->choice_avoid;
  if (options->keep_arena_mb >= 0) out->keep_arena_bytes = (int64_t)options->keep_arena_mb << 20;
  out->log_compiles = cap_log_flags(options->log) & CAP_LOG_COMPILES;
}

latch_status latch_function_options_init(latch_function_options *options) {
  memset(options, 0, sizeof *options);
  options->recompile_limit = 8;
  const char *text = env_text("LATCH_RECOMPILE_LIMIT");
  if (text) {
    char *end;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno || *end || value < 0 || value > 1 << 20) {
      cap_set_error("LATCH_RECOMPILE_LIMIT=%s: expected a non-negative integer", text);
      return LATCH_ERR_INPUT;
    }
    options->recompile_limit = (int)value;
  }
  return LATCH_OK;
}

/* ---- the log words ---- */

static const char *const log_words[] = {"recompiles", "guards", "compiles"};
enum { LOG_WORD_COUNT = sizeof log_words / sizeof log_words[0] };

/* The bit of the word's CAP_LOG_ flag, 0 when it names nothing. */
static unsigned log_word_flag(const char *word, size_t len) {
  for (int i = 0; i < LOG_WORD_COUNT; i++)
    if (strlen(log_words[i]) == len && strncmp(log_words[i], word, len) == 0) return 1u << i;
  return 0;
}

/* One warning per process for the first word of text that names nothing, listing the words
 * that do: a typo would otherwise just print nothing. */
static void warn_unknown_log_word(const char *text, const char *word, size_t len) {
  static atomic_bool warned;
  if (atomic_exchange(&warned, true)) return;
  char known[128] = "";
  for (int i = 0; i < LOG_WORD_COUNT; i++)
    snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", log_words[i]);
  fprintf(stderr, "latch: warning: LATCH_LOG=%s: unknown word '%.*s' ignored (known: %s)\n", text, (int)len, word,
          known);
}

unsigned cap_log_flags(const char *text) {
  _Static_assert(CAP_LOG_RECOMPILES == 1 && CAP_LOG_GUARDS == 2 && CAP_LOG_COMPILES == 4, "log_words' order");
  unsigned flags = 0;
  bool warned = false;
  for (const char *word = text ? text : ""; *word;) {
    size_t len = strcspn(word, ",");
    unsigned flag = log_word_flag(word, len);
    if (len && !flag && !warned) warn_unknown_log_word(text, word, len), warned = true;
    flags |= flag;
    word += len + (word[len] == ',');
  }
  return flags;
}

/* ---- what latch_open and the command pass below ---- */

const rt_backend *cap_fault_wrap(const rt_backend *inner, const char *text, hlo_diag *diag) {
  if (!text || !*text) return inner;
  rt_fault fault;
  if (rt_fault_parse(text, &fault, diag) != HLO_OK) return NULL;
  return rt_fault_backend(inner, &fault);
}

hlo_status cap_env_cache_mode(cache_mode default_mode, cache_mode *mode, hlo_diag *diag) {
  const char *value = env_text("LATCH_CACHE");
  *mode = default_mode;
  if (!value) return HLO_OK;
  if (strcmp(value, "off") == 0) *mode = CACHE_MODE_OFF;
  else if (strcmp(value, "memory") == 0) *mode = CACHE_MODE_MEMORY;
  else if (strcmp(value, "disk") == 0) *mode = CACHE_MODE_DISK;
  else return hlo_diag_set(diag, HLO_ERR_INPUT, "LATCH_CACHE='%s': want off, memory or disk", value);
  return HLO_OK;
}

static hlo_status join(char *out, size_t size, const char *base, const char *rest, hlo_diag *diag) {
  int n = snprintf(out, size, "%s%s", base, rest);
  if (n < 0 || (size_t)n >= size)
    return hlo_diag_set(diag, HLO_ERR_INPUT, "compile cache directory name is too long: %s%s", base, rest);
  return HLO_OK;
}

hlo_status cap_default_cache_dir(char *out, size_t size, hlo_diag *diag) {
  /* XDG says a relative XDG_CACHE_HOME is invalid and must be ignored. */
  const char *xdg = getenv("XDG_CACHE_HOME");
  if (xdg && xdg[0] == '/') return join(out, size, xdg, "/latch", diag);
  const char *home = env_text("HOME");
  if (home) return join(out, size, home, "/.cache/latch", diag);
  return hlo_diag_set(diag, HLO_ERR_INPUT,
                      "no compile cache directory: set LATCH_CACHE_DIR (HOME and XDG_CACHE_HOME are unset)");
}

hlo_status cap_env_cache_dir(char *out, size_t size, hlo_diag *diag) {
  const char *dir = env_text("LATCH_CACHE_DIR");
  if (dir) return join(out, size, dir, "", diag);
  return cap_default_cache_dir(out, size, diag);
}

hlo_status cap_env_cache_max_bytes(uint64_t *max_bytes, hlo_diag *diag) {
  const char *value = env_text("LATCH_CACHE_MAX_BYTES");
  *max_bytes = CACHE_DISK_DEFAULT_MAX_BYTES;
  if (!value) return HLO_OK;
  char *end;
  errno = 0;
  unsigned long long n = strtoull(value, &end, 10);
  int shift = 0;
  switch (*end) {
  case 'K': case 'k': shift = 10; end++; break;
  case 'M': case 'm': shift = 20; end++; break;
  case 'G': case 'g': shift = 30; end++; break;
  case 'T': case 't': shift = 40; end++; break;
  default: break;
  }
  if (errno || end == value || *end || value[0] == '-' || n == 0 || n > (UINT64_MAX >> shift))
    return hlo_diag_set(diag, HLO_ERR_INPUT,
                        "LATCH_CACHE_MAX_BYTES='%s': want a positive byte count, optionally with K, M, G or T",
                        value);
  *max_bytes = (uint64_t)n << shift;
  return HLO_OK;
}
