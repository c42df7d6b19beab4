/* Benchmark helpers: timing, medians, and the results file.
 * Every figure goes to stdout as a table row and to $TERRA_BENCH_OUT (default
 * build/bench/results.jsonl) as one JSON object per line:
 *   {"name": "select.ns_per_visited.ground_origin", "value": 21.4, "unit": "ns", "runs": 9, "stat": "median"} */
#ifndef TERRA_BENCH_H
#define TERRA_BENCH_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of n values (sorts them in place). */
static inline double bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* A frame's CPU from its parts: select, stream, wait, submit (terra_gl_frame_stats.cpu_ms). */
static inline double bench_parts_ms(const double *part) { return part[0] + part[1] + part[2] + part[3]; }

/* Prints the 3 slowest of n frames by their parts (part[i][4]: where, printed after `where`, e.g.
 * "frame" or "m up"), taking each out as it goes (its parts become -1). */
static inline void bench_print_slowest(double (*part)[5], int n, const char *where) {
    for (int k = 0; k < 3 && n > 0; k++) {
        int w = 0;
        for (int i = 1; i < n; i++) w = bench_parts_ms(part[i]) > bench_parts_ms(part[w]) ? i : w;
        printf("  slowest %d: %.3f ms, %s %.0f (select %.3f, stream %.3f, wait %.3f, submit %.3f)\n", k + 1,
               bench_parts_ms(part[w]), where, part[w][4], part[w][0], part[w][1], part[w][2], part[w][3]);
        part[w][0] = part[w][1] = part[w][2] = part[w][3] = -1;
    }
}

/* The p-th percentile (0..100, nearest rank) of n values (sorts them in place). */
static inline double bench_percentile(double *v, int n, double p) {
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    int k = (int)ceil(p / 100 * n) - 1;
    return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

/* Records one figure. stat is "median", "max", "value", ... */
static inline void bench_record(const char *name, double value, const char *unit, int runs, const char *stat) {
    printf("  %-48s %14.3f %-6s (%s of %d)\n", name, value, unit, stat, runs);
    fflush(stdout);
    const char *path = getenv("TERRA_BENCH_OUT");
    FILE *f = fopen(path ? path : "build/bench/results.jsonl", "a");
    if (!f) return;
    fprintf(f, "{\"name\": \"%s\", \"value\": %.6g, \"unit\": \"%s\", \"runs\": %d, \"stat\": \"%s\"}\n", name, value,
            unit, runs, stat);
    fclose(f);
}

/* The ideal spacing for an allowed error (metres): the coarsest spacing whose error, level L's
 * err[L] at spacing s0 x 2^L interpolated log-log between levels, is within it; never finer than
 * level 0's. */
static inline double bench_ideal_spacing(double allowed, const float *err, int levels, double s0) {
    double s = s0;
    for (int l = 0; l + 1 < levels; l++) {
        const double e0 = err[l] > 1e-6f ? err[l] : 1e-6, e1 = err[l + 1] > 1e-6f ? err[l + 1] : 1e-6;
        if (allowed <= e0) break;
        if (allowed >= e1) {
            s = s0 * ldexp(1.0, l + 1);
            continue;
        }
        return s0 * ldexp(1.0, l) * pow(2.0, log(allowed / e0) / log(e1 / e0));
    }
    return s;
}

/* The same for the error-bounded mesh of the source's own levels: the spacing of the coarsest level
 * whose error is within the allowed one (level 0's when none is), no interpolation between levels:
 * each point meshed at the coarsest level the screen cannot tell from the ground there. */
static inline double bench_level_spacing(double allowed, const float *err, int levels, double s0) {
    int l = 0;
    while (l + 1 < levels && err[l + 1] <= allowed) l++;
    return s0 * ldexp(1.0, l);
}

#endif
