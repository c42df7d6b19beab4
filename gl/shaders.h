/* libterra-gl: the ground's shaders (GLSL 4.50 core). Internal to gl/. */
#ifndef TERRA_GL_SHADERS_H
#define TERRA_GL_SHADERS_H

/* A frame tile's record as the vertex stage reads it, std430, 48 bytes (gl_draw in renderer.c), in a
 * storage buffer indexed by the resident tile's id (every vertex carries its tile's id: a second
 * vertex stream, renderer.c), written each frame by the `scatter` compute pass: tile origin relative
 * to the eye and level; morph start and end, a grid tile's skirt depth; its first vertex, 1 for a mesh
 * tile, the frame it was written for, and whether its vertices may be drawn into the depth prepass
 * (gl.h: its pieces in the last culled frame's list are its own, unmoved).
 * The kind is a per-tile flag, not an attribute, so grid tiles keep their bytes as grid.c makes
 * them: a grid tile's colours follow from gl_VertexID - base_vertex, a mesh tile's are its
 * vertices' colour attribute (terra_grid_vertex.colour, set by terra_tile_mesh_expand). */
#define TERRA_GL_GLSL_COMMON "#version 450 core\n" TERRA_GL_GLSL_DECLS
#define TERRA_GL_GLSL_DECLS                                                                        \
    "struct DrawRecord { vec4 origin_level; vec4 morph_skirt; ivec4 info; };\n"                   \
    "uniform mat4 u_view_proj;\n"                                                                  \
    "uniform vec3 u_sun;\n"                                                                        \
    "uniform int u_flat;\n"                                                                        \
    "uniform int u_no_morph;\n"                                                                    \
    "uniform int u_level_tint;\n"                                                                  \
    "uniform float u_fog_distance;\n"                                                            \
    "uniform int u_planet;\n"                                                                      \
    "uniform vec3 u_centre;\n"                                                                     \
    "uniform vec3 u_up;\n"

/* Vertex stage: the tile origin relative to the camera comes from its tile's record (reached through
 * the vertex's tile id); the
 * CDLOD morph moves each vertex toward its target on the parent grid by its distance from the
 * eye, exactly as terra_morph_factor does on the CPU, and its normal with it toward the parent's
 * normal at the target.
 *
 * A morph range whose end is not past its start does not morph (k = 0: no division by zero);
 * mesh tiles are sent so, and their morph targets are their positions anyway.
 *
 * The three surfaces of a triangle, without a geometry stage: every grid cell is split along the
 * same diagonal (v00-v11), so colouring vertex (i, j) with (i + j) mod 3 gives the three corners
 * of every triangle three different colours (i, j from gl_VertexID minus the tile's first vertex,
 * which the draw record carries: tiles lie at any vertex offset); a mesh tile's vertices carry
 * such a colouring in their colour attribute (copies made where a vertex needs two colours).
 * A grid tile's skirt vertices (its vertices past the (cells + 1)^2 of its grid: copies of its border
 * vertices, renderer.c) carry their colour in the attribute too; each is morphed exactly as the
 * border vertex it copies (the same inputs, the same arithmetic: bit for bit the same x and z) and
 * only then lowered by the tile's skirt depth, so the skirt hangs straight under the drawn edge.
 * A vertex puts weight 1 in its colour's component of
 * `bary` and its surface id in the same component of `ids`; interpolated over the triangle, bary
 * holds the barycentric weight of each corner and ids / bary recovers each corner's surface id
 * exactly, so the fragment stage has the triangle's three surfaces and their weights. */
