/* libterra-gl: the OpenGL reference renderer (OpenGL 4.5 core through libepoxy).
 *
 * Not part of the core: libterra knows no GL. This library draws what the streamer resolved:
 *
 *  - Tiles are of two kinds: grid tiles (grid.h: (cells + 1)^2 vertices, all sharing one index
 *    list) and mesh tiles of any vertex count (tile_mesh.h, expanded for drawing by
 *    terra_tile_mesh_expand: 3-coloured corners, skirts). Every resident tile lives in ONE vertex
 *    buffer (terra_grid_vertex), and ONE index buffer holds the grid's shared indices
 *    (terra_grid_indices' triangles, laid block by block) at its start and every mesh tile's own
 *    after them. Both are sub-allocated, no buffer object per tile: a grid tile takes a range of
 *    vertices, a mesh tile a range of vertices and one of indices.
 *  - Fragmentation bound: an upload fails for want of room only when the free total of a buffer
 *    it needs (vertices, or indices) is less than the tile asks of it. Ranges are placed first-fit
 *    in a free list that merges neighbours; when no free block is large enough though the total
 *    is, that buffer is compacted: every held range slid to its start with
 *    glCopyNamedBufferSubData (in one copy where it moves by at least its length, else in chunks
 *    no longer than the move, or through a 4 MiB staging buffer where the move is shorter than
 *    that: no copy overlaps itself), which leaves one free block of the whole total. Compaction
 *    costs a GPU copy of what is held, and is rare: grid tiles alone, all one size, never need
 *    it. terra_gl_stats.compactions counts them.
 *  - Skirts close every gap. Mesh tiles carry their own (tile_mesh.h). A grid tile gets one at
 *    upload: 4 cells more vertices after its (cells + 1)^2, copies of its border vertices (same
 *    position, morph target, normals and surface; the colour the skirt's 3-colouring needs), and
 *    two triangles per border cell edge (8 cells, after the grid's in the shared index range, which
 *    every grid tile shares as it shares the grid's). The vertex stage morphs a skirt vertex exactly
 *    as the border vertex it copies and then lowers it by the tile's skirt depth: the border height
 *    range (max - min of its border samples) plus one sample spacing (side / cells). Between a tile
 *    and a neighbour at any level the gap lies under the higher of the two edges: where that edge is
 *    the finer tile's (or they are of one level), both edges run between heights of its side's
 *    samples, so the gap is within its border range; where it is the coarser's, the finer ground
 *    dips under its straight edge by at most slope x spacing / 2, which the spacing covers for
 *    slopes up to 2 (renderer.c, skirt_depth; test_gl_holes measures the gaps of real-time flights
 *    with stand-ins two levels coarser against it). The morph alone closes grid to grid when levels
 *    differ by one and the finer tile is fully morphed at the side; skirts close the rest: a
 *    stand-in (terra_stream_draw.fallback) beside finer tiles, and a grid tile beside a mesh tile.
 *    Cost: 4 cells vertices on (cells + 1)^2, and up to 8 cells triangles per grid tile on top of
 *    its 2 cells^2, drawn only along sides that can have a gap (below).
 *  - Tiles arrive through the streamer's `upload` callback, inside its per-frame budget
 *    (terra_gl_attach), and leave when the streamer lets go of them (its `release` callback).
 *  - A frame is culled and drawn on the GPU in a fixed number of draw calls whatever the tiles (one
 *    program, one vertex array; renderer.c says how): the CPU writes one record per tile (origin
 *    relative to the camera, level, morph range, skirt depth, first vertex, which skirt sides it
 *    needs) in one buffer write; a depth-only prepass replays the ground the last culled frame drew
 *    (its list, with this frame's records: only tiles resident and unmoved since); compute passes build
 *    a depth pyramid over it and test every piece of every tile (a grid tile's blocks of cells, 16 x
 *    16 at most, and its skirt in runs of a block along the ring; a mesh tile whole) against the view's
 *    sides and the pyramid, then write the pieces kept, in the frame's own order, into one index list
 *    (grid tiles) and commands (mesh tiles); the picture draws them: the skirts, then the ground, with
 *    GL_GEQUAL, so that where a skirt is exactly as near as the ground it hangs from the ground keeps
 *    the pixel. style.no_occlusion draws every piece (commands built on the CPU, the same order): the
 *    reference. Pictures and depth buffers culled and whole are equal bit for bit (test_gl_occlusion,
 *    test_gl_planet, test_gl's mesh and grid tiles): the prepass holds real fragments of the frame
 *    only, and a piece is left out only where its box lies wholly outside the view or strictly behind
 *    the prepass's farthest depth over every pixel it can cover (shaders.h). Grid tiles take 2 calls
 *    (the prepass, the picture), with mesh tiles up to 6; a frame drawn whole (no_occlusion, a fresh
 *    renderer, after a compaction) 1. The sky is a blit, not a draw. A grid tile hangs its skirt only
 *    along sides whose neighbour is not a grid tile of its level and morph range in the same frame
 *    (such a neighbour shares every sample of the side and morphs it alike: there is no gap).
 *    terra_gl_stats counts what was left out (occluded_triangles, hidden_tiles), as the GPU counts it.
 *  - Positions are camera-relative: each tile's origin minus the eye is computed in double on the
 *    CPU and handed over as a float, so nothing trembles far from the world origin.
 *  - The vertex stage applies the CDLOD morph by distance from the eye (the same rule as
 *    terra_morph_factor; a morph range whose end is not past its start does not morph, and mesh
 *    tiles never do). The fragment stage gets the three surface ids of its triangle and
 *    barycentric weights (from a 3-colouring of the vertices: (i + j) mod 3 for grid vertex
 *    (i, j), the vertex's colour for mesh tiles and grid skirts; no geometry stage), so
 *    surface tints blend across a triangle; per-vertex octahedral normals, a sun, a sky gradient
 *    and distance fog. A tile draws the eight surfaces covering most of it (terra_surface_palette,
 *    applied as it is uploaded); its other samples draw as its most common surface.
 *
 * Contexts: terra_gl_context_create_headless() (EGL, surfaceless Mesa platform: works without a
 * display or GPU, e.g. llvmpipe), or any current 4.5 core context of the caller's (GLFW).
 * Every function below except the context ones needs the renderer's context current on the
 * calling thread.
 */
