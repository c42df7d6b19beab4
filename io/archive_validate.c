/* The rules every reader applies to an archive as a whole (metadata, header, index and pyramid) and
 * to each of its tiles, and terra info --verify's run of both. See terra/archive_io.h; what readers
 * tolerate is in docs/FORMAT.md. */
#include "terra/archive_io.h"
#include "archive_rules.h"
#include "json.h"
#include "terra/select.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MIN_TILE_SIZE_M 1e-6 /* a level-0 tile's side: 4 samples of terra cook's finest spacing */
#define COORD_TILES 134217728.0 /* 2^27: tile coordinates are 28-bit signed */
#define PIECE 48                 /* characters of a JSON value quoted in a message */

/* ---- reporting ------------------------------------------------------------------------------- */

typedef struct vstate {
    const terra_archive *a;
    const char *path;
    terra_archive_report_fn report;
    void *user;
    uint64_t problems;
    char first[512];  /* the first problem's message */
    char last[600];   /* the last message of the archive as a whole */
    uint8_t *bad;     /* per index entry: 1 once a problem of it was reported */
    terra_tms_map map; /* z/x/y of the tiles, once the index is known sound */
    const terra_tms_map *names; /* &map then, NULL before: how messages name tiles */
    terra_status rules_st;      /* why the tiles' rules could not be read (terra_archive_tile_rules) */
    char rules_why[600];
} vstate;

static void say(vstate *v, uint64_t index, const terra_archive_entry *e, terra_status st, const char *msg) {
    if (st != TERRA_OK) {
        if (!v->problems++) snprintf(v->first, sizeof v->first, "%s", msg);
        if (index != TERRA_ARCHIVE_WHOLE) v->bad[index] = 1;
    }
    if (v->report) v->report(v->user, index, e, st, msg);
}

/* A problem (st != TERRA_OK) or a note (TERRA_OK) of the archive as a whole: "PATH: ..." */
static void whole(vstate *v, terra_status st, const char *fmt, ...) {
    int n = snprintf(v->last, sizeof v->last, "%s: ", v->path);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->last + n, sizeof v->last - (size_t)n, fmt, ap);
    va_end(ap);
    say(v, TERRA_ARCHIVE_WHOLE, NULL, st, v->last);
}

/* The tiles' rules cannot be read: why (the message just said, or the current error). */
static void no_rules(vstate *v, terra_status st, const char *why) {
    v->rules_st = st;
    snprintf(v->rules_why, sizeof v->rules_why, "%s", why);
}

/* A tile's name in messages (arc_tile_name: z/x/y once the index is known). */
typedef struct tname {
    char s[TERRA_ARCHIVE_NAME_SIZE];
} tname;
static tname name_of(const vstate *v, terra_tile_key k) {
    tname t;
    arc_tile_name(v->a, v->names, k, t.s);
    return t;
}

/* A problem of index entry i: "PATH: index entry I, tile NAME: ..." */
static void entry_problem(vstate *v, uint64_t i, const terra_archive_entry *e, const char *fmt, ...) {
    char msg[600];
    int n = snprintf(msg, sizeof msg, "%s: index entry %llu, %s: ", v->path, (unsigned long long)i, name_of(v, e->key).s);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    va_end(ap);
    say(v, i, e, TERRA_E_CORRUPT, msg);
}

/* A JSON value as a message quotes it: its text, cut to PIECE characters. */
static const char *piece(const cJSON *j, char out[PIECE + 4]) {
    char *s = j ? cJSON_PrintUnformatted(j) : NULL;
    snprintf(out, PIECE + 4, "%s", s ? s : "nothing");
    if (s && strlen(s) > PIECE) memcpy(out + PIECE, "...", 4);
    cJSON_free(s);
    return out;
}

/* A name from the metadata as a message quotes it: a JSON string (escaped), cut to PIECE characters. */
static const char *quoted(const char *name, char out[PIECE + 4]) {
    cJSON *j = cJSON_CreateString(name);
    piece(j, out);
    cJSON_Delete(j);
    return out;
}

