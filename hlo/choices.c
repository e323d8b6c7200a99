/* Optimization choices, counted and switchable: every pass application and every kernel
 * choice a backend makes asks hlo_choice first, naming its kind and the instruction. A ledger
 * installed on the compiling thread (a compile runs on one) answers: it takes the first
 * `limit` choices and refuses the rest (the plain path: no rewrite, the unfused kernel, the
 * direct algorithm, the plain layout), refuses the kinds and instructions `avoid` names, and
 * tells its log each choice and the answer. That is what lets a bisection (latch bisect)
 * find the one choice that makes a module fail: a failure that needs the Nth choice comes
 * and goes with the limit N. With no ledger installed every choice is taken, as always. */
#include "hlo.h"

#include <string.h>

static _Thread_local hlo_choice_ledger *current;

hlo_choice_ledger *hlo_choices_install(hlo_choice_ledger *ledger) {
  hlo_choice_ledger *previous = current;
  current = ledger;
  return previous;
}

/* Whether avoid ("KIND@NAME,KIND@NAME", KIND alone for all of a kind) names this choice. */
static bool avoided(const char *avoid, const char *kind, const char *name) {
  size_t kind_len = strlen(kind), name_len = strlen(name);
  for (const char *p = avoid; p && *p;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    const char *at = memchr(p, '@', len);
    size_t head = at ? (size_t)(at - p) : len;
    if (head == kind_len && memcmp(p, kind, kind_len) == 0) {
      if (!at) return true;
      const char *who = at + 1;
      size_t who_len = len - head - 1;
      if (who_len > 0 && who[0] == '%') who++, who_len--;
      if (who_len == name_len && memcmp(who, name, name_len) == 0) return true;
    }
    p = end ? end + 1 : p + len;
  }
  return false;
}

bool hlo_choice(const char *kind, const char *name) {
  hlo_choice_ledger *ledger = current;
  if (!ledger) return true;
  if (!name) name = "";
  bool taken = !avoided(ledger->avoid, kind, name) && (ledger->limit < 0 || ledger->asked < ledger->limit);
  ledger->asked++;
  if (ledger->log) ledger->log(ledger->log_context, kind, name, taken);
  return taken;
}
