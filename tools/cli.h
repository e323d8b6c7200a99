/* Pieces shared by the latch command's subcommands: flag parsing, messages, exit codes. */
#ifndef LATCH_CLI_H
#define LATCH_CLI_H
#include <stdbool.h>

#include "cache/cache.h"
#include "hlo/hlo.h"
#include "runtime/runtime.h"

/* Exit status: the hlo_status of the failure, so scripts (and the minifier) can tell a bad
 * input (1) from an unsupported op or type (2) from an internal failure (3). */
enum { CLI_OK = 0, CLI_USAGE = 1, CLI_UNSUPPORTED = 2, CLI_INTERNAL = 3, CLI_CHECK_FAILED = 4 };

/* One flag of a subcommand: --name VALUE (or --name=VALUE) stores VALUE in *value; a switch
 * (takes_value false) stores "1". */
typedef struct cli_flag {
  const char *name;
  bool takes_value;
  const char **value;
} cli_flag;

/* Splits argv (after the subcommand name) into flags and positional arguments; "--" ends
 * the flags. On a bad flag prints a message naming command and returns CLI_USAGE. */
int cli_parse_flags(const char *command, int argc, char **argv, const cli_flag *flags, int flag_count,
                    const char **positional, int *positional_count, int max_positional);

/* For the commands that check in children (minify, bisect): SIGINT, SIGTERM and SIGHUP kill
 * the check running in its own process group, then end the command as they would have. */
void cli_kill_checks_on_signal(void);
/* "latch: error: ..." on stderr. */
void cli_error(const char *format, ...) __attribute__((format(printf, 1, 2)));
/* text as a number >= min in *value; else "COMMAND: FLAG wants a number >= MIN" and false. */
bool cli_parse_number(const char *command, const char *flag, const char *text, double min, double *value);
/* The commands that check a module (minify, bisect): one input file, and exactly one of
 * --check compile|accuracy and --test CMD. CLI_OK, or CLI_USAGE with the message printed. */
int cli_check_target(const char *command, int file_count, const char *check, const char *test);
/* Prints diag's message (prefixed with "latch: error: " unless it already names a place
 * with "error:") and returns its status as the exit code. */
int cli_fail(const hlo_diag *diag);
/* Constants written `constant({...})` in the text: their values were made up by the parser. */
int cli_count_elided(const hlo_module *module);
/* The compile cache's remote tier from url_flag, else LATCH_CACHE_URL, signing with
 * LATCH_CACHE_SECRET; who names what needs it in the error when neither is set. */
int cli_open_remote(const char *who, const char *url_flag, cache_remote **remote);
/* Seconds on a monotonic clock. */
double cli_now(void);
/* For subcommands that run backends themselves: the settings latch_open would take from the
 * environment (latch_options_init): the thread count requested, compile filled. CLI_USAGE,
 * with the message printed, when a variable is malformed. */
int cli_runtime_settings(rt_compile_options *compile);
/* Joins MPI's world (--spmd), with LATCH_COLLECTIVE_TIMEOUT, into compile->comm. */
int cli_open_world(rt_compile_options *compile);

int cmd_parse(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_minify(int argc, char **argv);
int cmd_bisect(int argc, char **argv);
void cmd_parse_usage(void);
void cmd_run_usage(void);
int cmd_cache(int argc, char **argv);
void cmd_cache_usage(void);
void cmd_minify_usage(void);
void cmd_bisect_usage(void);

/* From latch run, for other commands: parse and verify a one-module file (printing what
 * run prints), and make one input per parameter from DIR/I.npy or, with DIR NULL, from seed. */
int cmd_run_load_module(const char *path, hlo_module **module);
int cmd_run_make_inputs(const char *inputs_dir, uint64_t seed, const hlo_comp *entry, rt_value **args);
int cmd_bench(int argc, char **argv);
void cmd_parse_usage(void);
void cmd_run_usage(void);
void cmd_bench_usage(void);
/* bench_remote.c: latch bench --remote-lookups N. */
int bench_remote_lookups(int count);

#endif