/* ---- the metadata ------------------------------------------------------------------------------ */

/* The members terra's writer writes; others are notes. */
static const char *known_members[] = {"format", "version", "name",  "tile_format", "mesh",      "frame",
                                      "compression", "bounds", "tile_size_m", "extensions", "tile_count",
                                      "payload_bytes", "min_level", "max_level", "levels", "source"};

#define KNOWN (sizeof known_members / sizeof *known_members)

/* Members terra does not know are notes; a member terra writes given more than once (in any case) is
 * a problem: readers look members up with cJSON_GetObjectItem (the first, in any case), and one that
 * looked otherwise could read another. */
static void check_members(vstate *v, const cJSON *root) {
    int count[KNOWN] = {0};
    char p[PIECE + 4];
    const cJSON *m;
    cJSON_ArrayForEach(m, root) {
        size_t k = 0;
        while (k < KNOWN && strcasecmp(m->string, known_members[k])) k++;
        if (k < KNOWN) count[k]++;
        else whole(v, TERRA_OK, "metadata member %s is not one terra reads: ignored", quoted(m->string, p));
    }
    for (size_t k = 0; k < KNOWN; k++)
        if (count[k] > 1) whole(v, TERRA_E_CORRUPT, "metadata: member \"%s\" appears %d times", known_members[k], count[k]);
}

/* A member that must be a given string when present. */
static void expect_string(vstate *v, const cJSON *root, const char *name, const char *want) {
    const cJSON *m = cJSON_GetObjectItem(root, name);
    char p[PIECE + 4];
    if (m && !(cJSON_IsString(m) && !strcmp(m->valuestring, want)))
        whole(v, TERRA_E_CORRUPT, "metadata: %s is %s, not \"%s\"", name, piece(m, p), want);
}

/* Four finite numbers, or false (the problem said). */
static bool four_numbers(vstate *v, const cJSON *b, double out[4]) {
    char p[PIECE + 4];
    bool ok = cJSON_IsArray(b) && cJSON_GetArraySize(b) == 4;
    for (int i = 0; ok && i < 4; i++) {
        const cJSON *x = cJSON_GetArrayItem(b, i);
        ok = cJSON_IsNumber(x) && isfinite(x->valuedouble);
        if (ok) out[i] = x->valuedouble;
    }
    if (!ok) whole(v, TERRA_E_CORRUPT, "metadata: bounds is %s, not four finite numbers", piece(b, p));
    return ok;
}

/* The frame, mesh, extensions, tile size and bounds into L; *root (cJSON_Delete) the parsed
 * metadata, NULL when it is not a JSON object. True when it says what the tiles are (a mesh kind
 * terra knows, or none: grids). */
