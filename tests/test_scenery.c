/* Scenery meshes read through assimp (io/cook/scenery.c) and cut into finest tiles: the test makes
 * its own scenery - a TIN of a real DEM (St Helens, through terra_raster_read_isolated and
 * terra_tin_build; a synthetic hill without $TERRA_SHARED) with a hole cut in it, a retaining wall,
 * a steep embankment facing down, a house under a transform of its own (with a chimney below it),
 * a tree with an alpha-masked material and a bush with an RGBA texture - as glTF 2.0 (one embedded
 * base64 buffer) and as OBJ+MTL, and checks what counts as ground, the left-out record, the layer
 * table (tints, metres per texture repeat as the test laid the texture coordinates), the files the
 * scenery names (present and absent), and that the cut lays the wall once and leaves the hole open.
 * Bad files (a NaN vertex, 0 bytes, garbage, no ground left, degenerate and duplicate triangles)
 * give clear errors or counts. Hostile ones (counts no file holds, node graphs too deep or not a
 * forest, URIs and symlinks out of the folder, FIFOs, past the memory budget, a crashing reader) are
 * refused the same in this process and through terra-scenery, and the glTF triangles assimp drops
 * are counted.
 *
 * `test_scenery --write DIR` writes the sceneries (ground.gltf + bush.png, ground.obj + ground.mtl),
 * the bad files (bad-*.gltf, bad-*.obj), quad.glb, quad.ply and the hostile files (bomb-*.ply,
 * bomb.off, chain-20000.gltf, cycle.gltf, out-of-range.gltf) into DIR and nothing else, for
 * `terra check`, the CLI tests and the fuzz seeds. */
#include "check.h"
#include "terra/io.h"
#include "terra/raster.h"
#include "terra/scenery.h"
#include "terra/tin.h"
#include "../io/cook/scenery_check.h"

#include <limits.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Sanitizer builds run terra-scenery without its address-space limit (their shadow memory needs
 * more), and a crash there is the sanitizer's report and exit, not a signal. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define UNDER_SANITIZER 1
#endif
#endif

/* What the scenery is made to hold: metres per repeat of each ground material's texture. */
#define GRASS_M 8.0
#define STONE_M 2.0
#define GRAVEL_M 4.0

/* ---- meshes with texture coordinates laid at a known scale -------------------------------------- */

typedef struct mesh {
    float *pos, *uv;
    uint32_t *idx;
    size_t nv, ni, vcap, icap;
} mesh;

static void mesh_free(mesh *m) {
    free(m->pos);
    free(m->uv);
    free(m->idx);
    memset(m, 0, sizeof *m);
}

static uint32_t mesh_vertex(mesh *m, const double p[3], double u, double v) {
    if (m->nv == m->vcap) {
        m->vcap = m->vcap ? 2 * m->vcap : 256;
        m->pos = realloc(m->pos, m->vcap * 3 * sizeof(float));
        m->uv = realloc(m->uv, m->vcap * 2 * sizeof(float));
    }
    for (int k = 0; k < 3; k++) m->pos[3 * m->nv + k] = (float)p[k];
    m->uv[2 * m->nv] = (float)u, m->uv[2 * m->nv + 1] = (float)v;
    return (uint32_t)m->nv++;
}

static void mesh_index(mesh *m, uint32_t a, uint32_t b, uint32_t c) {
    if (m->ni + 3 > m->icap) {
        m->icap = m->icap ? 2 * m->icap : 768;
        m->idx = realloc(m->idx, m->icap * sizeof(uint32_t));
    }
    m->idx[m->ni++] = a, m->idx[m->ni++] = b, m->idx[m->ni++] = c;
}

/* A triangle with its own three vertices and texture coordinates unrolled flat in its own plane at
 * `metres` per repeat: every triangle's 3-D edges are `metres` times its UV edges, exactly as far as
 * floats go. Corners are rounded to floats first (what the file will hold). */
static void mesh_tri(mesh *m, const double A0[3], const double B0[3], const double C0[3], double metres) {
    double A[3], B[3], C[3];
    for (int k = 0; k < 3; k++) A[k] = (float)A0[k], B[k] = (float)B0[k], C[k] = (float)C0[k];
    double e1[3] = {B[0] - A[0], B[1] - A[1], B[2] - A[2]}, e2[3] = {C[0] - A[0], C[1] - A[1], C[2] - A[2]};
    double l1 = sqrt(e1[0] * e1[0] + e1[1] * e1[1] + e1[2] * e1[2]);
    double u[3] = {e1[0] / l1, e1[1] / l1, e1[2] / l1};
    double n[3] = {e1[1] * e2[2] - e1[2] * e2[1], e1[2] * e2[0] - e1[0] * e2[2], e1[0] * e2[1] - e1[1] * e2[0]};
    double w[3] = {n[1] * u[2] - n[2] * u[1], n[2] * u[0] - n[0] * u[2], n[0] * u[1] - n[1] * u[0]};
    double lw = sqrt(w[0] * w[0] + w[1] * w[1] + w[2] * w[2]);
    double cu = e2[0] * u[0] + e2[1] * u[1] + e2[2] * u[2], cw = (e2[0] * w[0] + e2[1] * w[1] + e2[2] * w[2]) / lw;
    double u0 = A[0] / metres, v0 = A[2] / metres; /* somewhere on the texture, not always 0 */
    uint32_t a = mesh_vertex(m, A, u0, v0), b = mesh_vertex(m, B, u0 + l1 / metres, v0);
    uint32_t c = mesh_vertex(m, C, u0 + cu / metres, v0 + cw / metres);
    mesh_index(m, a, b, c);
}

static void mesh_quad(mesh *m, const double a[3], const double b[3], const double c[3], const double d[3],
                      double metres) {
    mesh_tri(m, a, b, c, metres);
    mesh_tri(m, a, c, d, metres);
}

/* ---- the scenery ------------------------------------------------------------------------------ */

typedef struct ground {
    int w, h;               /* vertices of the heightfield the TIN came from, for its extent */
    double spacing;
    size_t nv, nt;
    double *xyz;            /* scenery x, y (up), z */
    uint32_t *tri;
} ground;

typedef struct scenery {
    mesh m[6];              /* ground, wall, embankment, box (house, chimney), tree, bush */
    double hole[3];         /* scenery x, z and radius of the hole */
    double wall_area;       /* m^2 */
    double ground_plane;    /* plane area of the ground kept, embankment included (m^2) */
    size_t ground_tris, wall_tris, embankment_tris;
} scenery;

static double tri_area3(const double *a, const double *b, const double *c) {
    double e1[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]}, e2[3] = {c[0] - a[0], c[1] - a[1], c[2] - a[2]};
    double x = e1[1] * e2[2] - e1[2] * e2[1], y = e1[2] * e2[0] - e1[0] * e2[2], z = e1[0] * e2[1] - e1[1] * e2[0];
    return sqrt(x * x + y * y + z * z) / 2;
}

static double plane_area(const double *a, const double *b, const double *c) {
    return fabs((b[0] - a[0]) * (c[2] - a[2]) - (b[2] - a[2]) * (c[0] - a[0])) / 2;
}

/* The ground's height at scenery (x, z) (the TIN's triangle there), or `otherwise`. */
static double ground_height(const ground *g, double x, double z, double otherwise) {
    for (size_t t = 0; t < g->nt; t++) {
        const double *p[3];
        for (int k = 0; k < 3; k++) p[k] = g->xyz + 3 * (size_t)g->tri[3 * t + k];
        double area = (p[1][0] - p[0][0]) * (p[2][2] - p[0][2]) - (p[1][2] - p[0][2]) * (p[2][0] - p[0][0]);
        double l[3];
        for (int k = 0; k < 3; k++) {
            const double *a = p[(k + 1) % 3], *b = p[(k + 2) % 3];
            l[k] = ((b[0] - a[0]) * (z - a[2]) - (b[2] - a[2]) * (x - a[0])) / area;
        }
        if (l[0] >= 0 && l[1] >= 0 && l[2] >= 0) return l[0] * p[0][1] + l[1] * p[1][1] + l[2] * p[2][1];
    }
    return otherwise;
}

/* The ground with a hole; a retaining wall standing on it (sunk half a metre, 3 m tall); a steep
 * embankment (70 degrees, its triangles facing down) in a cutting of its own, so that nothing lies
 * over the ground twice; the house, the tree, the bush. */
