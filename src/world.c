/* The built-in default world: value noise composed into plains, hills, ridged mountain ranges
 * and lake bowls, with surfaces by height and slope.
 *
 * Value noise interpolates lattice values with weights that are a convex combination (quintic
 * fade, weights in [0, 1]), so over any rectangle an octave lies between the smallest and largest
 * lattice value of the cells the rectangle touches. Every later step (scaling, |n|, squaring,
 * smoothstep, products, the lake blend) is monotonic or has a simple interval rule, which gives a
 * conservative and tight height range without sampling. */
#include "terra/source.h"

#include <math.h>
#include <string.h>

#define HILL_OCTAVES 4
#define RIDGE_OCTAVES 5
#define DETAIL_OCTAVES 5
#define LAKE_CELL 12000.0    /* one lake per cell of this side */
#define LAKE_FALLOFF 1.6     /* a bowl reaches this many radii */
#define LAKE_FLOOR (TERRA_WORLD_LAKE_LEVEL - 30.0f)
#define SNOW_LINE 1900.0f

typedef struct octave {
    double freq;         /* cycles per metre */
    double c, s;         /* rotation of the lattice */
    float amp;
    uint64_t seed;
} octave;

typedef struct world {
    double scale;        /* metres of the world per metre asked */
    octave base, mask, plains;
    octave hills[HILL_OCTAVES];
    octave ridges[RIDGE_OCTAVES];
    octave detail[DETAIL_OCTAVES];
    uint64_t lake_seed;
} world;

/* ---- value noise --------------------------------------------------------------------------- */

static inline uint64_t mix64(uint64_t h) {
    h ^= h >> 32;
    h *= 0xD6E8FEB86659FD93ull;
    h ^= h >> 32;
    h *= 0xD6E8FEB86659FD93ull;
    h ^= h >> 32;
    return h;
}

/* The lattice value at (ix, iz), in [-1, 1): a 32-bit hash of the cell (the lattice repeats
 * every 2^32 cells, over 47,000 km for the finest octave). */
static inline float lattice(uint64_t seed, int64_t ix, int64_t iz) {
    uint32_t h = ((uint32_t)ix * 0x8da6b343u) ^ ((uint32_t)iz * 0xd8163841u) ^ (uint32_t)seed;
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    h *= 0x846ca68bu;
    h ^= h >> 16;
    return (float)(int32_t)h * (1.0f / 2147483648.0f);
}

static inline float fade(float t) { return t * t * t * (t * (t * 6.0f - 15.0f) + 10.0f); }
static inline float dfade(float t) { return 30.0f * t * t * (t * (t - 2.0f) + 1.0f); }

/* Octave-local coordinates of a world point. */
static inline void octave_coords(const octave *o, double x, double z, double *u, double *v) {
    *u = (o->c * x - o->s * z) * o->freq;
    *v = (o->s * x + o->c * z) * o->freq;
}

/* Noise in [-1, 1] at octave coordinates (u, v); with du non-NULL also its derivatives there. */
/* floor for |v| < 2^62, inlined (libm's floor is a call without SSE4.1) */
static inline double floor_fast(double v) {
    double t = (double)(int64_t)v;
    return t > v ? t - 1.0 : t;
}

static inline float noise_uv(const octave *o, double u, double v, float *du, float *dv) {
    double fu = floor_fast(u), fv = floor_fast(v);
    int64_t iu = (int64_t)fu, iv = (int64_t)fv;
    float tu = (float)(u - fu), tv = (float)(v - fv);
    float a = lattice(o->seed, iu, iv), b = lattice(o->seed, iu + 1, iv);
    float c = lattice(o->seed, iu, iv + 1), d = lattice(o->seed, iu + 1, iv + 1);
    float su = fade(tu), sv = fade(tv);
    float k1 = b - a, k2 = c - a, k3 = a - b - c + d;
    if (du) {
        *du = dfade(tu) * (k1 + k3 * sv);
        *dv = dfade(tv) * (k2 + k3 * su);
    }
    return a + k1 * su + k2 * sv + k3 * su * sv;
}

