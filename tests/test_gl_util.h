/* Shared pieces of the renderer's tests: a headless scene over the default world, pictures, and
 * the CPU silhouette of the ground along each pixel column. */
#ifndef TERRA_TEST_GL_UTIL_H
#define TERRA_TEST_GL_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <time.h>

#include "terra/gl.h"
#include "terra/io.h"
#include "../cli/fly_path.h"

#define TW 320 /* test frames are small: llvmpipe on two cores */
#define TH 180

/* A sky colour the ground never has (its tints are earthy, lit and fogged; never pure magenta). */
static const uint8_t SKY[3] = {255, 0, 255};

static inline terra_gl_scene *test_scene(const terra_source *src, int cells, int w, int h) {
    terra_gl_scene_desc d = {.source = src, .width = w, .height = h, .threads = 2};
    d.select.grid.cells = cells;
    terra_gl_scene *s = NULL;
    if (terra_gl_scene_create(&d, &s) != TERRA_OK) fprintf(stderr, "scene: %s\n", terra_last_error());
    return s;
}

/* Pixel ray direction (unit) through the centre of pixel (i, j), j = 0 the top row. */
static inline terra_vec3 pixel_ray(const terra_camera *c, int w, int h, double i, double j) {
    terra_vec3 f, r, u;
    terra_camera_basis(c, &f, &r, &u);
    const double ty = tan(c->fov_y_rad * 0.5), tx = ty * w / h;
    const double a = ((i + 0.5) / w * 2 - 1) * tx, b = (1 - (j + 0.5) / h * 2) * ty;
    terra_vec3 d = {f.x + a * r.x + b * u.x, f.y + a * r.y + b * u.y, f.z + a * r.z + b * u.z};
    const double l = sqrt(d.x * d.x + d.y * d.y + d.z * d.z);
    return (terra_vec3){d.x / l, d.y / l, d.z / l};
}

/* Projects a world point: false behind the eye; else sets the (fractional) column and row. */
static inline bool project(const terra_camera *c, int w, int h, terra_vec3 p, double *col, double *row) {
    terra_vec3 f, r, u;
    terra_camera_basis(c, &f, &r, &u);
    const double dx = p.x - c->eye.x, dy = p.y - c->eye.y, dz = p.z - c->eye.z;
    const double zf = dx * f.x + dy * f.y + dz * f.z;
    if (zf <= 0.5) return false;
    const double ty = tan(c->fov_y_rad * 0.5), tx = ty * w / h;
    const double a = (dx * r.x + dy * r.y + dz * r.z) / zf / tx, b = (dx * u.x + dy * u.y + dz * u.z) / zf / ty;
    *col = (a + 1) * 0.5 * w;
    *row = (1 - b) * 0.5 * h;
    return true;
}

/* ---- what a frame drew -------------------------------------------------------------------------- */

/* A draw list's keys, sorted, each with its index in the list. */
typedef struct drawn_key {
    terra_tile_key key;
    int index;
} drawn_key;

static inline int cmp_key_(const void *a, const void *b) {
    const terra_tile_key x = ((const drawn_key *)a)->key, y = ((const drawn_key *)b)->key;
    return x < y ? -1 : x > y;
}

/* (malloc'ed; NULL when n is 0) */
static inline drawn_key *drawn_keys(const terra_stream_draw *draws, int n) {
    drawn_key *k = n > 0 ? malloc(sizeof *k * (size_t)n) : NULL;
    for (int i = 0; i < n; i++) k[i] = (drawn_key){draws[i].key, i};
    if (n > 1) qsort(k, (size_t)n, sizeof *k, cmp_key_);
    return k;
}

/* The index of the draw of key k; -1 if none. */
static inline int find_key(const drawn_key *keys, int n, terra_tile_key k) {
    const drawn_key want = {k, 0}, *at = n > 0 ? bsearch(&want, keys, (size_t)n, sizeof want, cmp_key_) : NULL;
    return at ? at->index : -1;
}

/* The draw covering (x, z), trying level `hint` first; -1 where none is drawn. */
static inline int drawn_at(const terra_select *sel, const drawn_key *keys, int n, double x, double z, int hint) {
    const int levels = terra_select_get_desc(sel)->levels;
    for (int k = 0; k < 2 * levels; k++) {
        const int level = hint + (k % 2 ? -(k + 1) / 2 : k / 2);
        if (level < 0 || level >= levels) continue;
        const double side = terra_select_tile_side(sel, level);
        const int i = find_key(keys, n, terra_tile_key_make(0, level, (int32_t)floor(x / side), (int32_t)floor(z / side)));
        if (i >= 0) return i;
    }
    return -1;
}

