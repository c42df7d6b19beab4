/* terra cook: elevation rasters into an archive of TIN tiles (terra/cook_io.h), with a progress bar
 * on a terminal and a report at the end. */
#include "cli.h"
#include "terra/cook_io.h"

#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <unistd.h>

#define CMD "cook"
#define MAX_INPUTS 256

static void help(FILE *f) {
    fprintf(f,
            "Usage: terra cook INPUT... -o OUT.terra [OPTIONS]\n"
            "       terra cook --source WORLD.lua --area X0,Z0,X1,Z1 -o OUT.terra [OPTIONS]\n\n"
            "Cooks elevation rasters into an archive of irregular (TIN) quantized-mesh tiles with\n"
            "levels of detail. The finest level is a greedy-insertion TIN per tile within --max-error;\n"
            "each coarser tile is its four children merged and simplified to twice the error of the\n"
            "level below, keeping every vertex on its outer border, so neighbouring tiles at any two\n"
            "levels share their border exactly. Each tile's geometric error in the index is measured\n"
            "on the tile as decoded, and is never less than one of its children's. No-data samples\n"
            "(and NaN ones, declared or not) stay holes. Heights below -12000 m or above 10000 m\n"
            "(after --z-scale) are refused, naming the file and the sample: not the Earth's.\n\n"
            "INPUT is anything GDAL reads (GeoTIFF, SRTM .hgt, 16-bit PNG, ...). A raster georeferenced\n"
            "in a coordinate system PROJ takes to EPSG:4326 (GeoTIFF in any CRS, .hgt) cooks in the\n"
            "geographic frame: Cesium's EPSG:4326 TMS tiles at the finest zoom whose samples are at\n"
            "least as fine as the raster's, warped by GDAL (bilinear, no-data kept as holes), read a\n"
            "window at a time, down to the two root tiles. Several such inputs are one ground: where\n"
            "they overlap, the finest (the smallest sample), or of two as fine the one given first, is\n"
            "the ground wherever it has data (terra check --source holds the same rule). A raster in\n"
            "a coordinate system of another body (Mars, the Moon) is refused there; --frame local\n"
            "cooks it in metres on that body. Any other raster cooks in the local frame: one plane unit\n"
            "per sample, --spacing metres apart, rows along +z, level 0 finest; one of more than 64 M\n"
            "samples is read a window at a time too (a tiled GeoTIFF reads fastest that way).\n\n"
            "Options:\n"
            "  -o, --output OUT          the archive to write (renamed into place when complete)\n"
            "      --source FILE         cook a Lua script's ground (script.h; as terra bake --tin does):\n"
            "                            sampled --spacing apart (default 2) over --area, local frame\n"
            "      --area X0,Z0,X1,Z1    with --source: the area in metres (default 0,0,1024,1024)\n"
            "      --seed S              with --source: its terra.world's seed (default 1)\n"
            "      --trust-script        with --source: run it with all of LuaJIT's libraries (os, io,\n"
            "                            ffi, debug, bytecode), not sandboxed: only a script you trust\n"
            "  -e, --max-error M         the finest level's vertical error bound, metres (default 1)\n"
            "      --levels N            local frame: levels to build (default: up to one tile)\n"
            "      --tile-size S         samples along a finest tile's side (default 256; geographic:\n"
            "                            a power of two)\n"
            "      --frame F             auto (default), local or geographic\n"
            "      --threads N           worker threads, 1..64 (default: one per core)\n"
            "      --compression C       packed (default: quantized-mesh packed losslessly, about half of\n"
            "                            gzip; export and serve hand out plain quantized-mesh), gzip,\n"
            "                            zstd or none\n"
            "      --cache DIR           where the cook cache lives (default OUT.cache): a cook whose\n"
            "                            inputs (size and content hash) and options all agree with the\n"
            "                            last one writes nothing; changed inputs recook only their tiles\n"
            "      --no-cache            cook afresh, neither reading nor writing the cache\n"
            "      --encoding E          plain (default), terrain-rgb or terrarium\n"
            "      --band N              band of a plain raster (default 1)\n"
            "      --z-scale S           multiply heights by S (e.g. 0.1 for decimetres)\n"
            "      --spacing M           metres between samples (default: georeferencing, else 1)\n"
            "      --max-memory SIZE     memory budget for reading each input (e.g. 512M, 2G; default half\n"
            "                            of physical memory): a raster past it is refused before it is\n"
            "                            read, a scenery's reader (terra-scenery) runs limited to it\n"
            "  -q, --quiet               no progress bar (there is none when stderr is not a terminal)\n");
    fprintf(f,
            "On MPI ranks (mpirun -n N terra cook ..., with terra-cook-mpi built: TERRA_BUILD_MPI):\n"
            "  the plan shares subtrees out by source samples, each rank cooks its own into part files\n"
            "  (beside the cache's record, DIR/NAME.parts; OUT.parts with --no-cache, removed at the\n"
            "  end), rank 0 cooks the levels above them and merges everything into OUT: the same bytes\n"
            "  as one process. A rerun reuses every finished part. --threads defaults to the cores over\n"
            "  the ranks on each machine.\n"
            "      --stage DIR           each rank keeps its parts in DIR on its own machine (no shared\n"
            "                            filesystem) and sends them to rank 0 over MPI for the merge\n"
            "  -h, --help                this help\n\n"
            "Prints a report (key value lines): frame, tiles, levels, per level its tiles, vertices,\n"
            "triangles, stored bytes, largest stated error, what that passes the mesh's own measure by\n"
            "(quantization) and the largest error as built (max_error), bytes, seconds, samples_per_s,\n"
            "peak_mb (this process) and reader_peak_mb (the terra-raster and terra-scenery reader\n"
            "processes); for a scenery, the triangles its reading dropped: dropped_degenerate,\n"
            "dropped_duplicate, dropped_not_triangles (points, lines) and dropped_out_of_range (glTF\n"
            "indices past the vertices); with the cache, why it was or was not reused, tiles_reused and\n"
            "finest_reused.\n"
            "Exit 0 on success, 1 on failure, 2 on bad usage.\n");
}

