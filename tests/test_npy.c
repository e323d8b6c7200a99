/* .npy reading and writing: round trips of every element type, files laid out the way
 * NumPy lays them out (built here byte by byte), Fortran order, byte order, and broken
 * files, which must give messages naming the file, never a crash. */
#include <stdlib.h>
#include <unistd.h>

#include "runtime/runtime.h"
#include "test.h"

static char temp_dir[64];

static const char *temp_path(const char *name) {
  static char path[128];
  snprintf(path, sizeof path, "%s/%s", temp_dir, name);
  return path;
}

/* A .npy image as NumPy writes it: magic, version, length, the dict padded with spaces
 * and a newline to a multiple of 64, then the data. */
static size_t make_npy(unsigned char *out, int major, const char *dict, const void *data, size_t data_size) {
  size_t prefix = major == 1 ? 10 : 12;
  size_t dict_len = strlen(dict);
  size_t total = (prefix + dict_len + 1 + 63) / 64 * 64;
  size_t header_len = total - prefix;
  memcpy(out, "\x93NUMPY", 6);
  out[6] = (unsigned char)major;
  out[7] = 0;
  for (size_t i = 0; i < prefix - 8; i++) out[8 + i] = (unsigned char)(header_len >> (8 * i));
  memcpy(out + prefix, dict, dict_len);
  memset(out + prefix + dict_len, ' ', header_len - dict_len - 1);
  out[total - 1] = '\n';
  memcpy(out + total, data, data_size);
  return total + data_size;
}

static rt_value *decode(const unsigned char *bytes, size_t size, hlo_diag *diag) {
  hlo_diag_clear(diag);
  return rt_npy_decode(bytes, size, "x.npy", diag);
}

static void round_trip_every_dtype(void) {
  const hlo_dtype types[] = {HLO_PRED, HLO_S8, HLO_S16, HLO_S32, HLO_S64, HLO_U8, HLO_U16,
                             HLO_U32, HLO_U64, HLO_F16, HLO_F32, HLO_F64};
  const double elements[6] = {0, 1, 5, 7, 100, 3};
  int64_t dims[2] = {2, 3};
  for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
    rt_value *value = rt_value_new_array(types[t], 2, dims);
    for (int i = 0; i < 6; i++) rt_set_f64(value, i, elements[i]);
    if (hlo_dtype_is_signed(types[t]) || hlo_dtype_is_float(types[t])) rt_set_f64(value, 3, -7);
    hlo_diag diag;
    hlo_diag_clear(&diag);
    CHECK_EQ_INT(rt_npy_write(temp_path("t.npy"), value, &diag), HLO_OK);
    rt_value *back = rt_npy_read(temp_path("t.npy"), &diag);
    CHECK_MSG(back != NULL, "%s: %s", hlo_dtype_name(types[t]), diag.message);
    if (back) {
      CHECK_EQ_INT(back->shape.dtype, types[t]);
      CHECK_EQ_INT(back->shape.rank, 2);
      CHECK_EQ_INT(back->shape.dims[1], 3);
      CHECK(memcmp(back->data, value->data, (size_t)hlo_shape_bytes(&value->shape)) == 0);
      rt_value_release(back);
    }
    rt_value_release(value);
  }
}

static void bf16_is_written_as_f32(void) {
  int64_t dims[1] = {3};
  rt_value *value = rt_value_new_array(HLO_BF16, 1, dims);
  rt_set_f64(value, 0, 1.5);
  rt_set_f64(value, 1, -3.140625);
  rt_set_f64(value, 2, 1e30);
  hlo_diag diag;
  hlo_diag_clear(&diag);
  CHECK_EQ_INT(rt_npy_write(temp_path("bf.npy"), value, &diag), HLO_OK);
  rt_value *back = rt_npy_read(temp_path("bf.npy"), &diag);
  CHECK(back && back->shape.dtype == HLO_F32);
  for (int i = 0; back && i < 3; i++) CHECK_NEAR(rt_get_f64(back, i), rt_get_f64(value, i), 0);
  rt_value_release(back);
  rt_value_release(value);
}

