/* The independent checker: measures every sample of a raster against a triangle mesh.
 *
 * It shares no code with the mesher: each triangle is rasterised over its bounding box with exact
 * 64-bit edge functions (no spans, no incremental updates), and heights are interpolated in long
 * double from the mesh's own vertex heights. It works on any tool's output in sample units.
 *
 * Exactness: a vertex used by a triangle must lie within TERRA_TIN_CHECK_MAX_COORD of the origin
 * (checked; refused otherwise). Then every coordinate difference is below 2^31, every product
 * below 2^62 and every edge function (a difference of two products) below 2^63: int64 holds them
 * all exactly. The total area is summed saturating, since it only has to be compared with the
 * raster's. */
#include "terra/tin.h"

#include <math.h>
#include <string.h>

terra_status terra_tin_check(const float *heights, int width, int height, const int32_t *xy, const float *z,
                             size_t vertex_count, const uint32_t *tri, size_t triangle_count, float *err_out,
                             terra_tin_check_result *r) {
    if (!heights || !r || width < 1 || height < 1 || (triangle_count && (!tri || !xy || !z)))
        return terra_fail(TERRA_E_INVALID, "tin check: bad arguments");
    memset(r, 0, sizeof *r);
    const size_t W = (size_t)width, H = (size_t)height, N = W * H;
    /* Without err_out a byte per sample says whether it is covered yet; a sample's error then
     * counts towards the RMS from the first triangle covering it (on a shared edge both triangles
     * interpolate the same line), while the maximum is still taken over every triangle. */
    float *err = err_out;
    uint8_t *cov = err_out ? NULL : terra_calloc(N, 1);
    if (!err_out && !cov) return terra_fail(TERRA_E_NOMEM, "tin check: out of memory");
    bool holes = false;
    for (size_t i = 0; i < N; i++) {
        bool hole = heights[i] != heights[i];
        if (err) err[i] = hole ? NAN : -1.0f;
        holes |= hole;
    }
    double sum2 = 0;
    size_t first_cover = 0;
    long double maxe = 0;
    int wx = 0, wy = 0;
    int sign = 0;
    /* Twice the raster's area, below 2^33; the sum saturates at 2^63 (each term is below 2^63, so
     * the unsigned sum never wraps). */
    const uint64_t area_cap = (uint64_t)1 << 63;
    uint64_t area_sum = 0;
    for (size_t t = 0; t < triangle_count; t++) {
        uint32_t v[3] = {tri[3 * t], tri[3 * t + 1], tri[3 * t + 2]};
        if (v[0] >= vertex_count || v[1] >= vertex_count || v[2] >= vertex_count) {
            terra_free(cov);
            return terra_fail(TERRA_E_CORRUPT, "tin check: triangle %zu uses a vertex past %zu", t, vertex_count);
        }
        int64_t x[3], y[3];
        long double zz[3];
        for (int i = 0; i < 3; i++) {
            x[i] = xy[2 * v[i]];
            y[i] = xy[2 * v[i] + 1];
            zz[i] = (long double)z[v[i]];
            if (x[i] <= -TERRA_TIN_CHECK_MAX_COORD || x[i] >= TERRA_TIN_CHECK_MAX_COORD ||
                y[i] <= -TERRA_TIN_CHECK_MAX_COORD || y[i] >= TERRA_TIN_CHECK_MAX_COORD) {
                terra_free(cov);
                return terra_fail(TERRA_E_INVALID,
                                  "tin check: triangle %zu: vertex %u at (%lld, %lld) is outside the checker's range "
                                  "(coordinates within +-%lld samples)",
                                  t, v[i], (long long)x[i], (long long)y[i], (long long)TERRA_TIN_CHECK_MAX_COORD - 1);
            }
        }
        int64_t a = (x[1] - x[0]) * (y[2] - y[0]) - (y[1] - y[0]) * (x[2] - x[0]);
        if (a == 0) {
            r->degenerate++;
            continue;
        }
        int s = a > 0 ? 1 : -1;
        if (!sign) sign = s;
        if (s != sign) r->flipped++;
        if (area_sum < area_cap) area_sum += (uint64_t)(a > 0 ? a : -a);
        int64_t x0 = x[0], x1 = x[0], y0 = y[0], y1 = y[0];
        for (int i = 1; i < 3; i++) {
            if (x[i] < x0) x0 = x[i];
            if (x[i] > x1) x1 = x[i];
            if (y[i] < y0) y0 = y[i];
            if (y[i] > y1) y1 = y[i];
        }
        if (x0 < 0) x0 = 0;
        if (y0 < 0) y0 = 0;
        if (x1 > (int64_t)W - 1) x1 = (int64_t)W - 1;
        if (y1 > (int64_t)H - 1) y1 = (int64_t)H - 1;
        for (int64_t py = y0; py <= y1; py++) {
            for (int64_t px = x0; px <= x1; px++) {
                /* Barycentric weights times a (exact integers), each >= 0 inside when a > 0. */
                int64_t l0 = (x[1] - px) * (y[2] - py) - (y[1] - py) * (x[2] - px);
                int64_t l1 = (x[2] - px) * (y[0] - py) - (y[2] - py) * (x[0] - px);
                int64_t l2 = (x[0] - px) * (y[1] - py) - (y[0] - py) * (x[1] - px);
                if (s < 0) l0 = -l0, l1 = -l1, l2 = -l2;
                if (l0 < 0 || l1 < 0 || l2 < 0) continue;
                size_t i = (size_t)py * W + (size_t)px;
                float hv = heights[i];
                if (hv != hv) {
                    r->holes_covered++;
                    continue;
                }
                long double zi = (zz[0] * l0 + zz[1] * l1 + zz[2] * l2) / (long double)a * (long double)s;
                long double e = fabsl(zi - (long double)hv);
                if (e > maxe) maxe = e, wx = (int)px, wy = (int)py;
                if (err) {
                    if ((float)e > err[i] || err[i] < 0) err[i] = (float)e;
                } else if (!cov[i]) {
                    cov[i] = 1;
                    sum2 += (double)e * (double)e;
                    first_cover++;
                }
            }
        }
    }
    /* A vertex on a sample that no drawn triangle covers (an island between holes) is exact. */
    for (size_t v = 0; v < vertex_count; v++) {
        int64_t px = xy[2 * v], py = xy[2 * v + 1];
        if (px < 0 || py < 0 || px >= (int64_t)W || py >= (int64_t)H) continue;
        size_t i = (size_t)py * W + (size_t)px;
        if (heights[i] != heights[i] || (err ? err[i] >= 0 : cov[i] != 0)) continue;
        long double e = fabsl((long double)z[v] - (long double)heights[i]);
        if (err) {
            err[i] = (float)e;
        } else {
            cov[i] = 1;
            sum2 += (double)(e * e);
            first_cover++;
        }
        if (e > maxe) maxe = e, wx = (int)px, wy = (int)py;
    }
    if (err) {
        for (size_t i = 0; i < N; i++) {
            float e = err[i];
            if (e != e) continue;
            if (e < 0) {
                r->uncovered++;
                continue;
            }
            r->samples++;
            sum2 += (double)e * (double)e;
        }
    } else {
        for (size_t i = 0; i < N; i++)
            if (!cov[i] && heights[i] == heights[i]) r->uncovered++;
        r->samples = first_cover;
    }
    r->max_error = (double)maxe;
    r->rms_error = r->samples ? sqrt(sum2 / (double)r->samples) : 0.0;
    r->worst_x = wx;
    r->worst_y = wy;
    r->area_exact = !holes && area_sum == 2 * (uint64_t)(W - 1) * (uint64_t)(H - 1);
    terra_free(cov);
    return TERRA_OK;
}

static void lerp3(const uint8_t a[3], const uint8_t b[3], double t, uint8_t *o) {
    for (int i = 0; i < 3; i++) o[i] = (uint8_t)lrint(a[i] + (b[i] - a[i]) * t);
}

void terra_tin_error_colors(const float *err, int width, int height, double bound, uint8_t *rgb) {
    static const uint8_t ramp[5][3] = {{16, 16, 96}, {0, 120, 200}, {40, 190, 80}, {240, 210, 40}, {220, 30, 30}};
    size_t n = (size_t)width * (size_t)height;
    for (size_t i = 0; i < n; i++) {
        float e = err[i];
        uint8_t *o = rgb + 3 * i;
        if (e != e) {
            o[0] = o[1] = o[2] = 0;
        } else if (e < 0) {
            o[0] = 255, o[1] = 0, o[2] = 255;
        } else if (bound > 0 && e > bound) {
            o[0] = o[1] = o[2] = 255;
        } else {
            double t = bound > 0 ? e / bound * 4.0 : 0.0;
            int k = (int)t;
            if (k >= 4) k = 3;
            lerp3(ramp[k], ramp[k + 1], t - k, o);
        }
    }
}
