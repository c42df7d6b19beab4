/* libterra-gl, internal: occlusion culling by a horizon around the eye, on the plane and on a planet.
 *
 * Ground hidden behind nearer hills is most of what a low view over mountains draws. Tiles are
 * visited front to back (a visibility order: a tile that can hide another along some ray from the
 * eye comes first), each in blocks of cells; a block is drawn unless the horizon built from the
 * ground already drawn lies above all of it, and a drawn block raises the horizon.
 *
 * The horizon is a maximum elevation slope ((height - eye height) / horizontal distance) per bin of
 * azimuth around the eye, raised only where the drawn ground surely reaches: along the tile's grid
 * lines of even index every sample stays on its line whatever the morph (an odd one slides onto the
 * even one below), so the drawn ground along such a line runs over exactly that line, no lower than
 * the polyline through its samples, each odd one lowered to the chord of its neighbours where it
 * may morph (the drawn line then lies within the triangle of the three); a block whose vertices do
 * not morph this frame raises its odd lines too. A bin is raised where a block's line spans the
 * whole bin (or the line through it and a neighbour block drawn before does), by that polyline's
 * lowest point between the bin's edges' crossings of the line, over the crossings' distance. Why a
 * block whose points all lie below the horizon of their azimuth is hidden: along the vertical
 * half-plane of an azimuth, the ray from the eye to such a point passes under a drawn point nearer
 * (the front-to-back order: every line raising the bin lies nearer than anything visited later
 * along that azimuth), and the eye is above the drawn ground at its foot (checked every frame; else
 * nothing is culled), so the ray meets the drawn ground before the point; a point under a block
 * left out is itself behind nearer drawn ground, so what is left out never opens the drawn ground
 * to a ray. A block (two cells a side for tiles of up to 32 cells) is tested by its highest point
 * at its nearest distance, then, where larger, by each two-cell patch of it (aligned at even
 * samples, so no morph moves its ground out of its square). Where skirts and morphs leave the drawn
 * ground open (a stand-in far coarser than the ground about the eye, over the eye) the argument
 * fails: such frames are not culled. test_gl_occlusion draws views with and without culling and
 * finds the pictures and depth buffers equal.
 */
#ifndef TERRA_GL_OCCLUSION_H
#define TERRA_GL_OCCLUSION_H

#include "terra/grid.h"
#include "terra/planet.h"

#include <stdbool.h>
#include <stdint.h>

/* How a grid tile of `cells` is cut: blocks of `block` cells (at least 2), `blocks` along a side
 * (at most 16: a tile's blocks fit a mask of OCC_MASK_WORDS words), the shared grid indices laid
 * out block by block in Morton order (occ_grid_indices); `floats` of summary per tile. */
typedef struct occ_layout {
    int cells, block, blocks, floats;
} occ_layout;

void occ_layout_for(int cells, occ_layout *out);
/* The Morton position of block (bi, bj) (bi along x): its bit in a mask, its place in the indices. */
int occ_block_index(int bi, int bj);
/* The grid's shared indices (terra_grid_index_count(cells)), block after block in Morton order,
 * each block's cells in strips as terra_grid_indices lays them. */
void occ_grid_indices(const occ_layout *L, uint32_t *out);
/* A grid tile's summary (its blocks' and two-cell patches' highest points, its even lines' samples,
 * its lowest sample) into out[L->floats]; false where its samples (`spacing` apart) do not lie and
 * morph as the lattice has them. */
bool occ_summarise(const occ_layout *L, const terra_grid_vertex *v, double spacing, float *out);

/* One tile of the frame. In: key, summary (NULL for a mesh tile or a tile without one: a single
 * block that hides nothing), hi (its highest drawn point), verts (a grid tile's vertices while
 * drawn, or NULL), morph, standin; draw and id are the caller's. Out: mask, the blocks to draw (bit =
 * Morton position); order (scratch). */
#define OCC_MASK_WORDS 4
typedef struct occ_tile {
    uint64_t key, order;
    const float *summary;
    const terra_grid_vertex *verts;
    float hi, morph[2]; /* morph: its morph range this frame */
    bool standin;       /* drawn in place of finer tiles still coming */
    int draw, id; /* the caller's: its draw, its resident tile */
    terra_vec3 origin; /* on a planet: its origin (terra_planet_tile_origin) */
    uint64_t mask[OCC_MASK_WORDS];
} occ_tile;

static inline bool occ_drawn(const occ_tile *t, int m) { return t->mask[m >> 6] >> (m & 63) & 1; }
static inline bool occ_any(const occ_tile *t) {
    uint64_t any = 0;
    for (int w = 0; w < OCC_MASK_WORDS; w++) any |= t->mask[w];
    return any != 0;
}

