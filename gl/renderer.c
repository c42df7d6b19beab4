/* libterra-gl: resident tiles (grid and mesh) sub-allocated in one vertex buffer and one index
 * buffer; a frame culled on the GPU (a depth prepass of what the last frame drew, a depth pyramid,
 * a compute pass per piece of every tile) and drawn from one list the GPU writes. */
#include "terra/gl.h"
#include "terra/io.h"
#include "terra/tile_mesh.h"

#include "keymap.h"

#include <epoxy/gl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <ctype.h>
#include <string.h>

#include "shaders.h"

/* std430 record of a frame tile, 64 bytes (Tile in shaders.h): what the CPU writes per tile a frame. */
typedef struct gl_frame_tile {
    float origin_level[4]; /* tile origin relative to the eye's whole metres; level */
    float morph_skirt[4];  /* morph start and end (end <= start: no morph); a grid tile's skirt depth; 0 */
    uint32_t base_vertex;  /* the tile's first vertex: a grid vertex's (i, j) is gl_VertexID minus it */
    uint32_t id;           /* its resident tile id: its records' and boxes' place */
    uint32_t flags;        /* TILE_* */
    uint32_t mesh_first;   /* a mesh tile: its first index in the index buffer */
    uint32_t mesh_ground, mesh_skirt; /* a mesh tile: its ground's and its skirts' index counts */
    uint32_t pad_[2];
} gl_frame_tile;

enum {
    TILE_MESH = 1u,    /* a mesh tile (its colours from the vertex attribute; culled whole) */
    TILE_PREPASS = 2u, /* its pieces in the last culled frame's list are its own: the prepass may draw them */
    TILE_SIDE = 256u   /* << s: a grid tile's skirt along side s is drawn (skirt_sides) */
};

/* DrawRecord (shaders.h), one per tile id, written by the scatter pass: its size */
#define DRAW_RECORD_BYTES 48

/* GL's DrawElementsIndirectCommand. */
typedef struct gl_draw_command {
    GLuint count, instance_count, first_index;
    GLint base_vertex;
    GLuint base_instance;
} gl_draw_command;

/* The GPU's commands: a block per half of the list (cs_scan, cs_write): the list's skirt and ground
 * commands, the mesh commands' numbers, the ground it draws, then the mesh tiles' skirt commands and
 * ground commands (max_draws each). In uints. */
#define BLOCK_HEAD 16
#define BLOCK_MESH_SKIRTS BLOCK_HEAD
/* the totals the scan writes (cs_scan), read back for the figures */
#define TOTALS 40

/* The compute passes' uniforms, their locations looked up once (build_programs). */
enum {
    CU_SCATTER_TILES, CU_SCATTER_FRAME, CU_HIZ_FROM_DEPTH, CU_HIZ_SRC, CU_HIZ_DST,
    CU_CULL_TILES, CU_CULL_VIEW_PROJ, CU_CULL_EYE_FRAC, CU_CULL_SIZE, CU_CULL_NEAR, CU_CULL_LEVELS, CU_CULL_NO_SKIRTS, CU_CULL_BALL,
    CU_TILES_TILES, CU_TILES_VIEW_PROJ, CU_TILES_EYE_FRAC, CU_TILES_SIZE, CU_TILES_NEAR, CU_TILES_LEVELS, CU_TILES_NO_SKIRTS, CU_TILES_BALL,
    CU_SCAN_TILES, CU_SCAN_CMD, CU_SCAN_PREPASS, CU_WRITE_TILES, CU_WRITE_MESH_SKIRTS, CU_WRITE_MESH_GROUND,
    CU_SKY_ROWS, CU_SKY_FORWARD, CU_SKY_CAM_UP, CU_SKY_LOCAL_UP, CU_SKY_TAN, CU_SKY_SPACE, CU_COUNT
};

/* Frames whose GPU figures may wait to be read back at once. */
#define READBACKS 4

typedef struct box3 {
    float lo[3], hi[3];
} box3;

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
    uint32_t frame;         /* the last frame whose draw list had it, */
    float morph_start, morph_end; /* with this morph range */
    uint32_t uploaded;      /* frames drawn when it was (last) uploaded */
    int32_t side[4];        /* the resident tiles of its level beside it (sides j = 0, i = cells, j = cells, i = 0), or -1 */
    bool live, mesh;
    terra_vec3 origin; /* on a planet: terra_planet_tile_origin, once, */
    double least_r;    /* and the least distance from the centre of its ground as drawn (ground_floor) */
} gl_tile;

/* Compaction copies through a staging buffer of this size where a range moves by less than its
 * length and less than this (a buffer's copy to itself must not overlap; see move_down). */
#define STAGE_BYTES ((size_t)4 << 20)

/* A frame culled on the GPU whose figures are read back later (READBACKS of them). */
typedef struct gl_readback {
    GLsync fence;       /* 0: free */
    uint32_t frame;
    int tiles, ground_triangles; /* the frame's tiles and their ground triangles (the CPU's) */
} gl_readback;

struct terra_gl {
    terra_gl_desc d;
    /* a grid tile: its own vertices ((cells + 1)^2, tile_bytes as the streamer hands them over),
     * then its skirt's (4 cells: a copy of each border vertex); the shared indices, its triangles'
     * (grid_index_count) then the skirt's, index_count in all (mesh tiles' own lie past them) */
    int vertex_count, skirt_vertices, slot_vertices;
    int grid_index_count, index_count;
    size_t tile_bytes;
    /* how a grid tile is cut into pieces (tile_layout): blocks of `block` cells, `blocks` along a
     * side, in Morton order in the shared indices; then 4 blocks runs of skirt around the ring */
    int block, blocks, pieces, words, box_words; /* box_words: 3 on a planet (a piece's own up), else 2 */
    int32_t *ring;                     /* skirt vertex r hangs from grid vertex ring[r] */
    terra_grid_vertex *skirt_scratch;  /* one grid tile's skirt vertices, as uploaded */
    box3 *piece_boxes;                 /* one grid tile's piece boxes, */
    uint32_t *box_scratch;             /* packed (box_words each) */
    GLuint program, vao, vbo, ibo, tile_ids, commands, stage;
    GLint u_view_proj, u_cells, u_eye_frac, u_sun, u_flat, u_no_morph, u_level_tint, u_fog_distance;
    GLint u_eye_y, u_eye_mod, u_textures, u_planet, u_centre, u_up, u_radii, u_ramp, u_frame, u_prepass, u_eye;
    char *material; /* the source the ground program shades with (terra_gl_style.material), or NULL */
    /* culling on the GPU (shaders.h): its programs; per tile id the records (draws), bounds (two vec4)
     * and piece boxes; per frame tile its record, piece mask, counts then offsets; the commands it
     * writes (two blocks), its totals and their read-back ring; the list, two of them (list_cap
     * indices each, grown apart: the last culled frame's is list_half's, drawn at frame list_frame) */
    GLuint cs_scatter, cs_hiz, cs_cull_tiles, cs_cull, cs_scan, cs_write, cs_sky;
    GLint cu[CU_COUNT];
    float ball[4]; /* the frame's u_ball (shaders.h) */
    GLuint draws_buf, tiles_buf, bounds_buf, boxes_buf, vis_buf, counts_buf, gpu_cmds, totals_buf, readback_buf, lists[2];
    const uint32_t *readback_map;
    gl_readback readbacks[READBACKS];
    size_t list_cap[2];
    int list_half;
    bool list_mesh; /* it has mesh tiles' commands */
    uint32_t list_frame, moved; /* moved: frames drawn when a buffer was last compacted */
    size_t block_uints;
    GLint max_ssbo;
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
    /* the target: a framebuffer object (colour, and depth the culling reads), blitted to the bound
     * framebuffer (a window) when not offscreen; the depth pyramid (hiz_levels levels of sizes
     * hiz_size, 2 ints each) */
    bool offscreen;
    int width, height;
    GLuint fbo, colour_rb, depth_tex, hiz_tex;
    int hiz_levels, *hiz_size;
    /* the sky: a one-pixel-wide gradient (written on the GPU), blitted over the target (no draw call) */
    GLuint sky_fbo, sky_tex;
    double near_m;
    /* the buffers' sub-allocators; resident tiles, free tile ids, key -> tile id */
    gl_heap vheap, iheap;
    gl_tile *tiles;
    int *free_ids;
    int nfree_ids;
    key_map index;
    uint64_t *order; /* compaction: (offset << 32 | id) per tile */
    /* per-frame scratch: the frame's tiles (ids, records), the whole frame's commands */
    int32_t *frame_ids;
    gl_frame_tile *frame_tiles;
    gl_draw_command *cmds;
    int cmd_cap;
    uint32_t frame; /* frames drawn */
    int acc_uploads, acc_releases; /* since the last frame */
    double acc_upload_ms;
    double gl_s; /* this frame's time inside GL calls (the thread's CPU time) */
    terra_gl_stats stats;
};

/* Runs a stretch of GL calls, its time counted as the driver's (call_ms), not terra's. */
#define GL_CALLS(r, ...)                                                                                     \
    do {                                                                                                   \
        const double gl_t0_ = terra_thread_cpu_s();                                                        \
        __VA_ARGS__;                                                                                       \
        (r)->gl_s += terra_thread_cpu_s() - gl_t0_;                                                        \
    } while (0)

/* ---- shaders ---------------------------------------------------------------------------------------- */

