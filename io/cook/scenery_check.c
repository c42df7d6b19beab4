/* What terra reads of a scenery itself before assimp does (scenery_check.h): a PLY or OFF header's
 * counts against the file's size, a glTF's node graph and the URIs of its buffers and images. */
#include "scenery_check.h"
#include "../json.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef enum kind { OTHER, PLY, OFF, GLTF, GLB } kind;

static bool has_ext(const char *path, const char *ext) {
    size_t n = strlen(path), e = strlen(ext);
    return n > e && !strcasecmp(path + n - e, ext);
}

static bool space(uint8_t c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* OFF's first token: [ST][C][N][4][n]OFF, as assimp reads it. */
static bool off_token(const uint8_t *d, size_t n) {
    size_t i = 0;
    if (i + 1 < n && d[i] == 'S' && d[i + 1] == 'T') i += 2;
    for (const char *p = "CN4n"; *p; p++)
        if (i < n && d[i] == *p) i++;
    return i + 3 <= n && !memcmp(d + i, "OFF", 3) && (i + 3 == n || space(d[i + 3]));
}

/* Which check a file gets: by its first bytes (a .glb's magic, PLY's "ply" line, OFF's keyword),
 * else by its extension (assimp picks its reader by extension first). */
static kind kind_of(const char *path, const uint8_t *d, size_t n) {
    if (n >= 4 && !memcmp(d, "glTF", 4)) return GLB;
    if (n >= 4 && !memcmp(d, "ply", 3) && space(d[3])) return PLY;
    if (off_token(d, n)) return OFF;
    if (has_ext(path, ".ply")) return PLY;
    if (has_ext(path, ".off")) return OFF;
    if (has_ext(path, ".gltf")) return GLTF;
    if (has_ext(path, ".glb")) return GLB;
    return OTHER;
}

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

uint64_t terra_scenery_head_size(const char *path, const uint8_t *first, size_t n, uint64_t file_size) {
    switch (kind_of(path, first, n)) {
    case PLY:
    case OFF: return file_size < TERRA_SCENERY_HEAD_MAX ? file_size : TERRA_SCENERY_HEAD_MAX;
    case GLTF: return file_size;
    case GLB: {
        if (n < 20 || memcmp(first, "glTF", 4)) return file_size < 20 ? file_size : 20;
        uint64_t end = 20 + (uint64_t)le32(first + 12); /* version 2: the JSON chunk; 1: the content */
        return end < file_size ? end : file_size;
    }
    default: return 0;
    }
}

/* ---- PLY ------------------------------------------------------------------------------------------ */

/* The bytes of a PLY scalar type in a binary file (1 for a name it does not know). */
static uint64_t ply_type_size(const char *t, size_t n) {
    static const struct {
        const char *name;
        uint64_t size;
    } types[] = {{"char", 1},  {"uchar", 1}, {"int8", 1},   {"uint8", 1},  {"short", 2},   {"ushort", 2},
                 {"int16", 2}, {"uint16", 2}, {"int", 4},   {"uint", 4},   {"int32", 4},   {"uint32", 4},
                 {"float", 4}, {"float32", 4}, {"double", 8}, {"float64", 8}};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (strlen(types[i].name) == n && !memcmp(types[i].name, t, n)) return types[i].size;
    return 1;
}

/* A header line split into at most 6 space-separated tokens. */
typedef struct line_tokens {
    const char *t[6];
    size_t len[6];
    int n;
} line_tokens;

static void tokens(const uint8_t *d, size_t n, line_tokens *lt) {
    lt->n = 0;
    for (size_t i = 0; i < n && lt->n < 6;) {
        while (i < n && space(d[i])) i++;
        size_t s = i;
        while (i < n && !space(d[i])) i++;
        if (i > s) lt->t[lt->n] = (const char *)d + s, lt->len[lt->n++] = i - s;
    }
}

static bool token_is(const line_tokens *lt, int k, const char *word) {
    return k < lt->n && lt->len[k] == strlen(word) && !memcmp(lt->t[k], word, lt->len[k]);
}

/* One element's declaration while its properties are read. */
typedef struct ply_element {
    char name[64];
    int line;
    uint64_t count, properties, binary;
} ply_element;

/* Adds an element's least bytes to *need; false (with the message) once they pass `body`. */
static bool ply_add(const char *path, const ply_element *e, int format, uint64_t body, uint64_t *need) {
    if (!e->line) return true;
    uint64_t per = format == 1 ? 2 * e->properties : format == 2 ? e->binary : 1;
    if (per < 1) per = 1;
    const uint64_t slack = format == 1; /* the last ASCII value may end the file without a separator */
    if (*need <= body + slack && e->count <= (body + slack - *need) / per) {
        *need += e->count * per;
        return true;
    }
    terra_fail(TERRA_E_CORRUPT,
               "%s: PLY header line %d: element '%s' declares %llu items of at least %llu bytes each (%s), more than "
               "the %llu bytes after the header hold",
               path, e->line, e->name, (unsigned long long)e->count, (unsigned long long)per,
               format == 1 ? "ASCII" : format == 2 ? "binary" : "unknown format", (unsigned long long)body);
    return false;
}

static terra_status ply_check(const char *path, const uint8_t *d, size_t n, uint64_t file_size) {
    /* the header's end first: what follows it is what the counts must fit in */
    size_t end = 0;
    for (size_t at = 0; at < n && !end;) {
        const uint8_t *nl = memchr(d + at, '\n', n - at);
        size_t stop = nl ? (size_t)(nl - d) : n;
        line_tokens lt;
        tokens(d + at, stop - at, &lt);
        if (lt.n == 1 && token_is(&lt, 0, "end_header")) end = nl ? stop + 1 : stop;
        at = stop + 1;
    }
    if (!end)
        return terra_fail(TERRA_E_FORMAT, "%s: the PLY header has no end_header line in its first %zu bytes", path, n);
    const uint64_t body = file_size - end;
    int format = 0, format_line = 0, line = 0; /* format: 0 unknown, 1 ASCII, 2 binary */
    uint64_t need = 0;
    ply_element e = {{0}, 0, 0, 0, 0};
    for (size_t at = 0; at < end;) {
        const uint8_t *nl = memchr(d + at, '\n', end - at);
        size_t stop = nl ? (size_t)(nl - d) : end;
        line++;
        line_tokens lt;
        tokens(d + at, stop - at, &lt);
        at = stop + 1;
        if (token_is(&lt, 0, "format") && lt.n > 1 && !format_line) { /* the first one counts, as for assimp */
            format_line = line;
            format = token_is(&lt, 1, "ascii") ? 1 : lt.len[1] > 6 && !memcmp(lt.t[1], "binary", 6) ? 2 : 0;
        } else if (token_is(&lt, 0, "element") || token_is(&lt, 0, "end_header")) {
            if (!ply_add(path, &e, format, body, &need)) return TERRA_E_CORRUPT;
            if (token_is(&lt, 0, "end_header")) break;
            if (lt.n < 3 || !isdigit((unsigned char)lt.t[2][0]))
                return terra_fail(TERRA_E_FORMAT, "%s: PLY header line %d: an element without a count", path, line);
            e = (ply_element){.line = line};
            snprintf(e.name, sizeof e.name, "%.*s", (int)(lt.len[1] < 60 ? lt.len[1] : 60), lt.t[1]);
            for (size_t i = 0; i < lt.len[2] && isdigit((unsigned char)lt.t[2][i]); i++) {
                unsigned digit = (unsigned)(lt.t[2][i] - '0');
                e.count = e.count > (UINT64_MAX - digit) / 10 ? UINT64_MAX : e.count * 10 + digit;
            }
        } else if (token_is(&lt, 0, "property") && e.line) {
            e.properties++;
            bool list = token_is(&lt, 1, "list"); /* its count's size; the items may be none */
            if (lt.n > 1 + list) e.binary += ply_type_size(lt.t[1 + list], lt.len[1 + list]);
        }
    }
    return TERRA_OK;
}

/* ---- OFF ------------------------------------------------------------------------------------------ */

/* The next token's start (spaces, line ends and '#' comment lines skipped), n at the end. */
static size_t off_next(const uint8_t *d, size_t n, size_t i) {
    for (;;) {
        while (i < n && space(d[i])) i++;
        if (i >= n || d[i] != '#') return i;
        while (i < n && d[i] != '\n') i++;
    }
}

static bool off_count(const uint8_t *d, size_t n, size_t *i, uint64_t *v) {
    *i = off_next(d, n, *i);
    if (*i >= n || !isdigit(d[*i])) return false;
    for (*v = 0; *i < n && isdigit(d[*i]); ++*i) {
        unsigned digit = (unsigned)(d[*i] - '0');
        *v = *v > (UINT64_MAX - digit) / 10 ? UINT64_MAX : *v * 10 + digit;
    }
    return true;
}

static terra_status off_check(const char *path, const uint8_t *d, size_t n, uint64_t file_size) {
    size_t i = off_next(d, n, 0), s = i;
    while (i < n && !space(d[i])) i++;
    if (off_token(d + s, i - s)) {
        if (memchr(d + s, 'n', i - s)) /* nOFF: a dimension comes first */
            for (i = off_next(d, n, i); i < n && !space(d[i]);) i++;
    } else {
        i = s;
    }
    uint64_t nv, nf, ne;
    if (!off_count(d, n, &i, &nv) || !off_count(d, n, &i, &nf)) return TERRA_OK; /* assimp's to refuse */
    size_t at = i;
    if (!off_count(d, n, &at, &ne)) at = i; /* the edges' count, when there is one */
    /* every vertex and face is a line of at least one value and its end; the last may end the file */
    uint64_t body = file_size - at;
    if (nv <= (body + 1) / 2 && nf <= (body + 1) / 2 && 2 * (nv + nf) <= body + 1) return TERRA_OK;
    return terra_fail(TERRA_E_CORRUPT,
                      "%s: the OFF header declares %llu vertices and %llu faces, at least 2 bytes each, more than the "
                      "%llu bytes after its counts hold",
                      path, (unsigned long long)nv, (unsigned long long)nf, (unsigned long long)body);
}

/* ---- glTF ----------------------------------------------------------------------------------------- */

/* A URI must name a file in the scene's folder: relative, no scheme, never climbing out with "..".
 * Percent escapes are decoded first and backslashes count as slashes, as readers take them. */
static terra_status uri_check(const char *path, const char *where, const char *uri) {
    size_t n = strlen(uri), k = 0;
    char *d = terra_alloc(n + 1);
    if (!d) return terra_fail(TERRA_E_NOMEM, "%s: out of memory", path);
    for (size_t i = 0; i < n; i++) {
        unsigned hex;
        if (uri[i] == '%' && isxdigit((unsigned char)uri[i + 1]) && isxdigit((unsigned char)uri[i + 2]) &&
            sscanf(uri + i + 1, "%2x", &hex) == 1)
            d[k++] = (char)hex, i += 2;
        else
            d[k++] = uri[i] == '\\' ? '/' : uri[i];
    }
    d[k] = 0;
    const char *why = NULL, *colon = strchr(d, ':'), *slash = strchr(d, '/');
    if (strlen(d) != k) why = "holds a NUL";
    else if (d[0] == '/') why = "is an absolute path";
    else if (colon && (!slash || colon < slash)) why = "names a scheme or a drive";
    int depth = 0; /* below the folder: a name goes in, ".." out */
    for (const char *seg = d; !why && *seg;) {
        size_t len = strcspn(seg, "/");
        if (len == 2 && !memcmp(seg, "..", 2)) {
            if (--depth < 0) why = "climbs out with \"..\"";
        } else if (len && !(len == 1 && seg[0] == '.')) {
            depth++;
        }
        seg += len + (seg[len] == '/');
    }
    terra_free(d);
    if (!why) return TERRA_OK;
    return terra_fail(TERRA_E_UNSUPPORTED, "%s: %s '%.200s' %s: a scenery's files must lie in its folder", path, where,
                      uri, why);
}

/* Every buffer's and image's URI checked, and kept in out->uris. */
static terra_status gltf_uris(const char *path, const cJSON *root, terra_scenery_declared *out) {
    const char *lists[2] = {"buffers", "images"};
    size_t cap = 0;
    for (int k = 0; k < 2; k++) {
        const cJSON *item;
        int i = 0;
        cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(root, lists[k])) {
            const cJSON *uri = cJSON_GetObjectItemCaseSensitive(item, "uri");
            i++;
            if (!cJSON_IsString(uri) || !strncmp(uri->valuestring, "data:", 5)) continue;
            char where[96];
            if (item->string) snprintf(where, sizeof where, "%s.%.60s.uri", lists[k], item->string);
            else snprintf(where, sizeof where, "%s[%d].uri", lists[k], i - 1);
            terra_status st = uri_check(path, where, uri->valuestring);
            if (st != TERRA_OK) return st;
            size_t n = strlen(uri->valuestring) + 1;
            if (out->uri_count == cap) {
                char **u = terra_realloc(out->uris, (cap = cap ? 2 * cap : 8) * sizeof *u);
                if (!u) return terra_fail(TERRA_E_NOMEM, "%s: out of memory", path);
                out->uris = u;
            }
            if (!(out->uris[out->uri_count] = terra_alloc(n)))
                return terra_fail(TERRA_E_NOMEM, "%s: out of memory", path);
            memcpy(out->uris[out->uri_count++], uri->valuestring, n);
        }
    }
    return TERRA_OK;
}

