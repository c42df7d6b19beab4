/* terra planet: a whole world on a sphere, as six quadtrees on the faces of a cube.
 *
 * The frame: the planet's centre is the origin, +y points to the north pole, latitude 0 longitude 0
 * lies on +x and longitude grows toward -z (east of (1, 0, 0) is (0, 0, -1)), so the local frame
 * east, north, up is right-handed like the plane's x, z-reversed, y.
 *
 * Faces: face f (0..5) is the cube face whose outward axis is +x, -x, +y, -y, +z, -z. A point of a
 * face has coordinates (s, t) in [-1, 1]^2 along two axes of the cube; it is pushed out to the
 * sphere by the equal-angle (tangent) mapping: the cube point is n + tan(s pi/4) a + tan(t pi/4) b,
 * normalised. Equal steps in s are equal angles along the face's middle, so cells stay near equal:
 * the largest cell of a face is 1.41 times the area of the smallest (test_planet measures it; the
 * plain projection's ratio is 5.2). Lines of constant s or t are great circles, so a tile is a
 * spherical quadrilateral with great-circle edges.
 *
 * Tiles: key (face, level, x, y); level 0 is the finest and level `levels - 1` is the face itself
 * (x = y = 0); level L has 2^(levels - 1 - L) tiles along each side of a face. A tile is the same
 * grid of cells as on the plane (grid.h): vertex (i, j) of tile (f, L, x, y) is the lattice point
 * (x cells + i, y cells + j) of its face at that level, at s = 2 (x cells + i) / n - 1 with n the
 * level's cells across the face, computed exactly so (a power of two divides). The lattice rule
 * carries over and over the edges: two tiles, two levels or two faces that name the same point of
 * the sphere compute the same cube point (the tangent is taken of |s| and signed, and is exactly 1
 * at an edge), the same direction and the same height, bit for bit.
 *
 * Heights: metres over the reference surface along its unit normal `dir`, from the built-in planet
 * (continents, mountain ranges under a mask, fine detail and flat seas at height 0) or from the
 * user's callbacks. The reference surface is the sphere of `radius_m` (ground point = dir x
 * (radius + height)) or an ellipsoid of revolution about y (`polar_radius_m`, or `wgs84`): there a
 * direction is the ellipsoid's normal, so latitude = asin(dir.y) is the geodetic latitude and the
 * ground point is the ellipsoid's point with that normal plus height x dir, as geodetic coordinates
 * go to ECEF (terra's x, y, z are ECEF's X, Z, -Y). Either way the faces' lattice rule holds: the
 * same direction gives the same point, bit for bit. Geographic archives (EPSG:4326 heights over
 * WGS84, as terra cook and Cesium use) lie on the `wgs84` planet where they belong
 * (terra_geo_grid below).
 */
/* Threads: a terra_planet is immutable once created: any number of threads may sample it, build
 * tiles (each with its own out and scratch) and query it; user callbacks are called from those
 * threads at once and must be safe so. A terra_planet_select is used by one thread at a time, like
 * terra_select. */
#ifndef TERRA_PLANET_H
#define TERRA_PLANET_H

#include "terra/grid.h"
#include "terra/select.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TERRA_PLANET_EARTH_RADIUS 6371000.0
#define TERRA_PLANET_WGS84_A 6378137.0          /* the WGS84 ellipsoid's equatorial radius, m */
#define TERRA_PLANET_WGS84_B 6356752.314245179  /* its polar radius (1/f = 298.257223563), m */
#define TERRA_PLANET_MAX_LEVELS 24

typedef struct terra_geo_grid terra_geo_grid;

