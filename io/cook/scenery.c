/* The ground of a scenery through assimp (terra/scenery.h): which nodes and meshes are ground,
 * the triangle soup, the layer table and the files the scenery names. */
#define _DEFAULT_SOURCE /* realpath */
#include "terra/scenery.h"
#include "terra/raster.h"
#include "scenery_check.h"

#include <assimp/cfileio.h>
#include <assimp/cimport.h>
#include <assimp/material.h>
#include <assimp/postprocess.h>
#include <assimp/scene.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- growable arrays and strings ---------------------------------------------------------------- */

static bool grow(void **p, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return true;
    size_t n = *cap ? *cap : 16;
    while (n < need) n *= 2;
    void *q = terra_realloc(*p, n * size);
    if (!q) return false;
    *p = q, *cap = n;
    return true;
}

static char *copy_string(const char *s, size_t n) {
    char *r = terra_alloc(n + 1);
    if (r) memcpy(r, s, n), r[n] = 0;
    return r;
}

/* ---- the gate: every file a read opens ----------------------------------------------------------- */

/* How far into one file (by device and inode, so every path to it is the same file) reads went. */
typedef struct gate_mark {
    dev_t dev;
    ino_t ino;
    uint64_t high;
} gate_mark;

/* Every file assimp or terra opens for a read: it must resolve (symlinks followed) inside the
 * scene's folder or be the scene itself, and be a regular file, opened without blocking (a FIFO
 * would wait for a writer); the bytes read add up to no more than the budget, each file's counted
 * once (past its high-water mark: assimp and terra read the scene more than once). The first
 * refusal is kept as the read's error. */
typedef struct gate {
    const char *scene;          /* as given, for messages */
    char folder[PATH_MAX], self[PATH_MAX]; /* the scene's folder and the scene, resolved */
    uint64_t budget, read;
    gate_mark *marks;
    size_t mark_count, mark_cap;
    terra_status refused;       /* TERRA_OK while nothing was refused */
    char why[1024];
} gate;

static void gate_refuse(gate *g, terra_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void gate_refuse(gate *g, terra_status st, const char *fmt, ...) {
    if (g->refused) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->why, sizeof g->why, fmt, ap);
    va_end(ap);
    g->refused = st;
}

static terra_status gate_init(gate *g, const char *scene, size_t max_bytes) {
    memset(g, 0, sizeof *g);
    g->scene = scene;
    g->budget = terra_raster_memory_budget(max_bytes);
    const char *slash = strrchr(scene, '/');
    char dir[PATH_MAX];
    if (!slash) snprintf(dir, sizeof dir, ".");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash == scene ? 1 : slash - scene), scene);
    if (!realpath(dir, g->folder) || !realpath(scene, g->self))
        return terra_fail(TERRA_E_IO, "%s: cannot resolve its folder: %s", scene, strerror(errno));
    return TERRA_OK;
}

/* Opens name for reading: a descriptor, or -1 for a file that is not there (errno) or one the gate
 * refuses (recorded). */
static int gate_open(gate *g, const char *name) {
    char real[PATH_MAX];
    if (!realpath(name, real)) return -1;
    size_t n = strlen(g->folder);
    bool inside = !strcmp(real, g->self) ||
                  (!strncmp(real, g->folder, n) && (real[n] == '/' || (n == 1 && real[1]))); /* "/" holds all */
    if (!inside) {
        bool same = !strcmp(name, real);
        gate_refuse(g, TERRA_E_UNSUPPORTED, "%s: names %s%s%s, outside the scene's folder %s", g->scene, name,
                    same ? "" : ", which resolves to ", same ? "" : real, g->folder);
        errno = EACCES;
        return -1;
    }
    int fd = open(real, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return -1;
    struct stat st;
    memset(&st, 0, sizeof st);
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) return fd;
    gate_refuse(g, TERRA_E_UNSUPPORTED, "%s: names %s, which is %s, not a regular file", g->scene, name,
                S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISDIR(st.st_mode) ? "a folder" : "a device or socket");
    close(fd);
    errno = EACCES;
    return -1;
}

/* The mark of the file open at fd, added at 0 the first time; NULL (refused) without memory. */
static gate_mark *gate_mark_of(gate *g, int fd) {
    struct stat st;
    if (fstat(fd, &st)) return NULL;
    for (size_t i = 0; i < g->mark_count; i++)
        if (g->marks[i].dev == st.st_dev && g->marks[i].ino == st.st_ino) return &g->marks[i];
    if (!grow((void **)&g->marks, &g->mark_cap, g->mark_count + 1, sizeof *g->marks)) {
        gate_refuse(g, TERRA_E_NOMEM, "%s: out of memory", g->scene);
        return NULL;
    }
    g->marks[g->mark_count] = (gate_mark){st.st_dev, st.st_ino, 0};
    return &g->marks[g->mark_count++];
}

