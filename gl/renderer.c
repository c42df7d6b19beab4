/* libterra-gl: resident tiles (grid and mesh) sub-allocated in one vertex buffer and one index
 * buffer, one indirect multi-draw a frame. */
#include "terra/gl.h"
#include "terra/io.h"
#include "terra/tile_mesh.h"

#include "keymap.h"

#include <epoxy/gl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "occlusion.h"
#include "shaders.h"

/* std430 per-draw record, 48 bytes (DrawRecord in shaders.h). */
typedef struct gl_draw_record {
    float origin_level[4]; /* tile origin relative to the eye's whole metres; level */
    float morph_skirt[4];  /* morph start and end (end <= start: no morph); a grid tile's skirt depth; 0 */
    int32_t base_vertex;   /* the tile's first vertex: a grid vertex's (i, j) is gl_VertexID minus it */
    int32_t mesh;          /* 1: a mesh tile, its colours from the vertex attribute */
    int32_t pad_[2];
} gl_draw_record;

/* GL's DrawElementsIndirectCommand. */
typedef struct gl_draw_command {
    GLuint count, instance_count, first_index;
    GLint base_vertex;
    GLuint base_instance;
} gl_draw_command;

/* A first-fit sub-allocator over one buffer, in units (vertices, or indices past the grid's):
 * free blocks sorted by offset, never two adjacent (a freed range merges with its neighbours). */
typedef struct gl_heap {
    uint32_t capacity, used; /* units */
    uint32_t *off, *len;     /* free blocks */
    int nfree, max_free;     /* max_free: tiles + 1 (free blocks lie between held ones) */
} gl_heap;

/* A resident tile: its ranges of the two buffers. */
typedef struct gl_tile {
    terra_tile_key key;
    uint32_t v_off, v_count; /* vertices */
    uint32_t i_off, i_count; /* mesh tiles: their indices (from the index heap's start); grid: 0 */
    uint32_t skirt_triangles;
    float skirt_m; /* grid tiles: the depth of their skirt (see skirt_depth) */
    float hi;      /* its highest drawn point (any morph) */
    uint32_t frame;         /* the last frame whose draw list had it, */
    float morph_start, morph_end; /* with this morph range */
    bool live, mesh;
    bool occ;      /* a grid tile with its occlusion summary (occlusion.h) */
    terra_vec3 origin; /* on a planet: terra_planet_tile_origin, once */
} gl_tile;

/* Commands a frame may have, per tile on average: ground and skirt, each whole or in runs of the
 * blocks in view (past the room, tiles are drawn whole) */
#define COMMANDS_PER_TILE 16

/* Compaction copies through a staging buffer of this size where a range moves by less than its
 * length and less than this (a buffer's copy to itself must not overlap; see move_down). */
#define STAGE_BYTES ((size_t)4 << 20)

struct terra_gl {
    terra_gl_desc d;
    /* a grid tile: its own vertices ((cells + 1)^2, tile_bytes as the streamer hands them over),
     * then its skirt's (4 cells: a copy of each border vertex); the shared indices, its triangles'
     * (grid_index_count) then the skirt's, index_count in all (mesh tiles' own lie past them) */
    int vertex_count, skirt_vertices, slot_vertices;
    int grid_index_count, index_count;
    size_t tile_bytes;
    int32_t *ring;                     /* skirt vertex r hangs from grid vertex ring[r] */
    terra_grid_vertex *skirt_scratch;  /* one grid tile's skirt vertices, as uploaded */
    GLuint program, vao, vbo, ibo, records, commands, draw_ids, stage;
    GLint u_view_proj, u_cells, u_eye_frac, u_sun, u_flat, u_no_morph, u_level_tint, u_fog_distance;
    GLint u_eye_y, u_eye_mod, u_textures, u_planet, u_centre, u_up, u_radii, u_ramp;
    terra_grid_vertex *upload_scratch; /* one grid tile, its surfaces narrowed to the tile's palette */
    /* a mesh tile expanded for drawing (terra_tile_mesh_expand), grown to the largest seen */
    terra_grid_vertex *mesh_v;
    uint32_t *mesh_i;
    void *mesh_scratch;
    size_t mesh_v_cap, mesh_i_cap, mesh_scratch_cap; /* bytes */
    /* surfaces: per id its tint, tiling and texture layers (a storage buffer), the textures of the
     * table last drawn with (one array, every layer TEX_SIZE²), and which table that was */
    GLuint surfaces_buf, textures;
    const terra_surface_table *textures_of;
    uint32_t textures_version;
    int32_t layer_of[256][3];      /* texture layer of each surface's albedo, normal, mask; -1: none */
    bool textures_loaded;          /* layer_of and textures describe textures_of */
    /* the target: an offscreen framebuffer, or the bound one (a window) */
    bool offscreen;
    int width, height;
    GLuint fbo, colour_rb, depth_rb;
    /* the sky: a one-pixel-wide gradient, blitted over the target (no draw call) */
    GLuint sky_fbo, sky_tex;
    float *sky_rows; /* height × 4 */
    double near_m;
    /* the buffers' sub-allocators; resident tiles, free tile ids, key -> tile id */
    gl_heap vheap, iheap;
    gl_tile *tiles;
    int *free_ids;
    int nfree_ids;
    key_map index;
    uint64_t *order; /* compaction: (offset << 32 | id) per tile */
    /* occlusion culling (occlusion.h): how grid tiles are cut, each tile id's summary (occ_floats
     * each; on a planet its own kind, none where it has none), the frame's tiles, the horizon and its
     * tables */
    occ_layout occ;
    int occ_floats;
    int ring_block[4 * 16]; /* the block each run of `block` skirt cells along the ring hangs from */
    float *occ_data, *occ_scratch;
    occ_tile *occ_tiles;
    /* per-frame scratch; commands: ground from the start, skirts from the end */
    gl_draw_record *recs;
    gl_draw_command *cmds;
    int cmd_cap;
    uint32_t frame; /* frames drawn */
    int acc_uploads, acc_releases; /* since the last frame */
    double acc_upload_ms;
    terra_gl_stats stats;
};

/* ---- shaders ---------------------------------------------------------------------------------------- */

/* src2 (may be NULL) follows src: C11 promises string literals only up to 4095 characters */
static terra_status compile(GLenum kind, const char *src, const char *src2, const char *name, GLuint *out) {
    GLuint sh = glCreateShader(kind);
    glShaderSource(sh, src2 ? 2 : 1, (const char *const[]){src, src2}, NULL);
    glCompileShader(sh);
    GLint ok = 0;
    glGetShaderiv(sh, GL_COMPILE_STATUS, &ok);
    if (!ok) {
        char log[2048];
        glGetShaderInfoLog(sh, sizeof log, NULL, log);
        glDeleteShader(sh);
        return terra_fail(TERRA_E_UNSUPPORTED, "gl: the %s shader does not compile: %s", name, log);
    }
    *out = sh;
    return TERRA_OK;
}

static terra_status build_program(terra_gl *r) {
    GLuint vs = 0, fs = 0;
    terra_status st = compile(GL_VERTEX_SHADER, terra_gl_vs, NULL, "vertex", &vs);
    if (st == TERRA_OK) st = compile(GL_FRAGMENT_SHADER, terra_gl_fs, terra_gl_fs_main, "fragment", &fs);
    if (st == TERRA_OK) {
        r->program = glCreateProgram();
        glAttachShader(r->program, vs);
        glAttachShader(r->program, fs);
        glLinkProgram(r->program);
        GLint ok = 0;
        glGetProgramiv(r->program, GL_LINK_STATUS, &ok);
        if (!ok) {
            char log[2048];
            glGetProgramInfoLog(r->program, sizeof log, NULL, log);
            st = terra_fail(TERRA_E_UNSUPPORTED, "gl: the ground program does not link: %s", log);
        }
    }
    if (vs) glDeleteShader(vs);
    if (fs) glDeleteShader(fs);
    if (st != TERRA_OK) return st;
    r->u_view_proj = glGetUniformLocation(r->program, "u_view_proj");
    r->u_sun = glGetUniformLocation(r->program, "u_sun");
    r->u_flat = glGetUniformLocation(r->program, "u_flat");
    r->u_no_morph = glGetUniformLocation(r->program, "u_no_morph");
    r->u_level_tint = glGetUniformLocation(r->program, "u_level_tint");
    r->u_fog_distance = glGetUniformLocation(r->program, "u_fog_distance");
    r->u_eye_y = glGetUniformLocation(r->program, "u_eye_y");
    r->u_eye_mod = glGetUniformLocation(r->program, "u_eye_mod");
    r->u_planet = glGetUniformLocation(r->program, "u_planet");
    r->u_centre = glGetUniformLocation(r->program, "u_centre");
    r->u_radii = glGetUniformLocation(r->program, "u_radii");
    r->u_ramp = glGetUniformLocation(r->program, "u_ramp");
    r->u_up = glGetUniformLocation(r->program, "u_up");
    r->u_textures = glGetUniformLocation(r->program, "u_textures");
    r->u_cells = glGetUniformLocation(r->program, "u_cells");
    r->u_eye_frac = glGetUniformLocation(r->program, "u_eye_frac");
    return TERRA_OK;
}

