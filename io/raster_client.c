/* Reading a raster in a child process (terra-raster), so the caller never maps GDAL: see
 * terra/raster.h. The child writes a terra_raster_wire header and the heights to a pipe; on
 * failure it writes its message to a second pipe and exits with 64 + the terra_status. */
#include "terra/io.h"
#include "terra/raster.h"
#include "raster_wire.h"
#include "child.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

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
static bool read_all(int fd, void *buf, size_t n) { return terra_child_read(fd, buf, n); }

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

/* The reader to run: `reader`, $TERRA_RASTER_READER, or terra-raster next to the running program. */
static terra_status reader_path(const char *file, const char *reader, char *path, size_t cap) {
    return terra_child_locate(file, "the raster reader", reader, "TERRA_RASTER_READER", "terra-raster", path, cap);
}

/* The reader's arguments after the path: encoding, band, z_scale, spacing_m, max_side, max_bytes. */
static void reader_args(const terra_raster_desc *d, char args[TERRA_RASTER_ARGS][40]) {
    snprintf(args[0], 40, "%d", (int)d->encoding);
    snprintf(args[1], 40, "%d", d->band);
    snprintf(args[2], 40, "%.17g", d->z_scale);
    snprintf(args[3], 40, "%.17g", d->spacing_m);
    snprintf(args[4], 40, "%d", d->max_side);
    snprintf(args[5], 40, "%zu", d->max_bytes);
    snprintf(args[6], 40, "%d", (int)d->nan_is_nodata);
    snprintf(args[7], 40, "%.17g", d->min_height);
    snprintf(args[8], 40, "%.17g", d->max_height);
}

terra_status terra_raster_read_isolated(const terra_raster_desc *d, const char *reader, terra_raster *out) {
    if (!d || !out || !d->path) return terra_fail(TERRA_E_INVALID, "raster: NULL argument");
    memset(out, 0, sizeof *out);
    /* A plain PNG needs no GDAL: read here, no child process. */
    bool handled = false;
    terra_status pst = terra_raster_read_png_direct(d, out, &handled);
    if (handled) return pst;
    char path[PATH_MAX + 32];
    terra_status rst = reader_path(d->path, reader, path, sizeof path);
    if (rst) return rst;
    char args[TERRA_RASTER_ARGS][40];
    reader_args(d, args);
    char *argv[TERRA_RASTER_ARGS + 3] = {path, (char *)d->path};
    for (int i = 0; i < TERRA_RASTER_ARGS; i++) argv[2 + i] = args[i];
    terra_child c;
    if ((rst = terra_child_start(d->path, "the raster reader", path, argv, false, &c)) != TERRA_OK) return rst;

    terra_raster_wire w;
    bool got = read_all(c.out, &w, sizeof w) && w.magic == TERRA_RASTER_WIRE_MAGIC && w.size == sizeof w &&
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
        got = hs && read_all(c.out, hs, n * sizeof(float));
    }
    terra_status st = terra_child_finish(&c, d->path, "the raster reader");
    if (got && st == TERRA_OK) {
        *out = w.raster;
        out->heights = hs;
        return TERRA_OK;
    }
    terra_free(hs);
    if (over) return over;
    if (nomem) return terra_fail(TERRA_E_NOMEM, "%s: out of memory for %dx%d samples", d->path, w.raster.width, w.raster.height);
    if (st == TERRA_OK) return terra_fail(TERRA_E_IO, "%s: the raster reader's answer is cut short", d->path);
    return st;
}

/* ---- sources: what every kind shares ----------------------------------------------------------- */

terra_status terra_raster_source_new(const terra_raster_desc *d, const terra_raster_source_ops *ops, void *impl,
                                     terra_raster_source **out) {
    terra_raster_source *s = terra_alloc(sizeof *s);
    size_t n = strlen(d->path) + 1;
    char *path = terra_alloc(n);
    if (!s || !path) {
        terra_free(s);
        terra_free(path);
        return terra_fail(TERRA_E_NOMEM, "%s: out of memory", d->path);
    }
    memset(s, 0, sizeof *s);
    memcpy(path, d->path, n);
    s->ops = ops;
    s->desc = *d;
    s->desc.path = s->path = path;
    s->impl = impl;
    pthread_mutex_init(&s->lock, NULL);
    *out = s;
    return TERRA_OK;
}

void terra_raster_source_free(terra_raster_source *s) {
    pthread_mutex_destroy(&s->lock);
    terra_free(s->path);
    terra_free(s->wkt);
    terra_free(s);
}