/* Noise at a world point; with gx non-NULL also d/dx, d/dz per metre. */
static inline float noise(const octave *o, double x, double z, float *gx, float *gz) {
    double u, v;
    octave_coords(o, x, z, &u, &v);
    if (!gx) return noise_uv(o, u, v, NULL, NULL);
    float du, dv;
    float n = noise_uv(o, u, v, &du, &dv);
    du *= (float)o->freq, dv *= (float)o->freq;
    /* back from octave axes to world axes (transpose of the rotation) */
    *gx = (float)(o->c * du + o->s * dv);
    *gz = (float)(-o->s * du + o->c * dv);
    return n;
}

/* Range of an octave over a world rectangle, the tighter of two bounds:
 *  - the hull of the lattice values of the cells it touches (interpolation weights are convex);
 *  - for a rectangle within a few cells, the value at its centre plus a Lipschitz bound: in a cell
 *    |dn/du| <= max fade' * max(|b - a|, |d - c|), and likewise along v. */
static void noise_range(const octave *o, double x0, double z0, double x1, double z1, float *lo, float *hi) {
    double us[4], vs[4];
    octave_coords(o, x0, z0, &us[0], &vs[0]);
    octave_coords(o, x1, z0, &us[1], &vs[1]);
    octave_coords(o, x0, z1, &us[2], &vs[2]);
    octave_coords(o, x1, z1, &us[3], &vs[3]);
    double umin = us[0], umax = us[0], vmin = vs[0], vmax = vs[0];
    for (int k = 1; k < 4; k++) {
        umin = fmin(umin, us[k]), umax = fmax(umax, us[k]);
        vmin = fmin(vmin, vs[k]), vmax = fmax(vmax, vs[k]);
    }
    double iu0 = floor(umin), iu1 = floor(umax) + 1, iv0 = floor(vmin), iv1 = floor(vmax) + 1;
    if ((iu1 - iu0 + 1) * (iv1 - iv0 + 1) > 100) {
        *lo = -1.0f;
        *hi = 1.0f;
        return;
    }
    enum { MAXP = 100 };
    float val[MAXP];
    int nu = (int)(iu1 - iu0) + 1, nv = (int)(iv1 - iv0) + 1;
    float a = 1.0f, b = -1.0f;
    for (int jv = 0; jv < nv; jv++)
        for (int ju = 0; ju < nu; ju++) {
            float l = lattice(o->seed, (int64_t)iu0 + ju, (int64_t)iv0 + jv);
            val[jv * nu + ju] = l;
            a = fminf(a, l);
            b = fmaxf(b, l);
        }
    if (nu <= 4 && nv <= 4) {
        /* per-axis bounds on the first and second derivatives over the touched cells */
        float lu = 0, lv = 0, luv = 0;
        for (int jv = 0; jv + 1 < nv; jv++)
            for (int ju = 0; ju + 1 < nu; ju++) {
                float va = val[jv * nu + ju], vb = val[jv * nu + ju + 1];
                float vc = val[(jv + 1) * nu + ju], vd = val[(jv + 1) * nu + ju + 1];
                lu = fmaxf(lu, fmaxf(fabsf(vb - va), fabsf(vd - vc)));
                lv = fmaxf(lv, fmaxf(fabsf(vc - va), fabsf(vd - vb)));
                luv = fmaxf(luv, fabsf(va - vb - vc + vd));
            }
        double cu = 0.5 * (umin + umax), cv = 0.5 * (vmin + vmax);
        float hu = (float)(0.5 * (umax - umin)), hv = (float)(0.5 * (vmax - vmin));
        float gu, gv;
        float centre = noise_uv(o, cu, cv, &gu, &gv);
        float reach;
        if (hu < 0.25f && hv < 0.25f) {
            /* second order: |n(p) - n(c) - g.d| <= (Huu du^2 + 2 Huv du dv + Hvv dv^2) / 2,
             * with |fade''| <= 5.7736 and |fade'| <= 1.875 */
            float huu = 5.7736f * lu, hvv = 5.7736f * lv, huv = 1.875f * 1.875f * luv;
            reach = fabsf(gu) * hu + fabsf(gv) * hv + 0.5f * (huu * hu * hu + 2.0f * huv * hu * hv + hvv * hv * hv);
        } else {
            reach = 1.875f * (lu * hu + lv * hv);
        }
        reach = reach * 1.0001f + 1e-6f; /* float rounding */
        a = fmaxf(a, centre - reach);
        b = fminf(b, centre + reach);
    }
    *lo = a;
    *hi = b;
}

/* ---- shaping and intervals ---------------------------------------------------------------------- */

typedef struct interval { float lo, hi; } interval;

