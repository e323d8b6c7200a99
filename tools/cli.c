/* Flag parsing, messages and the environment's settings for the latch command. */
#include "cli.h"

#include "capture/capture.h"
#include "minify/minify.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const cli_flag *find_flag(const cli_flag *flags, int flag_count, const char *name, size_t len) {
  for (int i = 0; i < flag_count; i++)
    if (strlen(flags[i].name) == len && memcmp(flags[i].name, name, len) == 0) return &flags[i];
  return NULL;
}

int cli_parse_flags(const char *command, int argc, char **argv, const cli_flag *flags, int flag_count,
                    const char **positional, int *positional_count, int max_positional) {
  *positional_count = 0;
  bool flags_done = false;
  for (int i = 0; i < argc; i++) {
    const char *arg = argv[i];
    if (flags_done || arg[0] != '-' || strcmp(arg, "-") == 0) {
      if (*positional_count == max_positional) {
        cli_error("%s: unexpected argument '%s' (see 'latch %s --help')", command, arg, command);
        return CLI_USAGE;
      }
      positional[(*positional_count)++] = arg;
      continue;
    }
    if (strcmp(arg, "--") == 0) {
      flags_done = true;
      continue;
    }
    const char *equals = strchr(arg, '=');
    size_t name_len = equals ? (size_t)(equals - arg) : strlen(arg);
    const cli_flag *flag = find_flag(flags, flag_count, arg, name_len);
    if (!flag && strcmp(arg, "-h") == 0) flag = find_flag(flags, flag_count, "--help", 6);
    if (!flag) {
      cli_error("%s: unknown option '%.*s' (see 'latch %s --help')", command, (int)name_len, arg, command);
      return CLI_USAGE;
    }
    if (!flag->takes_value) {
      if (equals) {
        cli_error("%s: option %s takes no value", command, flag->name);
        return CLI_USAGE;
      }
      *flag->value = "1";
    } else if (equals) {
      *flag->value = equals + 1;
    } else if (i + 1 < argc) {
      *flag->value = argv[++i];
    } else {
      cli_error("%s: option %s needs a value", command, flag->name);
      return CLI_USAGE;
    }
  }
  return CLI_OK;
}

void cli_error(const char *format, ...) {
  va_list args;
  va_start(args, format);
  fputs("latch: error: ", stderr);
  vfprintf(stderr, format, args);
  fputc('\n', stderr);
  va_end(args);
}

bool cli_parse_number(const char *command, const char *flag, const char *text, double min, double *value) {
  char *end;
  errno = 0;
  *value = strtod(text, &end);
  if (errno || end == text || *end || !(*value >= min)) {
    cli_error("%s: %s wants a number >= %g, got '%s'", command, flag, min, text);
    return false;
  }
  return true;
}

int cli_check_target(const char *command, int file_count, const char *check, const char *test) {
  if (file_count == 0) {
    cli_error("%s: no input file (see 'latch %s --help')", command, command);
    return CLI_USAGE;
  }
  if (!check == !test) {
    cli_error("%s: give exactly one of --check compile|accuracy and --test CMD", command);
    return CLI_USAGE;
  }
  if (check && strcmp(check, "compile") != 0 && strcmp(check, "accuracy") != 0) {
    cli_error("%s: --check wants compile or accuracy, got '%s'", command, check);
    return CLI_USAGE;
  }
  return CLI_OK;
}

int cli_fail(const hlo_diag *diag) {
  /* Parser messages already read "FILE:LINE:COL: error: ..."; do not prefix them twice. */
  if (strstr(diag->message, "error:")) fprintf(stderr, "%s\n", diag->message);
  else cli_error("%s", diag->message[0] ? diag->message : "unknown failure");
  return diag->status == HLO_OK ? CLI_INTERNAL : (int)diag->status;
}

int cli_count_elided(const hlo_module *module) {
  int count = 0;
  for (int c = 0; c < module->comp_count; c++) {
    const hlo_comp *comp = module->comps[c];
    for (int i = 0; i < comp->instr_count; i++) {
      const hlo_literal *literal = comp->instrs[i]->literal;
      count += comp->instrs[i]->opcode == HLO_OP_CONSTANT && literal && literal->elided;
    }
  }
  return count;
}

double cli_now(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

int cli_open_remote(const char *who, const char *url_flag, cache_remote **remote) {
  const char *url = url_flag ? url_flag : getenv("LATCH_CACHE_URL");
  *remote = NULL;
  if (!url || !*url) {
    cli_error("%s need --cache-url URL or LATCH_CACHE_URL", who);
    return CLI_USAGE;
  }
  latch_options options;
  if (latch_options_init(&options) != LATCH_OK) {
    cli_error("%s", latch_last_error());
    return CLI_USAGE;
  }
  cache_remote_config config;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  if (cap_remote_config(&options, url, &config, &diag) != HLO_OK) {
    explicit_bzero(config.password, sizeof config.password);
    return cli_fail(&diag);
  }
  *remote = cache_remote_open(&config, options.cache_secret, &diag);
  return *remote ? CLI_OK : cli_fail(&diag);
}

int cli_open_world(rt_compile_options *compile) {
  latch_options options;
  if (latch_options_init(&options) != LATCH_OK) {
    cli_error("%s", latch_last_error());
    return CLI_USAGE;
  }
  hlo_diag diag;
  hlo_diag_clear(&diag);
  compile->comm = rt_comm_open(options.collective_timeout, &diag);
  return compile->comm ? CLI_OK : cli_fail(&diag);
}

int cli_runtime_settings(rt_compile_options *compile) {
  latch_options options;
  if (latch_options_init(&options) != LATCH_OK) {
    cli_error("%s", latch_last_error());
    return CLI_USAGE;
  }
  if (options.threads > 0) rt_parallel_request_threads(options.threads);
  cap_compile_options(&options, compile);
  return CLI_OK;
}

/* The check's group dies with the command; the signal then does what it would have. */
static void kill_checks(int sig) {
  min_check_kill_running();
  signal(sig, SIG_DFL);
  raise(sig);
}

void cli_kill_checks_on_signal(void) {
  static const int signals[] = {SIGINT, SIGTERM, SIGHUP};
  for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = kill_checks;
    sigemptyset(&action.sa_mask);
    sigaction(signals[i], &action, NULL);
  }
}
