/* libterra-gl: resident tiles in one vertex buffer, one indirect multi-draw a frame. */
#include "terra/gl.h"
#include "terra/io.h"

#include "keymap.h"

#include <epoxy/gl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "shaders.h"

/* std430 per-draw record: tile origin relative to the eye and level; morph start and end. */
typedef struct gl_draw_record {
    float origin_level[4];
    float morph[4];
} gl_draw_record;

/* GL's DrawElementsIndirectCommand. */
typedef struct gl_draw_command {
    GLuint count, instance_count, first_index;
    GLint base_vertex;
    GLuint base_instance;
} gl_draw_command;

struct terra_gl {
    terra_gl_desc d;
    int vertex_count, index_count;
    size_t tile_bytes;
    GLuint program, vao, vbo, ibo, records, commands, draw_ids;
    GLint u_view_proj, u_cells, u_eye_frac, u_sun, u_flat, u_no_morph, u_level_tint, u_fog_distance;
    GLint u_eye_y, u_eye_mod, u_textures;
    terra_grid_vertex *upload_scratch; /* one tile, its surfaces narrowed to the tile's palette */
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
    /* slots of the vertex buffer: key per slot, free list, key -> slot map */
    terra_tile_key *slot_key;
    int *free_slots;
    int nfree;
    key_map index; /* tile key -> slot */
    /* per-frame scratch */
    gl_draw_record *recs;
    gl_draw_command *cmds;
    int acc_uploads, acc_releases; /* since the last frame */
    double acc_upload_ms;
    terra_gl_stats stats;
};

/* ---- shaders ---------------------------------------------------------------------------------------- */

static terra_status compile(GLenum kind, const char *src, const char *name, GLuint *out) {
    GLuint sh = glCreateShader(kind);
    glShaderSource(sh, 1, &src, NULL);
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
    terra_status st = compile(GL_VERTEX_SHADER, terra_gl_vs, "vertex", &vs);
    if (st == TERRA_OK) st = compile(GL_FRAGMENT_SHADER, terra_gl_fs, "fragment", &fs);
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
    GLuint bufs[6] = {r->vbo, r->ibo, r->records, r->commands, r->draw_ids, r->surfaces_buf};
    for (int i = 0; i < 6; i++)
        if (bufs[i]) glDeleteBuffers(1, &bufs[i]);
    if (r->textures) glDeleteTextures(1, &r->textures);
    terra_free(r->slot_key);
    terra_free(r->free_slots);
    map_free(&r->index);
    terra_free(r->recs);
    terra_free(r->cmds);
    terra_free(r->upload_scratch);
    terra_free(r);
}