const terra_raster_info *terra_raster_source_info(const terra_raster_source *s) { return &s->info; }

void terra_raster_close(terra_raster_source *s) {
    if (!s) return;
    s->ops->close(s);
    terra_raster_source_free(s);
}

terra_status terra_raster_check_window(const terra_raster_desc *d, const double *geo, bool degrees, const float *hs,
                                       int x0, int y0, int w, int h) {
    const bool bounded = d->min_height != 0 || d->max_height != 0;
    const size_t n = (size_t)w * (size_t)h;
    for (size_t i = 0; i < n; i++) {
        const float v = hs[i];
        if (!isinf(v) && (!bounded || v != v || (v >= d->min_height && v <= d->max_height))) continue;
        const int c = x0 + (int)(i % (size_t)w), r = y0 + (int)(i / (size_t)w);
        if (isinf(v)) return terra_fail(TERRA_E_CORRUPT, "%s: height overflows at sample (%d, %d)", d->path, c, r);
        char place[128] = "";
        if (geo) {
            const double X = geo[0] + (c + 0.5) * geo[1] + (r + 0.5) * geo[2];
            const double Y = geo[3] + (c + 0.5) * geo[4] + (r + 0.5) * geo[5];
            snprintf(place, sizeof place, degrees ? ", lon %.9g, lat %.9g" : ", x %.9g, y %.9g in its coordinate system",
                     X, Y);
        }
        return terra_fail(TERRA_E_CORRUPT, "%s: height %g m at sample (column %d, row %d%s) is outside %g..%g m", d->path,
                          (double)v, c, r, place, d->min_height, d->max_height);
    }
    return TERRA_OK;
}

terra_status terra_raster_read_window(terra_raster_source *s, int x0, int y0, int w, int h, float *out) {
    if (!s || !out) return terra_fail(TERRA_E_INVALID, "raster window: NULL argument");
    const terra_raster_info *in = &s->info;
    if (w <= 0 || h <= 0 || x0 < 0 || y0 < 0 || x0 > in->width - w || y0 > in->height - h)
        return terra_fail(TERRA_E_INVALID, "%s: window %dx%d at (%d, %d) is not inside the %dx%d raster", s->path, w,
                          h, x0, y0, in->width, in->height);
    pthread_mutex_lock(&s->lock);
    terra_status st = s->ops->window(s, x0, y0, w, h, out);
    pthread_mutex_unlock(&s->lock);
    return st;
}

terra_status terra_raster_read_geo(terra_raster_source *s, const terra_raster_geo_grid *g, int x0, int y0, int w,
                                   int h, float *out) {
    if (!s || !g || !out) return terra_fail(TERRA_E_INVALID, "raster geographic window: NULL argument");
    if (!isfinite(g->west) || !isfinite(g->north) || !(g->step_x > 0) || !(g->step_y > 0) || !isfinite(g->step_x) ||
        !isfinite(g->step_y) || g->width <= 0 || g->height <= 0)
        return terra_fail(TERRA_E_INVALID,
                          "%s: geographic grid west %g north %g step %g x %g size %dx%d: needs finite corners, "
                          "positive steps and sizes",
                          s->path, g->west, g->north, g->step_x, g->step_y, g->width, g->height);
    if (w <= 0 || h <= 0 || x0 < 0 || y0 < 0 || x0 > g->width - w || y0 > g->height - h)
        return terra_fail(TERRA_E_INVALID, "%s: window %dx%d at (%d, %d) is not inside the %dx%d geographic grid",
                          s->path, w, h, x0, y0, g->width, g->height);
    if (!s->info.georeferenced || !s->info.has_crs || !s->ops->geo)
        return terra_fail(TERRA_E_UNSUPPORTED, "%s: has no georeferencing%s, so no place on the globe", s->path,
                          s->info.georeferenced ? " system (CRS)" : "");
    pthread_mutex_lock(&s->lock);
    terra_status st = s->ops->geo(s, g, x0, y0, w, h, out);
    pthread_mutex_unlock(&s->lock);
    return st;
}

/* ---- the served child: terra-raster --serve ------------------------------------------------------ */

typedef struct child_impl {
    terra_child child; /* child.out: our end of the socket, both ways */
    bool broken;   /* the conversation failed once: every later read fails the same way */
    bool finished; /* and the child was waited for */
} child_impl;

/* The conversation broke (`what` happened): the child is ended and waited for, and how it ended (a
 * crash, its CPU time run out) is the error when it did not simply exit. */