static void make_scenery(const ground *g, scenery *s) {
    memset(s, 0, sizeof *s);
    double W = (g->w - 1) * g->spacing, D = (g->h - 1) * g->spacing, h0 = 0;
    for (size_t i = 0; i < g->nv; i++) h0 += g->xyz[3 * i + 1] / (double)g->nv;
    s->hole[0] = 0.3 * W, s->hole[1] = 0.6 * D, s->hole[2] = 0.12 * W;
    const double ex = 0.7 * W, ez0 = 0.7 * D, ez1 = 0.86 * D, run = 4, rise = run * 2.75;
    const double foot = ground_height(g, ex, ez0, h0);
    for (size_t t = 0; t < g->nt; t++) {
        const double *p[3];
        double cx = 0, cz = 0, lo[2] = {INFINITY, INFINITY}, hi[2] = {-INFINITY, -INFINITY};
        for (int k = 0; k < 3; k++) {
            p[k] = g->xyz + 3 * (size_t)g->tri[3 * t + k], cx += p[k][0] / 3, cz += p[k][2] / 3;
            lo[0] = fmin(lo[0], p[k][0]), hi[0] = fmax(hi[0], p[k][0]);
            lo[1] = fmin(lo[1], p[k][2]), hi[1] = fmax(hi[1], p[k][2]);
        }
        if (hypot(cx - s->hole[0], cz - s->hole[1]) < s->hole[2]) continue;            /* the hole */
        if (hi[0] > ex && lo[0] < ex + run && hi[1] > ez0 && lo[1] < ez1) continue;  /* the cutting */
        /* one triangle in ten stretched, one in ten squeezed: the median is still GRASS_M */
        mesh_tri(&s->m[0], p[0], p[1], p[2], GRASS_M * (t % 10 == 3 ? 3 : t % 10 == 7 ? 1.0 / 3 : 1));
        s->ground_tris++;
    }
    for (int i = 0; i < 4; i++) {
        double x0 = (0.5 + 0.08 * i) * W, x1 = (0.58 + 0.08 * i) * W, z = 0.25 * D;
        double a[3] = {x0, ground_height(g, x0, z, h0) - 0.5, z}, b[3] = {x1, ground_height(g, x1, z, h0) - 0.5, z};
        double c[3] = {x1, b[1] + 3, z}, d[3] = {x0, a[1] + 3, z};
        mesh_quad(&s->m[1], a, b, c, d, STONE_M);
        s->wall_tris += 2;
    }
    for (int i = 0; i < 4; i++) {
        double z0 = ez0 + (ez1 - ez0) * i / 4, z1 = ez0 + (ez1 - ez0) * (i + 1) / 4;
        double a[3] = {ex, foot, z0}, b[3] = {ex, foot, z1}, c[3] = {ex + run, foot + rise, z1},
               d[3] = {ex + run, foot + rise, z0};
        mesh_quad(&s->m[2], a, b, c, d, GRAVEL_M); /* a, b, c seen from above: clockwise in (x, z) with y up */
        s->embankment_tris += 2;
    }
    const mesh *mm[2] = {&s->m[0], &s->m[2]};
    for (int k = 0; k < 2; k++)
        for (size_t t = 0; t < mm[k]->ni / 3; t++) {
            double p[3][3];
            for (int j = 0; j < 3; j++)
                for (int d = 0; d < 3; d++) p[j][d] = mm[k]->pos[3 * mm[k]->idx[3 * t + j] + d];
            s->ground_plane += plane_area(p[0], p[1], p[2]);
        }
    for (size_t t = 0; t < s->m[1].ni / 3; t++) {
        double p[3][3];
        for (int j = 0; j < 3; j++)
            for (int d = 0; d < 3; d++) p[j][d] = s->m[1].pos[3 * s->m[1].idx[3 * t + j] + d];
        s->wall_area += tri_area3(p[0], p[1], p[2]);
    }
    /* a box of 12 triangles around the origin (the house and its chimney place it) */
    static const double corner[8][3] = {{-4, 0, -3}, {4, 0, -3}, {4, 0, 3}, {-4, 0, 3},
                                        {-4, 5, -3}, {4, 5, -3}, {4, 5, 3}, {-4, 5, 3}};
    static const int face[6][4] = {{0, 1, 2, 3}, {4, 7, 6, 5}, {0, 4, 5, 1}, {1, 5, 6, 2}, {2, 6, 7, 3}, {3, 7, 4, 0}};
    for (int f = 0; f < 6; f++)
        mesh_quad(&s->m[3], corner[face[f][0]], corner[face[f][1]], corner[face[f][2]], corner[face[f][3]], 1);
    /* a tree: two crossed quads; a bush: one */
    double tx = 0.8 * W, tz = 0.3 * D;
    double t0[4][3] = {{tx - 2, h0, tz}, {tx + 2, h0, tz}, {tx + 2, h0 + 6, tz}, {tx - 2, h0 + 6, tz}};
    double t1[4][3] = {{tx, h0, tz - 2}, {tx, h0, tz + 2}, {tx, h0 + 6, tz + 2}, {tx, h0 + 6, tz - 2}};
    mesh_quad(&s->m[4], t0[0], t0[1], t0[2], t0[3], 1);
    mesh_quad(&s->m[4], t1[0], t1[1], t1[2], t1[3], 1);
    double b0[4][3] = {{tx - 10, h0, tz}, {tx - 8, h0, tz}, {tx - 8, h0 + 1, tz}, {tx - 10, h0 + 1, tz}};
    mesh_quad(&s->m[5], b0[0], b0[1], b0[2], b0[3], 1);
}

static void scenery_free(scenery *s) {
    for (int i = 0; i < 6; i++) mesh_free(&s->m[i]);
}

/* ---- writing it ------------------------------------------------------------------------------- */

static char *base64(const uint8_t *d, size_t n) {
    static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *o = malloc(4 * ((n + 2) / 3) + 1), *p = o;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)d[i] << 16 | (i + 1 < n ? (uint32_t)d[i + 1] << 8 : 0) | (i + 2 < n ? d[i + 2] : 0);
        *p++ = al[v >> 18 & 63], *p++ = al[v >> 12 & 63];
        *p++ = i + 1 < n ? al[v >> 6 & 63] : '=';
        *p++ = i + 2 < n ? al[v & 63] : '=';
    }
    *p = 0;
    return o;
}

static void put32(FILE *f, uint32_t v) {
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    fwrite(b, 1, 4, f);
}

/* glTF 2.0 with `nm` meshes (one primitive each, material i unless mat says) in one buffer, embedded
 * as base64 (.gltf) or as the binary chunk of a .glb (`glb`); nodes and materials as given. */
static bool write_gltf(const char *path, const mesh *const *m, const int *mat, int nm, const char *nodes_json,
                       const char *scene_nodes, const char *materials_json, bool glb) {
    size_t bytes = 0;
    for (int i = 0; i < nm; i++) bytes += m[i]->nv * 20 + m[i]->ni * 4;
    uint8_t *buf = malloc(bytes ? bytes : 1), *p = buf;
    for (int i = 0; i < nm; i++) {
        memcpy(p, m[i]->pos, m[i]->nv * 12), p += m[i]->nv * 12;
        memcpy(p, m[i]->uv, m[i]->nv * 8), p += m[i]->nv * 8;
        memcpy(p, m[i]->idx, m[i]->ni * 4), p += m[i]->ni * 4;
    }
    char *json = NULL;
    size_t json_size = 0;
    FILE *f = open_memstream(&json, &json_size);
    fprintf(f, "{\"asset\":{\"version\":\"2.0\",\"generator\":\"terra test_scenery\"},\n\"buffers\":[{\"byteLength\":%zu",
            bytes);
    if (!glb) {
        char *b64 = base64(buf, bytes);
        fprintf(f, ",\"uri\":\"data:application/octet-stream;base64,%s\"", b64);
        free(b64);
    }
    fprintf(f, "}],\n\"bufferViews\":[");
    size_t off = 0;
    for (int i = 0; i < nm; i++) {
        fprintf(f, "%s{\"buffer\":0,\"byteOffset\":%zu,\"byteLength\":%zu},", i ? "," : "", off, m[i]->nv * 12);
        off += m[i]->nv * 12;
        fprintf(f, "{\"buffer\":0,\"byteOffset\":%zu,\"byteLength\":%zu},", off, m[i]->nv * 8);
        off += m[i]->nv * 8;
        fprintf(f, "{\"buffer\":0,\"byteOffset\":%zu,\"byteLength\":%zu}", off, m[i]->ni * 4);
        off += m[i]->ni * 4;
    }
    fprintf(f, "],\n\"accessors\":[");
    for (int i = 0; i < nm; i++) {
        float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
        for (size_t v = 0; v < m[i]->nv; v++)
            for (int k = 0; k < 3; k++)
                if (isfinite(m[i]->pos[3 * v + k]))
                    lo[k] = fminf(lo[k], m[i]->pos[3 * v + k]), hi[k] = fmaxf(hi[k], m[i]->pos[3 * v + k]);
        fprintf(f,
                "%s{\"bufferView\":%d,\"componentType\":5126,\"count\":%zu,\"type\":\"VEC3\",\"min\":[%.9g,%.9g,%.9g],"
                "\"max\":[%.9g,%.9g,%.9g]},",
                i ? "," : "", 3 * i, m[i]->nv, lo[0], lo[1], lo[2], hi[0], hi[1], hi[2]);
        fprintf(f, "{\"bufferView\":%d,\"componentType\":5126,\"count\":%zu,\"type\":\"VEC2\"},", 3 * i + 1, m[i]->nv);
        fprintf(f, "{\"bufferView\":%d,\"componentType\":5125,\"count\":%zu,\"type\":\"SCALAR\"}", 3 * i + 2, m[i]->ni);
    }
    fprintf(f, "],\n\"meshes\":[");
    for (int i = 0; i < nm; i++)
        fprintf(f,
                "%s{\"primitives\":[{\"attributes\":{\"POSITION\":%d,\"TEXCOORD_0\":%d},\"indices\":%d,"
                "\"material\":%d}]}",
                i ? "," : "", 3 * i, 3 * i + 1, 3 * i + 2, mat ? mat[i] : i);
    fprintf(f, "],\n\"nodes\":%s,\n\"scenes\":[{\"nodes\":%s}],\"scene\":0,\n%s}\n", nodes_json, scene_nodes,
            materials_json);
    while (glb && ftell(f) % 4) fputc(' ', f); /* chunks are 4-byte aligned */
    fclose(f);
    f = fopen(path, "wb");
    bool ok = f != NULL;
    if (ok && glb) {
        size_t padded = (bytes + 3) / 4 * 4;
        fwrite("glTF", 1, 4, f), put32(f, 2), put32(f, (uint32_t)(12 + 8 + json_size + 8 + padded));
        put32(f, (uint32_t)json_size), fwrite("JSON", 1, 4, f), fwrite(json, 1, json_size, f);
        put32(f, (uint32_t)padded), fwrite("BIN", 1, 4, f), fwrite(buf, 1, bytes, f);
        for (size_t i = bytes; i < padded; i++) fputc(0, f);
    } else if (ok) {
        fwrite(json, 1, json_size, f);
    }
    ok = ok && fclose(f) == 0;
    free(json);
    free(buf);
    return ok;
}

static const char *MATERIALS =
    "\"materials\":[\n"
    "{\"name\":\"grass\",\"pbrMetallicRoughness\":{\"baseColorFactor\":[0.25,0.5,0.125,1],"
    "\"baseColorTexture\":{\"index\":0}}},\n"
    "{\"name\":\"stone\",\"pbrMetallicRoughness\":{\"baseColorFactor\":[0.5,0.5,0.5,1]}},\n"
    "{\"name\":\"gravel\",\"pbrMetallicRoughness\":{\"baseColorFactor\":[0.75,0.625,0.375,1]}},\n"
    "{\"name\":\"roof\",\"pbrMetallicRoughness\":{\"baseColorFactor\":[0.75,0.25,0.125,1]}},\n"
    "{\"name\":\"leaves\",\"alphaMode\":\"MASK\",\"pbrMetallicRoughness\":{\"baseColorFactor\":[0.125,0.5,0.125,1]}},\n"
    "{\"name\":\"bush\",\"pbrMetallicRoughness\":{\"baseColorTexture\":{\"index\":1}}}],\n"
    "\"textures\":[{\"source\":0},{\"source\":1}],\n"
    "\"images\":[{\"uri\":\"grass.png\"},{\"uri\":\"bush.png\"}]";