static void scalars_and_empty_arrays(void) {
  hlo_diag diag;
  hlo_diag_clear(&diag);
  rt_value *scalar = rt_value_new_array(HLO_F64, 0, NULL);
  rt_set_f64(scalar, 0, 2.5);
  CHECK_EQ_INT(rt_npy_write(temp_path("s.npy"), scalar, &diag), HLO_OK);
  rt_value *back = rt_npy_read(temp_path("s.npy"), &diag);
  CHECK(back && back->shape.rank == 0 && back->count == 1 && rt_get_f64(back, 0) == 2.5);
  rt_value_release(back);
  rt_value_release(scalar);

  int64_t dims[3] = {2, 0, 4};
  rt_value *empty = rt_value_new_array(HLO_S32, 3, dims);
  CHECK_EQ_INT(rt_npy_write(temp_path("e.npy"), empty, &diag), HLO_OK);
  back = rt_npy_read(temp_path("e.npy"), &diag);
  CHECK(back && back->shape.rank == 3 && back->count == 0 && back->shape.dims[2] == 4);
  rt_value_release(back);
  rt_value_release(empty);
}

/* What rt_npy_write produces is byte for byte what NumPy (1.24 on) np.save writes: the dict
 * with keys sorted, then 21 minus the first dim's digits spaces of room, then padding. */
static void writes_numpy_layout(void) {
  int64_t dims[2] = {2, 3};
  rt_value *value = rt_value_new_array(HLO_S32, 2, dims);
  for (int i = 0; i < 6; i++) rt_set_i64(value, i, i);
  hlo_diag diag;
  hlo_diag_clear(&diag);
  CHECK_EQ_INT(rt_npy_write(temp_path("n.npy"), value, &diag), HLO_OK);
  unsigned char want[256], got[256];
  size_t want_size = make_npy(want, 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }"
                              "                    ", value->data, 24);
  FILE *f = fopen(temp_path("n.npy"), "rb");
  size_t got_size = f ? fread(got, 1, sizeof got, f) : 0;
  if (f) fclose(f);
  CHECK_EQ_INT(got_size, want_size);
  CHECK_EQ_INT(want_size % 64, 24 % 64);
  CHECK(got_size == want_size && memcmp(got, want, got_size) == 0);
  rt_value_release(value);

  int64_t one[1] = {5};
  value = rt_value_new_array(HLO_PRED, 1, one);
  CHECK_EQ_INT(rt_npy_write(temp_path("p.npy"), value, &diag), HLO_OK);
  f = fopen(temp_path("p.npy"), "rb");
  got_size = f ? fread(got, 1, sizeof got, f) : 0;
  if (f) fclose(f);
  want_size = make_npy(want, 1, "{'descr': '|b1', 'fortran_order': False, 'shape': (5,), }"
                                       "                    ", value->data, 5);
  CHECK(got_size == want_size && memcmp(got, want, got_size) == 0);
  rt_value_release(value);
}

static void reads_fortran_order(void) {
  /* The 2x3 matrix [[0,1,2],[3,4,5]] in column-major order. */
  const int32_t column_major[6] = {0, 3, 1, 4, 2, 5};
  unsigned char file[256];
  size_t size = make_npy(file, 1, "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }",
                         column_major, sizeof column_major);
  hlo_diag diag;
  rt_value *value = decode(file, size, &diag);
  CHECK_MSG(value != NULL, "%s", diag.message);
  for (int i = 0; value && i < 6; i++) CHECK_EQ_INT(rt_get_i64(value, i), i);
  rt_value_release(value);

  /* 2x3x2, element (i,j,k) = 100i + 10j + k, column-major: i fastest, then j, then k. */
  double column[12];
  int n = 0;
  for (int k = 0; k < 2; k++)
    for (int j = 0; j < 3; j++)
      for (int i = 0; i < 2; i++) column[n++] = 100 * i + 10 * j + k;
  size = make_npy(file, 1, "{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3, 2), }", column, sizeof column);
  value = decode(file, size, &diag);
  CHECK_MSG(value != NULL, "%s", diag.message);
  n = 0;
  for (int i = 0; value && i < 2; i++)
    for (int j = 0; j < 3; j++)
      for (int k = 0; k < 2; k++) CHECK_NEAR(rt_get_f64(value, n++), 100 * i + 10 * j + k, 0);
  rt_value_release(value);
}

