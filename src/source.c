/* terra source: callbacks, checks, and the fallbacks that fill in what a user source lacks. */
#include "terra/source.h"

#include <math.h>
#include <string.h>

struct terra_source {
    terra_source_desc d;
};

terra_status terra_source_create(const terra_source_desc *desc, terra_source **out) {
    *out = NULL;
    if (!desc) return terra_fail(TERRA_E_INVALID, "source: no description given");
    const char *name = desc->name ? desc->name : "user source";
    if (!desc->height_at && !desc->sample_grid)
        return terra_fail(TERRA_E_INVALID, "%s: needs height_at or sample_grid", name);
    /* Selection trusts the range (a tile it thinks lies below the eye's reach is never refined), so
     * one that was never stated is refused, and samples are held to it (terra_source_sample). */
    if (!desc->height_range) {
        if (!isfinite(desc->min_height) || !isfinite(desc->max_height) || desc->min_height > desc->max_height)
            return terra_fail(TERRA_E_INVALID,
                              "%s: without height_range, min_height <= max_height must be given (got %g, %g)", name,
                              (double)desc->min_height, (double)desc->max_height);
        if (desc->min_height == 0 && desc->max_height == 0)
            return terra_fail(TERRA_E_INVALID,
                              "%s: no height range: give height_range, or min_height and max_height (both 0 reads as "
                              "never set; ground flat at 0 can state -1 and 1)",
                              name);
    }
    terra_source *s = terra_calloc(1, sizeof *s);
    if (!s) return terra_fail(TERRA_E_NOMEM, "%s: out of memory", name);
    s->d = *desc;
    s->d.name = name;
    *out = s;
    return TERRA_OK;
}

void terra_source_destroy(terra_source *s) {
    if (!s) return;
    if (s->d.destroy) s->d.destroy(s->d.user);
    terra_free(s);
}

const char *terra_source_name(const terra_source *s) { return s->d.name; }

static terra_status out_of_range(const terra_source *s, double x, double z, float h, float lo, float hi) {
    if (!isfinite(h)) return terra_fail(TERRA_E_SOURCE, "%s: height at x=%.10g z=%.10g is %g", s->d.name, x, z, (double)h);
    return terra_fail(TERRA_E_SOURCE, "%s: height at x=%.10g z=%.10g is %g, outside the range it states there [%g, %g]",
                      s->d.name, x, z, (double)h, (double)lo, (double)hi);
}

static terra_status sample_points(const terra_source *s, const terra_grid_request *r, float *h, terra_surface *surf) {
    for (int j = 0; j < r->nz; j++) {
        double z = (double)(r->iz0 + j) * r->spacing;
        for (int i = 0; i < r->nx; i++) {
            double x = (double)(r->ix0 + i) * r->spacing;
            size_t k = (size_t)j * (size_t)r->nx + (size_t)i;
            h[k] = s->d.height_at(s->d.user, x, z);
            if (surf) surf[k] = s->d.surface_at ? s->d.surface_at(s->d.user, x, z) : TERRA_SURFACE_NONE;
        }
    }
    return TERRA_OK;
}

terra_status terra_source_sample(const terra_source *s, const terra_grid_request *r, float *h, terra_surface *surf) {
    if (r->nx <= 0 || r->nz <= 0 || !(r->spacing > 0) || !isfinite(r->spacing))
        return terra_fail(TERRA_E_INVALID, "%s: bad grid request (%d x %d samples, spacing %g)", s->d.name, r->nx,
                          r->nz, r->spacing);
    terra_status st = s->d.sample_grid ? s->d.sample_grid(s->d.user, r, h, surf) : sample_points(s, r, h, surf);
    if (st != TERRA_OK) return st;
    /* every sample finite and within the range the source states over the request */
    float lo, hi;
    st = terra_source_height_range(s, (double)r->ix0 * r->spacing, (double)r->iz0 * r->spacing,
                                   (double)(r->ix0 + r->nx - 1) * r->spacing, (double)(r->iz0 + r->nz - 1) * r->spacing,
                                   &lo, &hi);
    if (st != TERRA_OK) return st;
    size_t n = (size_t)r->nx * (size_t)r->nz;
    bool bad = false;
    for (size_t k = 0; k < n; k++) bad |= !(h[k] >= lo && h[k] <= hi); /* NaN fails both */
    for (size_t k = 0; bad && k < n; k++) {
        if (!(h[k] >= lo && h[k] <= hi)) {
            int i = (int)(k % (size_t)r->nx), j = (int)(k / (size_t)r->nx);
            return out_of_range(s, (double)(r->ix0 + i) * r->spacing, (double)(r->iz0 + j) * r->spacing, h[k], lo, hi);
        }
    }
    return TERRA_OK;
}

terra_status terra_source_height(const terra_source *s, double x, double z, float *height) {
    if (!isfinite(x) || !isfinite(z))
        return terra_fail(TERRA_E_INVALID, "%s: height asked at a non-finite point (%g, %g)", s->d.name, x, z);
    /* A grid-only source answers lattice points alone; off-lattice points are the ground
     * module's job (it interpolates the drawn triangles). */
    if (!s->d.height_at)
        return terra_fail(TERRA_E_UNSUPPORTED, "%s: single-point heights need height_at", s->d.name);
    float h = s->d.height_at(s->d.user, x, z), lo, hi;
    terra_status st = terra_source_height_range(s, x, z, x, z, &lo, &hi);
    if (st != TERRA_OK) return st;
    if (!(h >= lo && h <= hi)) return out_of_range(s, x, z, h, lo, hi);
    *height = h;
    return TERRA_OK;
}

float terra_source_height_raw(const terra_source *s, double x, double z) {
    return s->d.height_at ? s->d.height_at(s->d.user, x, z) : NAN;
}

terra_surface terra_source_surface_raw(const terra_source *s, double x, double z) {
    return s->d.surface_at ? s->d.surface_at(s->d.user, x, z) : TERRA_SURFACE_NONE;
}

terra_status terra_source_height_range(const terra_source *s, double x0, double z0, double x1, double z1, float *lo,
                                       float *hi) {
    float a, b;
    if (s->d.height_range) {
        terra_status st = s->d.height_range(s->d.user, x0, z0, x1, z1, &a, &b);
        if (st != TERRA_OK) return st;
    } else {
        a = s->d.min_height;
        b = s->d.max_height;
    }
    if (!isfinite(a) || !isfinite(b) || a > b)
        return terra_fail(TERRA_E_SOURCE, "%s: height range over [%.10g,%.10g]x[%.10g,%.10g] is [%g, %g]", s->d.name, x0,
                          x1, z0, z1, (double)a, (double)b);
    *lo = a;
    *hi = b;
    return TERRA_OK;
}