/* ---- targets ---------------------------------------------------------------------------------------- */

static void free_target(terra_gl *r) {
    if (r->fbo) glDeleteFramebuffers(1, &r->fbo);
    if (r->colour_rb) glDeleteRenderbuffers(1, &r->colour_rb);
    if (r->depth_rb) glDeleteRenderbuffers(1, &r->depth_rb);
    if (r->sky_fbo) glDeleteFramebuffers(1, &r->sky_fbo);
    if (r->sky_tex) glDeleteTextures(1, &r->sky_tex);
    r->fbo = r->colour_rb = r->depth_rb = r->sky_fbo = r->sky_tex = 0;
    terra_free(r->sky_rows);
    r->sky_rows = NULL;
}

static terra_status make_target(terra_gl *r, int w, int h) {
    free_target(r);
    r->width = w;
    r->height = h;
    if (r->offscreen) {
        glCreateFramebuffers(1, &r->fbo);
        glCreateRenderbuffers(1, &r->colour_rb);
        glCreateRenderbuffers(1, &r->depth_rb);
        glNamedRenderbufferStorage(r->colour_rb, GL_RGBA8, w, h);
        glNamedRenderbufferStorage(r->depth_rb, GL_DEPTH_COMPONENT32F, w, h);
        glNamedFramebufferRenderbuffer(r->fbo, GL_COLOR_ATTACHMENT0, GL_RENDERBUFFER, r->colour_rb);
        glNamedFramebufferRenderbuffer(r->fbo, GL_DEPTH_ATTACHMENT, GL_RENDERBUFFER, r->depth_rb);
        if (glCheckNamedFramebufferStatus(r->fbo, GL_FRAMEBUFFER) != GL_FRAMEBUFFER_COMPLETE)
            return terra_fail(TERRA_E_UNSUPPORTED, "gl: a %d x %d RGBA8 + depth32F framebuffer is not complete", w, h);
    }
    glCreateTextures(GL_TEXTURE_2D, 1, &r->sky_tex);
    glTextureStorage2D(r->sky_tex, 1, GL_RGBA8, 1, h);
    glCreateFramebuffers(1, &r->sky_fbo);
    glNamedFramebufferTexture(r->sky_fbo, GL_COLOR_ATTACHMENT0, r->sky_tex, 0);
    r->sky_rows = terra_alloc(sizeof(float) * 4 * (size_t)h);
    if (!r->sky_rows) return terra_fail(TERRA_E_NOMEM, "gl: out of memory");
    return TERRA_OK;
}

terra_status terra_gl_resize(terra_gl *r, int width, int height) {
    if (width < 1 || height < 1 || width > 16384 || height > 16384)
        return terra_fail(TERRA_E_INVALID, "gl: size %d x %d is outside 1..16384", width, height);
    if (width == r->width && height == r->height && r->sky_tex) return TERRA_OK;
    return make_target(r, width, height);
}

void terra_gl_size(const terra_gl *r, int *width, int *height) {
    *width = r->width;
    *height = r->height;
}

/* ---- creation ---------------------------------------------------------------------------------------- */

void terra_gl_destroy(terra_gl *r) {
    if (!r) return;
    free_target(r);
    if (r->program) glDeleteProgram(r->program);
    if (r->vao) glDeleteVertexArrays(1, &r->vao);
    GLuint bufs[7] = {r->vbo, r->ibo, r->records, r->commands, r->draw_ids, r->surfaces_buf, r->stage};
    for (int i = 0; i < 7; i++)
        if (bufs[i]) glDeleteBuffers(1, &bufs[i]);
    if (r->textures) glDeleteTextures(1, &r->textures);
    gl_heap *heaps[2] = {&r->vheap, &r->iheap};
    for (int i = 0; i < 2; i++) {
        terra_free(heaps[i]->off);
        terra_free(heaps[i]->len);
    }
    terra_free(r->tiles);
    terra_free(r->free_ids);
    terra_free(r->order);
    map_free(&r->index);
    terra_free(r->recs);
    terra_free(r->cmds);
    terra_free(r->occ_data);
    terra_free(r->occ_scratch);
    terra_free(r->occ_tiles);
    terra_free(r->upload_scratch);
    terra_free(r->ring);
    terra_free(r->skirt_scratch);
    terra_free(r->mesh_v);
    terra_free(r->mesh_i);
    terra_free(r->mesh_scratch);
    terra_free(r);
}

/* ---- grid tiles' skirts --------------------------------------------------------------------------------
 * A grid tile's skirt hangs from its border: skirt vertex r (of 4 cells) is a copy of border vertex
 * ring[r] (the border walked once around: j = 0 with i rising, i = cells with j rising, j = cells with
 * i falling, i = 0 with j falling), which the vertex stage morphs exactly as its top vertex and then
 * lowers by the tile's skirt depth. Two triangles hang from each border cell edge. Colours: grid
 * vertex (i, j) has (i + j) mod 3, so the two ends of a border edge have colours c and c + 1 (mod
 * 3); a skirt vertex takes its top vertex's colour + 1 (terra_grid_vertex.colour), and the edge's
 * quad is split along the diagonal from the end coloured c to the other end's skirt vertex: the
 * triangles (c, c + 1, c + 2) and (c, c + 2, c + 1), three colours each. */

static int ring_vertex(int cells, int r) {
    const int side = cells + 1;
    int i, j;
    if (r < cells) i = r, j = 0;
    else if (r < 2 * cells) i = cells, j = r - cells;
    else if (r < 3 * cells) i = cells - (r - 2 * cells), j = cells;
    else i = 0, j = cells - (r - 3 * cells);
    return j * side + i;
}

static int grid_colour(int cells, int v) { return (v % (cells + 1) + v / (cells + 1)) % 3; }

/* The skirt's indices (24 cells: two triangles per border cell edge), after the grid's. */
static void skirt_indices(int cells, const int32_t *ring, uint32_t *out) {
    const uint32_t first = (uint32_t)terra_grid_vertex_count(cells);
    const int n = 4 * cells;
    for (int r = 0; r < n; r++) {
        const int r1 = (r + 1) % n;
        int lo = r, hi = r1; /* top vertices coloured c and c + 1 */
        if ((grid_colour(cells, ring[lo]) + 1) % 3 != grid_colour(cells, ring[hi])) lo = r1, hi = r;
        const uint32_t tri[6] = {(uint32_t)ring[lo], (uint32_t)ring[hi], first + (uint32_t)hi,
                                 (uint32_t)ring[lo], first + (uint32_t)hi, first + (uint32_t)lo};
        memcpy(out + 6 * r, tri, sizeof tri);
    }
}

/* The skirt's depth for a grid tile: the height range over its border samples (every border
 * vertex's height; their morph targets are border samples too) plus one sample spacing. Why it is
 * enough, between this tile T and a neighbour N sharing part of a side, at any two levels (the
 * finer tile's corners are samples of the coarser, even ones, which no morph moves):
 *  - T the finer (or the same level): over the shared part both edges, morphed or not, run between
 *    heights of T's samples on that side, so the gap between them is at most T's border range;
 *  - T the coarser: between two of its samples a spacing s apart, the finer edge interpolates the
 *    ground sampled finer, which lies at most S s / 2 below T's straight edge where the ground's
 *    slope is at most S; one spacing covers slopes up to 2 (steeper than the default world's).
 * Whichever of the two edges is the higher hangs its skirt over the gap (test_gl_holes measures the
 * gaps drawn on real-time flights against this depth). */
static float skirt_depth(const terra_grid_vertex *v, int cells, const int32_t *ring, double spacing) {
    float lo = INFINITY, hi = -INFINITY;
    for (int r = 0; r < 4 * cells; r++) {
        const float y = v[ring[r]].y;
        if (y < lo) lo = y;
        if (y > hi) hi = y;
    }
    return (hi - lo) + (float)spacing;
}

/* The same on a planet, where the skirt hangs toward the centre: the border's range of distances from
 * the centre plus the longest step between neighbouring border samples (the sample spacing there). */
static float planet_skirt_depth(const terra_planet *p, terra_tile_key key, const terra_grid_vertex *v, int cells,
                                const int32_t *ring) {
    const terra_vec3 o = terra_planet_tile_origin(p, key);
    double lo = INFINITY, hi = -INFINITY, step = 0;
    for (int r = 0; r < 4 * cells; r++) {
        const terra_grid_vertex *a = &v[ring[r]], *b = &v[ring[(r + 1) % (4 * cells)]];
        const double x = o.x + a->x, y = o.y + a->y, z = o.z + a->z, len = sqrt(x * x + y * y + z * z);
        lo = fmin(lo, len), hi = fmax(hi, len);
        const double dx = (double)b->x - a->x, dy = (double)b->y - a->y, dz = (double)b->z - a->z;
        step = fmax(step, sqrt(dx * dx + dy * dy + dz * dz));
    }
    return (float)((hi - lo) + step);
}

static bool heap_init(gl_heap *h, uint32_t capacity, int max_tiles) {
    h->capacity = capacity;
    h->used = 0;
    h->max_free = max_tiles + 1;
    h->off = terra_alloc(sizeof *h->off * (size_t)h->max_free);
    h->len = terra_alloc(sizeof *h->len * (size_t)h->max_free);
    if (!h->off || !h->len) return false;
    h->nfree = capacity > 0;
    h->off[0] = 0;
    h->len[0] = capacity;
    return true;
}