static inline float smooth01(float e0, float e1, float x) {
    float t = (x - e0) / (e1 - e0);
    t = t < 0 ? 0 : (t > 1 ? 1 : t);
    return t * t * (3.0f - 2.0f * t);
}
static inline float dsmooth01(float e0, float e1, float x) {
    float t = (x - e0) / (e1 - e0);
    if (t <= 0 || t >= 1) return 0;
    return 6.0f * t * (1.0f - t) / (e1 - e0);
}

static interval iv_mul(interval a, interval b) {
    float p[4] = {a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi};
    interval r = {p[0], p[0]};
    for (int k = 1; k < 4; k++) r.lo = fminf(r.lo, p[k]), r.hi = fmaxf(r.hi, p[k]);
    return r;
}

/* ridge(n) = (1 - |n|)^2 in [0, 1]; over an interval of n. */
static interval ridge_range(interval n) {
    float amin = (n.lo <= 0 && n.hi >= 0) ? 0.0f : fminf(fabsf(n.lo), fabsf(n.hi));
    float amax = fmaxf(fabsf(n.lo), fabsf(n.hi));
    if (amax > 1) amax = 1;
    float r0 = 1.0f - amax, r1 = 1.0f - amin;
    return (interval){r0 * r0, r1 * r1};
}

/* Mountain mask and plains factor from their noises. */
#define MASK_E0 (-0.15f)
#define MASK_E1 0.45f
#define PLAINS_E0 (-0.35f)
#define PLAINS_E1 0.25f
#define PLAINS_MIN 0.12f

/* ---- lakes ---------------------------------------------------------------------------------- */

/* The lake of cell (cx, cz): centre and radius. Centres sit in the middle half of their cell so
 * bowls of neighbouring cells never overlap (6 km apart at least, each reaching 2.3 km at most). */
static void lake_of(const world *w, int64_t cx, int64_t cz, double *x, double *z, double *r) {
    uint64_t h = mix64(w->lake_seed ^ ((uint64_t)cx * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)cz * 0xC2B2AE3D27D4EB4Full));
    double fx = (double)(h & 0xffff) / 65535.0, fz = (double)((h >> 16) & 0xffff) / 65535.0;
    double fr = (double)((h >> 32) & 0xffff) / 65535.0;
    *x = (cx + 0.25 + 0.5 * fx) * LAKE_CELL;
    *z = (cz + 0.25 + 0.5 * fz) * LAKE_CELL;
    *r = 600.0 + 800.0 * fr;
}

/* Lake weight at distance t (in radii): 1 at the centre, 0 from LAKE_FALLOFF radii on. */
static inline float lake_weight(double t) {
    if (t >= LAKE_FALLOFF) return 0.0f;
    float q = (float)(t / LAKE_FALLOFF);
    float w = 1.0f - q * q;
    return w * w;
}

/* ---- the height function ------------------------------------------------------------------------ */