void terra_scenery_declared_free(terra_scenery_declared *d) {
    for (size_t i = 0; i < d->uri_count; i++) terra_free(d->uris[i]);
    terra_free(d->uris);
    memset(d, 0, sizeof *d);
}

/* glTF 1.0 names nodes by id: the ids sorted, to find children by. */
typedef struct node_id {
    const char *id;
    int index;
} node_id;

static int id_cmp(const void *a, const void *b) { return strcmp(((const node_id *)a)->id, ((const node_id *)b)->id); }

typedef struct graph {
    const char *path;
    int count;
    const cJSON **node;
    int *parent, *depth, *stack;
    node_id *ids;               /* glTF 1.0 (nodes an object), else NULL */
} graph;

/* A whole number in [0, limit), else -1. */
static int64_t index_of(const cJSON *v, int64_t limit) {
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || !(v->valuedouble < (double)limit)) return -1;
    int64_t i = (int64_t)v->valuedouble;
    return (double)i == v->valuedouble ? i : -1;
}

/* The node a reference names (an index, or a glTF 1.0 id), -1 for none. */
static int node_ref(const graph *g, const cJSON *ref) {
    if (!g->ids) return (int)index_of(ref, g->count);
    if (!cJSON_IsString(ref)) return -1;
    node_id key = {ref->valuestring, 0};
    const node_id *hit = bsearch(&key, g->ids, (size_t)g->count, sizeof key, id_cmp);
    return hit ? hit->index : -1;
}