terra_status terra_gl_create(const terra_gl_desc *desc, terra_gl **out) {
    *out = NULL;
    terra_gl_desc d = desc ? *desc : (terra_gl_desc){0};
    terra_status st = terra_grid_desc_resolve(desc ? &desc->grid : NULL, &d.grid);
    if (st != TERRA_OK) return st;
    if (d.capacity_tiles == 0) d.capacity_tiles = 1024;
    if (d.max_draws == 0) d.max_draws = 4096;
    if (d.capacity_tiles < 1 || d.max_draws < 1 || d.max_tiles < 0)
        return terra_fail(TERRA_E_INVALID, "gl: capacity_tiles and max_draws must be positive, max_tiles not negative");
    if ((d.width == 0) != (d.height == 0) || d.width < 0 || d.height < 0)
        return terra_fail(TERRA_E_INVALID, "gl: give both width and height (offscreen) or neither (window)");
    const int vertex_count = terra_grid_vertex_count(d.grid.cells), skirt_vertices = 4 * d.grid.cells;
    const int grid_index_count = terra_grid_index_count(d.grid.cells), index_count = grid_index_count + 24 * d.grid.cells;
    const size_t tile_bytes = sizeof(terra_grid_vertex) * (size_t)vertex_count;
    const size_t slot_bytes = sizeof(terra_grid_vertex) * (size_t)(vertex_count + skirt_vertices);
    /* the buffers: vertices for capacity_tiles grid tiles (or vertex_bytes), indices past the
     * grid's shared ones for half as many bytes (or index_bytes) */
    if (d.vertex_bytes == 0) {
        if ((size_t)d.capacity_tiles > ((size_t)1 << 34) / slot_bytes)
            return terra_fail(TERRA_E_INVALID, "gl: %d tiles of %zu bytes is too large a vertex buffer", d.capacity_tiles,
                              slot_bytes);
        d.vertex_bytes = slot_bytes * (size_t)d.capacity_tiles;
    }
    if (d.index_bytes == 0) d.index_bytes = d.vertex_bytes / 2;
    if (d.vertex_bytes < sizeof(terra_grid_vertex) || d.vertex_bytes > ((size_t)1 << 34))
        return terra_fail(TERRA_E_INVALID, "gl: vertex_bytes %zu is outside %zu .. 2^34", d.vertex_bytes,
                          sizeof(terra_grid_vertex));
    if (d.index_bytes < 12 || d.index_bytes > ((size_t)1 << 33))
        return terra_fail(TERRA_E_INVALID, "gl: index_bytes %zu is outside 12 .. 2^33", d.index_bytes);
    const uint32_t vunits = (uint32_t)(d.vertex_bytes / sizeof(terra_grid_vertex));
    const uint32_t iunits = (uint32_t)(d.index_bytes / sizeof(uint32_t));
    d.vertex_bytes = (size_t)vunits * sizeof(terra_grid_vertex);
    d.index_bytes = (size_t)iunits * sizeof(uint32_t);
    const int grid_fit = (int)(vunits / (uint32_t)(vertex_count + skirt_vertices));
    if (d.max_tiles == 0) d.max_tiles = 2 * (grid_fit > d.capacity_tiles ? grid_fit : d.capacity_tiles);
    if (d.max_tiles > (1 << 24)) return terra_fail(TERRA_E_INVALID, "gl: max_tiles %d is more than 2^24", d.max_tiles);
    if (epoxy_gl_version() < 45)
        return terra_fail(TERRA_E_UNSUPPORTED, "gl: OpenGL 4.5 is needed; the current context has %d.%d",
                          epoxy_gl_version() / 10, epoxy_gl_version() % 10);
    terra_gl *r = terra_calloc(1, sizeof *r);
    if (!r) return terra_fail(TERRA_E_NOMEM, "gl: out of memory");
    r->d = d;
    r->near_m = 0.5;
    r->vertex_count = vertex_count;
    r->skirt_vertices = skirt_vertices;
    r->slot_vertices = vertex_count + skirt_vertices;
    r->grid_index_count = grid_index_count;
    r->index_count = index_count;
    r->tile_bytes = tile_bytes;
    const size_t vbytes = d.vertex_bytes, ibytes = sizeof(uint32_t) * (size_t)index_count + d.index_bytes;
    bool ok = heap_init(&r->vheap, vunits, d.max_tiles) && heap_init(&r->iheap, iunits, d.max_tiles);
    ok = ok && (r->tiles = terra_calloc((size_t)d.max_tiles, sizeof *r->tiles)) != NULL;
    ok = ok && (r->free_ids = terra_alloc(sizeof(int) * (size_t)d.max_tiles)) != NULL;
    ok = ok && (r->order = terra_alloc(sizeof *r->order * (size_t)d.max_tiles)) != NULL;
    ok = ok && map_init(&r->index, d.max_tiles);
    ok = ok && (r->recs = terra_alloc(sizeof *r->recs * (size_t)d.max_draws)) != NULL;
    r->cmd_cap = COMMANDS_PER_TILE * d.max_draws;
    ok = ok && (r->cmds = terra_alloc(sizeof *r->cmds * (size_t)r->cmd_cap)) != NULL;
    occ_layout_for(d.grid.cells, &r->occ);
    for (int c = 0; c < 4 * r->occ.blocks; c++) { /* the ring's sides: j = 0, i = cells, j = cells, i = 0 */
        const int nb = r->occ.blocks, k = c % nb, side = c / nb;
        r->ring_block[c] = occ_block_index(side == 0 ? k : side == 1 ? nb - 1 : side == 2 ? nb - 1 - k : 0,
                                           side == 0 ? 0 : side == 1 ? k : side == 2 ? nb - 1 : nb - 1 - k);
    }
    /* summaries: pages are touched only as tile ids are used */
    r->occ_floats = d.planet ? occ_planet_floats(&r->occ) : r->occ.floats;
    ok = ok && (!r->occ_floats || (r->occ_data = terra_alloc(sizeof(float) * (size_t)r->occ_floats * (size_t)d.max_tiles)) != NULL);
    ok = ok && (r->occ_scratch = terra_alloc(sizeof(float) * OCC_SCRATCH)) != NULL;
    if (ok) occ_scratch_init(r->occ_scratch);
    ok = ok && (r->occ_tiles = terra_alloc(sizeof *r->occ_tiles * (size_t)d.max_draws)) != NULL;
    ok = ok && (r->upload_scratch = terra_alloc(r->tile_bytes)) != NULL;
    ok = ok && (r->ring = terra_alloc(sizeof *r->ring * (size_t)skirt_vertices)) != NULL;
    ok = ok && (r->skirt_scratch = terra_alloc(sizeof *r->skirt_scratch * (size_t)skirt_vertices)) != NULL;
    uint32_t *scratch = ok ? terra_alloc(sizeof(uint32_t) * (size_t)(r->index_count > d.max_draws ? r->index_count : d.max_draws)) : NULL;
    if (!scratch) {
        terra_gl_destroy(r);
        return terra_fail(TERRA_E_NOMEM, "gl: out of memory");
    }
    for (int i = 0; i < d.max_tiles; i++) r->free_ids[r->nfree_ids++] = d.max_tiles - 1 - i;

    st = build_program(r);
    if (st != TERRA_OK) {
        terra_free(scratch);
        terra_gl_destroy(r);
        return st;
    }
    while (glGetError() != GL_NO_ERROR) {
    }
    /* one vertex buffer for every resident tile; one index buffer: the grid tiles' shared indices
     * first, then the mesh tiles' own */
    glCreateBuffers(1, &r->vbo);
    glNamedBufferStorage(r->vbo, (GLsizeiptr)vbytes, NULL, GL_DYNAMIC_STORAGE_BIT);
    for (int k = 0; k < skirt_vertices; k++) r->ring[k] = ring_vertex(d.grid.cells, k);
    occ_grid_indices(&r->occ, scratch); /* block by block: a tile can be drawn in part */
    skirt_indices(d.grid.cells, r->ring, scratch + grid_index_count);
    glCreateBuffers(1, &r->ibo);
    glNamedBufferStorage(r->ibo, (GLsizeiptr)ibytes, NULL, GL_DYNAMIC_STORAGE_BIT);
    glNamedBufferSubData(r->ibo, 0, (GLsizeiptr)(sizeof(uint32_t) * (size_t)r->index_count), scratch);
    for (int i = 0; i < d.max_draws; i++) scratch[i] = (uint32_t)i;
    glCreateBuffers(1, &r->draw_ids);
    glNamedBufferStorage(r->draw_ids, (GLsizeiptr)(sizeof(uint32_t) * (size_t)d.max_draws), scratch, 0);
    terra_free(scratch);
    glCreateBuffers(1, &r->records);
    glNamedBufferStorage(r->records, (GLsizeiptr)(sizeof(gl_draw_record) * (size_t)d.max_draws), NULL,
                         GL_DYNAMIC_STORAGE_BIT);
    glCreateBuffers(1, &r->commands);
    glNamedBufferStorage(r->commands, (GLsizeiptr)(sizeof(gl_draw_command) * (size_t)r->cmd_cap), NULL,
                         GL_DYNAMIC_STORAGE_BIT);
    /* the vertex layout: terra_grid_vertex, 32 bytes */
    glCreateVertexArrays(1, &r->vao);
    glVertexArrayVertexBuffer(r->vao, 0, r->vbo, 0, sizeof(terra_grid_vertex));
    glVertexArrayVertexBuffer(r->vao, 1, r->draw_ids, 0, sizeof(uint32_t));
    glVertexArrayBindingDivisor(r->vao, 1, 1);
    glVertexArrayElementBuffer(r->vao, r->ibo);
    glVertexArrayAttribFormat(r->vao, 0, 3, GL_FLOAT, GL_FALSE, (GLuint)offsetof(terra_grid_vertex, x));
    glVertexArrayAttribFormat(r->vao, 1, 3, GL_FLOAT, GL_FALSE, (GLuint)offsetof(terra_grid_vertex, mx));
    glVertexArrayAttribFormat(r->vao, 2, 2, GL_BYTE, GL_TRUE, (GLuint)offsetof(terra_grid_vertex, normal));
    glVertexArrayAttribIFormat(r->vao, 3, 1, GL_UNSIGNED_BYTE, (GLuint)offsetof(terra_grid_vertex, surface));
    glVertexArrayAttribIFormat(r->vao, 4, 1, GL_UNSIGNED_INT, 0);
    glVertexArrayAttribFormat(r->vao, 5, 2, GL_BYTE, GL_TRUE, (GLuint)offsetof(terra_grid_vertex, morph_normal));
    glVertexArrayAttribIFormat(r->vao, 6, 1, GL_UNSIGNED_SHORT, (GLuint)offsetof(terra_grid_vertex, colour));
    for (GLuint a = 0; a < 7; a++) {
        glEnableVertexArrayAttrib(r->vao, a);
        glVertexArrayAttribBinding(r->vao, a, a == 4 ? 1 : 0);
    }
    r->stats.capacity = grid_fit;
    r->stats.vertex_bytes = vbytes;
    r->stats.index_bytes = d.index_bytes;
    r->stats.gpu_bytes = vbytes + ibytes +
                         (sizeof(uint32_t) + sizeof(gl_draw_record)) * (size_t)d.max_draws +
                         sizeof(gl_draw_command) * (size_t)r->cmd_cap;
    r->offscreen = d.width > 0;
    st = make_target(r, r->offscreen ? d.width : 1, r->offscreen ? d.height : 1);
    GLenum err = glGetError();
    if (st == TERRA_OK && err != GL_NO_ERROR)
        st = terra_fail(err == GL_OUT_OF_MEMORY ? TERRA_E_NOMEM : TERRA_E_UNSUPPORTED,
                        "gl: setting up the buffers failed (GL error 0x%x%s): %zu MiB of vertices and %zu MiB of "
                        "indices for %d tiles of %d cells",
                        (unsigned)err, err == GL_OUT_OF_MEMORY ? ", out of memory" : "", vbytes >> 20, ibytes >> 20,
                        grid_fit, d.grid.cells);
    if (st != TERRA_OK) {
        terra_gl_destroy(r);
        return st;
    }
    *out = r;
    return TERRA_OK;
}