/* The house: a translation of its own (an object on the ground), its chimney a child. */
static void write_gltf_scenery(const char *dir, const scenery *s, char *path, size_t n) {
    char nodes[1024];
    snprintf(nodes, sizeof nodes,
             "[{\"name\":\"ground\",\"mesh\":0},{\"name\":\"wall\",\"mesh\":1},{\"name\":\"embankment\",\"mesh\":2},"
             "{\"name\":\"house\",\"mesh\":3,\"translation\":[%.3f,%.3f,%.3f],\"children\":[5]},"
             "{\"name\":\"tree\",\"mesh\":4},{\"name\":\"chimney\",\"mesh\":3},{\"name\":\"bush\",\"mesh\":5}]",
             0.5 * s->hole[0], s->m[1].pos[1], 0.5 * s->hole[1]);
    const mesh *m[6] = {&s->m[0], &s->m[1], &s->m[2], &s->m[3], &s->m[4], &s->m[5]};
    static const int mat[6] = {0, 1, 2, 3, 4, 5};
    snprintf(path, n, "%s/ground.gltf", dir);
    CHECK(write_gltf(path, m, mat, 6, nodes, "[0,1,2,3,4,6]", MATERIALS, false), "%s", path);
    /* the bush's texture: RGBA, so the bush is a plant; grass.png stays absent */
    uint8_t px[4 * 4 * 4];
    for (int i = 0; i < 64; i++) px[i] = (uint8_t)(i % 4 == 3 ? 128 : 90);
    char png[600];
    snprintf(png, sizeof png, "%s/bush.png", dir);
    CHECK(terra_io_write_png(png, px, 4, 4, 4) == TERRA_OK, "%s", terra_last_error());
}

static void obj_mesh(FILE *f, const char *name, const char *mtl, const mesh *m, size_t *base) {
    fprintf(f, "o %s\nusemtl %s\n", name, mtl);
    for (size_t v = 0; v < m->nv; v++)
        fprintf(f, "v %.9g %.9g %.9g\nvt %.9g %.9g\n", m->pos[3 * v], m->pos[3 * v + 1], m->pos[3 * v + 2], m->uv[2 * v],
                m->uv[2 * v + 1]);
    for (size_t i = 0; i < m->ni; i += 3) {
        size_t a = *base + m->idx[i] + 1, b = *base + m->idx[i + 1] + 1, c = *base + m->idx[i + 2] + 1;
        fprintf(f, "f %zu/%zu %zu/%zu %zu/%zu\n", a, a, b, b, c, c);
    }
    *base += m->nv;
}

/* OBJ+MTL: ground, wall, and the tree with opacity 0.5 (OBJ has no node transforms: no house). It
 * names a second material library that is not there. */
static void write_obj_scenery(const char *dir, const scenery *s, char *path, size_t n) {
    char mtl[600];
    snprintf(mtl, sizeof mtl, "%s/ground.mtl", dir);
    FILE *f = fopen(mtl, "w");
    CHECK(f != NULL, "%s", mtl);
    if (!f) return;
    fprintf(f, "newmtl grass\nKd 0.25 0.5 0.125\nmap_Kd grass.png\n\nnewmtl stone\nKd 0.5 0.5 0.5\n\n"
               "newmtl leaves\nKd 0.125 0.5 0.125\nd 0.5\n");
    CHECK(fclose(f) == 0);
    snprintf(path, n, "%s/ground.obj", dir);
    f = fopen(path, "w");
    CHECK(f != NULL, "%s", path);
    if (!f) return;
    fprintf(f, "# terra test_scenery\nmtllib ground.mtl\nmtllib absent.mtl\n");
    size_t base = 0;
    obj_mesh(f, "ground", "grass", &s->m[0], &base);
    obj_mesh(f, "wall", "stone", &s->m[1], &base);
    obj_mesh(f, "tree", "leaves", &s->m[4], &base);
    CHECK(fclose(f) == 0);
}

static bool write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return false;
    fputs(text, f);
    return fclose(f) == 0;
}

/* The bad files: bad-nan.gltf, bad-empty.obj, bad-garbage.gltf (cut short), bad-assimp.gltf (JSON
 * that is no glTF), bad-objects.gltf (nothing but a transformed node), bad-degenerate.obj (2 good triangles, 2 without area, 1 repeated). */
static void write_bad(const char *dir) {
    char p[600];
    mesh m = {0};
    double a[3] = {0, 0, 0}, b[3] = {10, 0, 0}, c[3] = {10, 0, 10}, d[3] = {0, 1, 10};
    mesh_quad(&m, a, b, c, d, 1);
    const mesh *mm[1] = {&m};
    static const char *one = "\"materials\":[{\"name\":\"grass\"}]";
    snprintf(p, sizeof p, "%s/bad-objects.gltf", dir);
    CHECK(write_gltf(p, mm, NULL, 1, "[{\"name\":\"crate\",\"mesh\":0,\"scale\":[2,2,2]}]", "[0]", one, false));
    m.pos[4] = NAN; /* vertex 1's height */
    snprintf(p, sizeof p, "%s/bad-nan.gltf", dir);
    CHECK(write_gltf(p, mm, NULL, 1, "[{\"name\":\"ground\",\"mesh\":0}]", "[0]", one, false));
    mesh_free(&m);
    snprintf(p, sizeof p, "%s/bad-empty.obj", dir);
    CHECK(write_text(p, ""));
    snprintf(p, sizeof p, "%s/bad-garbage.gltf", dir);
    CHECK(write_text(p, "{\"asset\": {\"version\": \"2.0\"}, \"meshes\": [ {\"primitives\": 7 "));
    snprintf(p, sizeof p, "%s/bad-assimp.gltf", dir); /* JSON, but no glTF */
    CHECK(write_text(p, "{\"asset\": {\"version\": \"2.0\"}, \"meshes\": [ {\"primitives\": 7 } ] }"));
    snprintf(p, sizeof p, "%s/bad-degenerate.obj", dir);
    CHECK(write_text(p, "v 0 0 0\nv 10 0 0\nv 10 1 10\nv 0 1 10\nv 5 0 0\n"
                        "f 1 2 3\nf 1 3 4\nf 3 2 1\nf 1 5 2\nf 4 4 1\n"));
}

/* ---- grounds -------------------------------------------------------------------------------------- */

static void ground_free(ground *g) {
    free(g->xyz);
    free(g->tri);
}

/* A hill on a regular 41 x 41 lattice, 5 m apart. */
static void synthetic_ground(ground *g) {
    g->w = g->h = 41, g->spacing = 5;
    g->nv = 41 * 41, g->nt = 2 * 40 * 40;
    g->xyz = malloc(g->nv * 3 * sizeof(double));
    g->tri = malloc(g->nt * 3 * sizeof(uint32_t));
    for (int j = 0; j < 41; j++)
        for (int i = 0; i < 41; i++) {
            double *p = g->xyz + 3 * (size_t)(j * 41 + i);
            p[0] = i * 5.0, p[2] = j * 5.0, p[1] = 100 + 10 * sin(p[0] / 30) * cos(p[2] / 40);
        }
    size_t t = 0;
    for (int j = 0; j < 40; j++)
        for (int i = 0; i < 40; i++) {
            uint32_t a = (uint32_t)(j * 41 + i), b = a + 1, c = a + 41, d = c + 1;
            uint32_t q[6] = {a, c, b, b, c, d};
            memcpy(g->tri + 3 * t, q, sizeof q);
            t += 2;
        }
}

/* A TIN of St Helens (Terrain-RGB, 256 x 256 samples 6.6 m apart) at 1 m. false: no $TERRA_SHARED. */
static bool dem_ground(ground *g) {
    if (!getenv("TERRA_SHARED")) return false;
    char path[1024];
    terra_raster_desc d = {.path = shared_path("data/dem/st-helens.png", path, sizeof path),
                           .encoding = TERRA_RASTER_TERRAIN_RGB, .spacing_m = 6.6};
    terra_raster r;
    terra_status st = terra_raster_read_isolated(&d, NULL, &r);
    CHECK(st == TERRA_OK, "%s", terra_last_error());
    if (st != TERRA_OK) return false;
    terra_tin_desc td = {.width = r.width, .height = r.height, .heights = r.heights, .max_error = 1};
    terra_tin_mesh m;
    st = terra_tin_build(&td, &m);
    CHECK(st == TERRA_OK, "%s", terra_last_error());
    if (st == TERRA_OK) {
        const terra_tin_level *lv = &m.levels[m.level_count - 1];
        g->w = r.width, g->h = r.height, g->spacing = r.spacing_x;
        g->nv = lv->vertex_count, g->nt = lv->triangle_count;
        g->xyz = malloc(g->nv * 3 * sizeof(double));
        g->tri = malloc(g->nt * 3 * sizeof(uint32_t));
        for (size_t i = 0; i < g->nv; i++) {
            g->xyz[3 * i] = m.xy[2 * i] * g->spacing;
            g->xyz[3 * i + 1] = m.z[i];
            g->xyz[3 * i + 2] = m.xy[2 * i + 1] * g->spacing;
        }
        memcpy(g->tri, lv->triangles, g->nt * 3 * sizeof(uint32_t));
        terra_tin_mesh_free(&m);
    }
    terra_raster_free(&r);
    return st == TERRA_OK;
}

/* ---- checks ----------------------------------------------------------------------------------- */

static const terra_scenery_layer *layer(const terra_scenery *s, const char *name) {
    for (size_t i = 0; i < s->layer_count; i++)
        if (!strcmp(s->layers[i].name, name)) return &s->layers[i];
    return NULL;
}