/* The ground's silhouette per pixel column, computed on the CPU from the source alone: ground
 * points on a polar grid around the eye (one direction per column across the view, distances
 * growing by 1.5% from 1 m out to the top level's range) are projected, and each column keeps the
 * highest row a ground point reached. top[i] = that row (0 is the top of the image), or h when no
 * ground point fell into the column.
 *
 * Each point is first moved to the nearest lattice point of level L+1, where L is the level of the
 * tile drawn there when the frame's draws are given (a stand-in's level where one stands in), else
 * (no draws, or none covers the point) the coarsest level the selection can draw at that distance
 * (the first whose range reaches it). Those points are even vertices of every tile of level L or
 * finer that can cover them, which the morph never moves, and their heights are the source's bit
 * for bit (the lattice rule): they lie exactly on the drawn ground, so a coarse level cutting
 * under a ridge between its vertices cannot pass for a hole, and sampling can only miss ground,
 * never invent it. Where a grid tile is drawn, the height is read from its vertex at the point (the
 * source's sample there, as the lattice rule makes it: a point query asks the source for its range
 * too, which costs most of the time). */
static inline void cpu_silhouette_drawn(const terra_source *src, const terra_select *sel, const terra_camera *c,
                                        const terra_stream_draw *draws, int ndraws, int w, int h, int *top) {
    const terra_select_desc *sd = terra_select_get_desc(sel);
    const int top_level = sd->levels - 1;
    const double s0 = sd->grid.tile0_size / sd->grid.cells, reach = terra_select_range(sel, top_level);
    drawn_key *keys = drawn_keys(draws, ndraws);
    const int cells = sd->grid.cells;
    const size_t grid_bytes = sizeof(terra_grid_vertex) * (size_t)terra_grid_vertex_count(cells);
    for (int i = 0; i < w; i++) top[i] = h;
    terra_vec3 f;
    terra_camera_basis(c, &f, NULL, NULL);
    const double heading = atan2(f.x, -f.z);
    const double ty = tan(c->fov_y_rad * 0.5), tx = ty * w / h;
    /* horizontal half-angle the view can reach (wider than tx when pitched) */
    const double half = atan(tx / fmax(0.05, cos(c->pitch_rad) - ty * fabs(sin(c->pitch_rad)))) + 0.02;
    const int nth = w;
    for (int k = 0; k <= nth; k++) {
        const double th = heading - half + 2 * half * k / nth;
        const double sx = sin(th), sz = -cos(th);
        int level = 0, hint = 0;
        double last_x = NAN, last_z = NAN;
        for (double d = 1.0; d < reach; d *= 1.015) {
            double x, z;
            float g = 0;
            const int drawn = keys ? drawn_at(sel, keys, ndraws, c->eye.x + sx * d, c->eye.z + sz * d, hint) : -1;
            if (drawn >= 0) {
                hint = level = draws[drawn].level;
                const double spacing = s0 * ldexp(1.0, level + 1);
                x = spacing * floor((c->eye.x + sx * d) / spacing + 0.5);
                z = spacing * floor((c->eye.z + sz * d) / spacing + 0.5);
                if (x == last_x && z == last_z) continue; /* the point just projected */
                last_x = x, last_z = z;
                if (draws[drawn].bytes == grid_bytes) {
                    const double side = terra_select_tile_side(sel, level);
                    const long i = lround((x - terra_tile_key_x(draws[drawn].key) * side) / (side / cells));
                    const long j = lround((z - terra_tile_key_y(draws[drawn].key) * side) / (side / cells));
                    g = ((const terra_grid_vertex *)draws[drawn].data)[j * (cells + 1) + i].y;
                } else if (terra_source_height(src, x, z, &g) != TERRA_OK) {
                    continue;
                }
            } else {
                /* the coarsest level that can be drawn at the lattice point, by its 3-D distance */
                for (level = level > 0 ? level - 1 : 0;; level++) {
                    const double spacing = s0 * ldexp(1.0, level + 1);
                    x = spacing * floor((c->eye.x + sx * d) / spacing + 0.5);
                    z = spacing * floor((c->eye.z + sz * d) / spacing + 0.5);
                    if (terra_source_height(src, x, z, &g) != TERRA_OK) break;
                    const double dx = x - c->eye.x, dy = g - c->eye.y, dz = z - c->eye.z;
                    if (level >= top_level || terra_select_range(sel, level) >= sqrt(dx * dx + dy * dy + dz * dz)) break;
                }
            }
            double col, row;
            if (!project(c, w, h, (terra_vec3){x, g, z}, &col, &row)) continue;
            const int ci = (int)floor(col);
            if (ci < 0 || ci >= w) continue;
            int ri = (int)floor(row);
            if (ri < 0) ri = 0;
            if (ri < top[ci]) top[ci] = ri;
        }
    }
    free(keys);
}

