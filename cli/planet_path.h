/* The path `terra fly --planet` flies, shared with the tests: a descent from 20,000 km to 2 m over the
 * built-in planet's mountains (seed 1's highest range), then a low flight north across a cube face's
 * edge and over the pole. t runs from 0 to 1. */
#ifndef TERRA_CLI_PLANET_PATH_H
#define TERRA_CLI_PLANET_PATH_H

#include "terra/planet.h"

#include <math.h>

#define TERRA_PLANET_PATH_DESCENT 0.6 /* the part of t spent descending */

static inline terra_camera terra_planet_path_camera(const terra_planet *p, double t) {
    const double pi = 3.14159265358979323846;
    double lat, lon = -12.3, alt, heading, pitch;
    if (t <= TERRA_PLANET_PATH_DESCENT) { /* down the logarithm of the height, looking down, then ahead */
        const double u = t / TERRA_PLANET_PATH_DESCENT;
        alt = 2e7 * pow(1e-7, u);
        lat = -4.6 + 0.3 * u;
        heading = 30;
        pitch = -90 + 82 * pow(u, 3);
    } else { /* 500 m up, north along the meridian, over the face edge near 45 degrees and the pole */
        const double u = (t - TERRA_PLANET_PATH_DESCENT) / (1 - TERRA_PLANET_PATH_DESCENT);
        alt = 2 + 498 * fmin(u * 8, 1);
        lat = -4.3 + u * 184; /* past 90: over the pole and down the other side */
        heading = 0;
        pitch = -8;
        if (lat > 90) lat = 180 - lat, lon += 180, heading = 180;
    }
    const terra_vec3 d = terra_planet_latlon_dir(lat, lon);
    return (terra_camera){.eye = terra_planet_point(p, d, terra_planet_height(p, d) + alt), .yaw_rad = heading * pi / 180, .pitch_rad = pitch * pi / 180,
                          .fov_y_rad = 60 * pi / 180, .up = d};
}

#endif
