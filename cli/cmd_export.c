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
#include <unistd.h>

static void help(FILE *f) {
    fprintf(f, "Usage: terra export [OPTIONS] ARCHIVE DIR\n\n"
               "Writes DIR/layer.json and DIR/{z}/{x}/{y}.terrain for every tile, ready for a static file\n"
               "server and CesiumJS's CesiumTerrainProvider. Tiles are written uncompressed so they load\n"
               "without server configuration. The archive is checked first as terra info --verify checks\n"
               "it: an archive with any problem (each named, the first %d, then a count) is refused with\n"
               "exit 1 and nothing written. layer.json is written last (one already in DIR is removed\n"
               "before the tiles are written): a tree that has one is whole.\n\n"
               "Options:\n"
               "  --gzip     write gzip-compressed tiles (the server must then send\n"
               "             Content-Encoding: gzip for *.terrain)\n"
               "  -h, --help this text\n",
            CLI_REPORT_LINES);
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
    char buf[4096], name[TERRA_ARCHIVE_NAME_SIZE];
    /* every problem before anything is written: what verify refuses is not exported in part */
    if ((status = cli_verify_archive("export", a)) != EXIT_OK) goto done;
    if (terra_archive_tms_map(a, &map) != TERRA_OK || terra_archive_layer_json(a, &map, &layer) != TERRA_OK) {
        status = cli_error("export", "%s", terra_last_error());
        goto done;
    }
    snprintf(buf, sizeof buf, "%s", dir);
    if (mkdir_p(buf) != 0) {
        status = cli_error("export", "%s: cannot create: %s", dir, strerror(errno));
        goto done;
    }
    /* verified: the index is sorted without repeats, every tile has its place in the z/x/y tree;
     * layer.json comes last, so a tree that has one is whole: one left by an earlier export goes
     * first, or a failure below would leave it over a tree it no longer describes */
    snprintf(buf, sizeof buf, "%s/layer.json", dir);
    if (unlink(buf) != 0 && errno != ENOENT) {
        status = cli_error("export", "%s: cannot remove the earlier export's: %s", buf, strerror(errno));
        goto done;
    }
    const uint64_t n = terra_archive_get_info(a)->tile_count;
    uint64_t bytes = 0;
    for (uint64_t i = 0; i < n && status == EXIT_OK; i++) {
        terra_archive_entry e;
        int z;
        int64_t x, y;
        uint8_t *raw = NULL, *out = NULL;
        size_t rn = 0, on = 0;
        terra_status st = terra_archive_entry_at(a, i, &e);
        if (st == TERRA_OK && !terra_tms_from_key(&map, e.key, &z, &x, &y))
            st = terra_fail(TERRA_E_CORRUPT, "%s: %s has no place in the z/x/y tree", path,
                            terra_archive_tile_name(a, e.key, NULL, name, sizeof name));
        if (st == TERRA_OK) st = terra_archive_read_entry(a, &e, &raw, &rn);
        if (st == TERRA_OK && gzip) st = terra_compress(TERRA_COMPRESS_GZIP, 0, raw, rn, &out, &on);
        if (st == TERRA_OK) {
            snprintf(buf, sizeof buf, "%s/%d/%lld", dir, z, (long long)x);
            if (mkdir_p(buf) != 0) st = terra_fail(TERRA_E_IO, "%s: cannot create: %s", buf, strerror(errno));
        }
        if (st == TERRA_OK) {
            snprintf(buf, sizeof buf, "%s/%d/%lld/%lld.terrain", dir, z, (long long)x, (long long)y);
            st = write_file(buf, gzip ? out : raw, gzip ? on : rn);
        }
        if (st == TERRA_OK) bytes += gzip ? on : rn;
        else status = cli_error("export", "%s", terra_last_error());
        terra_free(raw);
        terra_free(out);
    }
    snprintf(buf, sizeof buf, "%s/layer.json", dir);
    if (status == EXIT_OK && write_file(buf, layer, strlen(layer)) != TERRA_OK)
        status = cli_error("export", "%s", terra_last_error());
    if (status == EXIT_OK)
        printf("terra export: %llu tiles, %llu bytes, layer.json in %s\n", (unsigned long long)n, (unsigned long long)bytes,
               dir);
done:
    terra_free(layer);
    terra_archive_close(a);
    return status;
}