static inline void cpu_silhouette(const terra_source *src, const terra_select *sel, const terra_camera *c, int w,
                                  int h, int *top) {
    cpu_silhouette_drawn(src, sel, c, NULL, 0, w, h, top);
}

/* Sky-coloured pixels more than `margin` rows below the silhouette; the worst column in *where. */
static inline long holes_below(const uint8_t *rgb, int w, int h, const int *top, int margin, int *where) {
    long n = 0;
    *where = -1;
    for (int i = 0; i < w; i++) {
        for (int j = top[i] + margin + 1; j < h; j++) {
            const uint8_t *p = rgb + ((size_t)j * w + i) * 3;
            if (p[0] == SKY[0] && p[1] == SKY[1] && p[2] == SKY[2]) {
                n++;
                *where = i;
            }
        }
    }
    return n;
}

static inline int columns_with_ground(const int *top, int w, int h) {
    int n = 0;
    for (int i = 0; i < w; i++) n += top[i] < h;
    return n;
}

/* ---- real time: a slowed source, stand-ins, the gaps between drawn tiles -------------------------- */

/* A source that forwards to `world` but sleeps min_ms..max_ms (by a hash of the request, so the same
 * on every run) in each grid request while `slow` is set: tiles then arrive late, as from a loaded
 * machine. Heights at points and ranges are not slowed (selection asks them on the frame's thread). */
typedef struct slow_source {
    const terra_source *world;
    int min_ms, max_ms;
    atomic_int slow; /* 0: not slowed (settling a first frame); set between frames, read by the workers */
} slow_source;

static inline terra_status slow_sample_(void *user, const terra_grid_request *r, float *h, terra_surface *s) {
    slow_source *w = user;
    if (atomic_load(&w->slow)) {
        uint64_t x = (uint64_t)r->ix0 * 0x9E3779B97F4A7C15ull ^ (uint64_t)r->iz0 * 0xC2B2AE3D27D4EB4Full ^
                     (uint64_t)(r->spacing * 1024.0);
        x ^= x >> 31, x *= 0xBF58476D1CE4E5B9ull, x ^= x >> 29;
        const long ms = w->min_ms + (long)(x % (uint64_t)(w->max_ms - w->min_ms + 1));
        struct timespec ts = {0, ms * 1000000L};
        nanosleep(&ts, NULL);
    }
    return terra_source_sample(w->world, r, h, s);
}
static inline float slow_height_(void *user, double x, double z) {
    float h = NAN;
    terra_source_height(((const slow_source *)user)->world, x, z, &h);
    return h;
}
static inline terra_status slow_range_(void *user, double x0, double z0, double x1, double z1, float *lo, float *hi) {
    return terra_source_height_range(((const slow_source *)user)->world, x0, z0, x1, z1, lo, hi);
}
static inline terra_source *slow_source_create(slow_source *w) {
    terra_source *s = NULL;
    if (terra_source_create(&(terra_source_desc){.sample_grid = slow_sample_, .height_at = slow_height_,
                                                 .height_range = slow_range_, .user = w, .name = "slowed world"},
                            &s) != TERRA_OK)
        fprintf(stderr, "slowed source: %s\n", terra_last_error());
    return s;
}

/* How many levels coarser than the tiles it stands in for the coarsest stand-in of the camera's
 * frame is: for each wanted tile, the level of the drawn tile covering it (itself, or the ancestor
 * standing in) minus its own. *own: the same for the nearest standing ancestor of each wanted tile
 * (itself if it stands): less than the drawn one where a wanted tile that stands, or has a nearer
 * ancestor standing, was dropped under a coarser stand-in drawn for another. *uncovered: wanted
 * tiles with nothing drawn over them. */