/* Reads up to n bytes at the descriptor's position; those past the file's high-water mark count
 * against the budget. */
static size_t gate_read(gate *g, int fd, void *buf, size_t n) {
    gate_mark *m = gate_mark_of(g, fd);
    const off_t at = lseek(fd, 0, SEEK_CUR);
    if (!m || at < 0) return 0;
    uint64_t pos = (uint64_t)at;
    size_t got = 0;
    while (got < n) {
        const uint64_t free_bytes = m->high > pos ? m->high - pos : 0, room = free_bytes + (g->budget - g->read);
        if (!room) {
            gate_refuse(g, TERRA_E_CAPACITY, "%s: the files it reads add up to more than the memory budget of %.1f MiB",
                        g->scene, (double)g->budget / 1048576.0);
            break;
        }
        size_t want = n - got < room ? n - got : (size_t)room;
        ssize_t k = read(fd, (char *)buf + got, want > (1u << 30) ? (1u << 30) : want);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k, pos += (uint64_t)k;
        if (pos > m->high) g->read += pos - m->high, m->high = pos;
    }
    return got;
}

/* assimp's file system (struct aiFileIO) over the gate. */
typedef struct gate_file {
    struct aiFile file;
    gate *gate;
    int fd;
} gate_file;

static size_t io_read(struct aiFile *f, char *buf, size_t size, size_t count) {
    gate_file *gf = (gate_file *)f->UserData;
    if (!size || !count || count > SIZE_MAX / size) return 0;
    return gate_read(gf->gate, gf->fd, buf, size * count) / size;
}

static size_t io_write(struct aiFile *f, const char *buf, size_t size, size_t count) {
    (void)f, (void)buf, (void)size, (void)count;
    return 0;
}

static size_t io_tell(struct aiFile *f) {
    off_t at = lseek(((gate_file *)f->UserData)->fd, 0, SEEK_CUR);
    return at < 0 ? 0 : (size_t)at;
}

static size_t io_size(struct aiFile *f) {
    struct stat st;
    return fstat(((gate_file *)f->UserData)->fd, &st) == 0 ? (size_t)st.st_size : 0;
}

static enum aiReturn io_seek(struct aiFile *f, size_t offset, enum aiOrigin origin) {
    int whence = origin == aiOrigin_SET ? SEEK_SET : origin == aiOrigin_CUR ? SEEK_CUR : SEEK_END;
    if (offset > (size_t)INT64_MAX) return aiReturn_FAILURE;
    return lseek(((gate_file *)f->UserData)->fd, (off_t)offset, whence) < 0 ? aiReturn_FAILURE : aiReturn_SUCCESS;
}

static void io_flush(struct aiFile *f) { (void)f; }

static struct aiFile *io_open(struct aiFileIO *io, const char *path, const char *mode) {
    gate *g = (gate *)io->UserData;
    if (strpbrk(mode, "wa+")) return NULL;
    int fd = gate_open(g, path);
    if (fd < 0) return NULL;
    gate_file *gf = terra_calloc(1, sizeof *gf);
    if (!gf) {
        close(fd);
        return NULL;
    }
    gf->gate = g, gf->fd = fd;
    gf->file = (struct aiFile){io_read, io_write, io_tell, io_size, io_seek, io_flush, (char *)gf};
    return &gf->file;
}

static void io_close(struct aiFileIO *io, struct aiFile *f) {
    (void)io;
    if (!f) return;
    gate_file *gf = (gate_file *)f->UserData;
    close(gf->fd);
    terra_free(gf);
}

/* ---- the reading ------------------------------------------------------------------------------ */

typedef struct reader {
    const char *path;
    gate *gate;
    const terra_scenery_declared *declared; /* what terra read of the file itself */
    const struct aiScene *scene;
    terra_scenery *out;
    size_t vcap, tcap, lcap, fcap;
    size_t max_triangles;
    /* vertices unique by exact position: open addressing over out->position */
    uint32_t *slot;
    size_t slots;
    uint32_t *scene_material;   /* per vertex while reading: the scene's material index */
    /* per scene material: ground triangles and their (3-D / UV) edge-length ratios */
    bool *alpha;
    uint64_t *ground;
    double **ratio;
    size_t *ratio_count, *ratio_cap;
} reader;

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static size_t position_hash(const double p[3]) {
    uint64_t b[3];
    for (int k = 0; k < 3; k++) {
        double x = p[k] + 0.0; /* -0 and +0 are one position */
        memcpy(&b[k], &x, sizeof x);
    }
    return (size_t)mix64(b[0] ^ mix64(b[1] ^ mix64(b[2])));
}

