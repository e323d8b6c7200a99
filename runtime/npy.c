/* .npy reading and writing. The format: 6 magic bytes, a version, a header length, then a
 * header that is a Python dict literal ({'descr': '<f4', 'fortran_order': False, 'shape':
 * (2, 3), }) padded with spaces and a newline, then the raw elements. The header is parsed
 * here with a small cursor rather than anything general: NumPy writes one fixed form, but
 * other writers vary spacing, quotes and key order, so those are tolerated. */
#include "runtime.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char npy_magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

/* NumPy aligns the data to 64 bytes so it can be memory-mapped. */
enum { NPY_ALIGN = 64 };

typedef struct npy_header {
  hlo_dtype dtype;
  bool swap; /* the file's byte order differs from this machine's */
  bool fortran_order;
  int rank;
  int64_t dims[HLO_MAX_RANK];
} npy_header;

static bool host_is_little_endian(void) {
  uint16_t probe = 1;
  uint8_t first;
  memcpy(&first, &probe, 1);
  return first == 1;
}

/* Type codes without the byte-order character. */
static const struct {
  const char *code;
  hlo_dtype dtype;
} npy_types[] = {
    {"b1", HLO_PRED}, {"i1", HLO_S8},  {"i2", HLO_S16}, {"i4", HLO_S32}, {"i8", HLO_S64},
    {"u1", HLO_U8},   {"u2", HLO_U16}, {"u4", HLO_U32}, {"u8", HLO_U64}, {"f2", HLO_F16},
    {"f4", HLO_F32},  {"f8", HLO_F64},
};

const char *rt_npy_descr(hlo_dtype dtype) {
  switch (dtype) {
    case HLO_PRED: return "|b1";
    case HLO_S8: return "|i1";
    case HLO_U8: return "|u1";
    case HLO_S16: return "<i2";
    case HLO_S32: return "<i4";
    case HLO_S64: return "<i8";
    case HLO_U16: return "<u2";
    case HLO_U32: return "<u4";
    case HLO_U64: return "<u8";
    case HLO_F16: return "<f2";
    case HLO_BF16: /* written as f4: see npy.h */
    case HLO_F32: return "<f4";
    case HLO_F64: return "<f8";
    default: return NULL;
  }
}

/* ---- header parsing ---- */

typedef struct cursor {
  const char *p, *end;
  const char *name; /* the file, for messages */
  hlo_diag *diag;
} cursor;

static hlo_status header_error(cursor *c, const char *what) {
  return hlo_diag_set(c->diag, HLO_ERR_INPUT, "%s: malformed .npy header: %s", c->name, what);
}

static void skip_space(cursor *c) {
  while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
    c->p++;
}

static bool accept(cursor *c, char ch) {
  skip_space(c);
  if (c->p < c->end && *c->p == ch) {
    c->p++;
    return true;
  }
  return false;
}

/* A quoted string without escapes (none of the keys or descrs need them). */
static bool parse_string(cursor *c, char *out, size_t out_size) {
  skip_space(c);
  if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return false;
  char quote = *c->p++;
  size_t len = 0;
  while (c->p < c->end && *c->p != quote) {
    if (len + 1 >= out_size) return false;
    out[len++] = *c->p++;
  }
  if (c->p >= c->end) return false;
  c->p++;
  out[len] = 0;
  return true;
}

static bool parse_word(cursor *c, const char *word) {
  skip_space(c);
  size_t len = strlen(word);
  if ((size_t)(c->end - c->p) < len || memcmp(c->p, word, len) != 0) return false;
  c->p += len;
  return true;
}

/* (), (3,), (2, 3) and also (2, 3,): a tuple of non-negative integers. */
static hlo_status parse_shape(cursor *c, npy_header *h) {
  if (!accept(c, '(')) return header_error(c, "'shape' is not a tuple");
  h->rank = 0;
  while (!accept(c, ')')) {
    skip_space(c);
    if (c->p >= c->end || *c->p < '0' || *c->p > '9')
      return header_error(c, "'shape' holds something other than non-negative integers");
    int64_t dim = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
      if (dim > (INT64_MAX - 9) / 10) return header_error(c, "a dimension in 'shape' is too large");
      dim = dim * 10 + (*c->p++ - '0');
    }
    if (c->p < c->end && *c->p == 'L') c->p++; /* Python 2 longs */
    if (h->rank == HLO_MAX_RANK)
      return hlo_diag_set(c->diag, HLO_ERR_UNSUPPORTED, "%s: rank above %d is not supported",
                          c->name, HLO_MAX_RANK);
    h->dims[h->rank++] = dim;
    if (!accept(c, ',')) {
      if (!accept(c, ')')) return header_error(c, "'shape' tuple is not closed");
      break;
    }
  }
  return HLO_OK;
}

