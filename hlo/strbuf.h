/* A growable string, for printers and messages. */
#ifndef HLO_STRBUF_H
#define HLO_STRBUF_H
#include <stddef.h>

typedef struct hlo_strbuf {
  char *data; /* always NUL-terminated once anything was appended */
  size_t len;
  size_t cap;
} hlo_strbuf;

void hlo_sb_init(hlo_strbuf *sb);
void hlo_sb_free(hlo_strbuf *sb);
void hlo_sb_append(hlo_strbuf *sb, const char *text, size_t len);
void hlo_sb_puts(hlo_strbuf *sb, const char *text);
void hlo_sb_printf(hlo_strbuf *sb, const char *format, ...) __attribute__((format(printf, 2, 3)));
/* Returns the string (owned by the caller) and resets sb. */
char *hlo_sb_take(hlo_strbuf *sb);

#endif