static void reads_other_versions_and_spellings(void) {
  const uint16_t halves[2] = {0x3c00, 0xc000}; /* 1.0, -2.0 */
  unsigned char file[256];
  hlo_diag diag;
  /* version 2.0 and 3.0 have a 4-byte header length */
  for (int major = 2; major <= 3; major++) {
    size_t size = make_npy(file, major, "{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }", halves, 4);
    rt_value *value = decode(file, size, &diag);
    CHECK_MSG(value && value->shape.dtype == HLO_F16, "%s", diag.message);
    if (value) CHECK_NEAR(rt_get_f64(value, 1), -2.0, 0);
    rt_value_release(value);
  }
  /* other key order, double quotes, no trailing comma */
  size_t size = make_npy(file, 1, "{\"shape\": (2,), \"fortran_order\": False, \"descr\": \"<f2\"}", halves, 4);
  rt_value *value = decode(file, size, &diag);
  CHECK_MSG(value && rt_get_f64(value, 0) == 1.0, "%s", diag.message);
  rt_value_release(value);
  /* big-endian */
  const unsigned char big[8] = {0, 0, 1, 2, 0xff, 0xff, 0xff, 0xfe};
  size = make_npy(file, 1, "{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }", big, 8);
  value = decode(file, size, &diag);
  CHECK_MSG(value != NULL, "%s", diag.message);
  if (value) {
    CHECK_EQ_INT(rt_get_i64(value, 0), 258);
    CHECK_EQ_INT(rt_get_i64(value, 1), -2);
  }
  rt_value_release(value);
  /* bfloat16 under latch's own descr; booleans other than 0/1 read as true */
  const uint16_t bf[1] = {0x4049};
  size = make_npy(file, 1, "{'descr': 'bfloat16', 'fortran_order': False, 'shape': (), }", bf, 2);
  value = decode(file, size, &diag);
  CHECK_MSG(value && value->shape.dtype == HLO_BF16 && rt_get_f64(value, 0) == 3.140625, "%s", diag.message);
  rt_value_release(value);
  const unsigned char bools[3] = {0, 1, 7};
  size = make_npy(file, 1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", bools, 3);
  value = decode(file, size, &diag);
  CHECK(value && ((unsigned char *)value->data)[2] == 1);
  rt_value_release(value);
}

/* Decodes a broken file: it must fail with code and a message naming the file and
 * containing fragment. */
static void check_broken(const unsigned char *bytes, size_t size, hlo_status code, const char *fragment) {
  hlo_diag diag;
  rt_value *value = decode(bytes, size, &diag);
  CHECK_MSG(value == NULL, "decoded a broken file (expected: %s)", fragment);
  rt_value_release(value);
  CHECK_MSG(diag.status == code, "status %d, want %d: %s", diag.status, code, diag.message);
  CHECK_MSG(strstr(diag.message, "x.npy") != NULL, "message does not name the file: %s", diag.message);
  CHECK_MSG(strstr(diag.message, fragment) != NULL, "want \"%s\" in: %s", fragment, diag.message);
}

static void rejects_broken_files(void) {
  const float data[6] = {0};
  unsigned char file[512];
  const char *good = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  size_t size = make_npy(file, 1, good, data, sizeof data);

  check_broken(file, 5, HLO_ERR_INPUT, "not a .npy file");
  unsigned char bad[512];
  memcpy(bad, file, size);
  bad[1] = 'n';
  check_broken(bad, size, HLO_ERR_INPUT, "not a .npy file");
  memcpy(bad, file, size);
  bad[6] = 4;
  check_broken(bad, size, HLO_ERR_UNSUPPORTED, "version 4.0");
  check_broken(file, 40, HLO_ERR_INPUT, "truncated .npy header");
  check_broken(file, size - 1, HLO_ERR_INPUT, "truncated data");
  check_broken(file, size - sizeof data + 2, HLO_ERR_INPUT, "truncated data");
  memcpy(bad, file, size);
  bad[size] = 0;
  check_broken(bad, size + 1, HLO_ERR_INPUT, "too much data");

  struct {
    const char *dict;
    hlo_status code;
    const char *fragment;
  } cases[] = {
      {"{'descr': '<c8', 'fortran_order': False, 'shape': (2, 3), }", HLO_ERR_UNSUPPORTED, "'<c8' is not supported"},
      {"{'descr': '<V2', 'fortran_order': False, 'shape': (2, 3), }", HLO_ERR_UNSUPPORTED, "bfloat16"},
      {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2, 3), }", HLO_ERR_UNSUPPORTED, "structured"},
      {"{'descr': '<f4', 'shape': (2, 3), }", HLO_ERR_INPUT, "needs the keys"},
      {"{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2, 3), }", HLO_ERR_INPUT, "True or False"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", HLO_ERR_INPUT, "non-negative"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3 }", HLO_ERR_INPUT, "not closed"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3], }", HLO_ERR_INPUT, "not a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'extra': 1}", HLO_ERR_INPUT, "unexpected key"},
      {"['descr', '<f4']", HLO_ERR_INPUT, "not a dict"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3) 'x'}", HLO_ERR_INPUT, "expected ','"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999, 99999999999), }",
       HLO_ERR_INPUT, "impossibly large"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999, ), }", HLO_ERR_INPUT, "too large"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1,1,1,1,1), }", HLO_ERR_UNSUPPORTED, "rank"},
      {"{'descr': '<f4", HLO_ERR_INPUT, "malformed"},
      {"", HLO_ERR_INPUT, "not a dict"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    size = make_npy(file, 1, cases[i].dict, data, sizeof data);
    check_broken(file, size, cases[i].code, cases[i].fragment);
  }

  /* every prefix of a good file is rejected cleanly */
  size = make_npy(file, 1, good, data, sizeof data);
  for (size_t cut = 0; cut < size; cut++) {
    hlo_diag diag;
    rt_value *value = decode(file, cut, &diag);
    CHECK(value == NULL && diag.status != HLO_OK);
    rt_value_release(value);
  }

  hlo_diag diag;
  hlo_diag_clear(&diag);
  rt_value *value = rt_npy_read(temp_path("missing.npy"), &diag);
  CHECK(value == NULL && strstr(diag.message, "missing.npy") && strstr(diag.message, "cannot open"));
}