/* Threads: terra_gl_* calls on a renderer or a scene come from the one thread whose GL context is
 * current, terra_gl_renderer_name included. terra_gl_context_create_headless makes its context current
 * on the calling thread; destroy it on that thread (it releases that thread's EGL state). After
 * terra_gl_attach the streamer's upload callback issues GL, so terra_stream_update runs on that
 * thread too. terra_gl_draw reads the style's surface table: do not set it meanwhile. A scene's pool
 * workers mesh tiles from its source at the same time as the frame (see source.h). */
#ifndef TERRA_GL_H
#define TERRA_GL_H

#include "terra/archive_mesh.h"
#include "terra/planet.h"
#include "terra/stream.h"
#include "terra/surface.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- headless context ------------------------------------------------------------------------ */

typedef struct terra_gl_context terra_gl_context;

/* An OpenGL 4.5 core context on EGL's surfaceless platform, made current on this thread.
 * TERRA_E_UNSUPPORTED with the EGL error when none can be had. */
TERRA_API terra_status terra_gl_context_create_headless(terra_gl_context **out);
TERRA_API void terra_gl_context_destroy(terra_gl_context *c);
/* GL_RENDERER of the current context, e.g. "llvmpipe (LLVM 15.0.6, 256 bits)". */
TERRA_API const char *terra_gl_renderer_name(void);

/* ---- the renderer -------------------------------------------------------------------------------- */

