/* Helpers shared by every subcommand of the terra programs: messages, option parsing, sources. */
#include "cli.h"
#include "terra/archive_io.h"
#include "terra/archive_mesh.h"
#ifdef TERRA_HAVE_SCRIPT
#include "terra/script.h"
#endif

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "terra %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return EXIT_FAIL;
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "terra %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nTry 'terra %s --help'.\n", cmd);
    va_end(ap);
    return EXIT_USAGE;
}

bool cli_parse_double(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno) return false;
    *out = v;
    return true;
}

bool cli_parse_int(const char *s, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno) return false;
    *out = v;
    return true;
}

bool cli_parse_doubles(const char *s, double *out, int n) {
    const char *p = s;
    for (int i = 0; i < n; i++) {
        char *end;
        errno = 0;
        out[i] = strtod(p, &end);
        if (end == p || errno) return false;
        if (i < n - 1) {
            if (*end != ',') return false;
            p = end + 1;
        } else if (*end) {
            return false;
        }
    }
    return true;
}

bool cli_parse_bytes(const char *s, size_t *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !isfinite(v) || v <= 0) return false;
    double mul = 1;
    switch (*end) {
    case 'k': case 'K': mul = 1024.0, end++; break;
    case 'm': case 'M': mul = 1048576.0, end++; break;
    case 'g': case 'G': mul = 1073741824.0, end++; break;
    case 't': case 'T': mul = 1099511627776.0, end++; break;
    default: break;
    }
    if (mul > 1 && *end == 'i') end++;
    if (*end == 'B' || *end == 'b') end++;
    if (*end) return false;
    v *= mul;
    if (v < 1048576.0 || v > 1125899906842624.0) return false;
    *out = (size_t)v;
    return true;
}

bool cli_parse_size(const char *s, int *w, int *h) {
    char *end;
    long a = strtol(s, &end, 10);
    if (end == s || (*end != 'x' && *end != 'X')) return false;
    const char *q = end + 1;
    long b = strtol(q, &end, 10);
    if (end == q || *end || a <= 0 || b <= 0 || a > 16384 || b > 16384) return false;
    *w = (int)a;
    *h = (int)b;
    return true;
}

/* Prints a number of a range plainly: 1000000, not 1e+06 (the ranges are round numbers). */
static const char *num(char *buf, size_t n, double v) {
    if (fabs(v) < 1e15 && v == floor(v)) snprintf(buf, n, "%.0f", v);
    else snprintf(buf, n, "%g", v);
    return buf;
}

bool cli_opt_double(const char *cmd, const char *opt, const char *arg, const char *what, double lo, double hi,
                    double *out) {
    double v;
    if (cli_parse_double(arg, &v) && v >= lo && v <= hi) { /* NaN fails both comparisons */
        *out = v;
        return true;
    }
    char a[32], b[32];
    cli_usage_error(cmd, "%s wants %s from %s to %s, not '%s'", opt, what, num(a, sizeof a, lo), num(b, sizeof b, hi),
                    arg);
    return false;
}

bool cli_opt_long(const char *cmd, const char *opt, const char *arg, long lo, long hi, long *out) {
    long v;
    if (cli_parse_int(arg, &v) && v >= lo && v <= hi) {
        *out = v;
        return true;
    }
    cli_usage_error(cmd, "%s wants a whole number from %ld to %ld, not '%s'", opt, lo, hi, arg);
    return false;
}

bool cli_opt_int(const char *cmd, const char *opt, const char *arg, int lo, int hi, int *out) {
    long v;
    if (!cli_opt_long(cmd, opt, arg, lo, hi, &v)) return false;
    *out = (int)v;
    return true;
}

bool cli_opt_doubles(const char *cmd, const char *opt, const char *arg, const char *what, int n, double lo, double hi,
                     double *out) {
    double v[8];
    bool ok = n <= 8 && cli_parse_doubles(arg, v, n);
    for (int i = 0; ok && i < n; i++) ok = v[i] >= lo && v[i] <= hi;
    if (ok) {
        memcpy(out, v, sizeof *v * (size_t)n);
        return true;
    }
    char a[32], b[32];
    cli_usage_error(cmd, "%s wants %s, each from %s to %s, not '%s'", opt, what, num(a, sizeof a, lo),
                    num(b, sizeof b, hi), arg);
    return false;
}

bool cli_opt_seed(const char *cmd, const char *opt, const char *arg, uint64_t *out) {
    char *end;
    errno = 0;
    const unsigned long long v = strtoull(arg, &end, 10);
    /* strtoull takes "-1" as 2^64 - 1: a seed is written without a sign */
    if (arg[0] >= '0' && arg[0] <= '9' && end != arg && !*end && !errno) {
        *out = (uint64_t)v;
        return true;
    }
    cli_usage_error(cmd, "%s wants a whole number from 0 to 18446744073709551615, not '%s'", opt, arg);
    return false;
}