static void write_errors_are_values(void) {
  hlo_diag diag;
  hlo_diag_clear(&diag);
  int64_t dims[1] = {2};
  rt_value *value = rt_value_new_array(HLO_F32, 1, dims);
  CHECK_EQ_INT(rt_npy_write("/nonexistent-dir/x.npy", value, &diag), HLO_ERR_INPUT);
  CHECK(strstr(diag.message, "/nonexistent-dir/x.npy") != NULL);
  rt_value_release(value);
  CHECK(rt_npy_descr(HLO_C64) == NULL);
}

int main(void) {
  snprintf(temp_dir, sizeof temp_dir, "/tmp/latch-npy-XXXXXX");
  if (!mkdtemp(temp_dir)) {
    perror("mkdtemp");
    return 1;
  }
  RUN(round_trip_every_dtype);
  RUN(bf16_is_written_as_f32);
  RUN(scalars_and_empty_arrays);
  RUN(writes_numpy_layout);
  RUN(reads_fortran_order);
  RUN(reads_other_versions_and_spellings);
  RUN(rejects_broken_files);
  RUN(write_errors_are_values);
  const char *names[] = {"t.npy", "bf.npy", "s.npy", "e.npy", "n.npy", "p.npy"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) unlink(temp_path(names[i]));
  rmdir(temp_dir);
  return TEST_REPORT();
}