typedef struct terra_gl_desc {
    terra_grid_desc grid; /* the tiles' grid (tile0_size and cells); zero = the grid defaults */
    int capacity_tiles; /* the vertex buffer's size in grid tiles (it holds this many grid tiles with
                           their skirts, (cells + 1)^2 + 4 cells vertices each, or mesh tiles of as
                           many vertices), at least the streamer's (terra_stream_slots); 0 = 1024 */
    int max_draws;      /* tiles in one frame; 0 = 4096 */
    int width, height;  /* offscreen target (a framebuffer object) of this size; 0 × 0: draw into the
                           framebuffer bound when drawing (a window), sized by terra_gl_resize */
    size_t vertex_bytes; /* the vertex buffer's size in bytes, in place of capacity_tiles' (rounded
                            down to whole 32-byte vertices, at most 2^34); 0: capacity_tiles grid tiles */
    size_t index_bytes;  /* room for mesh tiles' own indices, beside the grid's shared ones (at most
                            2^33); 0 = half of vertex_bytes (a cooked tile of V vertices has about 2V
                            triangles and draws about 1.3V vertices: 24V index bytes to 42V) */
    int max_tiles;       /* tiles resident at once, grid and mesh; 0 = twice the grid tiles the vertex
                            buffer holds */
    /* The tiles are this planet's (planet.h, terra_planet_build; grid.cells must be the planet's):
     * each grid tile's origin is terra_planet_tile_origin, its skirt hangs toward the centre (as deep
     * as its border's range of distances from it plus a sample step), light and sky follow the local
     * up, the sky fades into space from 20 to 120 km up, and there is no fog unless the style asks.
     * NULL: the plane. Must outlive the renderer. */
    const terra_planet *planet;
} terra_gl_desc;

/* How a frame looks. Zero means the default everywhere. */
typedef struct terra_gl_style {
    bool flat;               /* no sky and no fog: only clear_rgb behind the ground */
    float clear_rgb[3];      /* with flat: the colour behind the ground (0..1) */
    terra_vec3 sun;          /* direction toward the sun; zero = from the south-west (-x, +z), 25 degrees up */
    double fog_distance;     /* metres at which fog reaches half strength; 0 = 60 km, < 0 none */
    bool no_morph;           /* draw every tile unmorphed (to show what morphing prevents) */
    bool no_skirts;          /* draw no skirts, grid tiles' or mesh tiles' (to show what they close) */
    bool no_occlusion;       /* draw every tile whole, hidden ground too (the picture is the same: to
                                measure what occlusion culling saves) */
    bool level_tint;         /* tint by the tile's level instead of its surfaces */
    /* ramp[1] > ramp[0]: colour the ground by its height alone, unlit, gray from black at ramp[0]
     * metres to white at ramp[1] (clamped; on a planet the height over its reference surface, to a
     * metre): pictures to compare with another renderer's elevation ramp */
    float ramp[2];
    /* What each surface looks like: its tint times its albedo texture, a normal texture tilting the
     * light, a mask texture scaling its weight where surfaces meet (on grid tiles a surface's edge
     * steps midway between samples, the nearer sample's surface winning, its pull scaled by the
     * mask; on mesh tiles a triangle's three blend), all repeating every tiling_m
     * metres (textures are read once per table version, resampled to 128², mipmapped; one that
     * cannot be read is logged and the surface drawn without it). NULL: the built-in tints. Where a
     * sample names no surface, the built-in height-and-slope style draws it (sand by the water,
     * grass, rock on steep faces, snow high up), so a source can name only its road. */
    const terra_surface_table *surfaces;
    /* Your own material, shading every ground pixel of every tile (grid or mesh, plane or planet)
     * instead of terra's: GLSL 4.50 source defining
     *     vec3 terra_material(terra_ground g)
     * which returns the pixel's colour as written (0..1: no display curve, no fog added). g holds
     *     vec3 position;   the point in world metres (floats: to about 2^-24 of its distance from 0)
     *     vec3 normal;     unit, world; tilted by the surfaces' normal textures, morphing with the ground
     *     vec3 up;         unit: +y on the plane, from the centre on a planet
     *     float height;    metres: y on the plane, over the reference surface on a planet
     *     float slope;     rise over run against up
     *     uvec3 surfaces;  the three surfaces the pixel's triangle blends (surface.h ids; where a
     *                      sample names none, the built-in style's choice: 1 grass, 2 rock, 3 snow, 4 sand)
     *     vec3 weights;    their weights (adding to 1; masks applied)
     *     int level;       the tile's level (0 the finest)
     *     float morph;     how far the ground is morphed toward its parent's grid, 0..1
     *     vec3 sun;        unit, toward the sun
     *     float sun_light; max(normal . sun, 0)
     *     float shadow;    how lit by the sun, 0..1 (1: terra casts no shadows yet)
     *     vec3 colour;     terra's own colour for the pixel (lit, display curve, no fog)
     * Compiled when a frame first asks for it (and again when the source changes): one that does not
     * compile fails that frame with TERRA_E_INVALID, before anything is drawn, the compiler's lines
     * named by material_name and its own line numbers (the renderer keeps what it had). NULL:
     * terra's shading. */
    const char *material;
    const char *material_name; /* a file name for errors; NULL: "(material)" */
} terra_gl_style;