static const char *const terra_gl_vs =
    "#version 450 core\n"
    "#extension GL_ARB_shader_draw_parameters : require\n"
    TERRA_GL_GLSL_DECLS
    "layout(std430, binding = 0) readonly buffer Draws { DrawRecord draws[]; };\n"
    "uniform int u_cells;\n"
    "uniform vec3 u_eye_frac;\n"
    "layout(location = 0) in vec3 a_pos;\n"
    "layout(location = 1) in vec3 a_target;\n"
    "layout(location = 2) in vec2 a_oct;\n"
    "layout(location = 3) in uint a_surface;\n"
    "layout(location = 4) in uint a_tile;\n"
    "uniform int u_frame;\n"
    "uniform int u_prepass; /* the depth prepass: only tiles whose record allows it */\n"
    "layout(location = 5) in vec2 a_morph_oct;\n"
    "layout(location = 6) in uint a_colour;\n"
    "invariant gl_Position;\n"
    "out vec3 v_rel;\n"
    "out vec3 v_normal;\n"
    "out vec3 v_bary;\n"
    "out vec3 v_ids;\n"
    "flat out uint v_level;\n"
    "out float v_morph;\n"
    "out vec2 v_grid; /* a grid tile's ground: the vertex's place in the grid (cells) */\n"
    "out float v_step; /* 1 on a grid tile's ground, 0 on skirts and mesh tiles */\n"
    "vec3 oct_decode(vec2 e) {\n"
    "    vec3 v = vec3(e, 1.0 - abs(e.x) - abs(e.y));\n"
    "    if (v.z < 0.0) v.xy = (1.0 - abs(v.yx)) * vec2(v.x >= 0.0 ? 1.0 : -1.0, v.y >= 0.0 ? 1.0 : -1.0);\n"
    "    v = normalize(v);\n"
    "    return vec3(v.x, v.z, v.y); /* +y is the octahedron's pole */\n"
    "}\n"
    "void main() {\n"
    "    DrawRecord d = draws[a_tile];\n"
    "    /* the prepass: a vertex of a tile this frame draws, resident and unmoved since the list was written;\n"
    "     * a mesh tile's command (base instance: its tile id + 1) only over its own vertices, so its indices\n"
    "     * are the ones it was written with */\n"
    "    if (u_prepass != 0 && (d.info.z != u_frame || d.info.w == 0 ||\n"
    "                           (gl_BaseInstanceARB != 0 && uint(gl_BaseInstanceARB) != a_tile + 1u))) {\n"
    "        gl_Position = vec4(2.0, 2.0, 2.0, 1.0); /* outside the view: its triangles are dropped whole */\n"
    "        return;\n"
    "    }\n"
    "    /* origin (tile origin minus the eye's whole metres) + position is exact, so a point two\n"
    "     * tiles share comes out bit for bit the same in both, and so does a fully morphed vertex\n"
    "     * and the coarser tile's vertex it lands on: no T-junction can drop a pixel */\n"
    "    precise vec3 p = (d.origin_level.xyz + a_pos) - u_eye_frac;\n"
    "    precise vec3 t = (d.origin_level.xyz + a_target) - u_eye_frac;\n"
    "    vec2 morph = d.morph_skirt.xy;\n"
    "    float k = morph.y > morph.x ? clamp((length(p) - morph.x) / (morph.y - morph.x), 0.0, 1.0) : 0.0;\n"
    "    if (u_no_morph != 0) k = 0.0;\n"
    "    p = k >= 1.0 ? t : p + (t - p) * k;\n"
    "    int side = u_cells + 1;\n"
    "    int local = gl_VertexID - d.info.x; /* gl_VertexID = index + base vertex */\n"
    "    bool skirt = d.info.y == 0 && local >= side * side;\n"
    "    if (skirt) {\n"
    "        if (u_planet != 0) p -= normalize(p - u_centre) * d.morph_skirt.z; /* toward the centre */\n"
    "        else p.y -= d.morph_skirt.z;\n"
    "    }\n"
    "    v_rel = p;\n"
    "    /* the normal morphs with the position, onto the parent's normal at the target: the light\n"
    "     * on a hillside does not jump when a tile hands over to its parent */\n"
    "    v_normal = k >= 1.0 ? oct_decode(a_morph_oct) : mix(oct_decode(a_oct), oct_decode(a_morph_oct), k);\n"
    "    int colour = d.info.y != 0 || skirt ? int(a_colour) : (local % side + local / side) % 3;\n"
    "    v_bary = vec3(colour == 0, colour == 1, colour == 2);\n"
    "    v_ids = v_bary * float(a_surface);\n"
    "    v_level = uint(d.origin_level.w);\n"
    "    v_morph = k;\n"
    "    v_step = d.info.y == 0 && !skirt ? 1.0 : 0.0;\n"
    "    v_grid = v_step > 0.0 ? vec2(local % side, local / side) : vec2(0.0);\n"
    "    gl_Position = u_view_proj * vec4(p, 1.0);\n"
    "}\n";

/* Fragment stage: tints by surface, the triangle's three blended by their barycentric weights, a sun and sky light on
 * the per-vertex normal, distance fog toward the sky's colour in the fragment's direction. */