typedef struct terra_planet_desc {
    double radius_m;         /* 0 = 6,371,000 m (the Earth's mean radius); with polar_radius_m the
                                equatorial radius */
    double polar_radius_m;   /* 0 = radius_m (a sphere); from radius_m / 2 to radius_m: an ellipsoid */
    bool wgs84;              /* the WGS84 ellipsoid (radius_m and polar_radius_m must be 0) */
    uint64_t seed;           /* the built-in planet's; 0 = 1 */
    int cells;               /* cells along a tile's side, power of two in [16, 256]; 0 = 16 (small tiles
                                follow tau closely on smooth ground: docs/BENCHMARKS.md) */
    int levels;              /* 0 = as many as bring the finest spacing to at most finest_spacing_m */
    double finest_spacing_m; /* 0 = 2 m */
    /* The user's ground (all NULL: the built-in planet). height_at answers metres over the sphere
     * along a unit direction; height_range a conservative range over every direction within
     * `chord` (Euclidean, on the unit sphere) of the unit direction `centre`; without it the global
     * min_height..max_height stands for every tile (refused when both are 0). surface_at may be
     * NULL (surfaces then by height and slope as for the built-in planet). */
    float (*height_at)(void *user, terra_vec3 dir);
    terra_status (*height_range)(void *user, terra_vec3 centre, double chord, float *lo, float *hi);
    terra_surface (*surface_at)(void *user, terra_vec3 dir, float height);
    void *user;
    float min_height, max_height;
    /* A geographic archive's ground laid over the planet's (wgs84 only): inside the grid's bounds
     * its heights exactly, the planet's own beyond overlay_blend_m outside them, a smooth blend
     * between (no step, so no wall either). Must outlive the planet. */
    const terra_geo_grid *overlay;
    double overlay_blend_m;  /* 0 = 4000 m */
} terra_planet_desc;

typedef struct terra_planet terra_planet;

TERRA_API terra_status terra_planet_create(const terra_planet_desc *desc, terra_planet **out);
TERRA_API void terra_planet_destroy(terra_planet *p);
/* The resolved description (defaults filled in). */
TERRA_API const terra_planet_desc *terra_planet_get_desc(const terra_planet *p);
/* A conservative bound of every height the planet has. */
TERRA_API void terra_planet_height_bounds(const terra_planet *p, float *lo, float *hi);

/* ---- directions and faces --------------------------------------------------------------------- */

/* The unit direction of face coordinates (s, t) in [-1, 1] (a little beyond works too: it continues
 * the face's mapping). */
TERRA_API terra_vec3 terra_planet_face_dir(int face, double s, double t);
/* The face a direction (any length but 0) falls on and its coordinates there. */
TERRA_API int terra_planet_dir_face(terra_vec3 dir, double *s, double *t);
/* Latitude and longitude in degrees to the unit direction, and back (lat in [-90, 90], lon in
 * (-180, 180]). */
TERRA_API terra_vec3 terra_planet_latlon_dir(double lat_deg, double lon_deg);
TERRA_API void terra_planet_dir_latlon(terra_vec3 dir, double *lat_deg, double *lon_deg);
/* The local frame at a direction: east, north (toward +y; -z at the poles) and up (the direction). */
TERRA_API void terra_planet_frame(terra_vec3 dir, terra_vec3 *east, terra_vec3 *north, terra_vec3 *up);

/* ---- the ground ------------------------------------------------------------------------------- */

/* Height over the reference surface along a direction (any length but 0), and the ground point there. */
TERRA_API float terra_planet_height(const terra_planet *p, terra_vec3 dir);
TERRA_API terra_vec3 terra_planet_ground_point(const terra_planet *p, terra_vec3 dir);
/* The point `height` metres over the reference surface along its normal `dir` (any length but 0). */
TERRA_API terra_vec3 terra_planet_point(const terra_planet *p, terra_vec3 dir, double height);
/* The reverse: the unit normal of the reference surface through `pos` (its foot there) and, when
 * `height` is not NULL, pos's height over the surface (geodetic height on an ellipsoid, to
 * micrometres). A sphere's is pos's direction. */
TERRA_API terra_vec3 terra_planet_up_at(const terra_planet *p, terra_vec3 pos, double *height);
/* The ground under a body at world position `pos`: its height above the ground (negative below),
 * the up vector (gravity pulls along its negation) and the ground's unit normal there (may be NULL). */
TERRA_API double terra_planet_altitude(const terra_planet *p, terra_vec3 pos, terra_vec3 *up, terra_vec3 *normal);
/* A conservative range of the heights over every direction within `chord` (Euclidean, on the unit
 * sphere) of the unit direction `dir` (by interval arithmetic, never sampling: ray casts, physics). */
TERRA_API terra_status terra_planet_height_range_near(const terra_planet *p, terra_vec3 dir, double chord, float *lo,
                                                      float *hi);
/* The first point where the ray from `origin` along `dir` (any length but 0) meets the ground within
 * max_m metres (0: no limit): *t_m its distance, *hit the ground point under it (either may be NULL).
 * Pieces of the ray are dropped only when they pass wholly above the highest ground their directions
 * can have (terra_planet_height_range_near), so every point of the ray before *t_m is above the
 * ground; the point at *t_m is above it by at most that range's slack over a piece of 1 cm + 1e-7 of
 * the distance (test_planet: centimetres near the eye, a few metres from 10,000 km). False when the
 * ray leaves the planet or passes max_m first. With t_m and hit both NULL only whether it meets the
 * ground is asked, which is answered as soon as a point of the ray is found under it. */
