/* terra grid: one CDLOD grid tile meshed from a source.
 *
 * Every tile is the same grid of N×N cells ((N+1)² vertices), N a power of two from 16 to 256.
 * A level-L tile's side is tile0 × 2^L metres and its sample spacing tile0 / N × 2^L. Tile
 * (level L, x, y) covers world x in [x·side, (x+1)·side] and z in [y·side, (y+1)·side]; its
 * vertex (i, j) is the global lattice point (x·N + i, y·N + j) at that level's spacing, so two
 * tiles sharing an edge sample the same points and their edge heights are bit-identical.
 *
 * Morphing (CDLOD): each vertex carries its morph target, the vertex it collapses onto on the
 * parent's grid: the even vertex beside it (odd indices step down by one), with the height there.
 * A tile whose vertices are all fully morphed is exactly its parent's surface: every cell is split
 * along the same diagonal, so the collapsed triangles are the parent's triangles.
 */
/* Threads: terra_grid_build keeps no state: several threads may build tiles at once, each with its own
 * out and scratch; it calls the source on the calling thread (see source.h). The rest is pure. */
#ifndef TERRA_GRID_H
#define TERRA_GRID_H

#include "terra/source.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TERRA_GRID_MIN_CELLS 16
#define TERRA_GRID_MAX_CELLS 256

typedef struct terra_grid_desc {
    double tile0_size;  /* side of a level-0 tile in metres; 0 = 64 */
    int cells;          /* cells along a side, power of two in [16, 256]; 0 = 64 */
} terra_grid_desc;

/* One vertex, 32 bytes. Positions are relative to the tile origin (x·side, 0, y·side). */
typedef struct terra_grid_vertex {
    float x, y, z;         /* position: x, z in [0, side], y the height in metres */
    float mx, my, mz;      /* morph target on the parent grid */
    int8_t normal[2];      /* unit normal, octahedron-encoded with +y as the pole: terra_oct_decode
                              gives (nx, nz, ny) */
    terra_surface surface; /* surface id of this sample */
    uint8_t level;
    int8_t morph_normal[2];/* the parent's normal at the morph target, encoded the same way: bit for
                              bit what the parent tile stores there, so light morphs with the shape */
    uint16_t colour;       /* mesh tiles (terra_tile_mesh_expand): the vertex's colour 0, 1 or 2, different at
                              the three corners of every triangle, for the barycentric surface blend; grid
                              tiles: 0 (the renderer colours grid vertex (i, j) with (i + j) mod 3) */
} terra_grid_vertex;

/* Summary of one built tile. */
typedef struct terra_grid_info {
    float min_height, max_height; /* of its vertices */
    double origin_x, origin_z;    /* world position of vertex (0, 0) */
    double side, spacing;
} terra_grid_info;

/* Checks a description and fills in defaults; TERRA_E_INVALID names the broken rule. */
TERRA_API terra_status terra_grid_desc_resolve(const terra_grid_desc *in, terra_grid_desc *out);

static inline int terra_grid_vertex_count(int cells) { return (cells + 1) * (cells + 1); }
static inline int terra_grid_index_count(int cells) { return 6 * cells * cells; }
/* Floats of scratch that terra_grid_build needs: heights and surfaces two samples wider on every
 * side (the extra rings give edge normals from both sides of the edge, at this level's spacing and
 * at the parent's). */
static inline int terra_grid_scratch_floats(int cells) {
    int n = (cells + 5) * (cells + 5);
    return n + (n + 3) / 4;
}

/* Side of a tile at `level` (a resolved desc; NULL: the defaults'). */
TERRA_API double terra_grid_tile_side(const terra_grid_desc *d, int level);

/* Meshes tile `key` from `src` into out[terra_grid_vertex_count(cells)], using caller-owned
 * scratch[terra_grid_scratch_floats(cells)]. Allocates nothing. */
TERRA_API terra_status terra_grid_build(const terra_source *src, const terra_grid_desc *d, terra_tile_key key,
                              terra_grid_vertex *out, float *scratch, terra_grid_info *info);

/* The index buffer every tile shares: terra_grid_index_count(cells) indices, two triangles per cell,
 * every cell split along the same diagonal, counter-clockwise seen from above (+y), ordered in
 * strips of columns so the post-transform vertex cache is reused. */
TERRA_API void terra_grid_indices(int cells, uint32_t *out);

/* Measures the geometric error of each level's grid tiles over `src` (for terra_select_desc's
 * level_error): out[L] for L in 0..levels-1 is the largest vertical distance between the surface a
 * level-L tile draws (its cells split as terra_grid_indices splits them) and the source sampled four
 * times finer, over windows of 16 x 16 cells in nine tiles per level around (x, z) (the tile there
 * and eight three tiles away). An estimate from samples, not a bound: rougher ground elsewhere is
 * drawn with more error there. Asks the source for about 40,000 samples per level. */
TERRA_API terra_status terra_grid_level_errors(const terra_source *src, const terra_grid_desc *d, int levels, double x,
                                               double z, float *out);

/* The morph factor CDLOD applies to a vertex at distance `dist` from the eye for a level whose
 * morph runs from morph_start to morph_end: 0 below the start, 1 past the end. */
static inline float terra_morph_factor(double dist, float morph_start, float morph_end) {
    double k = (dist - morph_start) / (double)(morph_end - morph_start);
    return (float)(k < 0 ? 0 : (k > 1 ? 1 : k));
}

#ifdef __cplusplus
}
#endif
#endif