static const char *node_name(const graph *g, int i) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(g->node[i], "name");
    return cJSON_IsString(name) ? name->valuestring : g->ids ? g->node[i]->string : "";
}

/* Every child a node, named once, by one parent. */
static terra_status gltf_parents(graph *g) {
    for (int i = 0; i < g->count; i++) {
        const cJSON *children = cJSON_GetObjectItemCaseSensitive(g->node[i], "children"), *c;
        if (children && !cJSON_IsArray(children))
            return terra_fail(TERRA_E_FORMAT, "%s: nodes[%d].children is not an array", g->path, i);
        int k = 0;
        cJSON_ArrayForEach(c, children) {
            int j = node_ref(g, c);
            if (j < 0)
                return terra_fail(TERRA_E_CORRUPT, "%s: nodes[%d].children[%d] is not one of the %d nodes", g->path, i,
                                  k, g->count);
            if (j == i) return terra_fail(TERRA_E_CORRUPT, "%s: node %d is its own child", g->path, i);
            if (g->parent[j] >= 0)
                return terra_fail(TERRA_E_CORRUPT,
                                  "%s: node %d is a child of node %d and again of node %d (a node has one parent, "
                                  "which names it once)",
                                  g->path, j, g->parent[j], i);
            g->parent[j] = i;
            k++;
        }
    }
    return TERRA_OK;
}

