/* Candidate checks in a child process with a time limit (check.h). */
#include "minify.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runtime/runtime.h"
#include "runtime/reference/reference.h"

static void set_message(min_outcome *outcome, const char *message) {
  snprintf(outcome->message, sizeof outcome->message, "%s", message);
}

/* The references of module on inputs, both runs, into own (new references). */
static hlo_status own_refs(const hlo_module *module, rt_value *const *inputs, int input_count, min_refs *own,
                           hlo_diag *diag) {
  rt_value *declared = NULL, *fp64 = NULL;
  rt_eval_options declared_options = {.fp64 = false}, fp64_options = {.fp64 = true};
  hlo_status status = rt_evaluate(module, inputs, input_count, &declared_options, &declared, diag);
  if (status == HLO_OK) status = rt_evaluate(module, inputs, input_count, &fp64_options, &fp64, diag);
  if (status != HLO_OK) {
    rt_value_release(declared);
    rt_value_release(fp64);
    return status;
  }
  *own = (min_refs){declared, fp64};
  return HLO_OK;
}

/* The root's elements that fail on their own, into outcome->failed: each top-level element
 * of a tuple result is judged alone. A root that is no tuple is element 0. */
static void failed_outputs(const min_refs *refs, const rt_value *result, double tol, min_outcome *outcome) {
  outcome->failed_count = 0;
  if (result->shape.dtype != HLO_TUPLE) {
    outcome->failed[outcome->failed_count++] = 0;
    return;
  }
  const rt_value *declared = refs->declared, *fp64 = refs->fp64;
  if (declared->shape.dtype != HLO_TUPLE || fp64->shape.dtype != HLO_TUPLE) return;
  for (int i = 0; i < result->tuple_count && outcome->failed_count < MIN_MAX_FAILED; i++) {
    if (i >= declared->tuple_count || i >= fp64->tuple_count) break;
    rt_accuracy_verdict verdict;
    hlo_diag diag;
    hlo_diag_clear(&diag);
    if (rt_accuracy_compare(result->tuple[i], declared->tuple[i], fp64->tuple[i], tol, &verdict, &diag) == HLO_OK &&
        !verdict.passed)
      outcome->failed[outcome->failed_count++] = i;
  }
}

/* The accuracy verdict on result, against refs when given, else against fresh reference
 * runs; the failing outputs go into outcome. */
static hlo_status judge(const hlo_module *module, rt_value *const *inputs, int input_count, const min_refs *refs,
                        const rt_value *result, double tol, rt_accuracy_verdict *verdict, min_outcome *outcome,
                        hlo_diag *diag) {
  min_refs own = {NULL, NULL};
  if (!refs) {
    if (own_refs(module, inputs, input_count, &own, diag) != HLO_OK) return diag->status;
    refs = &own;
  }
  hlo_status status = rt_accuracy_compare(result, refs->declared, refs->fp64, tol, verdict, diag);
  if (status == HLO_OK && !verdict->passed) failed_outputs(refs, result, tol, outcome);
  rt_value_release((rt_value *)own.declared);
  rt_value_release((rt_value *)own.fp64);
  return status;
}

void min_check_inline_refs(const min_predicate *predicate, const hlo_module *module, rt_value *const *inputs,
                           int input_count, const min_refs *refs, min_outcome *outcome) {
  memset(outcome, 0, sizeof *outcome);
  outcome->opcode = HLO_OP_COUNT;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  const rt_backend *backend = predicate->backend;
  rt_executable *exe = backend->compile(module, predicate->compile_options, &diag);
  if (!exe) {
    outcome->kind = MIN_COMPILE_ERROR;
    outcome->status = diag.status == HLO_OK ? HLO_ERR_INTERNAL : diag.status;
    outcome->opcode = min_opcode_in_message(module, diag.message);
    set_message(outcome, diag.message);
    return;
  }
  if (predicate->kind == MIN_CHECK_ACCURACY || predicate->kind == MIN_CHECK_EXECUTE) {
    rt_value *result = NULL;
    if (backend->execute(exe, inputs, input_count, &result, &diag) != HLO_OK) {
      outcome->kind = MIN_EXECUTE_ERROR;
      outcome->status = diag.status == HLO_OK ? HLO_ERR_INTERNAL : diag.status;
      outcome->opcode = min_opcode_in_message(module, diag.message);
      set_message(outcome, diag.message);
    } else if (predicate->kind == MIN_CHECK_ACCURACY) {
      rt_accuracy_verdict verdict;
      if (judge(module, inputs, input_count, refs, result, predicate->tol, &verdict, outcome, &diag) != HLO_OK) {
        outcome->kind = MIN_CHECK_ERROR;
        outcome->status = diag.status;
        set_message(outcome, diag.message);
      } else if (!verdict.passed) {
        outcome->kind = MIN_ACCURACY;
        set_message(outcome, verdict.message);
      }
    }
    rt_value_release(result);
  }
  backend->destroy(exe);
}

