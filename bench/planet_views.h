/* The planet benchmarks' views and their visible ground: bench_planet (selection, horizon) and
 * bench_gl_planet (what the renderer draws of it) measure the same 27 cameras. */
#ifndef TERRA_BENCH_PLANET_VIEWS_H
#define TERRA_BENCH_PLANET_VIEWS_H

#include "bench.h"
#include "terra/planet.h"

#include <math.h>

#define PI 3.14159265358979323846

static inline terra_vec3 vadd(terra_vec3 a, terra_vec3 b) { return (terra_vec3){a.x + b.x, a.y + b.y, a.z + b.z}; }
static inline terra_vec3 vsub(terra_vec3 a, terra_vec3 b) { return (terra_vec3){a.x - b.x, a.y - b.y, a.z - b.z}; }
static inline terra_vec3 vscale(terra_vec3 a, double k) { return (terra_vec3){a.x * k, a.y * k, a.z * k}; }
static inline double vdot(terra_vec3 a, terra_vec3 b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
static inline double vlen(terra_vec3 a) { return sqrt(vdot(a, a)); }
static inline terra_vec3 vcross(terra_vec3 a, terra_vec3 b) {
    return (terra_vec3){a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x};
}

/* A camera `alt` metres above the ground at (lat, lon); the pitch looks at the horizon from low, at
 * the limb from high. */
static inline terra_camera camera(const terra_planet *p, double lat, double lon, double alt, double heading, double pitch_off) {
    const terra_vec3 d = terra_planet_latlon_dir(lat, lon);
    const double R = terra_planet_get_desc(p)->radius_m;
    const double dip = acos(R / (R + alt)) * 180 / PI;
    return (terra_camera){.eye = terra_planet_point(p, d, terra_planet_height(p, d) + alt), .yaw_rad = heading * PI / 180,
                          .pitch_rad = (-dip + pitch_off) * PI / 180, .fov_y_rad = 60 * PI / 180, .aspect = 16.0 / 9, .up = d};
}

static const double ALTS[] = {2, 30, 300, 3e3, 3e4, 3e5, 3e6, 2e7, 4e7};
#define NALTS (int)(sizeof ALTS / sizeof ALTS[0])
#define NVIEWS (3 * NALTS)

/* View v of the 27: three at each height, random places and headings, pitches from 12 degrees under
 * to 8 over the horizon (the same sequence in every run). */
static inline terra_camera planet_view(const terra_planet *p, int v) {
    uint64_t rng = 99;
    double u1 = 0, u2 = 0;
    for (int k = 0; k <= v; k++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        u1 = (double)(rng >> 11) / 9007199254740992.0;
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        u2 = (double)(rng >> 11) / 9007199254740992.0;
    }
    return camera(p, u1 * 170 - 85, u2 * 360 - 180, ALTS[v % NALTS], 360 * u1 * u2, -12 + (v % 5) * 5);
}

/* Level 0's spacing along a face's middle, and every level's error. */
static inline double level_errors(const terra_planet *p, float err[TERRA_PLANET_MAX_LEVELS]) {
    const int N = terra_planet_get_desc(p)->cells, levels = terra_planet_get_desc(p)->levels;
    for (int l = 0; l < levels; l++) err[l] = terra_planet_level_error(p, l);
    return terra_planet_get_desc(p)->radius_m * PI / 2 / ldexp(N, levels - 1);
}

/* The 96 x 54 grid of pixel rays (each 20 pixels apart at 1080 px) of a view: where each meets the
 * ground. */
#define RAYS_W 96
#define RAYS_H 54
static inline long view_rays(const terra_planet *p, const terra_camera *cam, terra_vec3 at[RAYS_H][RAYS_W], bool met[RAYS_H][RAYS_W]) {
    terra_vec3 f, r, u;
    terra_camera_basis(cam, &f, &r, &u);
    const double ty = tan(cam->fov_y_rad / 2), tx = ty * cam->aspect;
    long hits = 0;
    for (int py = 0; py < RAYS_H; py++)
        for (int px = 0; px < RAYS_W; px++) {
            const terra_vec3 dir = vadd(f, vadd(vscale(r, ((px + 0.5) / RAYS_W * 2 - 1) * tx), vscale(u, (1 - (py + 0.5) / RAYS_H * 2) * ty)));
            met[py][px] = terra_planet_raycast(p, cam->eye, dir, 0, NULL, &at[py][px]);
            hits += met[py][px];
        }
    return hits;
}

/* The error-bounded mesh over the ground the view shows: the rays that met the ground, a quad between
 * four neighbours counted with its area at its corner's distance (none across a silhouette, where
 * neighbours lie far apart). */
static inline double visible_ideal(const terra_planet *p, terra_vec3 at[RAYS_H][RAYS_W], bool met[RAYS_H][RAYS_W], terra_vec3 eye,
                                   double k_px) {
    const int levels = terra_planet_get_desc(p)->levels;
    float err[TERRA_PLANET_MAX_LEVELS];
    const double s0 = level_errors(p, err);
    double sum = 0;
    for (int j = 0; j + 1 < RAYS_H; j++)
        for (int i = 0; i + 1 < RAYS_W; i++) {
            if (!met[j][i] || !met[j][i + 1] || !met[j + 1][i] || !met[j + 1][i + 1]) continue;
            const terra_vec3 a = at[j][i], b = at[j][i + 1], c = at[j + 1][i + 1], d = at[j + 1][i];
            const double da = vlen(vsub(a, eye)), dc = vlen(vsub(c, eye));
            if (fabs(da - dc) > 0.2 * da) continue;
            const double s = bench_level_spacing(2.0 * da / k_px, err, levels, s0);
            sum += 2.0 * 0.5 * vlen(vcross(vsub(c, a), vsub(d, b))) / (s * s);
        }
    return sum;
}

#endif
