/* latch parse: reads HLO text files, verifies each module, and summarizes it (computations,
 * instructions, an opcode histogram), or re-prints it through latch's printer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "hlo/hlo.h"

void cmd_parse_usage(void) {
  fputs("usage: latch parse FILE... [--print]\n"
        "\n"
        "Parses each HLO text file (a file may hold several modules separated by a line\n"
        "'// -----'), verifies every module, and prints per module its computations,\n"
        "instruction count and an opcode histogram, most frequent first, with the parse time.\n"
        "\n"
        "  --print   print each module as HLO text on stdout (the summary goes to stderr),\n"
        "            e.g. to round-trip: latch parse in.hlo --print > out.hlo\n"
        "\n"
        "Exit status: 0 all files parsed and verified, 1 a file could not be read or is not\n"
        "valid HLO (the message reads FILE:LINE:COL: error: ...), 2 valid HLO using something\n"
        "latch does not support. Every file is processed; the worst status wins.\n"
        "\n"
        "example: latch parse ../shared/corpus/xla/*.hlo\n",
        stdout);
}

typedef struct opcode_count {
  hlo_opcode opcode;
  int count;
} opcode_count;

static int by_count_then_name(const void *a, const void *b) {
  const opcode_count *x = a, *y = b;
  if (x->count != y->count) return x->count > y->count ? -1 : 1;
  return strcmp(hlo_opcode_name(x->opcode), hlo_opcode_name(y->opcode));
}

static int count_instructions(const hlo_module *module) {
  int total = 0;
  for (int c = 0; c < module->comp_count; c++) total += module->comps[c]->instr_count;
  return total;
}

static void print_histogram(FILE *out, const hlo_module *module) {
  opcode_count counts[HLO_OP_COUNT];
  for (int op = 0; op < HLO_OP_COUNT; op++) counts[op] = (opcode_count){(hlo_opcode)op, 0};
  for (int c = 0; c < module->comp_count; c++)
    for (int i = 0; i < module->comps[c]->instr_count; i++) counts[module->comps[c]->instrs[i]->opcode].count++;
  qsort(counts, HLO_OP_COUNT, sizeof counts[0], by_count_then_name);
  for (int op = 0; op < HLO_OP_COUNT && counts[op].count > 0; op++)
    fprintf(out, "    %7d  %s\n", counts[op].count, hlo_opcode_name(counts[op].opcode));
}

static void print_summary(FILE *out, const hlo_module *module) {
  int elided = cli_count_elided(module);
  int instructions = count_instructions(module);
  fprintf(out, "  module %s: %d computation%s (entry %s), %d instruction%s", module->name, module->comp_count,
          module->comp_count == 1 ? "" : "s", module->entry ? module->entry->name : "none", instructions,
          instructions == 1 ? "" : "s");
  if (elided) fprintf(out, ", %d elided constant%s", elided, elided == 1 ? "" : "s");
  fputc('\n', out);
  print_histogram(out, module);
}

/* A module's verifier error: located ones already read "FILE:LINE:COL: error: ...". */
static void report_invalid(const char *path, const hlo_module *module, const hlo_diag *diag) {
  if (strstr(diag->message, "error:")) fprintf(stderr, "%s (module %s)\n", diag->message, module->name);
  else cli_error("%s: module %s: %s", path, module->name, diag->message);
}

/* Parses, verifies and reports one file, each module on its own (a module that does not
 * parse or verify is reported and the others still are); returns its exit status. */
static int parse_one(const char *path, bool print_text) {
  FILE *summary = print_text ? stderr : stdout;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  hlo_parsed *parsed = NULL;
  double start = cli_now();
  int count = hlo_parse_file_each(path, &parsed, &diag);
  double seconds = cli_now() - start;
  if (count < 0) return cli_fail(&diag);
  struct stat st;
  double megabytes = stat(path, &st) == 0 ? (double)st.st_size / 1e6 : 0;
  start = cli_now();
  hlo_diag *verify_diags = calloc((size_t)count, sizeof *verify_diags);
  if (!verify_diags) {
    hlo_parsed_free(parsed, count);
    cli_error("%s: out of memory", path);
    return CLI_INTERNAL;
  }
  for (int m = 0; m < count; m++)
    if (parsed[m].module) hlo_verify_module(parsed[m].module, &verify_diags[m]);
  double verify_seconds = cli_now() - start;
  fprintf(summary, "%s: %d module%s, parsed in %.2f ms (%.1f MB/s), verified in %.2f ms\n", path, count,
          count == 1 ? "" : "s", seconds * 1e3, seconds > 0 ? megabytes / seconds : 0.0, verify_seconds * 1e3);
  int worst = CLI_OK, printed = 0;
  for (int m = 0; m < count; m++) {
    const hlo_diag *failed = !parsed[m].module ? &parsed[m].diag : verify_diags[m].status ? &verify_diags[m] : NULL;
    if (failed) {
      if (!parsed[m].module) cli_fail(failed);
      else report_invalid(path, parsed[m].module, failed);
      if ((int)failed->status > worst) worst = (int)failed->status;
      continue;
    }
    print_summary(summary, parsed[m].module);
    if (print_text) {
      /* The separator keeps a multi-module file parseable as one after printing. */
      if (printed++ > 0) fputs("// -----\n", stdout);
      char *text = hlo_module_to_text(parsed[m].module);
      if (text) {
        fputs(text, stdout);
      } else {
        cli_error("%s: module %s: out of memory printing it", path, parsed[m].module->name);
        worst = CLI_INTERNAL;
      }
      free(text);
    }
  }
  hlo_parsed_free(parsed, count);
  free(verify_diags);
  return worst;
}

int cmd_parse(int argc, char **argv) {
  const char *help = NULL, *print = NULL;
  const cli_flag flags[] = {{"--help", false, &help}, {"--print", false, &print}};
  const char **files = calloc((size_t)argc + 1, sizeof(char *));
  if (!files) return CLI_INTERNAL;
  int file_count = 0;
  int status = cli_parse_flags("parse", argc, argv, flags, 2, files, &file_count, argc);
  if (status == CLI_OK && help) {
    cmd_parse_usage();
  } else if (status == CLI_OK && file_count == 0) {
    cli_error("parse: no input files (see 'latch parse --help')");
    status = CLI_USAGE;
  } else if (status == CLI_OK) {
    /* A bad file does not stop the others; the worst status is the exit status. */
    for (int i = 0; i < file_count; i++) {
      int file_status = parse_one(files[i], print != NULL);
      if (file_status > status) status = file_status;
    }
  }
  free(files);
  return status;
}