static inline int standin_levels(const terra_stream *st, terra_focus cam, int *own, int *uncovered) {
    const terra_stream_draw *draws;
    const terra_selected_tile *wanted;
    int nd = 0, nw = 0, worst = 0;
    *own = *uncovered = 0;
    if (terra_stream_draws(st, cam, &draws, &nd) != TERRA_OK || terra_stream_wanted(st, cam, &wanted, &nw) != TERRA_OK)
        return -1;
    drawn_key *keys = drawn_keys(draws, nd);
    for (int i = 0; i < nw; i++) {
        terra_tile_key k = wanted[i].key;
        int up = 0, standing = -1;
        while (find_key(keys, nd, k) < 0 && terra_tile_key_level(k) < TERRA_TILE_MAX_LEVEL) {
            if (standing < 0 && terra_stream_is_standing(st, k)) standing = up;
            k = terra_tile_key_parent(k), up++;
        }
        if (find_key(keys, nd, k) < 0) {
            (*uncovered)++;
            continue;
        }
        if (standing < 0) standing = up;
        if (up > worst) worst = up;
        if (standing > *own) *own = standing;
    }
    free(keys);
    return worst;
}

/* The skirt depth renderer.c gives a grid tile (gl.h): its border height range plus one spacing. */
static inline double skirt_depth_of(const terra_grid_vertex *v, int cells, double spacing) {
    double lo = INFINITY, hi = -INFINITY;
    for (int j = 0; j <= cells; j++)
        for (int i = 0; i <= cells; i++)
            if (i == 0 || j == 0 || i == cells || j == cells) {
                lo = fmin(lo, v[j * (cells + 1) + i].y);
                hi = fmax(hi, v[j * (cells + 1) + i].y);
            }
    return hi - lo + spacing;
}

/* One side of a drawn grid tile, morphed as the vertex stage morphs it (in double): u along the
 * side (x for the sides at z = const, z for the others), y the height. Side 0: j = 0, 1: i = cells,
 * 2: j = cells, 3: i = 0; points in rising u. */
static inline void morphed_side(const terra_stream_draw *d, int cells, double side, const terra_vec3 *eye, int which,
                                double *u, double *y) {
    const terra_grid_vertex *v = d->data;
    const double ox = terra_tile_key_x(d->key) * side, oz = terra_tile_key_y(d->key) * side;
    for (int t = 0; t <= cells; t++) {
        const int i = which == 1 ? cells : which == 3 ? 0 : t, j = which == 0 ? 0 : which == 2 ? cells : t;
        const terra_grid_vertex *p = &v[j * (cells + 1) + i];
        const double px = ox + p->x, pz = oz + p->z, dx = px - eye->x, dy = p->y - eye->y, dz = pz - eye->z;
        const double k = d->morph_end > d->morph_start
                             ? terra_morph_factor(sqrt(dx * dx + dy * dy + dz * dz), d->morph_start, d->morph_end)
                             : 0.0;
        const double mx = px + (ox + p->mx - px) * k, my = p->y + (p->my - p->y) * k, mz = pz + (oz + p->mz - pz) * k;
        u[t] = which == 0 || which == 2 ? mx : mz;
        y[t] = my;
    }
}

static inline double polyline_at(const double *u, const double *y, int n, double at) {
    if (at <= u[0]) return y[0];
    for (int t = 1; t < n; t++)
        if (at <= u[t]) return u[t] > u[t - 1] ? y[t - 1] + (y[t] - y[t - 1]) * (at - u[t - 1]) / (u[t] - u[t - 1]) : y[t];
    return y[n - 1];
}

/* The gaps between the sides of a frame's drawn grid tiles, as drawn (morphed): for every two tiles
 * sharing part of a side, the most the one edge lies above the other over that part, which the
 * higher tile's skirt must reach down across. */
typedef struct gap_stats {
    int pairs, level_diff_max; /* neighbour pairs; the most levels between two neighbours */
    /* [0]: neighbours at most two levels apart (what the skirt depth is made for); [1]: further */
    int pairs_apart[2];
    double gap_max_m[2];  /* the largest gap between two neighbours' edges */
    double ratio_max[2];  /* the largest gap over the skirt depth of the tile above it (< 1: covered) */
    int uncovered[2];     /* pairs whose gap is deeper than the higher tile's skirt */
} gap_stats;

