/* terra fly: flies a built-in camera path over the default world, selecting tiles every frame;
 * prints per-frame and summary statistics and draws top-down maps of the selection. */
#include "cli.h"
#include "terra/io.h"
#include "terra/select.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define PI 3.14159265358979323846

typedef struct fly_opts {
    int frames;
    int maps;
    int map_size;
    const char *out;
    uint64_t seed;
    terra_select_desc sel;
    bool quiet;
} fly_opts;

static void fly_usage(FILE *f) {
    fprintf(f,
            "Usage: terra fly [OPTIONS]\n\n"
            "Flies a built-in camera path over the default world, selects the tiles to draw each\n"
            "frame (CDLOD), prints per-frame and summary statistics, and writes top-down maps of the\n"
            "selection: three panels around the eye (out to level 2's range, level 5's, and all),\n"
            "tiles coloured by level (legend beneath, level 0 first), the morph shown as the blend\n"
            "toward the next level's colour, the view frustum's sides and the eye in white.\n\n"
            "Options:\n"
            "  -n, --frames N      frames to fly (default 240)\n"
            "  -o, --out DIR       where maps go (default fly-out; created if missing)\n"
            "      --maps N        maps to draw, spread over the path (default 4; 0: none)\n"
            "      --map-size PX   side of each map panel in pixels (default 512)\n"
            "      --seed N        world seed (default 1)\n"
            "      --cells N       cells per tile side, power of two 16..256 (default 32)\n"
            "      --tile0 M       side of a level-0 tile in metres (default 64)\n"
            "      --levels N      number of levels (default 12)\n"
            "      --range0 M      range of level 0 in metres (default: 1.5x the smallest valid)\n"
            "  -q, --quiet         print the summary only\n"
            "  -h, --help          this help\n\n"
            "Exit status: 0 on success, 1 on failure, 2 on bad usage.\n");
}

/* The built-in path, t in [0, 1]: 12 km east along a gentle S, climbing from 40 m above the
 * ground to 2.5 km and back down, looking ahead and slightly down. */