/* The vertex at p (added if new; a shared one keeps the smaller material). */
static terra_status vertex_at(reader *r, const double p[3], uint32_t material, uint32_t *index) {
    terra_scenery *s = r->out;
    if (2 * (s->vertex_count + 1) > r->slots) {
        size_t slots = r->slots ? 2 * r->slots : 1024;
        uint32_t *t = terra_alloc(slots * sizeof(uint32_t));
        if (!t) return terra_fail(TERRA_E_NOMEM, "%s: out of memory for %zu vertices", r->path, s->vertex_count);
        memset(t, 0xff, slots * sizeof(uint32_t));
        for (size_t i = 0; i < s->vertex_count; i++) {
            size_t h = position_hash(s->position + 3 * i) & (slots - 1);
            while (t[h] != UINT32_MAX) h = (h + 1) & (slots - 1);
            t[h] = (uint32_t)i;
        }
        terra_free(r->slot);
        r->slot = t, r->slots = slots;
    }
    size_t h = position_hash(p) & (r->slots - 1);
    for (; r->slot[h] != UINT32_MAX; h = (h + 1) & (r->slots - 1)) {
        uint32_t e = r->slot[h];
        const double *q = s->position + 3 * (size_t)e;
        if (q[0] == p[0] && q[1] == p[1] && q[2] == p[2]) {
            if (material < r->scene_material[e]) r->scene_material[e] = material;
            *index = e;
            return TERRA_OK;
        }
    }
    if (s->vertex_count >= UINT32_MAX - 1)
        return terra_fail(TERRA_E_CAPACITY, "%s: more than 2^32 ground vertices", r->path);
    size_t cap = r->vcap; /* the two arrays grow to the same capacity */
    if (!grow((void **)&s->position, &cap, s->vertex_count + 1, 3 * sizeof(double)) ||
        !grow((void **)&r->scene_material, &r->vcap, s->vertex_count + 1, sizeof(uint32_t)))
        return terra_fail(TERRA_E_NOMEM, "%s: out of memory for %zu vertices", r->path, s->vertex_count);
    uint32_t e = (uint32_t)s->vertex_count++;
    memcpy(s->position + 3 * (size_t)e, p, 3 * sizeof(double));
    r->scene_material[e] = material;
    r->slot[h] = e;
    *index = e;
    return TERRA_OK;
}

static const char *node_name(const struct aiNode *n) { return n->mName.length ? n->mName.data : ""; }

static terra_status left_out(reader *r, const struct aiNode *n, terra_scenery_reason why, uint64_t triangles) {
    terra_scenery *s = r->out;
    if (!grow((void **)&s->left_out, &r->lcap, s->left_out_count + 1, sizeof *s->left_out))
        return terra_fail(TERRA_E_NOMEM, "%s: out of memory", r->path);
    terra_scenery_left_out *l = &s->left_out[s->left_out_count];
    l->name = copy_string(node_name(n), strlen(node_name(n)));
    if (!l->name) return terra_fail(TERRA_E_NOMEM, "%s: out of memory", r->path);
    l->reason = why, l->triangles = triangles;
    s->left_out_count++;
    return TERRA_OK;
}

static uint64_t mesh_triangles(const struct aiMesh *m) {
    uint64_t n = 0;
    for (unsigned f = 0; f < m->mNumFaces; f++) n += m->mFaces[f].mNumIndices == 3;
    return n;
}

static uint64_t subtree_triangles(const struct aiScene *sc, const struct aiNode *n) {
    uint64_t t = 0;
    for (unsigned i = 0; i < n->mNumMeshes; i++) t += mesh_triangles(sc->mMeshes[n->mMeshes[i]]);
    for (unsigned i = 0; i < n->mNumChildren; i++) t += subtree_triangles(sc, n->mChildren[i]);
    return t;
}

static bool identity(const struct aiMatrix4x4 *m) {
    const float *a = &m->a1;
    for (int i = 0; i < 16; i++)
        if (fabsf(a[i] - (i % 5 == 0 ? 1.0f : 0.0f)) > 1e-6f) return false;
    return true;
}

static double dist3(const double *a, const double *b) {
    return sqrt((a[0] - b[0]) * (a[0] - b[0]) + (a[1] - b[1]) * (a[1] - b[1]) + (a[2] - b[2]) * (a[2] - b[2]));
}