static bool check_metadata(vstate *v, terra_archive_layout *L, cJSON **root) {
    const terra_archive_info *I = terra_archive_get_info(v->a);
    char p[PIECE + 4];
    size_t at = 0;
    cJSON *j = *root = terra_json_parse_whole(I->metadata, I->metadata_size, &at);
    if (!j && at < I->metadata_size && !I->metadata[at])
        whole(v, TERRA_E_CORRUPT, "metadata (%u bytes) is not JSON: a NUL byte at byte %zu (JSON text has none, and "
              "readers would stop there)", I->metadata_size, at);
    else if (!j)
        whole(v, TERRA_E_CORRUPT, "metadata (%u bytes) is not JSON: it stops being JSON at byte %zu (JSON nested deeper "
              "than 1000 is refused too)", I->metadata_size, at);
    else if (!cJSON_IsObject(j)) {
        whole(v, TERRA_E_CORRUPT, "metadata is %s, not a JSON object", piece(j, p));
        cJSON_Delete(j);
        j = *root = NULL;
    }
    if (!j) {
        no_rules(v, TERRA_E_CORRUPT, v->last);
        return false;
    }
    const cJSON *m;
    check_members(v, j);
    expect_string(v, j, "format", "terra-archive");
    expect_string(v, j, "tile_format", "quantized-mesh-1.0");
    expect_string(v, j, "frame", terra_frame_name(L->frame));
    const cJSON *mesh = cJSON_GetObjectItem(j, "mesh");
    const bool kind = !mesh || (cJSON_IsString(mesh) && (!strcmp(mesh->valuestring, "grid") || !strcmp(mesh->valuestring, "tin")));
    L->tin = kind && mesh && !strcmp(mesh->valuestring, "tin");
    if (!kind) {
        whole(v, TERRA_E_CORRUPT, "metadata: mesh is %s, not \"grid\" or \"tin\"", piece(mesh, p));
        no_rules(v, TERRA_E_CORRUPT, v->last);
    }
    const cJSON *ext = cJSON_GetObjectItem(j, "extensions");
    if (ext && !cJSON_IsArray(ext)) whole(v, TERRA_E_CORRUPT, "metadata: extensions is %s, not a list of names", piece(ext, p));
    const cJSON *names = cJSON_IsArray(ext) ? ext : NULL;
    cJSON_ArrayForEach(m, names) {
        const uint32_t bit = cJSON_IsString(m) ? arc_extension_bit(m->valuestring) : 0;
        if (!cJSON_IsString(m)) whole(v, TERRA_E_CORRUPT, "metadata: extension %s is not a name", piece(m, p));
        else if (!bit) whole(v, TERRA_OK, "metadata lists extension %s, which terra does not know: ignored", piece(m, p));
        L->rules.extensions |= bit;
    }
    const cJSON *b = cJSON_GetObjectItem(j, "bounds");
    if (L->frame == TERRA_FRAME_GEOGRAPHIC) {
        double g[4];
        if (b && four_numbers(v, b, g)) {
            if (!(g[0] >= -180 && g[0] < g[2] && g[2] <= 180 && g[1] >= -90 && g[1] < g[3] && g[3] <= 90))
                whole(v, TERRA_E_CORRUPT, "metadata: bounds %s are not west < east in -180..180, south < north in -90..90 degrees",
                      piece(b, p));
            else L->has_bounds = true, memcpy(L->bounds, g, sizeof g);
        }
        return kind;
    }
    const cJSON *ts = cJSON_GetObjectItem(j, "tile_size_m");
    const bool size_ok = cJSON_IsNumber(ts) && ts->valuedouble >= MIN_TILE_SIZE_M && ts->valuedouble <= TERRA_SELECT_MAX_SIDE;
    if (!size_ok)
        whole(v, TERRA_E_CORRUPT, "metadata: tile_size_m is %s, not the side of a level-0 tile, from %g m to %g m", piece(ts, p),
              MIN_TILE_SIZE_M, TERRA_SELECT_MAX_SIDE);
    else L->tile_size_m = ts->valuedouble;
    double r[4];
    if (!b) whole(v, TERRA_E_CORRUPT, "metadata lacks bounds (x0, z0, x1, z1 m), which a local-frame archive needs");
    if (!b || !four_numbers(v, b, r)) return kind;
    const double reach = size_ok ? COORD_TILES * L->tile_size_m : INFINITY;
    if (!(r[0] < r[2] && r[1] < r[3]))
        whole(v, TERRA_E_CORRUPT, "metadata: bounds %s are not x0 < x1, z0 < z1", piece(b, p));
    else if (fmax(fmax(fabs(r[0]), fabs(r[1])), fmax(fabs(r[2]), fabs(r[3]))) > TERRA_SELECT_MAX_SIDE)
        whole(v, TERRA_E_CORRUPT, "metadata: bounds %s reach past %g m, beyond the ground terra draws", piece(b, p),
              TERRA_SELECT_MAX_SIDE);
    else if (r[0] < -reach || r[1] < -reach || r[2] > reach || r[3] > reach)
        whole(v, TERRA_E_CORRUPT, "metadata: bounds %s reach past the tiles' coordinates (2^27 tiles of %g m each way)",
              piece(b, p), L->tile_size_m);
    else L->has_bounds = true, memcpy(L->bounds, r, sizeof r);
    return kind;
}

/* ---- the index ------------------------------------------------------------------------------------ */

