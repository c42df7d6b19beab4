/* The GL benchmarks' ideal for tau over the ground a frame shows: the error-bounded mesh of the
 * ground's own levels (bench.h), each pixel's ground at the coarsest level whose error projects within
 * tau at its distance. The ground's area per pixel comes from the depth buffer (world points of
 * neighbouring pixels); none across a silhouette. */
#ifndef TERRA_BENCH_GL_IDEAL_H
#define TERRA_BENCH_GL_IDEAL_H

#include "bench.h"
#include "../tests/test_gl_util.h"

/* view_z: w x h distances along the view axis (terra_gl_read_depth); level l's error err[l], level
 * 0's spacing s0; k_px: pixels per unit of tangent (h / (2 tan(fov_y / 2)) at the selection's view). */
static inline double depth_ideal(const terra_camera *cam, int w, int h, const float *view_z, double tau_px, double k_px,
                                 const float *err, int levels, double s0) {
    terra_vec3 f;
    terra_camera_basis(cam, &f, NULL, NULL);
    double sum = 0;
    for (int j = 0; j + 1 < h; j++)
        for (int i = 0; i + 1 < w; i++) {
            const float z = view_z[(size_t)j * w + i], zr = view_z[(size_t)j * w + i + 1], zd = view_z[(size_t)(j + 1) * w + i];
            if (!isfinite(z) || !isfinite(zr) || !isfinite(zd)) continue;
            if (fabsf(zr - z) > 0.05f * z || fabsf(zd - z) > 0.05f * z) continue; /* an edge: no area */
            terra_vec3 p[3];
            const float zs[3] = {z, zr, zd};
            const int di[3] = {0, 1, 0}, dj[3] = {0, 0, 1};
            for (int k = 0; k < 3; k++) {
                terra_vec3 r = pixel_ray(cam, w, h, i + di[k], j + dj[k]);
                const double t = zs[k] / (r.x * f.x + r.y * f.y + r.z * f.z);
                p[k] = (terra_vec3){r.x * t, r.y * t, r.z * t};
            }
            const double ax = p[1].x - p[0].x, ay = p[1].y - p[0].y, az = p[1].z - p[0].z;
            const double bx = p[2].x - p[0].x, by = p[2].y - p[0].y, bz = p[2].z - p[0].z;
            const double cx = ay * bz - az * by, cy = az * bx - ax * bz, cz = ax * by - ay * bx;
            const double area = sqrt(cx * cx + cy * cy + cz * cz);
            const double d = sqrt(p[0].x * p[0].x + p[0].y * p[0].y + p[0].z * p[0].z);
            const double s = bench_level_spacing(tau_px * d / k_px, err, levels, s0);
            sum += 2 * area / (s * s);
        }
    return sum;
}

#endif
