/* The culprit among the backend's own choices (minify.h): which pass application or kernel
 * choice makes a module fail.
 *
 * The backend asks hlo_choice before each optimization it may make (hlo/choices.c), in a
 * fixed order: the passes first, then the kernel choices of its plan. A compile whose
 * options limit the choices to the first N takes those and makes the rest the plain way. If
 * the module fails with every choice taken and passes with none, there is a smallest N at
 * which it fails, and the Nth choice is the culprit: the first N-1 are the same in both
 * compiles, so taking the Nth is the difference. One compile with a log lists the choices
 * (what each is, on which instruction); a binary search over N finds the smallest, in about
 * log2 of their number checks, each in a child process as the minifier's. */
#include "minify_internal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The passes' kinds; every other kind is a kernel choice. */
static bool is_pass(const char *kind) {
  static const char *const passes[] = {"inline", "simplify", "cse", "dot_of_repeats", "fold_affine", "space_to_depth",
                                       "input_grad"};
  for (size_t i = 0; i < sizeof passes / sizeof passes[0]; i++)
    if (strcmp(kind, passes[i]) == 0) return true;
  return false;
}

static void log_line(void *context, const char *kind, const char *name, bool taken) {
  (void)taken;
  fprintf(context, "%s\t%s\n", kind, name);
}

/* The choices a full compile makes, in order, read from a child's log (a compile that
 * crashes or hangs lists those it made before). */
static hlo_status list_choices(const min_bisect_request *request, min_choice **choices, int64_t *count,
                               hlo_diag *diag) {
  *choices = NULL;
  *count = 0;
  FILE *log = tmpfile();
  if (!log) return hlo_diag_set(diag, HLO_ERR_INTERNAL, "cannot make a temporary file: %s", strerror(errno));
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    fclose(log);
    return hlo_diag_set(diag, HLO_ERR_INTERNAL, "fork: %s", strerror(errno));
  }
  if (pid == 0) {
    alarm(request->predicate.timeout_s > 0 ? (unsigned)request->predicate.timeout_s + 1 : 0);
    rt_compile_options options = request->compile_options ? *request->compile_options
                                                          : (rt_compile_options)RT_COMPILE_OPTIONS_INIT;
    options.choice_log = log_line;
    options.choice_log_context = log;
    hlo_diag child_diag;
    hlo_diag_clear(&child_diag);
    rt_executable *exe = request->backend->compile(request->module, &options, &child_diag);
    fflush(log);
    _exit(exe ? 0 : 1);
  }
  int status;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  rewind(log);
  char line[1024];
  int64_t capacity = 0;
  while (fgets(line, sizeof line, log)) {
    char *tab = strchr(line, '\t');
    if (!tab) continue;
    *tab = 0;
    char *name = tab + 1;
    name[strcspn(name, "\n")] = 0;
    if (*count == capacity) {
      capacity = capacity ? capacity * 2 : 64;
      min_choice *more = hlo_realloc(*choices, sizeof **choices * (size_t)capacity);
      if (!more) {
        fclose(log);
        return hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory listing choices");
      }
      *choices = more;
    }
    min_choice *c = &(*choices)[(*count)++];
    snprintf(c->kind, sizeof c->kind, "%.31s", line);
    snprintf(c->name, sizeof c->name, "%.255s", name);
  }
  fclose(log);
  return HLO_OK;
}

/* One check with the first limit choices taken (-1: all). */
static hlo_status check_limit(const min_bisect_request *request, int64_t limit, min_outcome *outcome,
                              min_bisect_result *result, hlo_diag *diag) {
  min_predicate predicate = request->predicate;
  rt_compile_options options = request->compile_options ? *request->compile_options
                                                        : (rt_compile_options)RT_COMPILE_OPTIONS_INIT;
  char env[64] = "";
  if (limit >= 0) {
    options.limit_choices = true;
    options.choice_limit = limit;
    snprintf(env, sizeof env, "LATCH_CHOICES=%lld", (long long)limit);
  }
  predicate.compile_options = &options;
  predicate.env = env[0] ? env : NULL;
  hlo_status status = min_check(&predicate, request->module, request->inputs, request->input_count, outcome, diag);
  if (status == HLO_OK) result->checks++;
  return status;
}

hlo_status min_bisect(const min_bisect_request *request, min_bisect_result *result, hlo_diag *diag) {
  memset(result, 0, sizeof *result);
  min_choice *choices = NULL;
  int64_t total = 0;
  if (list_choices(request, &choices, &total, diag) != HLO_OK) return diag->status;
  result->total = total;
  min_outcome outcome;
  hlo_status status = check_limit(request, -1, &result->failure, result, diag);
  if (status == HLO_OK && (result->failure.kind == MIN_PASS || result->failure.kind == MIN_CHECK_ERROR)) {
    char text[1400];
    min_outcome_describe(&result->failure, text, sizeof text);
    status = hlo_diag_set(diag, HLO_ERR_INPUT, "the module does not fail the check, so there is no culprit (%s)", text);
  }
  if (status == HLO_OK) status = check_limit(request, 0, &outcome, result, diag);
  if (status == HLO_OK && min_outcome_same(&result->failure, &outcome)) {
    snprintf(result->line, sizeof result->line,
             "culprit: none of the backend's %lld choices (the module fails with all of them refused)",
             (long long)total);
    free(choices);
    return HLO_OK;
  }
  int64_t lo = 0, hi = total; /* f(lo) passes, f(hi) fails */
  while (status == HLO_OK && hi - lo > 1) {
    int64_t mid = lo + (hi - lo) / 2;
    status = check_limit(request, mid, &outcome, result, diag);
    if (status != HLO_OK) break;
    if (min_outcome_same(&result->failure, &outcome)) hi = mid;
    else lo = mid;
  }
  if (status == HLO_OK && total == 0) status = hlo_diag_set(diag, HLO_ERR_INPUT, "the backend made no choices");
  if (status == HLO_OK) {
    const min_choice *c = &choices[hi - 1];
    result->culprit = hi;
    result->choice = *c;
    for (int64_t i = 0; i < total; i++)
      if (strcmp(choices[i].kind, c->kind) == 0) {
        result->of++;
        if (i < hi) result->application++;
      }
    result->is_pass = is_pass(c->kind);
    if (result->is_pass)
      snprintf(result->line, sizeof result->line, "culprit: pass %s, application %lld of %lld (%%%s)", c->kind,
               (long long)result->application, (long long)result->of, c->name);
    else
      snprintf(result->line, sizeof result->line, "culprit: %s on %%%s", c->kind, c->name);
  }
  free(choices);
  return status;
}

void min_bisect_text(const min_bisect_result *r, char *buffer, size_t size) {
  int n = snprintf(buffer, size, "%s\n", r->line);
  if (n < 0 || (size_t)n >= size) return;
  if (r->culprit > 0)
    n += snprintf(buffer + n, size - (size_t)n,
                  "  choice %lld of the %lld the compile makes: LATCH_CHOICES=%lld fails, LATCH_CHOICES=%lld passes\n"
                  "  LATCH_AVOID=%s@%s refuses it alone\n",
                  (long long)r->culprit, (long long)r->total, (long long)r->culprit, (long long)r->culprit - 1,
                  r->choice.kind, r->choice.name);
  if (n >= 0 && (size_t)n < size) snprintf(buffer + n, size - (size_t)n, "  %d checks\n", r->checks);
}