static hlo_status parse_descr(cursor *c, npy_header *h) {
  char descr[64];
  skip_space(c);
  if (c->p < c->end && *c->p == '[')
    return hlo_diag_set(c->diag, HLO_ERR_UNSUPPORTED,
                        "%s: structured arrays (a list 'descr') are not supported", c->name);
  if (!parse_string(c, descr, sizeof descr)) return header_error(c, "'descr' is not a short string");
  if (strcmp(descr, "bfloat16") == 0) { /* latch's own spelling; NumPy cannot name it */
    h->dtype = HLO_BF16;
    h->swap = !host_is_little_endian();
    return HLO_OK;
  }
  char order = descr[0];
  const char *code = descr + 1;
  if (order != '<' && order != '>' && order != '|' && order != '=') {
    order = '=';
    code = descr;
  }
  for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++) {
    if (strcmp(code, npy_types[i].code) != 0) continue;
    h->dtype = npy_types[i].dtype;
    bool file_little = order == '<' || (order != '>' && host_is_little_endian());
    h->swap = hlo_dtype_size(h->dtype) > 1 && file_little != host_is_little_endian();
    return HLO_OK;
  }
  if (code[0] == 'V')
    return hlo_diag_set(c->diag, HLO_ERR_UNSUPPORTED,
                        "%s: descr '%s' is untyped raw bytes (how NumPy saves ml_dtypes.bfloat16); "
                        "save bfloat16 arrays as float32 (x.astype(numpy.float32)): latch rounds "
                        "them to bf16 parameters",
                        c->name, descr);
  return hlo_diag_set(c->diag, HLO_ERR_UNSUPPORTED,
                      "%s: descr '%s' is not supported (use b1, i1..i8, u1..u8, f2, f4 or f8)",
                      c->name, descr);
}

static hlo_status parse_header(cursor *c, npy_header *h) {
  bool have_descr = false, have_order = false, have_shape = false;
  if (!accept(c, '{')) return header_error(c, "it is not a dict");
  while (!accept(c, '}')) {
    char key[32];
    if (!parse_string(c, key, sizeof key)) return header_error(c, "expected a quoted key");
    if (!accept(c, ':')) return header_error(c, "expected ':' after a key");
    hlo_status status = HLO_OK;
    if (strcmp(key, "descr") == 0) {
      status = parse_descr(c, h);
      have_descr = true;
    } else if (strcmp(key, "fortran_order") == 0) {
      if (parse_word(c, "True")) h->fortran_order = true;
      else if (parse_word(c, "False")) h->fortran_order = false;
      else status = header_error(c, "'fortran_order' is not True or False");
      have_order = true;
    } else if (strcmp(key, "shape") == 0) {
      status = parse_shape(c, h);
      have_shape = true;
    } else {
      status = hlo_diag_set(c->diag, HLO_ERR_INPUT, "%s: unexpected key '%s' in the .npy header",
                            c->name, key);
    }
    if (status != HLO_OK) return status;
    if (!accept(c, ',')) {
      if (!accept(c, '}')) return header_error(c, "expected ',' or '}' after a value");
      break;
    }
  }
  if (!have_descr || !have_order || !have_shape)
    return header_error(c, "it needs the keys 'descr', 'fortran_order' and 'shape'");
  return HLO_OK;
}

/* ---- decoding ---- */

static uint32_t read_le(const unsigned char *p, int bytes) {
  uint32_t value = 0;
  for (int i = bytes - 1; i >= 0; i--) value = value << 8 | p[i];
  return value;
}

static void swap_bytes(unsigned char *element, size_t size) {
  for (size_t i = 0; i < size / 2; i++) {
    unsigned char t = element[i];
    element[i] = element[size - 1 - i];
    element[size - 1 - i] = t;
  }
}

/* Copies the file's elements into value's row-major storage: Fortran-order data is read
 * by its column-major offsets, foreign byte order is swapped, booleans become 0 or 1. */
static void copy_elements(rt_value *value, const unsigned char *data, const npy_header *h) {
  size_t size = hlo_dtype_size(h->dtype);
  unsigned char *out = value->data;
  if (h->fortran_order && h->rank > 1 && value->count > 0) {
    int64_t coords[HLO_MAX_RANK] = {0};
    int64_t column_strides[HLO_MAX_RANK];
    int64_t stride = 1;
    for (int i = 0; i < h->rank; i++) {
      column_strides[i] = stride;
      stride *= h->dims[i];
    }
    int64_t index = 0;
    do {
      int64_t offset = 0;
      for (int i = 0; i < h->rank; i++) offset += coords[i] * column_strides[i];
      memcpy(out + (size_t)index * size, data + (size_t)offset * size, size);
      index++;
    } while (rt_next_coords(&value->shape, coords));
  } else {
    memcpy(out, data, (size_t)value->count * size);
  }
  for (int64_t i = 0; h->swap && i < value->count; i++) swap_bytes(out + (size_t)i * size, size);
  if (h->dtype == HLO_PRED)
    for (int64_t i = 0; i < value->count; i++) out[i] = out[i] != 0;
}

