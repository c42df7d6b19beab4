/* terra: the command-line tool. One subcommand per file; this file dispatches. */
#include "cli.h"
#include "terra/archive_io.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cli_command commands[] = {
    {"fly", "fly the built-in path over the default world: rendered frames, a contact sheet, per-frame stats", cmd_fly},
    {"render", "render one frame of the default world to a PNG, headless (OpenGL on EGL)", cmd_render},
    {"view", "fly over the default world in a window (GLFW): WASD + mouse, wheel for speed", cmd_view},
    {"info", "what a tile archive holds: frame, bounds, levels, tiles, bytes, error per level", cmd_info},
    {"export", "write an archive as a z/x/y.terrain tree with a layer.json for CesiumJS", cmd_export},
    {"serve", "serve an archive's layer.json and tiles over HTTP (loopback by default)", cmd_serve},
    {"bake", "bake a source (the default world) into a quantized-mesh tile archive", cmd_bake},
    {"mesh", "mesh a heightmap into a triangle network (greedy insertion), check it, write OBJ/PLY/STL", cmd_mesh},
    {"drive", "physics proof: ODE bodies and fast vehicles on collider blocks streamed around them", cmd_drive},
};
static const int command_count = (int)(sizeof commands / sizeof commands[0]);

static void usage(FILE *f) {
    fprintf(f, "Usage: terra COMMAND [OPTIONS]\n\n"
               "terra: terrain too large to hold whole.\n\nCommands:\n");
    for (int i = 0; i < command_count; i++) fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nRun 'terra COMMAND --help' for a command's options.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return EXIT_OK;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("terra 0.1.0\n");
        return EXIT_OK;
    }
    for (int i = 0; i < command_count; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "terra: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return EXIT_USAGE;
}

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

terra_status cli_open_source(const char *archive, uint64_t seed, terra_source **src, terra_select_desc *sel,
                             double *centre_eye) {
    if (!archive) return terra_world_create(&(terra_world_desc){.seed = seed}, src);
    terra_archive_source_info ai;
    terra_status st = terra_archive_source_create(archive, src, &ai);
    if (st == TERRA_OK) {
        sel->grid = ai.grid;
        sel->levels = ai.levels;
        memcpy(sel->bounds, ai.bounds, sizeof sel->bounds);
        if (centre_eye) {
            centre_eye[0] = 0.5 * (ai.bounds[0] + ai.bounds[2]);
            centre_eye[2] = 0.5 * (ai.bounds[1] + ai.bounds[3]);
        }
    }
    return st;
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
