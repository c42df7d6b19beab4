/* The least distance from an eye to a cap (planet.h, terra_cap_distance), with the cap's angle
 * given by its cosine and sine and the eye by its distance re and direction eu from the centre:
 * shared by terra_cap_distance and the planet selection, which keeps both per tile. */
#ifndef TERRA_PLANET_CAP_H
#define TERRA_PLANET_CAP_H

#include "terra/core.h"

#include <math.h>

static inline double terra_cap_distance_(double re, terra_vec3 eu, terra_vec3 dir, double cos_a, double sin_a, double r_lo,
                                         double r_hi) {
    const double cg = eu.x * dir.x + eu.y * dir.y + eu.z * dir.z;
    if (cg >= cos_a) return fmax(fmax(r_lo - re, re - r_hi), 0); /* over the cap: straight down or up */
    const double cos_g = cg * cos_a + sqrt(fmax(1 - cg * cg, 0)) * sin_a; /* cos(gamma - angle) */
    const double r = fmin(fmax(re * cos_g, r_lo), r_hi);
    return sqrt(fmax(re * re + r * r - 2 * re * r * cos_g, 0));
}

#endif