/* Height at a world point; with gx non-NULL also the gradient (for slope). */
static float world_eval(const world *w, double x, double z, float *gx, float *gz) {
    x *= w->scale;
    z *= w->scale;
    float dx = 0, dz = 0, ex, ez;
    float *px = gx ? &ex : NULL, *pz = gx ? &ez : NULL;

    float base = w->base.amp * noise(&w->base, x, z, px, pz);
    if (gx) dx += w->base.amp * ex, dz += w->base.amp * ez;

    float hills = 0, hx = 0, hz = 0;
    for (int k = 0; k < HILL_OCTAVES; k++) {
        hills += w->hills[k].amp * noise(&w->hills[k], x, z, px, pz);
        if (gx) hx += w->hills[k].amp * ex, hz += w->hills[k].amp * ez;
    }
    float pn = noise(&w->plains, x, z, px, pz);
    float plains = PLAINS_MIN + (1.0f - PLAINS_MIN) * smooth01(PLAINS_E0, PLAINS_E1, pn);
    if (gx) {
        float dp = (1.0f - PLAINS_MIN) * dsmooth01(PLAINS_E0, PLAINS_E1, pn);
        dx += hills * dp * ex + plains * hx;
        dz += hills * dp * ez + plains * hz;
    }

    float mn = noise(&w->mask, x, z, px, pz);
    float mask = smooth01(MASK_E0, MASK_E1, mn);
    float mx = 0, mz = 0;
    if (gx) {
        float dm = dsmooth01(MASK_E0, MASK_E1, mn);
        mx = dm * ex, mz = dm * ez;
    }
    float ridges = 0, rx = 0, rz = 0;
    for (int k = 0; k < RIDGE_OCTAVES; k++) {
        float n = noise(&w->ridges[k], x, z, px, pz);
        float a = 1.0f - fabsf(n);
        ridges += w->ridges[k].amp * a * a;
        if (gx) {
            float d = -2.0f * a * (n >= 0 ? 1.0f : -1.0f) * w->ridges[k].amp;
            rx += d * ex, rz += d * ez;
        }
    }
    if (gx) dx += mx * ridges + mask * rx, dz += mz * ridges + mask * rz;

    float detail = 0;
    for (int k = 0; k < DETAIL_OCTAVES; k++) {
        detail += w->detail[k].amp * noise(&w->detail[k], x, z, px, pz);
        if (gx) dx += w->detail[k].amp * ex, dz += w->detail[k].amp * ez;
    }

    float h = base + plains * hills + mask * ridges + detail;

    /* lake bowl: the nearest lake (only one can reach any point) */
    int64_t cx = (int64_t)floor(x / LAKE_CELL), cz = (int64_t)floor(z / LAKE_CELL);
    double lx, lz, lr;
    lake_of(w, cx, cz, &lx, &lz, &lr);
    double ddx = x - lx, ddz = z - lz, dist = sqrt(ddx * ddx + ddz * ddz);
    float lw = lake_weight(dist / lr);
    if (lw > 0) {
        if (gx) {
            /* d lw / d dist */
            double t = dist / lr, q = t / LAKE_FALLOFF;
            double dlw = -4.0 * q * (1.0 - q * q) / (LAKE_FALLOFF * lr);
            double ux = dist > 0 ? ddx / dist : 0, uz = dist > 0 ? ddz / dist : 0;
            float base_dx = dx, base_dz = dz;
            dx = (float)(base_dx * (1 - lw) + (LAKE_FLOOR - h) * dlw * ux);
            dz = (float)(base_dz * (1 - lw) + (LAKE_FLOOR - h) * dlw * uz);
        }
        h = h * (1.0f - lw) + LAKE_FLOOR * lw;
    }
    if (gx) {
        *gx = dx * (float)w->scale;
        *gz = dz * (float)w->scale;
    }
    return h;
}

static terra_surface surface_of(float h, float gx, float gz, float hills) {
    float slope = sqrtf(gx * gx + gz * gz);
    if (h < TERRA_WORLD_LAKE_LEVEL + 4.0f && slope < 0.35f) return TERRA_SURFACE_SAND;
    if (h > SNOW_LINE + 2.0f * hills && slope < 1.1f) return TERRA_SURFACE_SNOW;
    if (slope > 0.75f) return TERRA_SURFACE_ROCK;
    return TERRA_SURFACE_GRASS;
}

/* Whether a point (in metres asked) lies within the world's extent, where its arithmetic is exact. */
static inline bool inside(const world *w, double x, double z) {
    return fabs(x * w->scale) <= TERRA_WORLD_EXTENT && fabs(z * w->scale) <= TERRA_WORLD_EXTENT;
}

static float world_height_at(void *user, double x, double z) {
    return inside(user, x, z) ? world_eval(user, x, z, NULL, NULL) : NAN;
}

static terra_surface world_surface_at(void *user, double x, double z) {
    const world *w = user;
    if (!inside(w, x, z)) return TERRA_SURFACE_NONE;
    float gx, gz;
    float h = world_eval(w, x, z, &gx, &gz);
    float hills = w->hills[0].amp * noise(&w->hills[0], x * w->scale, z * w->scale, NULL, NULL);
    return surface_of(h, gx, gz, hills);
}