static const terra_scenery_left_out *left(const terra_scenery *s, const char *name) {
    for (size_t i = 0; i < s->left_out_count; i++)
        if (!strcmp(s->left_out[i].name, name)) return &s->left_out[i];
    return NULL;
}

static int file_state(const terra_scenery *s, const char *dir, const char *name) {
    char p[700];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    for (size_t i = 0; i < s->file_count; i++)
        if (!strcmp(s->files[i].path, p)) return s->files[i].present ? 1 : 0;
    return -1;
}

static void check_layer(const terra_scenery *s, const char *name, double metres, float r, float g, float b,
                        size_t triangles) {
    const terra_scenery_layer *l = layer(s, name);
    CHECK(l != NULL, "no layer %s", name);
    if (!l) return;
    CHECK(fabs(l->metres_per_repeat - metres) <= 1e-4 * metres, "%s: %.9g m a repeat, laid %g", name,
          l->metres_per_repeat, metres);
    CHECK(l->tint[0] == r && l->tint[1] == g && l->tint[2] == b, "%s: tint %g %g %g", name, l->tint[0], l->tint[1],
          l->tint[2]);
    CHECK(l->triangles == triangles, "%s: %llu triangles, %zu laid", name, (unsigned long long)l->triangles, triangles);
}

/* The cut of what was read: the wall laid once, the ground's plane area kept, the hole open. */
static void check_cut(const terra_scenery *s, const scenery *sc, double tile) {
    terra_cook_grid g = {.frame = TERRA_FRAME_LOCAL, .unit = {1, 1}, .tile_units = tile, .depth = 3};
    terra_scenery_cut_desc d = {.grid = &g};
    terra_scenery_cut *cut;
    terra_status st = terra_scenery_cut_build(s, &d, &cut);
    CHECK(st == TERRA_OK, "%s", terra_last_error());
    if (st != TERRA_OK) return;
    terra_scenery_cut_info info;
    terra_scenery_cut_get_info(cut, &info);
    CHECK(info.walls == sc->wall_tris && info.collapsed == 0, "%zu walls, %zu collapsed", info.walls, info.collapsed);
    size_t n;
    const int32_t *xy = terra_scenery_cut_tiles(cut, &n);
    double wall = 0, plane = 0;
    size_t over_hole = 0;
    for (size_t i = 0; i < n; i++) {
        terra_cook_mesh m = {0};
        double err;
        CHECK(terra_scenery_cut_tile(cut, xy[2 * i], xy[2 * i + 1], &m, &err) == TERRA_OK, "%s", terra_last_error());
        for (uint32_t t = 0; t < m.triangle_count; t++) {
            double p[3][3];
            for (int k = 0; k < 3; k++) {
                uint32_t v = m.tri[3 * (size_t)t + k];
                p[k][0] = m.xy[2 * (size_t)v], p[k][1] = m.z[v], p[k][2] = m.xy[2 * (size_t)v + 1];
            }
            double a = plane_area(p[0], p[1], p[2]), a3 = tri_area3(p[0], p[1], p[2]);
            if (a <= 1e-7 * a3) wall += a3;
            else plane += a;
            over_hole += hypot((p[0][0] + p[1][0] + p[2][0]) / 3 - sc->hole[0],
                               (p[0][2] + p[1][2] + p[2][2]) / 3 - sc->hole[1]) < 0.5 * sc->hole[2];
        }
        terra_cook_mesh_free(&m);
    }
    CHECK(fabs(wall - sc->wall_area) <= 1e-5 * sc->wall_area, "walls %.9g m^2 in the tiles, %.9g laid", wall,
          sc->wall_area);
    CHECK(fabs(plane - sc->ground_plane) <= 1e-6 * sc->ground_plane, "ground %.9g m^2 in the tiles, %.9g laid", plane,
          sc->ground_plane);
    CHECK(over_hole == 0, "%zu pieces over the hole", over_hole);
    printf("  cut into %zu tiles of %g m: %zu triangles (%zu walls), %zu vertices (%zu welded)\n", n, tile,
           info.triangles, info.walls, info.vertices, info.welded);
    terra_scenery_cut_free(cut);
}

static char dir[256];

/* The reader process hands over the same ground, field for field, as the read in this process. */
static void check_same(const terra_scenery *a, const terra_scenery *b, const char *what) {
    bool same = a->vertex_count == b->vertex_count && a->triangle_count == b->triangle_count &&
                a->layer_count == b->layer_count && a->left_out_count == b->left_out_count &&
                a->file_count == b->file_count && a->degenerate == b->degenerate && a->duplicate == b->duplicate &&
                a->not_triangles == b->not_triangles && a->out_of_range == b->out_of_range;
    same = same && !memcmp(a->position, b->position, 3 * a->vertex_count * sizeof(double)) &&
           !memcmp(a->material, b->material, a->vertex_count * sizeof(uint16_t)) &&
           !memcmp(a->tri, b->tri, 3 * a->triangle_count * sizeof(uint32_t));
    for (size_t i = 0; same && i < a->layer_count; i++) {
        const terra_scenery_layer *x = &a->layers[i], *y = &b->layers[i];
        same = !strcmp(x->name, y->name) && !memcmp(x->tint, y->tint, sizeof x->tint) &&
               x->metres_per_repeat == y->metres_per_repeat && x->triangles == y->triangles;
    }
    for (size_t i = 0; same && i < a->left_out_count; i++)
        same = !strcmp(a->left_out[i].name, b->left_out[i].name) && a->left_out[i].reason == b->left_out[i].reason &&
               a->left_out[i].triangles == b->left_out[i].triangles;
    for (size_t i = 0; same && i < a->file_count; i++)
        same = !strcmp(a->files[i].path, b->files[i].path) && a->files[i].present == b->files[i].present;
    CHECK(same, "%s: the scenery reader's ground differs from the one read in process", what);
}

/* Reads d in this process and through terra-scenery: the same ground or the same error. */
static terra_status read_both(const terra_scenery_desc *d, terra_scenery *s, char *err, size_t cap) {
    terra_status st = terra_scenery_read(d, s);
    snprintf(err, cap, "%s", st ? terra_last_error() : "");
    terra_scenery iso;
    terra_status ist = terra_scenery_read_isolated(d, NULL, &iso);
    CHECK(ist == st && (st ? !strcmp(terra_last_error(), err) : true), "%s: in process %d '%s', isolated %d '%s'",
          d->path, st, err, ist, ist ? terra_last_error() : "");
    if (st == TERRA_OK && ist == TERRA_OK) check_same(s, &iso, d->path);
    terra_scenery_free(&iso);
    return st;
}

static void check_scenery(const ground *gr, const char *what, double tile) {
    scenery sc;
    make_scenery(gr, &sc);
    char path[600];
    write_gltf_scenery(dir, &sc, path, sizeof path);
    terra_scenery s;
    terra_scenery_desc d = {.path = path};
    char err[1024];
    terra_status st = read_both(&d, &s, err, sizeof err);
    CHECK(st == TERRA_OK, "%s: %s", what, err);
    if (st == TERRA_OK) {
        printf("  %s glTF: %zu ground triangles, %zu vertices, %zu left out, %zu layers, %zu files\n", what,
               s.triangle_count, s.vertex_count, s.left_out_count, s.layer_count, s.file_count);
        CHECK(s.triangle_count == sc.ground_tris + sc.wall_tris + sc.embankment_tris, "%s: %zu ground triangles", what,
              s.triangle_count);
        CHECK(s.degenerate == 0 && s.duplicate == 0 && s.not_triangles == 0);
        CHECK(s.left_out_count == 3, "%s: %zu left out", what, s.left_out_count);
        const terra_scenery_left_out *house = left(&s, "house"), *tree = left(&s, "tree"), *bush = left(&s, "bush");
        CHECK(house && house->reason == TERRA_SCENERY_OBJECT && house->triangles == 24, "the house and its chimney");
        CHECK(tree && tree->reason == TERRA_SCENERY_ALPHA && tree->triangles == 4, "the tree");
        CHECK(bush && bush->reason == TERRA_SCENERY_ALPHA && bush->triangles == 2, "the bush");
        CHECK(!left(&s, "wall") && !left(&s, "embankment") && !left(&s, "ground") && !left(&s, "chimney"));
        CHECK(s.layer_count == 3, "%zu layers", s.layer_count);
        check_layer(&s, "grass", GRASS_M, 0.25f, 0.5f, 0.125f, sc.ground_tris);
        check_layer(&s, "stone", STONE_M, 0.5f, 0.5f, 0.5f, sc.wall_tris);
        check_layer(&s, "gravel", GRAVEL_M, 0.75f, 0.625f, 0.375f, sc.embankment_tris);
        CHECK(s.file_count == 2 && file_state(&s, dir, "grass.png") == 0 && file_state(&s, dir, "bush.png") == 1,
              "%zu files", s.file_count);
        /* vertices carry their layer: the wall's are stone */
        const terra_scenery_layer *stone = layer(&s, "stone");
        size_t stone_vertices = 0;
        for (size_t v = 0; stone && v < s.vertex_count; v++) stone_vertices += &s.layers[s.material[v]] == stone;
        size_t corners = 0; /* the wall's distinct corners (neighbouring panels share two) */
        const float *wp = sc.m[1].pos;
        for (size_t i = 0; i < sc.m[1].nv; i++) {
            bool first = true;
            for (size_t j = 0; j < i && first; j++) first = memcmp(wp + 3 * i, wp + 3 * j, 3 * sizeof(float)) != 0;
            corners += first;
        }
        CHECK(stone_vertices == corners && corners >= 10, "%zu stone vertices, %zu wall corners", stone_vertices,
              corners);
        check_cut(&s, &sc, tile);
        terra_scenery_free(&s);
    }
    write_obj_scenery(dir, &sc, path, sizeof path);
    st = read_both(&d, &s, err, sizeof err);
    CHECK(st == TERRA_OK, "%s: %s", what, err);
    if (st == TERRA_OK) {
        CHECK(s.triangle_count == sc.ground_tris + sc.wall_tris, "%s OBJ: %zu ground triangles", what, s.triangle_count);
        const terra_scenery_left_out *tree = left(&s, "tree");
        CHECK(s.left_out_count == 1 && tree && tree->reason == TERRA_SCENERY_ALPHA && tree->triangles == 4,
              "%s OBJ: the tree (%zu left out)", what, s.left_out_count);
        check_layer(&s, "grass", GRASS_M, 0.25f, 0.5f, 0.125f, sc.ground_tris);
        check_layer(&s, "stone", STONE_M, 0.5f, 0.5f, 0.5f, sc.wall_tris);
        CHECK(file_state(&s, dir, "ground.mtl") == 1 && file_state(&s, dir, "grass.png") == 0, "%zu files",
              s.file_count);
        CHECK(file_state(&s, dir, "absent.mtl") == 0, "the absent library is listed absent");
        terra_scenery_free(&s);
    }
    scenery_free(&sc);
}