static inline void measure_gaps(const terra_select *sel, const terra_vec3 *eye, const terra_stream_draw *draws, int n,
                                gap_stats *g) {
    const int cells = terra_select_get_desc(sel)->grid.cells;
    const size_t grid_bytes = sizeof(terra_grid_vertex) * (size_t)terra_grid_vertex_count(cells);
    double *ua = malloc(sizeof(double) * 4 * (cells + 1)), *ya = ua + (cells + 1), *ub = ya + (cells + 1),
           *yb = ub + (cells + 1);
    double *depth = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    for (int a = 0; a < n; a++) {
        const double side = terra_select_tile_side(sel, draws[a].level);
        depth[a] = draws[a].bytes == grid_bytes ? skirt_depth_of(draws[a].data, cells, side / cells) : -1;
    }
    for (int a = 0; a < n; a++) {
        if (depth[a] < 0) continue;
        const double sa = terra_select_tile_side(sel, draws[a].level);
        const double ax0 = terra_tile_key_x(draws[a].key) * sa, az0 = terra_tile_key_y(draws[a].key) * sa;
        for (int b = 0; b < n; b++) {
            if (b == a || depth[b] < 0) continue;
            const double sb = terra_select_tile_side(sel, draws[b].level);
            const double bx0 = terra_tile_key_x(draws[b].key) * sb, bz0 = terra_tile_key_y(draws[b].key) * sb;
            /* a's side 1 (x = ax0 + sa) on b's side 3, or a's side 2 (z = az0 + sa) on b's side 0 */
            for (int dir = 0; dir < 2; dir++) {
                double lo, hi;
                if (dir == 0) {
                    if (ax0 + sa != bx0) continue;
                    lo = fmax(az0, bz0), hi = fmin(az0 + sa, bz0 + sb);
                } else {
                    if (az0 + sa != bz0) continue;
                    lo = fmax(ax0, bx0), hi = fmin(ax0 + sa, bx0 + sb);
                }
                if (hi <= lo) continue;
                morphed_side(&draws[a], cells, sa, eye, dir == 0 ? 1 : 2, ua, ya);
                morphed_side(&draws[b], cells, sb, eye, dir == 0 ? 3 : 0, ub, yb);
                double up = 0, down = 0; /* a above b; b above a */
                for (int pass = 0; pass < 2; pass++) {
                    const double *u = pass ? ub : ua;
                    for (int t = 0; t <= cells + 1; t++) {
                        const double at = t <= cells ? u[t] : hi;
                        if (at < lo || at > hi) continue;
                        const double d = polyline_at(ua, ya, cells + 1, at) - polyline_at(ub, yb, cells + 1, at);
                        up = fmax(up, d), down = fmax(down, -d);
                    }
                }
                const double ends[2] = {lo, hi};
                for (int e = 0; e < 2; e++) {
                    const double d = polyline_at(ua, ya, cells + 1, ends[e]) - polyline_at(ub, yb, cells + 1, ends[e]);
                    up = fmax(up, d), down = fmax(down, -d);
                }
                g->pairs++;
                const int ld = abs(draws[a].level - draws[b].level), far = ld > 2;
                if (ld > g->level_diff_max) g->level_diff_max = ld;
                g->pairs_apart[far]++;
                g->gap_max_m[far] = fmax(g->gap_max_m[far], fmax(up, down));
                g->ratio_max[far] = fmax(g->ratio_max[far], fmax(up / depth[a], down / depth[b]));
                g->uncovered[far] += up > depth[a] || down > depth[b];
            }
        }
    }
    free(ua);
    free(depth);
}

/* Writes a picture for a failing check next to the test (build dir). */
static inline void save_png(const char *name, const uint8_t *rgb, int w, int h) {
    if (terra_io_write_png(name, rgb, w, h, 3) == TERRA_OK) fprintf(stderr, "  wrote %s\n", name);
}

static inline long sky_pixels(const uint8_t *rgb, int w, int h) {
    long n = 0;
    for (size_t i = 0; i < (size_t)w * h; i++) n += rgb[3 * i] == SKY[0] && rgb[3 * i + 1] == SKY[1] && rgb[3 * i + 2] == SKY[2];
    return n;
}

/* How many levels coarser than the tile it stands in for (a wanted tile not standing) the coarsest
 * stand-in of the frame is (counted over the drawn fallbacks). */
static inline int fallback_levels(terra_stream *st, terra_focus f) {
    const terra_stream_draw *d;
    const terra_selected_tile *w;
    int nd, nw, worst = 0;
    terra_stream_draws(st, f, &d, &nd);
    terra_stream_wanted(st, f, &w, &nw);
    for (int k = 0; k < nw; k++) {
        if (terra_stream_is_standing(st, w[k].key)) continue;
        for (int i = 0; i < nd; i++) {
            if (!d[i].fallback || d[i].level <= w[k].level) continue;
            terra_tile_key a = w[k].key;
            while (terra_tile_key_level(a) < d[i].level) a = terra_tile_key_parent(a);
            if (a == d[i].key && d[i].level - w[k].level > worst) worst = d[i].level - w[k].level;
        }
    }
    return worst;
}

