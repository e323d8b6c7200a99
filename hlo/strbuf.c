/* A growable NUL-terminated string for printers and messages. Growth doubles; a growth that
 * fails sets the sticky failed flag, after which appends do nothing and hlo_sb_take returns
 * NULL, so a printer runs to its end unchecked and its caller checks once. */
#include "hlo.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void hlo_sb_init(hlo_strbuf *sb) {
  sb->data = NULL;
  sb->len = 0;
  sb->cap = 0;
  sb->failed = false;
}

void hlo_sb_free(hlo_strbuf *sb) {
  free(sb->data);
  hlo_sb_init(sb);
}

/* Room for extra more bytes and the NUL; false (failed set) when memory runs out. */
static bool reserve(hlo_strbuf *sb, size_t extra) {
  if (sb->failed) return false;
  if (sb->len + extra + 1 <= sb->cap) return true;
  size_t cap = sb->cap ? sb->cap : 256;
  while (cap < sb->len + extra + 1 && cap <= SIZE_MAX / 2) cap *= 2;
  char *grown = cap >= sb->len + extra + 1 ? hlo_realloc(sb->data, cap) : NULL;
  if (!grown) {
    sb->failed = true;
    return false;
  }
  sb->data = grown;
  sb->cap = cap;
  return true;
}

void hlo_sb_append(hlo_strbuf *sb, const char *text, size_t len) {
  if (!reserve(sb, len)) return;
  memcpy(sb->data + sb->len, text, len);
  sb->len += len;
  sb->data[sb->len] = 0;
}

void hlo_sb_puts(hlo_strbuf *sb, const char *text) { hlo_sb_append(sb, text, strlen(text)); }

/* Formats straight into the spare capacity, and only when that is too short grows the
 * buffer and formats again: printing a module (which every compile does, to clone it) made
 * half its formatting calls only to measure. */
void hlo_sb_printf(hlo_strbuf *sb, const char *format, ...) {
  if (!reserve(sb, 64)) return;
  va_list args;
  va_start(args, format);
  va_list again;
  va_copy(again, args);
  size_t room = sb->cap - sb->len;
  int needed = vsnprintf(sb->data + sb->len, room, format, args);
  va_end(args);
  if (needed > 0 && (size_t)needed >= room) {
    if (reserve(sb, (size_t)needed))
      vsnprintf(sb->data + sb->len, (size_t)needed + 1, format, again);
    else
      needed = 0;
  }
  if (needed > 0) sb->len += (size_t)needed;
  sb->data[sb->len] = 0;
  va_end(again);
}

char *hlo_sb_take(hlo_strbuf *sb) {
  if (!sb->data) hlo_sb_append(sb, "", 0);
  if (sb->failed) {
    hlo_sb_free(sb);
    return NULL;
  }
  char *result = sb->data;
  hlo_sb_init(sb);
  return result;
}
