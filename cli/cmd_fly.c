/* terra fly: flies a built-in camera path over the default world (or an archive's area) and renders
 * it headless (OpenGL on EGL) to a PNG sequence and a contact sheet; prints per-frame and summary statistics; with
 * --map, draws top-down maps of the selection as well. */
#include "cli.h"
#include "fly_path.h"
#include "planet_path.h"
#include "terra/gl.h"
#include "terra/io.h"
#include "terra/select.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct fly_opts {
    int frames;
    int maps;
    int map_size;
    int sheet;     /* frames on the contact sheet */
    const char *out;
    bool quiet, settle, no_frames;
    cli_scene scene; /* the world, --size and --fov, the style */
} fly_opts;

/* No pose: the path flies over the default world, or over an archive's area. */
enum { FLY_GROUPS = CLI_WORLD | CLI_ARCHIVE | CLI_LENS | CLI_STYLE | CLI_PLANET };

static void fly_usage(FILE *f) {
    fprintf(f,
            "Usage: terra fly [OPTIONS]\n"
            "       terra fly --planet [OPTIONS]\n\n"
            "Flies a built-in camera path over the default world (12 km east along an S, from 40 m\n"
            "above the ground up to 2.5 km and back; over an archive, the same shape across its area)\n"
            "and renders it headless (OpenGL 4.5 on EGL, no display or GPU needed): DIR/frame_NNNN.png\n"
            "for every frame and DIR/contact_sheet.png with a few of them. Tiles come through the streamer, within its per-frame budget: by default it\n"
            "runs until every tile the view wants is held (full detail in every picture); with\n"
            "--realtime it runs once a frame, as a game would, and ancestors stand in for tiles still\n"
            "being meshed. Prints a row per frame (tiles drawn by level, triangles, draw\n"
            "calls, CPU ms for select / stream / upload / submit, bytes held) and a summary.\n"
            "With --map, also writes DIR/map_NNNN.png: top-down maps of the selection, three panels\n"
            "around the eye (out to level 2's range, level 5's, and all), tiles coloured by level\n"
            "(legend beneath, level 0 first), the morph as a blend toward the next level's colour,\n"
            "the frustum's sides and the eye in white.\n"
            "With --planet, the path is a descent over a whole planet from 20,000 km to 2 m above its\n"
            "highest range, then a low flight north over a cube face's edge and the pole; every frame\n"
            "is drawn whole (the tiles it wants meshed first), or with --realtime within 4 ms of uploads\n"
            "a frame, ancestors up to two levels coarser standing in; the rows give latitude,\n"
            "longitude and height over the ground.\n"
            "Columns: sel/str/wait/upl/sub ms are terra's CPU time (selection, streamer bookkeeping,\n"
            "waiting for stand-ins within two levels, uploads of arrived tiles, the frame's per-tile\n"
            "records outside GL calls: the culling runs on the GPU);\n"
            "drv ms is spent inside the frame's GL calls and ras ms waiting for the picture (the driver's:\n"
            "llvmpipe shades vertices and pixels and runs the culling on the CPU); '*' marks frames where\n"
            "ancestors stood in for tiles still streaming. The summary gives terra's CPU per frame\n"
            "(select + stream + wait + submit) as a median and 99th percentile.\n\n"
            "Options:\n"
            "  -n, --frames N        frames to fly, from 1 to 1000000 (default 240)\n"
            "  -o, --out DIR         where pictures go (default fly-out; created if missing)\n"
            "      --sheet N         frames on the contact sheet, from 0 to 64 (default 8; 0: no sheet)\n"
            "      --no-frames       write no frame PNGs (the contact sheet and maps still)\n"
            "      --realtime        run the streamer once a frame instead of until it settles\n"
            "      --map             write top-down maps of the selection (4, spread over the path)\n"
            "      --maps N          how many maps, from 0 to 1000 (implies --map; 0: none)\n"
            "      --map-size PX     side of each map panel in pixels, from 64 to 4096 (default 512)\n"
            "  -q, --quiet           print the summary only\n"
            "  -h, --help            this help\n");
    cli_scene_help(f, FLY_GROUPS);
    fprintf(f, "\nExit status: 0 on success, 1 on failure (also when a tile failed to load: it is reported\n"
               "once, drawn as its ancestor and named at the end), 2 on bad usage.\n");
}

/* The built-in path, or over an archive its shape fitted to the area: across 80 % of it in x, the S
 * over half of it in z, the climb scaled down for areas under 12 km (never below 40 m). */