/* ---- attaching to a streamer ----------------------------------------------------------------------------- */

terra_status terra_gl_attach(terra_gl *r, terra_stream_desc *desc) {
    terra_grid_desc g;
    terra_status st = terra_grid_desc_resolve(&desc->select.grid, &g);
    if (st != TERRA_OK) return st;
    if (g.cells != r->d.grid.cells || g.tile0_size != r->d.grid.tile0_size)
        return terra_fail(TERRA_E_INVALID, "gl: the stream's tiles (%d cells, %g m at level 0) are not the renderer's (%d cells, %g m)",
                          g.cells, g.tile0_size, r->d.grid.cells, r->d.grid.tile0_size);
    desc->upload = terra_gl_upload;
    desc->release = terra_gl_release;
    desc->upload_user = r;
    return TERRA_OK;
}

/* ---- the sub-allocators ----------------------------------------------------------------------------- */

static bool heap_first_fit(gl_heap *h, uint32_t n, uint32_t *out) {
    for (int i = 0; i < h->nfree; i++) {
        if (h->len[i] < n) continue;
        *out = h->off[i];
        h->off[i] += n;
        h->len[i] -= n;
        if (h->len[i] == 0) {
            memmove(h->off + i, h->off + i + 1, sizeof *h->off * (size_t)(h->nfree - i - 1));
            memmove(h->len + i, h->len + i + 1, sizeof *h->len * (size_t)(h->nfree - i - 1));
            h->nfree--;
        }
        h->used += n;
        return true;
    }
    return false;
}

/* Gives [off, off + n) back, merged with the free blocks it touches. */
static void heap_free(gl_heap *h, uint32_t off, uint32_t n) {
    if (n == 0) return;
    int lo = 0, hi = h->nfree; /* the first free block after off */
    while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (h->off[mid] < off) lo = mid + 1;
        else hi = mid;
    }
    const int i = lo;
    const bool prev = i > 0 && h->off[i - 1] + h->len[i - 1] == off;
    const bool next = i < h->nfree && off + n == h->off[i];
    if (prev && next) {
        h->len[i - 1] += n + h->len[i];
        memmove(h->off + i, h->off + i + 1, sizeof *h->off * (size_t)(h->nfree - i - 1));
        memmove(h->len + i, h->len + i + 1, sizeof *h->len * (size_t)(h->nfree - i - 1));
        h->nfree--;
    } else if (prev) {
        h->len[i - 1] += n;
    } else if (next) {
        h->off[i] = off;
        h->len[i] += n;
    } else {
        memmove(h->off + i + 1, h->off + i, sizeof *h->off * (size_t)(h->nfree - i));
        memmove(h->len + i + 1, h->len + i, sizeof *h->len * (size_t)(h->nfree - i));
        h->off[i] = off;
        h->len[i] = n;
        h->nfree++;
    }
    h->used -= n;
}

/* Moves len bytes of buf from src down to dst (dst < src), front to back: a chunk is copied
 * straight when it cannot overlap its destination (it moves by at least its length), else through
 * the staging buffer. A chunk's destination never reaches source bytes not yet copied. */
static void move_down(terra_gl *r, GLuint buf, size_t src, size_t dst, size_t len) {
    const size_t gap = src - dst;
    for (size_t done = 0; done < len;) {
        size_t c = len - done;
        if (gap >= c) {
            glCopyNamedBufferSubData(buf, buf, (GLintptr)(src + done), (GLintptr)(dst + done), (GLsizeiptr)c);
        } else if (gap >= STAGE_BYTES) {
            c = gap;
            glCopyNamedBufferSubData(buf, buf, (GLintptr)(src + done), (GLintptr)(dst + done), (GLsizeiptr)c);
        } else {
            if (!r->stage) {
                glCreateBuffers(1, &r->stage);
                glNamedBufferStorage(r->stage, (GLsizeiptr)STAGE_BYTES, NULL, 0);
                r->stats.gpu_bytes += STAGE_BYTES;
            }
            if (c > STAGE_BYTES) c = STAGE_BYTES;
            glCopyNamedBufferSubData(buf, r->stage, (GLintptr)(src + done), 0, (GLsizeiptr)c);
            glCopyNamedBufferSubData(r->stage, buf, 0, (GLintptr)(dst + done), (GLsizeiptr)c);
        }
        done += c;
    }
}