bool cli_opt_cells(const char *cmd, const char *opt, const char *arg, int lo, int hi, int *out) {
    long v;
    if (cli_parse_int(arg, &v) && v >= lo && v <= hi && (v & (v - 1)) == 0) {
        *out = (int)v;
        return true;
    }
    cli_usage_error(cmd, "%s wants a power of two from %d to %d, not '%s'", opt, lo, hi, arg);
    return false;
}

bool cli_opt_size(const char *cmd, const char *opt, const char *arg, int lo, int hi, int *w, int *h) {
    int a, b;
    if (cli_parse_size(arg, &a, &b) && a >= lo && b >= lo && a <= hi && b <= hi) {
        *w = a, *h = b;
        return true;
    }
    cli_usage_error(cmd, "%s wants WxH from %dx%d to %dx%d, not '%s'", opt, lo, lo, hi, hi, arg);
    return false;
}

/* ---- the world and camera of the drawing commands ----------------------------------------------- */

#define PI 3.14159265358979323846
#define STR_(x) #x
#define STR(x) STR_(x)

/* The defaults of fly, render and view. */
static const cli_scene scene_defaults = {
    .seed = 1,
    .sel = {.grid = {.tile0_size = 64, .cells = 32}, .levels = 12}, /* range0 0: the selection's default */
    .width = 960,
    .height = 540,
    .fov = 60,
    .sse = 2,
    .above = 40,
    .yaw = 0,
    .pitch = -10,
    .lat = -4.3, /* the built-in planet's highest range (seed 1) */
    .lon = -12.3,
    .alt = 2000,
};

typedef enum { K_SEED, K_CELLS, K_INT, K_DOUBLE, K_XYZ, K_PAIR, K_SIZE, K_TEXT, K_FLAG } opt_kind;

typedef struct scene_opt {
    const char *name, *arg; /* --name ARG; arg NULL: a flag */
    unsigned group;
    opt_kind kind;
    double lo, hi;      /* the range: checked, and named in the message and in --help */
    const char *what;   /* what a value is, in the message ("metres") */
    size_t off, have;   /* the field of cli_scene it sets; a bool set when it is given (0: none) */
    const char *help;   /* %R: the range, %D: the default; a newline goes on under the text */
} scene_opt;