static const char *const terra_gl_fs =
    TERRA_GL_GLSL_COMMON
    "in vec3 v_rel;\n"
    "in vec3 v_normal;\n"
    "in vec3 v_bary;\n"
    "in vec3 v_ids;\n"
    "flat in uint v_level;\n"
    "in float v_morph;\n"
    "in vec2 v_grid;\n"
    "in float v_step;\n"
    "out vec4 o_colour;\n"
    "uniform vec3 u_eye; /* the eye in world metres (floats: a material's position) */\n"
    "struct Surface { vec4 tint_tiling; ivec4 layers; };\n"
    "layout(std430, binding = 1) readonly buffer Surfaces { Surface surfaces[256]; };\n"
    "uniform sampler2DArray u_textures;\n"
    "uniform float u_eye_y;\n"
    "uniform vec2 u_eye_mod;\n"
    "uniform vec2 u_radii; /* a planet's equatorial and polar radius */\n"
    "uniform vec2 u_ramp;  /* height ramp: black at x, white at y (y > x), unlit */\n"
    "const vec3 LEVELS[12] = vec3[12](vec3(0.90, 0.24, 0.20), vec3(0.96, 0.55, 0.16), vec3(0.94, 0.82, 0.24),\n"
    "    vec3(0.55, 0.78, 0.27), vec3(0.24, 0.67, 0.43), vec3(0.20, 0.71, 0.75), vec3(0.24, 0.47, 0.86),\n"
    "    vec3(0.43, 0.35, 0.82), vec3(0.67, 0.31, 0.78), vec3(0.82, 0.35, 0.63), vec3(0.59, 0.41, 0.27),\n"
    "    vec3(0.80, 0.80, 0.84));\n"
    "/* id 0 names no surface: the built-in height-and-slope style picks one of the built-in ids */\n"
    "uint styled(uint s, float h, float slope) {\n"
    "    if (s != 0u) return s;\n"
    "    if (h < 44.0 && slope < 0.35) return 4u;\n"
    "    if (h > 1900.0 && slope < 1.1) return 3u;\n"
    "    if (slope > 0.75) return 2u;\n"
    "    return 1u;\n"
    "}\n"
    "/* texture coordinates: metres from a whole 64 km of the eye, so far from the origin they do not tremble */\n"
    "vec3 uvw(Surface sf, int layer) { return vec3((v_rel.xz + u_eye_mod) / sf.tint_tiling.w, float(layer)); }\n"
    "vec3 tint(Surface sf) {\n"
    "    vec3 c = sf.tint_tiling.rgb;\n"
    "    if (sf.layers.x >= 0) c *= texture(u_textures, uvw(sf, sf.layers.x)).rgb;\n"
    "    return c;\n"
    "}\n"
    "/* a surface's mask texture scales its weight in the triangle's blend */\n"
    "float mask(Surface sf) { return sf.layers.z >= 0 ? texture(u_textures, uvw(sf, sf.layers.z)).r : 1.0; }\n"
    "/* a surface's normal texture (tangent x along world x, y along world z, z up) tilts the normal */\n"
    "vec2 bump(Surface sf) {\n"
    "    return sf.layers.y >= 0 ? texture(u_textures, uvw(sf, sf.layers.y)).rg * 2.0 - 1.0 : vec2(0.0);\n"
    "}\n"
    "/* On a grid tile's ground a surface's edge steps midway between samples: every point takes the\n"
    "   surface of its nearest sample (in the grid's cells, the larger of the two distances), which is\n"
    "   always one of its triangle's corners: cells are cut from (i, j) to (i + 1, j + 1), so a triangle's\n"
    "   corners are (i, j), (i + 1, j + 1) and (i + 1, j) or (i, j + 1), coloured (i + j) mod 3 + 0, 2, 1\n"
    "   (the colour is the place in st). A surface's mask scales its sample's pull: 1 less the\n"
    "   distance, times the mask; a tie (all masks 0) goes to the nearest. */\n"
    "uint nearest_sample(uvec3 st) {\n"
    "    vec2 c = floor(v_grid), f = v_grid - c;\n"
    "    vec2 m = f.x > f.y ? vec2(1.0, 0.0) : vec2(0.0, 1.0);\n"
    "    vec3 d = vec3(max(f.x, f.y), max(abs(f.x - m.x), abs(f.y - m.y)), max(1.0 - f.x, 1.0 - f.y));\n"
    "    uint a = uint(c.x + c.y) % 3u; /* the colour of (i, j); (the middle, (i + 1, j + 1)) a + (1, 2) */\n"
    "    vec3 pull = (1.0 - d) * vec3(mask(surfaces[st[a]]), mask(surfaces[st[(a + 1u) % 3u]]), mask(surfaces[st[(a + 2u) % 3u]]));\n"
    "    if (max(pull.x, max(pull.y, pull.z)) <= 0.0) pull = 1.0 - d;\n"
    "    uint best = pull.x >= pull.y && pull.x >= pull.z ? 0u : pull.y >= pull.z ? 1u : 2u;\n"
    "    return (a + best) % 3u;\n"
    "}\n"
    "vec3 sky(float up) {\n"
    "    vec3 horizon = vec3(0.80, 0.86, 0.93), zenith = vec3(0.26, 0.47, 0.80);\n"
    "    return mix(horizon, zenith, pow(clamp(up, 0.0, 1.0), 0.45));\n"
    "}\n";
static const char *const terra_gl_fs_main =
    "void main() {\n"
    "    /* the triangle's three surfaces and their weights (see the vertex stage), each looked up once */\n"
    "    uvec3 ids = uvec3(round(v_ids / max(v_bary, vec3(1e-6))));\n"
    "    vec3 n0 = normalize(v_normal);\n"
    "    /* height and slope against up: on a planet the distance from the centre less the ellipsoid's\n"
    "     * radius that way (floats: to a metre), up the direction from the centre */\n"
    "    vec3 up = u_planet != 0 ? normalize(v_rel - u_centre) : vec3(0.0, 1.0, 0.0);\n"
    "    float h = u_eye_y + v_rel.y;\n"
    "    if (u_planet != 0) {\n"
    "        vec3 q = up / u_radii.xyx;\n"
    "        h = length(v_rel - u_centre) - inversesqrt(dot(q, q));\n"
    "    }\n"
    "#ifndef TERRA_MATERIAL\n"
    "    if (u_ramp.y > u_ramp.x) {\n"
    "        o_colour = vec4(vec3(clamp((h - u_ramp.x) / (u_ramp.y - u_ramp.x), 0.0, 1.0)), 1.0);\n"
    "        return;\n"
    "    }\n"
    "#endif\n"
    "    float cn = dot(n0, up), slope = sqrt(max(1.0 - cn * cn, 0.0)) / max(cn, 1e-3);\n"
    "    uvec3 st = uvec3(styled(ids.x, h, slope), styled(ids.y, h, slope), styled(ids.z, h, slope));\n"
    "    Surface s0 = surfaces[st.x];\n"
    "    vec3 albedo, w = vec3(1.0, 0.0, 0.0);\n"
    "    vec2 b;\n"
    "    if (st.x == st.y && st.y == st.z) { /* one surface (most triangles): no blend to weigh */\n"
    "        albedo = tint(s0);\n"
    "        b = bump(s0);\n"
    "    } else if (v_step > 0.999) { /* a grid tile's ground: the surface of the nearest sample */\n"
    "        uint k = nearest_sample(st);\n"
    "        Surface sk = surfaces[st[k]];\n"
    "        albedo = tint(sk);\n"
    "        b = bump(sk);\n"
    "        w = vec3(k == 0u, k == 1u, k == 2u);\n"
    "    } else {\n"
    "        Surface s1 = surfaces[st.y], s2 = surfaces[st.z];\n"
    "        w = v_bary * vec3(mask(s0), mask(s1), mask(s2));\n"
    "        w = w.x + w.y + w.z > 1e-4 ? w / (w.x + w.y + w.z) : v_bary;\n"
    "        albedo = w.x * tint(s0) + w.y * tint(s1) + w.z * tint(s2);\n"
    "        b = w.x * bump(s0) + w.y * bump(s1) + w.z * bump(s2);\n"
    "    }\n"
    "    if (u_level_tint != 0) albedo = LEVELS[v_level % 12u];\n"
    "    vec3 n = normalize(n0 + vec3(b.x, 0.0, b.y));\n"
    "    float sun = max(dot(n, u_sun), 0.0);\n"
    "    vec3 ambient = mix(vec3(0.12, 0.11, 0.10), vec3(0.30, 0.36, 0.46), dot(n, up) * 0.5 + 0.5);\n"
    "    vec3 c = albedo * (vec3(1.25, 1.16, 1.02) * sun + ambient);\n"
    "#ifdef TERRA_MATERIAL\n"
    "    o_colour = vec4(terra_material(terra_ground(u_eye + v_rel, n, up, h, slope, st, w, int(v_level), v_morph,\n"
    "                                                u_sun, sun, 1.0, pow(clamp(c, 0.0, 1.0), vec3(1.0 / 1.6)))), 1.0);\n"
    "    return;\n"
    "#endif\n"
    "    if (u_flat == 0 && u_fog_distance > 0.0) {\n"
    "        float dist = length(v_rel);\n"
    "        float fog = 1.0 - exp2(-dist / u_fog_distance);\n"
    "        c = mix(c, sky(dot(v_rel, u_up) / dist) * 0.97, fog);\n"
    "    }\n"
    "    o_colour = vec4(pow(clamp(c, 0.0, 1.0), vec3(1.0 / 1.6)), 1.0);\n"
    "}\n";