/* srcs[0..n) in order (C11 promises string literals only up to 4095 characters) */
static terra_status compile(GLenum kind, const char *const *srcs, int n, const char *name, GLuint *out) {
    GLuint sh = glCreateShader(kind);
    glShaderSource(sh, n, srcs, NULL);
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

static terra_status link(GLuint *program, const GLuint *shaders, int n, const char *name) {
    *program = glCreateProgram();
    for (int i = 0; i < n; i++) glAttachShader(*program, shaders[i]);
    glLinkProgram(*program);
    GLint ok = 0;
    glGetProgramiv(*program, GL_LINK_STATUS, &ok);
    if (ok) return TERRA_OK;
    char log[2048];
    glGetProgramInfoLog(*program, sizeof log, NULL, log);
    return terra_fail(TERRA_E_UNSUPPORTED, "gl: the %s program does not link: %s", name, log);
}

/* A compute program: the version, the layout's constants, then its body (in up to three parts, the
 * others ""). */
static terra_status compute_program(const terra_gl *r, const char *const body[3], const char *name, GLuint *out) {
    char defs[512];
    snprintf(defs, sizeof defs,
             "#version 450 core\n#define NB %d\n#define PIECES %d\n#define WORDS %d\n#define BLOCK_INDICES %d\n"
             "#define RUN_INDICES %d\n#define GRID_INDICES %d\n#define BOX_WORDS %d\n",
             r->blocks, r->pieces, r->words, 6 * r->block * r->block, 6 * r->block, r->grid_index_count, r->box_words);
    GLuint cs = 0;
    terra_status st = compile(GL_COMPUTE_SHADER, (const char *const[]){defs, body[0], body[1], body[2]}, 4, name, &cs);
    if (st == TERRA_OK) st = link(out, &cs, 1, name);
    if (cs) glDeleteShader(cs);
    return st;
}

/* The compiler's log with the material's lines (numbered from MATERIAL_LINE0 + 1: compilers differ in
 * how they show a source string's number, not in the line) as `name`:LINE. */
#define MATERIAL_LINE0 100000
static void name_log_lines(const char *log, const char *name, char *out, size_t cap) {
    size_t n = 0;
    out[0] = 0;
    for (const char *line = log; *line && n + 1 < cap;) {
        const char *end = strchr(line, '\n');
        const size_t len = end ? (size_t)(end - line) + 1 : strlen(line);
        long number = 0;
        const char *at = line, *after = line;
        for (; at < line + len; at++) { /* the line's first number that is one of the material's lines */
            if (!isdigit((unsigned char)*at) || (at > line && isdigit((unsigned char)at[-1]))) continue;
            number = strtol(at, (char **)&after, 10);
            if (number > MATERIAL_LINE0 && number <= 2 * MATERIAL_LINE0) break;
        }
        int w;
        if (at < line + len) {
            if (at > line && at[-1] == '(' && *after == ')') after++;
            w = snprintf(out + n, cap - n, "%s:%ld%.*s", name, number - MATERIAL_LINE0, (int)(line + len - after), after);
        } else {
            w = snprintf(out + n, cap - n, "%.*s", (int)len, line);
        }
        if (w < 0) break;
        n += (size_t)w < cap - n ? (size_t)w : cap - n - 1;
        line += len;
    }
}

/* The ground's program: the vertex stage and the fragment stage, with `material` (NULL: terra's own
 * shading; gl.h) between its declarations and its main. */
static terra_status ground_program(const char *material, const char *material_name, GLuint *out) {
    GLuint sh[2] = {0, 0};
    terra_status st = compile(GL_VERTEX_SHADER, (const char *const[]){terra_gl_vs}, 1, "vertex", &sh[0]);
    if (st == TERRA_OK && !material) {
        st = compile(GL_FRAGMENT_SHADER, (const char *const[]){terra_gl_fs, terra_gl_fs_main}, 2, "fragment", &sh[1]);
    } else if (st == TERRA_OK) {
        const char *const srcs[] = {terra_gl_fs, terra_gl_material_head, material, terra_gl_material_tail, terra_gl_fs_main};
        sh[1] = glCreateShader(GL_FRAGMENT_SHADER);
        glShaderSource(sh[1], 5, srcs, NULL);
        glCompileShader(sh[1]);
        GLint ok = 0;
        glGetShaderiv(sh[1], GL_COMPILE_STATUS, &ok);
        if (!ok) {
            char log[2048], named[3072];
            glGetShaderInfoLog(sh[1], sizeof log, NULL, log);
            name_log_lines(log, material_name, named, sizeof named);
            st = terra_fail(TERRA_E_INVALID, "gl: the material %s does not compile:\n%s", material_name, named);
        }
    }
    if (st == TERRA_OK) st = link(out, sh, 2, material ? material_name : "ground");
    for (int i = 0; i < 2; i++)
        if (sh[i]) glDeleteShader(sh[i]);
    return st;
}

/* The ground program's uniforms, looked up again whenever it is rebuilt. */
static void ground_uniforms(terra_gl *r) {
    static const char *const names[] = {"u_view_proj", "u_sun",   "u_flat",   "u_no_morph", "u_level_tint", "u_fog_distance",
                                        "u_eye_y",     "u_eye_mod", "u_planet", "u_centre", "u_radii",      "u_ramp",
                                        "u_up",        "u_textures", "u_cells", "u_eye_frac", "u_frame",     "u_prepass",
                                        "u_eye"};
    GLint *const at[] = {&r->u_view_proj, &r->u_sun,      &r->u_flat,   &r->u_no_morph, &r->u_level_tint, &r->u_fog_distance,
                         &r->u_eye_y,     &r->u_eye_mod,  &r->u_planet, &r->u_centre,   &r->u_radii,      &r->u_ramp,
                         &r->u_up,        &r->u_textures, &r->u_cells,  &r->u_eye_frac, &r->u_frame,      &r->u_prepass,
                         &r->u_eye};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) *at[i] = glGetUniformLocation(r->program, names[i]);
}

/* Makes the ground program shade with `material` (NULL: terra's own), rebuilding it where that
 * changed; a material that does not compile leaves the program as it was. */
static terra_status use_material(terra_gl *r, const char *material, const char *name) {
    if (material == r->material || (material && r->material && strcmp(material, r->material) == 0)) return TERRA_OK;
    char *copy = NULL;
    if (material && !(copy = terra_alloc(strlen(material) + 1))) return terra_fail(TERRA_E_NOMEM, "gl: out of memory");
    GLuint program = 0;
    terra_status st = ground_program(material, name ? name : "(material)", &program);
    if (st != TERRA_OK) {
        terra_free(copy);
        if (program) glDeleteProgram(program);
        return st;
    }
    if (copy) strcpy(copy, material);
    glDeleteProgram(r->program);
    r->program = program;
    terra_free(r->material);
    r->material = copy;
    ground_uniforms(r);
    return TERRA_OK;
}

static terra_status build_programs(terra_gl *r) {
    terra_status st = ground_program(NULL, NULL, &r->program);
    const struct {
        const char *body[3], *name;
        GLuint *out;
    } cs[] = {{{terra_gl_cs_scatter, "", ""}, "scatter", &r->cs_scatter},
              {{terra_gl_cs_hiz, "", ""}, "depth pyramid", &r->cs_hiz},
              {{terra_gl_cs_cull_tiles, terra_gl_cs_shows, terra_gl_cs_cull_tiles_main}, "tile cull", &r->cs_cull_tiles},
              {{terra_gl_cs_cull, terra_gl_cs_shows, terra_gl_cs_cull_main}, "cull", &r->cs_cull},
              {{terra_gl_cs_scan, "", ""}, "scan", &r->cs_scan},
              {{terra_gl_cs_write, "", ""}, "list", &r->cs_write},
              {{terra_gl_cs_sky, "", ""}, "sky", &r->cs_sky}};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0] && st == TERRA_OK; i++) st = compute_program(r, cs[i].body, cs[i].name, cs[i].out);
    if (st != TERRA_OK) return st;
    ground_uniforms(r);
    const struct {
        GLuint program;
        const char *name;
    } cu[CU_COUNT] = {{r->cs_scatter, "u_tiles"},       {r->cs_scatter, "u_frame"},       {r->cs_hiz, "u_from_depth"},
                      {r->cs_hiz, "u_src_size"},        {r->cs_hiz, "u_dst_size"},        {r->cs_cull, "u_tiles"},
                      {r->cs_cull, "u_view_proj"},      {r->cs_cull, "u_eye_frac"},       {r->cs_cull, "u_size"},
                      {r->cs_cull, "u_near"},           {r->cs_cull, "u_hiz_levels"},     {r->cs_cull, "u_no_skirts"}, {r->cs_cull, "u_ball"},
                      {r->cs_cull_tiles, "u_tiles"},    {r->cs_cull_tiles, "u_view_proj"}, {r->cs_cull_tiles, "u_eye_frac"},
                      {r->cs_cull_tiles, "u_size"},     {r->cs_cull_tiles, "u_near"},     {r->cs_cull_tiles, "u_hiz_levels"},
                      {r->cs_cull_tiles, "u_no_skirts"}, {r->cs_cull_tiles, "u_ball"}, {r->cs_scan, "u_tiles"},         {r->cs_scan, "u_cmd"},
                      {r->cs_scan, "u_prepass"},        {r->cs_write, "u_tiles"},
                      {r->cs_write, "u_mesh_skirts"},   {r->cs_write, "u_mesh_ground"},   {r->cs_sky, "u_rows"},
                      {r->cs_sky, "u_forward"},         {r->cs_sky, "u_cam_up"},          {r->cs_sky, "u_local_up"},
                      {r->cs_sky, "u_tan"},             {r->cs_sky, "u_space"}};
    for (int i = 0; i < CU_COUNT; i++) r->cu[i] = glGetUniformLocation(cu[i].program, cu[i].name);
    /* texture units: the depth buffer 1 (the pyramid's first level reads it), the pyramid 2 */
    glProgramUniform1i(r->cs_hiz, glGetUniformLocation(r->cs_hiz, "u_depth"), 1);
    GLint subpixel = 4; /* GL asks for at least 4 bits */
    glGetIntegerv(GL_SUBPIXEL_BITS, &subpixel);
    const float snap = 1.0f / (float)(1 << (subpixel < 4 ? 4 : subpixel > 12 ? 12 : subpixel)) + 1e-3f;
    for (int i = 0; i < 2; i++) {
        const GLuint prog = i ? r->cs_cull : r->cs_cull_tiles;
        glProgramUniform1i(prog, glGetUniformLocation(prog, "u_depth"), 1);
        glProgramUniform1i(prog, glGetUniformLocation(prog, "u_hiz"), 2);
        glProgramUniform1f(prog, glGetUniformLocation(prog, "u_snap"), snap);
    }
    return TERRA_OK;
}

/* ---- targets ---------------------------------------------------------------------------------------- */

static void free_target(terra_gl *r) {
    if (r->fbo) glDeleteFramebuffers(1, &r->fbo);
    if (r->colour_rb) glDeleteRenderbuffers(1, &r->colour_rb);
    GLuint tex[3] = {r->depth_tex, r->hiz_tex, r->sky_tex};
    for (int i = 0; i < 3; i++)
        if (tex[i]) glDeleteTextures(1, &tex[i]);
    if (r->sky_fbo) glDeleteFramebuffers(1, &r->sky_fbo);
    r->fbo = r->colour_rb = r->depth_tex = r->hiz_tex = r->sky_fbo = r->sky_tex = 0;
    terra_free(r->hiz_size);
    r->hiz_size = NULL;
}

/* The target: colour, a depth texture (the culling reads it), the depth pyramid over it (level l of
 * ceil(size / 2^(l + 1)) texels, held in a texture of powers of two so GL's levels halve exactly), and
 * the sky's gradient. */