/* ---- real-time flights over an archive (test_gl_tin, bench_gl) --------------------------------- */

typedef struct archive_flight {
    bool ok;                 /* false: a scene or a frame failed (terra_last_error) */
    long sky_max;            /* the most sky pixels on a frame (every view looks down into the area) */
    int frames, collapsed;   /* frames below half the previous one's tiles, a teleport's first not counted */
    int standin_max;         /* the coarsest stand-in, levels above what it stands for, on any frame */
    int fallback_frames, calls_max, failed;
} archive_flight;
typedef terra_camera (*archive_camera)(const double *area, int f, int n);

/* Flies `n` frames of cam(t) in real time (the first settled) and checks every one. */
static inline archive_flight fly_archive(terra_archive_mesh *m, archive_camera cam_at, int n, const double *area,
                                         const char *name) {
    archive_flight r = {0};
    terra_gl_scene *scene;
    if (terra_gl_scene_create(&(terra_gl_scene_desc){.archive = m, .width = TW, .height = TH, .threads = 4,
                                                     .max_in_flight = 8, .budget_ms = 4},
                              &scene) != TERRA_OK)
        return r;
    uint8_t *rgb = malloc((size_t)TW * TH * 3);
    const terra_gl_style flat = {.flat = true, .clear_rgb = {SKY[0] / 255.0f, SKY[1] / 255.0f, SKY[2] / 255.0f}};
    int prev_tiles = 0;
    terra_vec3 prev_eye = {0, 0, 0};
    for (int f = 0; f < n; f++) {
        terra_camera cam = cam_at(area, f, n);
        /* a teleport (kilometres in a frame; the flights move 50 m) is a cut to ground not yet
         * seen, whose first frame draws stand-ins for all of it: not a collapse */
        const double dx = cam.eye.x - prev_eye.x, dz = cam.eye.z - prev_eye.z;
        const bool jump = f > 0 && dx * dx + dz * dz > 1000.0 * 1000.0;
        prev_eye = cam.eye;
        terra_gl_frame_stats fs;
        if (terra_gl_scene_frame(scene, &cam, &flat, f == 0, 60, &fs) != TERRA_OK ||
            terra_gl_read_rgb(terra_gl_scene_renderer(scene), rgb) != TERRA_OK)
            break;
        const long sky = sky_pixels(rgb, TW, TH);
        if (sky > r.sky_max) {
            r.sky_max = sky;
            char png[96];
            snprintf(png, sizeof png, "tin_holes_%s_%d.png", name, f);
            save_png(png, rgb, TW, TH);
        }
        /* the tiles resolved for drawing (hidden ones too: a hill coming near hides many) */
        r.collapsed += f > 0 && !jump && (fs.tiles + fs.hidden_tiles) * 2 < prev_tiles;
        prev_tiles = fs.tiles + fs.hidden_tiles;
        const int lv = fallback_levels(terra_gl_scene_stream(scene), terra_gl_scene_focus(scene));
        if (lv > r.standin_max) r.standin_max = lv;
        r.fallback_frames += fs.fallbacks > 0;
        if (fs.draw_calls > r.calls_max) r.calls_max = fs.draw_calls;
        r.frames++;
        r.failed += fs.failed;
    }
    r.ok = r.frames == n;
    free(rgb);
    terra_gl_scene_destroy(scene);
    return r;
}

/* Looking down (pitch -50 to -80 degrees: the view's top edge 20 degrees or more below the
 * horizon), 1.5 to 3.6 km up over the middle of the area: every ray meets ground inside it. The
 * flights move 50 m a frame (3 km/s at 60 frames a second), the teleports kilometres at once. */
