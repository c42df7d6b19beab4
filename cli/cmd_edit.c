/* terra edit JOURNAL: appends an edit to an edit journal (edit.h), or lists what one holds, so the
 * ground's edits can be written by hand or by scripts and then drawn, baked or driven over
 * (--edits JOURNAL on fly, render, view, bake). */
#include "cli.h"
#include "terra/edit.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

static void help(FILE *f) {
    fprintf(f, "Usage: terra edit JOURNAL BRUSH --at X,Z [OPTIONS]\n"
               "       terra edit JOURNAL --list\n\n"
               "Appends one edit to an edit journal (created if missing), checked first; or, with --list,\n"
               "says how many edits the journal holds (replaying it read-only: a torn last edit is left\n"
               "out with a warning and left in the file, a damaged one is an error; the journal is never\n"
               "written, so a process appending to it meanwhile is safe). The journal is what --edits\n"
               "takes in terra fly, render, view and bake: the same journal over the same ground is the\n"
               "same ground, bit for bit, on every machine. One place takes at most %d edits (a smooth\n"
               "counting 4): every query there replays them all.\n\n"
               "BRUSH: raise, lower (by --amount metres), flatten (to the height --amount), smooth (by the\n"
               "fraction --amount), dig (down to the floor height --amount), paint (--surface N).\n\n"
               "Options:\n"
               "      --at X,Z          the centre, metres (each within 1e7)\n"
               "      --shape S         cylinder (default), box or pit (a dig's floor a sphere's bottom)\n"
               "      --radius R        radius, or a box's half size along its x (default 5)\n"
               "      --half-z H        a box's half size along its z (default: --radius)\n"
               "      --yaw DEG         a box's turn (default 0)\n"
               "      --falloff F       metres over which the edit fades out (default 4)\n"
               "      --amount A        see BRUSH (default 1)\n"
               "      --surface N       paint: the surface id, 1..255\n"
               "      --seed S          dig and flatten at a height above the default world of seed S\n"
               "                        instead (--amount then counts from its ground at the centre)\n"
               "      --list            how many edits the journal holds\n"
               "  -h, --help            this help\n",
            TERRA_EDIT_MAX_OVERLAP);
}