/* One ground mesh into the soup, under the root's transformation. */
static terra_status add_mesh(reader *r, const struct aiNode *node, const struct aiMesh *m,
                             const struct aiMatrix4x4 *root) {
    terra_scenery *s = r->out;
    uint32_t *index = terra_alloc((m->mNumVertices ? m->mNumVertices : 1) * sizeof(uint32_t));
    double *pos = terra_alloc((m->mNumVertices ? m->mNumVertices : 1) * 3 * sizeof(double));
    terra_status st = TERRA_OK;
    if (!index || !pos) st = terra_fail(TERRA_E_NOMEM, "%s: out of memory for mesh '%s'", r->path, m->mName.data);
    const struct aiMatrix4x4 *M = root;
    for (unsigned v = 0; v < m->mNumVertices && st == TERRA_OK; v++) {
        const struct aiVector3D *p = &m->mVertices[v];
        double x = p->x, y = p->y, z = p->z, *q = pos + 3 * (size_t)v;
        q[0] = (double)M->a1 * x + (double)M->a2 * y + (double)M->a3 * z + M->a4;
        q[1] = (double)M->b1 * x + (double)M->b2 * y + (double)M->b3 * z + M->b4;
        q[2] = (double)M->c1 * x + (double)M->c2 * y + (double)M->c3 * z + M->c4;
        if (!isfinite(q[0]) || !isfinite(q[1]) || !isfinite(q[2]))
            st = terra_fail(TERRA_E_FORMAT, "%s: node '%s', mesh '%s', vertex %u: position (%g, %g, %g) is not finite",
                            r->path, node_name(node), m->mName.data, v, (double)p->x, (double)p->y, (double)p->z);
    }
    if (index) memset(index, 0xff, (m->mNumVertices ? m->mNumVertices : 1) * sizeof(uint32_t));
    const struct aiVector3D *uv = m->mTextureCoords[0];
    unsigned mat = m->mMaterialIndex;
    for (unsigned f = 0; f < m->mNumFaces && st == TERRA_OK; f++) {
        const struct aiFace *face = &m->mFaces[f];
        if (face->mNumIndices != 3) {
            s->not_triangles++;
            continue;
        }
        const unsigned *i = face->mIndices;
        const double *A = pos + 3 * (size_t)i[0], *B = pos + 3 * (size_t)i[1], *C = pos + 3 * (size_t)i[2];
        double e1[3] = {B[0] - A[0], B[1] - A[1], B[2] - A[2]}, e2[3] = {C[0] - A[0], C[1] - A[1], C[2] - A[2]};
        double cx = e1[1] * e2[2] - e1[2] * e2[1], cy = e1[2] * e2[0] - e1[0] * e2[2], cz = e1[0] * e2[1] - e1[1] * e2[0];
        double l[3] = {dist3(A, B), dist3(B, C), dist3(C, A)};
        double longest = fmax(l[0], fmax(l[1], l[2]));
        if (!(sqrt(cx * cx + cy * cy + cz * cz) >= 1e-12 * longest * longest) || longest == 0) {
            s->degenerate++;
            continue;
        }
        if (s->triangle_count >= r->max_triangles) {
            st = terra_fail(TERRA_E_CAPACITY, "%s: more than %zu ground triangles", r->path, r->max_triangles);
            break;
        }
        if (!grow((void **)&s->tri, &r->tcap, s->triangle_count + 1, 3 * sizeof(uint32_t))) {
            st = terra_fail(TERRA_E_NOMEM, "%s: out of memory for %zu triangles", r->path, s->triangle_count);
            break;
        }
        uint32_t *t = s->tri + 3 * s->triangle_count;
        for (int k = 0; k < 3 && st == TERRA_OK; k++) {
            if (index[i[k]] == UINT32_MAX) st = vertex_at(r, pos + 3 * (size_t)i[k], mat, &index[i[k]]);
            t[k] = index[i[k]];
        }
        if (st != TERRA_OK) break;
        s->triangle_count++;
        r->ground[mat]++;
        if (!uv) continue;
        double luv = 0;
        for (int k = 0; k < 3; k++) {
            const struct aiVector3D *a = &uv[i[k]], *b = &uv[i[(k + 1) % 3]];
            luv += hypot((double)a->x - b->x, (double)a->y - b->y);
        }
        if (!(luv > 0) || !isfinite(luv)) continue;
        if (!grow((void **)&r->ratio[mat], &r->ratio_cap[mat], r->ratio_count[mat] + 1, sizeof(double))) {
            st = terra_fail(TERRA_E_NOMEM, "%s: out of memory", r->path);
            break;
        }
        r->ratio[mat][r->ratio_count[mat]++] = (l[0] + l[1] + l[2]) / luv;
    }
    terra_free(index);
    terra_free(pos);
    return st;
}

/* A node more than TERRA_SCENERY_MAX_DEPTH below the root (n at `depth`), or NULL; the recursion
 * stops at the limit, so the walks below may recurse. */
static const struct aiNode *too_deep(const struct aiNode *n, int depth) {
    if (depth > TERRA_SCENERY_MAX_DEPTH) return n;
    for (unsigned i = 0; i < n->mNumChildren; i++) {
        const struct aiNode *d = too_deep(n->mChildren[i], depth + 1);
        if (d) return d;
    }
    return NULL;
}

/* The ground under node n; objects (a transformation of their own) and alpha meshes left out. The
 * root is judged too when it holds meshes itself (a glTF with a single root node is that node). */