/* A user's material (terra_gl_style.material, gl.h says what each member holds): between the fragment
 * stage's declarations and its main, this, the user's source (its lines numbered from 100,001, so
 * renderer.c finds them in the compiler's log), then main with TERRA_MATERIAL defined. */
static const char *const terra_gl_material_head =
    "#define TERRA_MATERIAL 1\n"
    "struct terra_ground {\n"
    "    vec3 position; vec3 normal; vec3 up; float height; float slope;\n"
    "    uvec3 surfaces; vec3 weights; int level; float morph;\n"
    "    vec3 sun; float sun_light; float shadow; vec3 colour;\n"
    "};\n"
    "vec3 terra_material(terra_ground g);\n"
    "#line 100001\n";
static const char *const terra_gl_material_tail = "\n#line 200001\n";

/* ---- culling on the GPU (renderer.c says how a frame runs them) -------------------------------------
 * Compute passes, each compiled with "#version 450 core" and the layout's constants before it:
 * NB (blocks along a grid tile's side), PIECES (NB * NB ground blocks in Morton order, then 4 NB skirt
 * runs around the ring), WORDS (32-bit words of a tile's piece mask), BLOCK_INDICES and RUN_INDICES
 * (indices of a block's ground and of a run's skirt), GRID_INDICES (where the skirt's shared indices
 * start). */

/* The frame's tiles as the CPU writes them, std430, 64 bytes (gl_frame_tile in renderer.c): a: first
 * vertex, tile id, flags (1: mesh tile, 2: prepass allowed, bit 8 + s: skirt side s needed), a mesh
 * tile's first index; b: a mesh tile's ground and skirt index counts. */
#define TERRA_GL_CS_TILES                                                                          \
    "struct DrawRecord { vec4 origin_level; vec4 morph_skirt; ivec4 info; };\n"                   \
    "struct Tile { vec4 origin_level; vec4 morph_skirt; uvec4 a; uvec4 b; };\n"                   \
    "layout(std430, binding = 2) readonly buffer Tiles { Tile tiles[]; };\n"                      \
    "uniform uint u_tiles;\n"

/* Each frame tile's record, to its tile id's place, for the vertex stage. */
static const char *const terra_gl_cs_scatter =
    TERRA_GL_CS_TILES
    "layout(local_size_x = 64) in;\n"
    "layout(std430, binding = 0) writeonly buffer Draws { DrawRecord draws[]; };\n"
    "uniform int u_frame;\n"
    "void main() {\n"
    "    uint k = gl_GlobalInvocationID.x;\n"
    "    if (k >= u_tiles) return;\n"
    "    Tile t = tiles[k];\n"
    "    draws[t.a.y] = DrawRecord(t.origin_level, t.morph_skirt,\n"
    "                              ivec4(int(t.a.x), int(t.a.z & 1u), u_frame, int((t.a.z >> 1) & 1u)));\n"
    "}\n";

/* One level of the depth pyramid: each texel the farthest (least, reverse-Z) depth of the 2 x 2 it
 * covers one level down (the depth buffer under level 0), clamped at the valid edge, so a texel of
 * level l holds the farthest depth of every pixel (x, y) with (x, y) >> (l + 1) its place. */
static const char *const terra_gl_cs_hiz =
    "layout(local_size_x = 8, local_size_y = 8) in;\n"
    "uniform sampler2D u_depth;\n"
    "layout(r32f, binding = 0) readonly uniform image2D u_src;\n"
    "layout(r32f, binding = 1) writeonly uniform image2D u_dst;\n"
    "uniform int u_from_depth;\n"
    "uniform ivec2 u_src_size, u_dst_size;\n"
    "float at(ivec2 p) { return u_from_depth != 0 ? texelFetch(u_depth, p, 0).r : imageLoad(u_src, p).r; }\n"
    "void main() {\n"
    "    ivec2 p = ivec2(gl_GlobalInvocationID.xy);\n"
    "    if (p.x >= u_dst_size.x || p.y >= u_dst_size.y) return;\n"
    "    ivec2 a = 2 * p, b = min(a + 1, u_src_size - 1);\n"
    "    float m = min(min(at(a), at(ivec2(b.x, a.y))), min(at(ivec2(a.x, b.y)), at(b)));\n"
    "    imageStore(u_dst, p, vec4(m));\n"
    "}\n";

