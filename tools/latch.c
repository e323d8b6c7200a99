/* The latch command: one subcommand per job, each in its own cmd_*.c file. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *out) {
  fputs("usage: latch COMMAND [ARGS]\n"
        "\n"
        "latch captures tensor programs as XLA HLO graphs and evaluates them. Commands:\n"
        "  parse FILE... [--print]   parse and verify HLO text files, summarize each module\n"
        "  run FILE [OPTIONS]        run a module's entry computation and print its outputs\n"
        "  cache ACTION [--dir DIR]  the on-disk compile cache: stats, ls, verify, clear\n"
        "  minify FILE [OPTIONS]     shrink a module that fails a check to a small repro\n"
        "  bisect FILE [OPTIONS]     name the pass or kernel choice that makes a module fail\n"
        "  bench [OPTIONS]           time the model zoo eager vs traced (--micro: capture's costs per op)\n"
        "  help [COMMAND]            this text, or a command's options\n"
        "\n"
        "Run 'latch COMMAND --help' for a command's options and examples.\n"
        "Exit status: 0 ok, 1 usage or input error, 2 unsupported op or type, 3 internal error,\n"
        "4 a check failed (run --check accuracy).\n",
        out);
}

typedef struct command {
  const char *name;
  int (*run)(int argc, char **argv);
  void (*usage)(void);
} command;

static const command commands[] = {
    {"parse", cmd_parse, cmd_parse_usage},
    {"run", cmd_run, cmd_run_usage},
    {"cache", cmd_cache, cmd_cache_usage},
    {"minify", cmd_minify, cmd_minify_usage},
    {"bisect", cmd_bisect, cmd_bisect_usage},
    {"bench", cmd_bench, cmd_bench_usage},
};

static const command *find_command(const char *name) {
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (strcmp(commands[i].name, name) == 0) return &commands[i];
  return NULL;
}

int main(int argc, char **argv) {
  /* Line-buffered so that results on stdout and notes or errors on stderr interleave in
   * the order they happened when both go to one file or pipe. */
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 2) {
    usage(stderr);
    return CLI_USAGE;
  }
  const char *name = argv[1];
  if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
    const command *topic = argc > 2 ? find_command(argv[2]) : NULL;
    if (argc > 2 && !topic) {
      cli_error("unknown command '%s'", argv[2]);
      return CLI_USAGE;
    }
    if (topic) topic->usage();
    else usage(stdout);
    return CLI_OK;
  }
  const command *cmd = find_command(name);
  if (!cmd) {
    cli_error("unknown command '%s' (commands: parse, run, cache, minify, bench; see 'latch --help')", name);
    return CLI_USAGE;
  }
  return cmd->run(argc - 2, argv + 2);
}
