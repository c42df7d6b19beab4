/* terra export ARCHIVE DIR: a z/x/y.terrain tree and a layer.json that CesiumJS reads. */
#include "cli.h"
#include "terra/archive_io.h"
#include "terra/io.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void help(FILE *f) {
    fprintf(f, "Usage: terra export [OPTIONS] ARCHIVE DIR\n\n"
               "Writes DIR/layer.json and DIR/{z}/{x}/{y}.terrain for every tile, ready for a static file\n"
               "server and CesiumJS's CesiumTerrainProvider. Tiles are written uncompressed so they load\n"
               "without server configuration. Tiles it cannot export (damaged, repeated in the index, or\n"
               "outside the z/x/y tree) are named and make it exit 1.\n\n"
               "Options:\n"
               "  --gzip     write gzip-compressed tiles (the server must then send\n"
               "             Content-Encoding: gzip for *.terrain)\n"
               "  -h, --help this text\n");
}

typedef struct order_at {
    uint64_t order, i;
} order_at;

static int cmp_order(const void *a, const void *b) {
    const order_at *p = a, *q = b;
    if (p->order != q->order) return (p->order > q->order) - (p->order < q->order);
    return (p->i > q->i) - (p->i < q->i);
}

static int mkdir_p(char *path) {
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        int r = mkdir(path, 0755);
        *p = '/';
        if (r != 0 && errno != EEXIST) return -1;
    }
    if (mkdir(path, 0755) != 0 && errno != EEXIST) return -1;
    return 0;
}

static terra_status write_file(const char *path, const void *data, size_t n) {
    char *tmp;
    void *fv;
    terra_status st = terra_io_open_temp(path, &tmp, &fv);
    if (st) return st;
    FILE *f = fv;
    bool ok = fwrite(data, 1, n, f) == n;
    ok = (fclose(f) == 0) && ok;
    if (!ok) {
        terra_io_abort(tmp);
        return terra_fail(TERRA_E_IO, "%s: write failed", path);
    }
    return terra_io_commit(tmp, path);
}

