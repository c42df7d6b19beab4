/* A tiny test harness: CHECK(cond, fmt, ...) records a failure with its place and goes on;
 * RUN(fn) runs one test function; finish() prints "N passed, N failed" and returns the exit code:
 * 1 on a failure, 77 (ctest's SKIP_RETURN_CODE) when every test function skipped for want of
 * ../shared's data (have_shared), else 0. */
#ifndef TERRA_TEST_CHECK_H
#define TERRA_TEST_CHECK_H

#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* ThreadSanitizer delivers a signal only at its own interception points (a compiled loop never
 * reaches one): tests that need a signal to land leave that part out under it */
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif

static int check_failures_, check_skips_;
static int check_tests_passed_, check_tests_failed_, check_tests_skipped_;

/* Reports one failed check; the message is printf-style (unchecked, so CHECK(x) alone works). */
static inline void check_report_(const char *file, int line, const char *cond, const char *fmt, ...) {
    if (check_failures_ < 50) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "%s:%d: CHECK(%s) failed: ", file, line, cond);
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\n");
        va_end(ap);
    }
    check_failures_++;
}

#define CHECK(...) CHECK_(__VA_ARGS__, "")
#define CHECK_(cond, ...)                                                      \
    do {                                                                       \
        if (!(cond)) check_report_(__FILE__, __LINE__, #cond, __VA_ARGS__);    \
    } while (0)

#define RUN(fn)                                                                       \
    do {                                                                              \
        int before_ = check_failures_, skips_ = check_skips_;                         \
        fn();                                                                         \
        if (check_failures_ == before_ && check_skips_ != skips_) {                   \
            check_tests_skipped_++;                                                   \
            printf("skip %s\n", #fn);                                                 \
        } else if (check_failures_ == before_) {                                      \
            check_tests_passed_++;                                                    \
            printf("ok   %s\n", #fn);                                                 \
        } else {                                                                      \
            check_tests_failed_++;                                                    \
            printf("FAIL %s (%d checks)\n", #fn, check_failures_ - before_);          \
        }                                                                             \
        fflush(stdout);                                                               \
    } while (0)

static inline int finish(void) {
    printf("%d passed, %d failed", check_tests_passed_, check_tests_failed_);
    if (check_tests_skipped_) printf(", %d skipped", check_tests_skipped_);
    printf("\n");
    return check_tests_failed_ ? 1 : check_tests_passed_ == 0 && check_tests_skipped_ ? 77 : 0;
}

/* Path of a file in ../shared (CI sets TERRA_SHARED). */
static inline const char *shared_path(const char *rel, char *buf, size_t n) {
    const char *root = getenv("TERRA_SHARED");
    snprintf(buf, n, "%s/%s", root ? root : "../shared", rel);
    return buf;
}

/* Whether ../shared's data is here (a user's clone has none): if not, a SKIP line for `what` and
 * false, and the test of real files skips rather than fails. */
static inline bool have_shared(const char *what) {
    char p[1024];
    FILE *f = fopen(shared_path("data/README.md", p, sizeof p), "rb");
    if (f) {
        fclose(f);
        return true;
    }
    printf("SKIP %s: %s not found (the real data lives in ../shared; set TERRA_SHARED)\n", what, p);
    check_skips_++;
    return false;
}

/* Deterministic test RNG (splitmix64). */
static inline unsigned long long test_rand_u64(unsigned long long *s) {
    unsigned long long z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline double test_rand_unit(unsigned long long *s) {
    return (double)(test_rand_u64(s) >> 11) * (1.0 / 9007199254740992.0);
}
static inline double test_rand_range(unsigned long long *s, double lo, double hi) {
    return lo + (hi - lo) * test_rand_unit(s);
}

#endif