rt_value *rt_npy_decode(const void *bytes, size_t size, const char *name, hlo_diag *diag) {
  const unsigned char *file = bytes;
  if (size < 10 || memcmp(file, npy_magic, sizeof npy_magic) != 0) {
    hlo_diag_set(diag, HLO_ERR_INPUT, "%s: not a .npy file (it does not start with \\x93NUMPY)", name);
    return NULL;
  }
  int major = file[6], minor = file[7];
  size_t prefix;
  if (major == 1) prefix = 10;
  else if (major == 2 || major == 3) prefix = 12;
  else {
    hlo_diag_set(diag, HLO_ERR_UNSUPPORTED, "%s: .npy format version %d.%d is not supported (1.0, 2.0, 3.0 are)",
                 name, major, minor);
    return NULL;
  }
  if (size < prefix) {
    hlo_diag_set(diag, HLO_ERR_INPUT, "%s: truncated .npy header", name);
    return NULL;
  }
  size_t header_len = read_le(file + 8, major == 1 ? 2 : 4);
  if (header_len > size - prefix) {
    hlo_diag_set(diag, HLO_ERR_INPUT, "%s: truncated .npy header (%zu bytes announced, %zu present)",
                 name, header_len, size - prefix);
    return NULL;
  }
  npy_header h;
  memset(&h, 0, sizeof h);
  cursor c = {(const char *)file + prefix, (const char *)file + prefix + header_len, name, diag};
  if (parse_header(&c, &h) != HLO_OK) return NULL;

  size_t element_size = hlo_dtype_size(h.dtype);
  int64_t count = 1;
  for (int i = 0; i < h.rank; i++) {
    if (h.dims[i] != 0 && count > INT64_MAX / (int64_t)element_size / h.dims[i]) {
      hlo_diag_set(diag, HLO_ERR_INPUT, "%s: the shape in the header is impossibly large", name);
      return NULL;
    }
    count *= h.dims[i];
  }
  size_t data_size = size - prefix - header_len;
  uint64_t want = (uint64_t)count * element_size;
  if (data_size != want) {
    hlo_diag_set(diag, HLO_ERR_INPUT, "%s: %s data: the header's shape needs %llu bytes, the file has %zu",
                 name, data_size < want ? "truncated" : "too much", (unsigned long long)want, data_size);
    return NULL;
  }
  rt_value *value = rt_value_new_array(h.dtype, h.rank, h.dims);
  if (!value) {
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "%s: out of memory for %llu bytes", name, (unsigned long long)want);
    return NULL;
  }
  copy_elements(value, file + prefix + header_len, &h);
  return value;
}

/* Reads all of a file; works for pipes too, which have no size to ask for. */
static unsigned char *read_file(const char *path, size_t *size, hlo_diag *diag) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    hlo_diag_set(diag, HLO_ERR_INPUT, "%s: cannot open: %s", path, strerror(errno));
    return NULL;
  }
  size_t cap = 1 << 16, len = 0;
  unsigned char *buffer = hlo_malloc(cap);
  while (buffer) {
    len += fread(buffer + len, 1, cap - len, f);
    if (len < cap) break;
    unsigned char *grown = cap <= SIZE_MAX / 2 ? hlo_realloc(buffer, cap * 2) : NULL;
    if (!grown) {
      free(buffer);
      buffer = NULL;
      break;
    }
    buffer = grown;
    cap *= 2;
  }
  bool failed = buffer && ferror(f);
  fclose(f);
  if (!buffer) {
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "%s: out of memory reading the file", path);
    return NULL;
  }
  if (failed) {
    free(buffer);
    hlo_diag_set(diag, HLO_ERR_INPUT, "%s: read error", path);
    return NULL;
  }
  *size = len;
  return buffer;
}

rt_value *rt_npy_read(const char *path, hlo_diag *diag) {
  size_t size = 0;
  unsigned char *bytes = read_file(path, &size, diag);
  if (!bytes) return NULL;
  rt_value *value = rt_npy_decode(bytes, size, path, diag);
  free(bytes);
  return value;
}

/* ---- writing ---- */

/* The header dict, padded with spaces and ended by a newline so that the data starts
 * aligned. Version 1.0 has a 2-byte length, always enough at rank <= 12; 2.0 is the
 * fallback all the same. Returns the header (caller frees) and sets *prefix. */