static terra_status world_sample_grid(void *user, const terra_grid_request *r, float *heights, terra_surface *surfaces) {
    const world *w = user;
    const double x0 = (double)r->ix0 * r->spacing, x1 = (double)(r->ix0 + r->nx - 1) * r->spacing;
    const double z0 = (double)r->iz0 * r->spacing, z1 = (double)(r->iz0 + r->nz - 1) * r->spacing;
    if (!inside(w, x0, z0) || !inside(w, x1, z1))
        return terra_fail(TERRA_E_INVALID,
                          "default world: samples over x %.6g..%.6g, z %.6g..%.6g m reach past its extent (|x| and |z| "
                          "up to 2^50 m, in the world's own metres)",
                          x0, x1, z0, z1);
    for (int j = 0; j < r->nz; j++) {
        double z = (double)(r->iz0 + j) * r->spacing;
        float *hrow = heights + (size_t)j * (size_t)r->nx;
        if (!surfaces) {
            for (int i = 0; i < r->nx; i++) hrow[i] = world_eval(w, (double)(r->ix0 + i) * r->spacing, z, NULL, NULL);
        } else {
            terra_surface *srow = surfaces + (size_t)j * (size_t)r->nx;
            for (int i = 0; i < r->nx; i++) {
                double x = (double)(r->ix0 + i) * r->spacing;
                float gx, gz;
                hrow[i] = world_eval(w, x, z, &gx, &gz);
                float hills = w->hills[0].amp * noise(&w->hills[0], x * w->scale, z * w->scale, NULL, NULL);
                srow[i] = surface_of(hrow[i], gx, gz, hills);
            }
        }
    }
    return TERRA_OK;
}

static interval octave_range(const octave *o, double x0, double z0, double x1, double z1) {
    interval r;
    noise_range(o, x0, z0, x1, z1, &r.lo, &r.hi);
    return r;
}

static terra_status world_height_range(void *user, double x0, double z0, double x1, double z1, float *lo, float *hi) {
    const world *w = user;
    if (!(x0 <= x1) || !(z0 <= z1))
        return terra_fail(TERRA_E_INVALID, "default world: bad rectangle [%g,%g]x[%g,%g]", x0, x1, z0, z1);
    if (!inside(w, x0, z0) || !inside(w, x1, z1)) { /* no heights out there: the whole range bounds them */
        *lo = TERRA_WORLD_MIN_HEIGHT;
        *hi = TERRA_WORLD_MAX_HEIGHT;
        return TERRA_OK;
    }
    x0 *= w->scale, x1 *= w->scale, z0 *= w->scale, z1 *= w->scale;

    interval b = octave_range(&w->base, x0, z0, x1, z1);
    interval h = {b.lo * w->base.amp, b.hi * w->base.amp};

    interval hills = {0, 0};
    for (int k = 0; k < HILL_OCTAVES; k++) {
        interval n = octave_range(&w->hills[k], x0, z0, x1, z1);
        hills.lo += n.lo * w->hills[k].amp, hills.hi += n.hi * w->hills[k].amp;
    }
    interval pn = octave_range(&w->plains, x0, z0, x1, z1);
    interval plains = {PLAINS_MIN + (1 - PLAINS_MIN) * smooth01(PLAINS_E0, PLAINS_E1, pn.lo),
                       PLAINS_MIN + (1 - PLAINS_MIN) * smooth01(PLAINS_E0, PLAINS_E1, pn.hi)};
    interval ph = iv_mul(plains, hills);
    h.lo += ph.lo, h.hi += ph.hi;

    interval mn = octave_range(&w->mask, x0, z0, x1, z1);
    interval mask = {smooth01(MASK_E0, MASK_E1, mn.lo), smooth01(MASK_E0, MASK_E1, mn.hi)};
    interval ridges = {0, 0};
    for (int k = 0; k < RIDGE_OCTAVES; k++) {
        interval r = ridge_range(octave_range(&w->ridges[k], x0, z0, x1, z1));
        ridges.lo += r.lo * w->ridges[k].amp, ridges.hi += r.hi * w->ridges[k].amp;
    }
    interval mr = iv_mul(mask, ridges);
    h.lo += mr.lo, h.hi += mr.hi;

    for (int k = 0; k < DETAIL_OCTAVES; k++) {
        interval n = octave_range(&w->detail[k], x0, z0, x1, z1);
        h.lo += n.lo * w->detail[k].amp, h.hi += n.hi * w->detail[k].amp;
    }

    /* lakes: the weight's range over the rectangle, from its distance range to each lake near it
     * (cells counted in doubles: a product of int64 counts over a wide rectangle overflows) */
    const double f0x = floor(x0 / LAKE_CELL), f1x = floor(x1 / LAKE_CELL);
    const double f0z = floor(z0 / LAKE_CELL), f1z = floor(z1 / LAKE_CELL);
    interval lw = {0, 0};
    if ((f1x - f0x + 1) * (f1z - f0z + 1) > 16) {
        lw.hi = 1;
    } else {
        /* each bowl stays inside its own cell, so a point's weight comes from its cell's lake */
        const int64_t c0x = (int64_t)f0x, c1x = (int64_t)f1x, c0z = (int64_t)f0z, c1z = (int64_t)f1z;
        for (int64_t cz = c0z; cz <= c1z; cz++)
            for (int64_t cx = c0x; cx <= c1x; cx++) {
                double lx, lz, lr;
                lake_of(w, cx, cz, &lx, &lz, &lr);
                double nx = fmax(x0, fmin(lx, x1)), nz = fmax(z0, fmin(lz, z1)); /* nearest point */
                double fx = fmax(fabs(lx - x0), fabs(lx - x1)), fz = fmax(fabs(lz - z0), fabs(lz - z1));
                lw.hi = fmaxf(lw.hi, lake_weight(sqrt((nx - lx) * (nx - lx) + (nz - lz) * (nz - lz)) / lr));
                /* within one cell, the far corner bounds the weight from below */
                if (c0x == c1x && c0z == c1z) lw.lo = lake_weight(sqrt(fx * fx + fz * fz) / lr);
            }
    }
    if (lw.hi > 0) {
        /* h' = h (1 - w) + F w is linear in w and increasing in h: extremes at the corners */
        float c[4] = {h.lo * (1 - lw.lo) + LAKE_FLOOR * lw.lo, h.lo * (1 - lw.hi) + LAKE_FLOOR * lw.hi,
                      h.hi * (1 - lw.lo) + LAKE_FLOOR * lw.lo, h.hi * (1 - lw.hi) + LAKE_FLOOR * lw.hi};
        interval r = {c[0], c[0]};
        for (int k = 1; k < 4; k++) r.lo = fminf(r.lo, c[k]), r.hi = fmaxf(r.hi, c[k]);
        h = r;
    }
    /* float rounding in the evaluation: a hair of slack keeps the bound conservative */
    float slack = 1e-3f + 1e-5f * fmaxf(fabsf(h.lo), fabsf(h.hi));
    *lo = fmaxf(h.lo - slack, TERRA_WORLD_MIN_HEIGHT);
    *hi = fminf(h.hi + slack, TERRA_WORLD_MAX_HEIGHT);
    return TERRA_OK;
}