static terra_status walk(reader *r, const struct aiNode *n, const struct aiMatrix4x4 *root, bool is_root) {
    if ((!is_root || n->mNumMeshes) && !identity(&n->mTransformation))
        return left_out(r, n, TERRA_SCENERY_OBJECT, subtree_triangles(r->scene, n));
    uint64_t alpha = 0;
    for (unsigned i = 0; i < n->mNumMeshes; i++) {
        const struct aiMesh *m = r->scene->mMeshes[n->mMeshes[i]];
        if (r->alpha[m->mMaterialIndex]) {
            alpha += mesh_triangles(m);
            continue;
        }
        terra_status st = add_mesh(r, n, m, root);
        if (st != TERRA_OK) return st;
    }
    if (alpha) {
        terra_status st = left_out(r, n, TERRA_SCENERY_ALPHA, alpha);
        if (st != TERRA_OK) return st;
    }
    for (unsigned i = 0; i < n->mNumChildren; i++) {
        terra_status st = walk(r, n->mChildren[i], root, false);
        if (st != TERRA_OK) return st;
    }
    return TERRA_OK;
}

/* ---- alpha --------------------------------------------------------------------------------------- */

static uint32_t be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }

/* A PNG with an alpha channel: grey+alpha or RGBA, or a tRNS chunk (before the image data). */
static bool png_alpha(const uint8_t *d, size_t n) {
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (n < 33 || memcmp(d, sig, 8) || memcmp(d + 12, "IHDR", 4)) return false;
    if (d[25] == 4 || d[25] == 6) return true;
    for (size_t at = 8; at + 8 <= n;) {
        uint32_t len = be32(d + at);
        if (!memcmp(d + at + 4, "tRNS", 4)) return true;
        if (!memcmp(d + at + 4, "IDAT", 4) || len > n - at - 8 || n - at - 8 - len < 4) break;
        at += 12 + (size_t)len;
    }
    return false;
}

static bool file_png_alpha(reader *r, const char *path) {
    int fd = gate_open(r->gate, path);
    if (fd < 0) return false;
    /* the chunks before the image data: a header, a palette and its transparency fit in 64 KiB */
    uint8_t *d = terra_alloc(65536);
    size_t n = d ? gate_read(r->gate, fd, d, 65536) : 0;
    close(fd);
    bool a = d && png_alpha(d, n);
    terra_free(d);
    return a;
}

/* The scenery's folder joined to a name it uses (as is when absolute). *out: terra_free. */
static char *resolve(const char *scenery, const char *name) {
    size_t dir = 0;
    for (size_t i = 0; scenery[i]; i++)
        if (scenery[i] == '/') dir = i + 1;
    if (name[0] == '/') dir = 0;
    size_t n = strlen(name);
    char *r = terra_alloc(dir + n + 1);
    if (!r) return NULL;
    memcpy(r, scenery, dir);
    /* glTF URIs are percent-encoded; OBJ files from Windows use backslashes */
    size_t k = dir;
    for (size_t i = 0; i < n; i++) {
        unsigned hex;
        if (name[i] == '%' && i + 2 < n && sscanf(name + i + 1, "%2x", &hex) == 1) r[k++] = (char)hex, i += 2;
        else r[k++] = name[i] == '\\' ? '/' : name[i];
    }
    r[k] = 0;
    return r;
}

static bool texel_alpha(const struct aiTexture *t) {
    if (t->mHeight == 0) return png_alpha((const uint8_t *)t->pcData, t->mWidth);
    for (size_t i = 0; i < (size_t)t->mWidth * t->mHeight; i++)
        if (t->pcData[i].a != 255) return true;
    return false;
}

/* Whether a material is vegetation or a fence: opacity below 1, a glTF alphaMode other than
 * OPAQUE, or a diffuse or base-colour texture with alpha. */
static bool material_alpha(reader *r, const struct aiMaterial *m) {
    ai_real opacity = 1;
    unsigned one = 1;
    if (aiGetMaterialFloatArray(m, "$mat.opacity", 0, 0, &opacity, &one) == aiReturn_SUCCESS && opacity < 1) return true;
    struct aiString mode;
    if (aiGetMaterialString(m, "$mat.gltf.alphaMode", 0, 0, &mode) == aiReturn_SUCCESS && strcmp(mode.data, "OPAQUE"))
        return true;
    const enum aiTextureType types[2] = {aiTextureType_DIFFUSE, aiTextureType_BASE_COLOR};
    for (int k = 0; k < 2; k++)
        for (unsigned i = 0; i < aiGetMaterialTextureCount(m, types[k]); i++) {
            struct aiString p;
            if (aiGetMaterialTexture(m, types[k], i, &p, NULL, NULL, NULL, NULL, NULL, NULL) != aiReturn_SUCCESS)
                continue;
            if (p.data[0] == '*') {
                unsigned e = (unsigned)atoi(p.data + 1);
                if (e < r->scene->mNumTextures && texel_alpha(r->scene->mTextures[e])) return true;
                continue;
            }
            char *f = resolve(r->path, p.data);
            bool a = f && file_png_alpha(r, f);
            terra_free(f);
            if (a) return true;
        }
    return false;
}