static terra_camera path_camera(const cli_scene *sc, const terra_source *src, double t) {
    if (!sc->mesh) return terra_fly_path_camera(src, t);
    const double *b = sc->sel.bounds, w = b[2] - b[0], d = b[3] - b[1], pi = 3.14159265358979323846;
    const double x = b[0] + w * (0.1 + 0.8 * t), z = 0.5 * (b[1] + b[3]) + 0.25 * d * sin(2 * pi * t);
    const double dx = 0.8 * w, dz = 0.25 * d * 2 * pi * cos(2 * pi * t), s = sin(pi * t);
    float g = 0;
    terra_source_height(src, x, z, &g);
    const double climb = 2500.0 * fmin(1.0, w / 12000.0);
    return (terra_camera){.eye = {x, g + 40.0 + climb * s * s, z}, .yaw_rad = atan2(dx, -dz),
                          .pitch_rad = -0.12 - 0.25 * s * s, .fov_y_rad = 60.0 * pi / 180.0, .aspect = 16.0 / 9.0};
}

/* ---- maps ---------------------------------------------------------------------------------------- */

static const uint8_t level_colours[][3] = {
    {230, 60, 50},  {245, 140, 40}, {240, 210, 60}, {140, 200, 70}, {60, 170, 110}, {50, 180, 190},
    {60, 120, 220}, {110, 90, 210}, {170, 80, 200}, {210, 90, 160}, {150, 105, 70},  {205, 205, 215},
};
#define NCOLOURS ((int)(sizeof level_colours / sizeof level_colours[0]))

static void put(uint8_t *img, int w, int h, int x, int y, const uint8_t c[3]) {
    if (x < 0 || y < 0 || x >= w || y >= h) return;
    memcpy(img + ((size_t)y * w + x) * 3, c, 3);
}

/* One panel: a square of side 2·half metres around the eye, `px` pixels across, drawn into the
 * image at column offset ox. Each pixel shows the tile over it: its level's colour blended toward
 * the next level's by the morph factor there, shaded by the ground's slope; tile edges darker. */
static terra_status draw_panel(const terra_source *src, const terra_selected_tile *tiles,
                               int count, const terra_camera *cam, double half, uint8_t *img, int w, int h, int ox,
                               int px, float *heights, int *owner) {
    const double spacing = 2 * half / px;
    const int64_t ix0 = (int64_t)floor((cam->eye.x - half) / spacing), iz0 = (int64_t)floor((cam->eye.z - half) / spacing);
    const int n = px + 1;
    terra_grid_request req = {.ix0 = ix0, .iz0 = iz0, .spacing = spacing, .nx = n, .nz = n};
    terra_status st = terra_source_sample(src, &req, heights, NULL);
    if (st != TERRA_OK) return st;
    const double x0 = (double)ix0 * spacing, z0 = (double)iz0 * spacing;
    for (int k = 0; k < px * px; k++) owner[k] = -1;
    for (int t = 0; t < count; t++) {
        int i0 = (int)ceil((tiles[t].box.min.x - x0) / spacing - 0.5), i1 = (int)ceil((tiles[t].box.max.x - x0) / spacing - 0.5);
        int j0 = (int)ceil((tiles[t].box.min.z - z0) / spacing - 0.5), j1 = (int)ceil((tiles[t].box.max.z - z0) / spacing - 0.5);
        if (i1 <= 0 || j1 <= 0 || i0 >= px || j0 >= px) continue;
        for (int j = j0 < 0 ? 0 : j0; j < j1 && j < px; j++)
            for (int i = i0 < 0 ? 0 : i0; i < i1 && i < px; i++) owner[j * px + i] = t;
    }
    for (int j = 0; j < px; j++)
        for (int i = 0; i < px; i++) {
            uint8_t c[3] = {20, 20, 28};
            int t = owner[j * px + i];
            if (t >= 0) {
                const float hh = heights[j * n + i];
                const double x = x0 + (i + 0.5) * spacing, z = z0 + (j + 0.5) * spacing;
                const double dx = x - cam->eye.x, dy = hh - cam->eye.y, dz = z - cam->eye.z;
                const int lv = tiles[t].level;
                const float k = terra_morph_factor(sqrt(dx * dx + dy * dy + dz * dz), tiles[t].morph_start,
                                                   tiles[t].morph_end);
                const uint8_t *a = level_colours[lv % NCOLOURS];
                const uint8_t *b = level_colours[(lv + 1 < NCOLOURS ? lv + 1 : lv) % NCOLOURS];
                /* hillshade from the slope, light from the north-west */
                float gx = (heights[j * n + i + 1] - hh) / (float)spacing;
                float gz = (heights[(j + 1) * n + i] - hh) / (float)spacing;
                float shade = 0.75f + 0.25f * (float)((-gx * -0.7 + -gz * -0.7 + 1.0) / sqrt(gx * gx + gz * gz + 1.0));
                bool edge = i > 0 && j > 0 && (owner[j * px + i - 1] != t || owner[(j - 1) * px + i] != t);
                for (int q = 0; q < 3; q++) {
                    float v = (a[q] * (1 - k) + b[q] * k) * shade * (edge ? 0.55f : 1.0f);
                    c[q] = (uint8_t)(v > 255 ? 255 : v);
                }
            }
            put(img, w, h, ox + i, j, c);
        }
    /* the frustum's left and right edges on the ground, and the eye */
    terra_vec3 f, r;
    terra_camera_basis(cam, &f, &r, NULL);
    const double ty = tan(cam->fov_y_rad * 0.5), tx = ty * cam->aspect;
    const double ex = (cam->eye.x - x0) / spacing, ez = (cam->eye.z - z0) / spacing;
    const uint8_t white[3] = {255, 255, 255};
    for (int side = -1; side <= 1; side += 2) {
        double dxw = f.x + side * tx * r.x, dzw = f.z + side * tx * r.z;
        double len = sqrt(dxw * dxw + dzw * dzw);
        if (len < 1e-9) continue;
        const int steps = 4 * px; /* far enough to leave the panel; only pixels inside are drawn */
        double ax = ex + dxw / len * steps, az = ez + dzw / len * steps;
        for (int k = 0; k <= steps; k++) {
            double t = (double)k / steps;
            int xi = (int)lround(ex + (ax - ex) * t), zi = (int)lround(ez + (az - ez) * t);
            if (xi >= 0 && xi < px && zi >= 0 && zi < px) put(img, w, h, ox + xi, zi, white);
        }
    }
    for (int dy = -2; dy <= 2; dy++)
        for (int dx = -2; dx <= 2; dx++) {
            int xi = (int)lround(ex) + dx, zi = (int)lround(ez) + dy;
            if (xi >= 0 && xi < px && zi >= 0 && zi < px) put(img, w, h, ox + xi, zi, white);
        }
    return TERRA_OK;
}

