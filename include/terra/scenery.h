/* Scenery meshes for the cook: the ground read out of a scene (OBJ+MTL, PLY, glTF 2.0, FBX, ...
 * through assimp: terra_scenery_read, libterra-cook) and cut along the finest tile grid
 * (terra_scenery_cut_*, the core).
 *
 * What counts as ground is what the scenery says, not what its triangles look like:
 *  - a node whose own transformation is not the identity (an origin, rotation or scale of its own)
 *    is an object standing on the ground: it is left out with its whole subtree;
 *  - a mesh whose material has an alpha channel (opacity below 1, a glTF alphaMode other than
 *    OPAQUE, or a diffuse / base-colour texture with alpha) is vegetation or a fence: left out;
 *  - everything else is ground whichever way it faces (the side of an embankment, a retaining
 *    wall). The root node, when it holds no mesh itself, is a container: its transformation is
 *    the scene's own axes and units (FBX unit scale, an up-axis conversion), applied to everything
 *    and never judged. A root that holds meshes (assimp makes a glTF's single root node the
 *    scene's root) is judged like any other node.
 * Each left-out node is recorded (name, reason, triangles) for the report and the metadata.
 *
 * Axes: positions are scenery metres as assimp gives them, x east, y up, z the third axis. The
 * cook's plane (terra/cook.h, local frame) takes plane x = scenery x, plane y = scenery z (through
 * grid.origin and grid.unit) and height = scenery y. The plane seen from above is the scenery's
 * top view mirrored (y up, x east makes z point south), so the cut turns every triangle
 * counter-clockwise in the plane whichever way it faced.
 */
/* Threads: terra_scenery_read runs one at a time in a process (assimp keeps its last error in one
 * place); terra takes no lock, so the caller serialises. terra_scenery_read_isolated shares nothing
 * between calls. A terra_scenery_cut is read-only once built:
 * terra_scenery_cut_tile may run on any number of threads at once, as the pyramid's make_finest.
 * terra_scenery_drop_repeats and terra_scenery_cut_build keep no state. */
#ifndef TERRA_SCENERY_H
#define TERRA_SCENERY_H

#include "terra/cook.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- reading (libterra-cook, io/cook/scenery.c) ---------------------------------------------- */

typedef enum terra_scenery_reason {
    TERRA_SCENERY_OBJECT = 1,   /* under a transformation of its own */
    TERRA_SCENERY_ALPHA         /* its material has an alpha channel or opacity below 1 */
} terra_scenery_reason;

typedef struct terra_scenery_left_out {
    char *name;                 /* the node's name ("" if it has none) */
    terra_scenery_reason reason;
    uint64_t triangles;         /* left out: the node's alpha meshes, or an object's whole subtree */
} terra_scenery_left_out;

/* One ground material. Its index in the table is the material id the vertices carry. */
typedef struct terra_scenery_layer {
    char *name;
    float tint[3];              /* the diffuse (glTF: base) colour, RGB 0..1; 1, 1, 1 without one */
    /* Metres one texture repeat covers: the median over the material's ground triangles of (sum of
     * the 3-D edge lengths / sum of the UV edge lengths), texture coordinate set 0. 0: no texture
     * coordinates. */
    double metres_per_repeat;
    uint64_t triangles;         /* ground triangles with this material */
} terra_scenery_layer;

/* A file the scenery names (MTL, textures, glTF buffers and images), for the cook's cache
 * manifest. Embedded data (data: URIs, glTF/FBX embedded textures) is not a file. */
typedef struct terra_scenery_file {
    char *path;                 /* resolved against the scenery's folder */
    bool present;               /* a readable regular file */
} terra_scenery_file;

/* The ground as an indexed triangle soup. Vertices are unique by exact position: one that two
 * materials share carries the smaller id. Triangles keep the source's vertex order. */
typedef struct terra_scenery {
    size_t vertex_count;
    double *position;           /* 3 per vertex: scenery x, y (up), z; metres */
    uint16_t *material;         /* per vertex: index into layers */
    size_t triangle_count;
    uint32_t *tri;              /* 3 per triangle */
    terra_scenery_layer *layers;
    size_t layer_count;
    terra_scenery_left_out *left_out;
    size_t left_out_count;
    terra_scenery_file *files;
    size_t file_count;
    /* Ground triangles dropped: no area (3-D area below 1e-12 of the longest edge squared, repeated
     * vertices included), the same three positions as an earlier triangle (either order), and
     * faces that are points or lines. */
    size_t degenerate, duplicate, not_triangles;
    /* Triangles the file declares that assimp did not deliver: a glTF triangle with an index past
     * its primitive's vertices (assimp drops those one by one; the count is the triangles the
     * glTF's primitives declare less those assimp gives). 0 for other formats, which refuse such
     * a file or have no count to compare with. */
    size_t out_of_range;
} terra_scenery;

/* Deepest node read: a node more than this many levels below the scene's root is refused. */
#define TERRA_SCENERY_MAX_DEPTH 1000

typedef struct terra_scenery_desc {
    const char *path;
    size_t max_triangles;       /* refuse (TERRA_E_CAPACITY) more ground triangles; 0: 2^31 */
    /* Memory budget (bytes; 0: half of physical memory, terra_raster_memory_budget): the files a
     * read opens may add up to no more (each counted once, however often it is read);
     * terra_scenery_read_isolated runs its reader under this much address space. */
    size_t max_bytes;
} terra_scenery_desc;