TERRA_API bool terra_planet_raycast(const terra_planet *p, terra_vec3 origin, terra_vec3 dir, double max_m, double *t_m,
                                    terra_vec3 *hit);
/* A conservative range of the heights over tile `key` (by interval arithmetic, never sampling). */
TERRA_API terra_status terra_planet_height_range(const terra_planet *p, terra_tile_key key, float *lo, float *hi);

/* ---- tiles ------------------------------------------------------------------------------------ */

/* The direction of lattice point (i, j) of tile `key` (i, j from -2 to cells + 2). */
TERRA_API terra_vec3 terra_planet_tile_dir(const terra_planet *p, terra_tile_key key, int i, int j);
/* Tiles along a face's side at a level, and whether a key names a tile of this planet. */
TERRA_API int32_t terra_planet_tiles_per_side(const terra_planet *p, int level);
TERRA_API bool terra_planet_key_valid(const terra_planet *p, terra_tile_key key);
/* The tile's origin: the ground sphere's point under the tile's centre, in whole metres (vertices
 * are relative to it, and whole metres minus an eye's whole metres stay exact in float while they
 * are within 2^24 m of each other: every eye within 10,000 km of an Earth-sized planet's ground). */
TERRA_API terra_vec3 terra_planet_tile_origin(const terra_planet *p, terra_tile_key key);
/* A sphere holding every ground point of the tile for heights in [lo, hi] (from
 * terra_planet_height_range), and the tile's angular radius: the largest angle between its centre
 * direction and a corner's. */
TERRA_API void terra_planet_tile_bounds(const terra_planet *p, terra_tile_key key, float lo, float hi, terra_vec3 *centre,
                                        double *radius, double *angle_rad);
/* The same ground as a cap seen from the planet's centre: every ground point of the tile for heights
 * in [lo, hi] lies within *angle_rad of the unit direction *dir (from the centre) and between *r_lo
 * and *r_hi from the centre. On a sphere the tile's own cap; on an ellipsoid widened for the
 * normals' spread (a point lies within the largest geodetic-geocentric difference of its normal).
 * terra_cap_distance gives the least distance from an eye to it. */
TERRA_API void terra_planet_tile_cap(const terra_planet *p, terra_tile_key key, float lo, float hi, terra_vec3 *dir,
                                     double *angle_rad, double *r_lo, double *r_hi);

/* Bytes of scratch terra_planet_build needs. */
TERRA_API size_t terra_planet_scratch_bytes(int cells);
/* Meshes a tile into out[terra_grid_vertex_count(cells)] (grid.h's vertex, positions and morph
 * targets relative to terra_planet_tile_origin; normals encoded with +y as the pole as there, so
 * they decode to world (x, y, z) the same way), drawn with terra_grid_indices. Morph targets are
 * the even lattice points beside odd ones, exactly the parent's samples (on a face's edge the
 * lesser of the two by position, so the faces on both sides morph it alike). Allocates nothing. */
TERRA_API terra_status terra_planet_build(const terra_planet *p, terra_tile_key key, terra_grid_vertex *out,
                                          void *scratch, terra_grid_info *info);

/* Each level's geometric error in metres: how far a level-L tile's triangles depart from the
 * ground, measured at create over sampled cells of every face (the chord's sag over the sphere
 * counted). */
TERRA_API float terra_planet_level_error(const terra_planet *p, int level);

/* The tile of `level` holding a direction (any length but 0; a position's is terra_planet_up_at). */
TERRA_API terra_tile_key terra_planet_key_at(const terra_planet *p, terra_vec3 dir, int level);

/* ---- colliders: the finest ground around bodies ----------------------------------------------
 * A block is a tile of the collider level (0, the finest, by default) meshed as terra_planet_build
 * meshes it, vertices relative to its origin: a local frame at the ground, so a physics engine
 * keeps full precision 6,371 km from the planet's centre (place the block's mesh at its origin).
 * Each update stands, for every body, the tile under it now and under where it will be lead_s
 * later, with their eight neighbours (across face edges and corners too), and lets go of the blocks
 * no body needs any more. */
