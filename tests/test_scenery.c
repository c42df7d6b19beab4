/* Scenery meshes read through assimp (io/cook/scenery.c) and cut into finest tiles: the test makes
 * its own scenery - a TIN of a real DEM (St Helens, through terra_raster_read_isolated and
 * terra_tin_build; a synthetic hill without $TERRA_SHARED) with a hole cut in it, a retaining wall,
 * a steep embankment facing down, a house under a transform of its own (with a chimney below it),
 * a tree with an alpha-masked material and a bush with an RGBA texture - as glTF 2.0 (one embedded
 * base64 buffer) and as OBJ+MTL, and checks what counts as ground, the left-out record, the layer
 * table (tints, metres per texture repeat as the test laid the texture coordinates), the files the
 * scenery names (present and absent), and that the cut lays the wall once and leaves the hole open.
 * Bad files (a NaN vertex, 0 bytes, garbage, no ground left, degenerate and duplicate triangles)
 * give clear errors or counts.
 *
 * `test_scenery --write DIR` writes the sceneries (ground.gltf + bush.png, ground.obj + ground.mtl)
 * and the bad files (bad-*.gltf, bad-*.obj) into DIR and nothing else, for `terra check` and the
 * CLI tests. */
#include "check.h"
#include "terra/io.h"
#include "terra/raster.h"
#include "terra/scenery.h"
#include "terra/tin.h"

#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* The bad files: bad-nan.gltf, bad-empty.obj, bad-garbage.gltf, bad-objects.gltf (nothing but a
 * transformed node), bad-degenerate.obj (2 good triangles, 2 without area, 1 repeated). */
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

static void check_scenery(const ground *gr, const char *what, double tile) {
    scenery sc;
    make_scenery(gr, &sc);
    char path[600];
    write_gltf_scenery(dir, &sc, path, sizeof path);
    terra_scenery s;
    terra_scenery_desc d = {.path = path};
    terra_status st = terra_scenery_read(&d, &s);
    CHECK(st == TERRA_OK, "%s: %s", what, terra_last_error());
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
    st = terra_scenery_read(&d, &s);
    CHECK(st == TERRA_OK, "%s: %s", what, terra_last_error());
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
        {"bad-garbage.gltf", "assimp cannot read it", TERRA_E_FORMAT},
        {"bad-objects.gltf", "no ground left", TERRA_E_FORMAT},
        {"not-there.obj", "cannot open", TERRA_E_IO},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, bad[i].name);
        terra_status st = terra_scenery_read(&d, &s);
        const char *e = terra_last_error();
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

/* Binary glTF (.glb: the buffer in its binary chunk, an image it names but lacks), PLY (no
 * materials, no texture coordinates: one layer, no repeat measured) and the triangle cap. */
static void test_formats(void) {
    mesh m = {0};
    double c0[3] = {0, 0, 0}, c1[3] = {10, 0, 0}, c2[3] = {10, 2, 10}, c3[3] = {0, 2, 10};
    mesh_quad(&m, c0, c1, c2, c3, 5);
    const mesh *mm[1] = {&m};
    char glb[600];
    snprintf(glb, sizeof glb, "%s/quad.glb", dir);
    CHECK(write_gltf(glb, mm, NULL, 1, "[{\"name\":\"field\",\"mesh\":0}]", "[0]",
                     "\"materials\":[{\"name\":\"field\",\"pbrMetallicRoughness\":{\"baseColorTexture\":"
                     "{\"index\":0}}}],\"textures\":[{\"source\":0}],\"images\":[{\"uri\":\"field%20albedo.png\"}]",
                     true));
    mesh_free(&m);
    terra_scenery g;
    terra_scenery_desc gd = {.path = glb};
    CHECK(terra_scenery_read(&gd, &g) == TERRA_OK, "%s", terra_last_error());
    CHECK(g.triangle_count == 2 && g.layer_count == 1 && fabs(g.layers[0].metres_per_repeat - 5) < 1e-4 &&
              g.file_count == 1 && file_state(&g, dir, "field albedo.png") == 0,
          "glb: %zu triangles, %zu layers, %zu files", g.triangle_count, g.layer_count, g.file_count);
    terra_scenery_free(&g);

    char p[600];
    snprintf(p, sizeof p, "%s/quad.ply", dir);
    CHECK(write_text(p, "ply\nformat ascii 1.0\nelement vertex 4\nproperty float x\nproperty float y\n"
                        "property float z\nelement face 2\nproperty list uchar int vertex_indices\nend_header\n"
                        "0 0 0\n10 0 0\n10 1 10\n0 1 10\n3 0 1 2\n3 0 2 3\n"));
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

/* --write DIR: the sceneries and the bad files, for terra check and the CLI tests. */
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
    int rc = finish();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return rc;
}