typedef struct terra_gl_stats {
    int draw_calls;      /* GL draw calls in the last frame (glDraw*, glMultiDraw*): the depth prepass's and the
                            picture's (2 culled over grid tiles, up to 6 with mesh tiles; 1 whole) */
    int draw_commands;   /* the commands those calls drew: the list's (the GPU writes the pieces drawn into one
                            list, 2 commands for the picture, 1 for the prepass) and mesh tiles' (the GPU counts
                            these: counted_frame's); a whole frame's, a command per tile and skirt run */
    /* Figures the GPU counts on a culled frame (marked [GPU]): they are counted_frame's, read back without
     * waiting when terra_gl_draw returns if the GPU is done with the culling by then (llvmpipe always
     * is), else at a later draw; terra_gl_read_rgb and terra_gl_read_depth wait for them. */
    uint32_t frame;      /* frames drawn */
    uint32_t counted_frame; /* the frame the [GPU] figures are of */
    int tiles, triangles; /* [GPU] tiles with a piece drawn, triangles drawn (in the picture); a mesh tile's
                             triangles are its own and its skirts' */
    int per_level[TERRA_TILE_MAX_LEVEL + 1]; /* [GPU] tiles drawn per level */
    int not_resident;    /* draws skipped because their tile was never uploaded (0 when the
                            streamer and the renderer are attached) */
    int resident, capacity; /* tiles in the buffers (grid and mesh); grid tiles the vertex buffer holds */
    int uploads, releases; /* since the previous frame */
    size_t gpu_bytes;    /* vertex + index + per-frame and culling buffers */
    double upload_ms;    /* time spent in uploads since the previous frame */
    double submit_ms;    /* terra's CPU time in the last frame's terra_gl_draw outside GL calls: per-tile
                            records, skirt sides, commands of a whole frame */
    double call_ms;      /* the calling thread's CPU time inside the frame's GL calls (buffer writes, state, the
                            GPU culling's dispatches, the draws): the driver's (llvmpipe shades vertices there,
                            on the calling thread, and runs compute passes), not terra's */
    int skirt_triangles; /* [GPU] of triangles: skirts (grid tiles' runs, mesh tiles' their own) */
    int mesh_tiles;      /* of resident: mesh tiles */
    int occluded_triangles; /* [GPU] ground triangles of the frame's tiles not drawn: out of view or hidden
                               behind nearer ground */
    int hidden_tiles;    /* [GPU] tiles of the draw list wholly left out (not in `tiles`) */
    int prepass_triangles; /* [GPU] triangles the depth prepass drew (the last culled frame's ground) */
    bool occlusion;      /* the last frame was culled (not with style.no_occlusion, nor a frame whose list of
                            pieces would not fit one GL storage buffer) */
    size_t vertex_bytes_used, vertex_bytes; /* the vertex buffer: held by tiles, in all */
    size_t index_bytes_used, index_bytes;   /* mesh tiles' indices: held, room (the grid's apart) */
    int compactions;     /* since creation: times a buffer was compacted to place a tile */
} terra_gl_stats;