/* Where tile k lies: west, south (local: x0, z0), east, north (x1, z1). */
static void tile_rect(const terra_archive_layout *L, terra_tile_key k, double r[4]) {
    const int l = terra_tile_key_level(k);
    const double side = L->frame == TERRA_FRAME_GEOGRAPHIC ? ldexp(180.0, -l) : ldexp(L->tile_size_m, l);
    const double x0 = L->frame == TERRA_FRAME_GEOGRAPHIC ? -180 : 0, y0 = L->frame == TERRA_FRAME_GEOGRAPHIC ? -90 : 0;
    r[0] = x0 + terra_tile_key_x(k) * side, r[1] = y0 + terra_tile_key_y(k) * side;
    r[2] = r[0] + side, r[3] = r[1] + side;
}

/* Where entry i's tile may lie: on face 0, in the frame's grid, over the bounds (geographic: but the
 * roots). False once the problem is said. */
static bool entry_placed(vstate *v, const terra_archive_layout *L, uint64_t i, const terra_archive_entry *e) {
    const terra_tile_key k = e->key;
    const int l = terra_tile_key_level(k);
    const int64_t x = terra_tile_key_x(k), y = terra_tile_key_y(k);
    if (terra_tile_key_face(k)) {
        entry_problem(v, i, e, "archives hold face 0 only");
        return false;
    }
    if (L->frame == TERRA_FRAME_GEOGRAPHIC && (x < 0 || y < 0 || x >= (int64_t)2 << l || y >= (int64_t)1 << l)) {
        entry_problem(v, i, e, "outside level %d's %lld x %lld tiles", l, (long long)2 << l, (long long)1 << l);
        return false;
    }
    if (!L->has_bounds || (L->frame == TERRA_FRAME_LOCAL && !L->tile_size_m) || (L->frame == TERRA_FRAME_GEOGRAPHIC && l == 0))
        return true;
    double r[4];
    tile_rect(L, k, r);
    if (r[2] <= L->bounds[0] || r[0] >= L->bounds[2] || r[3] <= L->bounds[1] || r[1] >= L->bounds[3]) {
        entry_problem(v, i, e, "covers %.9g, %.9g .. %.9g, %.9g, outside the bounds %.9g, %.9g .. %.9g, %.9g", r[0], r[1],
                      r[2], r[3], L->bounds[0], L->bounds[1], L->bounds[2], L->bounds[3]);
        return false;
    }
    return true;
}

static int64_t floor_half(int64_t a) { return a >= 0 ? a / 2 : -((1 - a) / 2); }