/* The most samples a local-frame raster may have to be read whole (256 MiB of floats); larger ones
 * are read a window at a time, as georeferenced ones always are. */
#define LOCAL_WHOLE_MAX ((uint64_t)64 << 20)

/* True for the scene formats read through assimp (terra_scenery_read) rather than as rasters. */
static bool is_scenery(const char *path) {
    static const char *ext[] = {".obj", ".ply", ".gltf", ".glb", ".fbx", ".dae", ".stl", ".3ds", ".off"};
    const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
    if (!dot || (slash && dot < slash)) return false;
    for (size_t i = 0; i < sizeof ext / sizeof *ext; i++)
        if (!strcasecmp(dot, ext[i])) return true;
    return false;
}

/* ---- the progress bar ------------------------------------------------------------------------- */

typedef struct bar {
    pthread_mutex_t lock;
    int shown; /* permille last drawn, -1 none */
} bar;

static void bar_draw(void *user, uint64_t done, uint64_t total) {
    bar *b = user;
    int pm = total ? (int)(1000 * done / total) : 0;
    pthread_mutex_lock(&b->lock);
    if (pm != b->shown) {
        b->shown = pm;
        char cells[41];
        int full = pm * 40 / 1000;
        for (int i = 0; i < 40; i++) cells[i] = i < full ? '#' : '.';
        cells[40] = 0;
        fprintf(stderr, "\rterra cook: [%s] %5.1f%% %llu/%llu tiles", cells, pm / 10.0, (unsigned long long)done,
                (unsigned long long)total);
        fflush(stderr);
    }
    pthread_mutex_unlock(&b->lock);
}

/* ---- the report --------------------------------------------------------------------------------- */