/* Which pieces of each frame tile may show. A piece is left out when its box (in its tile's axes, on a
 * planet its own; 10 bits a coordinate within its tile's piece bounds, rounded outward) lies wholly
 * outside one side of the view, behind the near plane or (on a planet) in the shadow of the frame's
 * ball (renderer.c), or when the box is wholly in front of the near plane and its nearest point is
 * strictly farther than the farthest depth the prepass left over every pixel whose centre its
 * projection can cover (read from the depth buffer itself for at most 8 x 8 pixels, else from the
 * pyramid level where they span at most 8 x 8 texels). The prepass drew real fragments of this frame
 * only, so each pixel's final depth is at least the pyramid's: a piece left out has no fragment as near
 * as the final depth anywhere, and cannot change the picture (renderer.c). Boxes are widened by 2^-16
 * of their distance, extent and coordinates and a millimetre for the rounding of drawn positions and of
 * the axes (a planet piece's own axes decoded here and in C alike),
 * and by a hundredth of a step of their 10 bits; the rectangle by the rasterizer's subpixel step (a
 * vertex snapped to it moves by less); the nearest depth by 1/256 of itself: a rasterizer interpolates
 * depth by a plane fitted to the corners in floats, which on a thin triangle strays past its corners'
 * depths (llvmpipe: by 2.7e-5 of it at a far ridge, test_gl_occlusion's cells64_path01 with no slack).
 * Two passes, an invocation each (no barriers: a software GL runs a workgroup's invocations in turn):
 * cs_cull_tiles per tile (its box; a mesh tile's mask whole, a grid tile's cleared), cs_cull per grid
 * piece of a tile in view (a bit of its tile's mask, vis). */
#define TERRA_GL_CS_SHOWS                                                                          \
    "layout(std430, binding = 3) readonly buffer Bounds { vec4 bounds[]; };\n"                      \
    "layout(std430, binding = 5) buffer Vis { uint vis[]; };\n"                                     \
    "uniform mat4 u_view_proj;\n"                                                                  \
    "uniform vec3 u_eye_frac;\n"                                                                   \
    "uniform vec2 u_size;\n"                                                                       \
    "uniform float u_near;\n"                                                                      \
    "uniform int u_hiz_levels; /* 0: no prepass, the view's sides (and the ball) alone */\n"      \
    "uniform sampler2D u_hiz, u_depth;\n"                                                          \
    "uniform float u_snap; /* how far (pixels) the rasterizer may move a vertex: its subpixel step */\n"    \
    "uniform vec4 u_ball; /* a planet's centre from the eye and a radius under all its ground drawn; w 0: none */\n"
static const char *const terra_gl_cs_shows =
    "bool shadowed(vec3 p) { /* the segment from the eye to p meets the ball */\n"
    "    vec3 d = u_ball.xyz - clamp(dot(u_ball.xyz, p) / dot(p, p), 0.0, 1.0) * p;\n"
    "    return dot(d, d) < u_ball.w * u_ball.w;\n"
    "}\n"
    "bool shows(vec3 o, vec3 ax, vec3 ay, vec3 lo, vec3 hi) {\n"
    "    vec3 az = cross(ax, ay);\n"
    "    float pad = (length(o + ax * lo.x + ay * lo.y + az * lo.z) + length(hi - lo) + length(max(abs(lo), abs(hi)))) * (1.0 / 65536.0) + 1e-3;\n"
    "    lo -= pad;\n"
    "    hi += pad;\n"
    "    vec3 e = hi - lo;\n"
    "    vec4 c0 = u_view_proj * vec4(o + ax * lo.x + ay * lo.y + az * lo.z, 1.0);\n"
    "    vec4 ex = u_view_proj * vec4(ax * e.x, 0.0), ey = u_view_proj * vec4(ay * e.y, 0.0), ez = u_view_proj * vec4(az * e.z, 0.0);\n"
    "    float xl = 1e30, xr = -1e30, yl = 1e30, yr = -1e30, wmin = 1e30, wmax = -1e30;\n"
    "    vec2 mn = vec2(1e30), mx = vec2(-1e30);\n"
    "    for (int i = 0; i < 8; i++) {\n"
    "        vec4 c = c0 + ((i & 1) != 0 ? ex : vec4(0.0)) + ((i & 2) != 0 ? ey : vec4(0.0)) + ((i & 4) != 0 ? ez : vec4(0.0));\n"
    "        xl = min(xl, c.x - c.w), xr = max(xr, c.x + c.w), yl = min(yl, c.y - c.w), yr = max(yr, c.y + c.w);\n"
    "        wmin = min(wmin, c.w), wmax = max(wmax, c.w);\n"
    "        if (c.w >= u_near) mn = min(mn, c.xy / c.w), mx = max(mx, c.xy / c.w);\n"
    "    }\n"
    "    if (xl > 0.0 || xr < 0.0 || yl > 0.0 || yr < 0.0 || wmax < u_near) return false; /* off a side, or behind */\n"
    "    if (u_ball.w > 0.0) { /* behind the ball: its shadow is convex, so the box's corners tell */\n"
    "        vec3 p0 = o + ax * lo.x + ay * lo.y + az * lo.z;\n"
    "        bool hid = true;\n"
    "        for (int i = 0; i < 8 && hid; i++)\n"
    "            hid = shadowed(p0 + ((i & 1) != 0 ? ax * e.x : vec3(0.0)) + ((i & 2) != 0 ? ay * e.y : vec3(0.0)) + ((i & 4) != 0 ? az * e.z : vec3(0.0)));\n"
    "        if (hid) return false;\n"
    "    }\n"
    "    if (wmin < u_near || u_hiz_levels == 0) return true;\n"
    "    /* the pixels whose centre the piece can cover: within its rectangle, widened by the snapping */\n"
    "    ivec2 i0 = max(ivec2(ceil((mn * 0.5 + 0.5) * u_size - 0.5 - u_snap)), ivec2(0));\n"
    "    ivec2 i1 = min(ivec2(floor((mx * 0.5 + 0.5) * u_size - 0.5 + u_snap)), ivec2(u_size) - 1);\n"
    "    if (i0.x > i1.x || i0.y > i1.y) return false;\n"
    "    float far = 1e30;\n"
    "    if (i1.x - i0.x < 8 && i1.y - i0.y < 8) { /* at most 8 x 8 pixels: the depth buffer itself */\n"
    "        for (int y = i0.y; y <= i1.y; y++)\n"
    "            for (int x = i0.x; x <= i1.x; x++) far = min(far, texelFetch(u_depth, ivec2(x, y), 0).r);\n"
    "    } else { /* the pyramid's level where the rectangle spans at most 8 x 8 texels */\n"
    "        int l = 0;\n"
    "        ivec2 t0 = i0 >> 1, t1 = i1 >> 1;\n"
    "        while (l + 1 < u_hiz_levels && (t1.x - t0.x > 7 || t1.y - t0.y > 7)) l++, t0 >>= 1, t1 >>= 1;\n"
    "        for (int y = t0.y; y <= t1.y; y++)\n"
    "            for (int x = t0.x; x <= t1.x; x++) far = min(far, texelFetch(u_hiz, ivec2(x, y), l).r);\n"
    "    }\n"
    "    return u_near / wmin * (1.0 + 1.0 / 256.0) >= far; /* the rasterizer's depth slack */\n"
    "}\n";