static int cmp_u64(const void *a, const void *b) {
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Slides every held range of one buffer to its start, in offset order, leaving one free block. */
static void compact(terra_gl *r, bool vertices) {
    gl_heap *h = vertices ? &r->vheap : &r->iheap;
    const GLuint buf = vertices ? r->vbo : r->ibo;
    const size_t unit = vertices ? sizeof(terra_grid_vertex) : sizeof(uint32_t);
    const size_t base = vertices ? 0 : sizeof(uint32_t) * (size_t)r->index_count;
    int n = 0;
    for (int id = 0; id < r->d.max_tiles; id++) {
        const gl_tile *t = &r->tiles[id];
        if (t->live && (vertices ? t->v_count : t->i_count))
            r->order[n++] = (uint64_t)(vertices ? t->v_off : t->i_off) << 32 | (uint32_t)id;
    }
    qsort(r->order, (size_t)n, sizeof *r->order, cmp_u64);
    uint32_t at = 0;
    for (int k = 0; k < n; k++) {
        gl_tile *t = &r->tiles[(uint32_t)r->order[k]];
        uint32_t *off = vertices ? &t->v_off : &t->i_off;
        const uint32_t count = vertices ? t->v_count : t->i_count;
        if (*off != at) move_down(r, buf, base + unit * *off, base + unit * at, unit * count);
        *off = at;
        at += count;
    }
    h->nfree = at < h->capacity;
    h->off[0] = at;
    h->len[0] = h->capacity - at;
    r->stats.compactions++;
}

/* n units of one buffer: first fit, else (enough being free in all) after compacting it. */
static bool heap_alloc(terra_gl *r, bool vertices, uint32_t n, uint32_t *out) {
    gl_heap *h = vertices ? &r->vheap : &r->iheap;
    if (n == 0) {
        *out = 0;
        return true;
    }
    if (h->capacity - h->used < n) return false;
    if (heap_first_fit(h, n, out)) return true;
    compact(r, vertices);
    return heap_first_fit(h, n, out);
}

/* ---- tiles arriving and leaving ------------------------------------------------------------------ */

static void update_used(terra_gl *r) {
    r->stats.vertex_bytes_used = sizeof(terra_grid_vertex) * (size_t)r->vheap.used;
    r->stats.index_bytes_used = sizeof(uint32_t) * (size_t)r->iheap.used;
}

static void release_tile(terra_gl *r, int32_t id) {
    gl_tile *t = &r->tiles[id];
    heap_free(&r->vheap, t->v_off, t->v_count);
    heap_free(&r->iheap, t->i_off, t->i_count);
    map_del(&r->index, t->key);
    r->stats.mesh_tiles -= t->mesh;
    *t = (gl_tile){0};
    r->free_ids[r->nfree_ids++] = id;
    r->stats.resident--;
    r->acc_releases++;
    update_used(r);
}

void terra_gl_release(void *user, terra_tile_key key) {
    terra_gl *r = user;
    const int32_t id = map_get(&r->index, key);
    if (id >= 0) release_tile(r, id);
}

static bool grow(void **p, size_t *cap, size_t need) {
    if (need <= *cap) return true;
    void *q = terra_alloc(need);
    if (!q) return false;
    terra_free(*p);
    *p = q;
    *cap = need;
    return true;
}

/* Checks and expands a mesh tile into mesh_v and mesh_i. */
static terra_status expand_mesh(terra_gl *r, terra_tile_key key, const void *data, size_t bytes,
                                terra_tile_mesh_info *info) {
    terra_status st = terra_tile_mesh_check(data, bytes);
    terra_tile_mesh h;
    terra_tile_mesh_limits lim;
    if (st == TERRA_OK) {
        memcpy(&h, data, sizeof h);
        st = terra_tile_mesh_limits_for(h.vertex_count, h.index_count, &lim);
    }
    if (st != TERRA_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s", terra_last_error());
        return terra_fail(st, "gl: tile (level %d, %d, %d): %s", terra_tile_key_level(key), terra_tile_key_x(key),
                          terra_tile_key_y(key), why);
    }
    /* it is drawn at its key's square: a tile of another side would overlap or part from its
     * neighbours (float sides: within a relative 1e-6) */
    const double side = r->d.grid.tile0_size * ldexp(1.0, terra_tile_key_level(key));
    if (!(fabs(h.size_x - side) <= 1e-6 * side) || !(fabs(h.size_z - side) <= 1e-6 * side))
        return terra_fail(TERRA_E_CORRUPT, "gl: mesh tile (level %d, %d, %d) spans %g x %g m, not its square's %g m",
                          terra_tile_key_level(key), terra_tile_key_x(key), terra_tile_key_y(key), h.size_x, h.size_z,
                          side);
    /* its own triangles alone need index_count indices: no expanding a tile that cannot fit */
    if (h.index_count > r->iheap.capacity)
        return terra_fail(TERRA_E_CAPACITY, "gl: mesh tile (level %d, %d, %d) has %u indices; the index buffer holds %u",
                          terra_tile_key_level(key), terra_tile_key_x(key), terra_tile_key_y(key), h.index_count,
                          r->iheap.capacity);
    if (!grow((void **)&r->mesh_v, &r->mesh_v_cap, sizeof *r->mesh_v * lim.vertices) ||
        !grow((void **)&r->mesh_i, &r->mesh_i_cap, sizeof *r->mesh_i * lim.indices) ||
        !grow(&r->mesh_scratch, &r->mesh_scratch_cap, lim.scratch_bytes))
        return terra_fail(TERRA_E_NOMEM, "gl: out of memory expanding a mesh tile of %u vertices", h.vertex_count);
    return terra_tile_mesh_expand(data, bytes, key, r->mesh_v, r->mesh_i, r->mesh_scratch, info);
}

terra_status terra_gl_upload(void *user, terra_tile_key key, const void *data, size_t bytes) {
    terra_gl *r = user;
    const double t0 = terra_now_s();
    const int level = terra_tile_key_level(key);
    const int32_t tx = terra_tile_key_x(key), ty = terra_tile_key_y(key);
    uint32_t magic = 0;
    if (data && bytes >= sizeof magic) memcpy(&magic, data, sizeof magic);
    const bool mesh = magic == TERRA_TILE_MESH_MAGIC;
    const terra_grid_vertex *verts;
    const uint32_t *idx = NULL;
    uint32_t nv, ni = 0, skirts = 0;
    terra_grid_vertex *writable;
    if (mesh) {
        terra_tile_mesh_info info;
        terra_status st = expand_mesh(r, key, data, bytes, &info);
        if (st != TERRA_OK) return st;
        verts = writable = r->mesh_v;
        idx = r->mesh_i;
        nv = info.vertices;
        ni = info.indices;
        skirts = info.skirt_triangles;
    } else {
        if (bytes != r->tile_bytes)
            return terra_fail(TERRA_E_INVALID,
                              "gl: tile (level %d, %d, %d) has %zu bytes: not the %zu of a %d-cell grid tile, and not a mesh tile",
                              level, tx, ty, bytes, r->tile_bytes, r->d.grid.cells);
        verts = data;
        writable = r->upload_scratch;
        nv = (uint32_t)r->vertex_count;
        skirts = 8u * (uint32_t)r->d.grid.cells;
    }
    /* a grid tile's slot: its vertices, then its skirt's */
    const uint32_t need = mesh ? nv : nv + (uint32_t)r->skirt_vertices;
    /* room: what the tile held before (a second upload replaces it) counts as free; nothing is
     * touched unless both ranges can be had */
    int32_t id = map_get(&r->index, key);
    const uint32_t old_v = id >= 0 ? r->tiles[id].v_count : 0, old_i = id >= 0 ? r->tiles[id].i_count : 0;
    if (r->vheap.capacity - r->vheap.used + old_v < need)
        return terra_fail(TERRA_E_CAPACITY,
                          "gl: tile (level %d, %d, %d) needs %u vertices; the vertex buffer has %u of %u free (%d tiles resident)",
                          level, tx, ty, need, r->vheap.capacity - r->vheap.used + old_v, r->vheap.capacity,
                          r->stats.resident);
    if (r->iheap.capacity - r->iheap.used + old_i < ni)
        return terra_fail(TERRA_E_CAPACITY,
                          "gl: tile (level %d, %d, %d) needs %u indices; the index buffer has %u of %u free (%d mesh tiles resident)",
                          level, tx, ty, ni, r->iheap.capacity - r->iheap.used + old_i, r->iheap.capacity,
                          r->stats.mesh_tiles);
    if (id < 0 && r->nfree_ids == 0)
        return terra_fail(TERRA_E_CAPACITY, "gl: all %d tiles the renderer holds (max_tiles) are resident; tile (level %d, %d, %d) not uploaded",
                          r->d.max_tiles, level, tx, ty);
    /* a tile draws the eight surfaces covering most of it; any other sample draws as the most
     * common one (terra_surface_palette logs such tiles) */
    terra_surface keep[TERRA_TILE_SURFACES];
    int kept;
    if (terra_surface_palette(&verts[0].surface, nv, sizeof *verts, key, keep, &kept) > kept) {
        if (writable != verts) memcpy(writable, verts, sizeof *verts * nv);
        for (uint32_t i = 0; i < nv; i++) {
            bool in = false;
            for (int k = 0; k < kept && !in; k++) in = writable[i].surface == keep[k];
            if (!in) writable[i].surface = keep[0];
        }
        verts = writable;
    }
    float skirt_m = 0;
    if (!mesh) { /* the skirt: copies of the border vertices (after the palette), coloured for it */
        const int cells = r->d.grid.cells;
        for (int k = 0; k < r->skirt_vertices; k++) {
            r->skirt_scratch[k] = verts[r->ring[k]];
            r->skirt_scratch[k].colour = (uint16_t)((grid_colour(cells, r->ring[k]) + 1) % 3);
        }
        skirt_m = r->d.planet ? planet_skirt_depth(r->d.planet, key, verts, cells, r->ring)
                              : skirt_depth(verts, cells, r->ring, terra_grid_tile_side(&r->d.grid, level) / cells);
    }
    gl_tile *t;
    if (id >= 0) {
        t = &r->tiles[id];
        heap_free(&r->vheap, t->v_off, t->v_count);
        heap_free(&r->iheap, t->i_off, t->i_count);
        r->stats.mesh_tiles -= t->mesh;
        t->v_count = t->i_count = 0; /* a compaction now passes it by */
    } else {
        id = r->free_ids[--r->nfree_ids];
        t = &r->tiles[id];
        *t = (gl_tile){.key = key, .live = true};
        map_put(&r->index, key, id);
        r->stats.resident++;
    }
    uint32_t v_off = 0, i_off = 0;
    const bool placed = heap_alloc(r, true, need, &v_off) && heap_alloc(r, false, ni, &i_off);
    if (!placed) { /* cannot happen: the free totals sufficed, and compaction makes them one block */
        release_tile(r, id);
        return terra_fail(TERRA_E_CAPACITY, "gl: tile (level %d, %d, %d) could not be placed", level, tx, ty);
    }
    float hi = -INFINITY;
    for (uint32_t i = 0; i < nv; i++) hi = fmaxf(hi, fmaxf(verts[i].y, verts[i].my));
    *t = (gl_tile){.key = key, .v_off = v_off, .v_count = need, .i_off = i_off, .i_count = ni, .skirt_triangles = skirts,
                   .skirt_m = skirt_m, .hi = hi, .live = true, .mesh = mesh,
                   .origin = r->d.planet ? terra_planet_tile_origin(r->d.planet, key) : (terra_vec3){0, 0, 0}};
    if (!mesh && r->occ_floats) {
        float *summary = r->occ_data + (size_t)id * (size_t)r->occ_floats;
        t->occ = r->d.planet ? occ_planet_summarise(&r->occ, r->d.planet, t->origin, verts, summary)
                             : occ_summarise(&r->occ, verts, terra_grid_tile_side(&r->d.grid, level) / r->d.grid.cells, summary);
    }
    r->stats.mesh_tiles += mesh;
    glNamedBufferSubData(r->vbo, (GLintptr)(sizeof *verts * (size_t)v_off), (GLsizeiptr)(sizeof *verts * nv), verts);
    if (!mesh)
        glNamedBufferSubData(r->vbo, (GLintptr)(sizeof *verts * ((size_t)v_off + nv)),
                             (GLsizeiptr)(sizeof *verts * (size_t)r->skirt_vertices), r->skirt_scratch);
    if (ni)
        glNamedBufferSubData(r->ibo, (GLintptr)(sizeof *idx * ((size_t)r->index_count + i_off)),
                             (GLsizeiptr)(sizeof *idx * ni), idx);
    update_used(r);
    r->acc_uploads++;
    r->acc_upload_ms += (terra_now_s() - t0) * 1e3;
    return TERRA_OK;
}

/* ---- surfaces ------------------------------------------------------------------------------------------ */

#define TEX_SIZE 128

typedef struct gl_surface {
    float tint_tiling[4];
    int32_t layers[4]; /* albedo, normal, mask; -1: none */
} gl_surface;

/* Loads the textures the table names into one array (each resampled to TEX_SIZE², mipmapped). A
 * texture that cannot be read is reported once and its surface drawn with its tint alone. */
static void load_textures(terra_gl *r, const terra_surface_table *t) {
    if (r->textures) glDeleteTextures(1, &r->textures);
    r->textures = 0;
    r->textures_of = t;
    r->textures_loaded = true;
    r->textures_version = terra_surface_table_version(t);
    memset(r->layer_of, 0xff, sizeof r->layer_of);
    uint8_t *layers = NULL;
    int n = 0;
    for (int id = 1; t && id < 256; id++) {
        terra_surface_look look;
        if (!terra_surface_table_get(t, (terra_surface)id, &look)) continue;
        const char *paths[3] = {look.albedo, look.normal, look.mask};
        for (int k = 0; k < 3; k++) {
            if (!paths[k]) continue;
            uint8_t *px;
            int w, h;
            if (terra_io_read_png(paths[k], &px, &w, &h) != TERRA_OK) {
                terra_log(TERRA_LOG_WARN, "gl: surface %d: %s; drawn without it", id, terra_last_error());
                continue;
            }
            uint8_t *grown = terra_realloc(layers, (size_t)(n + 1) * TEX_SIZE * TEX_SIZE * 4);
            if (grown) {
                layers = grown;
                uint8_t *dst = layers + (size_t)n * TEX_SIZE * TEX_SIZE * 4;
                for (int y = 0; y < TEX_SIZE; y++) /* nearest sample: any size in, one size out */
                    for (int x = 0; x < TEX_SIZE; x++)
                        memcpy(dst + ((size_t)y * TEX_SIZE + x) * 4,
                               px + ((size_t)(y * h / TEX_SIZE) * w + (size_t)(x * w / TEX_SIZE)) * 4, 4);
                r->layer_of[id][k] = n++;
            }
            terra_free(px);
        }
    }
    if (n > 0) {
        glCreateTextures(GL_TEXTURE_2D_ARRAY, 1, &r->textures);
        glTextureStorage3D(r->textures, 8, GL_RGBA8, TEX_SIZE, TEX_SIZE, n);
        glTextureSubImage3D(r->textures, 0, 0, 0, 0, TEX_SIZE, TEX_SIZE, n, GL_RGBA, GL_UNSIGNED_BYTE, layers);
        glGenerateTextureMipmap(r->textures);
        glTextureParameteri(r->textures, GL_TEXTURE_MIN_FILTER, GL_LINEAR_MIPMAP_LINEAR);
        glTextureParameteri(r->textures, GL_TEXTURE_MAG_FILTER, GL_LINEAR);
        glTextureParameteri(r->textures, GL_TEXTURE_WRAP_S, GL_REPEAT);
        glTextureParameteri(r->textures, GL_TEXTURE_WRAP_T, GL_REPEAT);
    }
    terra_free(layers);
}

/* Per surface id: tint, tiling and texture layers, for the fragment stage. */
static void update_surfaces(terra_gl *r, const terra_surface_table *t) {
    if (!r->textures_loaded || t != r->textures_of || terra_surface_table_version(t) != r->textures_version)
        load_textures(r, t);
    gl_surface sf[256];
    for (int id = 0; id < 256; id++) {
        terra_surface_look look;
        terra_surface_table_get(t, (terra_surface)id, &look);
        sf[id] = (gl_surface){{look.tint[0], look.tint[1], look.tint[2], look.tiling_m > 0 ? look.tiling_m : 4.0f},
                              {r->layer_of[id][0], r->layer_of[id][1], r->layer_of[id][2], -1}};
    }
    if (!r->surfaces_buf) {
        glCreateBuffers(1, &r->surfaces_buf);
        glNamedBufferStorage(r->surfaces_buf, sizeof sf, NULL, GL_DYNAMIC_STORAGE_BIT);
    }
    glNamedBufferSubData(r->surfaces_buf, 0, sizeof sf, sf);
}

/* ---- a frame ------------------------------------------------------------------------------------------ */

/* Column-major view-projection for a camera at the origin: rotation into view space, then a
 * reversed-Z projection with an infinite far plane (depth = near / distance along the view axis),
 * which keeps depth precise from 2 m to hundreds of kilometres with a 32-bit float depth buffer. */
static void view_projection(const terra_camera *cam, double aspect, double near_m, float out[16]) {
    terra_vec3 f, rt, up;
    terra_camera_basis(cam, &f, &rt, &up);
    const double fov = cam->fov_y_rad > 0 ? cam->fov_y_rad : 60.0 * 3.14159265358979323846 / 180.0;
    const double fy = 1.0 / tan(fov * 0.5), fx = fy / aspect;
    /* rows of the view rotation: right, up, -forward */
    const double v[3][3] = {{rt.x, rt.y, rt.z}, {up.x, up.y, up.z}, {-f.x, -f.y, -f.z}};
    double m[4][4] = {{0}}; /* m[row][col] */
    for (int c = 0; c < 3; c++) {
        m[0][c] = fx * v[0][c];
        m[1][c] = fy * v[1][c];
        m[2][c] = 0;
        m[3][c] = -v[2][c];
    }
    m[2][3] = near_m;
    for (int c = 0; c < 4; c++)
        for (int rw = 0; rw < 4; rw++) out[c * 4 + rw] = (float)m[rw][c];
}

/* The inward unit normals of the four side planes of the view (through the eye), as view_projection
 * draws it. */
static void side_planes(const terra_camera *cam, double aspect, terra_vec3 out[4]) {
    terra_vec3 f, rt, up;
    terra_camera_basis(cam, &f, &rt, &up);
    const double fov = cam->fov_y_rad > 0 ? cam->fov_y_rad : 60.0 * 3.14159265358979323846 / 180.0;
    const double ty = tan(fov * 0.5), tx = ty * aspect;
    const double k[4][3] = {{1, 0, tx}, {-1, 0, tx}, {0, 1, ty}, {0, -1, ty}}; /* right, up, forward */
    for (int i = 0; i < 4; i++) {
        const terra_vec3 n = {k[i][0] * rt.x + k[i][1] * up.x + k[i][2] * f.x, k[i][0] * rt.y + k[i][1] * up.y + k[i][2] * f.y,
                              k[i][0] * rt.z + k[i][1] * up.z + k[i][2] * f.z};
        const double l = sqrt(n.x * n.x + n.y * n.y + n.z * n.z);
        out[i] = (terra_vec3){n.x / l, n.y / l, n.z / l};
    }
}

static float sky_channel(double up, int ch) {
    static const double horizon[3] = {0.80, 0.86, 0.93}, zenith[3] = {0.26, 0.47, 0.80};
    double t = pow(up < 0 ? 0 : (up > 1 ? 1 : up), 0.45);
    return (float)pow(horizon[ch] + (zenith[ch] - horizon[ch]) * t, 1.0 / 1.6);
}

/* The eye's local up: the camera's (a planet's), else +y. */
static terra_vec3 local_up(const terra_camera *cam) {
    const terra_vec3 u = cam->up;
    const double l = sqrt(u.x * u.x + u.y * u.y + u.z * u.z);
    return l > 0 ? (terra_vec3){u.x / l, u.y / l, u.z / l} : (terra_vec3){0, 1, 0};
}

/* Fills the gradient texture for this camera: row y's colour is the sky in the direction of the
 * centre column's ray through that row, by its elevation over the local horizon (the horizon stays
 * level: cameras have no roll). Over a planet the sky fades into space from 20 to 120 km up. */
static void sky_gradient(terra_gl *r, const terra_camera *cam) {
    terra_vec3 f, rt, up;
    terra_camera_basis(cam, &f, &rt, &up);
    const terra_vec3 lu = local_up(cam);
    const double fov = cam->fov_y_rad > 0 ? cam->fov_y_rad : 60.0 * 3.14159265358979323846 / 180.0;
    const double ty = tan(fov * 0.5);
    double space = 0;
    if (r->d.planet) {
        const terra_vec3 e = cam->eye;
        const double alt = sqrt(e.x * e.x + e.y * e.y + e.z * e.z) - terra_planet_get_desc(r->d.planet)->radius_m;
        space = fmin(fmax((alt - 20e3) / 100e3, 0), 1);
    }
    static const float space_rgb[3] = {0.02f, 0.025f, 0.05f};
    for (int y = 0; y < r->height; y++) {
        const double v = ((y + 0.5) / r->height * 2.0 - 1.0) * ty; /* row 0 at the bottom */
        const double dx = f.x + v * up.x, dy = f.y + v * up.y, dz = f.z + v * up.z;
        const double e = (dx * lu.x + dy * lu.y + dz * lu.z) / sqrt(dx * dx + dy * dy + dz * dz);
        for (int c = 0; c < 3; c++)
            r->sky_rows[y * 4 + c] = (float)(sky_channel(e, c) * (1 - space) + space_rgb[c] * space);
        r->sky_rows[y * 4 + 3] = 1.0f;
    }
    glTextureSubImage2D(r->sky_tex, 0, 0, 0, 1, r->height, GL_RGBA, GL_FLOAT, r->sky_rows);
}

static bool bit_at(const uint64_t *bits, int i) { return bits[i >> 6] >> (i & 63) & 1; }

/* The skirt runs (bits of the ring's 4 nb runs, nb per side) a grid tile on the plane needs: none on
 * a side whose neighbour of its level is a grid tile of this frame with its morph range, as every
 * sample of the side is both tiles' and morphs alike in both (no gap to close). */

static uint64_t skirt_sides(const terra_gl *r, const gl_tile *t, int nb) {
    static const int dx[4] = {0, 1, 0, -1}, dy[4] = {-1, 0, 1, 0}; /* sides j = 0, i = cells, j = cells, i = 0 */
    const int level = terra_tile_key_level(t->key);
    const int32_t x = terra_tile_key_x(t->key), y = terra_tile_key_y(t->key);
    uint64_t need = 0;
    for (int side = 0; side < 4; side++) {
        const int32_t id = map_get(&r->index, terra_tile_key_make(0, level, x + dx[side], y + dy[side]));
        const gl_tile *o = id >= 0 ? &r->tiles[id] : NULL;
        if (!o || o->frame != r->frame || o->mesh || o->morph_start != t->morph_start || o->morph_end != t->morph_end)
            need |= (((uint64_t)1 << nb) - 1) << (side * nb);
    }
    return need;
}

terra_status terra_gl_draw(terra_gl *r, const terra_camera *cam, const terra_stream_draw *draws, int count,
                           const terra_gl_style *style) {
    const double t0 = terra_now_s();
    static const terra_gl_style defaults = {0};
    if (!style) style = &defaults;
    terra_gl_stats *s = &r->stats;
    s->draw_calls = s->tiles = s->triangles = s->skirt_triangles = s->not_resident = s->occluded_triangles = s->hidden_tiles = 0;
    s->call_ms = 0;
    double call_s = 0;
    s->uploads = r->acc_uploads, s->releases = r->acc_releases, s->upload_ms = r->acc_upload_ms;
    r->acc_uploads = r->acc_releases = 0, r->acc_upload_ms = 0;
    memset(s->per_level, 0, sizeof s->per_level);
    if (count > r->d.max_draws)
        return terra_fail(TERRA_E_CAPACITY, "gl: %d draws is more than max_draws (%d)", count, r->d.max_draws);

    /* the frame's tiles front to back, each with the blocks of it the ground drawn nearer leaves in
     * view (occlusion.h) */
    const double t_occ = terra_now_s();
    r->frame++;
    int nt = 0;
    for (int i = 0; i < count; i++) {
        const int32_t id = map_get(&r->index, draws[i].key);
        if (id < 0) {
            s->not_resident++;
            continue;
        }
        gl_tile *t = &r->tiles[id];
        t->frame = r->frame, t->morph_start = draws[i].morph_start, t->morph_end = draws[i].morph_end;
        const bool grid_data = !t->mesh && draws[i].data && draws[i].bytes == r->tile_bytes;
        r->occ_tiles[nt++] = (occ_tile){.key = draws[i].key,
                                        .summary = t->occ ? r->occ_data + (size_t)id * (size_t)r->occ_floats : NULL,
                                        .verts = grid_data ? draws[i].data : NULL, .hi = t->hi,
                                        .morph = {t->mesh ? 0.0f : draws[i].morph_start, t->mesh ? 0.0f : draws[i].morph_end},
                                        .standin = draws[i].fallback, .draw = i, .id = id, .mask = {1},
                                        .origin = t->origin};
    }
    terra_vec3 sides[4];
    side_planes(cam, (double)r->width / r->height, sides);
    s->occlusion = r->d.planet ? occ_planet_frame(&r->occ, r->d.planet, cam->eye, sides, !style->no_occlusion, style->no_morph,
                                                  r->occ_tiles, nt, r->occ_scratch)
                               : occ_frame(&r->occ, r->d.grid.tile0_size, cam->eye.x, cam->eye.y, cam->eye.z,
                                           !style->no_occlusion, style->no_morph, r->occ_tiles, nt, r->occ_scratch);
    s->occlusion_ms = (terra_now_s() - t_occ) * 1e3;

    /* per-draw records: tile origins relative to the eye's whole metres, in double; exact as
     * floats (whole metres below 2^24), the eye's fraction goes to a uniform */
    const terra_vec3 eye = {floor(cam->eye.x), floor(cam->eye.y), floor(cam->eye.z)};
    const float eye_frac[3] = {(float)(cam->eye.x - eye.x), (float)(cam->eye.y - eye.y), (float)(cam->eye.z - eye.z)};
    const int nblocks = r->occ.blocks * r->occ.blocks;
    const GLuint block_indices = (GLuint)(r->grid_index_count / nblocks);
    const int nb = r->occ.blocks, C = r->cmd_cap;
    const GLuint skirt_chunk = (GLuint)(6 * r->occ.block); /* indices of one block's run of skirt */
    int n = 0, nground = 0, nskirts = 0; /* ground commands from cmds[0] up, skirts' from cmds[C - 1] down */
    for (int k = 0; k < nt; k++) {
        const occ_tile *ot = &r->occ_tiles[k];
        const terra_stream_draw *dr = &draws[ot->draw];
        const gl_tile *t = &r->tiles[ot->id];
        /* grid tiles: the shared indices at the index buffer's start (the grid's, then the skirt's);
         * mesh tiles: their own (the tile's, then its skirts'). */
        const GLuint skirt_count = style->no_skirts ? 0 : 3 * t->skirt_triangles;
        const GLuint first = t->mesh ? (GLuint)r->index_count + t->i_off : 0;
        const GLuint ground_count = t->mesh ? t->i_count - 3 * t->skirt_triangles : (GLuint)r->grid_index_count;
        if (!occ_any(ot)) {
            s->hidden_tiles++;
            s->occluded_triangles += (int)(ground_count / 3);
            continue;
        }
        const int level = terra_tile_key_level(dr->key);
        const double side = terra_grid_tile_side(&r->d.grid, level);
        terra_vec3 o = {(double)terra_tile_key_x(dr->key) * side, 0.0, (double)terra_tile_key_y(dr->key) * side};
        if (r->d.planet) o = t->origin;
        /* mesh tiles do not morph: their morph range is sent empty */
        r->recs[n] = (gl_draw_record){{(float)(o.x - eye.x), (float)(o.y - eye.y), (float)(o.z - eye.z), (float)level},
                                      {t->mesh ? 0.0f : dr->morph_start, t->mesh ? 0.0f : dr->morph_end, t->skirt_m, 0.0f},
                                      (int32_t)t->v_off, t->mesh, {0, 0}};
        /* the ground, then (a command of its own, after every tile's ground) the skirt: where a
         * skirt's fragment is exactly as near as the ground's along the edge it hangs from, the
         * ground, drawn first, keeps the pixel. Whole, or the runs of blocks in view (the grid's
         * indices lie block by block, its skirt's side by side, a block's run of it together),
         * while the room for commands lasts. */
        const bool part = !t->mesh && ot->summary && C - nground - nskirts >= nblocks / 2 + 2 * nb + 2 * (nt - k);
        GLuint drawn = ground_count, skirts_drawn = skirt_count;
        if (!part) {
            r->cmds[nground++] = (gl_draw_command){ground_count, 1, first, (GLint)t->v_off, (GLuint)n};
            if (skirt_count)
                r->cmds[C - 1 - nskirts++] = (gl_draw_command){skirt_count, 1, first + ground_count, (GLint)t->v_off, (GLuint)n};
        } else {
            drawn = skirts_drawn = 0;
            uint64_t ring = 0;
            for (int c = 0; c < 4 * nb; c++) ring |= (uint64_t)occ_drawn(ot, r->ring_block[c]) << c;
            ring &= skirt_sides(r, t, nb);
            for (int pass = 0; pass < 2; pass++) {
                const uint64_t *bits = pass ? (uint64_t[1]){skirt_count ? ring : 0} : ot->mask;
                const int pieces = pass ? 4 * nb : nblocks;
                const GLuint piece = pass ? skirt_chunk : block_indices, base = pass ? first + ground_count : first;
                for (int m = 0; m < pieces;) {
                    if (!bit_at(bits, m)) {
                        m++;
                        continue;
                    }
                    int e = m;
                    while (e < pieces && bit_at(bits, e)) e++;
                    const gl_draw_command cmd = {(GLuint)(e - m) * piece, 1, base + (GLuint)m * piece, (GLint)t->v_off, (GLuint)n};
                    if (pass) r->cmds[C - 1 - nskirts++] = cmd, skirts_drawn += cmd.count;
                    else r->cmds[nground++] = cmd, drawn += cmd.count;
                    m = e;
                }
            }
        }
        s->occluded_triangles += (int)((ground_count - drawn) / 3);
        s->triangles += (int)((drawn + skirts_drawn) / 3);
        s->skirt_triangles += (int)(skirts_drawn / 3);
        s->per_level[level]++;
        n++;
    }
    s->tiles = n;
    memmove(r->cmds + nground, r->cmds + C - nskirts, sizeof *r->cmds * (size_t)nskirts);
    const int ncmds = nground + nskirts;

    const GLuint target = r->offscreen ? r->fbo : 0;
    glBindFramebuffer(GL_DRAW_FRAMEBUFFER, target);
    glViewport(0, 0, r->width, r->height);
    if (style->flat) {
        glClearNamedFramebufferfv(target, GL_COLOR, 0,
                                  (const GLfloat[4]){style->clear_rgb[0], style->clear_rgb[1], style->clear_rgb[2], 1});
    } else {
        sky_gradient(r, cam);
        glBlitNamedFramebuffer(r->sky_fbo, target, 0, 0, 1, r->height, 0, 0, r->width, r->height, GL_COLOR_BUFFER_BIT,
                               GL_NEAREST);
    }
    glClearNamedFramebufferfv(target, GL_DEPTH, 0, (const GLfloat[1]){0.0f});
    if (n > 0) {
        float vp[16];
        view_projection(cam, (double)r->width / r->height, r->near_m, vp);
        terra_vec3 sun = style->sun;
        if (sun.x == 0 && sun.y == 0 && sun.z == 0) sun = (terra_vec3){-0.62, 0.42, 0.66};
        const double sl = sqrt(sun.x * sun.x + sun.y * sun.y + sun.z * sun.z);
        glNamedBufferSubData(r->records, 0, (GLsizeiptr)(sizeof *r->recs * (size_t)n), r->recs);
        glNamedBufferSubData(r->commands, 0, (GLsizeiptr)(sizeof *r->cmds * (size_t)ncmds), r->cmds);
        glUseProgram(r->program);
        glUniformMatrix4fv(r->u_view_proj, 1, GL_FALSE, vp);
        glUniform3f(r->u_sun, (float)(sun.x / sl), (float)(sun.y / sl), (float)(sun.z / sl));
        glUniform1i(r->u_cells, r->d.grid.cells);
        glUniform3fv(r->u_eye_frac, 1, eye_frac);
        glUniform1i(r->u_flat, style->flat);
        glUniform1i(r->u_no_morph, style->no_morph);
        glUniform1i(r->u_level_tint, style->level_tint);
        update_surfaces(r, style->surfaces);
        glBindBufferBase(GL_SHADER_STORAGE_BUFFER, 1, r->surfaces_buf);
        glBindTextureUnit(0, r->textures);
        glUniform1i(r->u_textures, 0);
        glUniform1f(r->u_eye_y, (float)cam->eye.y);
        glUniform2f(r->u_eye_mod, (float)fmod(cam->eye.x, 65536.0), (float)fmod(cam->eye.z, 65536.0));
        /* fog: 60 km by default on the plane; none over a planet unless asked (it would hide it from orbit) */
        const double fog_default = r->d.planet ? 0.0 : 60000.0;
        glUniform1f(r->u_fog_distance,
                    style->fog_distance < 0 ? 0.0f : (float)(style->fog_distance > 0 ? style->fog_distance : fog_default));
        const terra_vec3 lu = local_up(cam);
        glUniform1i(r->u_planet, r->d.planet != NULL);
        glUniform3f(r->u_centre, (float)-cam->eye.x, (float)-cam->eye.y, (float)-cam->eye.z);
        glUniform3f(r->u_up, (float)lu.x, (float)lu.y, (float)lu.z);
        if (r->d.planet) {
            const terra_planet_desc *pd = terra_planet_get_desc(r->d.planet);
            glUniform2f(r->u_radii, (float)pd->radius_m, (float)pd->polar_radius_m);
        }
        glUniform2f(r->u_ramp, style->ramp[0], style->ramp[1]);
        glEnable(GL_DEPTH_TEST);
        glDepthFunc(GL_GREATER);
        glDisable(GL_CULL_FACE); /* a fold in the morphed ground must never open a hole */
        glClipControl(GL_LOWER_LEFT, GL_ZERO_TO_ONE);
        glBindVertexArray(r->vao);
        glBindBufferBase(GL_SHADER_STORAGE_BUFFER, 0, r->records);
        glBindBuffer(GL_DRAW_INDIRECT_BUFFER, r->commands);
        /* the frame's one draw call (a software driver shades vertices inside it: timed apart) */
        const double t_call = terra_now_s();
        glMultiDrawElementsIndirect(GL_TRIANGLES, GL_UNSIGNED_INT, NULL, ncmds, 0);
        s->draw_calls++;
        s->call_ms = (terra_now_s() - t_call) * 1e3;
        call_s = s->call_ms * 1e-3;
        glBindVertexArray(0);
        glUseProgram(0);
        glClipControl(GL_LOWER_LEFT, GL_NEGATIVE_ONE_TO_ONE);
    }
    GLenum err = glGetError();
    s->submit_ms = (terra_now_s() - t0 - call_s) * 1e3;
    if (err != GL_NO_ERROR) return terra_fail(TERRA_E_UNSUPPORTED, "gl: drawing failed (GL error 0x%x)", (unsigned)err);
    return TERRA_OK;
}

const terra_gl_stats *terra_gl_get_stats(const terra_gl *r) { return &r->stats; }

static terra_status read_back(terra_gl *r, GLenum format, GLenum type, size_t px_bytes, void *out) {
    const GLuint src = r->offscreen ? r->fbo : 0;
    glBindFramebuffer(GL_READ_FRAMEBUFFER, src);
    if (!r->offscreen) glReadBuffer(GL_BACK);
    glPixelStorei(GL_PACK_ALIGNMENT, 1);
    glReadPixels(0, 0, r->width, r->height, format, type, out);
    GLenum err = glGetError();
    if (err != GL_NO_ERROR) return terra_fail(TERRA_E_UNSUPPORTED, "gl: reading pixels failed (GL error 0x%x)", (unsigned)err);
    /* GL's rows run bottom to top: flip in place */
    uint8_t *p = out;
    const size_t row = px_bytes * (size_t)r->width;
    uint8_t tmp[4096];
    for (int y = 0; y < r->height / 2; y++) {
        uint8_t *a = p + row * (size_t)y, *b = p + row * (size_t)(r->height - 1 - y);
        for (size_t off = 0; off < row; off += sizeof tmp) {
            size_t m = row - off < sizeof tmp ? row - off : sizeof tmp;
            memcpy(tmp, a + off, m);
            memcpy(a + off, b + off, m);
            memcpy(b + off, tmp, m);
        }
    }
    return TERRA_OK;
}

terra_status terra_gl_read_rgb(terra_gl *r, uint8_t *rgb) { return read_back(r, GL_RGB, GL_UNSIGNED_BYTE, 3, rgb); }

terra_status terra_gl_read_depth(terra_gl *r, float *view_z) {
    terra_status st = read_back(r, GL_DEPTH_COMPONENT, GL_FLOAT, sizeof(float), view_z);
    if (st != TERRA_OK) return st;
    const size_t n = (size_t)r->width * r->height;
    for (size_t i = 0; i < n; i++) view_z[i] = view_z[i] > 0 ? (float)(r->near_m / view_z[i]) : INFINITY;
    return TERRA_OK;
}
