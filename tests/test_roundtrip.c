/* Every corpus file: parse, verify, print, parse the print, print again; both prints must
 * be equal, and both modules must verify. The corpus directory is $LATCH_CORPUS, else
 * ../shared/corpus/xla (tests run from the repository root). */
#include <dirent.h>
#include <stdlib.h>

#include "hlo/hlo.h"
#include "test.h"

static int compare_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Where two texts part, as "line N: <first> | <second>", for the failure message. */
static void first_difference(const char *a, const char *b, char *out, size_t size) {
  int line = 1;
  const char *line_a = a, *line_b = b;
  while (*a && *a == *b) {
    if (*a == '\n') {
      line++;
      line_a = a + 1;
      line_b = b + 1;
    }
    a++;
    b++;
  }
  int len_a = (int)strcspn(line_a, "\n"), len_b = (int)strcspn(line_b, "\n");
  snprintf(out, size, "line %d:\n  %.*s\n  %.*s", line, len_a > 300 ? 300 : len_a, line_a,
           len_b > 300 ? 300 : len_b, line_b);
}

static int count_instrs(const hlo_module *m) {
  int n = 0;
  for (int i = 0; i < m->comp_count; i++) n += m->comps[i]->instr_count;
  return n;
}

static void round_trip(const char *path, hlo_module *m) {
  hlo_diag diag = {HLO_OK, ""};
  CHECK_MSG(hlo_verify_module(m, &diag) == HLO_OK, "%s: %s", path, diag.message);
  char *first = hlo_module_to_text(m);
  hlo_diag_clear(&diag);
  hlo_module *again = hlo_parse_module(first, strlen(first), "printed", &diag);
  CHECK_MSG(again != NULL, "%s: the printed text does not parse: %s", path, diag.message);
  if (!again) {
    free(first);
    return;
  }
  hlo_diag_clear(&diag);
  CHECK_MSG(hlo_verify_module(again, &diag) == HLO_OK, "%s, printed: %s", path, diag.message);
  CHECK_MSG(again->comp_count == m->comp_count && count_instrs(again) == count_instrs(m),
            "%s: %d computations, %d instructions became %d and %d", path, m->comp_count, count_instrs(m),
            again->comp_count, count_instrs(again));
  char *second = hlo_module_to_text(again);
  char where[800] = "";
  if (strcmp(first, second) != 0) first_difference(first, second, where, sizeof where);
  CHECK_MSG(strcmp(first, second) == 0, "%s: printing is not stable at %s", path, where);
  free(first);
  free(second);
  hlo_module_free(again);
}

/* Constructs the corpus lacks: select-and-scatter, both conditional forms, tuple, pred,
 * half and special-valued constants, an elided constant, rng-bit-generator. */