typedef struct terra_gl terra_gl;

TERRA_API terra_status terra_gl_create(const terra_gl_desc *desc, terra_gl **out);
TERRA_API void terra_gl_destroy(terra_gl *r);

/* Points a stream description's upload and release callbacks at the renderer: tiles then reach
 * the buffers inside the streamer's frame budget, and leave them when the streamer lets go of
 * them. TERRA_E_INVALID unless the stream's grid (resolved) is the renderer's: the same cells and
 * tile size. Its capacity_tiles should be at least terra_stream_slots() of the stream (an upload
 * that does not fit fails with TERRA_E_CAPACITY: the tile's ancestor stands in). */
TERRA_API terra_status terra_gl_attach(terra_gl *r, terra_stream_desc *desc);
/* The callbacks themselves (user = the renderer). Upload takes a grid tile (exactly a grid tile's
 * bytes of terra_grid_vertex) or a mesh tile (bytes starting with TERRA_TILE_MESH_MAGIC, checked
 * and expanded by terra_tile_mesh_expand: TERRA_E_CORRUPT and the like when it is bad), copies it
 * into ranges of the buffers, and replaces the key's older version if it holds one; when a range
 * cannot be had (the free total is short: see the fragmentation bound above) or max_tiles are
 * resident, TERRA_E_CAPACITY with a message, the older version kept. Release frees the key's
 * ranges (nothing when it is not held). */
TERRA_API terra_status terra_gl_upload(void *user, terra_tile_key key, const void *data, size_t bytes);
TERRA_API void terra_gl_release(void *user, terra_tile_key key);

/* Draws one frame of `draws` seen by `cam` (aspect from the target size). One draw call. */
TERRA_API terra_status terra_gl_draw(terra_gl *r, const terra_camera *cam, const terra_stream_draw *draws, int count,
                           const terra_gl_style *style);
/* Reads the offscreen target back: rgb[width × height × 3], top row first. Waits for the GPU. */
TERRA_API terra_status terra_gl_read_rgb(terra_gl *r, uint8_t *rgb);
/* Reads back distance along the view axis per pixel (metres, top row first; INFINITY where
 * nothing was drawn). */
TERRA_API terra_status terra_gl_read_depth(terra_gl *r, float *view_z);
/* Resizes the target (offscreen: reallocates it; window: sets the viewport). */
TERRA_API terra_status terra_gl_resize(terra_gl *r, int width, int height);
TERRA_API void terra_gl_size(const terra_gl *r, int *width, int *height);
TERRA_API const terra_gl_stats *terra_gl_get_stats(const terra_gl *r);

/* ---- a scene: a source, a streamer and a renderer for one camera -------------------------------
 * What `terra fly`, `terra render`, `terra view` and the tests share. */