static const char *const terra_gl_cs_cull_tiles =
    TERRA_GL_CS_TILES
    TERRA_GL_CS_SHOWS
    "layout(local_size_x = 64) in;\n"
    "layout(std430, binding = 6) writeonly buffer Shown { uint shown[]; };\n"
    "uniform int u_no_skirts;\n";
static const char *const terra_gl_cs_cull_tiles_main =
    "void main() {\n"
    "    uint k = gl_GlobalInvocationID.x;\n"
    "    if (k >= u_tiles) return;\n"
    "    Tile t = tiles[k];\n"
    "    uint id = t.a.y;\n"
    "    vec3 o = t.origin_level.xyz - u_eye_frac;\n"
    "    bool in_view = shows(o, bounds[6u * id + 2u].xyz, bounds[6u * id + 3u].xyz, bounds[6u * id].xyz, bounds[6u * id + 1u].xyz);\n"
    "    shown[k] = uint(in_view);\n"
    "    for (uint w = 0u; w < uint(WORDS); w++) vis[k * uint(WORDS) + w] = 0u;\n"
    "    if (in_view && (t.a.z & 1u) != 0u) vis[k * uint(WORDS)] = 1u | (u_no_skirts == 0 && t.b.y > 0u ? 2u : 0u);\n"
    "}\n";

static const char *const terra_gl_cs_cull =
    TERRA_GL_CS_TILES
    TERRA_GL_CS_SHOWS
    "layout(local_size_x = 64) in;\n"
    "layout(std430, binding = 4) readonly buffer Boxes { uint boxes[]; };\n"
    "layout(std430, binding = 6) readonly buffer Shown { uint shown[]; };\n"
    "uniform int u_no_skirts;\n";
static const char *const terra_gl_cs_cull_main =
    "vec3 oct_decode(uint w) {\n"
    "    vec2 f = vec2(uvec2(w & 0xffffu, w >> 16)) / 65535.0 * 2.0 - 1.0;\n"
    "    float z = 1.0 - abs(f.x) - abs(f.y);\n"
    "    if (z < 0.0) f = (1.0 - abs(f.yx)) * vec2(f.x >= 0.0 ? 1.0 : -1.0, f.y >= 0.0 ? 1.0 : -1.0);\n"
    "    return normalize(vec3(f, z));\n"
    "}\n"
    "void main() {\n"
    "    uint g = gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u + gl_GlobalInvocationID.x;\n"
    "    uint k = g / uint(PIECES), j = g % uint(PIECES);\n"
    "    if (k >= u_tiles || shown[k] == 0u) return;\n"
    "    Tile t = tiles[k];\n"
    "    uint id = t.a.y, flags = t.a.z;\n"
    "    if ((flags & 1u) != 0u) return;\n"
    "    if (j >= uint(NB * NB) && (u_no_skirts != 0 || (flags >> (8u + (j - uint(NB * NB)) / uint(NB)) & 1u) == 0u)) return;\n"
    "    vec3 o = t.origin_level.xyz - u_eye_frac, tlo = bounds[6u * id + 4u].xyz, step = (bounds[6u * id + 5u].xyz - tlo) * (1.0 / 1023.0);\n"
    "    uint at = (id * uint(PIECES) + j) * uint(BOX_WORDS);\n"
    "    uvec2 q = uvec2(boxes[at], boxes[at + 1u]);\n"
    "    vec3 lo = tlo + (vec3(uvec3(q.x, q.x >> 10, q.x >> 20) & 1023u) - 0.01) * step;\n"
    "    vec3 hi = tlo + (vec3(uvec3(q.y, q.y >> 10, q.y >> 20) & 1023u) + 0.01) * step;\n"
    "    vec3 ax = bounds[6u * id + 2u].xyz, ay = bounds[6u * id + 3u].xyz;\n"
    "#if BOX_WORDS == 3 /* a planet piece's own axes (renderer.c, piece_axes) */\n"
    "    ay = oct_decode(boxes[at + 2u]);\n"
    "    ax = normalize(ax - dot(ax, ay) * ay);\n"
    "#endif\n"
    "    if (shows(o, ax, ay, lo, hi)) atomicOr(vis[k * uint(WORDS) + (j >> 5)], 1u << (j & 31u));\n"
    "}\n";