static void test_synthetic(void) {
    ground g = {0};
    synthetic_ground(&g);
    check_scenery(&g, "synthetic hill", 32);
    ground_free(&g);
}

static void test_dem(void) {
    ground g = {0};
    if (!dem_ground(&g)) {
        printf("  SKIP: St Helens needs $TERRA_SHARED\n");
        return;
    }
    check_scenery(&g, "St Helens", 256);
    ground_free(&g);
}

static void test_bad_files(void) {
    write_bad(dir);
    char p[600];
    terra_scenery s;
    terra_scenery_desc d = {.path = p};
    struct {
        const char *name, *says;
        terra_status code;
    } bad[] = {
        {"bad-nan.gltf", "is not finite", TERRA_E_FORMAT},
        {"bad-empty.obj", "empty file (0 bytes)", TERRA_E_FORMAT},
        {"bad-garbage.gltf", "JSON does not parse", TERRA_E_FORMAT},
        {"bad-assimp.gltf", "assimp cannot read it", TERRA_E_FORMAT},
        {"bad-objects.gltf", "no ground left", TERRA_E_FORMAT},
        {"not-there.obj", "cannot open", TERRA_E_IO},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, bad[i].name);
        char e[1024];
        terra_status st = read_both(&d, &s, e, sizeof e);
        CHECK(st == bad[i].code && strstr(e, p) && strstr(e, bad[i].says), "%s: %d %s", bad[i].name, st, e);
        CHECK(s.triangle_count == 0 && s.position == NULL);
        printf("  %s: %s\n", bad[i].name, e);
    }
    snprintf(p, sizeof p, "%s/bad-degenerate.obj", dir);
    CHECK(terra_scenery_read(&d, &s) == TERRA_OK, "%s", terra_last_error());
    CHECK(s.triangle_count == 2 && s.degenerate == 2 && s.duplicate == 1, "%zu kept, %zu degenerate, %zu duplicate",
          s.triangle_count, s.degenerate, s.duplicate);
    terra_scenery_free(&s);
    d.path = NULL;
    CHECK(terra_scenery_read(&d, &s) == TERRA_E_INVALID);
    snprintf(p, sizeof p, "%s", dir);
    d.path = p;
    CHECK(terra_scenery_read(&d, &s) == TERRA_E_IO && strstr(terra_last_error(), "not a regular file"));
}

/* quad.glb (the buffer in its binary chunk, an image it names but lacks) and quad.ply (no
 * materials, no texture coordinates) in `out`. */
static void write_formats(const char *out) {
    mesh m = {0};
    double c0[3] = {0, 0, 0}, c1[3] = {10, 0, 0}, c2[3] = {10, 2, 10}, c3[3] = {0, 2, 10};
    mesh_quad(&m, c0, c1, c2, c3, 5);
    const mesh *mm[1] = {&m};
    char p[600];
    snprintf(p, sizeof p, "%s/quad.glb", out);
    CHECK(write_gltf(p, mm, NULL, 1, "[{\"name\":\"field\",\"mesh\":0}]", "[0]",
                     "\"materials\":[{\"name\":\"field\",\"pbrMetallicRoughness\":{\"baseColorTexture\":"
                     "{\"index\":0}}}],\"textures\":[{\"source\":0}],\"images\":[{\"uri\":\"field%20albedo.png\"}]",
                     true));
    mesh_free(&m);
    snprintf(p, sizeof p, "%s/quad.ply", out);
    CHECK(write_text(p, "ply\nformat ascii 1.0\nelement vertex 4\nproperty float x\nproperty float y\n"
                        "property float z\nelement face 2\nproperty list uchar int vertex_indices\nend_header\n"
                        "0 0 0\n10 0 0\n10 1 10\n0 1 10\n3 0 1 2\n3 0 2 3\n"));
}

/* Binary glTF, PLY (one layer, no repeat measured) and the triangle cap. */
static void test_formats(void) {
    write_formats(dir);
    char glb[600];
    snprintf(glb, sizeof glb, "%s/quad.glb", dir);
    terra_scenery g;
    terra_scenery_desc gd = {.path = glb};
    CHECK(terra_scenery_read(&gd, &g) == TERRA_OK, "%s", terra_last_error());
    CHECK(g.triangle_count == 2 && g.layer_count == 1 && fabs(g.layers[0].metres_per_repeat - 5) < 1e-4 &&
              g.file_count == 1 && file_state(&g, dir, "field albedo.png") == 0,
          "glb: %zu triangles, %zu layers, %zu files", g.triangle_count, g.layer_count, g.file_count);
    terra_scenery_free(&g);

    char p[600];
    snprintf(p, sizeof p, "%s/quad.ply", dir);
    terra_scenery s;
    terra_scenery_desc d = {.path = p};
    CHECK(terra_scenery_read(&d, &s) == TERRA_OK, "%s", terra_last_error());
    CHECK(s.triangle_count == 2 && s.vertex_count == 4 && s.layer_count == 1 && s.layers[0].metres_per_repeat == 0 &&
              s.layers[0].triangles == 2 && s.left_out_count == 0 && s.file_count == 0,
          "%zu triangles, %zu layers", s.triangle_count, s.layer_count);
    terra_scenery_free(&s);
    d.max_triangles = 1;
    CHECK(terra_scenery_read(&d, &s) == TERRA_E_CAPACITY && strstr(terra_last_error(), "more than 1 ground triangles"),
          "%s", terra_last_error());
}


/* ---- hostile sceneries ------------------------------------------------------------------------- */