typedef struct terra_planet_colliders_desc {
    const terra_planet *planet; /* required; must outlive the colliders */
    int level;                  /* the blocks' level; 0 = the finest */
    int max_blocks;             /* 0 = 4096 */
    double lead_s;              /* 0 = 0.25 s */
} terra_planet_colliders_desc;

typedef struct terra_planet_block {
    terra_tile_key key;
    terra_vec3 origin;              /* terra_planet_tile_origin */
    const terra_grid_vertex *verts; /* terra_grid_vertex_count(cells) of them, relative to origin */
    uint32_t stood;                 /* the update that stood it (1 = the first) */
} terra_planet_block;

typedef struct terra_planet_colliders terra_planet_colliders;

TERRA_API terra_status terra_planet_colliders_create(const terra_planet_colliders_desc *desc, terra_planet_colliders **out);
TERRA_API void terra_planet_colliders_destroy(terra_planet_colliders *c);
/* Bodies at positions pos[n] moving at vel[n] (may be NULL: at rest). TERRA_E_CAPACITY when they need
 * more than max_blocks; after any failure the blocks standing are still whole (those no body wanted let
 * go, as many new ones stood as could be). */
TERRA_API terra_status terra_planet_colliders_update(terra_planet_colliders *c, const terra_vec3 *pos, const terra_vec3 *vel,
                                                     int n);
/* The standing blocks (valid until the next update), and the one under a position (NULL: none). */
TERRA_API int terra_planet_colliders_blocks(const terra_planet_colliders *c, const terra_planet_block **blocks);
TERRA_API const terra_planet_block *terra_planet_colliders_block_at(const terra_planet_colliders *c, terra_vec3 pos);
/* The resolved description (defaults filled in). */
TERRA_API const terra_planet_colliders_desc *terra_planet_colliders_get_desc(const terra_planet_colliders *c);

/* ---- geographic grids: real ground laid over a planet ---------------------------------------------
 * Heights over WGS84 at latitudes and longitudes in a regular grid (samples at the bounds' corners
 * and evenly between, rows from the south), as terra_geo_grid_from_archive (archive_io.h) samples a
 * geographic archive's tiles; a planet given one as its overlay draws that ground where it lies. */
typedef struct terra_geo_grid_desc {
    double bounds[4];     /* west, south, east, north degrees: the outermost samples' */
    int width, height;    /* samples along a row and a column, 2 to 65536 */
    const float *heights; /* width x height metres; NaN: no ground there (the planet's own shows) */
} terra_geo_grid_desc;

TERRA_API terra_status terra_geo_grid_create(const terra_geo_grid_desc *desc, terra_geo_grid **out);
TERRA_API void terra_geo_grid_destroy(terra_geo_grid *g);
/* The description, its heights the grid's own copy. */
TERRA_API const terra_geo_grid_desc *terra_geo_grid_get_desc(const terra_geo_grid *g);
/* Every height's bounds (NaN samples aside) and whether it has NaN samples (holes may be NULL). */
TERRA_API void terra_geo_grid_height_bounds(const terra_geo_grid *g, float *lo, float *hi, bool *holes);
/* The bilinear height at a latitude and longitude: NaN outside the bounds or beside a hole. */
TERRA_API float terra_geo_grid_height(const terra_geo_grid *g, double lat_deg, double lon_deg);
/* A conservative range of the heights over a box of degrees (clamped to the bounds); false when the
 * box misses the grid or holds only holes. */
TERRA_API bool terra_geo_grid_range(const terra_geo_grid *g, double west, double south, double east, double north, float *lo,
                                    float *hi);

/* ---- horizon ---------------------------------------------------------------------------------- */
/* On an ellipsoid selection runs this test in its scaled space (x / a, y / b, z / a), where the
 * ellipsoid is the unit ball, as Cesium's EllipsoidalOccluder does: a tile's cap is widened by the
 * map's largest stretch of angles (a / b) and its heights' lean, its top raised to 1 + hi / b. */

/* Whether every point within `angle_rad` of the unit direction `dir` at a distance from the origin
 * up to `top_radius` is hidden from `eye` by the solid ball of `occluder_radius` around the origin
 * (a tile's cap raised by its maximum height). Two points outside a ball see each other exactly when
 * the angle between their directions is at most the sum of their horizon angles, acos(ball radius /
 * distance); so the cap is hidden when its direction is farther from the eye's than the eye's horizon
 * angle, plus the cap's angle, plus the horizon angle of its top. Never true for an eye inside the
 * ball. */
