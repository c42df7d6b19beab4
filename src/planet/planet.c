/* terra planet: the cube-sphere mapping, the built-in planet's heights and their ranges, tiles. */
#include "terra/planet.h"

#include "cap.h"

#include <math.h>
#include <string.h>

#define PI 3.14159265358979323846

/* ---- faces ---------------------------------------------------------------------------------------
 * Face f: the cube point is n + warp(s) a + warp(t) b, each axis one world axis with a sign; a x b = n
 * on every face, so every face's triangles turn the same way seen from outside. */
typedef struct face_frame { int8_t n, ns, a, as, b, bs; } face_frame;
static const face_frame FACES[6] = {
    {0, 1, 2, -1, 1, 1},  /* +x: s toward -z, t toward +y */
    {0, -1, 2, 1, 1, 1},  /* -x: s toward +z */
    {1, 1, 0, 1, 2, -1},  /* +y: s toward +x, t toward -z */
    {1, -1, 0, 1, 2, 1},  /* -y */
    {2, 1, 0, 1, 1, 1},   /* +z */
    {2, -1, 0, -1, 1, 1}, /* -z */
};

/* The equal-angle warp, odd by construction and exactly 1 at a face edge, so the faces meeting at an
 * edge or a corner compute the same cube point there. */
static inline double warp(double s) {
    const double a = fabs(s);
    const double w = a == 1.0 ? 1.0 : tan(a * (PI / 4));
    return s < 0 ? -w : w;
}

static inline terra_vec3 cube_dir(int face, double s, double t) {
    const face_frame *f = &FACES[face];
    double p[3];
    p[f->n] = f->ns;
    p[f->a] = f->as * warp(s) + 0.0; /* + 0.0: no -0, so the faces agree on every bit */
    p[f->b] = f->bs * warp(t) + 0.0;
    const double len = sqrt(p[0] * p[0] + p[1] * p[1] + p[2] * p[2]);
    return (terra_vec3){p[0] / len, p[1] / len, p[2] / len};
}

terra_vec3 terra_planet_face_dir(int face, double s, double t) { return cube_dir(face & 7, s, t); }

int terra_planet_dir_face(terra_vec3 d, double *s, double *t) {
    const double v[3] = {d.x, d.y, d.z};
    int axis = 0;
    for (int k = 1; k < 3; k++)
        if (fabs(v[k]) > fabs(v[axis])) axis = k;
    const int face = axis * 2 + (v[axis] < 0);
    const face_frame *f = &FACES[face];
    const double m = fabs(v[axis]);
    *s = atan(f->as * v[f->a] / m) * (4 / PI);
    *t = atan(f->bs * v[f->b] / m) * (4 / PI);
    return face;
}

terra_vec3 terra_planet_latlon_dir(double lat_deg, double lon_deg) {
    const double la = lat_deg * (PI / 180), lo = lon_deg * (PI / 180);
    return (terra_vec3){cos(la) * cos(lo), sin(la), -cos(la) * sin(lo)};
}

void terra_planet_dir_latlon(terra_vec3 d, double *lat_deg, double *lon_deg) {
    *lat_deg = atan2(d.y, sqrt(d.x * d.x + d.z * d.z)) * (180 / PI);
    *lon_deg = atan2(-d.z, d.x) * (180 / PI);
}