#define TILE0_MAX 100000.0 /* metres: a level-0 tile's side at most */
#define AT(field) offsetof(cli_scene, field)
static const scene_opt scene_opts[] = {
    {"seed", "N", CLI_WORLD, K_SEED, 0, 0, NULL, AT(seed), 0, "world seed, %R (default %D)"},
    {"cells", "N", CLI_WORLD, K_CELLS, TERRA_GRID_MIN_CELLS, TERRA_GRID_MAX_CELLS, NULL, AT(sel.grid.cells), AT(have_cells),
     "cells per tile side, a power of two %R (default %D; with\n--planet 16)"},
    {"tile0", "M", CLI_WORLD, K_DOUBLE, 0.01, TILE0_MAX, "metres", AT(sel.grid.tile0_size), 0,
     "side of a level-0 tile in metres, %R (default %D)"},
    {"levels", "N", CLI_WORLD, K_INT, 1, 24 /* select.h */, NULL, AT(sel.levels), 0, "number of levels, %R (default %D)"},
    /* at most: the coarsest level's range, range0 x 2^(levels - 1), within 64 of its tiles, whose side is
     * tile0 x 2^(levels - 1); the rules of select.h say the rest */
    {"range0", "M", CLI_WORLD, K_DOUBLE, 0.01, TERRA_SELECT_MAX_RANGE_TILES * TILE0_MAX, "metres", AT(sel.range0), 0,
     "range of level 0 in metres, %R (default: each level's\nrange from --sse, the picture's height, --fov and the "
     "world's\nmeasured error per level); the coarsest level's range, range0 x\n2^(levels - 1), at most "
     STR(TERRA_SELECT_MAX_RANGE_TILES) " of its tiles; with it, each\nlevel's range is twice the one before"},
    {"source", "FILE", CLI_WORLD, K_TEXT, 0, 0, NULL, AT(script), 0,
     "the ground of a Lua script instead of the default world (script.h:\nreturns { height = function(x, z) ... end, "
     "layer, layers, range });\n--seed is its terra.world's; edited while drawing, it is drawn anew;\n"
     "it runs sandboxed, without the file system or the process"},
    {"trust-script", NULL, CLI_WORLD, K_FLAG, 0, 0, NULL, AT(trust_script), 0,
     "run --source with all of LuaJIT's libraries (os, io, ffi, debug,\nbytecode): only a script you wrote or "
     "trust as a program"},
    {"edits", "FILE", CLI_WORLD, K_TEXT, 0, 0, NULL, AT(journal), 0,
     "an edit journal (edit.h) replayed over the ground, created if missing;\nterra view appends what its "
     "mouse digs (left) and raises (right)"},
    {"archive", "A", CLI_ARCHIVE, K_TEXT, 0, 0, NULL, AT(archive), 0,
     "draw a local-frame archive instead of the default world: terra cook's\nTIN tiles as they are, each where its "
     "geometric error projects to at\nmost --sse pixels; terra bake's grids meshed again (CDLOD); --seed,\n--cells, "
     "--tile0, --levels, --range0 do not apply; nothing past its edge"},
    {"size", "WxH", CLI_LENS, K_SIZE, 16, 8192, NULL, 0, 0,
     "picture size in pixels (terra view: the window's),\n%R (default %D)"},
    {"fov", "DEG", CLI_LENS, K_DOUBLE, 1, 170, "degrees", AT(fov), 0, "vertical field of view, %R (default %D)"},
    {"sse", "PX", CLI_LENS, K_DOUBLE, 0.1, 1000, "pixels", AT(sse), 0,
     "screen-space error: how far, in pixels, a drawn tile may depart\nfrom the finest ground, %R (default %D); "
     "without --range0 the\ndefault world's ranges follow from it"},
    {"eye", "X,Y,Z", CLI_POSE, K_XYZ, -CLI_MAX_COORD, CLI_MAX_COORD, "X,Y,Z in metres", AT(eye), AT(have_eye),
     "eye position in world metres (y up), each %R\n(default: --above over 0,0,0, or over an archive's middle)"},
    {"above", "H", CLI_POSE, K_DOUBLE, 0.01, 1e6, "a height in metres", AT(above), AT(have_above),
     "put the eye H metres above the ground at X, Z (Y is\nignored), %R (default %D)"},
    {"yaw", "DEG", CLI_POSE, K_DOUBLE, -360, 360, "degrees", AT(yaw), 0,
     "heading, turning from -z toward +x, %R (default %D)"},
    {"pitch", "DEG", CLI_POSE, K_DOUBLE, -90, 90, "degrees", AT(pitch), 0, "up from the horizon, %R (default %D)"},
    {"level-tint", NULL, CLI_STYLE, K_FLAG, 0, 0, NULL, AT(level_tint), 0, "colour tiles by level instead of surface"},
    {"no-morph", NULL, CLI_STYLE, K_FLAG, 0, 0, NULL, AT(no_morph), 0, "draw tiles unmorphed (shows what morphing hides)"},
    {"no-occlusion", NULL, CLI_STYLE, K_FLAG, 0, 0, NULL, AT(no_occlusion), 0,
     "draw ground hidden behind nearer hills too (the same picture, more\ntriangles: what occlusion culling saves)"},
    {"clear", "R,G,B", CLI_STYLE, K_XYZ, 0, 255, "R,G,B", AT(clear), AT(have_clear),
     "no sky and no fog, only this colour behind the ground (a hole\nshows as it), each %R"},
    {"ramp", "LO,HI", CLI_STYLE, K_PAIR, -12000, 100000, "LO,HI in metres", AT(ramp), AT(have_ramp),
     "the ground gray by its height alone, unlit: black at LO metres, white\nat HI (to compare with another "
     "renderer's elevation ramp), each %R"},
    {"material", "FILE", CLI_STYLE, K_TEXT, 0, 0, NULL, AT(material_path), 0,
     "shade every tile with your GLSL function vec3 terra_material(terra_ground\ng) in FILE (terra_gl_style.material "
     "in gl.h says what g holds)"},
    {"planet", NULL, CLI_PLANET, K_FLAG, 0, 0, NULL, AT(planet), 0,
     "a whole planet (planet.h: six face quadtrees on a sphere of 6,371 km,\ncontinents, ranges and seas of --seed) "
     "instead of the plane; the\ncamera by --lat, --lon, --alt, --heading and --pitch; with --archive A\n"
     "a geographic archive's ground (terra cook's, terra bake --frame\ngeographic's) drawn where it lies on WGS84, "
     "the planet's around it"},
    {"wgs84", NULL, CLI_PLANET, K_FLAG, 0, 0, NULL, AT(wgs84), 0,
     "with --planet: on the WGS84 ellipsoid, not a sphere (with --archive\nalways)"},
    {"lat", "DEG", CLI_PLANET, K_DOUBLE, -90, 90, "degrees", AT(lat), AT(have_lat),
     "with --planet: the eye's (geodetic) latitude, %R (default %D;\nwith --archive its middle)"},
    {"lon", "DEG", CLI_PLANET, K_DOUBLE, -180, 180, "degrees", AT(lon), AT(have_lon), "with --planet: its longitude, %R (default %D)"},
    {"alt", "M", CLI_PLANET, K_DOUBLE, 0.1, 1e8, "a height in metres", AT(alt), 0,
     "with --planet: metres above the ground under the eye, %R\n(default %D)"},
    {"heading", "DEG", CLI_PLANET, K_DOUBLE, -360, 360, "degrees", AT(heading), 0,
     "with --planet: from north toward east, %R (default %D)"},
};
#undef AT
#undef TILE0_MAX
enum { NSCENE_OPTS = (int)(sizeof scene_opts / sizeof scene_opts[0]) };