static uint64_t rng_state = 0x5ce7e12fu;
static uint64_t rnd(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The 189-byte ASCII PLY (2,000,000,000 vertices declared, 3 there), its binary twin, and
 * an OFF file declaring as many. */
static const char PLY_BOMB[] = "ply\nformat ascii 1.0\nelement vertex 2000000000\nproperty float x\nproperty float y\n"
                               "property float z\nelement face 1\nproperty list uchar int vertex_indices\nend_header\n"
                               "0 0 0\n1 0 0\n0 0 1\n3 0 1 2\n";

/* A quad (two triangles, 10 m) for the graphs and URIs below. */
static void quad_mesh(mesh *m) {
    double a[3] = {0, 0, 0}, b[3] = {10, 0, 0}, c[3] = {10, 1, 10}, d[3] = {0, 1, 10};
    memset(m, 0, sizeof *m);
    mesh_quad(m, a, b, c, d, 5);
}

/* nodes[0] -> nodes[1] -> ... -> nodes[n - 1], which holds the quad: a chain n - 1 levels deep. */
static char *chain_json(int n) {
    char *j = malloc((size_t)n * 48 + 16), *p = j;
    p += sprintf(p, "[");
    for (int i = 0; i < n; i++)
        p += i + 1 < n ? sprintf(p, "%s{\"name\":\"n%d\",\"children\":[%d]}", i ? "," : "", i, i + 1)
                       : sprintf(p, "%s{\"name\":\"n%d\",\"mesh\":0}", i ? "," : "", i);
    sprintf(p, "]");
    return j;
}

/* A COLLADA scene whose one triangle sits n nodes deep (assimp builds its node tree itself). */
static bool write_deep_dae(const char *path, int n) {
    FILE *f = fopen(path, "w");
    if (!f) return false;
    fputs("<?xml version=\"1.0\"?><COLLADA xmlns=\"http://www.collada.org/2005/11/COLLADASchema\" version=\"1.4.1\">"
          "<library_geometries><geometry id=\"g\"><mesh><source id=\"p\"><float_array id=\"pa\" count=\"9\">"
          "0 0 0 1 0 0 0 0 1</float_array><technique_common><accessor source=\"#pa\" count=\"3\" stride=\"3\">"
          "<param name=\"X\" type=\"float\"/><param name=\"Y\" type=\"float\"/><param name=\"Z\" type=\"float\"/>"
          "</accessor></technique_common></source><vertices id=\"v\"><input semantic=\"POSITION\" source=\"#p\"/>"
          "</vertices><triangles count=\"1\"><input semantic=\"VERTEX\" source=\"#v\" offset=\"0\"/><p>0 1 2</p>"
          "</triangles></mesh></geometry></library_geometries><library_visual_scenes><visual_scene id=\"s\">",
          f);
    for (int i = 0; i < n; i++) fputs("<node>", f);
    fputs("<instance_geometry url=\"#g\"/>", f);
    for (int i = 0; i < n; i++) fputs("</node>", f);
    fputs("</visual_scene></library_visual_scenes><scene><instance_visual_scene url=\"#s\"/></scene></COLLADA>\n", f);
    return fclose(f) == 0;
}

/* The hostile files CLI tests and fuzz seeds use too: bomb-ascii.ply, bomb-binary.ply, bomb.off,
 * bomb-format.ply (a second format line), chain-20000.gltf (the 20,000-deep chain),
 * cycle.gltf, out-of-range.gltf (2 triangles, one with an index past the 4 vertices). */
static void write_hostile(const char *out) {
    char p[600];
    snprintf(p, sizeof p, "%s/bomb-ascii.ply", out);
    CHECK(write_text(p, PLY_BOMB) && sizeof PLY_BOMB - 1 == 189);
    snprintf(p, sizeof p, "%s/bomb-binary.ply", out);
    FILE *f = fopen(p, "wb");
    CHECK(f != NULL);
    if (f) {
        fputs("ply\nformat binary_little_endian 1.0\nelement vertex 2000000000\nproperty float x\nproperty float y\n"
              "property float z\nelement face 1\nproperty list uchar int vertex_indices\nend_header\n", f);
        const float v[9] = {0, 0, 0, 1, 0, 0, 0, 0, 1};
        const uint8_t three = 3;
        const int32_t idx[3] = {0, 1, 2};
        fwrite(v, sizeof v, 1, f), fwrite(&three, 1, 1, f), fwrite(idx, sizeof idx, 1, f);
        CHECK(fclose(f) == 0);
    }
    snprintf(p, sizeof p, "%s/bomb.off", out);
    CHECK(write_text(p, "OFF\n2000000000 1 0\n0 0 0\n1 0 0\n0 0 1\n3 0 1 2\n"));
    /* an ASCII element takes the whole body and its last value's slack; a second format line then
     * said binary (no slack) and the room left wrapped below zero, passing any count */
    snprintf(p, sizeof p, "%s/bomb-format.ply", out);
    CHECK(write_text(p, "ply\nformat ascii 1.0\nelement a 1\nproperty float x\nelement b 0\n"
                        "format binary_little_endian 1.0\nelement vertex 2000000000\nproperty float x\nend_header\n1"));
    mesh m;
    quad_mesh(&m);
    const mesh *mm[1] = {&m};
    static const char *one = "\"materials\":[{\"name\":\"grass\"}]";
    char *chain = chain_json(20000);
    snprintf(p, sizeof p, "%s/chain-20000.gltf", out);
    CHECK(write_gltf(p, mm, NULL, 1, chain, "[0]", one, false));
    free(chain);
    snprintf(p, sizeof p, "%s/cycle.gltf", out);
    CHECK(write_gltf(p, mm, NULL, 1, "[{\"mesh\":0},{\"children\":[2]},{\"children\":[1]}]", "[0]", one, false));
    m.idx[5] = 7; /* the second triangle's last corner: there are 4 vertices */
    snprintf(p, sizeof p, "%s/out-of-range.gltf", out);
    CHECK(write_gltf(p, mm, NULL, 1, "[{\"mesh\":0}]", "[0]", one, false));
    mesh_free(&m);
}

/* A read that must fail with `code` and a message naming the file and saying `says`: through the
 * reader process first (under a 256 MiB budget, so a check that let a bomb through would end there,
 * not in this test), then in this process. */
static void check_refused(const char *path, terra_status code, const char *says) {
    terra_scenery s;
    terra_scenery_desc d = {.path = path, .max_bytes = (size_t)256 << 20};
    terra_status st = terra_scenery_read_isolated(&d, NULL, &s);
    const char *e = terra_last_error();
    CHECK(st == code && strstr(e, path) && strstr(e, says), "%s: %d '%s', wanted %d '%s'", path, st, e, code, says);
    printf("  %s\n", e);
    if (st != code) return;
    char err[1024];
    CHECK(read_both(&d, &s, err, sizeof err) == code, "%s: in process: %s", path, err);
}

/* Counts no file can hold, refused from the header before anything of their size is allocated. */
static void test_count_bombs(void) {
    write_hostile(dir);
    char p[600];
    snprintf(p, sizeof p, "%s/bomb-ascii.ply", dir);
    check_refused(p, TERRA_E_CORRUPT, "PLY header line 3: element 'vertex' declares 2000000000 items of at least 6");
    snprintf(p, sizeof p, "%s/bomb-binary.ply", dir);
    check_refused(p, TERRA_E_CORRUPT, "PLY header line 3: element 'vertex' declares 2000000000 items of at least 12");
    snprintf(p, sizeof p, "%s/bomb.off", dir);
    check_refused(p, TERRA_E_CORRUPT, "declares 2000000000 vertices and 1 faces");
    snprintf(p, sizeof p, "%s/bomb-format.ply", dir);
    check_refused(p, TERRA_E_CORRUPT, "PLY header line 7: element 'vertex' declares 2000000000 items of at least 2 bytes "
                                      "each (ASCII), more than the 1 bytes");
}

/* Random PLY (ASCII or binary, random property types, lists, spacing, comments) and OFF files as
 * written are never refused; with one element's count raised they are refused exactly when the
 * least bytes the counts need (ASCII 2 a property, binary the scalars' and list counts' sizes, OFF 2
 * a line; one less at the file's end in text) pass the bytes after the header, naming the element
 * and its line. */
static void test_count_property(void) {
    static const char *types[] = {"char", "uchar", "short", "ushort", "int", "uint", "float", "double",
                                  "int8", "uint8", "int16", "uint16", "int32", "uint32", "float32", "float64"};
    static const int sizes[] = {1, 1, 2, 2, 4, 4, 4, 8, 1, 1, 2, 2, 4, 4, 4, 8};
    int accepted = 0, refused = 0;
    for (int c = 0; c < 3000; c++) {
        const int kind = (int)(rnd() % 3); /* 0 ASCII PLY, 1 binary PLY, 2 OFF */
        char *head = NULL, *body = NULL;
        size_t head_n = 0, body_n = 0;
        FILE *b = open_memstream(&body, &body_n);
        int ne = kind == 2 ? 2 : 1 + (int)(rnd() % 3), line[3] = {0};
        uint64_t count[3], least[3];
        int props[3], type[3][4];
        bool list[3][4];
        for (int e = 0; e < ne; e++) {
            count[e] = rnd() % 6, props[e] = 1 + (int)(rnd() % 4), least[e] = 0;
            for (int k = 0; k < props[e]; k++) {
                type[e][k] = (int)(rnd() % 16), list[e][k] = kind != 2 && rnd() % 4 == 0;
                least[e] += kind == 1 ? (uint64_t)sizes[type[e][k]] : 2;
            }
            if (kind == 2) least[e] = 2;
        }
        for (int e = 0; e < ne; e++) /* the elements' data */
            for (uint64_t i = 0; i < count[e]; i++) {
                if (kind == 2) {
                    fprintf(b, "%s%d%s", rnd() % 2 ? " " : "", (int)(rnd() % 100), rnd() % 2 ? " 1 2\n" : "\n");
                    continue;
                }
                for (int k = 0; k < props[e]; k++) {
                    int items = list[e][k] ? (int)(rnd() % 3) : 0;
                    if (kind == 0) {
                        fprintf(b, "%d", (int)(rnd() % 3 ? rnd() % 10 : rnd() % 100000));
                        for (int t = 0; t < items; t++) fprintf(b, " %d", (int)(rnd() % 10));
                        fputs(k + 1 < props[e] ? (rnd() % 4 ? " " : "  ") : rnd() % 4 ? "\n" : "\r\n", b);
                    } else {
                        uint8_t zero[8] = {0};
                        fwrite(zero, (size_t)sizes[type[e][k]], 1, b); /* a list's count: 0 items */
                    }
                }
            }
        fclose(b);
        for (int raise = 0; raise < 2; raise++) {
            int which = (int)(rnd() % (unsigned)ne);
            uint64_t declared[3] = {count[0], count[1], count[2]};
            if (raise) declared[which] += 1 + rnd() % (2 * body_n / least[which] + 2);
            FILE *h = open_memstream(&head, &head_n);
            if (kind == 2) {
                fprintf(h, "%s%sOFF\n%s%llu %llu 0\n", rnd() % 2 ? "" : "# made by test_scenery\n",
                        rnd() % 2 ? "" : "C", rnd() % 2 ? "" : "# counts\n", (unsigned long long)declared[0],
                        (unsigned long long)declared[1]);
            } else {
                int ln = 0;
                fprintf(h, "ply\nformat %s 1.0\n", kind == 0 ? "ascii" : "binary_little_endian"), ln = 2;
                if (rnd() % 2) fprintf(h, "comment from test_scenery\n"), ln++;
                for (int e = 0; e < ne; e++) {
                    fprintf(h, "element e%d %llu\n", e, (unsigned long long)declared[e]), line[e] = ++ln;
                    for (int k = 0; k < props[e]; k++, ln++)
                        if (list[e][k]) fprintf(h, "property list %s int p%d\n", types[type[e][k]], k);
                        else fprintf(h, "property %s p%d\n", types[type[e][k]], k);
                }
                fputs("end_header\n", h);
            }
            fclose(h);
            size_t n = head_n + body_n;
            uint8_t *file = malloc(n + 1);
            memcpy(file, head, head_n), memcpy(file + head_n, body, body_n);
            const char *name = kind == 2 ? "p.off" : "p.ply";
            uint64_t need = 0, slack = kind != 1, after = body_n + (kind == 2); /* OFF: from the counts' end */
            bool over = false;
            int first_over = -1;
            for (int e = 0; e < ne; e++) {
                need += declared[e] * least[e];
                if (!over && need > after + slack) over = true, first_over = e;
            }
            terra_scenery_declared dd;
            terra_status st = terra_scenery_check_head(name, file, n, n, TERRA_SCENERY_MAX_DEPTH, &dd);
            terra_scenery_declared_free(&dd);
            CHECK(st == (over ? TERRA_E_CORRUPT : TERRA_OK),
                  "case %d (%s, raised %d): %s, %zu bytes after the header, %llu needed", c, name, raise,
                  st ? terra_last_error() : "accepted", body_n, (unsigned long long)need);
            if (over && kind != 2 && st == TERRA_E_CORRUPT) {
                char place[64];
                snprintf(place, sizeof place, "line %d: element 'e%d'", line[first_over], first_over);
                CHECK(strstr(terra_last_error(), place), "case %d: %s (wanted %s)", c, terra_last_error(), place);
            }
            CHECK(raise || !over, "case %d: the file as written needs more than it holds", c);
            accepted += !over, refused += over;
            free(file);
            free(head);
        }
        free(body);
    }
    printf("  %d headers accepted, %d refused\n", accepted, refused);
    CHECK(accepted > 3000 && refused > 1000, "%d accepted, %d refused", accepted, refused);
}

/* glTF node graphs: depth up to TERRA_SCENERY_MAX_DEPTH read, the 20,000-deep chain and
 * every graph that is not a forest refused before assimp recurses into it; a deep COLLADA tree
 * (assimp builds it) refused after the import. */
static void test_node_graphs(void) {
    mesh m;
    quad_mesh(&m);
    const mesh *mm[1] = {&m};
    static const char *one = "\"materials\":[{\"name\":\"grass\"}]";
    char p[600];
    snprintf(p, sizeof p, "%s/chain.gltf", dir);
    char *chain = chain_json(TERRA_SCENERY_MAX_DEPTH + 1);
    CHECK(write_gltf(p, mm, NULL, 1, chain, "[0]", one, false));
    free(chain);
    terra_scenery s;
    terra_scenery_desc d = {.path = p};
    char err[1024];
    CHECK(read_both(&d, &s, err, sizeof err) == TERRA_OK && s.triangle_count == 2, "a chain %d deep: %s",
          TERRA_SCENERY_MAX_DEPTH, err);
    terra_scenery_free(&s);
    chain = chain_json(TERRA_SCENERY_MAX_DEPTH + 2);
    CHECK(write_gltf(p, mm, NULL, 1, chain, "[0]", one, false));
    free(chain);
    check_refused(p, TERRA_E_UNSUPPORTED, "node 1001 ('n1001') is 1001 levels below its root");
    snprintf(p, sizeof p, "%s/chain-20000.gltf", dir); /* written by test_count_bombs */
    check_refused(p, TERRA_E_UNSUPPORTED, "node 1001 ('n1001') is 1001 levels below its root");
    struct {
        const char *nodes, *roots, *says;
    } bad[] = {
        {"[{\"mesh\":0},{\"children\":[2]},{\"children\":[1]}]", "[0]", "the nodes form a cycle through node"},
        {"[{\"children\":[1]},{\"children\":[2]},{\"children\":[1],\"mesh\":0}]", "[0]",
         "node 1 is a child of node 0 and again of node 2"},
        {"[{\"children\":[1,1]},{\"mesh\":0}]", "[0]", "node 1 is a child of node 0 and again of node 0"},
        {"[{\"children\":[0],\"mesh\":0}]", "[0]", "node 0 is its own child"},
        {"[{\"children\":[5],\"mesh\":0}]", "[0]", "nodes[0].children[0] is not one of the 1 nodes"},
        {"[{\"children\":[1.5]},{\"mesh\":0}]", "[0]", "nodes[0].children[0] is not one of the 2 nodes"},
        {"[{\"children\":[1]},{\"mesh\":0}]", "[0,1]", "scenes[0].nodes[1]: node 1 is a root and a child of node 0"},
        {"[{\"mesh\":0}]", "[0,0]", "scenes[0].nodes[1]: node 0 is named twice"},
        {"[{\"mesh\":0}]", "[3]", "scenes[0].nodes[0] is not one of the 1 nodes"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(p, sizeof p, "%s/graph-%zu.gltf", dir, i);
        CHECK(write_gltf(p, mm, NULL, 1, bad[i].nodes, bad[i].roots, one, false));
        check_refused(p, TERRA_E_CORRUPT, bad[i].says);
    }
    /* a glTF 1.0 node graph names nodes by id: the same rules */
    snprintf(p, sizeof p, "%s/graph-v1.gltf", dir);
    CHECK(write_text(p, "{\"asset\":{\"version\":\"1.0\"},\"nodes\":{\"a\":{\"children\":[\"b\"]},\"b\":{\"children\":"
                        "[\"a\"]}},\"scenes\":{\"s\":{\"nodes\":[\"a\"]}},\"scene\":\"s\"}"));
    check_refused(p, TERRA_E_CORRUPT, "scenes.s.nodes[0]: node 0 is a root and a child of node 1");
    mesh_free(&m);
    snprintf(p, sizeof p, "%s/deep.dae", dir);
    CHECK(write_deep_dae(p, TERRA_SCENERY_MAX_DEPTH + 500));
    check_refused(p, TERRA_E_UNSUPPORTED, "is more than 1000 levels below the scene's root");
}

/* A quad's buffer as a file: 4 positions, 6 indices (72 bytes). */
static void write_quad_bin(const char *path) {
    static const float pos[12] = {0, 0, 0, 10, 0, 0, 10, 1, 10, 0, 1, 10};
    static const uint32_t idx[6] = {0, 1, 2, 0, 2, 3};
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "%s", path);
    if (f) {
        fwrite(pos, sizeof pos, 1, f), fwrite(idx, sizeof idx, 1, f);
        CHECK(fclose(f) == 0);
    }
}

/* A one-quad glTF whose buffer (write_quad_bin's) is the file `uri` names; `images` adds members. */
static void write_uri_gltf(const char *path, const char *uri, const char *images) {
    char *json = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&json, &n);
    fprintf(f,
            "{\"asset\":{\"version\":\"2.0\"},\"buffers\":[{\"byteLength\":72,\"uri\":\"%s\"}],\"bufferViews\":["
            "{\"buffer\":0,\"byteLength\":48},{\"buffer\":0,\"byteOffset\":48,\"byteLength\":24}],\"accessors\":["
            "{\"bufferView\":0,\"componentType\":5126,\"count\":4,\"type\":\"VEC3\",\"min\":[0,0,0],\"max\":[10,1,10]},"
            "{\"bufferView\":1,\"componentType\":5125,\"count\":6,\"type\":\"SCALAR\"}],\"meshes\":[{\"primitives\":["
            "{\"attributes\":{\"POSITION\":0},\"indices\":1}]}],\"nodes\":[{\"mesh\":0}],\"scenes\":[{\"nodes\":[0]}],"
            "\"scene\":0%s}",
            uri, images ? images : "");
    fclose(f);
    CHECK(write_text(path, json), "%s", path);
    free(json);
}

