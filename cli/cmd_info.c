/* terra info ARCHIVE: what an archive holds (frame, bounds, levels, tiles, bytes, error per level). */
#include "cli.h"
#include "../io/json.h"
#include "terra/archive_io.h"
#include "terra/io.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static void help(FILE *f) {
    fprintf(f, "Usage: terra info [OPTIONS] ARCHIVE\n\n"
               "Prints an archive's frame, bounds, levels, tiles and bytes per level, geometric error per\n"
               "level and sizes.\n\n"
               "Options:\n"
               "  --verify   check the archive with the rules every terra reader applies, and every tile:\n"
               "             the metadata (JSON; frame, mesh, extensions, tile size, bounds), the index\n"
               "             (entries, order, faces, keys inside the frame's grid and the bounds), the\n"
               "             pyramid (every level from 0, every tile's parent, grids covering the bounds),\n"
               "             and each tile read, decompressed and decoded (checksums, sizes, counts,\n"
               "             indices, edges, finite header values, listed extensions, and for terra bake's\n"
               "             grids the lattice). Names each problem (the first %d, then a count), notes\n"
               "             what readers tolerate (docs/FORMAT.md), and exits 1 if there is any problem.\n"
               "             terra's readers open archives through the same checks: export refuses what\n"
               "             it refuses, serve what is wrong with all but a fine tile's contents, render,\n"
               "             fly and view draw no tile it names\n"
               "  --json     print the archive's metadata block (JSON) and nothing else\n"
               "  --tile Z/X/Y  decode one tile (Cesium z/x/y, as terra export names it) and print its\n"
               "             header, counts, extensions and FNV-1a hashes of the decoded arrays as JSON\n"
               "  -h, --help this text\n",
            CLI_REPORT_LINES);
}

static uint32_t fnv(uint32_t h, uint32_t x) {
    h ^= x & 0xffff;
    h *= 0x01000193u;
    h ^= x >> 16;
    return h * 0x01000193u;
}

/* The decoded values of one tile as JSON (hashes as in ../shared/data/qm/README). */
static int print_tile(terra_archive *a, const char *zxy) {
    int z;
    long long x, y;
    char tail;
    if (sscanf(zxy, "%d/%lld/%lld%c", &z, &x, &y, &tail) != 3) return cli_usage_error("info", "--tile: expected Z/X/Y");
    terra_tms_map map;
    terra_tile_key key;
    if (terra_archive_tms_map(a, &map) != TERRA_OK) return cli_error("info", "%s", terra_last_error());
    if (!terra_tms_to_key(&map, z, x, y, &key)) return cli_error("info", "no tile %s", zxy);
    /* the same rules as every reader (and --verify): a tile they refuse is not printed */
    terra_archive_entry e;
    terra_archive_layout layout;
    terra_qmesh m;
    if (terra_archive_validate(a, NULL, NULL, &layout) != TERRA_OK || terra_archive_find(a, key, &e) != TERRA_OK ||
        terra_archive_check_tile_bytes(a, &e, &layout.rules, &map, &m, false, NULL, NULL) != TERRA_OK)
        return cli_error("info", "%s", terra_last_error());
    const size_t n = e.raw_size;
    uint32_t hu = 0x811c9dc5u, hv = hu, hh = hu, hi = hu, hn = hu, hm = hu;
    for (uint32_t i = 0; i < m.vertex_count; i++) hu = fnv(hu, m.u[i]), hv = fnv(hv, m.v[i]), hh = fnv(hh, m.h[i]);
    for (size_t i = 0; i < (size_t)m.triangle_count * 3; i++) hi = fnv(hi, m.indices[i]);
    for (size_t i = 0; m.normals && i < (size_t)m.vertex_count * 2; i++) hn = fnv(hn, m.normals[i]);
    for (size_t i = 0; m.materials && i < m.vertex_count; i++) hm = fnv(hm, m.materials[i]);
    const terra_qmesh_header *H = &m.header;
    printf("{\"z\":%d,\"x\":%lld,\"y\":%lld,\"bytes\":%zu,\"header\":{\"centerX\":%.17g,\"centerY\":%.17g,\"centerZ\":%.17g,"
           "\"minHeight\":%.9g,\"maxHeight\":%.9g,\"boundingSphereRadius\":%.17g,"
           "\"horizonOcclusionPointX\":%.17g,\"horizonOcclusionPointY\":%.17g,\"horizonOcclusionPointZ\":%.17g},",
           z, x, y, n, H->center[0], H->center[1], H->center[2], H->min_height, H->max_height, H->sphere_radius,
           H->horizon[0], H->horizon[1], H->horizon[2]);
    printf("\"vertexCount\":%u,\"triangleCount\":%u,\"edges\":{\"west\":%u,\"south\":%u,\"east\":%u,\"north\":%u},",
           m.vertex_count, m.triangle_count, m.edge_count[0], m.edge_count[1], m.edge_count[2], m.edge_count[3]);
    printf("\"u_fnv1a\":%u,\"v_fnv1a\":%u,\"h_fnv1a\":%u,\"indices_fnv1a\":%u", hu, hv, hh, hi);
    if (m.normals) printf(",\"normals_fnv1a\":%u", hn);
    if (m.materials) printf(",\"materials_fnv1a\":%u", hm);
    printf(",\"extensions\":[");
    const char *sep = "";
    if (m.normals) printf("%s\"vertexNormals\"", sep), sep = ",";
    if (m.water_mask) printf("%s\"waterMask\"", sep), sep = ",";
    if (m.metadata) printf("%s\"metadata\"", sep), sep = ",";
    if (m.materials) printf("%s\"terraMaterial\"", sep);
    printf("]}\n");
    terra_qmesh_free(&m);
    return EXIT_OK;
}

