/* The built-in camera path of `terra fly`, shared with the renderer's tests (which check every
 * frame of it for holes). */
#ifndef TERRA_CLI_FLY_PATH_H
#define TERRA_CLI_FLY_PATH_H

#include <math.h>

#include "terra/source.h"

/* t in [0, 1]: 12 km east along a gentle S, climbing from 40 m above the ground to 2.5 km and back
 * down, looking ahead and slightly down. */
static inline terra_camera terra_fly_path_camera(const terra_source *src, double t) {
    const double pi = 3.14159265358979323846;
    terra_camera c = {.fov_y_rad = 60.0 * pi / 180.0, .aspect = 16.0 / 9.0};
    double x = 12000.0 * t, z = 3000.0 * sin(2 * pi * t);
    double dx = 12000.0, dz = 3000.0 * 2 * pi * cos(2 * pi * t);
    float g = 0;
    terra_source_height(src, x, z, &g);
    double s = sin(pi * t);
    c.eye = (terra_vec3){x, g + 40.0 + 2500.0 * s * s, z};
    c.yaw_rad = atan2(dx, -dz); /* yaw 0 looks along -z, positive turns toward +x */
    c.pitch_rad = -0.12 - 0.25 * s * s;
    return c;
}

#endif