static inline terra_vec3 v_scale(terra_vec3 a, double k) { return (terra_vec3){a.x * k, a.y * k, a.z * k}; }
static inline terra_vec3 v_sub(terra_vec3 a, terra_vec3 b) { return (terra_vec3){a.x - b.x, a.y - b.y, a.z - b.z}; }
static inline double v_dot(terra_vec3 a, terra_vec3 b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
static inline double v_len(terra_vec3 a) { return sqrt(v_dot(a, a)); }
static inline terra_vec3 v_cross(terra_vec3 a, terra_vec3 b) {
    return (terra_vec3){a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x};
}
static inline terra_vec3 v_unit(terra_vec3 a) { return v_scale(a, 1.0 / v_len(a)); }

static float height_of(const terra_planet *p, terra_vec3 dir);

void terra_planet_frame(terra_vec3 dir, terra_vec3 *east, terra_vec3 *north, terra_vec3 *up) {
    /* a camera's frame at yaw and pitch 0 is it: forward north, right east (core.c) */
    terra_camera_basis(&(terra_camera){.up = dir}, north, east, NULL);
    if (up) *up = v_unit(dir);
}

/* ---- the built-in planet's heights ---------------------------------------------------------------
 * Three sums of 3-D value noise over the unit direction (no seam, pole or face edge can show: the
 * function knows no faces): continents, ridged ranges and detail, shaped as
 *   raw = 1800 (C - 0.1) + 5500 m R^2 + D (150 + 500 m),   m = smoothstep(0.1, 0.45, C),
 *   height = max(raw, 0)   (seas are flat at 0),
 * C of 6 octaves from 5,000 km, R of 9 from 80 km, D of 13 from 8 km (gain 0.6: rough down to metres).
 * Ranges by interval arithmetic: value noise with the quintic fade moves at most 3.75 per lattice
 * unit along an axis (1.875 x the largest lattice difference, 2), so at most 6.5 per unit of 3-D
 * distance; an octave of frequency f over directions within chord r of c lies within its value at c
 * plus or minus 6.5 f r, clipped to [-1, 1]. Each shaping step has its interval rule. */

#define NOISE_LIP 6.5
#define MAX_OCTAVES 16

typedef struct octave { double freq, amp; uint64_t seed; } octave;
typedef struct noise_sum { octave o[MAX_OCTAVES]; int n; double norm; } noise_sum;

struct terra_planet {
    terra_planet_desc d;
    double band_lat, band_lon; /* the overlay's blend band in degrees (lon: at its highest latitude) */
    double ea, eb;     /* equatorial and polar radius (equal: a sphere) */
    bool ell;          /* ea != eb */
    double curv_max;   /* the reference surface's largest radius of curvature, ea^2 / eb */
    noise_sum cont, ridge, detail;
    float lo, hi; /* every height */
    float level_error[TERRA_PLANET_MAX_LEVELS];
};

static inline uint64_t mix64(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

static inline double lattice(uint64_t seed, int64_t x, int64_t y, int64_t z) {
    const uint64_t h = mix64(seed ^ ((uint64_t)x * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)y * 0xc2b2ae3d27d4eb4full) ^
                             ((uint64_t)z * 0x165667b19e3779f9ull));
    return (double)(h >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

static inline double fade(double t) { return t * t * t * (t * (t * 6.0 - 15.0) + 10.0); }

static double noise3(uint64_t seed, double x, double y, double z) {
    const double fx = floor(x), fy = floor(y), fz = floor(z);
    const int64_t ix = (int64_t)fx, iy = (int64_t)fy, iz = (int64_t)fz;
    const double u = fade(x - fx), v = fade(y - fy), w = fade(z - fz);
    double c[2][2];
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < 2; j++) {
            const double a = lattice(seed, ix, iy + j, iz + k), b = lattice(seed, ix + 1, iy + j, iz + k);
            c[k][j] = a + (b - a) * u;
        }
    const double e0 = c[0][0] + (c[0][1] - c[0][0]) * v, e1 = c[1][0] + (c[1][1] - c[1][0]) * v;
    return e0 + (e1 - e0) * w;
}

typedef struct iv { double lo, hi; } iv;

/* ---- the reference surface ------------------------------------------------------------------------
 * The point with unit normal d on the ellipsoid x^2/a^2 + y^2/b^2 + z^2/a^2 = 1 is
 * (a^2 dx, b^2 dy, a^2 dz) / sqrt(a^2 (dx^2 + dz^2) + b^2 dy^2); a height goes along d. */
static inline terra_vec3 ref_point(const terra_planet *p, terra_vec3 d, double h) {
    if (!p->ell) return v_scale(d, p->ea + h);
    const double a2 = p->ea * p->ea, b2 = p->eb * p->eb;
    const double k = sqrt(a2 * (d.x * d.x + d.z * d.z) + b2 * d.y * d.y);
    return (terra_vec3){a2 * d.x / k + h * d.x, b2 * d.y / k + h * d.y, a2 * d.z / k + h * d.z};
}

/* The foot normal and height of a position: on an ellipsoid the geodetic latitude by fixed-point
 * iteration (each step shrinks the error by about e^2, 0.0067 on the Earth), the height by
 * rho cos(phi) + y sin(phi) - a sqrt(1 - e^2 sin^2(phi)), which has no cancellation at the poles. */
static terra_vec3 locate(const terra_planet *p, terra_vec3 pos, double *height) {
    const double r = v_len(pos);
    if (!p->ell || !(r > 0.5 * p->eb)) {
        if (height) *height = r - p->ea;
        return r > 0 ? v_scale(pos, 1 / r) : (terra_vec3){0, 1, 0};
    }
    const double a = p->ea, e2 = 1 - (p->eb * p->eb) / (a * a);
    const double rho = sqrt(pos.x * pos.x + pos.z * pos.z), y = pos.y;
    double phi = atan2(y, rho * (1 - e2)), sp = sin(phi), cp = cos(phi);
    for (int k = 0; k < 10; k++) {
        const double w = sqrt(1 - e2 * sp * sp), n = a / w, h = rho * cp + y * sp - a * w;
        const double next = atan2(y, rho * (1 - e2 * n / (n + h)));
        const bool done = fabs(next - phi) < 1e-15;
        phi = next, sp = sin(phi), cp = cos(phi);
        if (done) break;
    }
    if (height) *height = rho * cp + y * sp - a * sqrt(1 - e2 * sp * sp);
    return rho > 0 ? (terra_vec3){cp * pos.x / rho, sp, cp * pos.z / rho} : (terra_vec3){0, y < 0 ? -1 : 1, 0};
}

terra_vec3 terra_planet_point(const terra_planet *p, terra_vec3 dir, double height) { return ref_point(p, v_unit(dir), height); }
terra_vec3 terra_planet_up_at(const terra_planet *p, terra_vec3 pos, double *height) { return locate(p, pos, height); }

/* The ground point under a position. */
static terra_vec3 ground_under(const terra_planet *p, terra_vec3 pos) {
    const terra_vec3 d = locate(p, pos, NULL);
    return ref_point(p, d, height_of(p, d));
}

/* The noise's range over the ball of radius rho around (x, y, z). Inside one lattice cell three bounds
 * hold and meet: the hull of its eight values; the value at the centre plus or minus rho times the
 * cell's slope bound (1.875, the fade's steepest, times its largest difference along each axis); and
 * the second-order one, the gradient at the centre times rho plus half a bound of the Hessian times
 * rho^2 (5.78 = the fade's largest second derivative, 3.52 = 1.875^2, on the cell's differences).
 * Across cells, the value plus or minus 6.5 rho. */
static iv noise3_range(uint64_t seed, double x, double y, double z, double rho) {
    const double fx = floor(x), fy = floor(y), fz = floor(z);
    if (floor(x - rho) != fx || floor(x + rho) != fx || floor(y - rho) != fy || floor(y + rho) != fy ||
        floor(z - rho) != fz || floor(z + rho) != fz) {
        const double v = noise3(seed, x, y, z);
        return (iv){fmax(v - NOISE_LIP * rho, -1), fmin(v + NOISE_LIP * rho, 1)};
    }
    const int64_t ix = (int64_t)fx, iy = (int64_t)fy, iz = (int64_t)fz;
    const double tx = x - fx, ty = y - fy, tz = z - fz;
    const double u = fade(tx), v = fade(ty), w = fade(tz);
    double c[8], lo = 1, hi = -1;
    for (int k = 0; k < 8; k++) {
        c[k] = lattice(seed, ix + (k & 1), iy + ((k >> 1) & 1), iz + (k >> 2));
        lo = fmin(lo, c[k]), hi = fmax(hi, c[k]);
    }
    /* value and gradient of the faded trilinear blend; c[x + 2y + 4z] */
    const double wx[2] = {1 - u, u}, wy[2] = {1 - v, v}, wz[2] = {1 - w, w};
    double val = 0, ax = 0, ay = 0, az = 0, gx = 0, gy = 0, gz = 0, hxy = 0, hxz = 0, hyz = 0;
    for (int k = 0; k < 8; k++) {
        const int a = k & 1, b = (k >> 1) & 1, e = k >> 2;
        val += wx[a] * wy[b] * wz[e] * c[k];
        if (!a) ax += wy[b] * wz[e] * (c[k + 1] - c[k]), gx = fmax(gx, fabs(c[k + 1] - c[k]));
        if (!b) ay += wx[a] * wz[e] * (c[k + 2] - c[k]), gy = fmax(gy, fabs(c[k + 2] - c[k]));
        if (!e) az += wx[a] * wy[b] * (c[k + 4] - c[k]), gz = fmax(gz, fabs(c[k + 4] - c[k]));
    }
    for (int k = 0; k < 8; k++) { /* second differences across each pair of axes */
        const int a = k & 1, b = (k >> 1) & 1, e = k >> 2;
        if (!a && !b) hxy = fmax(hxy, fabs(c[k + 3] - c[k + 2] - c[k + 1] + c[k]));
        if (!a && !e) hxz = fmax(hxz, fabs(c[k + 5] - c[k + 4] - c[k + 1] + c[k]));
        if (!b && !e) hyz = fmax(hyz, fabs(c[k + 6] - c[k + 4] - c[k + 2] + c[k]));
    }
    const double dfx = 30 * tx * tx * (tx - 1) * (tx - 1), dfy = 30 * ty * ty * (ty - 1) * (ty - 1);
    const double dfz = 30 * tz * tz * (tz - 1) * (tz - 1);
    const double grad = sqrt(dfx * dfx * ax * ax + dfy * dfy * ay * ay + dfz * dfz * az * az);
    const double h2 = 5.7736 * 5.7736 * (gx * gx + gy * gy + gz * gz) + 2 * 3.5157 * 3.5157 * (hxy * hxy + hxz * hxz + hyz * hyz);
    const double first = 1.875 * sqrt(gx * gx + gy * gy + gz * gz) * rho;
    const double second = grad * rho + 0.5 * sqrt(h2) * rho * rho;
    const double spread = fmin(first, second) * (1 + 1e-9) + 1e-12;
    return (iv){fmax(val - spread, lo), fmin(val + spread, hi)};
}

/* The sum's value at d (ridged: each octave (1 - |n|)^2), normalised by its amplitudes. */
static double sum_at(const noise_sum *s, terra_vec3 d, bool ridged) {
    double acc = 0;
    for (int k = 0; k < s->n; k++) {
        const octave *o = &s->o[k];
        double n = noise3(o->seed, d.x * o->freq, d.y * o->freq, d.z * o->freq);
        if (ridged) n = (1 - fabs(n)) * (1 - fabs(n));
        acc += o->amp * n;
    }
    return acc * s->norm;
}

/* The sum's range over directions within chord r of c. */
static iv sum_range(const noise_sum *s, terra_vec3 c, double r, bool ridged) {
    iv acc = {0, 0};
    for (int k = 0; k < s->n; k++) {
        const octave *o = &s->o[k];
        const double rho = o->freq * r;
        iv n = {-1, 1};
        if (NOISE_LIP * rho < 2) n = noise3_range(o->seed, c.x * o->freq, c.y * o->freq, c.z * o->freq, rho);
        if (ridged) { /* (1 - |n|)^2 falls as |n| grows */
            const double alo = n.lo <= 0 && n.hi >= 0 ? 0 : fmin(fabs(n.lo), fabs(n.hi));
            const double ahi = fmax(fabs(n.lo), fabs(n.hi));
            n = (iv){(1 - ahi) * (1 - ahi), (1 - alo) * (1 - alo)};
        }
        acc.lo += o->amp * n.lo, acc.hi += o->amp * n.hi;
    }
    return (iv){acc.lo * s->norm, acc.hi * s->norm};
}

static inline double smooth(double e0, double e1, double x) {
    const double t = x <= e0 ? 0 : (x >= e1 ? 1 : (x - e0) / (e1 - e0));
    return t * t * (3 - 2 * t);
}

static double builtin_height(const terra_planet *p, terra_vec3 d) {
    const double c = sum_at(&p->cont, d, false), m = smooth(0.1, 0.45, c);
    double raw = 1800 * (c - 0.1);
    if (m > 0) {
        const double r = sum_at(&p->ridge, d, true);
        raw += 5500 * m * r * r;
    }
    raw += sum_at(&p->detail, d, false) * (150 + 500 * m);
    return raw > 0 ? raw : 0;
}

static iv iv_mul(iv a, iv b) {
    const double q[4] = {a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi};
    iv r = {q[0], q[0]};
    for (int k = 1; k < 4; k++) r.lo = fmin(r.lo, q[k]), r.hi = fmax(r.hi, q[k]);
    return r;
}

static iv builtin_range(const terra_planet *p, terra_vec3 c, double r) {
    const iv cont = sum_range(&p->cont, c, r, false);
    const iv m = {smooth(0.1, 0.45, cont.lo), smooth(0.1, 0.45, cont.hi)};
    iv raw = {1800 * (cont.lo - 0.1), 1800 * (cont.hi - 0.1)};
    if (m.hi > 0) { /* m and the ridges are never negative: the product's ends are the ends' */
        const iv ridge = sum_range(&p->ridge, c, r, true);
        raw.lo += 5500 * m.lo * ridge.lo * ridge.lo, raw.hi += 5500 * m.hi * ridge.hi * ridge.hi;
    }
    const iv det = iv_mul(sum_range(&p->detail, c, r, false), (iv){150 + 500 * m.lo, 150 + 500 * m.hi});
    raw.lo += det.lo, raw.hi += det.hi;
    return (iv){fmax(raw.lo, 0), fmax(raw.hi, 0)};
}

static float own_height(const terra_planet *p, terra_vec3 dir) {
    if (p->d.height_at) return p->d.height_at(p->d.user, dir);
    return (float)builtin_height(p, dir);
}

/* ---- a geographic grid laid over the ground -------------------------------------------------------
 * Inside the grid's bounds its heights (where it has them), the planet's own beyond blend metres
 * outside; between, the grid's height at the nearest point of the bounds blended into the planet's
 * own by 1 - smoothstep(distance / blend). Distances by the local lengths of a degree. */
#define M_PER_DEG_LAT 110574.0
#define M_PER_DEG_LON 111320.0

static double blend_weight(double dist, double blend) {
    if (dist >= blend) return 0;
    const double t = dist / blend;
    return 1 - t * t * (3 - 2 * t);
}

static float height_of(const terra_planet *p, terra_vec3 dir) {
    const terra_geo_grid *g = p->d.overlay;
    if (!g) return own_height(p, dir);
    double lat, lon;
    terra_planet_dir_latlon(dir, &lat, &lon);
    const double *b = terra_geo_grid_get_desc(g)->bounds;
    const double cl = fmin(fmax(lat, b[1]), b[3]), co = fmin(fmax(lon, b[0]), b[2]);
    const double dy = (lat - cl) * M_PER_DEG_LAT, dx = (lon - co) * M_PER_DEG_LON * cos(lat * (PI / 180));
    const double dist2 = dx * dx + dy * dy, blend = p->d.overlay_blend_m;
    if (dist2 >= blend * blend) return own_height(p, dir);
    const float hg = terra_geo_grid_height(g, cl, co);
    if (hg != hg) return own_height(p, dir);
    if (dist2 == 0) return hg;
    const double w = blend_weight(sqrt(dist2), blend);
    const float own = own_height(p, dir);
    return (float)(own + (hg - own) * w);
}

/* Widens a double range to floats that hold it, with a margin for the rounding of the evaluation. */
static void to_float_range(iv r, float *lo, float *hi) {
    const double m = 1e-3 + 1e-9 * fmax(fabs(r.lo), fabs(r.hi));
    *lo = nextafterf((float)(r.lo - m), -INFINITY);
    *hi = nextafterf((float)(r.hi + m), INFINITY);
}

static terra_status own_range(const terra_planet *p, terra_vec3 c, double chord, float *lo, float *hi) {
    if (p->d.height_range) {
        terra_status st = p->d.height_range(p->d.user, c, chord, lo, hi);
        if (st != TERRA_OK) return st;
        if (!(*lo <= *hi)) return terra_fail(TERRA_E_SOURCE, "planet: height_range answered %g..%g", (double)*lo, (double)*hi);
        return TERRA_OK;
    }
    if (p->d.height_at) {
        *lo = p->d.min_height, *hi = p->d.max_height;
        return TERRA_OK;
    }
    iv r = builtin_range(p, c, chord);
    r.lo = fmax(r.lo, p->lo), r.hi = fmin(r.hi, p->hi);
    to_float_range(r, lo, hi);
    return TERRA_OK;
}

/* How far, in degrees, the points of [lo, hi] lie from [a, b]: the least and the most. */
static void gap(double lo, double hi, double a, double b, double *least, double *most) {
    *least = lo > b ? lo - b : hi < a ? a - hi : 0;
    *most = fmax(fmax(a - lo, lo - b), fmax(a - hi, hi - b));
    *most = fmax(*most, 0);
}

/* With an overlay: the cap's latitude-longitude box. Its heights are own (1 - w) + grid w, the
 * grid's taken over the box clamped to the bounds (the band's at the nearest border point), w from
 * the box's least and most distance to the bounds (the distance as height_of measures it): linear
 * in w, so the range's ends are at w's ends. A grid with holes adds the planet's own range. */
static terra_status range_at(const terra_planet *p, terra_vec3 c, double chord, float *lo, float *hi) {
    const terra_geo_grid *g = p->d.overlay;
    if (!g) return own_range(p, c, chord, lo, hi);
    double lat, lon;
    terra_planet_dir_latlon(c, &lat, &lon);
    const double th = 2 * asin(fmin(chord * 0.5, 1.0)) * (180 / PI) * (1 + 1e-9) + 1e-9;
    const double s = lat - th, n = lat + th;
    double w = -180, e = 180;
    if (s > -90 && n < 90) {
        const double dl = asin(fmin(sin(th * (PI / 180)) / cos(lat * (PI / 180)), 1.0)) * (180 / PI) * (1 + 1e-9) + 1e-9;
        w = lon - dl, e = lon + dl;
    }
    const double *b = terra_geo_grid_get_desc(g)->bounds;
    if (e < b[0] - p->band_lon || w > b[2] + p->band_lon || n < b[1] - p->band_lat || s > b[3] + p->band_lat)
        return own_range(p, c, chord, lo, hi);
    const double cw = fmin(fmax(w, b[0]), b[2]), ce = fmin(fmax(e, b[0]), b[2]);
    const double cs = fmin(fmax(s, b[1]), b[3]), cn = fmin(fmax(n, b[1]), b[3]);
    float gl, gh;
    if (!terra_geo_grid_range(g, cw, cs, ce, cn, &gl, &gh)) return own_range(p, c, chord, lo, hi);
    double lat0, lat1, lon0, lon1;
    gap(s, n, b[1], b[3], &lat0, &lat1);
    gap(w, e, b[0], b[2], &lon0, &lon1);
    const double cos_lo = cos(fmin(fmax(fabs(s), fabs(n)), 90) * (PI / 180));
    const double cos_hi = s <= 0 && n >= 0 ? 1 : cos(fmin(fabs(s), fabs(n)) * (PI / 180));
    const double dmin = sqrt(pow(lat0 * M_PER_DEG_LAT, 2) + pow(lon0 * M_PER_DEG_LON * cos_lo, 2)) * (1 - 1e-9);
    const double dmax = sqrt(pow(lat1 * M_PER_DEG_LAT, 2) + pow(lon1 * M_PER_DEG_LON * cos_hi, 2)) * (1 + 1e-9);
    const double wl = blend_weight(dmax, p->d.overlay_blend_m), wh = blend_weight(dmin, p->d.overlay_blend_m);
    float ol = 0, oh = 0, lo0, hi0;
    bool holes;
    terra_geo_grid_height_bounds(g, &lo0, &hi0, &holes);
    if (wl < 1 || holes) {
        const terra_status st = own_range(p, c, chord, &ol, &oh);
        if (st != TERRA_OK) return st;
    }
    double l = INFINITY, h = -INFINITY;
    for (int k = 0; k < 2; k++) {
        const double wk = k ? wh : wl;
        l = fmin(l, ol * (1 - wk) + gl * wk), h = fmax(h, oh * (1 - wk) + gh * wk);
    }
    if (holes) l = fmin(l, ol), h = fmax(h, oh);
    const double m = 1e-3 + 1e-7 * fmax(fabs(l), fabs(h)); /* the float rounding of a blend */
    *lo = (float)(l - m), *hi = (float)(h + m);
    return TERRA_OK;
}

terra_status terra_planet_height_range_near(const terra_planet *p, terra_vec3 dir, double chord, float *lo, float *hi) {
    if (!(chord >= 0)) return terra_fail(TERRA_E_INVALID, "planet: a range's chord must not be negative (got %g)", chord);
    return range_at(p, v_unit(dir), chord, lo, hi);
}

/* ---- tiles ------------------------------------------------------------------------------------------- */

static inline int top_level(const terra_planet *p) { return p->d.levels - 1; }

int32_t terra_planet_tiles_per_side(const terra_planet *p, int level) {
    return level < 0 || level > top_level(p) ? 0 : (int32_t)1 << (top_level(p) - level);
}

bool terra_planet_key_valid(const terra_planet *p, terra_tile_key key) {
    const int f = terra_tile_key_face(key), l = terra_tile_key_level(key);
    if (f > 5 || l > top_level(p)) return false;
    const int32_t n = terra_planet_tiles_per_side(p, l), x = terra_tile_key_x(key), y = terra_tile_key_y(key);
    return x >= 0 && y >= 0 && x < n && y < n;
}

/* Lattice point (gi, gj) of a face at a level with n cells across: s = (2 gi - n) / n, exact. */
static inline terra_vec3 lattice_dir(int face, int64_t gi, int64_t gj, int64_t n) {
    return cube_dir(face, (double)(2 * gi - n) / (double)n, (double)(2 * gj - n) / (double)n);
}

static inline int64_t face_cells(const terra_planet *p, int level) {
    return (int64_t)terra_planet_tiles_per_side(p, level) * p->d.cells;
}

terra_vec3 terra_planet_tile_dir(const terra_planet *p, terra_tile_key key, int i, int j) {
    const int level = terra_tile_key_level(key), N = p->d.cells;
    return lattice_dir(terra_tile_key_face(key), (int64_t)terra_tile_key_x(key) * N + i,
                       (int64_t)terra_tile_key_y(key) * N + j, face_cells(p, level));
}

static terra_vec3 tile_centre_dir(const terra_planet *p, terra_tile_key key) {
    const int64_t n = terra_planet_tiles_per_side(p, terra_tile_key_level(key));
    return lattice_dir(terra_tile_key_face(key), 2 * (int64_t)terra_tile_key_x(key) + 1,
                       2 * (int64_t)terra_tile_key_y(key) + 1, 2 * n);
}

/* The largest chord (unit sphere) from the tile's centre direction to a corner: every point of a
 * spherical quadrilateral with great-circle edges, smaller than a hemisphere, is at most that far. */
static double tile_chord(const terra_planet *p, terra_tile_key key, terra_vec3 c) {
    const int N = p->d.cells;
    double best = 0;
    for (int k = 0; k < 4; k++) best = fmax(best, v_len(v_sub(terra_planet_tile_dir(p, key, (k & 1) * N, (k >> 1) * N), c)));
    return best * (1 + 1e-12) + 1e-15;
}

terra_tile_key terra_planet_key_at(const terra_planet *p, terra_vec3 dir, int level) {
    double s, t;
    const int face = terra_planet_dir_face(dir, &s, &t);
    const int32_t n = terra_planet_tiles_per_side(p, level);
    int32_t x = (int32_t)floor((s + 1) * 0.5 * n), y = (int32_t)floor((t + 1) * 0.5 * n);
    x = x < 0 ? 0 : (x >= n ? n - 1 : x), y = y < 0 ? 0 : (y >= n ? n - 1 : y);
    return terra_tile_key_make(face, level, x, y);
}

terra_status terra_planet_height_range(const terra_planet *p, terra_tile_key key, float *lo, float *hi) {
    if (!terra_planet_key_valid(p, key)) return terra_fail(TERRA_E_INVALID, "planet: no tile (face %d, level %d, %d, %d)",
                                                           terra_tile_key_face(key), terra_tile_key_level(key),
                                                           terra_tile_key_x(key), terra_tile_key_y(key));
    const terra_vec3 c = tile_centre_dir(p, key);
    return range_at(p, c, tile_chord(p, key, c), lo, hi);
}

terra_vec3 terra_planet_tile_origin(const terra_planet *p, terra_tile_key key) {
    const terra_vec3 c = ref_point(p, tile_centre_dir(p, key), 0);
    return (terra_vec3){floor(c.x + 0.5), floor(c.y + 0.5), floor(c.z + 0.5)};
}

/* The sphere around the tile's ground: centre on its centre direction at rc, every point within
 * `chord` of it at a radius in [rlo, rhi]; the distance to such a point, (rho - rc)^2 + rho rc
 * chord^2 squared (exact, no cancellation), is largest at the chord's end and a radius's end. */
static void bounds_of(terra_vec3 c, double chord, double rlo, double rhi, terra_vec3 *centre, double *radius) {
    const double cosang = 1 - 0.5 * chord * chord;
    const double rc = 0.5 * (rlo * fmax(cosang, 0) + rhi);
    const double a = (rlo - rc) * (rlo - rc) + rlo * rc * chord * chord;
    const double b = (rhi - rc) * (rhi - rc) + rhi * rc * chord * chord;
    *centre = v_scale(c, rc);
    *radius = sqrt(fmax(a, b)) * (1 + 1e-9) + 1e-3;
}

void terra_planet_tile_bounds(const terra_planet *p, terra_tile_key key, float lo, float hi, terra_vec3 *centre,
                              double *radius, double *angle_rad) {
    const terra_vec3 c = tile_centre_dir(p, key);
    const double chord = tile_chord(p, key, c), arc = 2 * asin(fmin(chord * 0.5, 1.0));
    if (angle_rad) *angle_rad = arc;
    if (!p->ell) {
        bounds_of(c, chord, p->ea + lo, p->ea + hi, centre, radius);
        return;
    }
    /* the ellipsoid's point moves at most curv_max per radian of its normal, a height's end at most
     * |h| per unit of chord: every ground point lies within this of the point at the mean height */
    const double hm = 0.5 * ((double)lo + hi);
    *centre = ref_point(p, c, hm);
    *radius = (p->curv_max * arc + fmax(fabs((double)lo), fabs((double)hi)) * chord + 0.5 * ((double)hi - lo)) * (1 + 1e-9) + 1e-3;
}

/* Surfaces by height and slope (the slope: tangent of the normal's angle from up). */
static terra_surface builtin_surface(float h, double slope) {
    if (h <= 0) return TERRA_SURFACE_WATER;
    if (h < 30 && slope < 0.3) return TERRA_SURFACE_SAND;
    if (h > 3600 && slope < 0.8) return TERRA_SURFACE_SNOW;
    if (slope > 0.5) return TERRA_SURFACE_ROCK;
    return TERRA_SURFACE_GRASS;
}

size_t terra_planet_scratch_bytes(int cells) {
    const size_t w = (size_t)cells + 5;
    return w * w * (sizeof(terra_vec3) + sizeof(float));
}

/* The unit normal from central differences of ground points two steps apart across (i, j), outward. */
static inline terra_vec3 normal_at(const terra_vec3 *pos, int w, int i, int j, int step, terra_vec3 up) {
    const terra_vec3 di = v_sub(pos[j * w + i + step], pos[j * w + i - step]);
    const terra_vec3 dj = v_sub(pos[(j + step) * w + i], pos[(j - step) * w + i]);
    terra_vec3 n = v_cross(di, dj);
    const double len = v_len(n);
    if (!(len > 0)) return up;
    n = v_scale(n, 1.0 / len);
    return v_dot(n, up) < 0 ? v_scale(n, -1) : n;
}

static inline bool less_than(terra_vec3 a, terra_vec3 b) {
    return a.x != b.x ? a.x < b.x : a.y != b.y ? a.y < b.y : a.z < b.z;
}

static inline void encode_normal(terra_vec3 n, int8_t out[2]) {
    terra_oct_encode((const float[3]){(float)n.x, (float)n.z, (float)n.y}, out); /* +y is the pole */
}

terra_status terra_planet_build(const terra_planet *p, terra_tile_key key, terra_grid_vertex *out, void *scratch,
                                terra_grid_info *info) {
    if (!terra_planet_key_valid(p, key))
        return terra_fail(TERRA_E_INVALID, "planet: no tile (face %d, level %d, %d, %d) on this planet",
                          terra_tile_key_face(key), terra_tile_key_level(key), terra_tile_key_x(key), terra_tile_key_y(key));
    const int N = p->d.cells, w = N + 5, level = terra_tile_key_level(key), face = terra_tile_key_face(key);
    const int64_t n = face_cells(p, level), gx = (int64_t)terra_tile_key_x(key) * N, gy = (int64_t)terra_tile_key_y(key) * N;
    terra_vec3 *pos = scratch;
    float *hts = (float *)(pos + (size_t)w * w);
    const double R = p->ea;
    for (int j = 0; j < w; j++)
        for (int i = 0; i < w; i++) {
            const terra_vec3 d = lattice_dir(face, gx + i - 2, gy + j - 2, n);
            const float h = height_of(p, d);
            if (!isfinite(h))
                return terra_fail(TERRA_E_SOURCE, "planet: the height at direction (%.9f, %.9f, %.9f) is not finite", d.x,
                                  d.y, d.z);
            hts[j * w + i] = h;
            pos[j * w + i] = ref_point(p, d, h);
        }
    const terra_vec3 o = terra_planet_tile_origin(p, key);
    float lo = INFINITY, hi = -INFINITY;
    for (int j = 0; j <= N; j++)
        for (int i = 0; i <= N; i++) {
            const int ci = i + 2, cj = j + 2;
            int ti = (i & ~1) + 2, tj = (j & ~1) + 2;
            /* on a face's edge the face beside runs the other way along it, so an odd sample there takes
             * the lesser of its two even neighbours (by position, bit-identical on both faces): both
             * faces morph it to the same point and the edge stays shared while it morphs */
            if ((j & 1) && (gx + i == 0 || gx + i == n) && less_than(pos[(cj + 1) * w + ci], pos[(cj - 1) * w + ci])) tj = cj + 1;
            if ((i & 1) && (gy + j == 0 || gy + j == n) && less_than(pos[cj * w + ci + 1], pos[cj * w + ci - 1])) ti = ci + 1;
            const terra_vec3 P = pos[cj * w + ci], T = pos[tj * w + ti];
            const float h = hts[cj * w + ci];
            const terra_vec3 up = p->ell ? lattice_dir(face, gx + i, gy + j, n) : v_unit(P);
            const terra_vec3 nv = normal_at(pos, w, ci, cj, 1, up), nm = normal_at(pos, w, ti, tj, 2, v_unit(T));
            const double cosn = v_dot(nv, up);
            const double slope = sqrt(fmax(1 - cosn * cosn, 0)) / fmax(cosn, 1e-3);
            terra_grid_vertex *v = &out[j * (N + 1) + i];
            *v = (terra_grid_vertex){(float)(P.x - o.x), (float)(P.y - o.y), (float)(P.z - o.z),
                                     (float)(T.x - o.x), (float)(T.y - o.y), (float)(T.z - o.z),
                                     {0, 0}, 0, (uint8_t)level, {0, 0}, 0};
            encode_normal(nv, v->normal);
            encode_normal(nm, v->morph_normal);
            v->surface = p->d.surface_at ? p->d.surface_at(p->d.user, up, h) : builtin_surface(h, slope);
            lo = fminf(lo, h), hi = fmaxf(hi, h);
        }
    if (info) {
        const terra_vec3 c0 = terra_planet_tile_dir(p, key, 0, 0), c1 = terra_planet_tile_dir(p, key, N, 0);
        *info = (terra_grid_info){lo, hi, o.x, o.z, v_len(v_sub(c1, c0)) * R, v_len(v_sub(c1, c0)) * R / N};
    }
    return TERRA_OK;
}

/* ---- the ground ---------------------------------------------------------------------------------------- */

float terra_planet_height(const terra_planet *p, terra_vec3 dir) { return height_of(p, v_unit(dir)); }

terra_vec3 terra_planet_ground_point(const terra_planet *p, terra_vec3 dir) {
    const terra_vec3 d = v_unit(dir);
    return ref_point(p, d, height_of(p, d));
}

double terra_planet_altitude(const terra_planet *p, terra_vec3 pos, terra_vec3 *up, terra_vec3 *normal) {
    double hr;
    const terra_vec3 d = locate(p, pos, &hr);
    if (up) *up = d;
    if (normal) { /* central differences half a metre apart in the local frame */
        terra_vec3 e, n;
        terra_planet_frame(d, &e, &n, NULL);
        const double k = 0.5 / p->ea;
        const terra_vec3 pe = terra_planet_ground_point(p, v_sub(d, v_scale(e, -k)));
        const terra_vec3 pw = terra_planet_ground_point(p, v_sub(d, v_scale(e, k)));
        const terra_vec3 pn = terra_planet_ground_point(p, v_sub(d, v_scale(n, -k)));
        const terra_vec3 ps = terra_planet_ground_point(p, v_sub(d, v_scale(n, k)));
        terra_vec3 nv = v_cross(v_sub(pe, pw), v_sub(pn, ps));
        *normal = v_dot(nv, d) < 0 ? v_unit(v_scale(nv, -1)) : v_unit(nv);
    }
    return hr - height_of(p, d);
}

/* Depth-first over halves of the ray, nearer half first: a piece of length L around M has every
 * direction within L / |M| of M's (|a/|a| - b/|b|| <= 2 |a - b| / |b|), so it is dropped when its
 * lowest point is above the highest ground there. On an ellipsoid the directions are foot normals
 * (locate), and a piece is above the ground when its lowest point in the scaled space where the
 * ellipsoid is the unit ball lies beyond 1 + hi / b (ground up to hi lies within it), or when the
 * height's tangent bound at M (height is the ellipsoid's signed distance, convex) exceeds hi. */
bool terra_planet_raycast(const terra_planet *p, terra_vec3 e, terra_vec3 dir, double max_m, double *t_m, terra_vec3 *hit) {
    const double dl = v_len(dir);
    if (!(dl > 0) || !isfinite(dl)) return false;
    const terra_vec3 v = v_scale(dir, 1 / dl);
    const double top = p->ea + (p->ell ? fmax(p->hi, 0) : p->hi);
    const terra_vec3 es = {e.x / p->ea, e.y / p->eb, e.z / p->ea}, vs = {v.x / p->ea, v.y / p->eb, v.z / p->ea};
    const double bs = -v_dot(es, vs) / v_dot(vs, vs);
    const double b = v_dot(e, v), c = v_dot(e, e) - top * top, disc = b * b - c;
    if (disc <= 0) return false;
    double t0 = fmax(-b - sqrt(disc), 0), t1 = -b + sqrt(disc);
    if (max_m > 0) t1 = fmin(t1, max_m);
    if (!(t1 > t0)) return false;
    double stack[2 * 128];
    int n = 0;
    stack[n++] = t0, stack[n++] = t1;
    while (n) {
        const double b1 = stack[--n], a0 = stack[--n];
        const double len = b1 - a0, tm = 0.5 * (a0 + b1);
        const terra_vec3 m = {e.x + v.x * tm, e.y + v.y * tm, e.z + v.z * tm};
        float lo, hi;
        terra_status st;
        double hm = 0;
        terra_vec3 dm = {0, 0, 0};
        if (p->ell) { /* foot normals turn at most 1 / (b^2 / a + h) per metre at height h, and h drops at most 1 per metre */
            dm = locate(p, m, &hm);
            const double denom = p->eb * p->eb / p->ea + hm - 0.5 * len;
            st = range_at(p, dm, denom > 0 ? fmin(0.5 * len / denom, 2.0) : 2.0, &lo, &hi);
        } else {
            st = range_at(p, v_unit(m), len / v_len(m), &lo, &hi);
        }
        if (st != TERRA_OK) return false;
        if (p->ell) {
            const double tc = fmin(fmax(bs, a0), b1);
            const terra_vec3 near = {es.x + vs.x * tc, es.y + vs.y * tc, es.z + vs.z * tc};
            if (v_len(near) > 1 + fmax(hi, 0) / p->eb) continue;
            /* the height over the ellipsoid is its signed distance, a convex function: above its tangent at m */
            if (hm - fabs(v_dot(dm, v)) * 0.5 * len > hi) continue;
        } else {
            const double tc = fmin(fmax(-b, a0), b1);
            const terra_vec3 near = {e.x + v.x * tc, e.y + v.y * tc, e.z + v.z * tc};
            if (v_len(near) > p->ea + hi) continue;
        }
        if (!t_m && !hit && terra_planet_altitude(p, m, NULL, NULL) < 0) return true; /* under it: met */
        if (len < 0.01 + 1e-7 * a0 || n + 4 > (int)(sizeof stack / sizeof stack[0])) {
            if (t_m) *t_m = a0;
            if (hit) *hit = ground_under(p, m);
            return true;
        }
        stack[n++] = tm, stack[n++] = b1;
        stack[n++] = a0, stack[n++] = tm;
    }
    return false;
}

/* ---- level errors ----------------------------------------------------------------------------------------
 * At each level, sampled cells of every face (a fixed hash sequence): a point inside one of a cell's two
 * triangles (split along v00-v11, as terra_grid_indices does), the ground along its direction, and the
 * radial distance between them. */
static void measure_level_errors(terra_planet *p) {
    const int samples = 192, extra = p->d.overlay ? 4096 : 0; /* and cells over the overlay */
    for (int l = 0; l <= top_level(p); l++) {
        const int64_t n = face_cells(p, l);
        double worst = 0;
        for (int k = 0; k < samples + extra; k++) {
            const uint64_t h = mix64(0x5eedull + (uint64_t)l * 1000003u + (uint64_t)k);
            int face = (int)(h % 6);
            int64_t gi = (int64_t)((h >> 8) % (uint64_t)n), gj = (int64_t)((h >> 32) % (uint64_t)n);
            if (k >= samples) {
                const double *bb = terra_geo_grid_get_desc(p->d.overlay)->bounds;
                const double la = bb[1] + (bb[3] - bb[1]) * (double)((h >> 8) & 0xffffff) / 16777216.0;
                const double lo = bb[0] + (bb[2] - bb[0]) * (double)((h >> 32) & 0xffffff) / 16777216.0;
                double fs, ft;
                face = terra_planet_dir_face(terra_planet_latlon_dir(la, lo), &fs, &ft);
                gi = (int64_t)fmin(fmax(floor((fs + 1) * 0.5 * (double)n), 0), (double)(n - 1));
                gj = (int64_t)fmin(fmax(floor((ft + 1) * 0.5 * (double)n), 0), (double)(n - 1));
            }
            const double a = (double)((h >> 20) & 1023) / 1024, b = (double)((h >> 44) & 1023) / 1024;
            terra_vec3 q[4];
            for (int c = 0; c < 4; c++) q[c] = terra_planet_ground_point(p, lattice_dir(face, gi + (c & 1), gj + (c >> 1), n));
            /* (a, b) in triangle v00 v10 v11 when a >= b, else in v00 v11 v01 */
            const terra_vec3 e0 = a >= b ? v_sub(q[1], q[0]) : v_sub(q[2], q[0]);
            const terra_vec3 e1 = a >= b ? v_sub(q[3], q[1]) : v_sub(q[3], q[2]);
            const double u = a >= b ? a : b, w = a >= b ? b : a;
            const terra_vec3 pt = {q[0].x + e0.x * u + e1.x * w, q[0].y + e0.y * u + e1.y * w, q[0].z + e0.z * u + e1.z * w};
            worst = fmax(worst, fabs(terra_planet_altitude(p, pt, NULL, NULL)));
        }
        p->level_error[l] = (float)worst;
    }
    for (int l = 1; l <= top_level(p); l++) /* errors never shrink toward coarser levels */
        p->level_error[l] = fmaxf(p->level_error[l], p->level_error[l - 1]);
}

float terra_planet_level_error(const terra_planet *p, int level) {
    return level >= 0 && level <= top_level(p) ? p->level_error[level] : 0;
}

/* ---- creation ---------------------------------------------------------------------------------------------- */

static void make_sum(noise_sum *s, uint64_t seed, int octaves, double radius, double wavelength, double gain) {
    s->n = octaves;
    double amp = 1, total = 0;
    for (int k = 0; k < octaves; k++) {
        s->o[k] = (octave){radius / wavelength, amp, mix64(seed + 0x9e37ull * (uint64_t)(k + 1))};
        total += amp;
        amp *= gain, wavelength *= 0.5;
    }
    s->norm = 1 / total;
}

terra_status terra_planet_create(const terra_planet_desc *desc, terra_planet **out) {
    *out = NULL;
    terra_planet_desc d = desc ? *desc : (terra_planet_desc){0};
    if (d.wgs84) {
        if (d.radius_m != 0 || d.polar_radius_m != 0)
            return terra_fail(TERRA_E_INVALID, "planet: wgs84 sets the radii; radius_m and polar_radius_m must be 0");
        d.radius_m = TERRA_PLANET_WGS84_A, d.polar_radius_m = TERRA_PLANET_WGS84_B;
    }
    if (d.radius_m == 0) d.radius_m = TERRA_PLANET_EARTH_RADIUS;
    if (d.polar_radius_m == 0) d.polar_radius_m = d.radius_m;
    if (d.seed == 0) d.seed = 1;
    if (d.cells == 0) d.cells = 16;
    if (d.finest_spacing_m == 0) d.finest_spacing_m = 2.0;
    if (!(d.radius_m >= 1000 && d.radius_m <= 1e9))
        return terra_fail(TERRA_E_INVALID, "planet: radius_m must be from 1 km to 10^6 km (got %g m)", d.radius_m);
    if (!(d.polar_radius_m >= 0.5 * d.radius_m && d.polar_radius_m <= d.radius_m))
        return terra_fail(TERRA_E_INVALID, "planet: polar_radius_m must be from radius_m / 2 to radius_m (got %g m, radius_m %g m)",
                          d.polar_radius_m, d.radius_m);
    if (d.cells < TERRA_GRID_MIN_CELLS || d.cells > TERRA_GRID_MAX_CELLS || (d.cells & (d.cells - 1)))
        return terra_fail(TERRA_E_INVALID, "planet: cells must be a power of two from 16 to 256 (got %d)", d.cells);
    if (!(d.finest_spacing_m > 0) || !isfinite(d.finest_spacing_m))
        return terra_fail(TERRA_E_INVALID, "planet: finest_spacing_m must be a positive number of metres (got %g)",
                          d.finest_spacing_m);
    if (d.levels == 0) {
        const double face_side = d.radius_m * PI / 2; /* along a face's middle */
        d.levels = 1;
        while (d.levels < TERRA_PLANET_MAX_LEVELS && face_side / ldexp(d.cells, d.levels - 1) > d.finest_spacing_m) d.levels++;
    }
    if (d.levels < 1 || d.levels > TERRA_PLANET_MAX_LEVELS)
        return terra_fail(TERRA_E_INVALID, "planet: levels must be from 1 to %d (got %d)", TERRA_PLANET_MAX_LEVELS, d.levels);
    if (d.height_at && !d.height_range && d.min_height == 0 && d.max_height == 0)
        return terra_fail(TERRA_E_INVALID, "planet: a height_at with no height_range needs min_height and max_height "
                                           "(a bound every height keeps; selection and horizon culling rely on it)");
    if (!d.height_at && (d.height_range || d.surface_at))
        return terra_fail(TERRA_E_INVALID, "planet: height_range or surface_at given without height_at");
    if (d.overlay_blend_m == 0) d.overlay_blend_m = 4000;
    if (!(d.overlay_blend_m > 0) || !isfinite(d.overlay_blend_m))
        return terra_fail(TERRA_E_INVALID, "planet: overlay_blend_m must be a positive number of metres (got %g)", d.overlay_blend_m);
    if (d.height_at && !(d.min_height <= d.max_height))
        return terra_fail(TERRA_E_INVALID, "planet: min_height %g is above max_height %g", (double)d.min_height,
                          (double)d.max_height);
    terra_planet *p = terra_calloc(1, sizeof *p);
    if (!p) return terra_fail(TERRA_E_NOMEM, "planet: out of memory");
    p->d = d;
    p->ea = d.radius_m, p->eb = d.polar_radius_m, p->ell = p->eb != p->ea;
    p->curv_max = p->ea * p->ea / p->eb;
    const double R = d.radius_m;
    make_sum(&p->cont, d.seed * 3 + 1, 6, R, 5.0e6 * R / TERRA_PLANET_EARTH_RADIUS, 0.5);
    make_sum(&p->ridge, d.seed * 3 + 2, 9, R, 8.0e4, 0.5);
    make_sum(&p->detail, d.seed * 3 + 3, 13, R, 8.0e3, 0.6);
    if (d.height_at) {
        p->lo = d.min_height, p->hi = d.max_height;
        if (d.height_range) { /* the user's range over the whole sphere */
            float lo, hi;
            terra_status st = d.height_range(d.user, (terra_vec3){0, 1, 0}, 2.0, &lo, &hi);
            if (st == TERRA_OK && !(isfinite(lo) && isfinite(hi) && lo <= hi))
                st = terra_fail(TERRA_E_SOURCE, "planet: height_range over the whole sphere answered %g..%g", (double)lo, (double)hi);
            if (st != TERRA_OK) {
                terra_free(p);
                return st;
            }
            p->lo = lo, p->hi = hi;
        }
    } else {
        const iv all = builtin_range(p, (terra_vec3){0, 1, 0}, 2.0);
        to_float_range(all, &p->lo, &p->hi);
    }
    if (d.overlay) {
        float glo, ghi;
        terra_geo_grid_height_bounds(d.overlay, &glo, &ghi, NULL);
        p->lo = fminf(p->lo, glo), p->hi = fmaxf(p->hi, ghi);
        const double *b = terra_geo_grid_get_desc(d.overlay)->bounds;
        p->band_lat = d.overlay_blend_m / M_PER_DEG_LAT * 1.01;
        const double top = fmin(fmax(fabs(b[1]), fabs(b[3])) + p->band_lat, 89.9);
        p->band_lon = d.overlay_blend_m / (M_PER_DEG_LON * cos(top * (PI / 180))) * 1.01;
    }
    measure_level_errors(p);
    *out = p;
    return TERRA_OK;
}

void terra_planet_destroy(terra_planet *p) { terra_free(p); }
const terra_planet_desc *terra_planet_get_desc(const terra_planet *p) { return &p->d; }
void terra_planet_height_bounds(const terra_planet *p, float *lo, float *hi) {
    *lo = p->lo;
    *hi = p->hi;
}

/* ---- horizon ------------------------------------------------------------------------------------------------ */

double terra_cap_distance(terra_vec3 eye, terra_vec3 dir, double angle, double r_lo, double r_hi) {
    const double re = v_len(eye);
    const terra_vec3 eu = re > 0 ? v_scale(eye, 1 / re) : (terra_vec3){0, 1, 0};
    return terra_cap_distance_(re, eu, v_unit(dir), cos(fmin(angle, PI)), sin(fmin(angle, PI)), r_lo, r_hi);
}

void terra_planet_tile_cap(const terra_planet *p, terra_tile_key key, float lo, float hi, terra_vec3 *dir, double *angle_rad,
                           double *r_lo, double *r_hi) {
    const terra_vec3 c = tile_centre_dir(p, key);
    const double arc = 2 * asin(fmin(tile_chord(p, key, c) * 0.5, 1.0));
    if (!p->ell) {
        *dir = c, *angle_rad = arc;
        *r_lo = (p->ea + lo) * (1 - 1e-12), *r_hi = (p->ea + hi) * (1 + 1e-12);
        return;
    }
    /* a normal turned by psi moves the ellipsoid's point at most a^2 / b psi, at a distance of at
     * least b from the centre; a height along the normal leans its point at most geo_lean (the most
     * the geodetic and geocentric latitudes differ) off the direction of the ellipsoid's point */
    const double a = p->ea, b = p->eb, geo_lean = atan((a * a - b * b) / (2 * a * b)) * (1 + 1e-9);
    *dir = v_unit(ref_point(p, c, 0));
    *angle_rad = 2 * asin(fmin(a * a / b * arc / (2 * b) * (1 + 1e-9), 1.0)) + 2 * geo_lean;
    *r_lo = (b + (lo < 0 ? lo : lo * cos(geo_lean))) * (1 - 1e-12), *r_hi = (a + hi) * (1 + 1e-12);
}

bool terra_horizon_hides(terra_vec3 eye, double rh, terra_vec3 dir, double angle, double top) {
    const double de = v_len(eye);
    if (!(de > rh)) return false; /* an eye inside the ball sees no horizon of it */
    const double reach = acos(rh / de) + angle + acos(fmin(rh / fmax(top, rh), 1.0)) + 1e-9;
    if (reach >= 3.14159265358979) return false;
    /* the angle between the eye's direction and the cap's, from its sine and cosine (exact when small) */
    const terra_vec3 e = v_scale(eye, 1 / de), d = v_unit(dir);
    const double gamma = atan2(v_len(v_cross(e, d)), v_dot(e, d));
    return gamma > reach;
}