/* Writes DIR/map_FFFF.png: three panels around the eye, out to the range of level 2, of level 5
 * and the whole selection, with a legend strip of the level colours (0 first) beneath. */
static int write_map(const char *dir, int frame, const terra_source *src, const terra_select *sel,
                     const terra_selected_tile *tiles, int count, const terra_camera *cam, int px, bool quiet) {
    const int legend = 24, w = 3 * px + 16, h = px + legend;
    uint8_t *img = calloc((size_t)w * h * 3, 1);
    float *heights = malloc(sizeof(float) * (size_t)(px + 1) * (px + 1));
    int *owner = malloc(sizeof(int) * (size_t)px * px);
    int rc = EXIT_OK;
    if (!img || !heights || !owner) {
        rc = cli_error("fly", "out of memory drawing a map");
        goto done;
    }
    double far_half = 0;
    for (int t = 0; t < count; t++) {
        far_half = fmax(far_half, fabs(tiles[t].box.min.x - cam->eye.x));
        far_half = fmax(far_half, fabs(tiles[t].box.max.x - cam->eye.x));
        far_half = fmax(far_half, fabs(tiles[t].box.min.z - cam->eye.z));
        far_half = fmax(far_half, fabs(tiles[t].box.max.z - cam->eye.z));
    }
    const int top = terra_select_get_desc(sel)->levels - 1;
    const double halves[3] = {terra_select_range(sel, top < 2 ? top : 2), terra_select_range(sel, top < 5 ? top : 5),
                              far_half};
    terra_status st = TERRA_OK;
    for (int p = 0; p < 3 && st == TERRA_OK; p++)
        st = draw_panel(src, tiles, count, cam, halves[p], img, w, h, p * (px + 8), px, heights, owner);
    if (st != TERRA_OK) {
        rc = cli_error("fly", "%s", terra_last_error());
        goto done;
    }
    int levels = terra_select_get_desc(sel)->levels;
    for (int l = 0; l < levels; l++) {
        int x0 = 8 + l * (w - 16) / levels, x1 = 8 + (l + 1) * (w - 16) / levels - 4;
        for (int y = px + 6; y < h - 4; y++)
            for (int x = x0; x < x1; x++) put(img, w, h, x, y, level_colours[l % NCOLOURS]);
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/map_%04d.png", dir, frame);
    if (terra_io_write_png(path, img, w, h, 3) != TERRA_OK) {
        rc = cli_error("fly", "%s", terra_last_error());
        goto done;
    }
    if (!quiet) printf("wrote %s\n", path);
done:
    free(img);
    free(heights);
    free(owner);
    return rc;
}

/* ---- the flight ------------------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The 99th percentile (nearest rank) of n > 0 values, sorted in place. */
static double p99_of(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    const int k = (99 * n + 99) / 100 - 1;
    return v[k < 0 ? 0 : k];
}

/* terra's CPU per frame (terra_gl_frame_stats.cpu_ms: select + stream bookkeeping + waiting + submit:
 * not uploads, not the time inside GL calls), median and 99th percentile over the frames after the
 * first (which waits for its tiles), printed as the summary's line; whole frames (without
 * --realtime) wait for all their tiles, which it says. */
static void print_frame_cpu(double *frame_ms, int n, bool whole) {
    const int from = n > 1, m = n - from;
    const double p50 = median_of(frame_ms + from, m), p99 = p99_of(frame_ms + from, m);
    printf("summary: frame CPU ms (select + stream + wait + submit, not uploads, not inside GL calls; %d frames after the "
           "first): median %.3f, p99 %.3f%s\n", m, p50, p99,
           whole ? " (whole frames, each waiting for every tile it wants: --realtime for a game's frame)" : "");
}

enum { OPT_MAPS = 256, OPT_MAP_SIZE, OPT_SHEET, OPT_NO_FRAMES, OPT_SETTLE, OPT_MAP };

static bool fly_opt(void *own, int c, const char *arg) {
    fly_opts *o = own;
    switch (c) {
    case 'n': return cli_opt_int("fly", "--frames", arg, 1, 1000000, &o->frames);
    case 'o': o->out = arg; return true;
    case 'q': o->quiet = true; return true;
    case OPT_MAP: o->maps = 4; return true;
    case OPT_MAPS: return cli_opt_int("fly", "--maps", arg, 0, 1000, &o->maps);
    case OPT_MAP_SIZE: return cli_opt_int("fly", "--map-size", arg, 64, 4096, &o->map_size);
    case OPT_SHEET: return cli_opt_int("fly", "--sheet", arg, 0, 64, &o->sheet);
    case OPT_NO_FRAMES: o->no_frames = true; return true;
    case OPT_SETTLE: o->settle = false; return true;
    default: return cli_usage_error("fly", "unknown option"), false;
    }
}

static int parse_fly(int argc, char **argv, fly_opts *o) {
    static const struct option longopts[] = {
        {"frames", required_argument, 0, 'n'},       {"out", required_argument, 0, 'o'},
        {"maps", required_argument, 0, OPT_MAPS},    {"map-size", required_argument, 0, OPT_MAP_SIZE},
        {"map", no_argument, 0, OPT_MAP},            {"sheet", required_argument, 0, OPT_SHEET},
        {"no-frames", no_argument, 0, OPT_NO_FRAMES}, {"realtime", no_argument, 0, OPT_SETTLE},
        {"quiet", no_argument, 0, 'q'},              {0, 0, 0, 0},
    };
    *o = (fly_opts){.frames = 240, .maps = 0, .map_size = 512, .out = "fly-out", .sheet = 8, .settle = true};
    int rc = cli_scene_parse("fly", argc, argv, FLY_GROUPS, "n:o:q", longopts, fly_opt, o, fly_usage, &o->scene);
    if (rc != EXIT_OK) return rc;
    if (o->sheet > o->frames) o->sheet = o->frames;
    return EXIT_OK;
}

/* Box-filters a w × h RGB frame down into the cell (cx, cy) of the contact sheet. */
static void sheet_put(uint8_t *sheet, int sw, const uint8_t *rgb, int w, int h, int cx, int cy, int cw, int ch) {
    for (int y = 0; y < ch; y++)
        for (int x = 0; x < cw; x++) {
            int x0 = x * w / cw, x1 = (x + 1) * w / cw, y0 = y * h / ch, y1 = (y + 1) * h / ch;
            if (x1 <= x0) x1 = x0 + 1;
            if (y1 <= y0) y1 = y0 + 1;
            unsigned sum[3] = {0, 0, 0}, n = 0;
            for (int yy = y0; yy < y1; yy++)
                for (int xx = x0; xx < x1; xx++, n++)
                    for (int q = 0; q < 3; q++) sum[q] += rgb[((size_t)yy * w + xx) * 3 + q];
            for (int q = 0; q < 3; q++) sheet[((size_t)(cy + y) * sw + cx + x) * 3 + q] = (uint8_t)((sum[q] + n / 2) / n);
        }
}

/* The contact sheet: `want` frames spread evenly over n, the first and last included. */
typedef struct contact_sheet {
    uint8_t *img;
    int w, h, cols, cell_w, cell_h, gap, want, done;
} contact_sheet;

static bool sheet_init(contact_sheet *c, int want, int w, int h) {
    *c = (contact_sheet){.want = want, .gap = 4};
    c->cols = want <= 4 ? (want ? want : 1) : (want + 1) / 2;
    const int rows = want ? (want + c->cols - 1) / c->cols : 0;
    c->cell_w = w > 480 ? 480 : w, c->cell_h = c->cell_w * h / w;
    c->w = c->cols * c->cell_w + (c->cols + 1) * c->gap, c->h = rows * c->cell_h + (rows + 1) * c->gap;
    if (!want) return true;
    c->img = malloc((size_t)c->w * c->h * 3);
    if (c->img) memset(c->img, 24, (size_t)c->w * c->h * 3);
    return c->img != NULL;
}

/* Frame f of n: on the sheet when it is one of those wanted. */
static void sheet_frame(contact_sheet *c, int f, int n, const uint8_t *rgb, int w, int h) {
    if (!c->img || c->done >= c->want) return;
    const int next = c->want == 1 ? 0 : (int)((long)c->done * (n - 1) / (c->want - 1));
    if (f != next) return;
    const int cx = c->gap + (c->done % c->cols) * (c->cell_w + c->gap), cy = c->gap + (c->done / c->cols) * (c->cell_h + c->gap);
    sheet_put(c->img, c->w, rgb, w, h, cx, cy, c->cell_w, c->cell_h);
    c->done++;
}

static int sheet_write(contact_sheet *c, const char *dir, bool quiet) {
    if (!c->img) return EXIT_OK;
    char path[4096];
    snprintf(path, sizeof path, "%s/contact_sheet.png", dir);
    if (terra_io_write_png(path, c->img, c->w, c->h, 3) != TERRA_OK) return cli_error("fly", "%s", terra_last_error());
    if (!quiet) printf("wrote %s (%d frames)\n", path, c->done);
    return EXIT_OK;
}

static int fly_planet(const fly_opts *o);

int cmd_fly(int argc, char **argv) {
    fly_opts o;
    int rc = parse_fly(argc, argv, &o);
    if (rc == CLI_HELP) return EXIT_OK;
    if (rc != EXIT_OK) return rc;
    if (o.scene.planet && o.maps) return cli_usage_error("fly", "--map draws the plane's selection; it does not go with --planet");
    if (o.scene.planet && o.scene.archive)
        return cli_usage_error("fly", "fly --planet flies the built-in planet's path; a geographic --archive is drawn by "
                                      "render --planet and view --planet");
    if (mkdir(o.out, 0777) != 0 && errno != EEXIST)
        return cli_error("fly", "%s: cannot create directory: %s", o.out, strerror(errno));
    if (o.scene.planet) return fly_planet(&o);

    const int w = o.scene.width, h = o.scene.height, n = o.frames;
    contact_sheet cs;
    terra_source *src = NULL;
    terra_gl_context *ctx = NULL;
    terra_gl_scene *scene = NULL;
    double *ms[4] = {malloc(sizeof(double) * n), malloc(sizeof(double) * n), malloc(sizeof(double) * n),
                     malloc(sizeof(double) * n)};
    double *raster = malloc(sizeof(double) * n), *driver = malloc(sizeof(double) * n), *frame_ms = malloc(sizeof(double) * n);
    uint8_t *rgb = malloc((size_t)w * h * 3);
    const bool sheet_ok = sheet_init(&cs, o.sheet, w, h);
    if (!ms[0] || !ms[1] || !ms[2] || !ms[3] || !raster || !driver || !frame_ms || !rgb || !sheet_ok) {
        rc = cli_error("fly", "out of memory");
        goto done;
    }
    terra_status st = cli_scene_open(&o.scene, &src);
    if (st == TERRA_OK) st = terra_gl_context_create_headless(&ctx);
    if (st == TERRA_OK)
        st = terra_gl_scene_create(&(terra_gl_scene_desc){.source = src, .archive = o.scene.mesh, .select = o.scene.sel, .width = w, .height = h},
                                   &scene);
    if (st != TERRA_OK) {
        rc = cli_error("fly", "%s", terra_last_error());
        goto done;
    }
    const terra_select *sel = terra_gl_scene_select(scene);
    const terra_select_desc *d = terra_select_get_desc(sel);
    terra_gl_style style = cli_scene_style(&o.scene);
    if (!o.quiet) {
        if (o.scene.mesh)
            printf("terra fly: %d frames of %dx%d over %s on %s; its own tiles, level 0 %.0f m, %d levels, chosen by "
                   "their error within %g px\n",
                   n, w, h, o.scene.archive, terra_gl_renderer_name(), d->grid.tile0_size, d->levels, d->max_sse_px);
        else
            printf("terra fly: %d frames of %dx%d over %s%s (seed %llu) on %s; tiles of %d cells, level 0 "
                   "%.0f m, %d levels, range0 %.0f m (ratio %.2f)\n",
                   n, w, h, o.scene.script ? "the ground of " : "the default world",
                   o.scene.script ? o.scene.script : "", (unsigned long long)o.scene.seed, terra_gl_renderer_name(), d->grid.cells,
                   d->grid.tile0_size, d->levels, d->range0, d->range_ratio);
        printf("%6s %9s %7s %9s %5s %9s %5s %7s %7s %7s %7s %7s | %7s %7s %8s  %s\n", "frame", "x", "height", "z", "tiles",
               "triangles", "calls", "sel ms", "str ms", "wait ms", "upl ms", "sub ms", "drv ms", "ras ms", "held MB",
               "tiles per level (0..)");
    }
    long sum_tiles = 0, max_tiles = 0, max_calls = 0, level_sum[TERRA_TILE_MAX_LEVEL + 1] = {0};
    double sum_tris = 0;
    size_t max_held = 0;
    int maps_written = 0, fallback_frames = 0, standin_max = 0, waited_frames = 0;
    for (int f = 0; f < n; f++) {
        const double t = n > 1 ? (double)f / (n - 1) : 0.0;
        terra_camera cam = path_camera(&o.scene, src, t);
        cam.fov_y_rad = cli_scene_camera(&o.scene).fov_y_rad; /* --fov (the path's own is the default, 60) */
        terra_gl_frame_stats fs;
        if (cli_scene_reload(&o.scene, scene, stderr)) style.surfaces = cli_scene_style(&o.scene).surfaces; /* --source edited */
        /* the first frame always waits for its tiles; later ones too unless --realtime */
        st = terra_gl_scene_frame(scene, &cam, &style, o.settle || f == 0, 60, &fs);
        double t0 = terra_now_s();
        if (st == TERRA_OK) st = terra_gl_read_rgb(terra_gl_scene_renderer(scene), rgb);
        raster[f] = (terra_now_s() - t0) * 1e3; /* waits for llvmpipe: Mesa's raster time + read-back */
        if (st != TERRA_OK) {
            rc = cli_error("fly", "frame %d: %s", f, terra_last_error());
            goto done;
        }
        ms[0][f] = fs.select_ms, ms[1][f] = fs.stream_ms, ms[2][f] = fs.upload_ms, ms[3][f] = fs.submit_ms;
        driver[f] = fs.driver_ms, frame_ms[f] = fs.cpu_ms;
        sum_tiles += fs.tiles;
        sum_tris += fs.triangles;
        if (fs.tiles > max_tiles) max_tiles = fs.tiles;
        if (fs.draw_calls > max_calls) max_calls = fs.draw_calls;
        if (fs.bytes_held > max_held) max_held = fs.bytes_held;
        fallback_frames += fs.fallbacks > 0;
        if (fs.standin_levels > standin_max) standin_max = fs.standin_levels;
        if (fs.updates > 1 && f > 0 && !o.settle) waited_frames++;
        for (int l = 0; l < d->levels; l++) level_sum[l] += fs.per_level[l];
        if (!o.quiet) {
            float g;
            terra_source_height(src, cam.eye.x, cam.eye.z, &g);
            printf("%6d %9.1f %7.1f %9.1f %5d %9d %5d %7.3f %7.3f %7.3f %7.3f %7.3f | %7.2f %7.2f %8.1f  ", f, cam.eye.x,
                   cam.eye.y - g, cam.eye.z, fs.tiles, fs.triangles, fs.draw_calls, fs.select_ms, fs.stream_ms,
                   fs.wait_ms, fs.upload_ms, fs.submit_ms, fs.driver_ms, raster[f], fs.bytes_held / 1048576.0);
            for (int l = 0; l < d->levels; l++) printf("%s%d", l ? " " : "", fs.per_level[l]);
            printf("%s\n", fs.fallbacks ? " *" : "");
        }
        if (!o.no_frames) {
            char path[4096];
            snprintf(path, sizeof path, "%s/frame_%04d.png", o.out, f);
            if (terra_io_write_png(path, rgb, w, h, 3) != TERRA_OK) {
                rc = cli_error("fly", "%s", terra_last_error());
                goto done;
            }
        }
        sheet_frame(&cs, f, n, rgb, w, h);
        /* maps at evenly spread frames, the first and last included */
        if (o.maps > 0) {
            const int next = o.maps == 1 ? 0 : (int)((long)maps_written * (n - 1) / (o.maps - 1));
            if (maps_written < o.maps && f == next) {
                const terra_selected_tile *tiles;
                int count;
                terra_stream_wanted(terra_gl_scene_stream(scene), terra_gl_scene_focus(scene), &tiles, &count);
                rc = write_map(o.out, f, src, sel, tiles, count, &cam, o.map_size, o.quiet);
                if (rc != EXIT_OK) goto done;
                maps_written++;
            }
        }
    }
    if ((rc = sheet_write(&cs, o.out, o.quiet)) != EXIT_OK) goto done;
    printf("summary: %d frames; tiles drawn mean %.1f, max %ld; triangles mean %.0f; draw calls per frame max %ld; "
           "frames with ancestors standing in %d (at most %d levels coarser; %d frames waited for them)\n",
           n, (double)sum_tiles / n, max_tiles, sum_tris / n, max_calls, fallback_frames, standin_max, waited_frames);
    printf("summary: CPU ms median: select %.3f, stream %.3f, upload %.3f, submit %.3f; apart (the driver's, %s): "
           "inside the draw call %.2f, raster + read-back %.2f\n",
           median_of(ms[0], n), median_of(ms[1], n), median_of(ms[2], n), median_of(ms[3], n), terra_gl_renderer_name(),
           median_of(driver, n), median_of(raster, n));
    print_frame_cpu(frame_ms, n, o.settle);
    printf("summary: bytes held max %.1f MB (streamer tiles + GPU buffers)\n", max_held / 1048576.0);
    printf("summary: mean tiles per level:");
    for (int l = 0; l < d->levels; l++) printf(" L%d %.1f", l, (double)level_sum[l] / n);
    printf("\n");
    rc = cli_failed_tiles("fly", terra_gl_scene_stream(scene)); /* drawn as ancestors, but named and failed */
done:
    for (int i = 0; i < 4; i++) free(ms[i]);
    free(raster);
    free(driver);
    free(frame_ms);
    free(rgb);
    free(cs.img);
    terra_gl_scene_destroy(scene);
    terra_gl_context_destroy(ctx);
    cli_scene_close(&o.scene, src);
    return rc;
}

bool cli_scene_reload(cli_scene *s, terra_gl_scene *scene, FILE *log) {
    if (s->retired && !terra_gl_scene_busy(scene)) { /* nothing calls the old script any more */
        terra_edit_layer_destroy(s->retired_edits);
        cli_script_close(s->retired);
        s->retired = NULL, s->retired_edits = NULL;
    }
    const double now = terra_now_s();
    if (!s->lua || s->retired || now < s->reload_at) return false;
    s->reload_at = now + 0.25;
    if (!cli_script_changed(s->lua)) return false;
    terra_script *fresh = NULL;
    terra_edit_layer *edits = NULL;
    terra_status st = cli_script_open(s->script, s->seed, s->trust_script, &fresh);
    /* the edits again over the new ground: replayed from the journal (without one they start anew) */
    if (st == TERRA_OK && s->edits)
        st = terra_edit_layer_create(&(terra_edit_layer_desc){.base = cli_script_source(fresh), .journal = s->journal},
                                     &edits);
    if (st != TERRA_OK) {
        /* the ground drawn stays; the message once per change of it */
        if (log && strcmp(s->reload_error, terra_last_error()))
            fprintf(log, "%s (the ground drawn stays as it was)\n", terra_last_error());
        snprintf(s->reload_error, sizeof s->reload_error, "%s", terra_last_error());
        cli_script_close(fresh);
        return false;
    }
    if (terra_gl_scene_set_source(scene, edits ? terra_edit_layer_source(edits) : cli_script_source(fresh)) != TERRA_OK) {
        terra_edit_layer_destroy(edits);
        cli_script_close(fresh);
        return false;
    }
    s->reload_error[0] = 0;
    s->retired = s->lua, s->lua = fresh;
    s->retired_edits = s->edits, s->edits = edits;
    if (log) fprintf(log, "%s: changed; drawing its new ground\n", s->script);
    return true;
}

/* --planet: the descent and low flight of planet_path.h, every frame whole. */
static int fly_planet(const fly_opts *o) {
    const int w = o->scene.width, h = o->scene.height, n = o->frames;
    terra_planet *planet = NULL;
    terra_gl_context *ctx = NULL;
    terra_gl_planet *scene = NULL;
    uint8_t *rgb = malloc((size_t)w * h * 3);
    double *frame_ms = malloc(sizeof(double) * n);
    contact_sheet cs;
    int rc = EXIT_OK;
    if (!sheet_init(&cs, o->sheet, w, h) || !rgb || !frame_ms) {
        rc = cli_error("fly", "out of memory");
        goto done;
    }
    terra_status st = cli_planet_open(&o->scene, &planet);
    if (st == TERRA_OK) st = terra_gl_context_create_headless(&ctx);
    if (st == TERRA_OK) st = cli_planet_scene(&o->scene, planet, true, o->settle ? 0 : 4, &scene);
    if (st != TERRA_OK) {
        rc = cli_error("fly", "%s", terra_last_error());
        goto done;
    }
    const int levels = terra_planet_get_desc(planet)->levels;
    if (!o->quiet) {
        printf("terra fly --planet: %d frames of %dx%d, a descent from 20,000 km to 2 m and a low flight over a face edge "
               "and the pole (seed %llu) on %s; %d levels of %d-cell tiles\n",
               n, w, h, (unsigned long long)o->scene.seed, terra_gl_renderer_name(), levels, terra_planet_get_desc(planet)->cells);
        printf("%6s %9s %9s %11s %5s %9s %5s %7s %8s %7s %7s %7s  %s\n", "frame", "lat", "lon", "alt m", "tiles", "triangles",
               "calls", "sel ms", "mesh ms", "wait ms", "upl ms", "sub ms", "tiles per level (0..)");
    }
    double sum_tris = 0, sum_tiles = 0;
    int standin_frames = 0, max_calls = 0, waited_frames = 0;
    for (int f = 0; f < n; f++) {
        terra_camera cam = terra_planet_path_camera(planet, n > 1 ? (double)f / (n - 1) : 0.0);
        cam.fov_y_rad = o->scene.fov * 3.14159265358979323846 / 180;
        terra_gl_style style = cli_scene_style(&o->scene);
        style.sun = cli_planet_sun(cam.eye);
        terra_gl_frame_stats fs;
        st = terra_gl_planet_frame(scene, &cam, &style, &fs);
        if (st == TERRA_OK) st = terra_gl_read_rgb(terra_gl_planet_renderer(scene), rgb);
        if (st != TERRA_OK) {
            rc = cli_error("fly", "frame %d: %s", f, terra_last_error());
            goto done;
        }
        sum_tris += fs.triangles, sum_tiles += fs.tiles;
        frame_ms[f] = fs.cpu_ms;
        if (fs.draw_calls > max_calls) max_calls = fs.draw_calls;
        if (!o->quiet) {
            double lat, lon;
            terra_planet_dir_latlon(cam.eye, &lat, &lon);
            printf("%6d %9.4f %9.4f %11.1f %5d %9d %5d %7.3f %8.3f %7.3f %7.3f %7.3f  ", f, lat, lon,
                   terra_planet_altitude(planet, cam.eye, NULL, NULL), fs.tiles, fs.triangles, fs.draw_calls, fs.select_ms,
                   fs.stream_ms, fs.wait_ms, fs.upload_ms, fs.submit_ms);
            for (int l = 0; l < levels; l++) printf("%s%d", l ? " " : "", fs.per_level[l]);
            printf("%s\n", fs.fallbacks ? " *" : "");
        }
        standin_frames += fs.fallbacks > 0;
        waited_frames += fs.wait_ms > 0;
        if (!o->no_frames) {
            char path[4096];
            snprintf(path, sizeof path, "%s/frame_%04d.png", o->out, f);
            if (terra_io_write_png(path, rgb, w, h, 3) != TERRA_OK) {
                rc = cli_error("fly", "%s", terra_last_error());
                goto done;
            }
        }
        sheet_frame(&cs, f, n, rgb, w, h);
    }
    if ((rc = sheet_write(&cs, o->out, o->quiet)) != EXIT_OK) goto done;
    printf("summary: %d frames; tiles drawn mean %.1f; triangles mean %.0f; draw calls per frame max %d; frames with "
           "ancestors standing in %d (%d frames waited for them)\n", n, sum_tiles / n, sum_tris / n, max_calls, standin_frames,
           waited_frames);
    print_frame_cpu(frame_ms, n, o->settle);
done:
    free(rgb);
    free(frame_ms);
    free(cs.img);
    terra_gl_planet_destroy(scene);
    terra_gl_context_destroy(ctx);
    cli_planet_close(planet);
    return rc;
}

terra_status cli_planet_scene(const cli_scene *s, const terra_planet *p, bool offscreen, double budget_ms, terra_gl_planet **out) {
    return terra_gl_planet_create(&(terra_gl_planet_desc){.planet = p,
                                                          .select = {.max_sse_px = s->sse, .view_height_px = s->height,
                                                                     .view_fov_y_rad = s->fov * 3.14159265358979323846 / 180},
                                                          .width = offscreen ? s->width : 0, .height = offscreen ? s->height : 0,
                                                          .capacity_tiles = 8192, .budget_ms = budget_ms},
                                  out);
}