terra_status terra_gl_create(const terra_gl_desc *desc, terra_gl **out) {
    *out = NULL;
    terra_gl_desc d = desc ? *desc : (terra_gl_desc){0};
    terra_status st = terra_grid_desc_resolve(desc ? &desc->grid : NULL, &d.grid);
    if (st != TERRA_OK) return st;
    if (d.capacity_tiles == 0) d.capacity_tiles = 1024;
    if (d.max_draws == 0) d.max_draws = 4096;
    if (d.capacity_tiles < 1 || d.max_draws < 1)
        return terra_fail(TERRA_E_INVALID, "gl: capacity_tiles and max_draws must be positive");
    if ((d.width == 0) != (d.height == 0) || d.width < 0 || d.height < 0)
        return terra_fail(TERRA_E_INVALID, "gl: give both width and height (offscreen) or neither (window)");
    if (epoxy_gl_version() < 45)
        return terra_fail(TERRA_E_UNSUPPORTED, "gl: OpenGL 4.5 is needed; the current context has %d.%d",
                          epoxy_gl_version() / 10, epoxy_gl_version() % 10);
    terra_gl *r = terra_calloc(1, sizeof *r);
    if (!r) return terra_fail(TERRA_E_NOMEM, "gl: out of memory");
    r->d = d;
    r->near_m = 0.5;
    r->vertex_count = terra_grid_vertex_count(d.grid.cells);
    r->index_count = terra_grid_index_count(d.grid.cells);
    r->tile_bytes = sizeof(terra_grid_vertex) * (size_t)r->vertex_count;
    const size_t vbytes = r->tile_bytes * (size_t)d.capacity_tiles;
    if (vbytes / r->tile_bytes != (size_t)d.capacity_tiles || vbytes > ((size_t)1 << 34)) {
        terra_free(r);
        return terra_fail(TERRA_E_INVALID, "gl: %d tiles of %zu bytes is too large a vertex buffer", d.capacity_tiles,
                          r->tile_bytes);
    }
    bool ok = (r->slot_key = terra_calloc((size_t)d.capacity_tiles, sizeof *r->slot_key)) != NULL;
    ok = ok && (r->free_slots = terra_alloc(sizeof(int) * (size_t)d.capacity_tiles)) != NULL;
    ok = ok && map_init(&r->index, d.capacity_tiles);
    ok = ok && (r->recs = terra_alloc(sizeof *r->recs * (size_t)d.max_draws)) != NULL;
    ok = ok && (r->cmds = terra_alloc(sizeof *r->cmds * (size_t)d.max_draws)) != NULL;
    ok = ok && (r->upload_scratch = terra_alloc(r->tile_bytes)) != NULL;
    uint32_t *scratch = ok ? terra_alloc(sizeof(uint32_t) * (size_t)(r->index_count > d.max_draws ? r->index_count : d.max_draws)) : NULL;
    if (!scratch) {
        terra_gl_destroy(r);
        return terra_fail(TERRA_E_NOMEM, "gl: out of memory");
    }
    for (int i = 0; i < d.capacity_tiles; i++) r->free_slots[r->nfree++] = d.capacity_tiles - 1 - i;

    st = build_program(r);
    if (st != TERRA_OK) {
        terra_free(scratch);
        terra_gl_destroy(r);
        return st;
    }
    while (glGetError() != GL_NO_ERROR) {
    }
    /* one vertex buffer for every resident tile, one index buffer every grid tile shares */
    glCreateBuffers(1, &r->vbo);
    glNamedBufferStorage(r->vbo, (GLsizeiptr)vbytes, NULL, GL_DYNAMIC_STORAGE_BIT);
    terra_grid_indices(d.grid.cells, scratch);
    glCreateBuffers(1, &r->ibo);
    glNamedBufferStorage(r->ibo, (GLsizeiptr)(sizeof(uint32_t) * (size_t)r->index_count), scratch, 0);
    for (int i = 0; i < d.max_draws; i++) scratch[i] = (uint32_t)i;
    glCreateBuffers(1, &r->draw_ids);
    glNamedBufferStorage(r->draw_ids, (GLsizeiptr)(sizeof(uint32_t) * (size_t)d.max_draws), scratch, 0);
    terra_free(scratch);
    glCreateBuffers(1, &r->records);
    glNamedBufferStorage(r->records, (GLsizeiptr)(sizeof(gl_draw_record) * (size_t)d.max_draws), NULL,
                         GL_DYNAMIC_STORAGE_BIT);
    glCreateBuffers(1, &r->commands);
    glNamedBufferStorage(r->commands, (GLsizeiptr)(sizeof(gl_draw_command) * (size_t)d.max_draws), NULL,
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
    for (GLuint a = 0; a < 6; a++) {
        glEnableVertexArrayAttrib(r->vao, a);
        glVertexArrayAttribBinding(r->vao, a, a == 4 ? 1 : 0);
    }
    r->stats.capacity = d.capacity_tiles;
    r->stats.gpu_bytes = vbytes + sizeof(uint32_t) * (size_t)r->index_count +
                         (sizeof(uint32_t) + sizeof(gl_draw_record) + sizeof(gl_draw_command)) * (size_t)d.max_draws;
    r->offscreen = d.width > 0;
    st = make_target(r, r->offscreen ? d.width : 1, r->offscreen ? d.height : 1);
    GLenum err = glGetError();
    if (st == TERRA_OK && err != GL_NO_ERROR)
        st = terra_fail(TERRA_E_UNSUPPORTED, "gl: setting up the buffers failed (GL error 0x%x)", (unsigned)err);
    if (st != TERRA_OK) {
        terra_gl_destroy(r);
        return st;
    }
    *out = r;
    return TERRA_OK;
}

/* ---- tiles arriving and leaving ----------------------------------------------------------------------- */

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

static void release_slot(terra_gl *r, int slot) {
    map_del(&r->index, r->slot_key[slot]);
    r->free_slots[r->nfree++] = slot;
    r->stats.resident--;
    r->acc_releases++;
}

void terra_gl_release(void *user, terra_tile_key key) {
    terra_gl *r = user;
    const int32_t slot = map_get(&r->index, key);
    if (slot >= 0) release_slot(r, slot);
}

terra_status terra_gl_upload(void *user, terra_tile_key key, const void *data, size_t bytes) {
    terra_gl *r = user;
    const double t0 = terra_now_s();
    if (bytes != r->tile_bytes)
        return terra_fail(TERRA_E_INVALID, "gl: tile (level %d, %d, %d) has %zu bytes, not the %zu of a %d-cell grid tile",
                          terra_tile_key_level(key), terra_tile_key_x(key), terra_tile_key_y(key), bytes, r->tile_bytes,
                          r->d.grid.cells);
    int32_t slot = map_get(&r->index, key);
    if (slot < 0) {
        if (r->nfree == 0)
            return terra_fail(TERRA_E_CAPACITY, "gl: all %d vertex-buffer slots are held; tile (level %d, %d, %d) not uploaded",
                              r->d.capacity_tiles, terra_tile_key_level(key), terra_tile_key_x(key), terra_tile_key_y(key));
        slot = r->free_slots[--r->nfree];
        r->slot_key[slot] = key;
        map_put(&r->index, key, slot);
        r->stats.resident++;
    }
    /* a tile draws the eight surfaces covering most of it; any other sample draws as the most
     * common one (terra_surface_palette logs such tiles) */
    const terra_grid_vertex *v = data;
    terra_surface keep[TERRA_TILE_SURFACES];
    int kept;
    if (terra_surface_palette(&v[0].surface, (size_t)r->vertex_count, sizeof *v, key, keep, &kept) > kept) {
        memcpy(r->upload_scratch, data, bytes);
        for (int i = 0; i < r->vertex_count; i++) {
            bool in = false;
            for (int k = 0; k < kept && !in; k++) in = r->upload_scratch[i].surface == keep[k];
            if (!in) r->upload_scratch[i].surface = keep[0];
        }
        data = r->upload_scratch;
    }
    glNamedBufferSubData(r->vbo, (GLintptr)((size_t)slot * r->tile_bytes), (GLsizeiptr)bytes, data);
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

static float sky_channel(double up, int ch) {
    static const double horizon[3] = {0.80, 0.86, 0.93}, zenith[3] = {0.26, 0.47, 0.80};
    double t = pow(up < 0 ? 0 : (up > 1 ? 1 : up), 0.45);
    return (float)pow(horizon[ch] + (zenith[ch] - horizon[ch]) * t, 1.0 / 1.6);
}

/* Fills the gradient texture for this camera: row y's colour is the sky in the direction of the
 * centre column's ray through that row (the horizon stays level: cameras have no roll). */
static void sky_gradient(terra_gl *r, const terra_camera *cam) {
    terra_vec3 f, rt, up;
    terra_camera_basis(cam, &f, &rt, &up);
    const double fov = cam->fov_y_rad > 0 ? cam->fov_y_rad : 60.0 * 3.14159265358979323846 / 180.0;
    const double ty = tan(fov * 0.5);
    for (int y = 0; y < r->height; y++) {
        const double v = ((y + 0.5) / r->height * 2.0 - 1.0) * ty; /* row 0 at the bottom */
        const double dx = f.x + v * up.x, dy = f.y + v * up.y, dz = f.z + v * up.z;
        const double e = dy / sqrt(dx * dx + dy * dy + dz * dz);
        for (int c = 0; c < 3; c++) r->sky_rows[y * 4 + c] = sky_channel(e, c);
        r->sky_rows[y * 4 + 3] = 1.0f;
    }
    glTextureSubImage2D(r->sky_tex, 0, 0, 0, 1, r->height, GL_RGBA, GL_FLOAT, r->sky_rows);
}

terra_status terra_gl_draw(terra_gl *r, const terra_camera *cam, const terra_stream_draw *draws, int count,
                           const terra_gl_style *style) {
    const double t0 = terra_now_s();
    static const terra_gl_style defaults = {0};
    if (!style) style = &defaults;
    terra_gl_stats *s = &r->stats;
    s->draw_calls = s->tiles = s->triangles = s->not_resident = 0;
    s->call_ms = 0;
    double call_s = 0;
    s->uploads = r->acc_uploads, s->releases = r->acc_releases, s->upload_ms = r->acc_upload_ms;
    r->acc_uploads = r->acc_releases = 0, r->acc_upload_ms = 0;
    memset(s->per_level, 0, sizeof s->per_level);
    if (count > r->d.max_draws)
        return terra_fail(TERRA_E_CAPACITY, "gl: %d draws is more than max_draws (%d)", count, r->d.max_draws);

    /* per-draw records: tile origins relative to the eye's whole metres, in double; exact as
     * floats (whole metres below 2^24), the eye's fraction goes to a uniform */
    const terra_vec3 eye = {floor(cam->eye.x), floor(cam->eye.y), floor(cam->eye.z)};
    const float eye_frac[3] = {(float)(cam->eye.x - eye.x), (float)(cam->eye.y - eye.y), (float)(cam->eye.z - eye.z)};
    int n = 0;
    for (int i = 0; i < count; i++) {
        const terra_stream_draw *dr = &draws[i];
        const int32_t slot = map_get(&r->index, dr->key);
        if (slot < 0) {
            s->not_resident++;
            continue;
        }
        const int level = terra_tile_key_level(dr->key);
        const double side = terra_grid_tile_side(&r->d.grid, level);
        const double ox = (double)terra_tile_key_x(dr->key) * side, oz = (double)terra_tile_key_y(dr->key) * side;
        r->recs[n] = (gl_draw_record){{(float)(ox - eye.x), (float)(0.0 - eye.y), (float)(oz - eye.z), (float)level},
                                      {dr->morph_start, dr->morph_end, 0, 0}};
        r->cmds[n] = (gl_draw_command){(GLuint)r->index_count, 1, 0, slot * r->vertex_count, (GLuint)n};
        s->per_level[level]++;
        n++;
    }
    s->tiles = n;
    s->triangles = n * (r->index_count / 3);

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
        glNamedBufferSubData(r->commands, 0, (GLsizeiptr)(sizeof *r->cmds * (size_t)n), r->cmds);
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
        glUniform1f(r->u_fog_distance,
                    style->fog_distance < 0 ? 0.0f : (float)(style->fog_distance > 0 ? style->fog_distance : 60000.0));
        glEnable(GL_DEPTH_TEST);
        glDepthFunc(GL_GREATER);
        glDisable(GL_CULL_FACE); /* a fold in the morphed ground must never open a hole */
        glClipControl(GL_LOWER_LEFT, GL_ZERO_TO_ONE);
        glBindVertexArray(r->vao);
        glBindBufferBase(GL_SHADER_STORAGE_BUFFER, 0, r->records);
        glBindBuffer(GL_DRAW_INDIRECT_BUFFER, r->commands);
        /* the frame's one draw call (a software driver shades vertices inside it: timed apart) */
        const double t_call = terra_now_s();
        glMultiDrawElementsIndirect(GL_TRIANGLES, GL_UNSIGNED_INT, NULL, n, 0);
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