static inline terra_camera archive_dive(const double *a, int f, int n) {
    const double t = (double)f / (n - 1), cx = 0.5 * (a[0] + a[2]), cz = 0.5 * (a[1] + a[3]);
    return (terra_camera){.eye = {cx - 1000 + 2000 * t, 3600 - 1500 * t, cz + 500 * sin(6 * t)}, .yaw_rad = 0.9 + t,
                          .pitch_rad = -0.9 - 0.4 * t, .fov_y_rad = 1.0, .aspect = (double)TW / TH};
}
static inline terra_camera archive_low_pass(const double *a, int f, int n) {
    const double t = (double)f / (n - 1), cx = 0.5 * (a[0] + a[2]), cz = 0.5 * (a[1] + a[3]);
    return (terra_camera){.eye = {cx - 1000 + 2000 * t, 3000, cz - 500 + 1000 * t}, .yaw_rad = 2.0, .pitch_rad = -1.2,
                          .fov_y_rad = 1.0, .aspect = (double)TW / TH};
}
static inline terra_camera archive_teleports(const double *a, int f, int n) {
    (void)n;
    const double cx = 0.5 * (a[0] + a[2]), cz = 0.5 * (a[1] + a[3]);
    const int hop = f / 6; /* a jump of kilometres every 6 frames */
    return (terra_camera){.eye = {cx + 3000 * sin(hop * 2.1), 2600 + 600 * cos(hop * 1.3), cz + 3000 * cos(hop * 1.7)},
                          .yaw_rad = hop * 0.8, .pitch_rad = -1.1, .fov_y_rad = 1.0, .aspect = (double)TW / TH};
}

#define ARCHIVE_FLIGHTS 3
static const struct {
    const char *name;
    archive_camera camera;
    int frames;
} archive_flights[ARCHIVE_FLIGHTS] = {
    {"dive", archive_dive, 40}, {"low_pass", archive_low_pass, 40}, {"teleports", archive_teleports, 36}};

/* ---- edits while flying (test_gl_edit, bench_edit) ---------------------------------------------- */

#include "terra/edit.h"
#include "terra/ground.h"

typedef struct edit_flight {
    bool ok;
    long sky_max;            /* sky pixels on the worst frame (the view looks down into ground) */
    int frames_to_drawn;     /* frames from a single edit to its ground drawn at every level in view */
    double rebuilt_vs_touched; /* tiles requested for it against tiles held over it */
    int steps_to_collider;   /* physics steps a body on the edit waits for its collider (0: the next) */
    int edits;               /* edits applied in all */
} edit_flight;

/* Whether every drawn tile over `region` is the one the source makes now, and the stream switched. */
static inline bool edit_drawn(terra_gl_scene *scene, const terra_source *src, const double region[4]) {
    const terra_stream *st = terra_gl_scene_stream(scene);
    if (terra_stream_get_stats(st)->replacing) return false;
    const terra_stream_draw *d;
    int n = 0;
    terra_stream_draws(st, terra_gl_scene_focus(scene), &d, &n);
    const terra_select *sel = terra_gl_scene_select(scene);
    const terra_grid_desc *g = &terra_select_get_desc(sel)->grid;
    const size_t bytes = sizeof(terra_grid_vertex) * (size_t)terra_grid_vertex_count(g->cells);
    terra_grid_vertex *v = malloc(bytes);
    float *scratch = malloc(sizeof(float) * (size_t)terra_grid_scratch_floats(g->cells));
    bool all = v && scratch;
    for (int i = 0; all && i < n; i++) {
        const double side = terra_select_tile_side(sel, d[i].level), x0 = terra_tile_key_x(d[i].key) * side,
                     z0 = terra_tile_key_y(d[i].key) * side;
        if (x0 > region[2] || x0 + side < region[0] || z0 > region[3] || z0 + side < region[1]) continue;
        all = terra_grid_build(src, g, d[i].key, v, scratch, NULL) == TERRA_OK && !memcmp(v, d[i].data, bytes);
    }
    free(v), free(scratch);
    return all;
}

/* Over the default world at 320x180, real time at a 4 ms budget, looking down at 45 degrees: one pit
 * dug where a body stands (frames until drawn, tiles rebuilt, the collider), then an edit every
 * frame for `busy` frames at random places in view; sky pixels counted on every frame. */