TERRA_API bool terra_horizon_hides(terra_vec3 eye, double occluder_radius, terra_vec3 dir, double angle_rad,
                                   double top_radius);

/* The least distance from `eye` to any point within `angle_rad` of the unit direction `dir` at a
 * distance from the origin between r_lo and r_hi (a tile's cap, terra_planet_tile_cap): past the
 * cap's edge, at an angle g from the eye's direction, the nearest such point lies at the distance
 * from the origin nearest |eye| cos g (the law of cosines); inside it straight above or below. A
 * lower bound of the distance to any ground of the tile, tighter than its bounding sphere's for
 * tiles wide against their distance (planet selection splits by the larger of the two). */
TERRA_API double terra_cap_distance(terra_vec3 eye, terra_vec3 dir, double angle_rad, double r_lo, double r_hi);

/* ---- selection -------------------------------------------------------------------------------- */

typedef struct terra_planet_select_desc {
    double max_sse_px;        /* tau; 0 = 2 pixels */
    int view_height_px;       /* 0 = 1080 */
    double view_fov_y_rad;    /* 0 = 60 degrees */
    double morph_start_ratio; /* 0 = 0.5, as on the plane */
    int max_tiles;            /* 0 = 4096, up to 2^20 */
    bool no_horizon_culling;  /* for measuring: keep tiles over the horizon */
    /* false (CDLOD): ranges by level from tau (a tile is split exactly where its children's error
     * projects to tau), each level morphing into the next across the far part of its range; where
     * neighbours meet at different levels or morphs their skirts close the gap (gl.h). true: drawn
     * unmorphed (morph start = end = 0), each tile refined while its level's error projected from its
     * distance exceeds tau: the same tiles, popping where CDLOD morphs. */
    bool by_error;
    /* CDLOD's morph margin (as on the plane): a level is never drawn nearer than its tile's diagonal
     * over morph_start_ratio past the level below, so morphed neighbours meet by construction, one
     * level apart at most. On ground smoother than a level's spacing (the planet's: errors 2-8% of
     * it) the margin, not tau, sets the ranges: with 16-cell tiles about twice the triangles, with
     * 64-cell tiles ten times (docs/BENCHMARKS.md). Ignored with by_error. */
    bool morph_margin;
} terra_planet_select_desc;

/* One tile to draw: its key, morph range and bounding sphere. */
typedef struct terra_planet_tile {
    terra_tile_key key;
    int level;
    float morph_start, morph_end;
    terra_vec3 centre;
    double radius;
} terra_planet_tile;

typedef struct terra_planet_select_stats {
    int visited, drawn;
    int culled_frustum, culled_horizon; /* subtrees dropped */
    int crack_risk;                     /* as on the plane (select.h) */
    double sse_px_max;                  /* largest projected error of a drawn tile above level 0 */
    int per_level[TERRA_PLANET_MAX_LEVELS];
} terra_planet_select_stats;

typedef struct terra_planet_select terra_planet_select;

/* Ranges by level follow from tau, the view and the planet's level errors (select.h, level_error):
 * a level hands over where the next one's error projects to tau (with morph_margin no sooner than
 * the margin allows). */
TERRA_API terra_status terra_planet_select_create(const terra_planet_select_desc *desc, const terra_planet *p,
                                                  terra_planet_select **out);
TERRA_API void terra_planet_select_destroy(terra_planet_select *s);
/* Tau from now on (the ranges follow), and tau now. */
TERRA_API terra_status terra_planet_select_set_sse(terra_planet_select *s, double max_sse_px);
TERRA_API double terra_planet_select_sse(const terra_planet_select *s);
/* The walk: each of the six faces from its root down, by the least 3-D distance from the eye to each
 * tile's ground (its bounding sphere's, or its cap's between its lowest and highest ground, whichever
 * is farther); a tile is dropped when its sphere is outside the frustum (may be NULL) or
 * its cap, raised to its highest ground, is hidden by the ball of radius + the planet's lowest height
 * (terra_horizon_hides).
 * Allocates nothing; *tiles is valid until the next run. */
TERRA_API terra_status terra_planet_select_run(terra_planet_select *s, terra_vec3 eye, const terra_frustum *frustum,
                                               const terra_planet_tile **tiles, int *count);
TERRA_API const terra_planet_select_stats *terra_planet_select_get_stats(const terra_planet_select *s);
TERRA_API double terra_planet_select_range(const terra_planet_select *s, int level);

#ifdef __cplusplus
}
#endif
#endif
