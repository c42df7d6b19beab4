/* libterra-gl: the ground's shaders (GLSL 4.50 core). Internal to gl/. */
#ifndef TERRA_GL_SHADERS_H
#define TERRA_GL_SHADERS_H

/* Per-draw record, std430: 48 bytes (must match gl_draw_record in renderer.c): tile origin
 * relative to the eye and level; morph start and end, a grid tile's skirt depth; the tile's first
 * vertex; 1 for a mesh tile.
 * The kind is a per-draw flag, not an attribute, so grid tiles keep their bytes as grid.c makes
 * them: a grid tile's colours follow from gl_VertexID - base_vertex, a mesh tile's are its
 * vertices' colour attribute (terra_grid_vertex.colour, set by terra_tile_mesh_expand). */
#define TERRA_GL_GLSL_COMMON                                                                       \
    "#version 450 core\n"                                                                          \
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

/* Vertex stage: the tile origin relative to the camera comes from the draw's record (reached
 * through the instanced draw index, which the indirect command's base instance selects); the
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
    TERRA_GL_GLSL_COMMON
    "layout(std430, binding = 0) readonly buffer Draws { DrawRecord draws[]; };\n"
    "uniform int u_cells;\n"
    "uniform vec3 u_eye_frac;\n"
    "layout(location = 0) in vec3 a_pos;\n"
    "layout(location = 1) in vec3 a_target;\n"
    "layout(location = 2) in vec2 a_oct;\n"
    "layout(location = 3) in uint a_surface;\n"
    "layout(location = 4) in uint a_draw;\n"
    "layout(location = 5) in vec2 a_morph_oct;\n"
    "layout(location = 6) in uint a_colour;\n"
    "out vec3 v_rel;\n"
    "out vec3 v_normal;\n"
    "out vec3 v_bary;\n"
    "out vec3 v_ids;\n"
    "flat out uint v_level;\n"
    "vec3 oct_decode(vec2 e) {\n"
    "    vec3 v = vec3(e, 1.0 - abs(e.x) - abs(e.y));\n"
    "    if (v.z < 0.0) v.xy = (1.0 - abs(v.yx)) * vec2(v.x >= 0.0 ? 1.0 : -1.0, v.y >= 0.0 ? 1.0 : -1.0);\n"
    "    v = normalize(v);\n"
    "    return vec3(v.x, v.z, v.y); /* +y is the octahedron's pole */\n"
    "}\n"
    "void main() {\n"
    "    DrawRecord d = draws[a_draw];\n"
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
    "out vec4 o_colour;\n"
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
    "    if (u_ramp.y > u_ramp.x) {\n"
    "        o_colour = vec4(vec3(clamp((h - u_ramp.x) / (u_ramp.y - u_ramp.x), 0.0, 1.0)), 1.0);\n"
    "        return;\n"
    "    }\n"
    "    float cn = dot(n0, up), slope = sqrt(max(1.0 - cn * cn, 0.0)) / max(cn, 1e-3);\n"
    "    uvec3 st = uvec3(styled(ids.x, h, slope), styled(ids.y, h, slope), styled(ids.z, h, slope));\n"
    "    Surface s0 = surfaces[st.x];\n"
    "    vec3 albedo;\n"
    "    vec2 b;\n"
    "    if (st.x == st.y && st.y == st.z) { /* one surface (most triangles): no blend to weigh */\n"
    "        albedo = tint(s0);\n"
    "        b = bump(s0);\n"
    "    } else {\n"
    "        Surface s1 = surfaces[st.y], s2 = surfaces[st.z];\n"
    "        vec3 w = v_bary * vec3(mask(s0), mask(s1), mask(s2));\n"
    "        w = w.x + w.y + w.z > 1e-4 ? w / (w.x + w.y + w.z) : v_bary;\n"
    "        albedo = w.x * tint(s0) + w.y * tint(s1) + w.z * tint(s2);\n"
    "        b = w.x * bump(s0) + w.y * bump(s1) + w.z * bump(s2);\n"
    "    }\n"
    "    if (u_level_tint != 0) albedo = LEVELS[v_level % 12u];\n"
    "    vec3 n = normalize(n0 + vec3(b.x, 0.0, b.y));\n"
    "    float sun = max(dot(n, u_sun), 0.0);\n"
    "    vec3 ambient = mix(vec3(0.12, 0.11, 0.10), vec3(0.30, 0.36, 0.46), dot(n, up) * 0.5 + 0.5);\n"
    "    vec3 c = albedo * (vec3(1.25, 1.16, 1.02) * sun + ambient);\n"
    "    if (u_flat == 0 && u_fog_distance > 0.0) {\n"
    "        float dist = length(v_rel);\n"
    "        float fog = 1.0 - exp2(-dist / u_fog_distance);\n"
    "        c = mix(c, sky(dot(v_rel, u_up) / dist) * 0.97, fog);\n"
    "    }\n"
    "    o_colour = vec4(pow(clamp(c, 0.0, 1.0), vec3(1.0 / 1.6)), 1.0);\n"
    "}\n";

#endif