static inline edit_flight fly_edits(int busy) {
    edit_flight r = {.frames_to_drawn = -1, .steps_to_collider = -1};
    terra_source *w = NULL;
    terra_edit_layer *l = NULL;
    terra_gl_scene *scene = NULL;
    terra_ground *g = NULL;
    uint8_t *rgb = malloc((size_t)TW * TH * 3);
    terra_world_create(NULL, &w);
    if (!w || terra_edit_layer_create(&(terra_edit_layer_desc){.base = w}, &l) != TERRA_OK || !rgb) goto done;
    const terra_source *src = terra_edit_layer_source(l);
    terra_gl_scene_desc sd = {.source = src, .width = TW, .height = TH, .threads = 2, .budget_ms = 4};
    sd.select.grid.cells = 32;
    if (terra_gl_scene_create(&sd, &scene) != TERRA_OK) goto done;
    if (terra_ground_create(&(terra_ground_desc){.source = src, .grid = {.tile0_size = 64, .cells = 32}}, &g) != TERRA_OK)
        goto done;
    float y0 = 0;
    terra_source_height(w, 0, 0, &y0);
    const terra_camera cam = {.eye = {0, y0 + 250, 250}, .yaw_rad = 0, .pitch_rad = -0.8, .fov_y_rad = 1.0,
                              .aspect = (double)TW / TH};
    const terra_focus_info body = {.handle = 1, .kind = TERRA_FOCUS_ENTITY, .position = {0, y0, 0}, .collision = true};
    const terra_gl_style flat = {.flat = true, .clear_rgb = {SKY[0] / 255.0f, SKY[1] / 255.0f, SKY[2] / 255.0f}};
    terra_gl_frame_stats fs;
    if (terra_gl_scene_frame(scene, &cam, &flat, true, 60, &fs) != TERRA_OK || terra_ground_update(g, &body, 1)) goto done;
    double region[4];
    const terra_edit pit = {.brush = TERRA_BRUSH_DIG, .shape = TERRA_SHAPE_PIT, .x = 0, .z = 0, .radius = 25,
                            .falloff = 10, .amount = y0 - 30};
    terra_tile_key held[4096];
    const int nh = terra_stream_standing(terra_gl_scene_stream(scene), held, 4096);
    const uint64_t req0 = terra_stream_get_stats(terra_gl_scene_stream(scene))->total_requested;
    if (terra_edit_apply(l, &pit, region) != TERRA_OK) goto done;
    r.edits++;
    int touched = 0;
    const terra_select *sel = terra_gl_scene_select(scene);
    for (int i = 0; i < nh; i++) {
        const double side = terra_select_tile_side(sel, terra_tile_key_level(held[i]));
        const double x0 = terra_tile_key_x(held[i]) * side, z0 = terra_tile_key_y(held[i]) * side;
        touched += x0 <= region[2] && x0 + side >= region[0] && z0 <= region[3] && z0 + side >= region[1];
    }
    terra_stream_invalidate(terra_gl_scene_stream(scene), region);
    terra_ground_invalidate(g, region);
    /* the collider: the block under the body, stood from the dug ground by the next update */
    if (terra_ground_update(g, &body, 1) != TERRA_OK) goto done;
    double gy = 0;
    float want = 0;
    terra_ground_height_at(g, 0, 0, &gy);
    terra_source_height(src, 0, 0, &want);
    const bool block = terra_ground_is_ready_at(g, 0, 0);
    r.steps_to_collider = block && fabs(gy - want) < 1e-3 ? 0 : 1;
    for (int f = 0; f < 120 + busy; f++) {
        if (r.frames_to_drawn >= 0 && f >= r.frames_to_drawn + 1 && r.edits <= busy) { /* then an edit a frame */
            const double u = fmod(f * 0.6180339887, 1.0), v = fmod(f * 0.7548776662, 1.0), t = fmod(f * 0.5698402910, 1.0);
            const terra_edit e = {.brush = (terra_brush)(f % 5), .shape = (terra_shape)(f % 3),
                                  .x = -150 + 300 * u, .z = -200 + 300 * v, .radius = 3 + 27 * t, .yaw = 0.3, .falloff = 8,
                                  .amount = f % 5 < 2 ? 6.0 : f % 5 == 3 ? 0.7 : y0 - 20};
            if (terra_edit_apply(l, &e, region) == TERRA_OK) {
                terra_stream_invalidate(terra_gl_scene_stream(scene), region);
                r.edits++;
            }
        }
        if (terra_gl_scene_frame(scene, &cam, &flat, false, 60, &fs) != TERRA_OK) goto done;
        terra_gl_read_rgb(terra_gl_scene_renderer(scene), rgb);
        const long sky = sky_pixels(rgb, TW, TH);
        if (sky > r.sky_max) {
            r.sky_max = sky;
            save_png("edit_holes.png", rgb, TW, TH);
        }
        if (r.frames_to_drawn < 0 && edit_drawn(scene, src, region)) {
            r.frames_to_drawn = f + 1;
            const uint64_t req = terra_stream_get_stats(terra_gl_scene_stream(scene))->total_requested - req0;
            r.rebuilt_vs_touched = touched ? (double)req / touched : 0;
        }
    }
    r.ok = true;
done:
    terra_ground_destroy(g);
    terra_gl_scene_destroy(scene);
    terra_edit_layer_destroy(l);
    terra_source_destroy(w);
    free(rgb);
    return r;
}

#endif