static char *format_header(const char *descr, const hlo_shape *shape, size_t *prefix, size_t *header_len) {
  hlo_strbuf sb;
  hlo_sb_init(&sb);
  hlo_sb_printf(&sb, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
  for (int i = 0; i < shape->rank; i++) hlo_sb_printf(&sb, i ? ", %lld" : "%lld", (long long)shape->dims[i]);
  hlo_sb_puts(&sb, shape->rank == 1 ? ",), }" : "), }");
  /* NumPy (1.24 on) leaves room to rewrite the first dim in place, 21 digits' worth; doing
   * the same makes our files byte for byte what np.save writes. */
  if (shape->rank > 0) {
    char first[32];
    int digits = snprintf(first, sizeof first, "%lld", (long long)shape->dims[0]);
    for (int i = digits; i < 21; i++) hlo_sb_puts(&sb, " ");
  }
  *prefix = 10;
  size_t total = (*prefix + sb.len + 1 + NPY_ALIGN - 1) / NPY_ALIGN * NPY_ALIGN;
  if (total - *prefix > 65535) {
    *prefix = 12;
    total = (*prefix + sb.len + 1 + NPY_ALIGN - 1) / NPY_ALIGN * NPY_ALIGN;
  }
  while (*prefix + sb.len + 1 < total) hlo_sb_puts(&sb, " ");
  hlo_sb_puts(&sb, "\n");
  *header_len = sb.len;
  return hlo_sb_take(&sb);
}

/* The bytes to write: the value's own storage, or a converted copy (bf16 to f4, foreign
 * byte order); *owned says whether the caller frees it. */
static const unsigned char *file_bytes(const rt_value *value, bool *owned) {
  hlo_dtype dtype = value->shape.dtype;
  size_t size = hlo_dtype_size(dtype);
  *owned = false;
  if (dtype == HLO_BF16) {
    float *wide = hlo_malloc((size_t)(value->count ? value->count : 1) * sizeof(float));
    if (!wide) return NULL;
    for (int64_t i = 0; i < value->count; i++) wide[i] = (float)rt_get_f64(value, i);
    *owned = true;
    size = sizeof(float);
    if (host_is_little_endian()) return (const unsigned char *)wide;
    for (int64_t i = 0; i < value->count; i++) swap_bytes((unsigned char *)&wide[i], size);
    return (const unsigned char *)wide;
  }
  if (host_is_little_endian() || size == 1) return value->data;
  unsigned char *copy = hlo_malloc((size_t)(value->count ? value->count : 1) * size);
  if (!copy) return NULL;
  memcpy(copy, value->data, (size_t)value->count * size);
  for (int64_t i = 0; i < value->count; i++) swap_bytes(copy + (size_t)i * size, size);
  *owned = true;
  return copy;
}

hlo_status rt_npy_write(const char *path, const rt_value *value, hlo_diag *diag) {
  const char *descr = rt_npy_descr(value->shape.dtype);
  if (!descr)
    return hlo_diag_set(diag, HLO_ERR_UNSUPPORTED, "%s: cannot write a %s value as .npy", path,
                        hlo_dtype_name(value->shape.dtype));
  size_t prefix, header_len;
  char *header = format_header(descr, &value->shape, &prefix, &header_len);
  unsigned char start[12];
  memcpy(start, npy_magic, sizeof npy_magic);
  start[6] = prefix == 10 ? 1 : 2;
  start[7] = 0;
  for (size_t i = 0; i < prefix - 8; i++) start[8 + i] = (unsigned char)(header_len >> (8 * i));

  bool owned;
  const unsigned char *data = file_bytes(value, &owned);
  size_t data_size = (size_t)value->count * (value->shape.dtype == HLO_BF16 ? 4 : hlo_dtype_size(value->shape.dtype));
  if (!data) {
    free(header);
    return hlo_diag_set(diag, HLO_ERR_INTERNAL, "%s: out of memory", path);
  }
  FILE *f = fopen(path, "wb");
  if (!f) {
    free(header);
    if (owned) free((void *)data);
    return hlo_diag_set(diag, HLO_ERR_INPUT, "%s: cannot create: %s", path, strerror(errno));
  }
  bool ok = fwrite(start, 1, prefix, f) == prefix && fwrite(header, 1, header_len, f) == header_len &&
            fwrite(data, 1, data_size, f) == data_size;
  ok = (fclose(f) == 0) && ok;
  free(header);
  if (owned) free((void *)data);
  if (!ok) return hlo_diag_set(diag, HLO_ERR_INTERNAL, "%s: write failed: %s", path, strerror(errno));
  return HLO_OK;
}
