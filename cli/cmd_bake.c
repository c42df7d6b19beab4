/* terra bake OUT.terra: the default world (or another source) baked into a tile archive. */
#include "cli.h"
#include "terra/bake.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#pragma weak cli_bake_tin_run

static void help(FILE *f) {
    fprintf(f,
            "Usage: terra bake [OPTIONS] OUT.terra\n\n"
            "Bakes the built-in default world (or a script's ground: --source) into an archive of quantized-mesh-1.0 tiles, N levels,\n"
            "with per-vertex normals, surface ids (terra's material extension) and each tile's true\n"
            "geometric error. The archive is written to a temporary file and renamed into place.\n"
            "With --tin, the world is sampled at the grid's finest spacing (tile-size / cells) over the\n"
            "area and cooked into irregular (TIN) tiles as `terra cook` cooks a raster: the finest level\n"
            "within --max-error, each coarser one its children merged and simplified with their outer\n"
            "border kept; the archive's local frame starts at the area's corner (X0, Z0).\n\n"
            "Options:\n"
            "  --frame local|geographic  local: scenery metres, level 0 finest (default);\n"
            "                            geographic: EPSG:4326 TMS tiles for Cesium, level 0 = the two roots\n"
            "  --levels N                how many levels: 0..N-1 are baked, N from 1 to 25 (default 5)\n"
            "  --area X0,Z0,X1,Z1        local frame: the area in metres, each within 1e9 (default 0,0,1024,1024)\n"
            "  --bounds W,S,E,N          geographic frame: degrees (default 7,45,7.5,45.5)\n"
            "  --tile-size M             local frame: side of a level-0 tile in metres, 0.01..100000 (default 64)\n"
            "  --cells N                 cells along a tile side, a power of two 2..256 (default 32)\n"
            "  --metres-per-degree K     geographic frame: how the world's metres lie on the globe, 1..1e8\n"
            "                            (default 111319.49)\n"
            "  --compression gzip|zstd|none   per-tile compression (default gzip)\n"
            "  --source FILE             the ground of a Lua script instead of the default world (see\n"
            "                            terra render --help; its surfaces are baked as their ids),\n"
            "                            run sandboxed, without the file system or the process\n"
            "  --trust-script            run --source with all of LuaJIT's libraries (os, io, ffi, debug,\n"
            "                            bytecode): only a script you wrote or trust as a program\n"
            "  --seed S                  the default world's seed (default 1; with --source: terra.world's)\n"
            "  --edits FILE              the edits of a journal (terra edit, terra view) over the ground\n"
            "  --scale S                 the default world's horizontal scale, 0.001..1000 (default 1)\n"
            "  --no-normals              leave out the normals extension\n"
            "  --no-surfaces             leave out the material extension\n"
            "  --tin                     TIN tiles (local frame; no surfaces), run by terra-cook\n"
            "  -e, --max-error M         with --tin: the finest level's error bound in metres,\n"
            "                            1e-6..1e6 (default 1)\n"
            "  --threads N               worker threads, 1..64 (default: one per core)\n"
            "  -q, --quiet               print nothing on success\n"
            "  -h, --help                this text\n");
}