/* The range of an option as its message says it ("from 16 to 256"). */
static const char *range_text(const scene_opt *o, char *buf, size_t n) {
    char a[32], b[32];
    switch (o->kind) {
    case K_SEED: snprintf(buf, n, "from 0 to %llu", (unsigned long long)UINT64_MAX); break;
    case K_CELLS:
    case K_INT: snprintf(buf, n, "from %ld to %ld", (long)o->lo, (long)o->hi); break;
    case K_SIZE: snprintf(buf, n, "from %dx%d to %dx%d", (int)o->lo, (int)o->lo, (int)o->hi, (int)o->hi); break;
    case K_DOUBLE:
    case K_XYZ:
    case K_PAIR: snprintf(buf, n, "from %s to %s", num(a, sizeof a, o->lo), num(b, sizeof b, o->hi)); break;
    default: snprintf(buf, n, "%s", "");
    }
    return buf;
}

static const char *default_text(const scene_opt *o, char *buf, size_t n) {
    const char *p = (const char *)&scene_defaults + o->off;
    switch (o->kind) {
    case K_SEED: snprintf(buf, n, "%llu", (unsigned long long)*(const uint64_t *)p); break;
    case K_CELLS:
    case K_INT: snprintf(buf, n, "%d", *(const int *)p); break;
    case K_SIZE: snprintf(buf, n, "%dx%d", scene_defaults.width, scene_defaults.height); break;
    case K_DOUBLE: num(buf, n, *(const double *)p); break;
    default: snprintf(buf, n, "%s", "");
    }
    return buf;
}

/* Takes one shared option's argument into *s; false after the message. */
static bool scene_opt_set(const char *cmd, const scene_opt *o, const char *arg, cli_scene *s) {
    char opt[32];
    snprintf(opt, sizeof opt, "--%s", o->name);
    char *p = (char *)s + o->off;
    bool ok = true;
    switch (o->kind) {
    case K_SEED: ok = cli_opt_seed(cmd, opt, arg, (uint64_t *)p); break;
    case K_CELLS: ok = cli_opt_cells(cmd, opt, arg, (int)o->lo, (int)o->hi, (int *)p); break;
    case K_INT: ok = cli_opt_int(cmd, opt, arg, (int)o->lo, (int)o->hi, (int *)p); break;
    case K_DOUBLE: ok = cli_opt_double(cmd, opt, arg, o->what, o->lo, o->hi, (double *)p); break;
    case K_XYZ: ok = cli_opt_doubles(cmd, opt, arg, o->what, 3, o->lo, o->hi, (double *)p); break;
    case K_PAIR: ok = cli_opt_doubles(cmd, opt, arg, o->what, 2, o->lo, o->hi, (double *)p); break;
    case K_SIZE: ok = cli_opt_size(cmd, opt, arg, (int)o->lo, (int)o->hi, &s->width, &s->height); break;
    case K_TEXT: *(const char **)p = arg; break;
    case K_FLAG: *(bool *)p = true; break;
    }
    if (ok && o->have) *(bool *)((char *)s + o->have) = true;
    return ok;
}