int cmd_export(int argc, char **argv) {
    static const struct option opts[] = {{"gzip", no_argument, 0, 'g'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    bool gzip = false;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'g') gzip = true;
        else if (c == 'h') {
            help(stdout);
            return EXIT_OK;
        } else return cli_usage_error("export", "unknown option");
    }
    if (optind != argc - 2) return cli_usage_error("export", "expected ARCHIVE and DIR");
    const char *path = argv[optind], *dir = argv[optind + 1];
    terra_archive *a;
    if (terra_archive_open(path, NULL, &a) != TERRA_OK) return cli_error("export", "%s", terra_last_error());
    terra_tms_map map;
    char *layer = NULL;
    int status = EXIT_OK;
    char buf[4096];
    if (terra_archive_tms_map(a, &map) != TERRA_OK || terra_archive_layer_json(a, &map, &layer) != TERRA_OK) {
        status = cli_error("export", "%s", terra_last_error());
        goto done;
    }
    snprintf(buf, sizeof buf, "%s", dir);
    if (mkdir_p(buf) != 0) {
        status = cli_error("export", "%s: cannot create: %s", dir, strerror(errno));
        goto done;
    }
    snprintf(buf, sizeof buf, "%s/layer.json", dir);
    if (write_file(buf, layer, strlen(layer)) != TERRA_OK) {
        status = cli_error("export", "%s", terra_last_error());
        goto done;
    }
    const terra_archive_info *I = terra_archive_get_info(a);
    /* Duplicated index entries: the sorted orders of all entries, the first of each run exported,
     * the others named (the index of a sound archive is strictly increasing, so this costs one
     * sort of a copy; an index out of order is handled the same way). */
    uint64_t n = I->tile_count;
    order_at *orders = terra_alloc((n ? n : 1) * sizeof *orders);
    uint8_t *repeat = terra_calloc(n ? n : 1, 1); /* 1: entry i repeats an earlier tile */
    uint64_t *first_of = terra_alloc((n ? n : 1) * sizeof *first_of);
    if (!orders || !repeat || !first_of) {
        terra_free(orders);
        terra_free(repeat);
        terra_free(first_of);
        status = cli_error("export", "out of memory for an index of %llu entries", (unsigned long long)n);
        goto done;
    }
    uint64_t readable = 0;
    for (uint64_t i = 0; i < n; i++) {
        terra_archive_entry e;
        if (terra_archive_entry_at(a, i, &e) == TERRA_OK)
            orders[readable++] = (order_at){terra_archive_order(e.key), i};
    }
    if (readable) qsort(orders, (size_t)readable, sizeof *orders, cmp_order);
    for (uint64_t k = 1; k < readable; k++)
        if (orders[k].order == orders[k - 1].order) {
            repeat[orders[k].i] = 1;
            first_of[orders[k].i] = repeat[orders[k - 1].i] ? first_of[orders[k - 1].i] : orders[k - 1].i;
        }
    terra_free(orders);
    uint64_t written = 0, bytes = 0, damaged = 0, outside = 0, repeated = 0;
    for (uint64_t i = 0; i < n; i++) {
        terra_archive_entry e;
        int z;
        int64_t x, y;
        if (terra_archive_entry_at(a, i, &e) != TERRA_OK) {
            fprintf(stderr, "terra export: %s\n", terra_last_error());
            damaged++;
            continue;
        }
        if (repeat[i]) {
            if (repeated++ < 10)
                fprintf(stderr, "terra export: %s: index entry %llu repeats tile %d/%d/%d of entry %llu: left out\n",
                        path, (unsigned long long)i, terra_tile_key_level(e.key), terra_tile_key_x(e.key),
                        terra_tile_key_y(e.key), (unsigned long long)first_of[i]);
            continue;
        }
        if (!terra_tms_from_key(&map, e.key, &z, &x, &y)) {
            if (outside++ < 10)
                fprintf(stderr,
                        "terra export: %s: tile %d/%d/%d (face %d, index entry %llu) has no place in the z/x/y tree "
                        "(outside the coarsest level's tiles): left out\n",
                        path, terra_tile_key_level(e.key), terra_tile_key_x(e.key), terra_tile_key_y(e.key),
                        terra_tile_key_face(e.key), (unsigned long long)i);
            continue;
        }
        uint8_t *raw = NULL, *out = NULL;
        size_t rn = 0, on = 0;
        terra_status st = terra_archive_read_entry(a, &e, &raw, &rn);
        if (st == TERRA_OK && gzip) st = terra_compress(TERRA_COMPRESS_GZIP, 0, raw, rn, &out, &on);
        if (st == TERRA_OK) {
            snprintf(buf, sizeof buf, "%s/%d/%lld", dir, z, (long long)x);
            if (mkdir_p(buf) != 0) st = terra_fail(TERRA_E_IO, "%s: cannot create: %s", buf, strerror(errno));
        }
        if (st == TERRA_OK) {
            snprintf(buf, sizeof buf, "%s/%d/%lld/%lld.terrain", dir, z, (long long)x, (long long)y);
            st = write_file(buf, gzip ? out : raw, gzip ? on : rn);
        }
        if (st == TERRA_OK) {
            written++;
            bytes += gzip ? on : rn;
        } else if (st == TERRA_E_CORRUPT || st == TERRA_E_CAPACITY) {
            fprintf(stderr, "terra export: %s\n", terra_last_error());
            damaged++;
        } else {
            status = cli_error("export", "%s", terra_last_error());
            terra_free(raw);
            terra_free(out);
            terra_free(repeat);
            terra_free(first_of);
            goto done;
        }
        terra_free(raw);
        terra_free(out);
    }
    terra_free(repeat);
    terra_free(first_of);
    printf("terra export: %llu tiles, %llu bytes, layer.json in %s\n", (unsigned long long)written,
           (unsigned long long)bytes, dir);
    if (repeated > 10)
        fprintf(stderr, "terra export: ... and %llu more repeated entries\n", (unsigned long long)repeated - 10);
    if (outside > 10)
        fprintf(stderr, "terra export: ... and %llu more tiles outside the tree\n", (unsigned long long)outside - 10);
    if (damaged || repeated || outside)
        status = cli_error("export",
                           "%s: %llu of %llu tiles left out (%llu damaged, %llu repeated index entries, %llu outside "
                           "the z/x/y tree)",
                           path, (unsigned long long)(damaged + repeated + outside), (unsigned long long)n,
                           (unsigned long long)damaged, (unsigned long long)repeated, (unsigned long long)outside);
done:
    terra_free(layer);
    terra_archive_close(a);
    return status;
}