int cmd_bake(int argc, char **argv) {
    enum { O_FRAME = 256, O_LEVELS, O_AREA, O_BOUNDS, O_TILE, O_CELLS, O_MPD, O_COMP, O_SEED, O_SCALE, O_NONORM, O_NOSURF, O_THREADS, O_TIN, O_SOURCE, O_EDITS, O_TRUST };
    static const struct option opts[] = {
        {"frame", required_argument, 0, O_FRAME},     {"levels", required_argument, 0, O_LEVELS},
        {"area", required_argument, 0, O_AREA},       {"bounds", required_argument, 0, O_BOUNDS},
        {"tile-size", required_argument, 0, O_TILE},  {"cells", required_argument, 0, O_CELLS},
        {"metres-per-degree", required_argument, 0, O_MPD}, {"compression", required_argument, 0, O_COMP},
        {"seed", required_argument, 0, O_SEED},       {"scale", required_argument, 0, O_SCALE},
        {"no-normals", no_argument, 0, O_NONORM},     {"no-surfaces", no_argument, 0, O_NOSURF},
        {"threads", required_argument, 0, O_THREADS}, {"quiet", no_argument, 0, 'q'},
        {"tin", no_argument, 0, O_TIN},               {"max-error", required_argument, 0, 'e'},
        {"source", required_argument, 0, O_SOURCE},   {"edits", required_argument, 0, O_EDITS},
        {"trust-script", no_argument, 0, O_TRUST},
        {"help", no_argument, 0, 'h'},                {0, 0, 0, 0}};
    terra_bake_desc d = {0};
    d.compression = TERRA_COMPRESS_GZIP;
    uint64_t seed = 1;
    double scale = 1;
    const char *script = NULL, *journal = NULL;
    bool quiet = false, tin = false, levels_given = false, compression_given = false, trust = false;
    double max_error = 1.0;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "qhe:", opts, NULL)) != -1) {
        switch (c) {
        case O_FRAME:
            if (!strcmp(optarg, "local")) d.frame = TERRA_FRAME_LOCAL;
            else if (!strcmp(optarg, "geographic")) d.frame = TERRA_FRAME_GEOGRAPHIC;
            else return cli_usage_error("bake", "--frame: expected local or geographic, got '%s'", optarg);
            break;
        case O_LEVELS:
            if (!cli_opt_int("bake", "--levels", optarg, 1, 25, &d.levels)) return EXIT_USAGE;
            levels_given = true;
            break;
        case O_AREA:
            /* refused here rather than in the description, where all zero means the default */
            if (!cli_opt_doubles("bake", "--area", optarg, "X0,Z0,X1,Z1 in metres", 4, -CLI_MAX_COORD, CLI_MAX_COORD,
                                 d.area))
                return EXIT_USAGE;
            if (!(d.area[0] < d.area[2] && d.area[1] < d.area[3]))
                return cli_usage_error("bake", "--area wants X0 < X1 and Z0 < Z1, not '%s'", optarg);
            break;
        case O_BOUNDS:
            if (!cli_opt_doubles("bake", "--bounds", optarg, "W,S,E,N in degrees", 4, -180, 180, d.bounds))
                return EXIT_USAGE;
            if (!(d.bounds[0] < d.bounds[2] && d.bounds[1] < d.bounds[3] && d.bounds[1] >= -90 && d.bounds[3] <= 90))
                return cli_usage_error("bake", "--bounds wants W < E from -180 to 180 and S < N from -90 to 90, not '%s'",
                                       optarg);
            break;
        case O_TILE:
            if (!cli_opt_double("bake", "--tile-size", optarg, "metres", 0.01, 100000, &d.tile0_size)) return EXIT_USAGE;
            break;
        case O_CELLS:
            if (!cli_opt_cells("bake", "--cells", optarg, 2, 256, &d.cells)) return EXIT_USAGE;
            break;
        case O_MPD:
            if (!cli_opt_double("bake", "--metres-per-degree", optarg, "metres", 1, 1e8, &d.metres_per_degree))
                return EXIT_USAGE;
            break;
        case O_COMP:
            if (!terra_compression_parse(optarg, &d.compression))
                return cli_usage_error("bake", "--compression: expected gzip, zstd or none");
            compression_given = true;
            break;
        case O_SEED:
            if (!cli_opt_seed("bake", "--seed", optarg, &seed)) return EXIT_USAGE;
            break;
        case O_SCALE:
            if (!cli_opt_double("bake", "--scale", optarg, "a factor", 0.001, 1000, &scale)) return EXIT_USAGE;
            break;
        case O_NONORM: d.no_normals = true; break;
        case O_NOSURF: d.no_surfaces = true; break;
        case O_THREADS:
            if (!cli_opt_int("bake", "--threads", optarg, 1, 64, &d.threads)) return EXIT_USAGE;
            break;
        case O_TIN: tin = true; break;
        case O_SOURCE: script = optarg; break;
        case O_TRUST: trust = true; break;
        case O_EDITS: journal = optarg; break;
        case 'e':
            if (!cli_opt_double("bake", "--max-error", optarg, "metres", 1e-6, 1e6, &max_error)) return EXIT_USAGE;
            break;
        case 'q': quiet = true; break;
        case 'h': help(stdout); return EXIT_OK;
        default: return cli_usage_error("bake", "unknown option");
        }
    }
    if (optind != argc - 1) return cli_usage_error("bake", "expected one OUT.terra");
    if (script && scale != 1) return cli_usage_error("bake", "--scale is the default world's; a script sets its own");
    if (trust && !script) return cli_usage_error("bake", "--trust-script trusts the script of --source: give one");
    const char *out = argv[optind];
    if (tin) {
        if (d.frame == TERRA_FRAME_GEOGRAPHIC) return cli_usage_error("bake", "--tin bakes the local frame only");
        if (!cli_bake_tin_run) return cli_run_sibling("bake", "terra-cook"); /* meshoptimizer's program */
        const double tile0 = d.tile0_size > 0 ? d.tile0_size : 64;
        cli_bake_tin t = {.out = out, .script = script, .trust_script = trust, .journal = journal, .seed = seed, .scale = scale, .spacing = tile0 / (d.cells ? d.cells : 32),
                          .max_error = max_error, .levels = levels_given ? d.levels : 0, .threads = d.threads,
                          .compression = compression_given ? (int)d.compression : (int)TERRA_COMPRESS_PACKED,
                          .quiet = quiet};
        const bool area = d.area[0] != 0 || d.area[1] != 0 || d.area[2] != 0 || d.area[3] != 0;
        const double dflt[4] = {0, 0, 1024, 1024};
        for (int k = 0; k < 4; k++) t.area[k] = area ? d.area[k] : dflt[k];
        return cli_bake_tin_run(&t);
    }
    terra_bake_desc r;
    if (terra_bake_desc_resolve(&d, &r) != TERRA_OK) return cli_usage_error("bake", "%s", terra_last_error());
    const int top = r.levels - 1;

    terra_source *src = NULL;
    terra_script *lua = NULL;
    if (script ? cli_script_open(script, seed, trust, &lua) != TERRA_OK
               : terra_world_create(&(terra_world_desc){.seed = seed, .scale = scale}, &src) != TERRA_OK)
        return cli_error("bake", "%s", terra_last_error());
    if (lua) src = cli_script_source(lua);
    terra_edit_layer *edits = NULL;
    if (journal && terra_edit_layer_create(&(terra_edit_layer_desc){.base = src, .journal = journal}, &edits) != TERRA_OK) {
        const int rc = cli_error("bake", "%s", terra_last_error());
        if (lua) cli_script_close(lua);
        else terra_source_destroy(src);
        return rc;
    }
    const terra_source *ground_src = edits ? terra_edit_layer_source(edits) : src;
    char ground[8400], manifest[8500];
    cli_ground_json(ground, sizeof ground, script, seed, scale);
    snprintf(manifest, sizeof manifest, "{%s}", ground);
    r.source_json = manifest;
    r.name = script ? script : "terra default world";
    terra_bake_stats st;
    terra_status s = terra_bake(ground_src, out, &r, &st);
    terra_edit_layer_destroy(edits);
    if (lua) cli_script_close(lua);
    else terra_source_destroy(src);
    if (s != TERRA_OK) return cli_error("bake", "%s", terra_last_error());
    if (!quiet) {
        printf("terra bake: %s: %" PRIu64 " tiles (levels 0..%d, %s frame), %" PRIu64 " vertices, %" PRIu64
               " triangles, %.1f MB encoded -> %.1f MB stored, %.2f s\n",
               out, st.tiles, top, terra_frame_name(r.frame), st.vertices, st.triangles, st.raw_bytes / 1e6,
               st.stored_bytes / 1e6, st.seconds);
        printf("geometric error per level (m):");
        for (int l = 0; l <= top; l++) printf(" %d:%.3g", l, st.max_error_per_level[l]);
        printf("\n");
    }
    return EXIT_OK;
}