/* Each scene's root nodes: nodes without a parent, named once in it. */
static terra_status gltf_roots(graph *g, const cJSON *root) {
    const cJSON *scene, *r;
    int s = 0;
    cJSON_ArrayForEach(scene, cJSON_GetObjectItemCaseSensitive(root, "scenes")) {
        int k = 0;
        terra_status st = TERRA_OK;
        char where[96]; /* scenes[i], or a glTF 1.0 scene's id */
        if (scene->string) snprintf(where, sizeof where, "scenes.%.60s", scene->string);
        else snprintf(where, sizeof where, "scenes[%d]", s);
        cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(scene, "nodes")) {
            int j = node_ref(g, r);
            if (j < 0)
                st = terra_fail(TERRA_E_CORRUPT, "%s: %s.nodes[%d] is not one of the %d nodes", g->path, where, k,
                                g->count);
            else if (g->parent[j] >= 0)
                st = terra_fail(TERRA_E_CORRUPT, "%s: %s.nodes[%d]: node %d is a root and a child of node %d", g->path,
                                where, k, j, g->parent[j]);
            else if (g->parent[j] == -2)
                st = terra_fail(TERRA_E_CORRUPT, "%s: %s.nodes[%d]: node %d is named twice", g->path, where, k, j);
            if (st != TERRA_OK) break;
            g->parent[j] = -2; /* a root of this scene, for now */
            k++;
        }
        cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(scene, "nodes")) {
            int j = node_ref(g, r);
            if (j >= 0 && g->parent[j] == -2) g->parent[j] = -1;
        }
        if (st != TERRA_OK) return st;
        s++;
    }
    return TERRA_OK;
}