void cli_scene_help(FILE *f, unsigned groups) {
    enum { COL = 24 };
    fprintf(f, "\nWorld and camera (the same options in terra fly, render and view, where they apply):\n");
    for (int i = 0; i < NSCENE_OPTS; i++) {
        const scene_opt *o = &scene_opts[i];
        if (!(o->group & groups)) continue;
        char head[48], range[128], dflt[32];
        snprintf(head, sizeof head, "      --%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
        fprintf(f, "%-*s", COL, head);
        for (const char *p = o->help; *p; p++) {
            if (p[0] == '%' && p[1] == 'R') fputs(range_text(o, range, sizeof range), f), p++;
            else if (p[0] == '%' && p[1] == 'D') fputs(default_text(o, dflt, sizeof dflt), f), p++;
            else if (*p == '\n') fprintf(f, "\n%*s", COL, "");
            else fputc(*p, f);
        }
        fputc('\n', f);
    }
}

int cli_scene_parse(const char *cmd, int argc, char **argv, unsigned groups, const char *shortopts,
                    const struct option *longopts, cli_own_fn fn, void *own, void (*usage)(FILE *),
                    cli_scene *s) {
    enum { CAP = 64 };
    struct option opts[CAP];
    int n = 0;
    for (int i = 0; longopts && longopts[i].name; i++) {
        if (n >= CAP - NSCENE_OPTS - 2) return cli_error(cmd, "too many options");
        opts[n++] = longopts[i];
    }
    for (int i = 0; i < NSCENE_OPTS; i++)
        if (scene_opts[i].group & groups)
            opts[n++] = (struct option){scene_opts[i].name, scene_opts[i].arg ? required_argument : no_argument, NULL,
                                        CLI_SCENE_OPT + i};
    opts[n++] = (struct option){"help", no_argument, NULL, 'h'};
    opts[n] = (struct option){NULL, 0, NULL, 0};
    char so[64];
    snprintf(so, sizeof so, "%sh", shortopts ? shortopts : "");

    *s = scene_defaults;
    s->groups = groups;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, so, opts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return CLI_HELP;
        }
        if (c >= CLI_SCENE_OPT && c < CLI_SCENE_OPT + NSCENE_OPTS) {
            if (!scene_opt_set(cmd, &scene_opts[c - CLI_SCENE_OPT], optarg, s)) return EXIT_USAGE;
        } else if (c == '?' || c == ':' || !fn) {
            return cli_usage_error(cmd, "unknown option");
        } else if (!fn(own, c, optarg)) {
            return EXIT_USAGE;
        }
    }
    if (optind < argc) return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    if (s->script && s->archive) return cli_usage_error(cmd, "--source and --archive are two grounds: give one");
    if (s->trust_script && !s->script) return cli_usage_error(cmd, "--trust-script trusts the script of --source: give one");
    if (s->planet && (s->script || s->journal))
        return cli_usage_error(cmd, "--planet draws the built-in planet (and --archive); --source and --edits are not drawn on it yet");
    if (s->wgs84 && !s->planet) return cli_usage_error(cmd, "--wgs84 shapes a planet: give --planet");
    if (s->have_ramp && !(s->ramp[1] > s->ramp[0]))
        return cli_usage_error(cmd, "--ramp LO,HI needs HI above LO (got %g,%g)", s->ramp[0], s->ramp[1]);
    if (s->planet && (s->have_eye || s->have_above))
        return cli_usage_error(cmd, "--planet places the eye by --lat, --lon and --alt, not --eye or --above");
    if (s->journal && s->archive) return cli_usage_error(cmd, "--edits go over the default world or --source, not --archive");
    /* --tile0, --levels and --range0 together: the selection's rules (a range0 long enough for the
     * morph, a coarsest level of bounded size); an archive brings its own */
    terra_select_desc r;
    if (!s->archive && !s->planet && terra_select_desc_resolve(&s->sel, &r) != TERRA_OK)
        return cli_usage_error(cmd, "%s", terra_last_error());
    if (!s->have_eye) s->have_above = true; /* default: above the ground at the origin (or an archive's middle) */
    if (s->material_path) { /* read now: a material that cannot be had stops the command before any frame */
        static char text[1 << 16];
        FILE *f = fopen(s->material_path, "rb");
        if (!f) return cli_error(cmd, "--material %s: cannot read: %s", s->material_path, strerror(errno));
        const size_t n = fread(text, 1, sizeof text, f);
        const bool bad = ferror(f), long_ = n == sizeof text;
        fclose(f);
        if (bad) return cli_error(cmd, "--material %s: cannot read: %s", s->material_path, strerror(errno));
        if (long_) return cli_error(cmd, "--material %s: longer than %zu bytes", s->material_path, sizeof text - 1);
        if (memchr(text, 0, n)) return cli_error(cmd, "--material %s: a NUL byte at byte %zu: not GLSL text", s->material_path,
                                                 (size_t)((char *)memchr(text, 0, n) - text));
        text[n] = 0;
        s->material = text;
    }
    return EXIT_OK;
}