static terra_status child_broken(terra_raster_source *s, const char *what) {
    child_impl *c = s->impl;
    c->broken = true;
    terra_status st = c->finished ? TERRA_OK : terra_child_finish(&c->child, s->path, "the raster reader");
    c->finished = true;
    return st ? st : terra_fail(TERRA_E_IO, "%s: %s", s->path, what);
}

/* Writes exactly n bytes; false when the peer is gone (never SIGPIPE: a socket, MSG_NOSIGNAL). */
static bool send_all(int fd, const void *buf, size_t n) {
    const uint8_t *p = buf;
    while (n) {
        ssize_t k = send(fd, p, n > (1u << 20) ? (1u << 20) : n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        p += k;
        n -= (size_t)k;
    }
    return true;
}

bool terra_raster_send_reply(int fd, terra_status st, const void *payload, size_t bytes) {
    terra_raster_reply r = {.magic = TERRA_RASTER_REPLY_MAGIC, .status = (int32_t)st, .bytes = bytes};
    return send_all(fd, &r, sizeof r) && send_all(fd, payload, bytes);
}

int terra_raster_serve(terra_raster_source *s, int in, int out) {
    float *buf = NULL;
    size_t cap = 0;
    int rc = 0;
    for (;;) {
        terra_raster_request q;
        if (!read_all(in, &q, sizeof q)) break; /* the caller closed: done */
        terra_child_limit_cpu(); /* each request may take its own allowance */
        if (q.magic != TERRA_RASTER_REQUEST_MAGIC ||
            (q.kind != TERRA_RASTER_REQ_WINDOW && q.kind != TERRA_RASTER_REQ_GEO) || q.w <= 0 || q.h <= 0) {
            rc = 1;
            break;
        }
        const size_t n = (size_t)q.w * (size_t)q.h;
        terra_status st = TERRA_OK;
        if (n > cap) {
            /* The answer is the window's size: past the budget it is refused before allocating. */
            st = terra_raster_check_budget(s->path, q.w, q.h, 1, 0, s->desc.max_bytes);
            if (!st) {
                terra_free(buf);
                cap = 0;
                buf = terra_alloc(n * sizeof(float));
                if (buf) cap = n;
                else st = terra_fail(TERRA_E_NOMEM, "%s: out of memory for a %dx%d window", s->path, q.w, q.h);
            }
        }
        if (!st)
            st = q.kind == TERRA_RASTER_REQ_WINDOW ? terra_raster_read_window(s, q.x0, q.y0, q.w, q.h, buf)
                                                   : terra_raster_read_geo(s, &q.grid, q.x0, q.y0, q.w, q.h, buf);
        const char *msg = st ? terra_last_error() : NULL;
        if (!terra_raster_send_reply(out, st, st ? (const void *)msg : buf, st ? strlen(msg) : n * sizeof(float))) {
            rc = 1;
            break;
        }
    }
    terra_free(buf);
    return rc;
}

/* Reads a reply header and, for a failure, its message (set as the error): TERRA_OK with *bytes
 * of answer to follow, or the failure. */
static terra_status child_reply(terra_raster_source *s, uint64_t *bytes) {
    child_impl *c = s->impl;
    terra_raster_reply r;
    if (!read_all(c->child.out, &r, sizeof r) || r.magic != TERRA_RASTER_REPLY_MAGIC)
        return child_broken(s, "the raster reader stopped answering");
    *bytes = r.bytes;
    if (r.status == TERRA_OK) return TERRA_OK;
    char msg[1024];
    size_t keep = r.bytes < sizeof msg - 1 ? (size_t)r.bytes : sizeof msg - 1;
    bool got = read_all(c->child.out, msg, keep);
    for (uint64_t left = r.bytes - keep; got && left;) { /* a longer message: the rest is dropped */
        char skip[256];
        size_t k = left < sizeof skip ? (size_t)left : sizeof skip;
        got = read_all(c->child.out, skip, k);
        left -= k;
    }
    msg[got ? keep : 0] = 0;
    if (!got) return child_broken(s, "the raster reader stopped answering");
    terra_status st = r.status > 0 && r.status <= TERRA_E_CAPACITY ? (terra_status)r.status : TERRA_E_IO;
    return terra_fail(st, "%s", msg);
}

static terra_status child_request(terra_raster_source *s, const terra_raster_request *q, float *out) {
    child_impl *c = s->impl;
    if (c->broken) return terra_fail(TERRA_E_IO, "%s: the raster reader stopped answering earlier", s->path);
    uint64_t bytes = 0;
    if (!send_all(c->child.out, q, sizeof *q)) return child_broken(s, "the raster reader is gone");
    terra_status st = child_reply(s, &bytes);
    if (st) return st;
    if (bytes != (uint64_t)q->w * (uint64_t)q->h * sizeof(float) || !read_all(c->child.out, out, (size_t)bytes))
        return child_broken(s, "the raster reader's answer is cut short");
    return TERRA_OK;
}

static terra_status child_window(terra_raster_source *s, int x0, int y0, int w, int h, float *out) {
    terra_raster_request q = {.magic = TERRA_RASTER_REQUEST_MAGIC, .kind = TERRA_RASTER_REQ_WINDOW,
                              .x0 = x0, .y0 = y0, .w = w, .h = h};
    return child_request(s, &q, out);
}

static terra_status child_geo(terra_raster_source *s, const terra_raster_geo_grid *g, int x0, int y0, int w, int h,
                              float *out) {
    terra_raster_request q = {.magic = TERRA_RASTER_REQUEST_MAGIC, .kind = TERRA_RASTER_REQ_GEO,
                              .x0 = x0, .y0 = y0, .w = w, .h = h, .grid = *g};
    return child_request(s, &q, out);
}

/* Closing our end is the child's end of input: it exits, and is waited for. */
static void child_close(terra_raster_source *s) {
    child_impl *c = s->impl;
    if (!c->finished) terra_child_finish(&c->child, s->path, "the raster reader");
    terra_free(c);
}

static const terra_raster_source_ops child_ops = {child_window, child_geo, child_close};

/* The description as another process wrote it: its text ends within its array (it is printed with
 * %s) and its flags are booleans (a byte other than 0 or 1 is no bool to read). */
static void sanitize_info(terra_raster_info *in) {
    in->ellipsoid[sizeof in->ellipsoid - 1] = 0;
    bool *const flags[] = {&in->georeferenced, &in->has_crs, &in->geographic, &in->off_earth,
                           &in->has_lonlat, &in->has_nodata, &in->range_known};
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++) {
        unsigned char byte;
        memcpy(&byte, flags[i], 1);
        *flags[i] = byte != 0;
    }
}