/* ---- files the scenery names -------------------------------------------------------------------- */

static terra_status add_file(reader *r, const char *name) {
    if (!name[0] || name[0] == '*' || !strncmp(name, "data:", 5)) return TERRA_OK; /* embedded */
    terra_scenery *s = r->out;
    char *path = resolve(r->path, name);
    if (!path) return terra_fail(TERRA_E_NOMEM, "%s: out of memory", r->path);
    for (size_t i = 0; i < s->file_count; i++)
        if (!strcmp(s->files[i].path, path)) {
            terra_free(path);
            return TERRA_OK;
        }
    if (!grow((void **)&s->files, &r->fcap, s->file_count + 1, sizeof *s->files)) {
        terra_free(path);
        return terra_fail(TERRA_E_NOMEM, "%s: out of memory", r->path);
    }
    int fd = gate_open(r->gate, path);
    s->files[s->file_count].path = path;
    s->files[s->file_count++].present = fd >= 0;
    if (fd >= 0) close(fd);
    return TERRA_OK;
}

/* The scene's bytes again (for the files it names), through the gate. */
static char *read_all(reader *r, size_t *size) {
    int fd = gate_open(r->gate, r->path);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        if (fd >= 0) close(fd);
        return NULL;
    }
    /* within the budget, as every read: gate_read refuses past it */
    size_t n = (uint64_t)st.st_size < r->gate->budget ? (size_t)st.st_size : (size_t)r->gate->budget;
    char *d = terra_alloc(n + 1);
    *size = d ? gate_read(r->gate, fd, d, n) : 0;
    close(fd);
    if (d) d[*size] = 0;
    return d;
}