static void world_destroy(void *user) { terra_free(user); }

static octave make_octave(uint64_t seed, int index, double wavelength_m, float amp) {
    /* each octave's lattice turned by a different angle hides the axis-aligned grain */
    double angle = 0.6180339887 * 2.399963 * (double)(index + 1);
    octave o = {.freq = 1.0 / wavelength_m, .c = cos(angle), .s = sin(angle), .amp = amp,
                .seed = mix64(seed * 0x9E3779B97F4A7C15ull + (uint64_t)index * 0x632BE59BD9B4E019ull + 1)};
    return o;
}

terra_status terra_world_create(const terra_world_desc *desc, terra_source **out) {
    terra_world_desc d = desc ? *desc : (terra_world_desc){0};
    if (d.scale != 0 && !(d.scale >= TERRA_WORLD_MIN_SCALE && d.scale <= TERRA_WORLD_MAX_SCALE))
        return terra_fail(TERRA_E_INVALID, "default world: scale must be from %g to %g (got %g)", TERRA_WORLD_MIN_SCALE,
                          TERRA_WORLD_MAX_SCALE, d.scale);
    world *w = terra_calloc(1, sizeof *w);
    if (!w) return terra_fail(TERRA_E_NOMEM, "default world: out of memory");
    w->scale = d.scale > 0 ? 1.0 / d.scale : 1.0;
    int idx = 0;
    w->base = make_octave(d.seed, idx++, 24000.0, 250.0f);
    w->mask = make_octave(d.seed, idx++, 30000.0, 1.0f);
    w->plains = make_octave(d.seed, idx++, 16000.0, 1.0f);
    static const double hill_wl[HILL_OCTAVES] = {3000, 1500, 750, 375};
    static const float hill_amp[HILL_OCTAVES] = {80, 40, 20, 10};
    for (int k = 0; k < HILL_OCTAVES; k++) w->hills[k] = make_octave(d.seed, idx++, hill_wl[k], hill_amp[k]);
    static const double ridge_wl[RIDGE_OCTAVES] = {9000, 4300, 2100, 1000, 480};
    static const float ridge_amp[RIDGE_OCTAVES] = {1400, 650, 300, 140, 60};
    for (int k = 0; k < RIDGE_OCTAVES; k++) w->ridges[k] = make_octave(d.seed, idx++, ridge_wl[k], ridge_amp[k]);
    static const double detail_wl[DETAIL_OCTAVES] = {190, 95, 47, 23, 11};
    static const float detail_amp[DETAIL_OCTAVES] = {6.0f, 3.0f, 1.5f, 0.7f, 0.3f};
    for (int k = 0; k < DETAIL_OCTAVES; k++) w->detail[k] = make_octave(d.seed, idx++, detail_wl[k], detail_amp[k]);
    w->lake_seed = mix64(d.seed ^ 0x5851F42D4C957F2Dull);

    terra_source_desc sd = {.height_at = world_height_at,
                            .surface_at = world_surface_at,
                            .sample_grid = world_sample_grid,
                            .height_range = world_height_range,
                            .destroy = world_destroy,
                            .user = w,
                            .name = "default world"};
    terra_status s = terra_source_create(&sd, out);
    if (s != TERRA_OK) terra_free(w);
    return s;
}