typedef struct terra_gl_scene_desc {
    const terra_source *source; /* required unless `archive`; must outlive the scene */
    /* An archive drawn by its own tiles (archive_mesh.h; TIN or grid), each chosen by its geometric
     * error (select.tile_error): its source, levels, tile size and area replace those here, and the
     * scene's workers decode the tiles. NULL: grid tiles meshed from `source`. Must outlive the scene. */
    terra_archive_mesh *archive;
    terra_select_desc select;   /* tiles and levels (zero: the defaults of select.h); the view's
                                   height is the picture's when not given */
    int width, height;          /* offscreen size; 0 × 0: draw into the current framebuffer */
    int capacity_tiles;         /* tiles held (streamer and vertex buffer); 0 = 2048 up to a view
                                   720 pixels high, by the square of the height above (4,608 at
                                   1080), fewer where they would take over 1 GiB of vertices (many
                                   cells; at least 64), an archive's at most its tile count */
    size_t capacity_bytes;      /* the streamer's tile memory; 0 = capacity_tiles of its tiles, an
                                   archive's at most 512 MiB (the GPU buffers hold as much again) */
    double budget_ms;           /* the streamer's per-frame budget (the thread's CPU time); 0 = 4 */
    int threads;                /* workers meshing (or decoding) tiles; 0 = terra_default_threads() */
    int max_in_flight;          /* tile requests at once; 0 = 64 (a frame of a software
                                   renderer is long: many tiles can be meshed meanwhile) */
    /* Real-time frames: a stand-in is at most this many levels coarser than a tile it covers. The
     * ancestors that keep it so are asked for first (terra_stream_desc.max_standin_levels), and a
     * frame whose stand-ins would be deeper (after a jump, or flying faster than tiles come) runs the
     * streamer again, past its budget, until they are within it (at most a second, and within
     * max_wait_s). 0 = 2; negative: no bound, a frame never waits and stand-ins are whatever
     * ancestors stand. */
    int max_standin_levels;
} terra_gl_scene_desc;

/* What one frame cost and drew. Times are the calling thread's CPU time (terra_thread_cpu_s: not the
 * time the pool's workers or a software GL's threads took its core), but for wait_ms, which is wall
 * time. */
typedef struct terra_gl_frame_stats {
    double select_ms;   /* the CDLOD selection inside the streamer's (last) update */
    double stream_ms;   /* the streamer's bookkeeping: its (first) update without the selection and the
                           budgeted work it ran (taking tiles in, uploads) */
    double wait_ms;     /* a real-time frame's waiting for stand-ins (max_standin_levels): the further
                           updates and the pauses between them, less their budgeted work */
    double upload_ms;   /* copies of arrived tiles into the vertex buffer */
    double submit_ms;   /* terra's CPU in terra_gl_draw outside GL calls: per-tile records, skirt sides */
    double driver_ms;   /* inside the frame's GL calls (a software driver's vertex and compute work), not terra's */
    double cpu_ms;      /* terra's CPU for the frame outside the tile work budget_ms governs:
                           select_ms + stream_ms + wait_ms + submit_ms */
    int updates;        /* streamer updates this frame (more than 1 when settling) */
    int tiles, triangles, draw_calls, fallbacks, per_level[TERRA_TILE_MAX_LEVEL + 1];
    int occluded_triangles; /* ground triangles left out as hidden (terra_gl_stats) */
    int hidden_tiles;       /* tiles of the draw list wholly hidden, not in `tiles` (tiles + hidden_tiles:
                               the tiles the streamer resolved for the frame) */
    int failed;         /* wanted tiles whose load failed, drawn as their ancestors (the streamer
                           logged each once; terra_stream_failed lists them) */
    size_t bytes_held;  /* the streamer's tile memory plus the GPU buffers */
    bool settled;       /* every wanted tile standing or failed: nothing more will come */
    int standin_levels; /* the most levels a stand-in was coarser than a tile it stood for */
} terra_gl_frame_stats;

/* ---- a planet scene: the planet's selection, its tiles meshed on a pool, one renderer -----------
 * What `terra render --planet`, `terra fly --planet` and `terra view --planet` draw with. The tiles a
 * frame wants are meshed on the pool's threads: before it is drawn, or in real time across frames
 * (budget_ms); the least recently drawn tiles are let go when capacity_tiles are held. */