/* Sorts tiles[0, n) front to back from the eye and fills every mask; whether it culled. All blocks
 * stay where `cull` is false or the frame cannot be culled: the eye not above the drawn ground at
 * its foot (the morphed triangles there), or a stand-in within two of its sides of the foot
 * reaching the eye's height. `no_morph`: the frame is drawn unmorphed. `scratch`: OCC_SCRATCH floats
 * set up once by occ_scratch_init (the horizon's bins, then tables of their edges' directions). */
#define OCC_BINS 16384
#define OCC_SCRATCH (OCC_BINS + 4 * (OCC_BINS + 1))
void occ_scratch_init(float *scratch);
bool occ_frame(const occ_layout *L, double tile0_size, double eye_x, double eye_y, double eye_z, bool cull,
               bool no_morph, occ_tile *tiles, int n, float *scratch);

/* ---- on a planet (occlusion_planet.c) ----------------------------------------------------------------
 * The same horizon about the eye, in the half-planes through the eye and the planet's centre: along
 * each, the drawn ground is a curve around the centre, and a point whose slope from the eye ((height
 * over the eye's horizontal plane) / distance from the axis through the eye and the centre) is below
 * that of a drawn point nearer in angle about the centre is seen along a ray that passes under it, so
 * meets the drawn ground first, as on the plane. Tiles are visited in an order where nothing visited
 * later lies nearer along any such half-plane: faces by how squarely they face the eye's direction
 * (of two faces, the one on the eye's side of the great circle between them first), then per level
 * the child on the eye's side of its parent's two splitting great circles first; a tile's blocks (two
 * cells a side) by how many of its block lines (great circles too: the lattice's lines of constant
 * face coordinate) lie between them and the eye. A drawn block raises the bins its border lines (with
 * their drawn pieces beside it) span whole, and where it is drawn unmorphed its middle lines too, to
 * the least slope of each two-cell piece's three samples: a morphed sample lies between itself and a
 * neighbour on its line, and the slope along a straight piece is no lower than at its ends (a
 * quasi-concave function of the point). A block's ground lies in the hull of its nine samples; it is
 * left out where that hull lies below the horizon over every bin its azimuths touch, wholly outside one
 * of the view's sides, or in the shadow of a ball under every drawn tile. On an ellipsoid (whose ground
 * points do not lie on their lattice's great circles) only the view's sides cull. Tiles of at most 32
 * cells; test_gl_planet draws views culled and whole and finds them equal. */
/* Floats of a planet tile's summary: 0 where the layout has no planet summary (blocks not of 2 cells). */
int occ_planet_floats(const occ_layout *L);
/* The summary of a planet tile with origin `o` (its samples and its bounding sphere, relative to its
 * origin, and how low its drawn ground reaches) into out[occ_planet_floats(L)]; false where the morph
 * targets are not the lattice's. */
bool occ_planet_summarise(const occ_layout *L, const terra_planet *p, terra_vec3 o, const terra_grid_vertex *v, float *out);
/* occ_frame on a planet: tiles sorted front to back, every mask filled; whether it culled. `sides`: the
 * inward unit normals of the view's four side planes (through the eye), or NULL: blocks wholly outside
 * one are left out too (a pixel's ray runs inside them, so no ground it meets is there), whether or not
 * the horizon may hide (the eye above the drawn ground at its foot, no stand-in about it reaching the
 * eye). */
bool occ_planet_frame(const occ_layout *L, const terra_planet *p, terra_vec3 eye, const terra_vec3 sides[4], bool cull,
                      bool no_morph, occ_tile *tiles, int n, float *scratch);

/* ---- shared by both ---------------------------------------------------------------------------------- */
/* Azimuth margins (in pseudo-angle units, about radians) and height margins (metres) that cover the
 * float rounding of drawn positions (a centimetre at 100 km) and heights. */
#define EPS_ANGLE 1e-5
#define PAD_M 0.01
#define MIN_OCCLUDER_M 2.0 /* nearer pieces may lie inside the near plane: never occluders */
#define BIN_SCALE (OCC_BINS / 4.0)
#define BIN(b) ((unsigned)(b) & (OCC_BINS - 1))

/* A pseudo-angle of the direction (x, z) in [0, 4): monotonic in atan2(z, x), and that of the
 * opposite direction is 2 more (mod 4), so an arc under half a turn spans less than 2. */
static inline double pangle(double x, double z) {
    if (z >= 0) return x >= 0 ? z / (x + z) : 1 + -x / (z - x);
    return x < 0 ? 2 + -z / (-x - z) : 3 + x / (x - z);
}

static inline double wrap(double d) { return d > 2 ? d - 4 : d <= -2 ? d + 4 : d; }

#endif
