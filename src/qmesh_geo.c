/* quantized-mesh header fields: WGS84 ECEF positions, bounding spheres, the horizon occlusion point
 * (Cesium's EllipsoidalOccluder in the ellipsoid's scaled space), and geographic tile bounds. */
#include "terra/qmesh.h"

#include <math.h>

/* Magnitude (scaled space) of the horizon point of a tile that has no finite one: real Cesium root
 * tiles carry 8.3e16 (quantized-mesh-tile-cs's) to 1e24 (cesium-native's test tiles); its square
 * (1e34) is far from overflowing Cesium's culling maths. */
#define FAR_HORIZON 1e17

void terra_qmesh_geodetic_up(double lon, double lat, double out[3]) {
    out[0] = cos(lat) * cos(lon);
    out[1] = cos(lat) * sin(lon);
    out[2] = sin(lat);
}

void terra_qmesh_geodetic_to_ecef(double lon, double lat, double height, double out[3]) {
    const double a2 = TERRA_WGS84_A * TERRA_WGS84_A, b2 = TERRA_WGS84_B * TERRA_WGS84_B;
    double n[3];
    terra_qmesh_geodetic_up(lon, lat, n);
    double k[3] = {a2 * n[0], a2 * n[1], b2 * n[2]};
    double gamma = sqrt(n[0] * k[0] + n[1] * k[1] + n[2] * k[2]);
    for (int i = 0; i < 3; i++) out[i] = k[i] / gamma + n[i] * height;
}

static void sphere_around(const double *p, size_t n, double c[3], double *r) {
    double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 3; k++) {
            if (p[3 * i + k] < lo[k]) lo[k] = p[3 * i + k];
            if (p[3 * i + k] > hi[k]) hi[k] = p[3 * i + k];
        }
    double r2 = 0;
    for (int k = 0; k < 3; k++) c[k] = n ? 0.5 * (lo[k] + hi[k]) : 0;
    for (size_t i = 0; i < n; i++) {
        double dx = p[3 * i] - c[0], dy = p[3 * i + 1] - c[1], dz = p[3 * i + 2] - c[2];
        double d2 = dx * dx + dy * dy + dz * dz;
        if (d2 > r2) r2 = d2;
    }
    *r = sqrt(r2);
}

/* Magnitude along `dir` (scaled space) at which a point of the scaled ellipsoid's horizon passes
 * through position p (scaled space); Cesium computes the same. Negative when impossible. */
static double horizon_magnitude(const double s[3], const double dir[3]) {
    double m2 = s[0] * s[0] + s[1] * s[1] + s[2] * s[2];
    double m = sqrt(m2);
    if (!(m > 0)) return -1;
    double d[3] = {s[0] / m, s[1] / m, s[2] / m};
    if (m2 < 1) m2 = 1;
    if (m < 1) m = 1;
    double cos_a = d[0] * dir[0] + d[1] * dir[1] + d[2] * dir[2];
    double cx = d[1] * dir[2] - d[2] * dir[1], cy = d[2] * dir[0] - d[0] * dir[2], cz = d[0] * dir[1] - d[1] * dir[0];
    double sin_a = sqrt(cx * cx + cy * cy + cz * cz);
    double cos_b = 1.0 / m, sin_b = sqrt(m2 - 1.0) * cos_b;
    double den = cos_a * cos_b - sin_a * sin_b;
    return den > 0 ? 1.0 / den : -1;
}

void terra_qmesh_header_geographic(terra_qmesh_header *H, const double *ecef, size_t n, const double center[3],
                                   double min_height, double max_height) {
    for (int k = 0; k < 3; k++) H->center[k] = center[k];
    H->min_height = (float)min_height;
    H->max_height = (float)max_height;
    sphere_around(ecef, n, H->sphere_center, &H->sphere_radius);
    const double inv[3] = {1.0 / TERRA_WGS84_A, 1.0 / TERRA_WGS84_A, 1.0 / TERRA_WGS84_B};
    double dir[3] = {center[0] * inv[0], center[1] * inv[1], center[2] * inv[2]};
    double dl = sqrt(dir[0] * dir[0] + dir[1] * dir[1] + dir[2] * dir[2]);
    for (int k = 0; k < 3; k++) dir[k] = dl > 0 ? dir[k] / dl : 0;
    double best = 0;
    bool ok = dl > 0;
    for (size_t i = 0; ok && i < n; i++) {
        double s[3] = {ecef[3 * i] * inv[0], ecef[3 * i + 1] * inv[1], ecef[3 * i + 2] * inv[2]};
        double mag = horizon_magnitude(s, dir);
        if (mag < 0) ok = false;
        else if (mag > best) best = mag;
    }
    /* No finite point exists where some vertex is not within 90 degrees (plus its height's
     * horizon dip) of the direction: a tile spanning a hemisphere. Like Cesium's own root tiles
     * (which carry ~8e16 to ~1e24 there), write a point at effectively infinite distance along the
     * direction: visible from every camera on the tile's side of the globe, hidden only from near
     * its antipode. Anything closer (the scaled centre, say) hides the tile from cameras above
     * its own ground, and CesiumJS then never refines it. A tile without vertices gets it too, so
     * that its children are reached. */
    if (!ok || !(best > 0 && best < INFINITY)) best = FAR_HORIZON;
    for (int k = 0; k < 3; k++) H->horizon[k] = dir[k] * best;
}

void terra_qmesh_header_local(terra_qmesh_header *H, const double *xyz, size_t n, double min_height,
                              double max_height) {
    sphere_around(xyz, n, H->sphere_center, &H->sphere_radius);
    for (int k = 0; k < 3; k++) {
        H->center[k] = H->sphere_center[k];
        H->horizon[k] = H->sphere_center[k];
    }
    H->min_height = (float)min_height;
    H->max_height = (float)max_height;
}

void terra_qmesh_geographic_tile_bounds(int level, int32_t x, int32_t y, double *w, double *s, double *e, double *n) {
    double size = 180.0 / (double)(1u << level); /* two 180-degree roots at level 0 */
    *w = -180.0 + x * size;
    *e = *w + size;
    *s = -90.0 + y * size;
    *n = *s + size;
}