static const char extra_module[] =
    "HloModule extras, replica_count=1\n"
    "\n"
    "%add (a: f32[], b: f32[]) -> f32[] {\n"
    "  %a = f32[] parameter(0)\n"
    "  %b = f32[] parameter(1)\n"
    "  ROOT %sum = f32[] add(%a, %b)\n"
    "}\n"
    "\n"
    "%ge (x: f32[], y: f32[]) -> pred[] {\n"
    "  %x = f32[] parameter(0)\n"
    "  %y = f32[] parameter(1)\n"
    "  ROOT %c = pred[] compare(%x, %y), direction=GE\n"
    "}\n"
    "\n"
    "%then (t: f32[2]) -> f32[2] {\n"
    "  %t = f32[2] parameter(0)\n"
    "  ROOT %n = f32[2] negate(%t)\n"
    "}\n"
    "\n"
    "%else (e: f32[2]) -> f32[2] {\n"
    "  ROOT %e = f32[2] parameter(0)\n"
    "}\n"
    "\n"
    "%b0 (q: s32[]) -> s32[] {\n"
    "  ROOT %q = s32[] parameter(0)\n"
    "}\n"
    "\n"
    "ENTRY %main (p: f32[4,5], s: f32[2,2], v: f32[2], k: pred[], i: s32[]) -> (f32[4,5], f32[2], s32[], pred[3], (f32[], s32[2]), bf16[2], f16[3], f32[4], u32[2,3], f32[3]) {\n"
    "  %p = f32[4,5] parameter(0)\n"
    "  %s = f32[2,2] parameter(1)\n"
    "  %v = f32[2] parameter(2)\n"
    "  %k = pred[] parameter(3)\n"
    "  %i = s32[] parameter(4)\n"
    "  %zero = f32[] constant(0)\n"
    "  %elided = f32[3] constant({...})\n"
    "  %sas = f32[4,5] select-and-scatter(%p, %s, %zero), window={size=2x3 stride=2x3 pad=0_0x0_1}, select=%ge, scatter=%add\n"
    "  %cond = f32[2] conditional(%k, %v, %v), true_computation=%then, false_computation=%else\n"
    "  %sw = s32[] conditional(%i, %i, %i), branch_computations={%b0, %b0}\n"
    "  %preds = pred[3] constant({1, 0, 1})\n"
    "  %tup = (f32[], s32[2]) constant((1.5, {2, 3}))\n"
    "  %halves = bf16[2] constant({3.140625, -inf})\n"
    "  %f16s = f16[3] constant({nan, -65504, 0.000061035156})\n"
    "  %specials = f32[4] constant({inf, -inf, nan, -0})\n"
    "  %state = u64[2] constant({1, 2})\n"
    "  %rbg = (u64[2], u32[2,3]) rng-bit-generator(%state), algorithm=rng_three_fry\n"
    "  %bits = u32[2,3] get-tuple-element(%rbg), index=1\n"
    "  ROOT %r = (f32[4,5], f32[2], s32[], pred[3], (f32[], s32[2]), bf16[2], f16[3], f32[4], u32[2,3], f32[3]) tuple(%sas, %cond, %sw, %preds, %tup, %halves, %f16s, %specials, %bits, %elided)\n"
    "}\n";

static void extra_module_round_trips(void) {
  hlo_diag diag = {HLO_OK, ""};
  hlo_module *m = hlo_parse_module(extra_module, strlen(extra_module), "extra", &diag);
  CHECK_MSG(m != NULL, "%s", diag.message);
  if (!m) return;
  round_trip("extra", m);
  char *text = hlo_module_to_text(m);
  CHECK(strstr(text, "true_computation=%then, false_computation=%else") != NULL);
  CHECK(strstr(text, "branch_computations={%b0, %b0}") != NULL);
  CHECK(strstr(text, "constant((1.5, {2, 3}))") != NULL);
  CHECK(strstr(text, "pred[3] constant({1, 0, 1})") != NULL);
  CHECK(strstr(text, "f32[4] constant({inf, -inf, nan, -0})") != NULL);
  CHECK(strstr(text, "f16[3] constant({nan, -65504, 6.1035156e-05})") != NULL);
  CHECK(strstr(text, "{...}") == NULL); /* elided values print as the values they were given */
  free(text);
  hlo_module_free(m);
}

static void corpus_round_trips(void) {
  const char *dir_path = getenv("LATCH_CORPUS");
  if (!dir_path) dir_path = "../shared/corpus/xla";
  DIR *dir = opendir(dir_path);
  CHECK_MSG(dir != NULL, "no corpus at %s (set LATCH_CORPUS)", dir_path);
  if (!dir) return;
  char *names[1024];
  int count = 0;
  for (struct dirent *e; (e = readdir(dir)) && count < 1024;) {
    size_t len = strlen(e->d_name);
    if (len > 4 && strcmp(e->d_name + len - 4, ".hlo") == 0) names[count++] = strdup(e->d_name);
  }
  closedir(dir);
  qsort(names, (size_t)count, sizeof names[0], compare_names);
  CHECK_MSG(count > 0, "no .hlo files in %s", dir_path);
  for (int i = 0; i < count; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir_path, names[i]);
    hlo_module **modules = NULL;
    hlo_diag diag = {HLO_OK, ""};
    int n = hlo_parse_file(path, &modules, &diag);
    CHECK_MSG(n >= 1, "%s: %s", path, diag.message);
    for (int k = 0; k < n; k++) {
      round_trip(path, modules[k]);
      hlo_module_free(modules[k]);
    }
    free(modules);
    free(names[i]);
  }
}

int main(void) {
  RUN(extra_module_round_trips);
  RUN(corpus_round_trips);
  return TEST_REPORT();
}