terra_status cli_scene_open(cli_scene *s, terra_source **src) {
    *src = NULL;
    terra_status st;
    s->sel.max_sse_px = s->sse;
    s->sel.view_height_px = s->height;
    s->sel.view_fov_y_rad = s->fov * PI / 180;
    if (!s->archive) {
        if (s->script) {
            st = cli_script_open(s->script, s->seed, s->trust_script, &s->lua);
            if (st == TERRA_OK) *src = cli_script_source(s->lua);
        } else {
            st = terra_world_create(&(terra_world_desc){.seed = s->seed}, src);
            if (st == TERRA_OK) s->world = *src;
        }
        if (st == TERRA_OK && (s->journal || s->want_edits)) { /* the edits over it */
            st = terra_edit_layer_create(&(terra_edit_layer_desc){.base = *src, .journal = s->journal}, &s->edits);
            if (st == TERRA_OK) *src = terra_edit_layer_source(s->edits);
        }
        if (st == TERRA_OK && s->sel.range0 == 0) { /* ranges from what the screen resolves */
            st = terra_grid_level_errors(*src, &s->sel.grid, s->sel.levels, s->eye[0], s->eye[2], s->sel.level_error);
            terra_select_desc r;
            if (st == TERRA_OK) st = terra_select_desc_resolve(&s->sel, &r);
            if (st == TERRA_OK) s->sel = r;
            double px;
            const int capped = st == TERRA_OK ? terra_select_derived_capped(&r, &px) : -1;
            if (capped >= 0)
                fprintf(stderr,
                        "terra: note: at --sse %g this view asks for levels to reach past %d of their tiles (level %d "
                        "the finest): they stop there, and the next level's error projects up to %.2g px\n",
                        s->sse, TERRA_SELECT_MAX_DERIVED_RANGE_TILES, capped, px);
        }
    } else {
        /* TIN tiles are drawn as they are; grid tiles go back to heights, meshed and morphed as CDLOD
         * grids (their lattice checked: archive_io.h) */
        terra_archive *probe; /* the header and metadata only: which reader it wants */
        st = terra_archive_open(s->archive, NULL, &probe);
        const bool tin = st == TERRA_OK && terra_archive_is_tin(probe);
        terra_archive_close(probe);
        int levels = 0;
        const double *bounds = NULL;
        terra_archive_mesh_info ai;
        terra_archive_source_info gi;
        if (st == TERRA_OK && tin && (st = terra_archive_mesh_open(s->archive, NULL, &s->mesh, &ai)) == TERRA_OK) {
            *src = (terra_source *)terra_archive_mesh_source(s->mesh);
            s->sel.grid.tile0_size = ai.tile0_size;
            levels = ai.levels, bounds = ai.bounds;
        } else if (st == TERRA_OK && !tin && (st = terra_archive_source_create(s->archive, src, &gi)) == TERRA_OK) {
            s->sel.grid = gi.grid;
            levels = gi.levels, bounds = gi.bounds;
        }
        if (st == TERRA_OK) {
            s->sel.levels = levels;
            memcpy(s->sel.bounds, bounds, sizeof s->sel.bounds);
            if (!s->have_eye) { /* over the middle of its area */
                s->eye[0] = 0.5 * (bounds[0] + bounds[2]);
                s->eye[2] = 0.5 * (bounds[1] + bounds[3]);
            }
        }
    }
    if (st == TERRA_OK && (s->groups & CLI_POSE) && s->have_above) {
        float g = 0;
        st = terra_source_height(*src, s->eye[0], s->eye[2], &g);
        s->eye[1] = g + s->above;
    }
    return st;
}

void cli_scene_close(cli_scene *s, terra_source *src) {
    terra_edit_layer_destroy(s->edits); /* before the grounds under them */
    terra_edit_layer_destroy(s->retired_edits);
    s->edits = s->retired_edits = NULL;
    if (s->mesh) {
        terra_archive_mesh_close(s->mesh); /* its source with it */
        s->mesh = NULL;
    } else if (s->lua) {
        cli_script_close(s->lua); /* its source with it */
        cli_script_close(s->retired);
        s->lua = s->retired = NULL;
    } else {
        terra_source_destroy(s->world ? s->world : src);
        s->world = NULL;
    }
}

/* ---- scripts (libterra-script, where it is built) ------------------------------------------------- */

void cli_ground_json(char *out, size_t n, const char *script, uint64_t seed, double scale) {
    if (!script) {
        snprintf(out, n, "\"kind\":\"default-world\",\"seed\":%llu,\"scale\":%.17g", (unsigned long long)seed, scale);
        return;
    }
    size_t at = (size_t)snprintf(out, n, "\"kind\":\"script\",\"path\":\"");
    for (const unsigned char *c = (const unsigned char *)script; *c && at + 8 < n; c++) {
        if (*c == '"' || *c == '\\') out[at++] = '\\', out[at++] = (char)*c;
        else if (*c < 0x20) at += (size_t)snprintf(out + at, n - at, "\\u%04x", *c);
        else out[at++] = (char)*c;
    }
    snprintf(out + at, n - at, "\",\"world_seed\":%llu", (unsigned long long)seed);
}

