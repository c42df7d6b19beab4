/* terra check ARCHIVE [--source INPUT...]: checks what a cooked archive promises, independently of
 * the cook (terra/cook_check.h), prints a report per level and exits 1 on the first broken promise. */
#include "cli.h"
#include "terra/cook_check.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define CMD "check"
#define MAX_SOURCES 64

static void help(FILE *f) {
    fprintf(f,
            "Usage: terra check [OPTIONS] ARCHIVE\n\n"
            "Checks a cooked archive's promises, independently of the cook, and exits 1 on the first\n"
            "broken one (naming the tiles, the place and the numbers):\n"
            "  - every tile decodes and reads back as written (re-encoded, the same bytes); its edge lists\n"
            "    name the vertices on its sides;\n"
            "  - neighbouring tiles, at the same level and at any two levels, share their border: every\n"
            "    vertex and every border edge one has on the shared segment the other has (no crack, no\n"
            "    T-junction), to 1 mm or, where 16-bit quantization cannot hold a millimetre, to one\n"
            "    quantization step of the wider tile (the report says which);\n"
            "  - no tile states a smaller geometric error than one of its children;\n"
            "  - with --source: each tile's stated geometric error is at least the vertical distance of\n"
            "    the tile as decoded (16-bit quantization included) from every source sample its\n"
            "    triangles cover (and those quantization moved its rim off, against its nearest point),\n"
            "    to 1 mm; no no-data sample lies under its ground beyond what quantization explains.\n\n"
            "Options:\n"
            "  --source INPUT      a raster the archive was cooked from (repeat for several, in the cook's\n"
            "                      order: where they overlap, the finer one, or of two as fine the one given\n"
            "                      first, is the ground wherever it has data). NaN samples are no-data. Local\n"
            "                      frame: sample (col, row) at x = col * spacing, z = row * spacing metres;\n"
            "                      geographic: the raster's geotransform (EPSG:4326)\n"
            "  --encoding E        plain (default), terrain-rgb or terrarium (as terra mesh / terra cook)\n"
            "  --z-scale S         multiply source heights by S\n"
            "  --spacing M         metres between source samples (default: georeferencing, else 1)\n"
            "  --allow-quantization  grant on top of each stated error what 16-bit quantization of the\n"
            "                      tile may add at the sample (for errors measured before encoding)\n"
            "  -q, --quiet         print nothing when every promise holds\n"
            "  -h, --help          this text\n");
}

static void print_report(const terra_cook_check_report *r, const char *path, bool allow_q) {
    if (r->frame == TERRA_FRAME_LOCAL)
        printf("%s: local frame, level-0 tile %g m, %llu tiles checked\n", path, r->tile_size_m,
               (unsigned long long)r->tiles);
    else printf("%s: geographic frame (EPSG:4326 TMS), %llu tiles checked\n", path, (unsigned long long)r->tiles);
    const char *hu = r->frame == TERRA_FRAME_LOCAL ? "m" : "deg";
    printf("%5s %7s %10s %10s %11s %12s %10s %10s %8s %7s %9s %11s %9s\n", "level", "tiles", "vertices", "triangles",
           "stated_max", "measured_max", "quant_max", "samples", "pairs", "at_1mm", "border_v", "tol_along", "tol_up");
    for (int l = r->min_level; l <= r->max_level && l < 32; l++) {
        const terra_cook_check_level *L = &r->level[l];
        if (!L->tiles) continue;
        printf("%5d %7llu %10llu %10llu %11.4g %12.4g %10.3g %10llu %8llu %7llu %9llu %8.3g %-2s %8.3g\n", l,
               (unsigned long long)L->tiles, (unsigned long long)L->vertices, (unsigned long long)L->triangles,
               L->stated_error_max, L->measured_error_max, L->quantization_max, (unsigned long long)L->samples,
               (unsigned long long)L->border_pairs, (unsigned long long)L->border_pairs_mm,
               (unsigned long long)L->border_vertices, L->border_tolerance_max, hu, L->border_vertical_tolerance_max);
    }
    printf("(pairs: neighbour pairs whose finer tile is at the level; at_1mm: of them, compared to 1 mm along and up,\n"
           " the others to one 16-bit quantization step of the wider tile, largest shown as tol_along / tol_up;\n"
           " quant_max: the most 16-bit quantization may add to a tile's distance from a sample)\n");
    printf("stated errors: %s\n", allow_q ? "compared with the quantization allowance (quant_max) on top"
                                          : "compared as stated with the decoded tiles (quant_max: what quantization may add)");
    if (r->holes) printf("no-data source samples: %llu, none covered\n", (unsigned long long)r->holes);
}