/* The material libraries an OBJ names (mtllib lines). */
static terra_status obj_files(reader *r, char *text) {
    for (char *line = text; line && *line;) {
        char *end = strchr(line, '\n');
        if (end) *end = 0;
        while (*line == ' ' || *line == '\t') line++;
        if (!strncmp(line, "mtllib", 6) && (line[6] == ' ' || line[6] == '\t')) {
            char *name = line + 7, *e = name + strlen(name);
            while (*name == ' ' || *name == '\t') name++;
            while (e > name && (e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t')) *--e = 0;
            terra_status st = add_file(r, name);
            if (st != TERRA_OK) return st;
        }
        line = end ? end + 1 : NULL;
    }
    return TERRA_OK;
}

static terra_status named_files(reader *r) {
    const struct aiScene *sc = r->scene;
    for (unsigned i = 0; i < sc->mNumMaterials; i++)
        for (int type = aiTextureType_NONE + 1; type <= AI_TEXTURE_TYPE_MAX; type++)
            for (unsigned k = 0; k < aiGetMaterialTextureCount(sc->mMaterials[i], (enum aiTextureType)type); k++) {
                struct aiString p;
                if (aiGetMaterialTexture(sc->mMaterials[i], (enum aiTextureType)type, k, &p, NULL, NULL, NULL, NULL,
                                         NULL, NULL) != aiReturn_SUCCESS)
                    continue;
                terra_status st = add_file(r, p.data);
                if (st != TERRA_OK) return st;
            }
    for (size_t i = 0; i < r->declared->uri_count; i++) { /* a glTF's buffers and images */
        terra_status st = add_file(r, r->declared->uris[i]);
        if (st != TERRA_OK) return st;
    }
    const char *dot = strrchr(r->path, '.');
    if (!dot || strcasecmp(dot, ".obj")) return TERRA_OK;
    size_t n;
    char *text = read_all(r, &n);
    if (!text) return terra_fail(TERRA_E_IO, "%s: cannot read again: %s", r->path, strerror(errno));
    terra_status st = obj_files(r, text);
    terra_free(text);
    return st;
}

/* ---- the layer table ----------------------------------------------------------------------------- */

static int double_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Ground materials become layers 0, 1, ... in the scene's order; the vertices take their ids. */
static terra_status layers(reader *r) {
    const struct aiScene *sc = r->scene;
    terra_scenery *s = r->out;
    uint32_t *id = terra_alloc((sc->mNumMaterials ? sc->mNumMaterials : 1) * sizeof(uint32_t));
    if (!id) return terra_fail(TERRA_E_NOMEM, "%s: out of memory", r->path);
    size_t n = 0;
    for (unsigned i = 0; i < sc->mNumMaterials; i++) id[i] = r->ground[i] ? (uint32_t)n++ : UINT32_MAX;
    if (n > 65536) {
        terra_free(id);
        return terra_fail(TERRA_E_UNSUPPORTED, "%s: %zu ground materials, more than the 65,536 ids a vertex can carry",
                          r->path, n);
    }
    s->layers = terra_calloc(n ? n : 1, sizeof *s->layers);
    s->material = terra_alloc((s->vertex_count ? s->vertex_count : 1) * sizeof(uint16_t));
    if (!s->layers || !s->material) {
        terra_free(id);
        return terra_fail(TERRA_E_NOMEM, "%s: out of memory", r->path);
    }
    s->layer_count = n;
    for (unsigned i = 0; i < sc->mNumMaterials; i++) {
        if (id[i] == UINT32_MAX) continue;
        const struct aiMaterial *m = sc->mMaterials[i];
        terra_scenery_layer *l = &s->layers[id[i]];
        struct aiString name;
        if (aiGetMaterialString(m, AI_MATKEY_NAME, &name) != aiReturn_SUCCESS) name.length = 0, name.data[0] = 0;
        l->name = copy_string(name.data, name.length);
        if (!l->name) {
            terra_free(id);
            return terra_fail(TERRA_E_NOMEM, "%s: out of memory", r->path);
        }
        struct aiColor4D c;
        if (aiGetMaterialColor(m, AI_MATKEY_COLOR_DIFFUSE, &c) == aiReturn_SUCCESS ||
            aiGetMaterialColor(m, AI_MATKEY_BASE_COLOR, &c) == aiReturn_SUCCESS)
            l->tint[0] = c.r, l->tint[1] = c.g, l->tint[2] = c.b;
        else
            l->tint[0] = l->tint[1] = l->tint[2] = 1;
        l->triangles = r->ground[i];
        size_t k = r->ratio_count[i];
        if (k) {
            qsort(r->ratio[i], k, sizeof(double), double_cmp);
            l->metres_per_repeat = k % 2 ? r->ratio[i][k / 2] : (r->ratio[i][k / 2 - 1] + r->ratio[i][k / 2]) / 2;
        }
    }
    for (size_t v = 0; v < s->vertex_count; v++) s->material[v] = (uint16_t)id[r->scene_material[v]];
    terra_free(id);
    return TERRA_OK;
}

/* ---- the whole read ------------------------------------------------------------------------------- */

static terra_status read_scene(reader *r) {
    const struct aiScene *sc = r->scene;
    size_t nm = sc->mNumMaterials ? sc->mNumMaterials : 1;
    r->alpha = terra_calloc(nm, sizeof(bool));
    r->ground = terra_calloc(nm, sizeof(uint64_t));
    r->ratio = terra_calloc(nm, sizeof(double *));
    r->ratio_count = terra_calloc(nm, sizeof(size_t));
    r->ratio_cap = terra_calloc(nm, sizeof(size_t));
    if (!r->alpha || !r->ground || !r->ratio || !r->ratio_count || !r->ratio_cap)
        return terra_fail(TERRA_E_NOMEM, "%s: out of memory", r->path);
    for (unsigned i = 0; i < sc->mNumMaterials; i++) r->alpha[i] = material_alpha(r, sc->mMaterials[i]);
    for (unsigned i = 0; i < sc->mNumMeshes; i++)
        if (sc->mMeshes[i]->mMaterialIndex >= sc->mNumMaterials)
            return terra_fail(TERRA_E_CORRUPT, "%s: mesh '%s' uses material %u of %u", r->path,
                              sc->mMeshes[i]->mName.data, sc->mMeshes[i]->mMaterialIndex, sc->mNumMaterials);
    if (!sc->mRootNode) return terra_fail(TERRA_E_FORMAT, "%s: the scene has no nodes", r->path);
    const struct aiNode *top = sc->mRootNode, *deep = too_deep(top, 0);
    if (deep)
        return terra_fail(TERRA_E_UNSUPPORTED, "%s: node '%s' is more than %d levels below the scene's root", r->path,
                          node_name(deep), TERRA_SCENERY_MAX_DEPTH);
    static const struct aiMatrix4x4 none = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
    terra_status st = walk(r, top, top->mNumMeshes ? &none : &top->mTransformation, true);
    if (st != TERRA_OK) return st;
    terra_scenery *s = r->out;
    if (r->declared->known) { /* assimp drops a glTF triangle with an index past its vertices, and says nothing */
        uint64_t delivered = 0;
        for (unsigned i = 0; i < sc->mNumMeshes; i++) delivered += mesh_triangles(sc->mMeshes[i]);
        s->out_of_range = r->declared->triangles > delivered ? (size_t)(r->declared->triangles - delivered) : 0;
    }
    st = terra_scenery_drop_repeats(s->tri, &s->triangle_count, &s->duplicate);
    if (st != TERRA_OK) return st;
    if (!s->triangle_count)
        return terra_fail(TERRA_E_FORMAT,
                          "%s: no ground left (%zu nodes left out as objects or alpha materials, %zu degenerate, %zu "
                          "duplicate triangles)",
                          r->path, s->left_out_count, s->degenerate, s->duplicate);
    st = layers(r);
    if (st == TERRA_OK) st = named_files(r);
    return st;
}

/* terra's own look at the scene's first bytes (scenery_check.h) before assimp allocates for it;
 * fd at the start of the file. */
static terra_status check_head(gate *g, int fd, uint64_t size, terra_scenery_declared *declared) {
    uint8_t first[20];
    size_t n = gate_read(g, fd, first, size < sizeof first ? (size_t)size : sizeof first);
    uint64_t want = terra_scenery_head_size(g->scene, first, n, size);
    if (!want) return TERRA_OK;
    if (want > g->budget)
        return terra_fail(TERRA_E_CAPACITY, "%s: its header or JSON of %llu bytes is larger than the memory budget of "
                          "%.1f MiB", g->scene, (unsigned long long)want, (double)g->budget / 1048576.0);
    uint8_t *head = terra_alloc((size_t)want);
    if (!head) return terra_fail(TERRA_E_NOMEM, "%s: out of memory for its first %llu bytes", g->scene,
                                 (unsigned long long)want);
    memcpy(head, first, n < want ? n : (size_t)want);
    if (n < want) n += gate_read(g, fd, head + n, (size_t)want - n);
    terra_status st = g->refused ? terra_fail(g->refused, "%s", g->why)
                                 : terra_scenery_check_head(g->scene, head, n < want ? n : (size_t)want, size,
                                                            TERRA_SCENERY_MAX_DEPTH, declared);
    terra_free(head);
    return st;
}

terra_status terra_scenery_read(const terra_scenery_desc *desc, terra_scenery *out) {
    memset(out, 0, sizeof *out);
    if (!desc || !desc->path) return terra_fail(TERRA_E_INVALID, "scenery: no path");
    const char *path = desc->path;
    /* opened without blocking: a FIFO would wait for a writer */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return terra_fail(TERRA_E_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    terra_status s = TERRA_OK;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) s = terra_fail(TERRA_E_IO, "%s: not a regular file", path);
    else if (st.st_size == 0) s = terra_fail(TERRA_E_FORMAT, "%s: empty file (0 bytes)", path);
    gate g = {0};
    terra_scenery_declared declared;
    memset(&declared, 0, sizeof declared);
    if (s == TERRA_OK) s = gate_init(&g, path, desc->max_bytes);
    if (s == TERRA_OK) s = check_head(&g, fd, (uint64_t)st.st_size, &declared);
    close(fd);
    const struct aiScene *sc = NULL;
    if (s == TERRA_OK) {
        /* Triangulate splits polygons without moving a vertex; nothing else that drops or reshapes
         * geometry (degenerates are found and counted here). */
        struct aiFileIO io = {io_open, io_close, (char *)&g};
        sc = aiImportFileEx(path, aiProcess_Triangulate | aiProcess_JoinIdenticalVertices |
                                      aiProcess_ValidateDataStructure, &io);
        const char *e = sc ? "" : aiGetErrorString();
        if (!sc && g.refused) s = terra_fail(g.refused, "%s", g.why);
        else if (!sc && strstr(e, "bad_alloc"))
            s = terra_fail(TERRA_E_NOMEM, "%s: out of memory reading it (assimp: %s)", path, e);
        else if (!sc) s = terra_fail(TERRA_E_FORMAT, "%s: assimp cannot read it: %s", path, e);
    }
    if (s == TERRA_OK) {
        reader r = {.path = path, .gate = &g, .declared = &declared, .scene = sc, .out = out,
                    .max_triangles = desc->max_triangles ? desc->max_triangles : (size_t)1 << 31};
        s = read_scene(&r);
        if (g.refused) s = terra_fail(g.refused, "%s", g.why); /* what went wrong first */
        for (unsigned i = 0; r.ratio && i < (sc->mNumMaterials ? sc->mNumMaterials : 1); i++) terra_free(r.ratio[i]);
        terra_free(r.ratio);
        terra_free(r.ratio_count);
        terra_free(r.ratio_cap);
        terra_free(r.alpha);
        terra_free(r.ground);
        terra_free(r.slot);
        terra_free(r.scene_material);
    }
    if (sc) aiReleaseImport(sc);
    terra_free(g.marks);
    terra_scenery_declared_free(&declared);
    if (s != TERRA_OK) terra_scenery_free(out);
    return s;
}

void terra_scenery_free(terra_scenery *s) {
    if (!s) return;
    for (size_t i = 0; i < s->layer_count; i++) terra_free(s->layers[i].name);
    for (size_t i = 0; s->left_out && i < s->left_out_count; i++) terra_free(s->left_out[i].name);
    for (size_t i = 0; i < s->file_count; i++) terra_free(s->files[i].path);
    terra_free(s->position);
    terra_free(s->material);
    terra_free(s->tri);
    terra_free(s->layers);
    terra_free(s->left_out);
    terra_free(s->files);
    memset(s, 0, sizeof *s);
}