/* Index of the order key `want` in the sorted order[0..n), or -1. */
static int64_t find_order(const uint64_t *order, uint64_t n, uint64_t want) {
    uint64_t lo = 0, hi = n;
    while (lo < hi) {
        const uint64_t mid = lo + (hi - lo) / 2;
        if (order[mid] < want) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && order[lo] == want ? (int64_t)lo : -1;
}

/* ---- the tiles' rules ------------------------------------------------------------------------------ */

/* n when vc = (n + 1)^2 for a power of two n in 2..256, else 0. */
static uint32_t grid_cells_of(uint32_t vc) {
    const uint32_t s = (uint32_t)lround(sqrt((double)vc)), n = s - 1;
    return s >= 1 && s * s == vc && n >= 2 && n <= 256 && !(n & (n - 1)) ? n : 0;
}

/* The rules from the coarsest tile (e), decoded once: it must pass the extensions rule, and in a
 * local-frame archive of grids be a grid of n cells with every vertex on its lattice (n: the rules'
 * grid_cells). */
static terra_status rules_from(const vstate *v, const terra_archive_layout *L, const terra_archive_entry *e,
                               terra_tile_rules *rules) {
    terra_qmesh m;
    terra_status st = arc_check_tile(v->a, e, rules, v->names, &m, NULL, false, NULL, NULL);
    if (st) return st;
    const uint32_t n = L->frame == TERRA_FRAME_LOCAL && !L->tin ? grid_cells_of(m.vertex_count) : 0;
    if (L->frame == TERRA_FRAME_LOCAL && !L->tin && !n)
        st = terra_fail(TERRA_E_CORRUPT,
                        "%s: %s: %u vertices, not a grid of 2 to 256 cells a side (a power of two) as the tiles of a "
                        "local-frame archive of grids are (metadata \"mesh\": \"grid\" or none)",
                        v->path, name_of(v, e->key).s, m.vertex_count);
    else if (n && !(st = arc_check_grid(v->a, e, v->names, &m, n)))
        rules->grid_cells = (int)n;
    terra_qmesh_free(&m);
    return st;
}

/* ---- the archive as a whole ---------------------------------------------------------------------- */

/* What a level laid out whole may take beyond the tiles (arc_index_build: three floats a place) */
#define SPREAD_FLOOR 4194304.0 /* 2^22 places */

/* What the pass over the index found. */
typedef struct index_facts {
    uint64_t *order; /* per entry, in index order (meaningful where the entry reads) */
    float *error;
    uint64_t damaged, unsorted; /* entries that do not read, entries out of order */
    terra_archive_level lv[32]; /* per level: the tiles placed, their smallest and largest x, y */
    uint64_t decider;           /* the coarsest tile's entry (the first of its level), UINT64_MAX if none */
} index_facts;

/* The pass over the index: each entry read, ordered and placed. TERRA_E_IO or TERRA_E_NOMEM when
 * reading fails (the problems said so far stand). */
static terra_status index_pass(vstate *v, const terra_archive_layout *L, index_facts *F) {
    const uint64_t n = terra_archive_get_info(v->a)->tile_count;
    uint64_t prev = 0, prev_i = UINT64_MAX;
    int best = -1;
    F->decider = UINT64_MAX;
    arc_block b = {0};
    for (uint64_t i = 0; i < n; i++) {
        terra_archive_entry e;
        const terra_status st = arc_block_entry(v->a, &b, i, &e);
        if (st == TERRA_E_IO || st == TERRA_E_NOMEM) return st;
        if (st) {
            say(v, i, NULL, st, terra_last_error());
            F->damaged++;
            continue;
        }
        const uint64_t o = F->order[i] = terra_archive_order(e.key);
        F->error[i] = e.geometric_error;
        if (prev_i != UINT64_MAX && o <= prev) {
            F->unsorted++;
            if (o == prev) entry_problem(v, i, &e, "repeats the tile of index entry %llu", (unsigned long long)prev_i);
            else entry_problem(v, i, &e, "out of order (the index is sorted by face, level and Morton code)");
            continue;
        }
        prev = o, prev_i = i;
        if (!entry_placed(v, L, i, &e)) continue;
        const int l = terra_tile_key_level(e.key);
        const int32_t x = terra_tile_key_x(e.key), y = terra_tile_key_y(e.key);
        terra_archive_level *r = &F->lv[l];
        if (!r->tiles++) r->x0 = r->x1 = x, r->y0 = r->y1 = y;
        r->x0 = x < r->x0 ? x : r->x0, r->x1 = x > r->x1 ? x : r->x1;
        r->y0 = y < r->y0 ? y : r->y0, r->y1 = y > r->y1 ? y : r->y1;
        /* the coarsest level: local the highest, geographic level 0; its first entry in index order */
        const int rank = L->frame == TERRA_FRAME_LOCAL ? l : 31 - l;
        if (rank > best) best = rank, F->decider = i;
    }
    return TERRA_OK;
}

/* The pyramid, over an index whose every entry reads, in order (entries out of place left out). */
static void check_pyramid(vstate *v, terra_archive_layout *L, const index_facts *F) {
    const uint64_t n = terra_archive_get_info(v->a)->tile_count;
    const bool local = L->frame == TERRA_FRAME_LOCAL;
    const int top = L->max_level;
    for (int l = 0, end; l < top; l = end) { /* each run of empty levels, once */
        for (end = l; end < top && !F->lv[end].tiles; end++) {}
        if (end > l + 1)
            whole(v, TERRA_E_CORRUPT, "levels %d to %d hold no tiles: levels run from 0 (%s) to %d without a gap, as terra reads them",
                  l, end - 1, local ? "the finest" : "the two roots", top);
        else if (end > l)
            whole(v, TERRA_E_CORRUPT, "level %d holds no tiles: levels run from 0 (%s) to %d without a gap, as terra reads them",
                  l, local ? "the finest" : "the two roots", top);
        else end++;
    }
    /* every tile but the roots has its parent (tiles under an empty level are that level's problem) */
    uint64_t lower = 0;
    terra_tile_key low_child = 0, low_parent = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (v->bad[i]) continue;
        const terra_tile_key k = terra_archive_key_from_order(F->order[i]);
        const int l = terra_tile_key_level(k), pl = local ? l + 1 : l - 1;
        if ((local && l == top) || (!local && l == 0) || !F->lv[pl].tiles) continue;
        const int64_t px = local ? floor_half(terra_tile_key_x(k)) : terra_tile_key_x(k) / 2;
        const int64_t py = local ? floor_half(terra_tile_key_y(k)) : terra_tile_key_y(k) / 2;
        const terra_tile_key pk = terra_tile_key_make(0, pl, (int32_t)px, (int32_t)py);
        const int64_t p = find_order(F->order, n, terra_archive_order(pk));
        if (p < 0) {
            terra_archive_entry e = {.key = k};
            entry_problem(v, i, &e, "its parent, %s, is not in the archive", name_of(v, pk).s);
        } else if (F->error[p] < F->error[i] && !lower++) {
            low_child = k, low_parent = pk;
        }
    }
    if (lower)
        whole(v, TERRA_OK,
              "%llu tile%s a larger geometric error than %s parent (first: %s under %s): tolerated, each tile's own "
              "error decides whether it is refined",
              (unsigned long long)lower, lower == 1 ? " states" : "s state", lower == 1 ? "its" : "their",
              name_of(v, low_child).s, name_of(v, low_parent).s);
    if (!local) return;
    const double top_side = ldexp(L->tile_size_m, top);
    if (L->tile_size_m && top_side > TERRA_SELECT_MAX_SIDE)
        whole(v, TERRA_E_CORRUPT, "level %d's tiles are %g m on a side, past the %g m of the coarsest tiles terra draws", top,
              top_side, TERRA_SELECT_MAX_SIDE);
    if (top >= ARC_DRAWN_LEVELS) /* terra bake --levels 25 writes them */
        whole(v, TERRA_OK, "levels 0 to %d: %d levels, exported and served as they are; terra render, fly and view draw "
              "%d at most", top, top + 1, ARC_DRAWN_LEVELS);
    /* readers lay each level out whole (a place per tile from its smallest to its largest x and y):
     * sparse ground (terra cook leaves out tiles with no ground) spreads out, but within a bound */
    double places = 0;
    for (int l = 0; l <= top; l++) {
        const terra_archive_level *r = &F->lv[l];
        if (r->tiles) places += (double)((int64_t)r->x1 - r->x0 + 1) * (double)((int64_t)r->y1 - r->y0 + 1);
    }
    const double room = fmax(4.0 * (double)n + 64.0 * (top + 1), SPREAD_FLOOR);
    if (places > room)
        whole(v, TERRA_E_CORRUPT,
              "the levels' %llu tiles are spread over %.17g tile places, past the %.17g terra lays out (each level whole "
              "from its smallest to its largest x and y: 4 places a tile and 64 a level, or %.17g in all)",
              (unsigned long long)n, places, room, SPREAD_FLOOR);
    if (!L->tin && L->has_bounds && L->tile_size_m) { /* grids: level 0 covers the bounds */
        const double s = L->tile_size_m, *b = L->bounds;
        const double need = (ceil(b[2] / s) - floor(b[0] / s)) * (ceil(b[3] / s) - floor(b[1] / s));
        if ((double)F->lv[0].tiles != need)
            whole(v, TERRA_E_CORRUPT,
                  "level 0 holds %llu tiles where the bounds need %.17g: an archive of grids covers its bounds with "
                  "level-0 tiles (metadata \"mesh\": \"tin\" for one that does not)",
                  (unsigned long long)F->lv[0].tiles, need);
    }
}