static terra_camera path_camera(const terra_source *src, double t) {
    terra_camera c = {.fov_y_rad = 60.0 * PI / 180.0, .aspect = 16.0 / 9.0};
    double x = 12000.0 * t, z = 3000.0 * sin(2 * PI * t);
    double dx = 12000.0, dz = 3000.0 * 2 * PI * cos(2 * PI * t);
    float g = 0;
    terra_source_height(src, x, z, &g);
    double s = sin(PI * t);
    c.eye = (terra_vec3){x, g + 40.0 + 2500.0 * s * s, z};
    c.yaw_rad = atan2(dx, -dz); /* yaw 0 looks along -z, positive turns toward +x */
    c.pitch_rad = -0.12 - 0.25 * s * s;
    return c;
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

static int parse_fly(int argc, char **argv, fly_opts *o) {
    enum { OPT_MAPS = 256, OPT_MAP_SIZE, OPT_SEED, OPT_CELLS, OPT_TILE0, OPT_LEVELS, OPT_RANGE0 };
    static const struct option longopts[] = {
        {"frames", required_argument, 0, 'n'}, {"out", required_argument, 0, 'o'},
        {"maps", required_argument, 0, OPT_MAPS}, {"map-size", required_argument, 0, OPT_MAP_SIZE},
        {"seed", required_argument, 0, OPT_SEED}, {"cells", required_argument, 0, OPT_CELLS},
        {"tile0", required_argument, 0, OPT_TILE0}, {"levels", required_argument, 0, OPT_LEVELS},
        {"range0", required_argument, 0, OPT_RANGE0}, {"quiet", no_argument, 0, 'q'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    *o = (fly_opts){.frames = 240, .maps = 4, .map_size = 512, .out = "fly-out", .seed = 1};
    o->sel.grid.cells = 32;
    optind = 1;
    int c;
    long v;
    double d;
    while ((c = getopt_long(argc, argv, "n:o:qh", longopts, NULL)) != -1) {
        switch (c) {
        case 'n':
            if (!cli_parse_int(optarg, &v) || v < 1 || v > 1000000)
                return cli_usage_error("fly", "--frames wants a whole number from 1 to 1000000, not '%s'", optarg);
            o->frames = (int)v;
            break;
        case 'o': o->out = optarg; break;
        case OPT_MAPS:
            if (!cli_parse_int(optarg, &v) || v < 0 || v > 1000)
                return cli_usage_error("fly", "--maps wants a whole number from 0 to 1000, not '%s'", optarg);
            o->maps = (int)v;
            break;
        case OPT_MAP_SIZE:
            if (!cli_parse_int(optarg, &v) || v < 64 || v > 4096)
                return cli_usage_error("fly", "--map-size wants pixels from 64 to 4096, not '%s'", optarg);
            o->map_size = (int)v;
            break;
        case OPT_SEED:
            if (!cli_parse_int(optarg, &v)) return cli_usage_error("fly", "--seed wants a whole number, not '%s'", optarg);
            o->seed = (uint64_t)v;
            break;
        case OPT_CELLS:
            if (!cli_parse_int(optarg, &v) || v <= 0 || v > 4096)
                return cli_usage_error("fly", "--cells wants a power of two from 16 to 256, not '%s'", optarg);
            o->sel.grid.cells = (int)v;
            break;
        case OPT_TILE0:
            if (!cli_parse_double(optarg, &d) || !(d > 0))
                return cli_usage_error("fly", "--tile0 wants a positive number of metres, not '%s'", optarg);
            o->sel.grid.tile0_size = d;
            break;
        case OPT_LEVELS:
            if (!cli_parse_int(optarg, &v) || v < 1 || v > 24)
                return cli_usage_error("fly", "--levels wants a whole number from 1 to 24, not '%s'", optarg);
            o->sel.levels = (int)v;
            break;
        case OPT_RANGE0:
            if (!cli_parse_double(optarg, &d) || !(d > 0))
                return cli_usage_error("fly", "--range0 wants a positive number of metres, not '%s'", optarg);
            o->sel.range0 = d;
            break;
        case 'q': o->quiet = true; break;
        case 'h': fly_usage(stdout); return -1;
        default: return cli_usage_error("fly", "unknown option");
        }
    }
    if (optind < argc) return cli_usage_error("fly", "unexpected argument '%s'", argv[optind]);
    return EXIT_OK;
}

int cmd_fly(int argc, char **argv) {
    fly_opts o;
    int rc = parse_fly(argc, argv, &o);
    if (rc < 0) return EXIT_OK; /* --help */
    if (rc != EXIT_OK) return rc;
    if (o.maps > 0 && mkdir(o.out, 0777) != 0 && errno != EEXIST)
        return cli_error("fly", "%s: cannot create directory: %s", o.out, strerror(errno));

    terra_source *src = NULL;
    terra_select *sel = NULL;
    double *times = malloc(sizeof(double) * (size_t)o.frames);
    if (!times) return cli_error("fly", "out of memory");
    if (terra_world_create(&(terra_world_desc){.seed = o.seed}, &src) != TERRA_OK ||
        terra_select_create(&o.sel, src, &sel) != TERRA_OK) {
        rc = cli_error("fly", "%s", terra_last_error());
        goto done;
    }
    const terra_select_desc *d = terra_select_get_desc(sel);
    const long tris_per_tile = 2L * d->grid.cells * d->grid.cells;
    if (!o.quiet) {
        printf("terra fly: %d frames over the default world (seed %llu); tiles of %d cells, level 0 %.0f m, %d levels, "
               "range0 %.0f m\n",
               o.frames, (unsigned long long)o.seed, d->grid.cells, d->grid.tile0_size, d->levels, d->range0);
        printf("%6s %9s %7s %9s %5s %9s %8s  %s\n", "frame", "x", "height", "z", "tiles", "triangles", "sel ms",
               "tiles per level (0..)");
    }
    long sum_tiles = 0, max_tiles = 0, sum_visited = 0, level_sum[TERRA_TILE_MAX_LEVEL + 1] = {0};
    int maps_written = 0;
    for (int f = 0; f < o.frames; f++) {
        double t = o.frames > 1 ? (double)f / (o.frames - 1) : 0.0;
        terra_camera cam = path_camera(src, t);
        terra_frustum fr;
        terra_camera_frustum(&cam, &fr);
        const terra_selected_tile *tiles;
        int count;
        double t0 = terra_now_s();
        terra_status st = terra_select_run(sel, cam.eye, &fr, &tiles, &count);
        times[f] = (terra_now_s() - t0) * 1e3;
        if (st != TERRA_OK) {
            rc = cli_error("fly", "frame %d: %s", f, terra_last_error());
            goto done;
        }
        const terra_select_stats *s = terra_select_get_stats(sel);
        sum_tiles += count;
        sum_visited += s->visited;
        if (count > max_tiles) max_tiles = count;
        for (int l = 0; l < d->levels; l++) level_sum[l] += s->per_level[l];
        if (!o.quiet) {
            float g;
            terra_source_height(src, cam.eye.x, cam.eye.z, &g);
            printf("%6d %9.1f %7.1f %9.1f %5d %9ld %8.3f  ", f, cam.eye.x, cam.eye.y - g, cam.eye.z, count,
                   count * tris_per_tile, times[f]);
            for (int l = 0; l < d->levels; l++) printf("%s%d", l ? " " : "", s->per_level[l]);
            printf("\n");
        }
        /* maps at evenly spread frames, the first and last included */
        if (o.maps > 0) {
            int next = o.maps == 1 ? 0 : (int)((long)maps_written * (o.frames - 1) / (o.maps - 1));
            if (maps_written < o.maps && f == next) {
                rc = write_map(o.out, f, src, sel, tiles, count, &cam, o.map_size, o.quiet);
                if (rc != EXIT_OK) goto done;
                maps_written++;
            }
        }
    }
    qsort(times, (size_t)o.frames, sizeof *times, cmp_double);
    printf("summary: %d frames; tiles drawn mean %.1f, max %ld; triangles mean %.0f; visited mean %.0f\n", o.frames,
           (double)sum_tiles / o.frames, max_tiles, (double)sum_tiles / o.frames * tris_per_tile,
           (double)sum_visited / o.frames);
    printf("summary: selection ms median %.3f, p99 %.3f, max %.3f\n", times[o.frames / 2],
           times[(int)(0.99 * (o.frames - 1))], times[o.frames - 1]);
    printf("summary: mean tiles per level:");
    for (int l = 0; l < d->levels; l++) printf(" L%d %.1f", l, (double)level_sum[l] / o.frames);
    printf("\n");
done:
    free(times);
    terra_select_destroy(sel);
    terra_source_destroy(src);
    return rc;
}