int cmd_edit(int argc, char **argv) {
    enum { O_AT = 256, O_SHAPE, O_RADIUS, O_HALFZ, O_YAW, O_FALLOFF, O_AMOUNT, O_SURFACE, O_LIST, O_SEED };
    static const struct option opts[] = {
        {"at", required_argument, 0, O_AT},           {"shape", required_argument, 0, O_SHAPE},
        {"radius", required_argument, 0, O_RADIUS},   {"half-z", required_argument, 0, O_HALFZ},
        {"yaw", required_argument, 0, O_YAW},         {"falloff", required_argument, 0, O_FALLOFF},
        {"amount", required_argument, 0, O_AMOUNT},   {"surface", required_argument, 0, O_SURFACE},
        {"list", no_argument, 0, O_LIST},             {"seed", required_argument, 0, O_SEED},
        {"help", no_argument, 0, 'h'},                {0, 0, 0, 0}};
    terra_edit e = {.radius = 5, .falloff = 4, .amount = 1};
    double at[2] = {0, 0}, yaw = 0;
    bool have_at = false, list = false, relative = false;
    uint64_t seed = 0;
    int surface = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case O_AT:
            if (!cli_opt_doubles("edit", "--at", optarg, "X,Z in metres", 2, -TERRA_EDIT_MAX_EXTENT, TERRA_EDIT_MAX_EXTENT, at))
                return EXIT_USAGE;
            have_at = true;
            break;
        case O_SHAPE:
            if (!strcmp(optarg, "cylinder")) e.shape = TERRA_SHAPE_CYLINDER;
            else if (!strcmp(optarg, "box")) e.shape = TERRA_SHAPE_BOX;
            else if (!strcmp(optarg, "pit")) e.shape = TERRA_SHAPE_PIT;
            else return cli_usage_error("edit", "--shape: '%s' is not cylinder, box or pit", optarg);
            break;
        case O_RADIUS:
            if (!cli_opt_double("edit", "--radius", optarg, "metres", 0.001, TERRA_EDIT_MAX_EXTENT, &e.radius)) return EXIT_USAGE;
            break;
        case O_HALFZ:
            if (!cli_opt_double("edit", "--half-z", optarg, "metres", 0.001, TERRA_EDIT_MAX_EXTENT, &e.half_z)) return EXIT_USAGE;
            break;
        case O_YAW:
            if (!cli_opt_double("edit", "--yaw", optarg, "degrees", -360, 360, &yaw)) return EXIT_USAGE;
            break;
        case O_FALLOFF:
            if (!cli_opt_double("edit", "--falloff", optarg, "metres", 0, TERRA_EDIT_MAX_EXTENT, &e.falloff)) return EXIT_USAGE;
            break;
        case O_AMOUNT:
            if (!cli_opt_double("edit", "--amount", optarg, "a number", -TERRA_EDIT_MAX_AMOUNT, TERRA_EDIT_MAX_AMOUNT,
                                &e.amount))
                return EXIT_USAGE;
            break;
        case O_SURFACE:
            if (!cli_opt_int("edit", "--surface", optarg, 1, 255, &surface)) return EXIT_USAGE;
            break;
        case O_LIST: list = true; break;
        case O_SEED:
            if (!cli_opt_seed("edit", "--seed", optarg, &seed)) return EXIT_USAGE;
            relative = true;
            break;
        case 'h': help(stdout); return EXIT_OK;
        default: return cli_usage_error("edit", "unknown option");
        }
    }
    const int left = argc - optind;
    if (left < 1) return cli_usage_error("edit", "expected JOURNAL");
    if (list ? left != 1 : left != 2) return cli_usage_error("edit", list ? "--list takes only JOURNAL" : "expected JOURNAL BRUSH");
    const char *journal = argv[optind];
    static const char *brushes[] = {"raise", "lower", "flatten", "smooth", "dig", "paint"};
    if (!list) {
        int b = 0;
        while (b < 6 && strcmp(argv[optind + 1], brushes[b])) b++;
        if (b == 6) return cli_usage_error("edit", "BRUSH: '%s' is not raise, lower, flatten, smooth, dig or paint", argv[optind + 1]);
        e.brush = (terra_brush)b;
        if (!have_at) return cli_usage_error("edit", "--at X,Z is required");
        if (e.brush == TERRA_BRUSH_PAINT && !surface) return cli_usage_error("edit", "paint needs --surface N");
    }
    terra_source *world = NULL;
    terra_edit_layer *l = NULL;
    int rc = EXIT_OK;
    if (terra_world_create(&(terra_world_desc){.seed = seed}, &world) != TERRA_OK ||
        terra_edit_layer_create(&(terra_edit_layer_desc){.base = world, .journal = journal, .read_only = list}, &l) != TERRA_OK) {
        rc = cli_error("edit", "%s", terra_last_error());
    } else if (list) {
        printf("%s: %zu edits\n", journal, terra_edit_count(l));
    } else {
        e.x = at[0], e.z = at[1], e.yaw = yaw * 3.14159265358979323846 / 180, e.surface = (terra_surface)surface;
        if (relative && (e.brush == TERRA_BRUSH_DIG || e.brush == TERRA_BRUSH_FLATTEN)) {
            float g = 0;
            terra_source_height(world, e.x, e.z, &g);
            e.amount += g;
        }
        double r[4];
        if (terra_edit_apply(l, &e, r) != TERRA_OK) rc = cli_error("edit", "%s: %s", journal, terra_last_error());
        else printf("%s: edit %zu, %s over x %.2f..%.2f, z %.2f..%.2f\n", journal, terra_edit_count(l), brushes[e.brush],
                    r[0], r[2], r[1], r[3]);
    }
    terra_edit_layer_destroy(l);
    terra_source_destroy(world);
    return rc;
}