/* Counts the metadata states that the index contradicts: notes. */
static void check_counts(vstate *v, const cJSON *root, const terra_archive_layout *L) {
    const double have[3] = {(double)terra_archive_get_info(v->a)->tile_count, L->min_level, L->max_level};
    static const char *names[3] = {"tile_count", "min_level", "max_level"};
    for (int k = 0; k < 3; k++) {
        const cJSON *m = cJSON_GetObjectItem(root, names[k]);
        if (cJSON_IsNumber(m) && m->valuedouble != have[k])
            whole(v, TERRA_OK, "metadata says %s %.17g, the index %.17g: the index is read", names[k], m->valuedouble,
                  have[k]);
    }
}

/* terra_archive_validate, leaving the rules, the problems, the bad entries and the tiles' names in v
 * and L whatever it finds (terra_archive_verify_tiles goes on with them). Returns TERRA_E_IO or
 * TERRA_E_NOMEM when reading fails, TERRA_OK otherwise (v->problems says whether the archive is
 * good; v->rules_st whether the rules were read). */
static terra_status validate(vstate *v, terra_archive_layout *L) {
    const terra_archive_info *I = terra_archive_get_info(v->a);
    memset(L, 0, sizeof *L);
    L->frame = I->frame;
    L->max_level = -1;
    cJSON *root = NULL;
    const bool kind = check_metadata(v, L, &root);
    index_facts F = {0};
    const size_t n = (size_t)I->tile_count;
    v->bad = terra_calloc(n ? n : 1, 1);
    F.order = terra_alloc((n ? n : 1) * sizeof *F.order);
    F.error = terra_alloc((n ? n : 1) * sizeof *F.error);
    terra_status st = v->bad && F.order && F.error ? TERRA_OK : terra_fail(TERRA_E_NOMEM, "archive validation: out of memory");
    if (!st) st = index_pass(v, L, &F);
    if (!st && !n) whole(v, TERRA_E_CORRUPT, "the index holds no tiles: nothing to draw, serve or export");
    memcpy(L->levels, F.lv, sizeof F.lv);
    L->min_level = 32;
    for (int l = 0; l < 32; l++)
        if (F.lv[l].tiles) L->max_level = l, L->min_level = L->min_level < l ? L->min_level : l;
    if (!st && n && !F.damaged && !F.unsorted && L->max_level >= 0) {
        /* the index is sound and places a tile (every entry out of place is said above): from here on tiles are named as Cesium's z/x/y too (terra_archive_tms_map) */
        v->map = (terra_tms_map){.frame = L->frame, .min_level = L->min_level, .max_level = L->max_level};
        if (L->frame == TERRA_FRAME_LOCAL) v->map.x0 = F.lv[L->max_level].x0, v->map.y0 = F.lv[L->max_level].y0;
        v->names = &v->map;
        check_pyramid(v, L, &F);
        if (root) check_counts(v, root, L);
    }
    /* the tiles' rules, from the coarsest tile, once the metadata says what the tiles are */
    if (!st && kind && F.decider != UINT64_MAX) {
        terra_archive_entry e;
        st = terra_archive_entry_at(v->a, F.decider, &e); /* it read in the pass */
        if (!st) st = rules_from(v, L, &e, &L->rules);
        if (st && st != TERRA_E_IO && st != TERRA_E_NOMEM) {
            no_rules(v, st, terra_last_error());
            if (!v->bad[F.decider]) say(v, F.decider, &e, st, v->rules_why);
            st = TERRA_OK;
        }
    }
    const int cells = L->rules.grid_cells;
    if (!st && cells && cells < TERRA_GRID_MIN_CELLS)
        whole(v, TERRA_OK, "tiles are grids of %d cells a side: terra render, fly and view draw grids of %d to %d cells", cells,
              TERRA_GRID_MIN_CELLS, TERRA_GRID_MAX_CELLS);
    if (!st && cells && L->has_bounds) { /* grids: the bounds hold a point of the lattice */
        const double s0 = L->tile_size_m / cells, *b = L->bounds;
        if (ceil(b[0] / s0) > floor(b[2] / s0) || ceil(b[1] / s0) > floor(b[3] / s0))
            whole(v, TERRA_E_CORRUPT, "the bounds hold no point of the tiles' lattice (every %g m)", s0);
    }
    cJSON_Delete(root);
    terra_free(F.order);
    terra_free(F.error);
    return st;
}