/* Blocks until all of size is written or the pipe breaks. */
static void write_all(int fd, const void *data, size_t size) {
  const char *bytes = data;
  while (size > 0) {
    ssize_t n = write(fd, bytes, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    bytes += n;
    size -= (size_t)n;
  }
}

static size_t read_all(int fd, void *data, size_t size) {
  char *bytes = data;
  size_t got = 0;
  while (got < size) {
    ssize_t n = read(fd, bytes + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += (size_t)n;
  }
  return got;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The process group of the check running now, 0 when none: what min_check_kill_running
 * kills from a signal handler. */
static volatile sig_atomic_t running_group;
/* The process that forks the checks, which the child compares its parent with. */
static pid_t check_parent;

void min_check_kill_running(void) {
  pid_t group = (pid_t)running_group;
  if (group > 0) kill(-group, SIGKILL);
}

/* The child's side: its own process group (so a timeout kills whatever it started), quiet
 * standard streams (a crashing backend's noise is not the minifier's output), then the
 * check; the answer goes back through the pipe. Never returns. */
static void child(const min_predicate *predicate, const hlo_module *module, rt_value *const *inputs,
                  int input_count, const min_refs *refs, const char *hlo_path, const char *inputs_dir, int fd,
                  int err_fd) {
  setpgid(0, 0);
  /* a parent killed outright (SIGKILL: no handler runs) takes the check with it */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != check_parent) _exit(127); /* the parent is already gone */
  int null_fd = open("/dev/null", O_RDWR);
  if (null_fd >= 0) {
    dup2(null_fd, STDIN_FILENO);
    dup2(null_fd, STDOUT_FILENO);
    dup2(err_fd >= 0 ? err_fd : null_fd, STDERR_FILENO);
    if (null_fd > STDERR_FILENO) close(null_fd);
  }
  if (predicate->env) putenv((char *)predicate->env);
  if (predicate->kind == MIN_CHECK_COMMAND) {
    close(fd);
    char script[4096];
    snprintf(script, sizeof script, "%s \"$@\"", predicate->command);
    setenv("LATCH_MINIFY_INPUTS", inputs_dir, 1);
    execl("/bin/sh", "sh", "-c", script, "sh", hlo_path, (char *)NULL);
    _exit(127);
  }
  min_outcome outcome;
  min_check_inline_refs(predicate, module, inputs, input_count, refs, &outcome);
  write_all(fd, &outcome, sizeof outcome);
  _exit(0);
}

/* Waits for the child's answer or its end, up to the time limit; true when it finished. */
static bool wait_for(int fd, double timeout_s) {
  double deadline = now_s() + (timeout_s > 0 ? timeout_s : 1e9);
  for (;;) {
    double left = deadline - now_s();
    if (left <= 0) return false;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int ready = poll(&p, 1, left > 1e6 ? 1000000000 : (int)(left * 1000) + 1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready != 0) return true;
  }
}

static void command_outcome(const min_predicate *predicate, int status, min_outcome *outcome) {
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  outcome->exit_code = code;
  bool failing = predicate->command_nonzero ? code != 0 : code == 0;
  outcome->kind = failing ? MIN_COMMAND : MIN_PASS;
  snprintf(outcome->message, sizeof outcome->message, "the test command exited with %d", code);
}

void min_check_inline(const min_predicate *predicate, const hlo_module *module, rt_value *const *inputs,
                      int input_count, min_outcome *outcome) {
  min_check_inline_refs(predicate, module, inputs, input_count, NULL, outcome);
}

hlo_status min_check(const min_predicate *predicate, const hlo_module *module, rt_value *const *inputs,
                     int input_count, min_outcome *outcome, hlo_diag *diag) {
  return min_check_refs(predicate, module, inputs, input_count, NULL, outcome, diag);
}

/* The last line the child wrote on stderr (the file err), "" when none. */
static void last_line(FILE *err, char *line, size_t size) {
  line[0] = 0;
  if (!err || fseek(err, 0, SEEK_END) != 0) return;
  long end = ftell(err);
  long start = end > (long)size - 1 ? end - (long)size + 1 : 0;
  if (end <= 0 || fseek(err, start, SEEK_SET) != 0) return;
  size_t got = fread(line, 1, size - 1, err);
  line[got] = 0;
  while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r')) line[--got] = 0;
  char *newline = strrchr(line, '\n');
  if (newline) memmove(line, newline + 1, strlen(newline + 1) + 1);
}

/* A check's process that ended without an answer: the signal (or exit status), then what it
 * said last on stderr, and the op that names. */
static void crash_outcome(const hlo_module *module, int status, FILE *err, min_outcome *outcome) {
  outcome->kind = MIN_CRASH;
  outcome->signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  outcome->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
  char said[512];
  last_line(err, said, sizeof said);
  if (outcome->signal)
    snprintf(outcome->message, sizeof outcome->message, "killed by signal %d (%s)%s%s", outcome->signal,
             strsignal(outcome->signal), said[0] ? ": " : "", said);
  else
    snprintf(outcome->message, sizeof outcome->message, "exited with %d without an answer%s%s", outcome->exit_code,
             said[0] ? ": " : "", said);
  if (said[0]) outcome->opcode = min_opcode_in_message(module, said);
}

hlo_status min_check_refs(const min_predicate *predicate, const hlo_module *module, rt_value *const *inputs,
                          int input_count, const min_refs *refs, min_outcome *outcome, hlo_diag *diag) {
  memset(outcome, 0, sizeof *outcome);
  outcome->opcode = HLO_OP_COUNT;
  char hlo_path[4096] = "", inputs_dir[4096] = "";
  if (predicate->kind == MIN_CHECK_COMMAND) {
    snprintf(hlo_path, sizeof hlo_path, "%s/candidate.hlo", predicate->work_dir);
    snprintf(inputs_dir, sizeof inputs_dir, "%s/inputs", predicate->work_dir);
    if (min_write_case(predicate->work_dir, "candidate.hlo", module, inputs, input_count, diag) != HLO_OK)
      return diag->status;
  }
  int fds[2];
  if (pipe(fds) != 0) return hlo_diag_set(diag, HLO_ERR_INTERNAL, "pipe: %s", strerror(errno));
  /* What the check says on stderr before it dies names the op a crash is about. */
  FILE *err = predicate->kind == MIN_CHECK_COMMAND ? NULL : tmpfile();
  fflush(NULL); /* the child must not write out the parent's buffered output again */
  check_parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    if (err) fclose(err);
    return hlo_diag_set(diag, HLO_ERR_INTERNAL, "fork: %s", strerror(errno));
  }
  if (pid == 0) {
    close(fds[0]);
    child(predicate, module, inputs, input_count, refs, hlo_path, inputs_dir, fds[1], err ? fileno(err) : -1);
  }
  close(fds[1]);
  setpgid(pid, pid); /* also here: whichever of parent and child runs first */
  running_group = pid;
  bool finished = wait_for(fds[0], predicate->timeout_s);
  int status = 0;
  if (!finished) {
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    running_group = 0;
    close(fds[0]);
    if (err) fclose(err);
    outcome->kind = MIN_HANG;
    snprintf(outcome->message, sizeof outcome->message, "no answer within %g s; killed", predicate->timeout_s);
    return HLO_OK;
  }
  min_outcome answer;
  size_t got = read_all(fds[0], &answer, sizeof answer);
  close(fds[0]);
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  kill(-pid, SIGKILL); /* anything the check left running in its group */
  running_group = 0;
  if (predicate->kind == MIN_CHECK_COMMAND) {
    command_outcome(predicate, status, outcome);
  } else if (got == sizeof answer) {
    *outcome = answer;
  } else {
    crash_outcome(module, status, err, outcome);
  }
  if (err) fclose(err);
  return HLO_OK;
}

/* A word of a message that names a particular thing rather than the kind of error: an
 * instruction (%name), a number, a shape or anything with a digit in it. */
static bool particular(const char *word, size_t len) {
  if (word[0] == '%') return true;
  for (size_t i = 0; i < len; i++)
    if ((word[i] >= '0' && word[i] <= '9') || word[i] == '[' || word[i] == '{') return true;
  return false;
}

void min_message_class(const char *message, char *buffer, int size) {
  size_t used = 0, cap = size > 0 ? (size_t)size : 0;
  if (cap) buffer[0] = 0;
  for (const char *p = message; *p && used + 1 < cap;) {
    while (*p == ' ' || *p == '\t' || *p == '\n') p++;
    const char *start = p;
    while (*p && *p != ' ' && *p != '\t' && *p != '\n') p++;
    size_t len = (size_t)(p - start);
    if (len == 0 || particular(start, len)) continue;
    int wrote = snprintf(buffer + used, cap - used, "%s%.*s", used ? " " : "", (int)len, start);
    if (wrote < 0) break;
    used += (size_t)wrote;
  }
}

static bool same_class(const min_outcome *want, const min_outcome *got) {
  char a[1024], b[1024];
  min_message_class(want->message, a, sizeof a);
  min_message_class(got->message, b, sizeof b);
  return strcmp(a, b) == 0;
}

bool min_outcome_same(const min_outcome *want, const min_outcome *got) {
  if (want->kind != got->kind) return false;
  switch (want->kind) {
    case MIN_COMPILE_ERROR:
    case MIN_EXECUTE_ERROR: return want->status == got->status && want->opcode == got->opcode && same_class(want, got);
    case MIN_CRASH:
      return want->signal == got->signal && (want->signal || want->exit_code == got->exit_code) &&
             (want->opcode == HLO_OP_COUNT || got->opcode == HLO_OP_COUNT || want->opcode == got->opcode);
    case MIN_ACCURACY:
    case MIN_HANG:
    case MIN_COMMAND: return true;
    default: return false;
  }
}

static const char *status_name(hlo_status status) {
  switch (status) {
    case HLO_ERR_INPUT: return "input error";
    case HLO_ERR_UNSUPPORTED: return "unsupported";
    case HLO_ERR_INTERNAL: return "internal error";
    default: return "ok";
  }
}

void min_outcome_describe(const min_outcome *o, char *buffer, int size) {
  const char *op = o->opcode < HLO_OP_COUNT ? hlo_opcode_name(o->opcode) : "no op named";
  switch (o->kind) {
    case MIN_PASS: snprintf(buffer, (size_t)size, "passes"); break;
    case MIN_COMPILE_ERROR:
      snprintf(buffer, (size_t)size, "compile error (%s) on %s: %s", status_name(o->status), op, o->message);
      break;
    case MIN_EXECUTE_ERROR:
      snprintf(buffer, (size_t)size, "execute error (%s) on %s: %s", status_name(o->status), op, o->message);
      break;
    case MIN_ACCURACY: snprintf(buffer, (size_t)size, "accuracy failure: %s", o->message); break;
    case MIN_CRASH: snprintf(buffer, (size_t)size, "crash: %s", o->message); break;
    case MIN_HANG: snprintf(buffer, (size_t)size, "hang: %s", o->message); break;
    case MIN_COMMAND: snprintf(buffer, (size_t)size, "still failing: %s", o->message); break;
    case MIN_CHECK_ERROR: snprintf(buffer, (size_t)size, "the check could not run: %s", o->message); break;
  }
}

static bool word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
         c == '-';
}