/* How many pieces before piece j of frame tile k are drawn (set in its mask). */
#define TERRA_GL_CS_BITS                                                                           \
    "uint bits_below(uint k, uint j) {\n"                                                            \
    "    uint n = 0u, at = k * uint(WORDS);\n"                                                       \
    "    for (uint w = 0u; w < (j >> 5); w++) n += uint(bitCount(vis[at + w]));\n"                  \
    "    if ((j & 31u) != 0u) n += uint(bitCount(vis[at + (j >> 5)] & ((1u << (j & 31u)) - 1u)));\n" \
    "    return n;\n"                                                                                \
    "}\n"

/* Where each tile's pieces go, in the frame's canonical order: an exclusive sum over the tiles (one
 * workgroup, each invocation a run of them), grid tiles' skirts first, then their ground, in the list;
 * a mesh tile's skirt and ground each a command of its own, numbered the same way. Writes the offsets
 * (list offsets: skirt, ground; a mesh tile's: its command numbers) and the frame's block of commands:
 * the list's skirts and ground (uints 0-9), the numbers of mesh skirt and ground commands (10, 11: the
 * counts of the multi-draws), the ground indices it draws (12: what the next frame's prepass draws); and
 * the totals read back for the figures: skirt and ground indices drawn, tiles with a piece drawn,
 * indices the prepass drew, mesh tiles' commands in the picture and the prepass, tiles drawn per level
 * (8 on). */
static const char *const terra_gl_cs_scan =
    TERRA_GL_CS_TILES
    "layout(local_size_x = 256) in;\n"
    "layout(std430, binding = 5) readonly buffer Vis { uint vis[]; };\n"
    "layout(std430, binding = 6) writeonly buffer Offsets { uvec2 offsets[]; };\n"
    "layout(std430, binding = 7) buffer Commands { uint cmds[]; };\n"
    "layout(std430, binding = 8) buffer Totals { uint totals[]; };\n"
    "uniform uint u_cmd;     /* this frame's block of commands (uints) */\n"
    "uniform uint u_prepass; /* the block the prepass drew from, or ~0u */\n"
    "shared uvec4 s_sum[256];\n"
    TERRA_GL_CS_BITS
    "uvec2 count(uint k) { /* skirt and ground indices; a mesh tile's as they are */\n"
    "    Tile t = tiles[k];\n"
    "    uint m = vis[k * uint(WORDS)];\n"
    "    if ((t.a.z & 1u) != 0u) return uvec2((m & 2u) != 0u ? t.b.y : 0u, (m & 1u) != 0u ? t.b.x : 0u);\n"
    "    uint g = bits_below(k, uint(NB * NB));\n"
    "    return uvec2((bits_below(k, uint(PIECES)) - g) * uint(RUN_INDICES), g * uint(BLOCK_INDICES));\n"
    "}\n"
    "void main() {\n"
    "    uint lid = gl_LocalInvocationID.x, per = (u_tiles + 255u) / 256u;\n"
    "    uint k0 = min(lid * per, u_tiles), k1 = min(k0 + per, u_tiles);\n"
    "    if (lid < 40u) totals[lid] = 0u;\n"
    "    uvec4 sum = uvec4(0u); /* grid skirt and ground indices, mesh skirt and ground commands */\n"
    "    for (uint k = k0; k < k1; k++) {\n"
    "        uvec2 c = count(k);\n"
    "        if ((tiles[k].a.z & 1u) != 0u) sum.zw += uvec2(c.x != 0u, c.y != 0u);\n"
    "        else sum.xy += c;\n"
    "    }\n"
    "    s_sum[lid] = sum;\n"
    "    memoryBarrierBuffer();\n"
    "    barrier();\n"
    "    for (uint d = 1u; d < 256u; d <<= 1) {\n"
    "        uvec4 v = lid >= d ? s_sum[lid - d] : uvec4(0u);\n"
    "        barrier();\n"
    "        s_sum[lid] += v;\n"
    "        barrier();\n"
    "    }\n"
    "    uint S = s_sum[255].x, G = s_sum[255].y;\n"
    "    uvec4 p = s_sum[lid] - sum;\n"
    "    for (uint k = k0; k < k1; k++) {\n"
    "        uvec2 c = count(k);\n"
    "        if ((tiles[k].a.z & 1u) != 0u) {\n"
    "            offsets[k] = p.zw;\n"
    "            p.zw += uvec2(c.x != 0u, c.y != 0u);\n"
    "            atomicAdd(totals[0], c.x), atomicAdd(totals[1], c.y);\n"
    "        } else {\n"
    "            offsets[k] = uvec2(p.x, S + p.y);\n"
    "            p.xy += c;\n"
    "        }\n"
    "        if (c.x + c.y != 0u) atomicAdd(totals[2], 1u), atomicAdd(totals[8u + uint(tiles[k].origin_level.w)], 1u);\n"
    "    }\n"
    "    memoryBarrierBuffer();\n"
    "    barrier();\n"
    "    if (lid == 0u) {\n"
    "        uint c = u_cmd;\n"
    "        cmds[c + 0u] = S, cmds[c + 1u] = 1u, cmds[c + 2u] = 0u, cmds[c + 3u] = 0u, cmds[c + 4u] = 0u;\n"
    "        cmds[c + 5u] = G, cmds[c + 6u] = 1u, cmds[c + 7u] = S, cmds[c + 8u] = 0u, cmds[c + 9u] = 0u;\n"
    "        cmds[c + 10u] = s_sum[255].z, cmds[c + 11u] = s_sum[255].w;\n"
    "        cmds[c + 12u] = G + atomicAdd(totals[1], G); /* the ground this block draws: the next prepass */\n"
    "        atomicAdd(totals[0], S);\n"
    "        totals[3] = u_prepass != 0xffffffffu ? cmds[u_prepass + 12u] : 0u;\n"
    "        totals[4] = s_sum[255].z + s_sum[255].w;\n"
    "        totals[5] = u_prepass != 0xffffffffu ? cmds[u_prepass + 11u] : 0u;\n"
    "    }\n"
    "}\n";