/* ---- the noise built-ins ---------------------------------------------------------------------- */

/* the turn of octave k of the noise built-ins: make_octave's angle for index k, as (cos, sin) */
static const double noise_turn[TERRA_NOISE_MAX_OCTAVES][2] = {
    {0.087425866272726555, 0.9961710284416343}, {-0.9847134358129267, 0.17418223023460558},
    {-0.25960471658540279, -0.96571496370648247}, {0.93932110134099767, -0.3430391647837534},
    {0.42384663857137894, 0.90573397141309808}, {-0.86521078225322534, 0.50140831891060789},
    {-0.57513024286536263, -0.81806185813887511}, {0.76464826284892973, -0.64444785213554245},
    {0.7088303164123686, 0.70537903465777985}, {-0.64070805394348573, 0.76778459844669422},
    {-0.82085922970021352, -0.57113056739765922}, {0.49717939545447631, -0.86764776766584339},
    {0.90779190838132939, 0.41942085198209211}, {-0.33845040748325805, 0.94098423030060208},
    {-0.96697054851049147, -0.2548881290160826}, {0.16937393175577195, -0.98555186126433303}};

static float noise_sum(uint64_t seed, double x, double z, int octaves, double lacunarity, double gain, bool ridged) {
    if (!(fabs(x) <= TERRA_WORLD_EXTENT && fabs(z) <= TERRA_WORLD_EXTENT)) return NAN;
    octaves = octaves < 1 ? 1 : octaves > TERRA_NOISE_MAX_OCTAVES ? TERRA_NOISE_MAX_OCTAVES : octaves;
    double wavelength = 1.0, amp = 1.0, sum = 0.0, weight = 0.0;
    for (int k = 0; k < octaves; k++) {
        const octave o = {.freq = 1.0 / wavelength, .c = noise_turn[k][0], .s = noise_turn[k][1], .amp = 1.0f,
                          .seed = mix64(seed * 0x9E3779B97F4A7C15ull + (uint64_t)k * 0x632BE59BD9B4E019ull + 1)};
        const float n = noise(&o, x, z, NULL, NULL);
        const float r = 1.0f - fabsf(n);
        sum += amp * (ridged ? r * r : n);
        weight += amp;
        wavelength /= lacunarity, amp *= gain;
    }
    return weight > 0 ? (float)(sum / weight) : 0.0f;
}

float terra_noise(uint64_t seed, double x, double z) {
    if (!(fabs(x) <= TERRA_WORLD_EXTENT && fabs(z) <= TERRA_WORLD_EXTENT)) return NAN;
    const octave o = {.freq = 1.0, .c = 1.0, .s = 0.0, .amp = 1.0f, .seed = mix64(seed + 0x9E3779B97F4A7C15ull)};
    return noise(&o, x, z, NULL, NULL);
}

float terra_fbm(uint64_t seed, double x, double z, int octaves, double lacunarity, double gain) {
    return noise_sum(seed, x, z, octaves, lacunarity, gain, false);
}

float terra_ridged(uint64_t seed, double x, double z, int octaves, double lacunarity, double gain) {
    return noise_sum(seed, x, z, octaves, lacunarity, gain, true);
}