#ifdef TERRA_HAVE_SCRIPT
terra_status cli_script_open(const char *path, uint64_t seed, bool trusted, terra_script **out) {
    return terra_script_open(&(terra_script_desc){.path = path, .world_seed = seed, .trusted = trusted}, out);
}
terra_source *cli_script_source(terra_script *s) { return terra_script_source(s); }
void cli_script_close(terra_script *s) { terra_script_close(s); }
bool cli_script_changed(const terra_script *s) { return terra_script_changed(s); }
static const terra_surface_table *script_surfaces(const terra_script *s) { return terra_script_surfaces(s); }
#else
terra_status cli_script_open(const char *path, uint64_t seed, bool trusted, terra_script **out) {
    (void)seed, (void)trusted;
    *out = NULL;
    return terra_fail(TERRA_E_UNSUPPORTED, "%s: this terra was built without scripts (LuaJIT: libluajit-5.1-dev)", path);
}
terra_source *cli_script_source(terra_script *s) { return (void)s, NULL; }
void cli_script_close(terra_script *s) { (void)s; }
bool cli_script_changed(const terra_script *s) { return (void)s, false; }
static const terra_surface_table *script_surfaces(const terra_script *s) { return (void)s, NULL; }
#endif

terra_gl_style cli_scene_style(const cli_scene *s) {
    terra_gl_style st = {.level_tint = s->level_tint, .no_morph = s->no_morph, .no_occlusion = s->no_occlusion,
                         .flat = s->have_clear,
                         .surfaces = s->lua ? script_surfaces(s->lua) : NULL, .material = s->material,
                         .material_name = s->material_path};
    for (int i = 0; i < 3; i++) st.clear_rgb[i] = (float)(s->clear[i] / 255.0);
    if (s->have_ramp) st.ramp[0] = (float)s->ramp[0], st.ramp[1] = (float)s->ramp[1];
    return st;
}

terra_status cli_planet_open(const cli_scene *s, terra_planet **planet) {
    *planet = NULL;
    terra_geo_grid *grid = NULL;
    if (s->archive) { /* its ground sampled into a grid the planet lays over its own */
        terra_archive *a;
        terra_status st = terra_archive_open(s->archive, NULL, &a);
        int level = 0;
        if (st == TERRA_OK) {
            st = terra_geo_grid_from_archive(a, 0, &grid, &level);
            terra_archive_close(a);
        }
        if (st != TERRA_OK) return st;
        const terra_geo_grid_desc *g = terra_geo_grid_get_desc(grid);
        float lo, hi;
        bool holes;
        terra_geo_grid_height_bounds(grid, &lo, &hi, &holes);
        fprintf(stderr, "%s: level %d's tiles sampled into %d x %d heights over %.6g, %.6g .. %.6g, %.6g (%.1f m apart "
                "north-south), %.0f..%.0f m%s\n", s->archive, level, g->width, g->height, g->bounds[0], g->bounds[1],
                g->bounds[2], g->bounds[3], (g->bounds[3] - g->bounds[1]) / (g->height - 1) * 110574.0, lo, hi,
                holes ? ", with holes (the planet's ground shows there)" : "");
    }
    const terra_status st = terra_planet_create(&(terra_planet_desc){.seed = s->seed, .cells = s->have_cells ? s->sel.grid.cells : 0,
                                                                      .wgs84 = s->wgs84 || grid, .overlay = grid},
                                                planet);
    if (st != TERRA_OK) terra_geo_grid_destroy(grid);
    return st;
}

void cli_planet_close(terra_planet *p) {
    if (!p) return;
    terra_geo_grid *grid = (terra_geo_grid *)terra_planet_get_desc(p)->overlay; /* cli_planet_open's */
    terra_planet_destroy(p);
    terra_geo_grid_destroy(grid);
}

terra_camera cli_planet_camera(const cli_scene *s, const terra_planet *p) {
    double lat = s->lat, lon = s->lon;
    const terra_geo_grid *grid = terra_planet_get_desc(p)->overlay;
    if (grid && !s->have_lat && !s->have_lon) { /* over the archive's middle */
        const double *b = terra_geo_grid_get_desc(grid)->bounds;
        lat = 0.5 * (b[1] + b[3]), lon = 0.5 * (b[0] + b[2]);
    }
    const terra_vec3 d = terra_planet_latlon_dir(lat, lon);
    return (terra_camera){.eye = terra_planet_point(p, d, terra_planet_height(p, d) + s->alt), .yaw_rad = s->heading * PI / 180,
                          .pitch_rad = s->pitch * PI / 180, .fov_y_rad = s->fov * PI / 180, .up = d};
}