/* Reads the ground of a scenery in this process. Errors name the file, the place (mesh, vertex,
 * header line, JSON member, node) and the problem: missing, unreadable, empty (0-byte) or not a
 * regular file; assimp's own error text; a position that is NaN or infinite; more than 65,536
 * ground materials; no ground left. One read at a time: assimp's C interface keeps its last error
 * in one place for the process. A texture's alpha is looked for in PNG files and embedded images
 * (PNG or raw texels); other image formats count as opaque.
 *
 * Hostile files are refused before assimp allocates for them (io/cook/scenery_check.c): a PLY
 * or OFF header declaring more elements than the file's bytes can hold; a glTF node graph with a
 * cycle, a node with two parents, a child index out of range or a node deeper than
 * TERRA_SCENERY_MAX_DEPTH (any format's node tree is held to that depth after import too); a glTF
 * buffer or image URI that is absolute, has a scheme other than data:, or climbs out of the
 * scene's folder with "..". Every file assimp or terra opens goes through one gate: it must
 * resolve (symlinks followed) inside the scene's folder or be the scene itself, be a regular file
 * (never a FIFO or a device: nothing blocks), and the bytes read add up to no more than
 * max_bytes. A file the scenery names that breaks these rules is an error naming it. */
TERRA_API terra_status terra_scenery_read(const terra_scenery_desc *desc, terra_scenery *out);

/* terra_scenery_read in a child process, `reader` (NULL: $TERRA_SCENERY_READER, else terra-scenery
 * next to the running program), whose address space is limited to desc->max_bytes (not in
 * sanitizer builds: their shadow memory needs more): assimp's memory, a crash or an abort in it
 * stay there. The same ground and errors, plus TERRA_E_CAPACITY when the reader runs past the
 * budget and TERRA_E_IO "the scenery reader crashed on FILE (signal N, NAME)". Any number may run
 * at once. */
TERRA_API terra_status terra_scenery_read_isolated(const terra_scenery_desc *desc, const char *reader, terra_scenery *out);
TERRA_API void terra_scenery_free(terra_scenery *s);

/* ---- cutting along the tile grid (the core, src/cook/cut.c) --------------------------------- */

/* Drops the triangles (3 indices each) whose three vertices an earlier one has already, in any
 * order, keeping the order of the rest; *count becomes how many are left, *dropped how many went.
 * TERRA_E_NOMEM. */
TERRA_API terra_status terra_scenery_drop_repeats(uint32_t *tri, size_t *count, size_t *dropped);

typedef struct terra_scenery_cut_desc {
    const terra_cook_grid *grid;   /* local frame; plane = (scenery x, z) through origin and unit */
    /* Metres: a vertex within this distance (3-D) of an earlier vertex is welded onto it, taking
     * the smaller material id. 0: 0.001 (a millimetre). */
    double weld_tolerance;
} terra_scenery_cut_desc;

/* The soup welded, each triangle turned counter-clockwise in the plane (walls, with no area in
 * the plane, as they were), normals per welded vertex, and which triangle reaches which finest
 * tile. Read-only once built: any number of threads may make tiles at once. */
typedef struct terra_scenery_cut terra_scenery_cut;

typedef struct terra_scenery_cut_info {
    size_t vertices;            /* after welding */
    size_t welded;              /* vertices welded onto another */
    size_t collapsed;           /* triangles dropped: once welded, without area in 3-D or with
                                   the same three vertices as an earlier one */
    size_t triangles, walls;    /* kept, and of those with no area in the plane */
    size_t tiles;               /* finest tiles holding a piece */
} terra_scenery_cut_info;

/* Builds the cut index (the soup is copied; s may go afterwards). TERRA_E_INVALID for a grid that
 * is not local or a tile_units that is not positive, a non-finite position, or a soup reaching past
 * tile index +-2^31; TERRA_E_NOMEM. */
TERRA_API terra_status terra_scenery_cut_build(const terra_scenery *s, const terra_scenery_cut_desc *desc,
                                     terra_scenery_cut **out);
TERRA_API void terra_scenery_cut_free(terra_scenery_cut *c);
TERRA_API void terra_scenery_cut_get_info(const terra_scenery_cut *c, terra_scenery_cut_info *info);
/* The finest tiles that hold at least one piece: tx, ty pairs, rows (ty) then columns ascending
 * (terra_cook_pyramid_desc.finest). Owned by c. */
TERRA_API const int32_t *terra_scenery_cut_tiles(const terra_scenery_cut *c, size_t *count);

/* A terra_cook_finest_fn (user: the terra_scenery_cut). Every triangle reaching the tile is clipped
 * exactly against its four sides (x sides first, then y), the piece fanned from its first vertex;
 * nothing else is added, moved or re-triangulated. A vertex made on a tile side is computed from
 * the source edge it lies on, its endpoints in a fixed order, and a tile corner inside a triangle
 * from the triangle's segment on the x side: the tiles on either side make the same doubles. A
 * crossing that rounding leaves within 1e-12 (relative) of a grid line of the other axis - an edge
 * through a tile corner - is put on that line, so it lies inside the tiles on both sides.
 * A tile takes the triangles whose bounding box starts before its right (x1) and top (y1) sides,
 * so a wall standing exactly on a grid line is laid once, in the tile on the line's +x (+y) side.
 * Vertices are merged when exactly equal; materials ride per vertex (a vertex made on an edge takes
 * its nearer endpoint's, the lower id at the middle); normals are the welded soup's, area-weighted
 * (walls count only at vertices with no ground), interpolated along the edge or segment for made
 * vertices, so both sides of a cut agree. Every vertex lies in the tile's closed rectangle; pieces
 * with area turn counter-clockwise, wall pieces have none (up to rounding where a wall crosses a
 * tile corner, never clockwise). *error = 0 (the source itself). A tile with no pieces comes back
 * empty. */
TERRA_API terra_status terra_scenery_cut_tile(void *cut, int32_t tx, int32_t ty, terra_cook_mesh *out, double *error);

#ifdef __cplusplus
}
#endif
#endif