static const hlo_instr *find_instr(const hlo_module *module, const char *word, size_t len) {
  for (int c = 0; c < module->comp_count; c++)
    for (int i = 0; i < module->comps[c]->instr_count; i++) {
      const char *name = module->comps[c]->instrs[i]->name;
      if (strlen(name) == len && memcmp(name, word, len) == 0) return module->comps[c]->instrs[i];
    }
  return NULL;
}

/* One pass over the message's words: pass 0 takes %name words naming an instruction, pass 1
 * opcode names, pass 2 bare words naming an instruction. */
static hlo_opcode scan_message(const hlo_module *module, const char *message, int pass) {
  for (const char *p = message; *p;) {
    if (!word_char(*p)) {
      p++;
      continue;
    }
    const char *start = p;
    bool sigil = start > message && start[-1] == '%';
    while (word_char(*p)) p++;
    size_t len = (size_t)(p - start);
    while (len > 0 && (start[len - 1] == '.' || start[len - 1] == '-')) len--; /* sentence punctuation */
    if (pass == 1) {
      hlo_opcode op = hlo_opcode_from_name(start, len);
      if (op != HLO_OP_COUNT) return op;
      continue;
    }
    if (pass == 0 && !sigil) continue;
    const hlo_instr *instr = module ? find_instr(module, start, len) : NULL;
    if (instr) return instr->opcode;
  }
  return HLO_OP_COUNT;
}

hlo_opcode min_opcode_in_message(const hlo_module *module, const char *message) {
  /* HLO text marks instruction names with %, which makes them the surest; bare words may be
   * English ("x" is a word and a parameter's name), so they come last. */
  for (int pass = 0; pass < 3; pass++) {
    hlo_opcode op = scan_message(module, message, pass);
    if (op != HLO_OP_COUNT) return op;
  }
  return HLO_OP_COUNT;
}

const char *min_check_kind_name(min_check_kind kind) {
  switch (kind) {
    case MIN_CHECK_COMPILE: return "compile";
    case MIN_CHECK_ACCURACY: return "accuracy";
    case MIN_CHECK_EXECUTE: return "compile and run";
    case MIN_CHECK_COMMAND: return "test command";
  }
  return "?";
}