/* No cycle, no node deeper than max_depth (a root is at depth 0). */
static terra_status gltf_depths(graph *g, int max_depth) {
    for (int i = 0; i < g->count; i++) g->depth[i] = -1; /* -1 not yet known, -2 on the path being walked */
    for (int i = 0; i < g->count; i++) {
        int len = 0, v = i;
        while (v >= 0 && g->depth[v] == -1) g->depth[v] = -2, g->stack[len++] = v, v = g->parent[v];
        if (v >= 0 && g->depth[v] == -2)
            return terra_fail(TERRA_E_CORRUPT, "%s: the nodes form a cycle through node %d", g->path, v);
        int d = v < 0 ? -1 : g->depth[v];
        while (len) {
            v = g->stack[--len];
            g->depth[v] = ++d;
            if (d > max_depth)
                return terra_fail(TERRA_E_UNSUPPORTED,
                                  "%s: node %d ('%.100s') is %d levels below its root, more than the %d terra reads",
                                  g->path, v, node_name(g, v), d, max_depth);
        }
    }
    return TERRA_OK;
}

/* The triangles a primitive declares, -1 when a reference does not resolve. */
static int64_t primitive_triangles(const cJSON *prim, const cJSON *const *accessor, int accessors) {
    const cJSON *mode = cJSON_GetObjectItemCaseSensitive(prim, "mode");
    int64_t m = mode ? index_of(mode, 7) : 4;
    if (m < 4) return m < 0 ? -1 : 0; /* points and lines */
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(prim, "indices");
    if (!ref) ref = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(prim, "attributes"), "POSITION");
    int64_t a = index_of(ref, accessors);
    int64_t count = a < 0 ? -1 : index_of(cJSON_GetObjectItemCaseSensitive(accessor[a], "count"), INT64_MAX / 2);
    if (count < 0) return -1;
    return m == 4 ? count / 3 : count >= 3 ? count - 2 : 0;
}

/* Marks node ref reached and queues it. */
static void reach(graph *g, const cJSON *ref, int *len) {
    int j = node_ref(g, ref);
    if (j >= 0 && !g->depth[j]) g->depth[j] = 1, g->stack[(*len)++] = j;
}

/* What assimp loads of a glTF 2.0: the nodes reached from the default scene, every skin's joints
 * and skeleton and every animation channel's target, their subtrees, and the meshes of those. */
static terra_status gltf_declared(graph *g, const cJSON *root, terra_scenery_declared *out) {
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(root, "scene"), *item, *c;
    const cJSON *scenes = cJSON_GetObjectItemCaseSensitive(root, "scenes"), *scene = NULL;
    int64_t want = sc ? index_of(sc, INT32_MAX) : 0, k = 0;
    cJSON_ArrayForEach(item, scenes) if (k++ == want) scene = item;
    const cJSON *meshes = cJSON_GetObjectItemCaseSensitive(root, "meshes");
    const cJSON *accessors = cJSON_GetObjectItemCaseSensitive(root, "accessors");
    int nm = cJSON_GetArraySize(meshes), na = cJSON_GetArraySize(accessors), len = 0;
    bool *used = terra_calloc((size_t)nm + 1, sizeof(bool));
    const cJSON **accessor = terra_alloc(((size_t)na + 1) * sizeof *accessor);
    if (!used || !accessor) {
        terra_free(used);
        terra_free(accessor);
        return terra_fail(TERRA_E_NOMEM, "%s: out of memory for %d meshes", g->path, nm);
    }
    k = 0;
    cJSON_ArrayForEach(item, accessors) accessor[k++] = item;
    for (int i = 0; i < g->count; i++) g->depth[i] = 0; /* reused: 1 reached */
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(scene, "nodes")) reach(g, c, &len);
    cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(root, "skins")) {
        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(item, "joints")) reach(g, c, &len);
        reach(g, cJSON_GetObjectItemCaseSensitive(item, "skeleton"), &len);
    }
    cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(root, "animations"))
        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(item, "channels"))
            reach(g, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "target"), "node"), &len);
    bool known = scene != NULL;
    while (len) {
        int v = g->stack[--len];
        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(g->node[v], "children")) reach(g, c, &len);
        const cJSON *mesh = cJSON_GetObjectItemCaseSensitive(g->node[v], "mesh");
        int64_t m = index_of(mesh, nm);
        if (m >= 0) used[m] = true;
        else if (mesh) known = false;
    }
    uint64_t triangles = 0;
    k = 0;
    cJSON_ArrayForEach(item, meshes) {
        if (used[k++])
            cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(item, "primitives")) {
                int64_t t = primitive_triangles(c, accessor, na);
                if (t < 0) known = false;
                else triangles += (uint64_t)t;
            }
    }
    terra_free(used);
    terra_free(accessor);
    out->triangles = known ? triangles : 0;
    out->known = known;
    return TERRA_OK;
}