/* Buffer and image URIs stay in the scene's folder: those that leave it (the files they name are
 * there, valid buffers: read, they would cook) are refused before assimp opens anything. */
static void test_uris(void) {
    char folder[600], p[700], bin[700];
    snprintf(folder, sizeof folder, "%s/scene", dir);
    mkdir(folder, 0755);
    snprintf(p, sizeof p, "%s/sub", folder);
    mkdir(p, 0755);
    snprintf(bin, sizeof bin, "%s/outside.bin", dir);
    write_quad_bin(bin);
    char abs_bin[PATH_MAX + 16];
    CHECK(getcwd(abs_bin, PATH_MAX) != NULL);
    strcat(abs_bin, "/"), strcat(abs_bin, bin);
    snprintf(bin, sizeof bin, "%s/buf.bin", folder);
    write_quad_bin(bin);
    snprintf(p, sizeof p, "%s/scene.gltf", folder);
    char file_uri[PATH_MAX + 32];
    snprintf(file_uri, sizeof file_uri, "file://%s", abs_bin);
    struct {
        const char *uri, *says;
    } bad[] = {
        {"../outside.bin", "climbs out with \"..\""},
        {"sub/../../outside.bin", "climbs out with \"..\""},
        {"%2e%2e/outside.bin", "climbs out with \"..\""},
        {"sub/%2E%2E%2f..%2Foutside.bin", "climbs out with \"..\""},
        {"..\\\\outside.bin", "climbs out with \"..\""},
        {abs_bin, "is an absolute path"},
        {file_uri, "names a scheme or a drive"},
        {"C:/outside.bin", "names a scheme or a drive"},
        {"buf.bin%00.png", "holds a NUL"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        write_uri_gltf(p, bad[i].uri, NULL);
        check_refused(p, TERRA_E_UNSUPPORTED, bad[i].says);
        CHECK(strstr(terra_last_error(), "buffers[0].uri"), "%s", terra_last_error());
    }
    write_uri_gltf(p, "buf.bin", ",\"images\":[{\"uri\":\"../outside.png\"}]");
    check_refused(p, TERRA_E_UNSUPPORTED, "images[0].uri '../outside.png' climbs out");
    const char *good[] = {"buf.bin", "./buf.bin", "sub/../buf.bin", "sub/.././buf.bin"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        write_uri_gltf(p, good[i], NULL);
        terra_scenery s;
        terra_scenery_desc d = {.path = p};
        char err[1024];
        CHECK(read_both(&d, &s, err, sizeof err) == TERRA_OK && s.triangle_count == 2, "'%s': %s", good[i], err);
        terra_scenery_free(&s);
    }
}

/* The gate every open goes through: a symlink out of the folder, a FIFO, a folder, files past the
 * budget, in a glTF's buffers, an OBJ's material library and an MTL's textures, and the scene itself
 * a FIFO. Nothing blocks (a blocking open of a FIFO would wait here until the alarm). */
static void test_gate(void) {
    alarm(300);
    char folder[600], p[700], link[700], fifo[700];
    snprintf(folder, sizeof folder, "%s/scene", dir); /* test_uris made it, buf.bin and ../outside.bin */
    snprintf(p, sizeof p, "%s/gate.gltf", folder);
    snprintf(link, sizeof link, "%s/link.bin", folder);
    CHECK(symlink("../outside.bin", link) == 0, "symlink %s", link);
    write_uri_gltf(p, "link.bin", NULL);
    check_refused(p, TERRA_E_UNSUPPORTED, "link.bin, which resolves to ");
    CHECK(strstr(terra_last_error(), "outside.bin, outside the scene's folder"), "%s", terra_last_error());
    snprintf(link, sizeof link, "%s/alias.bin", folder); /* a link that stays inside is fine */
    CHECK(symlink("sub/../buf.bin", link) == 0, "symlink %s", link);
    write_uri_gltf(p, "alias.bin", NULL);
    terra_scenery s;
    terra_scenery_desc d = {.path = p};
    char err[1024];
    CHECK(read_both(&d, &s, err, sizeof err) == TERRA_OK && s.triangle_count == 2, "%s", err);
    terra_scenery_free(&s);
    snprintf(fifo, sizeof fifo, "%s/fifo.bin", folder);
    CHECK(mkfifo(fifo, 0644) == 0, "mkfifo %s", fifo);
    write_uri_gltf(p, "fifo.bin", NULL);
    check_refused(p, TERRA_E_UNSUPPORTED, "fifo.bin, which is a FIFO, not a regular file");
    write_uri_gltf(p, "sub", NULL);
    check_refused(p, TERRA_E_UNSUPPORTED, "sub, which is a folder, not a regular file");
    snprintf(p, sizeof p, "%s/fifo.gltf", folder);
    CHECK(mkfifo(p, 0644) == 0, "mkfifo %s", p);
    check_refused(p, TERRA_E_IO, "not a regular file");
    /* an OBJ: its material library a FIFO; a texture outside the folder; a texture a FIFO */
    snprintf(p, sizeof p, "%s/fifo.mtl", folder);
    CHECK(mkfifo(p, 0644) == 0, "mkfifo %s", p);
    snprintf(p, sizeof p, "%s/tri.obj", folder);
    CHECK(write_text(p, "mtllib fifo.mtl\nv 0 0 0\nv 1 0 0\nv 0 0 1\nf 1 2 3\n"));
    check_refused(p, TERRA_E_UNSUPPORTED, "fifo.mtl, which is a FIFO");
    const char *textures[2][2] = {{"../outside.bin", "outside the scene's folder"}, {"fifo.bin", "which is a FIFO"}};
    for (int i = 0; i < 2; i++) {
        char mtl[700], text[300];
        snprintf(mtl, sizeof mtl, "%s/tex.mtl", folder);
        snprintf(text, sizeof text, "newmtl a\nmap_Kd %s\n", textures[i][0]);
        CHECK(write_text(mtl, text));
        CHECK(write_text(p, "mtllib tex.mtl\nusemtl a\nv 0 0 0\nv 1 0 0\nv 0 0 1\nf 1 2 3\n"));
        check_refused(p, TERRA_E_UNSUPPORTED, textures[i][1]);
    }
    /* the files read add up past the budget: a 2 MiB OBJ (comments) under 1 MiB */
    FILE *f = fopen(p, "w");
    CHECK(f != NULL);
    if (f) {
        for (int i = 0; i < 32768; i++) fprintf(f, "# %061d\n", i);
        fputs("v 0 0 0\nv 1 0 0\nv 0 0 1\nf 1 2 3\n", f);
        CHECK(fclose(f) == 0);
    }
    d.max_bytes = (size_t)1 << 20;
    CHECK(terra_scenery_read(&d, &s) == TERRA_E_CAPACITY &&
              strstr(terra_last_error(), "the files it reads add up to more than the memory budget of 1.0 MiB"),
          "%s", terra_last_error());
    d.max_bytes = (size_t)3 << 20; /* read twice, by assimp and by terra for its mtllib lines: counted once */
    CHECK(terra_scenery_read(&d, &s) == TERRA_OK, "%s", terra_last_error());
    terra_scenery_free(&s);
    /* a .gltf read four times (terra's check, assimp's probe and parse, terra's look for the files it
     * names) is counted once: 0.38 MiB reads under 1 MiB; 1.2 MiB (with buf.bin) does not */
    snprintf(p, sizeof p, "%s/big.gltf", folder);
    d.max_bytes = (size_t)1 << 20;
    for (int big = 0; big < 2; big++) {
        const size_t pad = big ? 1200000 : 400000;
        char *extras = malloc(pad + 32);
        CHECK(extras != NULL);
        if (!extras) break;
        memcpy(extras, ",\"extras\":{\"pad\":\"", 18);
        memset(extras + 18, 'x', pad);
        strcpy(extras + 18 + pad, "\"}");
        write_uri_gltf(p, "buf.bin", extras);
        free(extras);
        const terra_status st = terra_scenery_read(&d, &s);
        if (big)
            CHECK(st == TERRA_E_CAPACITY && strstr(terra_last_error(), "the memory budget of 1.0 MiB"), "%s",
                  terra_last_error());
        else
            CHECK(st == TERRA_OK && s.triangle_count == 2, "%s", terra_last_error());
        terra_scenery_free(&s);
    }
    alarm(0);
}

/* assimp drops a glTF triangle with an index past its vertices: random grids with some corrupted
 * are read with the others, and every dropped one counted (in the reader process too); a mesh no
 * node uses is not loaded by assimp and not counted. */
static void test_out_of_range(void) {
    char p[600];
    snprintf(p, sizeof p, "%s/range.gltf", dir);
    for (int c = 0; c < 40; c++) {
        mesh m[2] = {{0}, {0}};
        int w = 2 + (int)(rnd() % 6), h = 2 + (int)(rnd() % 6);
        for (int k = 0; k < 2; k++)
            for (int j = 0; j < h; j++)
                for (int i = 0; i < w; i++) {
                    double a[3] = {i, 0.1 * k, j}, b[3] = {i + 1, 0.1 * k, j}, cc[3] = {i + 1, 0.1 * k + 0.5, j + 1},
                           dd[3] = {i, 0.1 * k + 0.5, j + 1};
                    mesh_quad(&m[k], a, b, cc, dd, 1);
                }
        size_t tris = m[0].ni / 3, bad = 0;
        for (size_t t = 0; t < tris; t++)
            if (rnd() % 4 == 0) m[0].idx[3 * t + rnd() % 3] = (uint32_t)(m[0].nv + rnd() % 1000), bad++;
        if (bad == tris) m[0].idx[0] = 0, m[0].idx[1] = 1, m[0].idx[2] = 2, bad--; /* keep one good one */
        for (size_t t = 0; t < m[1].ni / 3; t += 2) m[1].idx[3 * t] = (uint32_t)m[1].nv; /* never loaded */
        const mesh *mm[2] = {&m[0], &m[1]};
        CHECK(write_gltf(p, mm, NULL, 2, "[{\"mesh\":0}]", "[0]",
                         "\"materials\":[{\"name\":\"a\"},{\"name\":\"b\"}]", false));
        terra_scenery s;
        terra_scenery_desc d = {.path = p};
        char err[1024];
        terra_status st = read_both(&d, &s, err, sizeof err);
        CHECK(st == TERRA_OK && s.out_of_range == bad && s.triangle_count + s.duplicate == tris - bad,
              "case %d: %s; %zu of %zu bad, %zu counted, %zu kept", c, err, bad, tris, s.out_of_range,
              s.triangle_count);
        terra_scenery_free(&s);
        mesh_free(&m[0]), mesh_free(&m[1]);
    }
}

/* The reader process runs within the memory budget: an OBJ whose reading takes ~10 MiB (files of
 * 0.7 MiB) is refused under 4 MiB, read under the default. */
static void test_budget(void) {
    char p[600];
    snprintf(p, sizeof p, "%s/grid.obj", dir);
    FILE *f = fopen(p, "w");
    CHECK(f != NULL);
    if (!f) return;
    const int n = 120;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < n; i++) fprintf(f, "v %d %d %d\n", i, (i * j) % 7, j);
    for (int j = 0; j + 1 < n; j++)
        for (int i = 0; i + 1 < n; i++) {
            int a = j * n + i + 1;
            fprintf(f, "f %d %d %d\nf %d %d %d\n", a, a + n, a + 1, a + 1, a + n, a + n + 1);
        }
    CHECK(fclose(f) == 0);
    terra_scenery s;
    terra_scenery_desc d = {.path = p};
    CHECK(terra_scenery_read_isolated(&d, NULL, &s) == TERRA_OK && s.triangle_count == 2u * (n - 1) * (n - 1), "%s",
          terra_last_error());
    terra_scenery_free(&s);
#ifdef UNDER_SANITIZER
    printf("  SKIP: the reader's address-space limit (a sanitizer build runs it unlimited)\n");
#else
    d.max_bytes = (size_t)4 << 20;
    CHECK(terra_scenery_read_isolated(&d, NULL, &s) == TERRA_E_CAPACITY &&
              strstr(terra_last_error(), "reading it takes more than the memory budget of 4.0 MiB") &&
              strstr(terra_last_error(), p),
          "%s", terra_last_error());
    printf("  %s\n", terra_last_error());
#endif
}