int cmd_check(int argc, char **argv) {
    enum { OPT_SOURCE = 256, OPT_ENC, OPT_ZS, OPT_SPACING, OPT_ALLOW_Q };
    static const struct option opts[] = {{"source", required_argument, 0, OPT_SOURCE},
                                         {"encoding", required_argument, 0, OPT_ENC},
                                         {"z-scale", required_argument, 0, OPT_ZS},
                                         {"spacing", required_argument, 0, OPT_SPACING},
                                         {"allow-quantization", no_argument, 0, OPT_ALLOW_Q},
                                         {"quiet", no_argument, 0, 'q'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *sources[MAX_SOURCES];
    int nsrc = 0;
    bool quiet = false, allow_q = false;
    terra_raster_encoding enc = TERRA_RASTER_PLAIN;
    double zscale = 0, spacing = 0;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":qh", opts, NULL)) != -1) {
        switch (c) {
        case OPT_SOURCE:
            if (nsrc == MAX_SOURCES) return cli_usage_error(CMD, "at most %d --source inputs", MAX_SOURCES);
            sources[nsrc++] = optarg;
            break;
        case OPT_ENC:
            if (!strcmp(optarg, "plain")) enc = TERRA_RASTER_PLAIN;
            else if (!strcmp(optarg, "terrain-rgb")) enc = TERRA_RASTER_TERRAIN_RGB;
            else if (!strcmp(optarg, "terrarium")) enc = TERRA_RASTER_TERRARIUM;
            else return cli_usage_error(CMD, "--encoding: '%s' is not plain, terrain-rgb or terrarium", optarg);
            break;
        case OPT_ZS:
            if (!cli_parse_double(optarg, &zscale) || zscale == 0 || !isfinite(zscale))
                return cli_usage_error(CMD, "--z-scale: '%s' is not a non-zero number", optarg);
            break;
        case OPT_SPACING:
            if (!cli_parse_double(optarg, &spacing) || !(spacing > 0) || !isfinite(spacing))
                return cli_usage_error(CMD, "--spacing: '%s' is not a positive number", optarg);
            break;
        case OPT_ALLOW_Q: allow_q = true; break;
        case 'q': quiet = true; break;
        case 'h': help(stdout); return EXIT_OK;
        case ':': return cli_usage_error(CMD, "%s needs a value", argv[optind - 1]);
        default: return cli_usage_error(CMD, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind != argc - 1) return cli_usage_error(CMD, "expected one ARCHIVE");
    const char *path = argv[optind];
    terra_raster_desc rd[MAX_SOURCES];
    memset(rd, 0, sizeof rd);
    for (int i = 0; i < nsrc; i++)
        rd[i].path = sources[i], rd[i].encoding = enc, rd[i].z_scale = zscale, rd[i].spacing_m = spacing,
        rd[i].nan_is_nodata = true; /* as terra cook reads them */
    const terra_cook_check_desc desc = {path, rd, nsrc, NULL, allow_q};
    terra_cook_check_report rep;
    const terra_status st = terra_cook_check(&desc, &rep);
    if (st && !rep.broken) return cli_error(CMD, "%s", terra_last_error());
    if (!quiet) print_report(&rep, path, allow_q);
    if (st) {
        if (!quiet) printf("stopped at the first broken promise (the figures above are up to there)\n");
        fprintf(stderr, "terra check: broken promise: %s\n", terra_last_error());
        return EXIT_FAIL;
    }
    if (!quiet) printf("every promise holds\n");
    return EXIT_OK;
}