static terra_status gltf_check(const char *path, const char *json, size_t n, int max_depth,
                               terra_scenery_declared *declared) {
    cJSON *root = terra_json_parse_length(json, n);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return terra_fail(TERRA_E_FORMAT, "%s: the glTF's JSON does not parse as an object (or nests deeper than %d)",
                          path, CJSON_NESTING_LIMIT);
    }
    terra_status st = gltf_uris(path, root, declared);
    const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(root, "nodes"), *item;
    graph g = {.path = path, .count = cJSON_GetArraySize(nodes)};
    size_t cap = (size_t)g.count + 1;
    g.node = terra_alloc(cap * sizeof *g.node);
    g.parent = terra_alloc(cap * sizeof(int));
    g.depth = terra_alloc(cap * sizeof(int));
    g.stack = terra_alloc(cap * sizeof(int));
    if (cJSON_IsObject(nodes)) g.ids = terra_alloc(cap * sizeof *g.ids);
    if (st == TERRA_OK && (!g.node || !g.parent || !g.depth || !g.stack || (cJSON_IsObject(nodes) && !g.ids)))
        st = terra_fail(TERRA_E_NOMEM, "%s: out of memory for %d nodes", path, g.count);
    if (st == TERRA_OK) {
        int i = 0;
        cJSON_ArrayForEach(item, nodes) {
            g.node[i] = item, g.parent[i] = -1;
            if (g.ids) g.ids[i] = (node_id){item->string, i};
            i++;
        }
        if (g.ids) qsort(g.ids, (size_t)g.count, sizeof *g.ids, id_cmp);
        st = gltf_parents(&g);
        if (st == TERRA_OK) st = gltf_roots(&g, root);
        if (st == TERRA_OK) st = gltf_depths(&g, max_depth);
    }
    if (st == TERRA_OK && !g.ids && cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(root, "meshes")))
        st = gltf_declared(&g, root, declared);
    terra_free(g.node);
    terra_free(g.parent);
    terra_free(g.depth);
    terra_free(g.stack);
    terra_free(g.ids);
    cJSON_Delete(root);
    return st;
}

terra_status terra_scenery_check_head(const char *path, const uint8_t *data, size_t n, uint64_t file_size,
                                      int max_depth, terra_scenery_declared *declared) {
    memset(declared, 0, sizeof *declared);
    if (n > file_size) n = (size_t)file_size;
    switch (kind_of(path, data, n)) {
    case PLY: return n >= 3 && !memcmp(data, "ply", 3) ? ply_check(path, data, n, file_size) : TERRA_OK;
    case OFF: return off_check(path, data, n, file_size);
    case GLTF: return gltf_check(path, (const char *)data, n, max_depth, declared);
    case GLB: {
        if (n < 20 || memcmp(data, "glTF", 4)) return TERRA_OK; /* assimp's to refuse */
        uint32_t version = le32(data + 4), len = le32(data + 12);
        if ((version == 2 && memcmp(data + 16, "JSON", 4)) || (version == 1 && le32(data + 16) != 0) ||
            (version != 1 && version != 2))
            return terra_fail(TERRA_E_FORMAT, "%s: a binary glTF (version %u) whose first chunk is not JSON", path,
                              version);
        if (len > n - 20)
            return terra_fail(TERRA_E_CORRUPT, "%s: the binary glTF's JSON chunk of %u bytes runs past the file's end",
                              path, len);
        return gltf_check(path, (const char *)data + 20, len, max_depth, declared);
    }
    default: return TERRA_OK;
    }
}
