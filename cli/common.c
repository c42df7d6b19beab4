/* Helpers shared by every subcommand of the terra programs: messages, option parsing, sources. */
#include "cli.h"
#include "terra/archive_io.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "terra %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return EXIT_FAIL;
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "terra %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nTry 'terra %s --help'.\n", cmd);
    va_end(ap);
    return EXIT_USAGE;
}

bool cli_parse_double(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno) return false;
    *out = v;
    return true;
}

bool cli_parse_int(const char *s, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno) return false;
    *out = v;
    return true;
}

bool cli_parse_doubles(const char *s, double *out, int n) {
    const char *p = s;
    for (int i = 0; i < n; i++) {
        char *end;
        errno = 0;
        out[i] = strtod(p, &end);
        if (end == p || errno) return false;
        if (i < n - 1) {
            if (*end != ',') return false;
            p = end + 1;
        } else if (*end) {
            return false;
        }
    }
    return true;
}

bool cli_parse_size(const char *s, int *w, int *h) {
    char *end;
    long a = strtol(s, &end, 10);
    if (end == s || (*end != 'x' && *end != 'X')) return false;
    const char *q = end + 1;
    long b = strtol(q, &end, 10);
    if (end == q || *end || a <= 0 || b <= 0 || a > 16384 || b > 16384) return false;
    *w = (int)a;
    *h = (int)b;
    return true;
}

/* Prints a number of a range plainly: 1000000, not 1e+06 (the ranges are round numbers). */
static const char *num(char *buf, size_t n, double v) {
    if (fabs(v) < 1e15 && v == floor(v)) snprintf(buf, n, "%.0f", v);
    else snprintf(buf, n, "%g", v);
    return buf;
}

bool cli_opt_double(const char *cmd, const char *opt, const char *arg, const char *what, double lo, double hi,
                    double *out) {
    double v;
    if (cli_parse_double(arg, &v) && v >= lo && v <= hi) { /* NaN fails both comparisons */
        *out = v;
        return true;
    }
    char a[32], b[32];
    cli_usage_error(cmd, "%s wants %s from %s to %s, not '%s'", opt, what, num(a, sizeof a, lo), num(b, sizeof b, hi),
                    arg);
    return false;
}

bool cli_opt_long(const char *cmd, const char *opt, const char *arg, long lo, long hi, long *out) {
    long v;
    if (cli_parse_int(arg, &v) && v >= lo && v <= hi) {
        *out = v;
        return true;
    }
    cli_usage_error(cmd, "%s wants a whole number from %ld to %ld, not '%s'", opt, lo, hi, arg);
    return false;
}

bool cli_opt_int(const char *cmd, const char *opt, const char *arg, int lo, int hi, int *out) {
    long v;
    if (!cli_opt_long(cmd, opt, arg, lo, hi, &v)) return false;
    *out = (int)v;
    return true;
}

bool cli_opt_doubles(const char *cmd, const char *opt, const char *arg, const char *what, int n, double lo, double hi,
                     double *out) {
    double v[8];
    bool ok = n <= 8 && cli_parse_doubles(arg, v, n);
    for (int i = 0; ok && i < n; i++) ok = v[i] >= lo && v[i] <= hi;
    if (ok) {
        memcpy(out, v, sizeof *v * (size_t)n);
        return true;
    }
    char a[32], b[32];
    cli_usage_error(cmd, "%s wants %s, each from %s to %s, not '%s'", opt, what, num(a, sizeof a, lo),
                    num(b, sizeof b, hi), arg);
    return false;
}

bool cli_opt_seed(const char *cmd, const char *opt, const char *arg, uint64_t *out) {
    char *end;
    errno = 0;
    const unsigned long long v = strtoull(arg, &end, 10);
    /* strtoull takes "-1" as 2^64 - 1: a seed is written without a sign */
    if (arg[0] >= '0' && arg[0] <= '9' && end != arg && !*end && !errno) {
        *out = (uint64_t)v;
        return true;
    }
    cli_usage_error(cmd, "%s wants a whole number from 0 to 18446744073709551615, not '%s'", opt, arg);
    return false;
}

bool cli_opt_cells(const char *cmd, const char *opt, const char *arg, int lo, int hi, int *out) {
    long v;
    if (cli_parse_int(arg, &v) && v >= lo && v <= hi && (v & (v - 1)) == 0) {
        *out = (int)v;
        return true;
    }
    cli_usage_error(cmd, "%s wants a power of two from %d to %d, not '%s'", opt, lo, hi, arg);
    return false;
}

bool cli_opt_size(const char *cmd, const char *opt, const char *arg, int lo, int hi, int *w, int *h) {
    int a, b;
    if (cli_parse_size(arg, &a, &b) && a >= lo && b >= lo && a <= hi && b <= hi) {
        *w = a, *h = b;
        return true;
    }
    cli_usage_error(cmd, "%s wants WxH from %dx%d to %dx%d, not '%s'", opt, lo, lo, hi, hi, arg);
    return false;
}

bool cli_check_select(const char *cmd, const terra_select_desc *sel) {
    terra_select_desc r;
    if (terra_select_desc_resolve(sel, &r) == TERRA_OK) return true;
    cli_usage_error(cmd, "%s", terra_last_error());
    return false;
}

terra_status cli_open_source(const char *archive, uint64_t seed, terra_source **src, terra_select_desc *sel,
                             double *centre_eye) {
    if (!archive) return terra_world_create(&(terra_world_desc){.seed = seed}, src);
    terra_archive_source_info ai;
    terra_status st = terra_archive_source_create(archive, src, &ai);
    if (st == TERRA_OK) {
        sel->grid = ai.grid;
        sel->levels = ai.levels;
        memcpy(sel->bounds, ai.bounds, sizeof sel->bounds);
        if (centre_eye) {
            centre_eye[0] = 0.5 * (ai.bounds[0] + ai.bounds[2]);
            centre_eye[2] = 0.5 * (ai.bounds[1] + ai.bounds[3]);
        }
    }
    return st;
}

int cli_failed_tiles(const char *cmd, const terra_stream *stream) {
    enum { SHOWN = 5 };
    terra_tile_key keys[SHOWN];
    const int n = terra_stream_failed(stream, keys, SHOWN);
    const uint64_t total = terra_stream_get_stats(stream)->total_failed;
    if (n == 0 && total == 0) return EXIT_OK;
    if (n == 0) return cli_error(cmd, "%llu tile loads failed; the reasons are above", (unsigned long long)total);
    char list[SHOWN * 40] = "";
    size_t len = 0;
    for (int i = 0; i < n && i < SHOWN; i++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%d/%d/%d", i ? ", " : "", terra_tile_key_level(keys[i]),
                                terra_tile_key_x(keys[i]), terra_tile_key_y(keys[i]));
    return cli_error(cmd, "%d tile%s failed to load and %s drawn as %s ancestor%s (level/x/y): %s%s; the reasons are "
                     "above",
                     n, n == 1 ? "" : "s", n == 1 ? "was" : "were", n == 1 ? "its" : "their", n == 1 ? "" : "s", list,
                     n > SHOWN ? ", ..." : "");
}