typedef struct terra_gl_planet_desc {
    const terra_planet *planet;       /* required; must outlive the scene */
    terra_planet_select_desc select;  /* tau, view and mode (planet.h); the view's height is the
                                         picture's when not given, max_tiles capacity_tiles */
    int width, height;                /* offscreen size; 0 x 0: the current framebuffer */
    int capacity_tiles;               /* tiles held, the six faces among them; 0 = 131072 / cells (8192
                                         of the planet's default 16 cells: 12 MiB of vertices per 1,000) */
    int threads;                      /* meshing workers; 0 = one per core */
    /* 0: every frame whole (the tiles it wants meshed before it is drawn). > 0: real time: meshing
     * goes on across frames (64 tiles at once, coarsest first), a frame uploads what is meshed within
     * this many milliseconds (of its thread's CPU time), and a tile not yet held is drawn as its nearest held ancestor (the faces
     * are held for good), every tile under that ancestor left to it, so the ground is covered exactly
     * once in every frame; fs->fallbacks counts the stand-ins, fs->settled says none was needed. A
     * stand-in is never more than two levels coarser than a wanted tile it covers: in fast motion a
     * frame waits for the ancestors that keeps it so (then past the budget). */
    double budget_ms;
} terra_gl_planet_desc;

typedef struct terra_gl_planet terra_gl_planet;

TERRA_API terra_status terra_gl_planet_create(const terra_gl_planet_desc *desc, terra_gl_planet **out);
TERRA_API void terra_gl_planet_destroy(terra_gl_planet *s);
/* One frame for the camera (its up should be the eye's local up: terra_planet_frame): selects, meshes
 * and uploads what is missing (or, in real time, what has been meshed), draws. fs (may be NULL):
 * select_ms, stream_ms (meshing and requests), upload_ms, fallbacks, settled, the renderer's figures. */
TERRA_API terra_status terra_gl_planet_frame(terra_gl_planet *s, const terra_camera *cam, const terra_gl_style *style,
                                             terra_gl_frame_stats *fs);
TERRA_API terra_gl *terra_gl_planet_renderer(terra_gl_planet *s);
TERRA_API terra_planet_select *terra_gl_planet_select(terra_gl_planet *s);
/* The last frame's draws (every one resident: terra_gl_draw can draw them again, or a part). */
TERRA_API void terra_gl_planet_draws(const terra_gl_planet *s, const terra_stream_draw **draws, int *count);

typedef struct terra_gl_scene terra_gl_scene;

TERRA_API terra_status terra_gl_scene_create(const terra_gl_scene_desc *desc, terra_gl_scene **out);
TERRA_API void terra_gl_scene_destroy(terra_gl_scene *s);
TERRA_API terra_gl *terra_gl_scene_renderer(terra_gl_scene *s);
TERRA_API terra_stream *terra_gl_scene_stream(terra_gl_scene *s);
/* The camera's focus in the stream (0 before the first frame). */
TERRA_API terra_focus terra_gl_scene_focus(const terra_gl_scene *s);
/* A selection object with the stream's options (ranges, morph, tile sides). */
TERRA_API const terra_select *terra_gl_scene_select(const terra_gl_scene *s);

/* Replaces the ground's source (a script opened again: hot reload) in the stream and the scene's
 * selection: held tiles are made again from it and drawn old until the new ones stand
 * (terra_stream_set_source). Not for a scene of an archive. The old source is still called by
 * requests started before: keep it until terra_gl_scene_busy is false. */
TERRA_API terra_status terra_gl_scene_set_source(terra_gl_scene *s, const terra_source *src);
/* Whether the scene's workers may still call the source terra_gl_scene_set_source replaced (requests
 * started before it still in flight, as of the last frame). */
TERRA_API bool terra_gl_scene_busy(const terra_gl_scene *s);

/* Moves the camera, runs the streamer and draws. With `settle` the streamer is run (waiting for
 * its workers) until every tile the camera wants is standing, at most max_wait_s seconds
 * (0 = 60), so the frame shows the full detail of the selection; otherwise it runs once, as a
 * real-time frame does (again while a stand-in would be deeper than max_standin_levels, within
 * max_wait_s), and draws ancestors where tiles are still coming. */
TERRA_API terra_status terra_gl_scene_frame(terra_gl_scene *s, const terra_camera *cam, const terra_gl_style *style, bool settle,
                                  double max_wait_s, terra_gl_frame_stats *stats);

#ifdef __cplusplus
}
#endif
#endif
