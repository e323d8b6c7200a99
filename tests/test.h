/* A tiny test harness: each tests/test_*.c is one program; CHECK failures are counted and
 * printed with file and line; main() ends with TEST_REPORT(). */
#ifndef LATCH_TEST_H
#define LATCH_TEST_H
#include <math.h>
#include <stdio.h>
#include <string.h>

static int test_passed, test_failed;
static const char *test_current = "";

#define CHECK(cond)                                                                   \
  do {                                                                                \
    if (cond) test_passed++;                                                          \
    else {                                                                            \
      test_failed++;                                                                  \
      fprintf(stderr, "%s:%d: %s: check failed: %s\n", __FILE__, __LINE__, test_current, #cond); \
    }                                                                                 \
  } while (0)

#define CHECK_MSG(cond, ...)                                                          \
  do {                                                                                \
    if (cond) test_passed++;                                                          \
    else {                                                                            \
      test_failed++;                                                                  \
      fprintf(stderr, "%s:%d: %s: check failed: %s: ", __FILE__, __LINE__, test_current, #cond); \
      fprintf(stderr, __VA_ARGS__);                                                   \
      fprintf(stderr, "\n");                                                          \
    }                                                                                 \
  } while (0)

/* Equal within abs_tol + rel_tol*|want|; NaN equals NaN. */
#define CHECK_NEAR(got, want, tol)                                                    \
  do {                                                                                \
    double got_ = (double)(got), want_ = (double)(want);                              \
    int ok_ = (isnan(got_) && isnan(want_)) || got_ == want_ ||                       \
              fabs(got_ - want_) <= (tol) * (1.0 + fabs(want_));                      \
    CHECK_MSG(ok_, "got %.17g, want %.17g", got_, want_);                             \
  } while (0)

#define CHECK_EQ_INT(got, want)                                                       \
  do {                                                                                \
    long long got_ = (long long)(got), want_ = (long long)(want);                     \
    CHECK_MSG(got_ == want_, "got %lld, want %lld", got_, want_);                     \
  } while (0)

#define CHECK_STR(got, want)                                                          \
  do {                                                                                \
    const char *got_ = (got), *want_ = (want);                                        \
    CHECK_MSG(got_ && want_ && strcmp(got_, want_) == 0, "got \"%s\", want \"%s\"",   \
              got_ ? got_ : "(null)", want_ ? want_ : "(null)");                      \
  } while (0)

#define RUN(test_function)                                                            \
  do {                                                                                \
    test_current = #test_function;                                                    \
    test_function();                                                                  \
  } while (0)

/* The plain closing line CI reads. */
#define TEST_REPORT()                                                                 \
  (printf("%s: %d passed, %d failed\n", __FILE__, test_passed, test_failed), test_failed != 0)

#endif
