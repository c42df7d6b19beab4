/* The cook's edge collapse: meshoptimizer's simplifier with the border locked (terra/cook.h,
 * terra_cook_simplify_fn). meshoptimizer measures error relative to the mesh's extent; terra
 * passes metres, so the target is divided by the extent here. */
#include "terra/cook_io.h"

#include <math.h>
#include <meshoptimizer.h>

size_t terra_cook_simplify_meshopt(void *user, const double *xy, const float *pos, uint32_t vertex_count,
                                   const uint32_t *tri, size_t triangle_count, double target_error,
                                   const double *rect, const terra_cook_samples *samples, uint32_t *out_tri) {
    (void)user, (void)xy, (void)rect, (void)samples;
    float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (uint32_t i = 0; i < vertex_count; i++)
        for (int k = 0; k < 3; k++) {
            lo[k] = fminf(lo[k], pos[3 * i + k]);
            hi[k] = fmaxf(hi[k], pos[3 * i + k]);
        }
    float extent = 0;
    for (int k = 0; k < 3; k++) extent = fmaxf(extent, hi[k] - lo[k]);
    if (!(extent > 0) || triangle_count == 0) {
        for (size_t i = 0; i < 3 * triangle_count; i++) out_tri[i] = tri[i];
        return triangle_count;
    }
    float rel = (float)(target_error / extent);
    size_t n = meshopt_simplify(out_tri, tri, 3 * triangle_count, pos, vertex_count, 3 * sizeof(float), 0, rel,
                                meshopt_SimplifyLockBorder, NULL);
    return n / 3;
}