/* The frame's list, an invocation per piece: each grid tile's pieces drawn, their shared indices (the
 * ground block by block, the skirt run by run) plus the tile's first vertex, at the offsets the scan
 * gave, in piece order; a mesh tile's commands for its skirt and its ground where drawn (its piece 0). */
static const char *const terra_gl_cs_write =
    TERRA_GL_CS_TILES
    "layout(local_size_x = 64) in;\n"
    "layout(std430, binding = 5) readonly buffer Vis { uint vis[]; };\n"
    "layout(std430, binding = 6) readonly buffer Offsets { uvec2 offsets[]; };\n"
    "layout(std430, binding = 7) buffer Commands { uint cmds[]; };\n"
    "layout(std430, binding = 9) readonly buffer Shared { uint shared_indices[]; };\n"
    "layout(std430, binding = 10) writeonly buffer List { uint list[]; };\n"
    "uniform uint u_mesh_skirts, u_mesh_ground; /* uints: this frame's mesh commands */\n"
    TERRA_GL_CS_BITS
    "void command(uint at, uint count, uint first, uint base, uint id) {\n"
    "    cmds[at] = count, cmds[at + 1u] = 1u, cmds[at + 2u] = first, cmds[at + 3u] = base, cmds[at + 4u] = id + 1u;\n"
    "}\n"
    "void main() {\n"
    "    uint g = gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u + gl_GlobalInvocationID.x;\n"
    "    uint k = g / uint(PIECES), j = g % uint(PIECES);\n"
    "    if (k >= u_tiles || (vis[k * uint(WORDS) + (j >> 5)] & (1u << (j & 31u))) == 0u) return;\n"
    "    Tile t = tiles[k];\n"
    "    uint vb = t.a.x;\n"
    "    uvec2 off = offsets[k];\n"
    "    if ((t.a.z & 1u) != 0u) {\n"
    "        if (j == 1u) command(u_mesh_skirts + 5u * off.x, t.b.y, t.a.w + t.b.x, vb, t.a.y);\n"
    "        if (j == 0u) command(u_mesh_ground + 5u * off.y, t.b.x, t.a.w, vb, t.a.y);\n"
    "        return;\n"
    "    }\n"
    "    uint r = bits_below(k, j), n, src, dst;\n"
    "    if (j < uint(NB * NB)) n = uint(BLOCK_INDICES), src = j * n, dst = off.y + r * n;\n"
    "    else n = uint(RUN_INDICES), src = uint(GRID_INDICES) + (j - uint(NB * NB)) * n, dst = off.x + (r - bits_below(k, uint(NB * NB))) * n;\n"
    "    for (uint i = 0u; i < n; i++) list[dst + i] = shared_indices[src + i] + vb;\n"
    "}\n";

/* The sky: row y's colour (row 0 at the bottom) for the direction of the centre column's ray through it,
 * by its elevation over the local horizon, faded into space above 20 km (renderer.c, sky_gradient). */
static const char *const terra_gl_cs_sky =
    "layout(local_size_x = 64) in;\n"
    "layout(rgba8, binding = 0) writeonly uniform image2D u_sky;\n"
    "uniform int u_rows;\n"
    "uniform vec3 u_forward, u_cam_up, u_local_up;\n"
    "uniform float u_tan, u_space;\n"
    "void main() {\n"
    "    int y = int(gl_GlobalInvocationID.x);\n"
    "    if (y >= u_rows) return;\n"
    "    float v = ((float(y) + 0.5) / float(u_rows) * 2.0 - 1.0) * u_tan;\n"
    "    vec3 d = u_forward + v * u_cam_up;\n"
    "    float e = clamp(dot(d, u_local_up) / length(d), 0.0, 1.0);\n"
    "    vec3 horizon = vec3(0.80, 0.86, 0.93), zenith = vec3(0.26, 0.47, 0.80);\n"
    "    vec3 c = pow(horizon + (zenith - horizon) * pow(e, 0.45), vec3(1.0 / 1.6));\n"
    "    imageStore(u_sky, ivec2(0, y), vec4(mix(c, vec3(0.02, 0.025, 0.05), u_space), 1.0));\n"
    "}\n";

#endif