static terra_status make_target(terra_gl *r, int w, int h) {
    free_target(r);
    r->width = w;
    r->height = h;
    glCreateFramebuffers(1, &r->fbo);
    glCreateRenderbuffers(1, &r->colour_rb);
    glNamedRenderbufferStorage(r->colour_rb, GL_RGBA8, w, h);
    glCreateTextures(GL_TEXTURE_2D, 1, &r->depth_tex);
    glTextureStorage2D(r->depth_tex, 1, GL_DEPTH_COMPONENT32F, w, h);
    glTextureParameteri(r->depth_tex, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
    glTextureParameteri(r->depth_tex, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
    glNamedFramebufferRenderbuffer(r->fbo, GL_COLOR_ATTACHMENT0, GL_RENDERBUFFER, r->colour_rb);
    glNamedFramebufferTexture(r->fbo, GL_DEPTH_ATTACHMENT, r->depth_tex, 0);
    if (glCheckNamedFramebufferStatus(r->fbo, GL_FRAMEBUFFER) != GL_FRAMEBUFFER_COMPLETE)
        return terra_fail(TERRA_E_UNSUPPORTED, "gl: a %d x %d RGBA8 + depth32F framebuffer is not complete", w, h);
    int vw = (w + 1) / 2, vh = (h + 1) / 2, tw = 1, th = 1;
    while (tw < vw) tw *= 2;
    while (th < vh) th *= 2;
    r->hiz_levels = 1;
    for (int s = tw > th ? tw : th; s > 1; s /= 2) r->hiz_levels++;
    r->hiz_size = terra_alloc(sizeof(int) * 2 * (size_t)r->hiz_levels);
    if (!r->hiz_size) return terra_fail(TERRA_E_NOMEM, "gl: out of memory");
    for (int l = 0; l < r->hiz_levels; l++) {
        r->hiz_size[2 * l] = vw, r->hiz_size[2 * l + 1] = vh;
        vw = (vw + 1) / 2, vh = (vh + 1) / 2;
    }
    glCreateTextures(GL_TEXTURE_2D, 1, &r->hiz_tex);
    glTextureStorage2D(r->hiz_tex, r->hiz_levels, GL_R32F, tw, th);
    glTextureParameteri(r->hiz_tex, GL_TEXTURE_MIN_FILTER, GL_NEAREST_MIPMAP_NEAREST);
    glTextureParameteri(r->hiz_tex, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
    glCreateTextures(GL_TEXTURE_2D, 1, &r->sky_tex);
    glTextureStorage2D(r->sky_tex, 1, GL_RGBA8, 1, h);
    glCreateFramebuffers(1, &r->sky_fbo);
    glNamedFramebufferTexture(r->sky_fbo, GL_COLOR_ATTACHMENT0, r->sky_tex, 0);
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
    GLuint progs[8] = {r->program, r->cs_scatter, r->cs_hiz, r->cs_cull_tiles, r->cs_cull, r->cs_scan, r->cs_write, r->cs_sky};
    for (int i = 0; i < 8; i++)
        if (progs[i]) glDeleteProgram(progs[i]);
    if (r->vao) glDeleteVertexArrays(1, &r->vao);
    for (int i = 0; i < READBACKS; i++)
        if (r->readbacks[i].fence) glDeleteSync(r->readbacks[i].fence);
    if (r->readback_map) glUnmapNamedBuffer(r->readback_buf);
    GLuint bufs[] = {r->vbo,       r->ibo,       r->tile_ids, r->commands, r->surfaces_buf, r->stage,    r->draws_buf,
                     r->tiles_buf, r->bounds_buf, r->boxes_buf, r->vis_buf,  r->counts_buf,   r->gpu_cmds, r->totals_buf,
                     r->readback_buf, r->lists[0], r->lists[1]};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
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
    terra_free(r->frame_ids);
    terra_free(r->frame_tiles);
    terra_free(r->cmds);
    terra_free(r->upload_scratch);
    terra_free(r->ring);
    terra_free(r->skirt_scratch);
    terra_free(r->box_scratch);
    terra_free(r->material);
    terra_free(r->piece_boxes);
    terra_free(r->mesh_v);
    terra_free(r->mesh_i);
    terra_free(r->mesh_scratch);
    terra_free(r);
}

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

/* ---- pieces --------------------------------------------------------------------------------------------
 * A grid tile is culled in pieces: blocks of `block` cells (cells / 16, at least 2: 8 triangles of a
 * 32-cell tile; larger where max_tiles' boxes would overflow a storage buffer), `blocks` along a side, its shared ground indices laid block by block in Morton order
 * (each block's cells in strips of 8 as terra_grid_indices lays them), so a block is a range of them;
 * then its skirt in 4 blocks runs of `block` border cells around the ring (a run's indices lie
 * together: skirt_indices). Each piece has a box of its vertices and morph targets (a skirt run's
 * down to its skirt's depth), stored in 10 bits a coordinate within the tile's bounds, rounded
 * outward. A mesh tile is two pieces: its ground and its skirts, each in the box of all its vertices. */

static void tile_layout(terra_gl *r, int cells, int block) {
    r->block = block < cells ? block : cells;
    r->blocks = cells / r->block;
    r->pieces = r->blocks * r->blocks + 4 * r->blocks;
    r->words = (r->pieces + 31) / 32;
}

/* The Morton position of block (bi, bj) (bi along x): its bit in a mask, its place in the indices. */
static int morton(int x, int y) {
    int m = 0;
    for (int b = 0; b < 4; b++) m |= ((x >> b) & 1) << (2 * b) | ((y >> b) & 1) << (2 * b + 1);
    return m;
}

/* The grid's shared indices (terra_grid_index_count(cells)), block after block in Morton order. */
static void grid_indices_by_block(const terra_gl *r, int cells, uint32_t *out) {
    enum { STRIP = 8 };
    const uint32_t stride = (uint32_t)cells + 1;
    const int nb = r->blocks, B = r->block;
    for (int bj = 0; bj < nb; bj++)
        for (int bi = 0; bi < nb; bi++) {
            size_t k = (size_t)morton(bi, bj) * 6 * (size_t)(B * B);
            for (int c0 = bi * B; c0 < (bi + 1) * B; c0 += STRIP)
                for (int j = bj * B; j < (bj + 1) * B; j++)
                    for (int i = c0; i < c0 + STRIP && i < (bi + 1) * B; i++) {
                        const uint32_t v00 = (uint32_t)j * stride + (uint32_t)i, v10 = v00 + 1, v01 = v00 + stride,
                                       v11 = v01 + 1;
                        /* as terra_grid_indices: diagonal v00-v11, counter-clockwise seen from +y */
                        out[k++] = v00, out[k++] = v01, out[k++] = v11;
                        out[k++] = v00, out[k++] = v11, out[k++] = v10;
                    }
        }
}

static const box3 EMPTY_BOX = {{INFINITY, INFINITY, INFINITY}, {-INFINITY, -INFINITY, -INFINITY}};

/* A tile's boxes are in its own axes (the third the cross product of the first two, as the cull
 * shader makes it): on the plane the world's; on a planet x along the tile's first row and y up from
 * the centre, so a box hugs the tile's curved, tilted ground. */
typedef struct box_axes {
    float x[3], y[3], z[3]; /* z: x cross y */
    bool world;
} box_axes;
static const box_axes WORLD_AXES = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}, true};

/* Grows b by a vertex and its morph target, in the axes a. The floats' rounding (a few 2^-24 of a
 * coordinate, within the tile's extent) is far inside what the cull pass widens a box by. */
static void box_add(box3 *b, const box_axes *a, const terra_grid_vertex *v) {
    const float p[2][3] = {{v->x, v->y, v->z}, {v->mx, v->my, v->mz}};
    for (int k = 0; k < 2; k++) {
        float c[3] = {p[k][0], p[k][1], p[k][2]};
        if (!a->world)
            for (int i = 0; i < 3; i++) {
                const float *e = i == 0 ? a->x : i == 1 ? a->y : a->z;
                c[i] = p[k][0] * e[0] + p[k][1] * e[1] + p[k][2] * e[2];
            }
        for (int i = 0; i < 3; i++) {
            if (c[i] < b->lo[i]) b->lo[i] = c[i];
            if (c[i] > b->hi[i]) b->hi[i] = c[i];
        }
    }
}

/* A planet tile's axes (box_axes): y the direction from the centre to its middle vertex, x its first
 * row's direction made square to y. */
static box_axes planet_axes(terra_vec3 o, const terra_grid_vertex *v, int cells) {
    const terra_grid_vertex *m = &v[(cells / 2) * (cells + 1) + cells / 2], *e = &v[cells];
    double y[3] = {o.x + m->x, o.y + m->y, o.z + m->z}, x[3] = {(double)e->x - v[0].x, (double)e->y - v[0].y, (double)e->z - v[0].z};
    const double ly = sqrt(y[0] * y[0] + y[1] * y[1] + y[2] * y[2]);
    for (int i = 0; i < 3; i++) y[i] /= ly;
    const double d = x[0] * y[0] + x[1] * y[1] + x[2] * y[2];
    for (int i = 0; i < 3; i++) x[i] -= d * y[i];
    const double lx = sqrt(x[0] * x[0] + x[1] * x[1] + x[2] * x[2]);
    if (!(lx > 0) || !(ly > 0)) return WORLD_AXES;
    box_axes a = {{(float)(x[0] / lx), (float)(x[1] / lx), (float)(x[2] / lx)}, {(float)y[0], (float)y[1], (float)y[2]}, {0, 0, 0}, false};
    a.z[0] = a.x[1] * a.y[2] - a.x[2] * a.y[1], a.z[1] = a.x[2] * a.y[0] - a.x[0] * a.y[2], a.z[2] = a.x[0] * a.y[1] - a.x[1] * a.y[0];
    return a;
}

static void box_union(box3 *b, const box3 *o) {
    for (int c = 0; c < 3; c++) {
        if (o->lo[c] < b->lo[c]) b->lo[c] = o->lo[c];
        if (o->hi[c] > b->hi[c]) b->hi[c] = o->hi[c];
    }
}

/* A piece's box within the tile's bounds t: 10 bits a coordinate, its low corner rounded down and its
 * high one up (lo in out[0], hi in out[1], x in the low bits). */
static void box_pack(const box3 *t, const box3 *b, uint32_t out[2]) {
    out[0] = out[1] = 0;
    for (int c = 0; c < 3; c++) {
        const double ext = (double)t->hi[c] - t->lo[c];
        double qlo = 0, qhi = 1023;
        if (ext > 0) {
            qlo = floor(((double)b->lo[c] - t->lo[c]) / ext * 1023), qhi = ceil(((double)b->hi[c] - t->lo[c]) / ext * 1023);
            qlo = fmin(fmax(qlo, 0), 1023), qhi = fmin(fmax(qhi, 0), 1023);
        }
        out[0] |= (uint32_t)qlo << (10 * c), out[1] |= (uint32_t)qhi << (10 * c);
    }
}

/* A direction in one word (octahedral, 16 bits a coordinate) and back, as the cull shader decodes it. */
static uint32_t oct_encode(const double n[3]) {
    const double l1 = fabs(n[0]) + fabs(n[1]) + fabs(n[2]);
    double u = n[0] / l1, v = n[1] / l1;
    if (n[2] < 0) {
        const double fu = (1 - fabs(v)) * (u >= 0 ? 1 : -1), fv = (1 - fabs(u)) * (v >= 0 ? 1 : -1);
        u = fu, v = fv;
    }
    return (uint32_t)lround((u * 0.5 + 0.5) * 65535) | (uint32_t)lround((v * 0.5 + 0.5) * 65535) << 16;
}
static void oct_decode(uint32_t w, float out[3]) {
    float u = (float)(w & 0xffffu) / 65535.0f * 2 - 1, v = (float)(w >> 16) / 65535.0f * 2 - 1;
    const float z = 1 - fabsf(u) - fabsf(v);
    if (z < 0) {
        const float fu = (1 - fabsf(v)) * (u >= 0 ? 1.0f : -1.0f), fv = (1 - fabsf(u)) * (v >= 0 ? 1.0f : -1.0f);
        u = fu, v = fv;
    }
    const float l = sqrtf(u * u + v * v + z * z);
    out[0] = u / l, out[1] = v / l, out[2] = z / l;
}

/* A planet piece's own axes: y its up (the direction from the centre to its middle vertex, o + m, in
 * one word, decoded as the shader decodes it), x the tile's x made square to it: a piece's box then
 * hugs its own stretch of the curve, which on a coarse tile (a face is 90 degrees of arc) lies tilted
 * far from the tile's up, so a box in the tile's axes stands hundreds of kilometres above the ground
 * and pokes over the limb. */
static box_axes piece_axes(const box_axes *tile, terra_vec3 o, const terra_grid_vertex *m, uint32_t *word) {
    const double up[3] = {o.x + m->x, o.y + m->y, o.z + m->z};
    *word = oct_encode(up);
    box_axes a = {.world = false};
    oct_decode(*word, a.y);
    const float d = tile->x[0] * a.y[0] + tile->x[1] * a.y[1] + tile->x[2] * a.y[2];
    for (int i = 0; i < 3; i++) a.x[i] = tile->x[i] - d * a.y[i];
    const float lx = sqrtf(a.x[0] * a.x[0] + a.x[1] * a.x[1] + a.x[2] * a.x[2]);
    for (int i = 0; i < 3; i++) a.x[i] /= lx;
    a.z[0] = a.x[1] * a.y[2] - a.x[2] * a.y[1], a.z[1] = a.x[2] * a.y[0] - a.x[0] * a.y[2], a.z[2] = a.x[0] * a.y[1] - a.x[1] * a.y[0];
    return a;
}

/* The least distance from the centre of a planet grid tile's ground as drawn, at any morph: every point
 * q drawn in a cell is a mean of the cell's 8 corners and their morph targets p_i (a morph slides a
 * corner along that segment), so for u the direction of their sum, |q| >= q . u >= min p_i . u. */
static double ground_floor(const terra_gl *r, terra_vec3 o, const terra_grid_vertex *v) {
    const int cells = r->d.grid.cells, s = cells + 1;
    double least = INFINITY;
    for (int j = 0; j < cells; j++)
        for (int i = 0; i < cells; i++) {
            double p[8][3], u[3] = {0, 0, 0};
            for (int c = 0; c < 8; c++) {
                const terra_grid_vertex *a = &v[(j + (c >> 2)) * s + i + ((c >> 1) & 1)];
                const bool m = c & 1;
                p[c][0] = o.x + (m ? a->mx : a->x), p[c][1] = o.y + (m ? a->my : a->y), p[c][2] = o.z + (m ? a->mz : a->z);
                for (int k = 0; k < 3; k++) u[k] += p[c][k];
            }
            const double l = sqrt(u[0] * u[0] + u[1] * u[1] + u[2] * u[2]);
            for (int c = 0; c < 8; c++) least = fmin(least, (p[c][0] * u[0] + p[c][1] * u[1] + p[c][2] * u[2]) / l);
        }
    return fmax(least, 0);
}

/* A grid tile's bounds (relative to its origin o, in its axes a, over every vertex, morph target and
 * skirt bottom) and its pieces' boxes, packed into r->box_scratch: on the plane in the tile's axes within
 * those bounds; on a planet each in its own axes (piece_axes, the up's word third) within the union of
 * those boxes (*pieces_all). The skirt hangs below its border (toward the centre on a planet: there the
 * run's box widens by the depth every way). */
static box3 grid_boxes(terra_gl *r, const box_axes *a, terra_vec3 o, const terra_grid_vertex *v, float skirt_m, box3 *pieces_all) {
    const int cells = r->d.grid.cells, s = cells + 1, B = r->block, nb = r->blocks, W = r->box_words;
    box3 *boxes = r->piece_boxes;
    box3 all = EMPTY_BOX;
    *pieces_all = EMPTY_BOX;
    for (int p = 0; p < r->pieces; p++) {
        const int ground = p < nb * nb;
        int bi = 0, bj = 0, c = p - nb * nb;
        if (ground) /* p is block (bi, bj)'s Morton position */
            for (int b = 0; b < 4; b++) bi |= ((p >> (2 * b)) & 1) << b, bj |= ((p >> (2 * b + 1)) & 1) << b;
        const terra_grid_vertex *mid = ground ? &v[(bj * B + B / 2) * s + bi * B + B / 2] : &v[r->ring[(c * B + B / 2) % (4 * cells)]];
        box_axes own = *a;
        if (W == 3) own = piece_axes(a, o, mid, &r->box_scratch[W * p + 2]);
        box3 b[2] = {EMPTY_BOX, EMPTY_BOX}; /* in its own axes, in the tile's (on a planet) */
        for (int k = 0; k < (W == 3 ? 2 : 1); k++) {
            const box_axes *ax = k ? a : &own;
            if (ground)
                for (int j = bj * B; j <= (bj + 1) * B; j++)
                    for (int i = bi * B; i <= (bi + 1) * B; i++) box_add(&b[k], ax, &v[j * s + i]);
            else
                for (int e = c * B; e <= (c + 1) * B; e++) box_add(&b[k], ax, &v[r->ring[e % (4 * cells)]]);
            for (int i = 0; i < 3 && !ground; i++) {
                if (r->d.planet || i == 1) b[k].lo[i] -= skirt_m;
                if (r->d.planet) b[k].hi[i] += skirt_m;
            }
        }
        boxes[p] = b[0];
        box_union(&all, &b[W == 3]);
        box_union(pieces_all, &b[0]);
    }
    for (int p = 0; p < r->pieces; p++) box_pack(pieces_all, &boxes[p], r->box_scratch + W * p);
    return all;
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

/* A buffer of `bytes` (at least 4), updated from the CPU where `dynamic`; its size counted. */
static GLuint make_buffer(terra_gl *r, size_t bytes, const void *data, GLbitfield flags) {
    GLuint b;
    glCreateBuffers(1, &b);
    glNamedBufferStorage(b, (GLsizeiptr)(bytes > 4 ? bytes : 4), data, flags);
    r->stats.gpu_bytes += bytes;
    return b;
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
    if (d.max_draws > (1 << 20)) return terra_fail(TERRA_E_INVALID, "gl: max_draws %d is more than 2^20", d.max_draws);
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
    if (!epoxy_has_gl_extension("GL_ARB_indirect_parameters") || !epoxy_has_gl_extension("GL_ARB_shader_draw_parameters"))
        return terra_fail(TERRA_E_UNSUPPORTED, "gl: GL_ARB_indirect_parameters and GL_ARB_shader_draw_parameters are needed "
                                               "(the culled frame's draws are written and counted on the GPU)");
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
    r->list_half = -1;
    glGetIntegerv(GL_MAX_SHADER_STORAGE_BLOCK_SIZE, &r->max_ssbo);
    r->box_words = d.planet ? 3 : 2;
    /* per tile id: its piece boxes, which one storage buffer must hold: where max_tiles' would not fit,
     * larger blocks (fewer pieces, culled more coarsely) */
    size_t box_bytes;
    for (int block = d.grid.cells / 16 > 2 ? d.grid.cells / 16 : 2;; block *= 2) {
        tile_layout(r, d.grid.cells, block);
        box_bytes = sizeof(uint32_t) * (size_t)r->box_words * (size_t)r->pieces * (size_t)d.max_tiles;
        if (box_bytes <= (size_t)r->max_ssbo || r->block == d.grid.cells) break;
    }
    if (box_bytes > (size_t)r->max_ssbo) {
        terra_free(r);
        return terra_fail(TERRA_E_INVALID, "gl: %d tiles' culling boxes (%zu MiB) exceed this GL's storage buffers (%d MiB): "
                                           "fewer max_tiles", d.max_tiles, box_bytes >> 20, r->max_ssbo >> 20);
    }
    const size_t vbytes = d.vertex_bytes, ibytes = sizeof(uint32_t) * (size_t)index_count + d.index_bytes;
    bool ok = heap_init(&r->vheap, vunits, d.max_tiles) && heap_init(&r->iheap, iunits, d.max_tiles);
    ok = ok && (r->tiles = terra_calloc((size_t)d.max_tiles, sizeof *r->tiles)) != NULL;
    ok = ok && (r->free_ids = terra_alloc(sizeof(int) * (size_t)d.max_tiles)) != NULL;
    ok = ok && (r->order = terra_alloc(sizeof *r->order * (size_t)d.max_tiles)) != NULL;
    ok = ok && map_init(&r->index, d.max_tiles);
    ok = ok && (r->frame_ids = terra_alloc(sizeof *r->frame_ids * (size_t)d.max_draws)) != NULL;
    ok = ok && (r->frame_tiles = terra_alloc(sizeof *r->frame_tiles * (size_t)d.max_draws)) != NULL;
    r->cmd_cap = 3 * d.max_draws; /* a grid tile: its ground and at most two runs of skirt sides; a mesh tile two */
    ok = ok && (r->cmds = terra_alloc(sizeof *r->cmds * (size_t)r->cmd_cap)) != NULL;
    ok = ok && (r->upload_scratch = terra_alloc(r->tile_bytes)) != NULL;
    ok = ok && (r->ring = terra_alloc(sizeof *r->ring * (size_t)skirt_vertices)) != NULL;
    ok = ok && (r->skirt_scratch = terra_alloc(sizeof *r->skirt_scratch * (size_t)skirt_vertices)) != NULL;
    ok = ok && (r->piece_boxes = terra_alloc(sizeof *r->piece_boxes * (size_t)r->pieces)) != NULL;
    ok = ok && (r->box_scratch = terra_alloc(sizeof(uint32_t) * (size_t)r->box_words * (size_t)r->pieces)) != NULL;
    uint32_t *scratch = ok ? terra_alloc(sizeof(uint32_t) * (size_t)r->index_count) : NULL;
    if (!scratch) {
        terra_gl_destroy(r);
        return terra_fail(TERRA_E_NOMEM, "gl: out of memory");
    }
    for (int i = 0; i < d.max_tiles; i++) r->free_ids[r->nfree_ids++] = d.max_tiles - 1 - i;

    st = build_programs(r);
    if (st != TERRA_OK) {
        terra_free(scratch);
        terra_gl_destroy(r);
        return st;
    }
    while (glGetError() != GL_NO_ERROR) {
    }
    /* one vertex buffer for every resident tile, and beside it each vertex's tile id; one index
     * buffer: the grid tiles' shared indices first (block by block, then the skirt's), then the mesh
     * tiles' own */
    r->vbo = make_buffer(r, vbytes, NULL, GL_DYNAMIC_STORAGE_BIT);
    r->tile_ids = make_buffer(r, sizeof(uint32_t) * (size_t)vunits, NULL, 0);
    for (int k = 0; k < skirt_vertices; k++) r->ring[k] = ring_vertex(d.grid.cells, k);
    grid_indices_by_block(r, d.grid.cells, scratch);
    skirt_indices(d.grid.cells, r->ring, scratch + grid_index_count);
    r->ibo = make_buffer(r, ibytes, NULL, GL_DYNAMIC_STORAGE_BIT);
    glNamedBufferSubData(r->ibo, 0, (GLsizeiptr)(sizeof(uint32_t) * (size_t)r->index_count), scratch);
    terra_free(scratch);
    /* the whole frame's commands (CPU); the culling's buffers (shaders.h) */
    r->commands = make_buffer(r, sizeof(gl_draw_command) * (size_t)r->cmd_cap, NULL, GL_DYNAMIC_STORAGE_BIT);
    r->draws_buf = make_buffer(r, DRAW_RECORD_BYTES * (size_t)d.max_tiles, NULL, 0);
    r->tiles_buf = make_buffer(r, sizeof(gl_frame_tile) * (size_t)d.max_draws, NULL, GL_DYNAMIC_STORAGE_BIT);
    r->bounds_buf = make_buffer(r, sizeof(float) * 24 * (size_t)d.max_tiles, NULL, GL_DYNAMIC_STORAGE_BIT);
    r->boxes_buf = make_buffer(r, box_bytes, NULL, GL_DYNAMIC_STORAGE_BIT);
    r->vis_buf = make_buffer(r, sizeof(uint32_t) * (size_t)r->words * (size_t)d.max_draws, NULL, 0);
    r->counts_buf = make_buffer(r, sizeof(uint32_t) * 2 * (size_t)d.max_draws, NULL, 0);
    r->block_uints = BLOCK_HEAD + 10 * (size_t)d.max_draws;
    r->gpu_cmds = make_buffer(r, sizeof(uint32_t) * 2 * r->block_uints, NULL, 0);
    r->totals_buf = make_buffer(r, sizeof(uint32_t) * TOTALS, NULL, 0);
    const GLbitfield map = GL_MAP_READ_BIT | GL_MAP_PERSISTENT_BIT | GL_MAP_COHERENT_BIT;
    r->readback_buf = make_buffer(r, sizeof(uint32_t) * TOTALS * READBACKS, NULL, map);
    r->readback_map = glMapNamedBufferRange(r->readback_buf, 0, (GLsizeiptr)(sizeof(uint32_t) * TOTALS * READBACKS), map);
    /* the vertex layout: terra_grid_vertex, 32 bytes, and the tile id of each */
    glCreateVertexArrays(1, &r->vao);
    glVertexArrayVertexBuffer(r->vao, 0, r->vbo, 0, sizeof(terra_grid_vertex));
    glVertexArrayVertexBuffer(r->vao, 1, r->tile_ids, 0, sizeof(uint32_t));
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
    r->offscreen = d.width > 0;
    st = r->readback_map ? make_target(r, r->offscreen ? d.width : 1, r->offscreen ? d.height : 1)
                         : terra_fail(TERRA_E_UNSUPPORTED, "gl: the figures' read-back buffer cannot be mapped");
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


/* Marks vertices [off, off + n) as tile id's. */
static void mark_tile(terra_gl *r, uint32_t off, uint32_t n, int32_t id) {
    const GLuint v = (GLuint)id;
    glClearNamedBufferSubData(r->tile_ids, GL_R32UI, (GLintptr)(sizeof(uint32_t) * off), (GLsizeiptr)(sizeof(uint32_t) * n),
                              GL_RED_INTEGER, GL_UNSIGNED_INT, &v);
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
        const int32_t id = (int32_t)(uint32_t)r->order[k];
        gl_tile *t = &r->tiles[id];
        uint32_t *off = vertices ? &t->v_off : &t->i_off;
        const uint32_t count = vertices ? t->v_count : t->i_count;
        if (*off != at) {
            move_down(r, buf, base + unit * *off, base + unit * at, unit * count);
            if (vertices) mark_tile(r, at, count, id); /* below every range not yet moved */
        }
        *off = at;
        at += count;
    }
    h->nfree = at < h->capacity;
    h->off[0] = at;
    h->len[0] = h->capacity - at;
    r->stats.compactions++;
    r->moved = r->frame; /* the last culled frame's list names vertices where they were */
}

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

/* Sides j = 0, i = cells, j = cells, i = 0: the neighbour's step; side s faces side s ^ 2. */
static const int SIDE_DX[4] = {0, 1, 0, -1}, SIDE_DY[4] = {-1, 0, 1, 0};

/* A new tile id: linked with the resident tiles of its level beside it (skirt_sides reads them). */
static void link_sides(terra_gl *r, int32_t id) {
    gl_tile *t = &r->tiles[id];
    const int face = terra_tile_key_face(t->key), level = terra_tile_key_level(t->key);
    const int32_t x = terra_tile_key_x(t->key), y = terra_tile_key_y(t->key);
    for (int s = 0; s < 4; s++) {
        t->side[s] = map_get(&r->index, terra_tile_key_make(face, level, x + SIDE_DX[s], y + SIDE_DY[s]));
        if (t->side[s] >= 0) r->tiles[t->side[s]].side[s ^ 2] = id;
    }
}

static void release_tile(terra_gl *r, int32_t id) {
    gl_tile *t = &r->tiles[id];
    heap_free(&r->vheap, t->v_off, t->v_count);
    heap_free(&r->iheap, t->i_off, t->i_count);
    map_del(&r->index, t->key);
    for (int s = 0; s < 4; s++)
        if (t->side[s] >= 0) r->tiles[t->side[s]].side[s ^ 2] = -1;
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
        link_sides(r, id);
        r->stats.resident++;
    }
    uint32_t v_off = 0, i_off = 0;
    const bool placed = heap_alloc(r, true, need, &v_off) && heap_alloc(r, false, ni, &i_off);
    if (!placed) { /* cannot happen: the free totals sufficed, and compaction makes them one block */
        release_tile(r, id);
        return terra_fail(TERRA_E_CAPACITY, "gl: tile (level %d, %d, %d) could not be placed", level, tx, ty);
    }
    t->v_off = v_off, t->v_count = need, t->i_off = i_off, t->i_count = ni, t->skirt_triangles = skirts;
    t->skirt_m = skirt_m, t->mesh = mesh, t->uploaded = r->frame;
    t->origin = r->d.planet ? terra_planet_tile_origin(r->d.planet, key) : (terra_vec3){0, 0, 0};
    r->stats.mesh_tiles += mesh;
    /* its culling boxes: a grid tile's pieces', a mesh tile's bounds, in its axes */
    box3 bounds = EMPTY_BOX, pieces = EMPTY_BOX;
    const box_axes axes = r->d.planet && !mesh ? planet_axes(t->origin, verts, r->d.grid.cells) : WORLD_AXES;
    t->least_r = r->d.planet && !mesh ? ground_floor(r, t->origin, verts) : 0;
    if (mesh)
        for (uint32_t i = 0; i < nv; i++) box_add(&bounds, &axes, &verts[i]);
    else
        bounds = grid_boxes(r, &axes, t->origin, verts, skirt_m, &pieces);
    const float b24[24] = {bounds.lo[0], bounds.lo[1], bounds.lo[2], 0, bounds.hi[0], bounds.hi[1], bounds.hi[2], 0,
                           axes.x[0],    axes.x[1],    axes.x[2],    0, axes.y[0],    axes.y[1],    axes.y[2],    0,
                           pieces.lo[0], pieces.lo[1], pieces.lo[2], 0, pieces.hi[0], pieces.hi[1], pieces.hi[2], 0};
    glNamedBufferSubData(r->bounds_buf, (GLintptr)(sizeof b24 * (size_t)id), sizeof b24, b24);
    if (!mesh)
        glNamedBufferSubData(r->boxes_buf, (GLintptr)(sizeof(uint32_t) * (size_t)r->box_words * (size_t)r->pieces * (size_t)id),
                             (GLsizeiptr)(sizeof(uint32_t) * (size_t)r->box_words * (size_t)r->pieces), r->box_scratch);
    glNamedBufferSubData(r->vbo, (GLintptr)(sizeof *verts * (size_t)v_off), (GLsizeiptr)(sizeof *verts * nv), verts);
    if (!mesh)
        glNamedBufferSubData(r->vbo, (GLintptr)(sizeof *verts * ((size_t)v_off + nv)),
                             (GLsizeiptr)(sizeof *verts * (size_t)r->skirt_vertices), r->skirt_scratch);
    mark_tile(r, v_off, need, id);
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

/* Per surface id: tint, tiling and texture layers, for the fragment stage; written again only when
 * the table (or its version) changes. */
static void update_surfaces(terra_gl *r, const terra_surface_table *t) {
    if (r->textures_loaded && t == r->textures_of && terra_surface_table_version(t) == r->textures_version) return;
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

/* ---- a frame: the view ------------------------------------------------------------------------------ */
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



/* The eye's local up: the camera's (a planet's), else +y. */
static terra_vec3 local_up(const terra_camera *cam) {
    const terra_vec3 u = cam->up;
    const double l = sqrt(u.x * u.x + u.y * u.y + u.z * u.z);
    return l > 0 ? (terra_vec3){u.x / l, u.y / l, u.z / l} : (terra_vec3){0, 1, 0};
}

/* ---- a frame ------------------------------------------------------------------------------------------
 * The CPU's part, O(tiles) with no sorting: each drawn tile's id (a hash lookup), its record (origin
 * relative to the eye in double, morph range, which skirt sides it needs), written to one buffer. The
 * rest is the GPU's:
 *  1. scatter: each record to its tile id's place, where the vertex stage reads it;
 *  2. the depth prepass (depth only, the same program): the ground pieces the last culled frame drew,
 *     replayed from its list, of the tiles this frame draws that were resident and unmoved since
 *     (TILE_PREPASS; any other vertex is sent outside the view, dropping its triangle);
 *  3. the depth pyramid over it (cs_hiz);
 *  4. cull (cs_cull): every piece of every tile against the view's sides and the pyramid;
 *  5. scan and list (cs_scan, cs_write): the pieces kept, in the frame's order, into the list (grid
 *     tiles) and commands (mesh tiles); their totals copied for reading back;
 *  6. the picture: all skirts (the list's, then mesh tiles'), then all ground, GL_GEQUAL.
 * Why the picture is the whole frame's, bit for bit: with GL_GEQUAL and depth writes, a pixel ends with
 * the greatest depth M of all the fragments drawn there and the colour of the last of those at depth M
 * in draw order. The prepass draws real fragments of this frame (the same program on the same vertices
 * and records), so it leaves depths no greater than M, under which the picture's own fragments at M
 * still pass; a piece culled has every fragment strictly farther than the prepass's depth over its
 * rectangle, so none at M; the pieces kept are drawn in the order the whole frame draws them. So the
 * final depth and colour are those of drawing every piece (style.no_occlusion: the same commands
 * built on the CPU, the reference). Skirts go first so that where a skirt is exactly as near as the
 * ground it hangs from, the ground, drawn later, keeps the pixel.
 * A fresh renderer, a camera cut, or a frame after a compaction has no prepass (or a poor one) and
 * culls by the view's sides alone (or less): never wrong, only less culled. */

/* Whether a grid tile's skirt along each side is drawn (TILE_SIDE << side): not where the neighbour of
 * its level is a grid tile of this frame with its morph range, as every sample of the side is both
 * tiles' and morphs alike in both (no gap to close). */
static uint32_t skirt_sides(const terra_gl *r, const gl_tile *t) {
    uint32_t need = 0;
    for (int s = 0; s < 4; s++) {
        const gl_tile *o = t->side[s] >= 0 ? &r->tiles[t->side[s]] : NULL;
        if (!o || o->frame != r->frame || o->mesh || o->morph_start != t->morph_start || o->morph_end != t->morph_end)
            need |= TILE_SIDE << s;
    }
    return need;
}

/* Fills the sky's gradient texture for this camera on the GPU (terra_gl_cs_sky): row y's colour is the
 * sky in the direction of the centre column's ray through that row, by its elevation over the local
 * horizon (the horizon stays level: cameras have no roll). Over a planet the sky fades into space from
 * 20 to 120 km up. */
static void sky_gradient(terra_gl *r, const terra_camera *cam) {
    terra_vec3 f, rt, up;
    terra_camera_basis(cam, &f, &rt, &up);
    const terra_vec3 lu = local_up(cam);
    const double fov = cam->fov_y_rad > 0 ? cam->fov_y_rad : 60.0 * 3.14159265358979323846 / 180.0;
    double space = 0;
    if (r->d.planet) {
        const terra_vec3 e = cam->eye;
        const double alt = sqrt(e.x * e.x + e.y * e.y + e.z * e.z) - terra_planet_get_desc(r->d.planet)->radius_m;
        space = fmin(fmax((alt - 20e3) / 100e3, 0), 1);
    }
    GL_CALLS(r, glUseProgram(r->cs_sky); glUniform1i(r->cu[CU_SKY_ROWS], r->height);
             glUniform3f(r->cu[CU_SKY_FORWARD], (float)f.x, (float)f.y, (float)f.z);
             glUniform3f(r->cu[CU_SKY_CAM_UP], (float)up.x, (float)up.y, (float)up.z);
             glUniform3f(r->cu[CU_SKY_LOCAL_UP], (float)lu.x, (float)lu.y, (float)lu.z);
             glUniform1f(r->cu[CU_SKY_TAN], (float)tan(fov * 0.5)); glUniform1f(r->cu[CU_SKY_SPACE], (float)space);
             glBindImageTexture(0, r->sky_tex, 0, GL_FALSE, 0, GL_WRITE_ONLY, GL_RGBA8);
             glDispatchCompute((GLuint)(r->height + 63) / 64, 1, 1);
             glMemoryBarrier(GL_FRAMEBUFFER_BARRIER_BIT | GL_TEXTURE_UPDATE_BARRIER_BIT));
}

/* Takes the figures of the culled frames whose totals the GPU has written (waiting for them where
 * `wait`), oldest first: each newer than those shown replaces them. */
static void take_counts(terra_gl *r, bool wait) {
    for (;;) {
        gl_readback *b = NULL;
        for (int i = 0; i < READBACKS; i++)
            if (r->readbacks[i].fence && (!b || r->readbacks[i].frame < b->frame)) b = &r->readbacks[i];
        if (!b) return;
        const GLenum w = glClientWaitSync(b->fence, wait ? GL_SYNC_FLUSH_COMMANDS_BIT : 0, wait ? (GLuint64)60e9 : 0);
        if (w == GL_TIMEOUT_EXPIRED) return;
        glDeleteSync(b->fence);
        b->fence = 0;
        if (w == GL_WAIT_FAILED || b->frame <= r->stats.counted_frame) continue;
        const uint32_t *t = r->readback_map + TOTALS * (size_t)(b - r->readbacks);
        terra_gl_stats *s = &r->stats;
        s->counted_frame = b->frame;
        s->skirt_triangles = (int)(t[0] / 3);
        s->triangles = (int)((t[0] + t[1]) / 3);
        s->tiles = (int)t[2];
        s->hidden_tiles = b->tiles - (int)t[2];
        s->occluded_triangles = b->ground_triangles - (int)(t[1] / 3);
        s->prepass_triangles = (int)(t[3] / 3);
        s->draw_commands = 3 + (int)(t[4] + t[5]); /* the prepass's list ground, the picture's list skirts and ground */
        for (int l = 0; l <= TERRA_TILE_MAX_LEVEL; l++) s->per_level[l] = (int)t[8 + l];
    }
}

/* List `half`'s room: at least `need` indices (a quarter more, rounded up to 64; never empty: a frame
 * of mesh tiles alone draws through it too). The other list, the last culled frame's, stays. */
static void grow_list(terra_gl *r, int half, size_t need) {
    if (r->lists[half]) {
        glDeleteBuffers(1, &r->lists[half]);
        r->stats.gpu_bytes -= sizeof(uint32_t) * r->list_cap[half];
    }
    r->list_cap[half] = (need + need / 4 + 64) & ~(size_t)63;
    r->lists[half] = make_buffer(r, sizeof(uint32_t) * r->list_cap[half], NULL, 0);
}

/* The depth prepass (step 2): the ground of the last culled frame's list, depth only. */
static void draw_prepass(terra_gl *r) {
    const size_t prev = (size_t)r->list_half * r->block_uints;
    glUniform1i(r->u_prepass, 1);
    glColorMask(GL_FALSE, GL_FALSE, GL_FALSE, GL_FALSE);
    glVertexArrayElementBuffer(r->vao, r->lists[r->list_half]);
    glBindBuffer(GL_DRAW_INDIRECT_BUFFER, r->gpu_cmds);
    glMultiDrawElementsIndirect(GL_TRIANGLES, GL_UNSIGNED_INT, (const void *)(sizeof(uint32_t) * (prev + 5)), 1, 0);
    r->stats.draw_calls++, r->stats.draw_commands++;
    if (r->list_mesh) {
        glVertexArrayElementBuffer(r->vao, r->ibo);
        glBindBuffer(GL_PARAMETER_BUFFER, r->gpu_cmds);
        glMultiDrawElementsIndirectCount(GL_TRIANGLES, GL_UNSIGNED_INT,
                                         (const void *)(sizeof(uint32_t) * (prev + BLOCK_MESH_SKIRTS + 5 * (size_t)r->d.max_draws)),
                                         (GLintptr)(sizeof(uint32_t) * (prev + 11)), r->d.max_draws, 0);
        r->stats.draw_calls++;
    }
    glVertexArrayElementBuffer(r->vao, r->ibo);
    glColorMask(GL_TRUE, GL_TRUE, GL_TRUE, GL_TRUE);
    glUniform1i(r->u_prepass, 0);
}

/* The depth pyramid over the depth buffer (step 3). */
static void build_pyramid(terra_gl *r) {
    glUseProgram(r->cs_hiz);
    glBindTextureUnit(1, r->depth_tex);
    for (int l = 0; l < r->hiz_levels; l++) {
        glBindImageTexture(0, r->hiz_tex, l > 0 ? l - 1 : 0, GL_FALSE, 0, GL_READ_ONLY, GL_R32F);
        glBindImageTexture(1, r->hiz_tex, l, GL_FALSE, 0, GL_WRITE_ONLY, GL_R32F);
        glUniform1i(r->cu[CU_HIZ_FROM_DEPTH], l == 0);
        glUniform2i(r->cu[CU_HIZ_SRC], l ? r->hiz_size[2 * l - 2] : r->width, l ? r->hiz_size[2 * l - 1] : r->height);
        glUniform2i(r->cu[CU_HIZ_DST], r->hiz_size[2 * l], r->hiz_size[2 * l + 1]);
        glDispatchCompute((GLuint)(r->hiz_size[2 * l] + 7) / 8, (GLuint)(r->hiz_size[2 * l + 1] + 7) / 8, 1);
        glMemoryBarrier(GL_SHADER_IMAGE_ACCESS_BARRIER_BIT | GL_TEXTURE_FETCH_BARRIER_BIT);
    }
}

/* Workgroups of 64 for `count` invocations, in rows of at most 65535 (the shaders number them
 * gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64 + gl_GlobalInvocationID.x). */
static void dispatch_pieces(int count) {
    const GLuint groups = (GLuint)(count + 63) / 64, rows = (groups + 65534) / 65535;
    if (groups) glDispatchCompute((groups + rows - 1) / rows, rows, 1);
}

/* Steps 4 and 5: the pieces that may show against the depth pyramid (`hiz`; else the view's sides
 * and a planet's ball alone) into list half `half` and its block of commands; `prepass`: the frame drew one (its
 * triangles go to the totals). */
static void cull_to_list(terra_gl *r, const float vp[16], const float eye_frac[3], int n, int half, bool hiz, bool prepass,
                         const terra_gl_style *style) {
    const size_t block = (size_t)half * r->block_uints;
    glBindTextureUnit(1, r->depth_tex);
    glBindTextureUnit(2, r->hiz_tex);
    glBindBufferBase(GL_SHADER_STORAGE_BUFFER, 2, r->tiles_buf);
    glBindBufferBase(GL_SHADER_STORAGE_BUFFER, 3, r->bounds_buf);
    glBindBufferBase(GL_SHADER_STORAGE_BUFFER, 4, r->boxes_buf);
    glBindBufferBase(GL_SHADER_STORAGE_BUFFER, 5, r->vis_buf);
    glBindBufferBase(GL_SHADER_STORAGE_BUFFER, 6, r->counts_buf);
    glBindBufferBase(GL_SHADER_STORAGE_BUFFER, 7, r->gpu_cmds);
    glBindBufferBase(GL_SHADER_STORAGE_BUFFER, 8, r->totals_buf);
    glBindBufferRange(GL_SHADER_STORAGE_BUFFER, 9, r->ibo, 0, (GLsizeiptr)(sizeof(uint32_t) * (size_t)r->index_count));
    glBindBufferBase(GL_SHADER_STORAGE_BUFFER, 10, r->lists[half]);
    for (int pass = 0; pass < 2; pass++) { /* tiles, then the pieces of tiles in view */
        const GLint *u = r->cu + (pass ? CU_CULL_TILES : CU_TILES_TILES);
        glUseProgram(pass ? r->cs_cull : r->cs_cull_tiles);
        glUniform1ui(u[0], (GLuint)n);
        glUniformMatrix4fv(u[1], 1, GL_FALSE, vp);
        glUniform3fv(u[2], 1, eye_frac);
        glUniform2f(u[3], (float)r->width, (float)r->height);
        glUniform1f(u[4], (float)r->near_m);
        glUniform1i(u[5], hiz ? r->hiz_levels : 0);
        glUniform1i(u[6], style->no_skirts);
        glUniform4fv(u[7], 1, r->ball);
        if (pass) dispatch_pieces(n * r->pieces);
        else glDispatchCompute((GLuint)(n + 63) / 64, 1, 1);
        glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
    }
    glUseProgram(r->cs_scan);
    glUniform1ui(r->cu[CU_SCAN_TILES], (GLuint)n);
    glUniform1ui(r->cu[CU_SCAN_CMD], (GLuint)block);
    glUniform1ui(r->cu[CU_SCAN_PREPASS], prepass ? (GLuint)((size_t)r->list_half * r->block_uints) : 0xffffffffu);
    glDispatchCompute(1, 1, 1);
    glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
    glUseProgram(r->cs_write);
    glUniform1ui(r->cu[CU_WRITE_TILES], (GLuint)n);
    glUniform1ui(r->cu[CU_WRITE_MESH_SKIRTS], (GLuint)(block + BLOCK_MESH_SKIRTS));
    glUniform1ui(r->cu[CU_WRITE_MESH_GROUND], (GLuint)(block + BLOCK_MESH_SKIRTS + 5 * (size_t)r->d.max_draws));
    dispatch_pieces(n * r->pieces);
    glMemoryBarrier(GL_COMMAND_BARRIER_BIT | GL_ELEMENT_ARRAY_BARRIER_BIT | GL_SHADER_STORAGE_BARRIER_BIT |
                    GL_BUFFER_UPDATE_BARRIER_BIT);
}

/* The picture from list half `half` (step 6): the list's skirts and ground, with mesh tiles' skirts and
 * ground after each. */
static void draw_list(terra_gl *r, int half, int mesh_tiles) {
    const size_t block = (size_t)half * r->block_uints;
    glUseProgram(r->program);
    glVertexArrayElementBuffer(r->vao, r->lists[half]);
    glBindBuffer(GL_DRAW_INDIRECT_BUFFER, r->gpu_cmds);
    glMultiDrawElementsIndirect(GL_TRIANGLES, GL_UNSIGNED_INT, (const void *)(sizeof(uint32_t) * block), mesh_tiles ? 1 : 2, 0);
    r->stats.draw_calls++, r->stats.draw_commands += 2;
    if (mesh_tiles) {
        const GLsizei max_draws = r->d.max_draws;
        glBindBuffer(GL_PARAMETER_BUFFER, r->gpu_cmds);
        glVertexArrayElementBuffer(r->vao, r->ibo);
        glMultiDrawElementsIndirectCount(GL_TRIANGLES, GL_UNSIGNED_INT, (const void *)(sizeof(uint32_t) * (block + BLOCK_MESH_SKIRTS)),
                                         (GLintptr)(sizeof(uint32_t) * (block + 10)), max_draws, 0);
        glVertexArrayElementBuffer(r->vao, r->lists[half]);
        glMultiDrawElementsIndirect(GL_TRIANGLES, GL_UNSIGNED_INT, (const void *)(sizeof(uint32_t) * (block + 5)), 1, 0);
        glVertexArrayElementBuffer(r->vao, r->ibo);
        glMultiDrawElementsIndirectCount(GL_TRIANGLES, GL_UNSIGNED_INT,
                                         (const void *)(sizeof(uint32_t) * (block + BLOCK_MESH_SKIRTS + 5 * (size_t)max_draws)),
                                         (GLintptr)(sizeof(uint32_t) * (block + 11)), max_draws, 0);
        r->stats.draw_calls += 3;
    }
    glVertexArrayElementBuffer(r->vao, r->ibo);
}

/* A culled frame's totals, to read back when the GPU has them (take_counts). */
static void count_later(terra_gl *r, int n, int ground_triangles) {
    gl_readback *b = NULL;
    for (int i = 0; i < READBACKS && !b; i++)
        if (!r->readbacks[i].fence) b = &r->readbacks[i];
    if (!b) {
        take_counts(r, true);
        b = &r->readbacks[0];
    }
    glCopyNamedBufferSubData(r->totals_buf, r->readback_buf, 0, (GLintptr)(sizeof(uint32_t) * TOTALS * (size_t)(b - r->readbacks)),
                             sizeof(uint32_t) * TOTALS);
    *b = (gl_readback){glFenceSync(GL_SYNC_GPU_COMMANDS_COMPLETE, 0), r->frame, n, ground_triangles};
}

/* The whole frame (style.no_occlusion, the reference): every piece of every tile, the commands built
 * on the CPU from the shared indices and the mesh tiles' own, in the order the culled frame keeps. */
static void draw_whole(terra_gl *r, int n, const terra_gl_style *style) {
    terra_gl_stats *s = &r->stats;
    const GLuint side_indices = (GLuint)(6 * r->d.grid.cells);
    int nc = 0, skirt_cmds = 0;
    for (int pass = 0; pass < 4; pass++) { /* grid skirts, mesh skirts, grid ground, mesh ground */
        for (int k = 0; k < n; k++) {
            const gl_frame_tile *f = &r->frame_tiles[k];
            const bool mesh = f->flags & TILE_MESH;
            if (mesh != (pass & 1) || (pass < 2 && style->no_skirts)) continue;
            if (pass == 0) { /* runs of the sides needing a skirt */
                for (int side = 0; side < 4;) {
                    if (!(f->flags & (TILE_SIDE << side))) {
                        side++;
                        continue;
                    }
                    int e = side;
                    while (e < 4 && (f->flags & (TILE_SIDE << e))) e++;
                    r->cmds[nc++] = (gl_draw_command){(GLuint)(e - side) * side_indices, 1,
                                                      (GLuint)r->grid_index_count + (GLuint)side * side_indices,
                                                      (GLint)f->base_vertex, 0};
                    side = e;
                }
            } else if (pass == 1 && f->mesh_skirt) {
                r->cmds[nc++] = (gl_draw_command){f->mesh_skirt, 1, f->mesh_first + f->mesh_ground, (GLint)f->base_vertex, 0};
            } else if (pass >= 2) {
                r->cmds[nc++] = (gl_draw_command){mesh ? f->mesh_ground : (GLuint)r->grid_index_count, 1,
                                                  mesh ? f->mesh_first : 0, (GLint)f->base_vertex, 0};
            }
        }
        if (pass == 1) skirt_cmds = nc; /* the skirts' commands come first */
    }
    for (int c = 0; c < nc; c++) {
        s->triangles += (int)(r->cmds[c].count / 3);
        if (c < skirt_cmds) s->skirt_triangles += (int)(r->cmds[c].count / 3);
    }
    GL_CALLS(r, glNamedBufferSubData(r->commands, 0, (GLsizeiptr)(sizeof *r->cmds * (size_t)nc), r->cmds);
             glBindBuffer(GL_DRAW_INDIRECT_BUFFER, r->commands);
             glMultiDrawElementsIndirect(GL_TRIANGLES, GL_UNSIGNED_INT, NULL, nc, 0));
    s->draw_calls++, s->draw_commands += nc;
}

terra_status terra_gl_draw(terra_gl *r, const terra_camera *cam, const terra_stream_draw *draws, int count,
                           const terra_gl_style *style) {
    const double t0 = terra_thread_cpu_s();
    static const terra_gl_style defaults = {0};
    if (!style) style = &defaults;
    terra_gl_stats *s = &r->stats;
    r->gl_s = 0;
    s->draw_calls = s->draw_commands = s->not_resident = 0;
    s->uploads = r->acc_uploads, s->releases = r->acc_releases, s->upload_ms = r->acc_upload_ms;
    r->acc_uploads = r->acc_releases = 0, r->acc_upload_ms = 0;
    if (count > r->d.max_draws)
        return terra_fail(TERRA_E_CAPACITY, "gl: %d draws is more than max_draws (%d)", count, r->d.max_draws);
    terra_status mst = use_material(r, style->material, style->material_name);
    if (mst != TERRA_OK) return mst;

    /* the frame's tiles, stamped with the frame and their morph range (skirt_sides reads them) */
    s->frame = ++r->frame;
    int n = 0;
    for (int i = 0; i < count; i++) {
        const int32_t id = map_get(&r->index, draws[i].key);
        if (id < 0) {
            s->not_resident++;
            continue;
        }
        gl_tile *t = &r->tiles[id];
        t->frame = r->frame, t->morph_start = draws[i].morph_start, t->morph_end = draws[i].morph_end;
        r->frame_ids[n++] = id;
    }
    /* their records: origins relative to the eye's whole metres, in double; exact as floats (whole
     * metres below 2^24), the eye's fraction goes to a uniform */
    const terra_vec3 eye = {floor(cam->eye.x), floor(cam->eye.y), floor(cam->eye.z)};
    const float eye_frac[3] = {(float)(cam->eye.x - eye.x), (float)(cam->eye.y - eye.y), (float)(cam->eye.z - eye.z)};
    bool cull = !style->no_occlusion;
    const bool prepass = cull && r->list_half >= 0 && r->moved < r->list_frame;
    size_t list_need = 0;
    int mesh_tiles = 0, ground_triangles = 0, per_level[TERRA_TILE_MAX_LEVEL + 1] = {0};
    double floor_r = r->d.planet ? INFINITY : 0; /* the least of the frame tiles' least_r */
    for (int k = 0; k < n; k++) {
        const int32_t id = r->frame_ids[k];
        const gl_tile *t = &r->tiles[id];
        const int level = terra_tile_key_level(t->key);
        const double side = terra_grid_tile_side(&r->d.grid, level);
        const terra_vec3 o = r->d.planet ? t->origin
                                         : (terra_vec3){(double)terra_tile_key_x(t->key) * side, 0.0, (double)terra_tile_key_y(t->key) * side};
        gl_frame_tile *f = &r->frame_tiles[k];
        /* mesh tiles do not morph: their morph range is sent empty */
        *f = (gl_frame_tile){{(float)(o.x - eye.x), (float)(o.y - eye.y), (float)(o.z - eye.z), (float)level},
                             {t->mesh ? 0.0f : t->morph_start, t->mesh ? 0.0f : t->morph_end, t->skirt_m, 0.0f},
                             t->v_off, (uint32_t)id, t->mesh ? TILE_MESH : skirt_sides(r, t), 0, 0, 0, {0, 0}};
        if (prepass && t->uploaded < r->list_frame) f->flags |= TILE_PREPASS;
        if (t->mesh) {
            f->mesh_first = (uint32_t)r->index_count + t->i_off;
            f->mesh_skirt = 3 * t->skirt_triangles, f->mesh_ground = t->i_count - f->mesh_skirt;
            mesh_tiles++;
        } else {
            list_need += (size_t)r->index_count;
        }
        ground_triangles += (int)((t->mesh ? f->mesh_ground : (uint32_t)r->grid_index_count) / 3);
        per_level[level]++;
        floor_r = fmin(floor_r, t->least_r);
    }
    /* a planet's ball under all the frame's ground: whatever lies wholly behind it as the eye sees it
     * is hidden by the ground drawn over it (the frame is whole). Its radius less a margin for the
     * floats of the cull pass (a few 2^-24 of the distances), and none where the eye is within 100 m of
     * it (the ground over it could come nearer than the near plane). */
    const double centre = sqrt(cam->eye.x * cam->eye.x + cam->eye.y * cam->eye.y + cam->eye.z * cam->eye.z);
    const double ball_r = n > 0 && isfinite(floor_r) ? floor_r - 1e-5 * centre - 1 : 0;
    r->ball[0] = (float)-cam->eye.x, r->ball[1] = (float)-cam->eye.y, r->ball[2] = (float)-cam->eye.z;
    r->ball[3] = ball_r > 0 && centre > ball_r + 100 ? (float)ball_r : 0;
    /* the list must fit one storage buffer; a frame too large for it is drawn whole. The list written
     * is the one the prepass does not read. */
    if (cull && sizeof(uint32_t) * list_need > (size_t)r->max_ssbo) cull = false;
    const int half = r->list_half >= 0 ? 1 - r->list_half : 0;

    float vp[16];
    view_projection(cam, (double)r->width / r->height, r->near_m, vp);
    if (!style->flat) sky_gradient(r, cam);
    GL_CALLS(r, {
        if (cull && (!r->lists[half] || list_need > r->list_cap[half])) grow_list(r, half, list_need);
        glBindFramebuffer(GL_DRAW_FRAMEBUFFER, r->fbo);
        glViewport(0, 0, r->width, r->height);
        if (style->flat)
            glClearNamedFramebufferfv(r->fbo, GL_COLOR, 0,
                                      (const GLfloat[4]){style->clear_rgb[0], style->clear_rgb[1], style->clear_rgb[2], 1});
        else
            glBlitNamedFramebuffer(r->sky_fbo, r->fbo, 0, 0, 1, r->height, 0, 0, r->width, r->height, GL_COLOR_BUFFER_BIT,
                                   GL_NEAREST);
        glClearNamedFramebufferfv(r->fbo, GL_DEPTH, 0, (const GLfloat[1]){0.0f});
    });
    const bool prepass_now = prepass;
    s->occlusion = prepass_now;
    if (!prepass_now || n == 0) { /* the CPU counts a whole frame's figures; a culled frame's come from the GPU (take_counts) */
        s->counted_frame = r->frame;
        s->tiles = n, s->hidden_tiles = s->occluded_triangles = s->prepass_triangles = s->triangles = s->skirt_triangles = 0;
        memcpy(s->per_level, per_level, sizeof per_level);
    }
    if (n > 0) {
        terra_vec3 sun = style->sun;
        if (sun.x == 0 && sun.y == 0 && sun.z == 0) sun = (terra_vec3){-0.62, 0.42, 0.66};
        const double sl = sqrt(sun.x * sun.x + sun.y * sun.y + sun.z * sun.z);
        const terra_vec3 lu = local_up(cam);
        /* fog: 60 km by default on the plane; none over a planet unless asked (it would hide it from orbit) */
        const double fog_default = r->d.planet ? 0.0 : 60000.0;
        const float fog = style->fog_distance < 0 ? 0.0f : (float)(style->fog_distance > 0 ? style->fog_distance : fog_default);
        const terra_planet_desc *pd = r->d.planet ? terra_planet_get_desc(r->d.planet) : NULL;
        GL_CALLS(r, {
            glNamedBufferSubData(r->tiles_buf, 0, (GLsizeiptr)(sizeof *r->frame_tiles * (size_t)n), r->frame_tiles);
            /* the records to their tile ids */
            glUseProgram(r->cs_scatter);
            glUniform1ui(r->cu[CU_SCATTER_TILES], (GLuint)n);
            glUniform1i(r->cu[CU_SCATTER_FRAME], (GLint)(r->frame & 0x7fffffff));
            glBindBufferBase(GL_SHADER_STORAGE_BUFFER, 0, r->draws_buf);
            glBindBufferBase(GL_SHADER_STORAGE_BUFFER, 2, r->tiles_buf);
            glDispatchCompute((GLuint)(n + 63) / 64, 1, 1);
            glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
            /* the ground program's state, for the prepass and the picture */
            glUseProgram(r->program);
            glUniformMatrix4fv(r->u_view_proj, 1, GL_FALSE, vp);
            glUniform3f(r->u_sun, (float)(sun.x / sl), (float)(sun.y / sl), (float)(sun.z / sl));
            glUniform1i(r->u_cells, r->d.grid.cells);
            glUniform3fv(r->u_eye_frac, 1, eye_frac);
            glUniform1i(r->u_flat, style->flat);
            glUniform1i(r->u_no_morph, style->no_morph);
            glUniform1i(r->u_level_tint, style->level_tint);
            glUniform1i(r->u_frame, (GLint)(r->frame & 0x7fffffff));
            glUniform1i(r->u_prepass, 0);
            update_surfaces(r, style->surfaces);
            glBindBufferBase(GL_SHADER_STORAGE_BUFFER, 1, r->surfaces_buf);
            glBindTextureUnit(0, r->textures);
            glUniform1i(r->u_textures, 0);
            glUniform1f(r->u_eye_y, (float)cam->eye.y);
            glUniform3f(r->u_eye, (float)cam->eye.x, (float)cam->eye.y, (float)cam->eye.z);
            glUniform2f(r->u_eye_mod, (float)fmod(cam->eye.x, 65536.0), (float)fmod(cam->eye.z, 65536.0));
            glUniform1f(r->u_fog_distance, fog);
            glUniform1i(r->u_planet, r->d.planet != NULL);
            glUniform3f(r->u_centre, (float)-cam->eye.x, (float)-cam->eye.y, (float)-cam->eye.z);
            glUniform3f(r->u_up, (float)lu.x, (float)lu.y, (float)lu.z);
            if (pd) glUniform2f(r->u_radii, (float)pd->radius_m, (float)pd->polar_radius_m);
            glUniform2f(r->u_ramp, style->ramp[0], style->ramp[1]);
            glEnable(GL_DEPTH_TEST);
            glDepthFunc(GL_GEQUAL);
            glDisable(GL_CULL_FACE); /* a fold in the morphed ground must never open a hole */
            glClipControl(GL_LOWER_LEFT, GL_ZERO_TO_ONE);
            glBindVertexArray(r->vao);
            if (prepass_now) { /* steps 2-6 */
                draw_prepass(r);
                build_pyramid(r);
                cull_to_list(r, vp, eye_frac, n, half, true, true, style);
                count_later(r, n, ground_triangles);
                draw_list(r, half, mesh_tiles);
                r->list_half = half;
            }
        });
        if (!prepass_now) draw_whole(r, n, style);
        if (cull && !prepass_now) /* no list to prepass: drawn whole, then culled against its own depth for the next */
            GL_CALLS(r, build_pyramid(r); cull_to_list(r, vp, eye_frac, n, half, true, false, style); r->list_half = half);
        if (cull) r->list_frame = r->frame, r->list_mesh = mesh_tiles > 0;
        GL_CALLS(r, glBindVertexArray(0); glUseProgram(0); glClipControl(GL_LOWER_LEFT, GL_NEGATIVE_ONE_TO_ONE));
    }
    GLenum err = GL_NO_ERROR;
    GL_CALLS(r, {
        if (!r->offscreen) /* a window: the picture to the framebuffer bound */
            glBlitNamedFramebuffer(r->fbo, 0, 0, 0, r->width, r->height, 0, 0, r->width, r->height, GL_COLOR_BUFFER_BIT, GL_NEAREST);
        take_counts(r, false);
        err = glGetError();
    });
    s->call_ms = r->gl_s * 1e3;
    s->submit_ms = (terra_thread_cpu_s() - t0 - r->gl_s) * 1e3;
    if (err != GL_NO_ERROR) return terra_fail(TERRA_E_UNSUPPORTED, "gl: drawing failed (GL error 0x%x)", (unsigned)err);
    return TERRA_OK;
}

const terra_gl_stats *terra_gl_get_stats(const terra_gl *r) { return &r->stats; }

static terra_status read_back(terra_gl *r, GLenum format, GLenum type, size_t px_bytes, void *out) {
    glBindFramebuffer(GL_READ_FRAMEBUFFER, r->fbo);
    glPixelStorei(GL_PACK_ALIGNMENT, 1);
    glReadPixels(0, 0, r->width, r->height, format, type, out);
    take_counts(r, true); /* the GPU is done with the frame: its figures too */
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
