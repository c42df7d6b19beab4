/* Reading a raster in a child process (terra-raster), so the caller never maps GDAL: see
 * terra/raster.h. The child writes a terra_raster_wire header and the heights to a pipe; on
 * failure it writes its message to a second pipe and exits with 64 + the terra_status. */
#include "terra/io.h"
#include "terra/raster.h"
#include "raster_wire.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

void terra_raster_free(terra_raster *r) {
    if (!r) return;
    terra_free(r->heights);
    memset(r, 0, sizeof *r);
}

size_t terra_raster_memory_budget(size_t max_bytes) {
    if (max_bytes) return max_bytes;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return (size_t)2 << 30; /* unknown: 2 GiB */
    uint64_t half = (uint64_t)pages * (uint64_t)page / 2;
    return half > SIZE_MAX ? SIZE_MAX : (size_t)half;
}

terra_status terra_raster_check_budget(const char *path, int w, int h, int copies, size_t working, size_t max_bytes) {
    size_t budget = terra_raster_memory_budget(max_bytes);
    /* In doubles: 65535 x 65535 x 4 x 2 does not fit a 32-bit size_t, and the message wants MiB. */
    double need = (double)w * (double)h * 4.0 * copies + (double)working;
    if (need <= (double)budget) return TERRA_OK;
    return terra_fail(TERRA_E_CAPACITY,
                      "%s: raster %dx%d needs %.1f MiB to read, past the memory budget of %.1f MiB%s", path, w, h,
                      need / 1048576.0, (double)budget / 1048576.0,
                      max_bytes ? "" : " (half of physical memory)");
}

terra_status terra_raster_scan_heights(const char *path, const float *hs, int w, int h, terra_raster *out) {
    const size_t n = (size_t)w * (size_t)h;
    size_t nodata = 0;
    float mn = INFINITY, mx = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        const float v = hs[i];
        if (v != v) {
            nodata++;
            continue;
        }
        if (!isfinite(v))
            return terra_fail(TERRA_E_CORRUPT, "%s: height overflows at sample (%zu, %zu)", path, i % (size_t)w,
                              i / (size_t)w);
        if (v < mn) mn = v;
        if (v > mx) mx = v;
    }
    if (nodata == n) return terra_fail(TERRA_E_SOURCE, "%s: every sample is no-data", path);
    out->width = w;
    out->height = h;
    out->nodata_count = nodata;
    out->min_z = mn;
    out->max_z = mx;
    return TERRA_OK;
}

terra_status terra_raster_check_extent(const char *path, const terra_raster *r) {
    const double *g = r->geo, w = r->width, h = r->height;
    for (int i = 0; i < 4; i++) {
        double c = (i & 1) ? w : 0, l = (i & 2) ? h : 0;
        double x = g[0] + g[1] * c + g[2] * l, y = g[3] + g[4] * c + g[5] * l;
        if (!isfinite(x) || !isfinite(y))
            return terra_fail(TERRA_E_UNSUPPORTED,
                              "%s: the georeferencing puts sample corner (%g, %g) at a non-finite coordinate "
                              "(geotransform %g %g %g %g %g %g)",
                              path, c, l, g[0], g[1], g[2], g[3], g[4], g[5]);
    }
    double sx = r->spacing_x, sy = r->spacing_y;
    if (!(sx > 0) || !(sy > 0) || !isfinite(sx * w) || !isfinite(sy * h))
        return terra_fail(TERRA_E_UNSUPPORTED,
                          "%s: spacing %g x %g m over %dx%d samples gives a non-finite or empty extent", path, sx, sy,
                          r->width, r->height);
    return TERRA_OK;
}

