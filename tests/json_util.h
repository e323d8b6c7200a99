/* A small JSON reader for tests: parses a whole document (strict enough to reject what
 * JSON rejects) into a flat list of leaves named by path ("models.0.modes.eager.median_ms")
 * so a test can ask whether a number sits at a path. */
#ifndef JSON_UTIL_H
#define JSON_UTIL_H
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct json_leaf {
  char path[256];
  char kind; /* 'n' number, 's' string, 'l' literal (true, false, null) */
  double number;
  char text[256];
} json_leaf;

typedef struct json_doc {
  json_leaf *leaves;
  int count, capacity;
  char error[128];
  const char *at;
} json_doc;

static bool json_value(json_doc *d, const char *path, int depth);

static void json_skip(json_doc *d) {
  while (isspace((unsigned char)*d->at)) d->at++;
}

static bool json_fail(json_doc *d, const char *why) {
  snprintf(d->error, sizeof d->error, "%s near '%.20s'", why, d->at);
  return false;
}

static json_leaf *json_add(json_doc *d, const char *path, char kind) {
  if (d->count == d->capacity) {
    d->capacity = d->capacity ? 2 * d->capacity : 64;
    d->leaves = realloc(d->leaves, sizeof(json_leaf) * (size_t)d->capacity);
  }
  json_leaf *leaf = &d->leaves[d->count++];
  memset(leaf, 0, sizeof *leaf);
  snprintf(leaf->path, sizeof leaf->path, "%s", path);
  leaf->kind = kind;
  return leaf;
}

static bool json_string(json_doc *d, char *out, size_t size) {
  if (*d->at != '"') return json_fail(d, "expected a string");
  d->at++;
  size_t n = 0;
  while (*d->at && *d->at != '"') {
    char c = *d->at++;
    if ((unsigned char)c < 0x20) return json_fail(d, "control character in a string");
    if (c == '\\') {
      c = *d->at++;
      if (!strchr("\"\\/bfnrtu", c) || !c) return json_fail(d, "bad escape");
      if (c == 'u') {
        for (int i = 0; i < 4; i++)
          if (!isxdigit((unsigned char)*d->at++)) return json_fail(d, "bad \\u escape");
        c = '?';
      }
    }
    if (n + 1 < size) out[n++] = c;
  }
  if (*d->at != '"') return json_fail(d, "unterminated string");
  d->at++;
  out[n] = 0;
  return true;
}

static bool json_value(json_doc *d, const char *path, int depth) {
  char child[256], key[128];
  json_skip(d);
  if (depth > 32) return json_fail(d, "too deep");
  if (*d->at == '{' || *d->at == '[') {
    bool object = *d->at == '{';
    d->at++;
    json_skip(d);
    if (*d->at == (object ? '}' : ']')) return d->at++, true;
    for (int index = 0;; index++) {
      json_skip(d);
      if (object) {
        if (!json_string(d, key, sizeof key)) return false;
        json_skip(d);
        if (*d->at++ != ':') return json_fail(d, "expected ':'");
      } else {
        snprintf(key, sizeof key, "%d", index);
      }
      snprintf(child, sizeof child, "%s%s%s", path, *path ? "." : "", key);
      if (!json_value(d, child, depth + 1)) return false;
      json_skip(d);
      if (*d->at == ',') {
        d->at++;
        continue;
      }
      if (*d->at == (object ? '}' : ']')) return d->at++, true;
      return json_fail(d, "expected ',' or a closing bracket");
    }
  }
  if (*d->at == '"') {
    json_leaf *leaf = json_add(d, path, 's');
    return json_string(d, leaf->text, sizeof leaf->text);
  }
  static const char *const literals[] = {"true", "false", "null"};
  for (int i = 0; i < 3; i++)
    if (!strncmp(d->at, literals[i], strlen(literals[i]))) {
      snprintf(json_add(d, path, 'l')->text, 8, "%s", literals[i]);
      d->at += strlen(literals[i]);
      return true;
    }
  /* JSON numbers: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
  const char *start = d->at;
  if (*d->at == '-') d->at++;
  if (!isdigit((unsigned char)*d->at)) return json_fail(d, "expected a value");
  if (*d->at == '0' && isdigit((unsigned char)d->at[1])) return json_fail(d, "leading zero");
  while (isdigit((unsigned char)*d->at)) d->at++;
  if (*d->at == '.') {
    d->at++;
    if (!isdigit((unsigned char)*d->at)) return json_fail(d, "bad fraction");
    while (isdigit((unsigned char)*d->at)) d->at++;
  }
  if (*d->at == 'e' || *d->at == 'E') {
    d->at++;
    if (*d->at == '+' || *d->at == '-') d->at++;
    if (!isdigit((unsigned char)*d->at)) return json_fail(d, "bad exponent");
    while (isdigit((unsigned char)*d->at)) d->at++;
  }
  json_add(d, path, 'n')->number = strtod(start, NULL);
  return true;
}

/* Reads and parses path; false (with doc->error) when unreadable or not one JSON value. */
static inline bool json_load(json_doc *d, const char *path) {
  memset(d, 0, sizeof *d);
  FILE *f = fopen(path, "rb");
  if (!f) return snprintf(d->error, sizeof d->error, "cannot open"), false;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = calloc((size_t)size + 1, 1);
  bool ok = text && fread(text, 1, (size_t)size, f) == (size_t)size;
  fclose(f);
  if (ok) {
    d->at = text;
    ok = json_value(d, "", 0);
    json_skip(d);
    if (ok && *d->at) ok = json_fail(d, "trailing text");
  }
  free(text);
  d->at = NULL;
  return ok;
}

static inline const json_leaf *json_find(const json_doc *d, const char *path, char kind) {
  for (int i = 0; i < d->count; i++)
    if (d->leaves[i].kind == kind && !strcmp(d->leaves[i].path, path)) return &d->leaves[i];
  return NULL;
}

static inline const double *json_number(const json_doc *d, const char *path) {
  const json_leaf *leaf = json_find(d, path, 'n');
  return leaf ? &leaf->number : NULL;
}

static inline bool json_string_is(const json_doc *d, const char *path, const char *want) {
  const json_leaf *leaf = json_find(d, path, 's');
  return leaf && !strcmp(leaf->text, want);
}

static inline bool json_literal_is(const json_doc *d, const char *path, const char *want) {
  const json_leaf *leaf = json_find(d, path, 'l');
  return leaf && !strcmp(leaf->text, want);
}

static inline void json_free(json_doc *d) { free(d->leaves); }

#endif