/* One leftover temporary beside the archive (a writer killed mid-write). */
static void print_stale(void *ctx, const char *temp_path, long pid, uint64_t bytes) {
    (void)ctx;
    printf("leftover    %s (%llu B, process %ld is gone)\n", temp_path, (unsigned long long)bytes, pid);
}

int cmd_info(int argc, char **argv) {
    static const struct option opts[] = {
        {"verify", no_argument, 0, 'v'}, {"json", no_argument, 0, 'j'}, {"tile", required_argument, 0, 't'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    bool verify = false, json = false;
    const char *tile = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'v') verify = true;
        else if (c == 'j') json = true;
        else if (c == 't') tile = optarg;
        else if (c == 'h') {
            help(stdout);
            return EXIT_OK;
        } else return cli_usage_error("info", "unknown option");
    }
    if (optind != argc - 1) return cli_usage_error("info", "expected one ARCHIVE");
    const char *path = argv[optind];
    terra_archive *a;
    if (terra_archive_open(path, NULL, &a) != TERRA_OK) return cli_error("info", "%s", terra_last_error());
    const terra_archive_info *I = terra_archive_get_info(a);
    if (tile) {
        int r = print_tile(a, tile);
        terra_archive_close(a);
        return r;
    }
    if (json) {
        printf("%s\n", I->metadata);
        terra_archive_close(a);
        return EXIT_OK;
    }
    cJSON *meta = terra_json_parse(I->metadata);
    printf("archive     %s\n", path);
    printf("format      terra archive version %u, %llu bytes\n", I->version, (unsigned long long)I->file_size);
    printf("frame       %s", terra_frame_name(I->frame));
    const cJSON *ts = cJSON_GetObjectItem(meta, "tile_size_m");
    if (I->frame == TERRA_FRAME_LOCAL && cJSON_IsNumber(ts)) printf(" (level-0 tile %.6g m, level 0 finest)", ts->valuedouble);
    if (I->frame == TERRA_FRAME_GEOGRAPHIC) printf(" (EPSG:4326, TMS, level 0 = the two roots)");
    printf("\n");
    const cJSON *b = cJSON_GetObjectItem(meta, "bounds");
    if (cJSON_GetArraySize(b) == 4)
        printf("bounds      %.9g, %.9g .. %.9g, %.9g %s\n", cJSON_GetArrayItem(b, 0)->valuedouble,
               cJSON_GetArrayItem(b, 1)->valuedouble, cJSON_GetArrayItem(b, 2)->valuedouble,
               cJSON_GetArrayItem(b, 3)->valuedouble, I->frame == TERRA_FRAME_GEOGRAPHIC ? "(degrees W,S..E,N)" : "(m x0,z0..x1,z1)");
    const cJSON *cmp = cJSON_GetObjectItem(meta, "compression");
    printf("compression %s\n", cJSON_IsString(cmp) ? cmp->valuestring : "?");
    printf("extensions ");
    const cJSON *x;
    cJSON_ArrayForEach(x, cJSON_GetObjectItem(meta, "extensions")) if (cJSON_IsString(x)) printf(" %s", x->valuestring);
    printf("\n");

    /* per level, from the index itself (the metadata may be from an older writer) */
    uint64_t tiles[32] = {0}, bytes[32] = {0}, raw[32] = {0};
    double emax[32] = {0}, edge[32] = {0};
    int status = EXIT_OK;
    uint64_t damaged_entries = 0;
    for (uint64_t i = 0; i < I->tile_count; i++) {
        terra_archive_entry e;
        if (terra_archive_entry_at(a, i, &e) != TERRA_OK) {
            /* --verify names each bad tile once, these among them */
            if (!verify && damaged_entries < CLI_REPORT_LINES) fprintf(stderr, "terra info: %s\n", terra_last_error());
            damaged_entries++;
            status = EXIT_FAIL;
            continue;
        }
        int l = terra_tile_key_level(e.key);
        tiles[l]++;
        bytes[l] += e.size;
        raw[l] += e.raw_size;
        if (e.geometric_error > emax[l]) emax[l] = e.geometric_error;
        if (e.longest_edge > edge[l]) edge[l] = e.longest_edge;
    }
    if (!verify && damaged_entries > CLI_REPORT_LINES)
        fprintf(stderr, "terra info: %s: ... %llu damaged index entries in all (the first %d named)\n", path,
                (unsigned long long)damaged_entries, CLI_REPORT_LINES);
    printf("tiles       %llu\n\n", (unsigned long long)I->tile_count);
    printf("level      tiles         bytes   bytes/tile     raw bytes   max error m  longest edge m\n");
    uint64_t tb = 0, tr = 0;
    for (int l = 0; l < 32; l++) {
        if (!tiles[l]) continue;
        printf("%5d %10llu %13llu %12.1f %13llu %13.4g %15.4g\n", l, (unsigned long long)tiles[l],
               (unsigned long long)bytes[l], (double)bytes[l] / (double)tiles[l], (unsigned long long)raw[l], emax[l],
               edge[l]);
        tb += bytes[l];
        tr += raw[l];
    }
    printf("\nsizes       header %d B, metadata %u B, index %llu B (%d B/tile), payloads %llu B (%.1f%% of %llu raw)\n",
           TERRA_ARCHIVE_HEADER_SIZE, I->metadata_size, (unsigned long long)(I->tile_count * TERRA_ARCHIVE_ENTRY_SIZE),
           TERRA_ARCHIVE_ENTRY_SIZE, (unsigned long long)tb, tr ? 100.0 * (double)tb / (double)tr : 0.0,
           (unsigned long long)tr);
    const cJSON *src = cJSON_GetObjectItem(meta, "source");
    if (src) {
        char *s = cJSON_PrintUnformatted(src);
        printf("source      %s\n", s ? s : "?");
        cJSON_free(s);
    }
    cJSON_Delete(meta);
    size_t stale = 0;
    uint64_t stale_bytes = 0;
    if (terra_io_stale_temps(path, print_stale, NULL, &stale, &stale_bytes) == TERRA_OK && stale)
        printf("leftovers   %zu temporary file%s (%llu B) of writers that died; the next write of %s removes them\n",
               stale, stale == 1 ? "" : "s", (unsigned long long)stale_bytes, path);
    if (verify && cli_verify_archive("info", a) != EXIT_OK) status = EXIT_FAIL;
    else if (verify) printf("verify      all %llu tiles intact\n", (unsigned long long)I->tile_count);
    terra_archive_close(a);
    return status;
}