terra_status terra_raster_open(const terra_raster_desc *d, const char *reader, terra_raster_source **out) {
    if (!d || !out || !d->path) return terra_fail(TERRA_E_INVALID, "raster: NULL argument");
    *out = NULL;
    bool handled = false;
    terra_status st = terra_raster_open_png(d, out, &handled);
    if (handled) return st;
    char path[PATH_MAX + 32];
    st = reader_path(d->path, reader, path, sizeof path);
    if (st) return st;
    char args[TERRA_RASTER_ARGS][40];
    char *argv[TERRA_RASTER_ARGS + 4] = {path, "--serve", (char *)d->path};
    reader_args(d, args);
    for (int i = 0; i < TERRA_RASTER_ARGS; i++) argv[3 + i] = args[i];

    child_impl *c = terra_calloc(1, sizeof *c);
    if (!c) return terra_fail(TERRA_E_NOMEM, "%s: out of memory", d->path);
    if ((st = terra_child_start(d->path, "the raster reader", path, argv, true, &c->child)) != TERRA_OK) {
        terra_free(c);
        return st;
    }
    if ((st = terra_raster_source_new(d, &child_ops, c, out)) != TERRA_OK) {
        terra_child_finish(&c->child, d->path, "the raster reader");
        terra_free(c);
        return st;
    }
    terra_raster_source *s = *out;
    uint64_t bytes = 0;
    st = child_reply(s, &bytes);
    if (!st && (bytes < sizeof s->info || bytes - sizeof s->info > (1u << 20) ||
                !read_all(c->child.out, &s->info, sizeof s->info)))
        st = terra_fail(TERRA_E_IO, "%s: the raster reader's description is cut short", d->path);
    size_t wkt = st ? 0 : (size_t)(bytes - sizeof s->info);
    if (!st && wkt) {
        s->wkt = terra_alloc(wkt + 1);
        if (!s->wkt) st = terra_fail(TERRA_E_NOMEM, "%s: out of memory", d->path);
        else if (!read_all(c->child.out, s->wkt, wkt))
            st = terra_fail(TERRA_E_IO, "%s: the raster reader's description is cut short", d->path);
        else s->wkt[wkt] = 0;
    }
    if (!st) sanitize_info(&s->info);
    s->info.crs_wkt = s->wkt;
    if (st) {
        terra_raster_close(s);
        *out = NULL;
    }
    return st;
}