/* The status a run with problems ends with: the first problem, and how many more. */
static terra_status fail_first(const vstate *v) {
    if (v->problems == 1) return terra_fail(TERRA_E_CORRUPT, "%s", v->first);
    return terra_fail(TERRA_E_CORRUPT, "%s (and %llu more problems: terra info --verify lists them)", v->first,
                      (unsigned long long)(v->problems - 1));
}

terra_status terra_archive_validate(const terra_archive *a, terra_archive_report_fn report, void *user,
                                    terra_archive_layout *out) {
    vstate v = {.a = a, .path = terra_archive_path(a), .report = report, .user = user};
    terra_archive_layout L;
    terra_status st = validate(&v, &L);
    terra_free(v.bad);
    if (st) return st;
    if (v.problems) return fail_first(&v);
    if (out) *out = L;
    return TERRA_OK;
}

/* ---- rules alone, and the whole run -------------------------------------------------------------- */

bool terra_archive_is_tin(const terra_archive *a) {
    cJSON *root = terra_json_parse(terra_archive_get_info(a)->metadata);
    const cJSON *mesh = cJSON_GetObjectItem(root, "mesh");
    const bool tin = cJSON_IsString(mesh) && !strcmp(mesh->valuestring, "tin");
    cJSON_Delete(root);
    return tin;
}

