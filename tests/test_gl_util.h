/* Shared pieces of the renderer's tests: a headless scene over the default world, pictures, and
 * the CPU silhouette of the ground along each pixel column. */
#ifndef TERRA_TEST_GL_UTIL_H
#define TERRA_TEST_GL_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* The ground's silhouette per pixel column, computed on the CPU from the source alone: ground
 * points on a polar grid around the eye (one direction per column across the view, distances
 * growing by 1.5% from 1 m out to the top level's range) are projected, and each column keeps the
 * highest row a ground point reached. top[i] = that row (0 is the top of the image), or h when no
 * ground point fell into the column.
 *
 * Each point is first moved to the nearest lattice point of level L+1, where L is the coarsest
 * level the selection can draw at that distance (the first whose range reaches it). Those points
 * are even vertices of every tile that can cover them, which the morph never moves, and their
 * heights are the source's bit for bit (the lattice rule): they lie exactly on the drawn ground,
 * so a coarse level cutting under a ridge between its vertices cannot pass for a hole, and
 * sampling can only miss ground, never invent it. */
static inline void cpu_silhouette(const terra_source *src, const terra_select *sel, const terra_camera *c, int w,
                                  int h, int *top) {
    const terra_select_desc *sd = terra_select_get_desc(sel);
    const int top_level = sd->levels - 1;
    const double s0 = sd->grid.tile0_size / sd->grid.cells, reach = terra_select_range(sel, top_level);
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
        int level = 0;
        for (double d = 1.0; d < reach; d *= 1.015) {
            /* the coarsest level that can be drawn at the lattice point, by its 3-D distance */
            double x, z;
            float g = 0;
            for (level = level > 0 ? level - 1 : 0;; level++) {
                const double spacing = s0 * ldexp(1.0, level + 1);
                x = spacing * floor((c->eye.x + sx * d) / spacing + 0.5);
                z = spacing * floor((c->eye.z + sz * d) / spacing + 0.5);
                if (terra_source_height(src, x, z, &g) != TERRA_OK) break;
                const double dx = x - c->eye.x, dy = g - c->eye.y, dz = z - c->eye.z;
                if (level >= top_level || terra_select_range(sel, level) >= sqrt(dx * dx + dy * dy + dz * dz)) break;
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

/* Writes a picture for a failing check next to the test (build dir). */
static inline void save_png(const char *name, const uint8_t *rgb, int w, int h) {
    if (terra_io_write_png(name, rgb, w, h, 3) == TERRA_OK) fprintf(stderr, "  wrote %s\n", name);
}

#endif
