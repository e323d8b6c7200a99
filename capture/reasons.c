/* Why a traced function keeps recompiling: a tally of the guard that failed at each
 * recompile, so the warning at the recompile limit names the guard that failed most often,
 * not whichever failed in the entry tried last. A guard on an input dim is known by that
 * dim (its message holds the values, which change from call to call); any other by its
 * message up to the values. Fixed size: past CAP_REASONS distinct guards, new ones are
 * not counted (the limit is 8 recompiles by default). */
#include <stdio.h>
#include <string.h>

#include "capture.h"

/* The message without its values: "guard 'x' failed: got 2" -> "guard 'x' failed". */
static size_t key_length(const char *message) {
  const char *got = strstr(message, ": got");
  const char *expected = strstr(message, ": expected");
  const char *cut = got && (!expected || got < expected) ? got : expected;
  return cut ? (size_t)(cut - message) : strlen(message);
}

static bool same_guard(const cap_reason *r, const guard_failure *why) {
  if (r->input >= 0 && r->dim >= 0) return r->input == why->input && r->dim == why->dim;
  if (why->input >= 0 && why->dim >= 0) return false;
  size_t n = key_length(why->message);
  return key_length(r->message) == n && strncmp(r->message, why->message, n) == 0;
}

void cap_reasons_note(cap_reasons *reasons, const guard_failure *why) {
  reasons->total++;
  for (int i = 0; i < reasons->count; i++)
    if (same_guard(&reasons->items[i], why)) {
      reasons->items[i].times++;
      snprintf(reasons->items[i].message, sizeof reasons->items[i].message, "%s", why->message); /* the latest */
      return;
    }
  if (reasons->count == CAP_REASONS) return;
  cap_reason *r = &reasons->items[reasons->count++];
  r->input = why->input;
  r->dim = why->dim;
  r->times = 1;
  snprintf(r->message, sizeof r->message, "%s", why->message);
}

const cap_reason *cap_reasons_top(const cap_reasons *reasons) {
  const cap_reason *top = NULL;
  for (int i = 0; i < reasons->count; i++) /* ties: the one seen first */
    if (!top || reasons->items[i].times > top->times) top = &reasons->items[i];
  return top;
}