terra_status terra_archive_tile_rules(const terra_archive *a, terra_tile_rules *out) {
    memset(out, 0, sizeof *out);
    vstate v = {.a = a, .path = terra_archive_path(a)};
    terra_archive_layout L;
    terra_status st = validate(&v, &L); /* the rules as every reader reads them; its other problems aside */
    terra_free(v.bad);
    if (st) return st;
    if (v.rules_st) return terra_fail(v.rules_st, "%s", v.rules_why);
    *out = L.rules;
    return TERRA_OK;
}

terra_status terra_archive_verify_tiles(const terra_archive *a, terra_archive_report_fn report, void *user,
                                        uint64_t *bad_out) {
    const terra_archive_info *I = terra_archive_get_info(a);
    vstate v = {.a = a, .path = terra_archive_path(a), .report = report, .user = user};
    terra_archive_layout L;
    terra_status st = validate(&v, &L), first_tile = TERRA_OK;
    const int n = L.rules.grid_cells;
    uint32_t *gv = n ? terra_alloc(((size_t)n + 1) * ((size_t)n + 1) * sizeof *gv) : NULL;
    if (!st && n && !gv) st = terra_fail(TERRA_E_NOMEM, "archive verify: out of memory");
    /* every tile whose entry is sound, through the one check readers decode through */
    arc_block b = {0};
    for (uint64_t i = 0; !st && i < I->tile_count; i++) {
        terra_archive_entry e;
        if (v.bad[i]) continue;
        terra_status ts = arc_block_entry(a, &b, i, &e);
        if (!ts) ts = arc_check_tile(a, &e, &L.rules, v.names, NULL, gv, false, NULL, NULL);
        if (ts == TERRA_E_NOMEM) st = ts;
        else if (ts) {
            if (!first_tile && !v.problems) first_tile = ts;
            say(&v, i, &e, ts, terra_last_error());
        }
    }
    terra_free(gv);
    terra_free(v.bad);
    if (bad_out) *bad_out = v.problems;
    if (st) return st;
    if (!v.problems) return TERRA_OK;
    const terra_status end = fail_first(&v);
    return first_tile == TERRA_E_IO ? terra_fail(TERRA_E_IO, "%s", terra_last_error()) : end;
}