static double rusage_mb(int who) {
    struct rusage ru;
    getrusage(who, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

static void print_report(const char *out, const terra_cook_report *r, double read_s) {
    printf("output %s\nframe %s\n", out, terra_frame_name(r->grid.frame));
    if (r->grid.frame == TERRA_FRAME_GEOGRAPHIC) printf("zoom_finest %d\n", r->grid.depth);
    printf("tile_units %g\nunit %.17g %.17g\ntiles %llu\nlevels %d\n", r->grid.tile_units, r->grid.unit[0],
           r->grid.unit[1], (unsigned long long)r->tiles, r->levels);
    for (int d = 0; d < r->levels && d < 32; d++) {
        int level = r->grid.frame == TERRA_FRAME_GEOGRAPHIC ? r->grid.depth - d : d;
        printf("level %d tiles %llu vertices %llu triangles %llu bytes %llu stated %.4f quantization %.4f max_error %.4f\n",
               level, (unsigned long long)r->level[d].tiles, (unsigned long long)r->level[d].vertices,
               (unsigned long long)r->level[d].triangles, (unsigned long long)r->level[d].bytes,
               r->level[d].max_stated, r->level[d].max_quantization, r->level[d].max_error);
    }
    if (r->cut.vertices)
        printf("scenery_vertices %zu\nwelded %zu\ncollapsed %zu\ntriangles %zu\nwalls %zu\n", r->cut.vertices,
               r->cut.welded, r->cut.collapsed, r->cut.triangles, r->cut.walls);
    printf("bytes %llu\nsamples %llu\nread_s %.3f\ncook_s %.3f\nsamples_per_s %.0f\n", (unsigned long long)r->bytes,
           (unsigned long long)r->samples, read_s, r->seconds, r->seconds > 0 ? (double)r->samples / r->seconds : 0);
    printf("mesh_peak_mb %.1f\npeak_mb %.1f\nreader_peak_mb %.1f\n", (double)r->mesh_peak_bytes / 1048576.0,
           rusage_mb(RUSAGE_SELF), rusage_mb(RUSAGE_CHILDREN));
}

/* What a scenery's reading dropped (the archive's metadata says it too). */
static void print_dropped(const terra_scenery *s) {
    printf("dropped_degenerate %zu\ndropped_duplicate %zu\ndropped_not_triangles %zu\ndropped_out_of_range %zu\n",
           s->degenerate, s->duplicate, s->not_triangles, s->out_of_range);
}

/* ---- the command --------------------------------------------------------------------------------- */

enum { OPT_LEVELS = 256, OPT_TILE, OPT_FRAME, OPT_THREADS, OPT_COMP, OPT_CACHE, OPT_NOCACHE, OPT_ENC, OPT_BAND,
       OPT_ZS, OPT_SPACING, OPT_SOURCE, OPT_AREA, OPT_SEED, OPT_STAGE, OPT_MAXMEM, OPT_TRUST };

static int cook_main(int argc, char **argv) {
    static const struct option opts[] = {
        {"output", required_argument, 0, 'o'},        {"max-error", required_argument, 0, 'e'},
        {"levels", required_argument, 0, OPT_LEVELS}, {"tile-size", required_argument, 0, OPT_TILE},
        {"frame", required_argument, 0, OPT_FRAME},   {"threads", required_argument, 0, OPT_THREADS},
        {"compression", required_argument, 0, OPT_COMP}, {"cache", required_argument, 0, OPT_CACHE},
        {"no-cache", no_argument, 0, OPT_NOCACHE},    {"encoding", required_argument, 0, OPT_ENC},
        {"band", required_argument, 0, OPT_BAND},     {"z-scale", required_argument, 0, OPT_ZS},
        {"spacing", required_argument, 0, OPT_SPACING}, {"quiet", no_argument, 0, 'q'},
        {"source", required_argument, 0, OPT_SOURCE}, {"area", required_argument, 0, OPT_AREA},
        {"seed", required_argument, 0, OPT_SEED},     {"stage", required_argument, 0, OPT_STAGE},
        {"max-memory", required_argument, 0, OPT_MAXMEM}, {"trust-script", no_argument, 0, OPT_TRUST},
        {"help", no_argument, 0, 'h'},                {0, 0, 0, 0}};
    const char *out = NULL, *cache = NULL, *script = NULL, *stage = NULL;
    double area[4] = {0, 0, 1024, 1024};
    uint64_t seed = 1;
    bool quiet = false, no_cache = false, trust = false;
    double max_error = 1.0, zscale = 0, spacing = 0;
    int levels = 0, tile = 0, threads = 0, band = 0;
    size_t max_bytes = 0;
    terra_cook_frame frame = TERRA_COOK_FRAME_AUTO;
    terra_compression comp = TERRA_COMPRESS_PACKED;
    terra_raster_encoding enc = TERRA_RASTER_PLAIN;
    static const char *enc_names[] = {"plain", "terrain-rgb", "terrarium"};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":o:e:qh", opts, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case 'e':
            if (!cli_opt_double(CMD, "--max-error", optarg, "metres", 1e-6, 1e6, &max_error)) return EXIT_USAGE;
            if (!(max_error > 0)) return cli_usage_error(CMD, "--max-error must be above 0, not '%s'", optarg);
            break;
        case OPT_LEVELS:
            if (!cli_opt_int(CMD, "--levels", optarg, 1, 25, &levels)) return EXIT_USAGE;
            break;
        case OPT_TILE:
            if (!cli_opt_int(CMD, "--tile-size", optarg, 4, 4096, &tile)) return EXIT_USAGE;
            break;
        case OPT_FRAME:
            if (!strcmp(optarg, "auto")) frame = TERRA_COOK_FRAME_AUTO;
            else if (!strcmp(optarg, "local")) frame = TERRA_COOK_FRAME_LOCAL;
            else if (!strcmp(optarg, "geographic")) frame = TERRA_COOK_FRAME_GEOGRAPHIC;
            else return cli_usage_error(CMD, "--frame: '%s' is not auto, local or geographic", optarg);
            break;
        case OPT_THREADS:
            if (!cli_opt_int(CMD, "--threads", optarg, 1, 64, &threads)) return EXIT_USAGE;
            break;
        case OPT_COMP:
            if (!terra_compression_parse(optarg, &comp))
                return cli_usage_error(CMD, "--compression: '%s' is not packed, gzip, zstd or none", optarg);
            break;
        case OPT_CACHE: cache = optarg; break;
        case OPT_STAGE: stage = optarg; break;
        case OPT_NOCACHE: no_cache = true; break;
        case OPT_ENC: {
            int k = 0;
            while (k < 3 && strcmp(optarg, enc_names[k])) k++;
            if (k == 3) return cli_usage_error(CMD, "--encoding: '%s' is not plain, terrain-rgb or terrarium", optarg);
            enc = (terra_raster_encoding)k;
            break;
        }
        case OPT_BAND:
            if (!cli_opt_int(CMD, "--band", optarg, 1, 65535, &band)) return EXIT_USAGE;
            break;
        case OPT_ZS:
            if (!cli_opt_double(CMD, "--z-scale", optarg, "a factor", -1e6, 1e6, &zscale)) return EXIT_USAGE;
            if (zscale == 0) return cli_usage_error(CMD, "--z-scale must not be 0");
            break;
        case OPT_SPACING:
            if (!cli_opt_double(CMD, "--spacing", optarg, "metres", 1e-6, 1e6, &spacing)) return EXIT_USAGE;
            break;
        case OPT_MAXMEM:
            if (!cli_parse_bytes(optarg, &max_bytes))
                return cli_usage_error(CMD, "--max-memory: '%s' is not a size from 1M to 1P (e.g. 512M, 2G)", optarg);
            break;
        case OPT_SOURCE: script = optarg; break;
        case OPT_TRUST: trust = true; break;
        case OPT_AREA:
            if (!cli_opt_doubles(CMD, "--area", optarg, "X0,Z0,X1,Z1 in metres", 4, -CLI_MAX_COORD, CLI_MAX_COORD, area))
                return EXIT_USAGE;
            if (!(area[0] < area[2] && area[1] < area[3]))
                return cli_usage_error(CMD, "--area wants X0 < X1 and Z0 < Z1, not '%s'", optarg);
            break;
        case OPT_SEED:
            if (!cli_opt_seed(CMD, "--seed", optarg, &seed)) return EXIT_USAGE;
            break;
        case 'q': quiet = true; break;
        case 'h': help(stdout); return EXIT_OK;
        case ':': return cli_usage_error(CMD, "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error(CMD, "unknown option '%s'", argv[optind - 1]);
        }
    }
    const int nin = argc - optind;
    int ranks = 1; /* MPI ranks sharing the cook (terra-cook-mpi under mpirun) */
#ifdef TERRA_HAVE_MPI
    ranks = cli_cook_mpi_ranks();
    if (ranks > 1 && script) return cli_usage_error(CMD, "--source cooks in one process, not on %d MPI ranks", ranks);
    /* the cores shared among the ranks on this machine */
    if (ranks > 1 && !threads) threads = terra_default_threads() / cli_cook_mpi_local_ranks();
#endif
    if (threads < 1) threads = terra_default_threads();
    if (stage && ranks == 1) return cli_usage_error(CMD, "--stage is for a cook on MPI ranks (mpirun -n N terra cook)");
    if (trust && !script) return cli_usage_error(CMD, "--trust-script trusts the script of --source: give one");
    if (script) { /* a script's ground, sampled over the area: as terra bake --tin */
        if (nin) return cli_usage_error(CMD, "--source cooks a script's ground: no INPUT beside it ('%s')", argv[optind]);
        if (!out) return cli_usage_error(CMD, "no output: -o OUT.terra");
        cli_bake_tin t = {.out = out, .script = script, .trust_script = trust, .seed = seed, .scale = 1, .spacing = spacing > 0 ? spacing : 2,
                          .max_error = max_error, .levels = levels, .threads = threads, .compression = (int)comp,
                          .quiet = quiet};
        memcpy(t.area, area, sizeof area);
        return cli_bake_tin_run(&t);
    }
    if (nin < 1) return cli_usage_error(CMD, "no input");
    if (nin > MAX_INPUTS) return cli_usage_error(CMD, "more than %d inputs", MAX_INPUTS);
    if (!out) return cli_usage_error(CMD, "no output: -o OUT.terra");
    if (cache && no_cache) return cli_usage_error(CMD, "--cache and --no-cache do not go together");
    if (levels && frame == TERRA_COOK_FRAME_GEOGRAPHIC)
        return cli_usage_error(CMD, "--levels is for the local frame (geographic tiles go down to the roots)");

    /* Each input's header first: a raster placed on the globe is read in windows, warped by GDAL
     * (one source per thread, each a terra-raster child of its own), and so is one too large to hold
     * (LOCAL_WHOLE_MAX); any other is read whole. */
    terra_raster *rasters = calloc((size_t)nin, sizeof *rasters);
    terra_cook_input *inputs = calloc((size_t)nin, sizeof *inputs);
    terra_raster_source **sources = calloc((size_t)nin * (size_t)threads, sizeof *sources);
    terra_scenery *sceneries = calloc((size_t)nin, sizeof *sceneries);
    uint32_t **named = calloc((size_t)nin, sizeof *named);
    int rc = EXIT_OK, opened = 0;
    bool geo = frame == TERRA_COOK_FRAME_GEOGRAPHIC;
    double t0 = terra_now_s();
    if (!rasters || !inputs || !sources || !sceneries || !named) rc = cli_error(CMD, "out of memory");
    for (; rc == EXIT_OK && opened < nin; opened++) {
        terra_raster_desc rd = {.path = argv[optind + opened], .encoding = enc, .band = band, .z_scale = zscale,
                                .spacing_m = spacing, .max_bytes = max_bytes, .nan_is_nodata = true,
                                .min_height = TERRA_COOK_MIN_HEIGHT, .max_height = TERRA_COOK_MAX_HEIGHT};
        terra_raster_source **s = sources + (size_t)opened * (size_t)threads;
        inputs[opened] = (terra_cook_input){.path = rd.path};
        if (is_scenery(rd.path)) continue;
        if (terra_raster_open(&rd, NULL, &s[0]) != TERRA_OK) {
            rc = cli_error(CMD, "%s", terra_last_error());
            break;
        }
        const terra_raster_info *info = terra_raster_source_info(s[0]);
        /* another body's raster too: the geographic frame refuses it by name */
        if (frame == TERRA_COOK_FRAME_AUTO && (info->has_lonlat || info->off_earth)) geo = true;
        inputs[opened] = (terra_cook_input){.path = rd.path, .sources = s, .source_count = threads};
    }
    /* The cache: every input hashed before any is read for cooking (a scenery is parsed first for the
     * files it names), then the record compared: an unchanged cook ends here. */
    terra_cook_manifest *manifest = NULL;
    terra_cook_cache *cc = NULL;
    char canonical[512]; /* every option that shapes the tiles */
    snprintf(canonical, sizeof canonical,
             "max_error=%.17g;levels=%d;tile_size=%d;frame=%s;encoding=%s;band=%d;z_scale=%.17g;spacing=%.17g;"
             "compression=%s",
             max_error, levels, tile ? tile : 256, geo ? "geographic" : "local", enc_names[enc], band ? band : 1,
             zscale ? zscale : 1.0, spacing, terra_compression_name(comp));
    /* on MPI ranks the parts are the cache (cli/cook_mpi.c) */
    if (rc == EXIT_OK && !no_cache && ranks == 1) {
        if (terra_cook_manifest_create(canonical, &manifest) != TERRA_OK) rc = cli_error(CMD, "%s", terra_last_error());
        for (int i = 0; rc == EXIT_OK && i < nin; i++)
            if (terra_cook_manifest_add_input(manifest, inputs[i].path, NULL) != TERRA_OK)
                rc = cli_error(CMD, "%s", terra_last_error());
    }
    for (int i = 0; rc == EXIT_OK && i < nin; i++) {
        if (!is_scenery(inputs[i].path)) continue;
        /* in a child process of its own: assimp's memory held to the budget, a crash there kept there */
        const terra_scenery_desc sd = {.path = inputs[i].path, .max_bytes = max_bytes};
        if (terra_scenery_read_isolated(&sd, NULL, &sceneries[i]) != TERRA_OK) {
            rc = cli_error(CMD, "%s", terra_last_error());
            break;
        }
        inputs[i].scenery = &sceneries[i];
        /* the files it names join the manifest: absent ones match while they stay absent */
        named[i] = calloc(sceneries[i].file_count + 1, sizeof *named[i]);
        if (!named[i]) rc = cli_error(CMD, "out of memory");
        for (size_t f = 0; manifest && rc == EXIT_OK && f < sceneries[i].file_count; f++)
            if (terra_cook_manifest_add_named(manifest, sceneries[i].files[f].path, &named[i][f]) != TERRA_OK)
                rc = cli_error(CMD, "%s", terra_last_error());
        inputs[i].named = named[i], inputs[i].named_count = manifest ? sceneries[i].file_count : 0;
    }
    if (rc == EXIT_OK && manifest && terra_cook_cache_open(cache, out, manifest, &cc) != TERRA_OK)
        rc = cli_error(CMD, "%s", terra_last_error());
    if (rc == EXIT_OK && cc && terra_cook_cache_get_outcome(cc) == TERRA_COOK_CACHE_UNCHANGED) {
        printf("output %s\ncache %s\n", out, terra_cook_cache_reason(cc));
        goto end;
    }
    for (int i = 0; rc == EXIT_OK && i < nin; i++) {
        if (inputs[i].scenery) continue;
        terra_raster_source **s = sources + (size_t)i * (size_t)threads;
        terra_raster_desc rd = {.path = inputs[i].path, .encoding = enc, .band = band, .z_scale = zscale,
                                .spacing_m = spacing, .max_bytes = max_bytes, .nan_is_nodata = true,
                                .min_height = TERRA_COOK_MIN_HEIGHT, .max_height = TERRA_COOK_MAX_HEIGHT};
        /* in the local frame too, a raster too large to hold as floats is read in windows */
        const terra_raster_info *info = terra_raster_source_info(s[0]);
        const char *cap = getenv("TERRA_COOK_WHOLE_MAX"); /* for tests: a smaller cap */
        const uint64_t whole_max = cap ? strtoull(cap, NULL, 10) : LOCAL_WHOLE_MAX;
        const bool windows = geo || (uint64_t)info->width * (uint64_t)info->height > whole_max;
        for (int k = 1; windows && rc == EXIT_OK && k < threads; k++)
            if (terra_raster_open(&rd, NULL, &s[k]) != TERRA_OK) rc = cli_error(CMD, "%s", terra_last_error());
        if (windows) continue;
        terra_raster_close(s[0]);
        s[0] = NULL;
        if (terra_raster_read_isolated(&rd, NULL, &rasters[i]) != TERRA_OK) {
            rc = cli_error(CMD, "%s", terra_last_error());
            break;
        }
        inputs[i].raster = &rasters[i];
        inputs[i].sources = NULL, inputs[i].source_count = 0;
    }
    const double read_s = terra_now_s() - t0;
    if (rc == EXIT_OK) {
        char options[256];
        snprintf(options, sizeof options,
                 "{\"encoding\":\"%s\",\"band\":%d,\"z_scale\":%.17g,\"spacing_m\":%.17g,\"max_error\":%.17g}",
                 enc_names[enc], band ? band : 1, zscale ? zscale : 1.0, spacing, max_error);
        bar b = {.shown = -1};
        pthread_mutex_init(&b.lock, NULL);
        const bool show = !quiet && isatty(STDERR_FILENO);
        terra_cook_desc d = {.inputs = inputs, .input_count = (size_t)nin, .output = out, .max_error = max_error,
                             .levels = levels, .tile_size = tile,
                             .frame = geo ? TERRA_COOK_FRAME_GEOGRAPHIC : TERRA_COOK_FRAME_LOCAL, .threads = threads,
                             .compression = comp, .options_json = options, .progress = show ? bar_draw : NULL,
                             .progress_user = &b, .cache = cc};
        terra_cook_report rep;
#ifdef TERRA_HAVE_MPI
        if (ranks > 1) {
            rc = cli_cook_mpi(&d, canonical, cache, no_cache, stage, quiet, print_report, read_s);
            pthread_mutex_destroy(&b.lock);
            goto end;
        }
#endif
        terra_status st = terra_cook(&d, &rep);
        if (show && b.shown >= 0) fputc('\n', stderr);
        pthread_mutex_destroy(&b.lock);
        /* the readers' processes end here, so their peak memory is counted in the report */
        for (size_t i = 0; i < (size_t)nin * (size_t)threads; i++) terra_raster_close(sources[i]), sources[i] = NULL;
        if (st != TERRA_OK) rc = cli_error(CMD, "%s", terra_last_error());
        else print_report(out, &rep, read_s);
        for (int i = 0; st == TERRA_OK && i < nin; i++)
            if (inputs[i].scenery) print_dropped(inputs[i].scenery);
        if (st == TERRA_OK && cc) printf("cache %s\ntiles_reused %llu\nfinest_reused %llu\n", terra_cook_cache_reason(cc),
                                         (unsigned long long)rep.tiles_reused, (unsigned long long)rep.finest_reused);
    }
end:
    terra_cook_cache_close(cc);
    terra_cook_manifest_free(manifest);
    for (int i = 0; rasters && i < nin; i++) terra_raster_free(&rasters[i]);
    for (size_t i = 0; sources && i < (size_t)nin * (size_t)threads; i++) terra_raster_close(sources[i]);
    for (int i = 0; sceneries && i < nin; i++) terra_scenery_free(&sceneries[i]);
    for (int i = 0; named && i < nin; i++) free(named[i]);
    free(rasters);
    free(inputs);
    free(sources);
    free(sceneries);
    free(named);
    return rc;
}

int cmd_cook(int argc, char **argv) {
    const int rc = cook_main(argc, argv);
#ifdef TERRA_HAVE_MPI
    cli_cook_mpi_end();
#endif
    return rc;
}

/* ---- terra bake --tin (cli.h) ------------------------------------------------------------------- */

typedef struct bake_rows {
    const terra_source *src;
    const cli_bake_tin *t;
    terra_raster *r;
    int j0, j1; /* rows [j0, j1) */
    float min_z, max_z;
    terra_status status;
    char message[256];
} bake_rows;

static void *bake_rows_run(void *user) {
    bake_rows *b = user;
    for (int j = b->j0; j < b->j1 && b->status == TERRA_OK; j++)
        for (int i = 0; i < b->r->width; i++) {
            float *h = &b->r->heights[(size_t)j * (size_t)b->r->width + (size_t)i];
            b->status = terra_source_height(b->src, b->t->area[0] + i * b->t->spacing, b->t->area[1] + j * b->t->spacing, h);
            if (b->status != TERRA_OK) {
                snprintf(b->message, sizeof b->message, "%s", terra_last_error());
                break;
            }
            b->min_z = fminf(b->min_z, *h), b->max_z = fmaxf(b->max_z, *h);
        }
    return NULL;
}

int cli_bake_tin_run(const cli_bake_tin *t) {
    const double w_m = t->area[2] - t->area[0], h_m = t->area[3] - t->area[1];
    const double cols = floor(w_m / t->spacing + 1e-9) + 1, rows = floor(h_m / t->spacing + 1e-9) + 1;
    if (cols * rows > (double)LOCAL_WHOLE_MAX)
        return cli_usage_error("bake", "--tin: %.0f x %.0f samples over the area at %g m; at most %llu (a smaller --area, "
                               "or fewer --cells for a wider spacing)", cols, rows, t->spacing,
                               (unsigned long long)LOCAL_WHOLE_MAX);
    terra_source *src = NULL;
    terra_script *script = NULL;
    if (t->script ? cli_script_open(t->script, t->seed, t->trust_script, &script) != TERRA_OK
                  : terra_world_create(&(terra_world_desc){.seed = t->seed, .scale = t->scale}, &src) != TERRA_OK)
        return cli_error("bake", "%s", terra_last_error());
    if (script) src = cli_script_source(script);
    terra_edit_layer *edits = NULL;
    terra_source *under = src; /* what the edits lie over, closed after them */
    if (t->journal && terra_edit_layer_create(&(terra_edit_layer_desc){.base = src, .journal = t->journal}, &edits) != TERRA_OK) {
        const int rc = cli_error("bake", "%s", terra_last_error());
        if (script) cli_script_close(script);
        else terra_source_destroy(src);
        return rc;
    }
    if (edits) src = terra_edit_layer_source(edits);
    /* the world's heights as a raster: column i at x0 + i spacing, row j at z0 + j spacing (rows run
     * down the image, which the cook's local frame takes as +z), rows shared among the threads */
    terra_raster r = {.width = (int)cols, .height = (int)rows, .spacing_x = t->spacing, .spacing_y = t->spacing,
                      .geo = {0, 1, 0, 0, 0, 1}, .min_z = INFINITY, .max_z = -INFINITY};
    r.heights = malloc(sizeof(float) * (size_t)r.width * (size_t)r.height);
    int rc = r.heights ? EXIT_OK : cli_error("bake", "out of memory for %d x %d samples", r.width, r.height);
    const double t0 = terra_now_s();
    const int nth = t->threads ? t->threads : terra_default_threads();
    bake_rows *jobs = calloc((size_t)nth, sizeof *jobs);
    pthread_t *th = calloc((size_t)nth, sizeof *th);
    if (rc == EXIT_OK && (!jobs || !th)) rc = cli_error("bake", "out of memory");
    int started = 0;
    for (; rc == EXIT_OK && started < nth; started++) {
        jobs[started] = (bake_rows){.src = src, .t = t, .r = &r, .j0 = (int)((int64_t)r.height * started / nth),
                                    .j1 = (int)((int64_t)r.height * (started + 1) / nth), .min_z = INFINITY,
                                    .max_z = -INFINITY, .status = TERRA_OK};
        if (pthread_create(&th[started], NULL, bake_rows_run, &jobs[started]) != 0) {
            rc = cli_error("bake", "cannot start a thread");
            break;
        }
    }
    for (int k = 0; k < started; k++) {
        pthread_join(th[k], NULL);
        if (jobs[k].status != TERRA_OK && rc == EXIT_OK) rc = cli_error("bake", "%s", jobs[k].message);
        r.min_z = fminf(r.min_z, jobs[k].min_z), r.max_z = fmaxf(r.max_z, jobs[k].max_z);
    }
    free(jobs), free(th);
    terra_edit_layer_destroy(edits);
    if (script) cli_script_close(script);
    else terra_source_destroy(under);
    if (rc == EXIT_OK) {
        char ground[8400], options[8800];
        cli_ground_json(ground, sizeof ground, t->script, t->seed, t->scale);
        snprintf(options, sizeof options,
                 "{%s,\"area\":[%.17g,%.17g,%.17g,%.17g],\"spacing_m\":%.17g,\"max_error\":%.17g}", ground,
                 t->area[0], t->area[1], t->area[2], t->area[3], t->spacing, t->max_error);
        const terra_cook_input in = {.path = t->script ? t->script : "terra default world", .raster = &r};
        bar b = {.shown = -1};
        pthread_mutex_init(&b.lock, NULL);
        const bool show = !t->quiet && isatty(STDERR_FILENO);
        terra_cook_desc d = {.inputs = &in, .input_count = 1, .output = t->out, .max_error = t->max_error,
                             .levels = t->levels, .frame = TERRA_COOK_FRAME_LOCAL,
                             .threads = t->threads ? t->threads : terra_default_threads(),
                             .compression = (terra_compression)t->compression, .options_json = options,
                             .progress = show ? bar_draw : NULL, .progress_user = &b};
        terra_cook_report rep;
        const double sample_s = terra_now_s() - t0;
        const terra_status st = terra_cook(&d, &rep);
        if (show && b.shown >= 0) fputc('\n', stderr);
        pthread_mutex_destroy(&b.lock);
        if (st != TERRA_OK) rc = cli_error("bake", "%s", terra_last_error());
        else if (!t->quiet) print_report(t->out, &rep, sample_s);
    }
    free(r.heights);
    return rc;
}