terra_vec3 cli_planet_sun(terra_vec3 eye) {
    /* the plane's default sun (-x, +z: from the south-west, 25 degrees up) in the eye's east, north, up */
    terra_vec3 e, n, u;
    terra_planet_frame(eye, &e, &n, &u);
    return (terra_vec3){-0.62 * e.x - 0.66 * n.x + 0.42 * u.x, -0.62 * e.y - 0.66 * n.y + 0.42 * u.y,
                        -0.62 * e.z - 0.66 * n.z + 0.42 * u.z};
}

terra_camera cli_scene_camera(const cli_scene *s) {
    return (terra_camera){.eye = {s->eye[0], s->eye[1], s->eye[2]}, .yaw_rad = s->yaw * PI / 180,
                          .pitch_rad = s->pitch * PI / 180, .fov_y_rad = s->fov * PI / 180};
}

int cli_failed_tiles(const char *cmd, const terra_stream *stream) {
    enum { SHOWN = 5 };
    terra_tile_key keys[SHOWN];
    const int n = terra_stream_failed(stream, keys, SHOWN);
    const uint64_t total = terra_stream_get_stats(stream)->total_failed;
    if (n == 0 && total == 0) return EXIT_OK;
    if (n == 0) return cli_error(cmd, "%llu tile loads failed; the reasons are above", (unsigned long long)total);
    char list[SHOWN * 40] = "";
    size_t len = 0;
    for (int i = 0; i < n && i < SHOWN; i++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%d/%d/%d", i ? ", " : "", terra_tile_key_level(keys[i]),
                                terra_tile_key_x(keys[i]), terra_tile_key_y(keys[i]));
    return cli_error(cmd, "%d tile%s failed to load and %s drawn as %s ancestor%s (level/x/y): %s%s; the reasons are "
                     "above",
                     n, n == 1 ? "" : "s", n == 1 ? "was" : "were", n == 1 ? "its" : "their", n == 1 ? "" : "s", list,
                     n > SHOWN ? ", ..." : "");
}

/* ---- what a check of an archive found ------------------------------------------------------------- */

typedef struct cli_report {
    const char *cmd;
    uint64_t whole, tiles, notes; /* problems of the archive as a whole, bad tiles, notes */
} cli_report;

static void report_one(void *user, uint64_t index, const terra_archive_entry *e, terra_status st, const char *msg) {
    (void)e;
    cli_report *r = user;
    if (st == TERRA_OK) {
        if (r->notes++ < CLI_REPORT_LINES) printf("note        %s\n", msg);
        return;
    }
    if (r->whole + r->tiles < CLI_REPORT_LINES) fprintf(stderr, "terra %s: %s\n", r->cmd, msg);
    if (index == TERRA_ARCHIVE_WHOLE) r->whole++;
    else r->tiles++;
}

int cli_verify_archive(const char *cmd, const terra_archive *a) {
    cli_report r = {.cmd = cmd};
    const terra_status st = terra_archive_verify_tiles(a, report_one, &r, NULL);
    const char *path = terra_archive_path(a);
    const uint64_t named = CLI_REPORT_LINES, all = r.whole + r.tiles;
    if (r.notes > named) printf("note        ... and %llu more notes\n", (unsigned long long)(r.notes - named));
    /* reading failed (the problems before it stand), or a failure no report carried */
    if (st == TERRA_E_IO || st == TERRA_E_NOMEM || (st && !all)) cli_error(cmd, "%s", terra_last_error());
    if (!all) return st ? EXIT_FAIL : EXIT_OK;
    if (all > named) fprintf(stderr, "terra %s: %s: ... and %llu more problems\n", cmd, path, (unsigned long long)(all - named));
    char whole[96] = "", tiles[96] = "";
    if (r.whole)
        snprintf(whole, sizeof whole, "%llu problem%s with the archive as a whole", (unsigned long long)r.whole,
                 r.whole == 1 ? "" : "s");
    if (r.tiles || !r.whole)
        snprintf(tiles, sizeof tiles, "%llu of %llu tiles bad", (unsigned long long)r.tiles,
                 (unsigned long long)terra_archive_get_info(a)->tile_count);
    return cli_error(cmd, "%s: %s%s%s", path, whole, r.whole && tiles[0] ? "; " : "", tiles);
}