/* Reads exactly n bytes (false at an early end or an error). */
static bool read_all(int fd, void *buf, size_t n) {
    uint8_t *p = buf;
    while (n) {
        ssize_t k = read(fd, p, n > (1u << 20) ? (1u << 20) : n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        p += k;
        n -= (size_t)k;
    }
    return true;
}

bool terra_io_sibling_path(const char *name, char *out, size_t cap) {
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return false;
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (!slash) return false;
    slash[1] = 0;
    return snprintf(out, cap, "%s%s", self, name) < (int)cap;
}

/* The reader next to the running program, or $TERRA_RASTER_READER. */
static bool default_reader(char *out, size_t cap) {
    const char *env = getenv("TERRA_RASTER_READER");
    if (env && *env) return snprintf(out, cap, "%s", env) < (int)cap;
    return terra_io_sibling_path("terra-raster", out, cap);
}

terra_status terra_raster_read_isolated(const terra_raster_desc *d, const char *reader, terra_raster *out) {
    if (!d || !out || !d->path) return terra_fail(TERRA_E_INVALID, "raster: NULL argument");
    memset(out, 0, sizeof *out);
    /* A plain PNG needs no GDAL: read here, no child process. */
    bool handled = false;
    terra_status pst = terra_raster_read_png_direct(d, out, &handled);
    if (handled) return pst;
    char path[PATH_MAX + 32];
    if (reader) {
        snprintf(path, sizeof path, "%s", reader);
    } else if (!default_reader(path, sizeof path)) {
        return terra_fail(TERRA_E_UNSUPPORTED, "%s: cannot locate terra-raster, the raster reader", d->path);
    }
    if (access(path, X_OK) != 0)
        return terra_fail(TERRA_E_UNSUPPORTED, "%s: the raster reader %s is missing (it is built next to terra)",
                          d->path, path);

    char a_enc[16], a_band[16], a_z[40], a_sp[40], a_max[16], a_bytes[24];
    snprintf(a_enc, sizeof a_enc, "%d", (int)d->encoding);
    snprintf(a_band, sizeof a_band, "%d", d->band);
    snprintf(a_z, sizeof a_z, "%.17g", d->z_scale);
    snprintf(a_sp, sizeof a_sp, "%.17g", d->spacing_m);
    snprintf(a_max, sizeof a_max, "%d", d->max_side);
    snprintf(a_bytes, sizeof a_bytes, "%zu", d->max_bytes);
    char *argv[] = {path, (char *)d->path, a_enc, a_band, a_z, a_sp, a_max, a_bytes, NULL};

    int data[2] = {-1, -1}, err[2] = {-1, -1};
    if (pipe(data) != 0 || pipe(err) != 0) {
        terra_status st = terra_fail(TERRA_E_IO, "%s: cannot start the raster reader: %s", d->path, strerror(errno));
        for (int i = 0; i < 2; i++) {
            if (data[i] >= 0) close(data[i]);
            if (err[i] >= 0) close(err[i]);
        }
        return st;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, data[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err[1], 2);
    posix_spawn_file_actions_addclose(&fa, data[0]);
    posix_spawn_file_actions_addclose(&fa, err[0]);
    pid_t pid;
    int rc = posix_spawn(&pid, path, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(data[1]);
    close(err[1]);
    if (rc != 0) {
        close(data[0]);
        close(err[0]);
        return terra_fail(TERRA_E_IO, "%s: cannot start the raster reader %s: %s", d->path, path, strerror(rc));
    }

    terra_raster_wire w;
    bool got = read_all(data[0], &w, sizeof w) && w.magic == TERRA_RASTER_WIRE_MAGIC && w.size == sizeof w &&
               w.raster.width > 0 && w.raster.height > 0;
    float *hs = NULL;
    bool nomem = false;
    terra_status over = TERRA_OK;
    /* The reader checked the budget already; one from another build might not have. */
    if (got) got = !(over = terra_raster_check_budget(d->path, w.raster.width, w.raster.height, 2, 0, d->max_bytes));
    if (got) {
        const size_t n = (size_t)w.raster.width * (size_t)w.raster.height;
        hs = terra_alloc(n * sizeof(float) + 1);
        nomem = !hs;
        got = hs && read_all(data[0], hs, n * sizeof(float));
    }
    close(data[0]); /* a reader still writing gets EPIPE and stops */
    char msg[1024];
    size_t mn = 0;
    for (;;) {
        ssize_t k = read(err[0], msg + mn, sizeof msg - 1 - mn);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        mn += (size_t)k;
        if (mn == sizeof msg - 1) break;
    }
    msg[mn] = 0;
    while (mn && (msg[mn - 1] == '\n' || msg[mn - 1] == '\r')) msg[--mn] = 0;
    close(err[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }

    if (got && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        *out = w.raster;
        out->heights = hs;
        return TERRA_OK;
    }
    terra_free(hs);
    if (over) return over;
    if (nomem) return terra_fail(TERRA_E_NOMEM, "%s: out of memory for %dx%d samples", d->path, w.raster.width, w.raster.height);
    if (WIFEXITED(status) && WEXITSTATUS(status) > 64 && WEXITSTATUS(status) <= 64 + TERRA_E_CAPACITY && mn)
        return terra_fail((terra_status)(WEXITSTATUS(status) - 64), "%s", msg);
    if (WIFSIGNALED(status))
        return terra_fail(TERRA_E_IO, "%s: the raster reader died (signal %d)%s%s", d->path, WTERMSIG(status),
                          mn ? ": " : "", msg);
    return terra_fail(TERRA_E_IO, "%s: the raster reader failed%s%s", d->path, mn ? ": " : "", msg);
}