/* A crash in the reader stays there: a reader that dies of SIGSEGV, and assimp itself on a
 * COLLADA tree 200,000 nodes deep (its recursion runs out of stack). */
static void test_crash(void) {
    char p[600], fake[600];
    snprintf(p, sizeof p, "%s/deep-200000.dae", dir);
    CHECK(write_deep_dae(p, 200000));
    snprintf(fake, sizeof fake, "%s/fake-reader.sh", dir);
    CHECK(write_text(fake, "#!/bin/sh\nkill -SEGV $$\n") && chmod(fake, 0755) == 0);
    terra_scenery s;
    terra_scenery_desc d = {.path = p};
    char want[700];
    snprintf(want, sizeof want, "the scenery reader crashed on %s (signal 11, ", p);
    CHECK(terra_scenery_read_isolated(&d, fake, &s) == TERRA_E_IO && strstr(terra_last_error(), want), "%s",
          terra_last_error());
    terra_status st = terra_scenery_read_isolated(&d, NULL, &s);
    CHECK(st != TERRA_OK && strstr(terra_last_error(), p), "%d %s", st, terra_last_error());
#ifndef UNDER_SANITIZER /* there the sanitizer reports the overflow and exits */
    CHECK(strstr(terra_last_error(), want), "%s", terra_last_error());
#endif
    printf("  %.300s\n", terra_last_error());
}

/* --write DIR: the sceneries, the bad, the other formats' and the hostile files, for terra check,
 * the CLI tests and the fuzz seeds. */
static int write_all(const char *out) {
    mkdir(out, 0755);
    snprintf(dir, sizeof dir, "%s", out);
    ground g = {0};
    if (!dem_ground(&g)) synthetic_ground(&g);
    scenery sc;
    make_scenery(&g, &sc);
    char path[600];
    write_gltf_scenery(out, &sc, path, sizeof path);
    write_obj_scenery(out, &sc, path, sizeof path);
    write_bad(out);
    write_formats(out);
    write_hostile(out);
    scenery_free(&sc);
    ground_free(&g);
    printf("test_scenery: sceneries in %s (ground from %s)\n", out, g.spacing == 5 ? "a synthetic hill" : "St Helens");
    return check_failures_ ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--write")) return write_all(argv[2]);
    snprintf(dir, sizeof dir, "scenery_test_%ld", (long)getpid());
    mkdir(dir, 0755);
    RUN(test_synthetic);
    RUN(test_dem);
    RUN(test_bad_files);
    RUN(test_formats);
    RUN(test_count_bombs);
    RUN(test_count_property);
    RUN(test_node_graphs);
    RUN(test_uris);
    RUN(test_gate);
    RUN(test_out_of_range);
    RUN(test_budget);
    RUN(test_crash);
    int rc = finish();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return rc;
}
