/* terra: the command-line tool. One subcommand per file; this file dispatches.
 *
 * The subcommands live in four programs, split by the libraries they need, so a command maps only
 * what it uses: `terra` itself (info, export, bake, mesh: libterra-io alone), `terra-gl` (fly,
 * render, view: OpenGL, EGL, GLFW), `terra-serve` (serve: libmicrohttpd) and `terra-drive` (drive:
 * ODE). Each is linked from this file and its commands' files; a command not linked into the
 * running program is a weak, null symbol here, and the program built next to this one that has
 * it is run in its place (same arguments). Loading the drawing, HTTP and physics libraries cost
 * every `terra mesh` ~5 ms of its ~27 ms on a small raster; libcurl ~7 ms more, so `terra info`
 * and `terra export` of a URL run in terra-http, which links it (terra-gl and terra-serve do too). */
#include "cli.h"
#include "terra/archive.h"
#include "terra/io.h"
#ifdef TERRA_HAVE_HTTP
#include "terra/http.h"
#endif

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#pragma weak cmd_fly
#pragma weak cmd_render
#pragma weak cmd_view
#pragma weak cmd_info
#pragma weak cmd_export
#pragma weak cmd_serve
#pragma weak cmd_bake
#pragma weak cmd_mesh
#pragma weak cmd_drive
#pragma weak cmd_cook
#pragma weak cmd_check
#pragma weak cmd_edit

static char **main_argv; /* what terra was given, for cli_run_sibling */

typedef struct command {
    cli_command c;
    const char *program; /* the program that links it */
} command;

static const command commands[] = {
    {{"fly", "fly the built-in path over the default world: rendered frames, a contact sheet, per-frame stats", cmd_fly}, "terra-gl"},
    {{"render", "render one frame of the default world to a PNG, headless (OpenGL on EGL)", cmd_render}, "terra-gl"},
    {{"view", "fly over the default world in a window (GLFW): WASD + mouse, wheel for speed", cmd_view}, "terra-gl"},
    {{"info", "what a tile archive holds: frame, bounds, levels, tiles, bytes, error per level", cmd_info}, "terra"},
    {{"export", "write an archive as a z/x/y.terrain tree with a layer.json for CesiumJS", cmd_export}, "terra"},
    {{"serve", "serve an archive's layer.json and tiles over HTTP (loopback by default)", cmd_serve}, "terra-serve"},
    {{"bake", "bake a source (the default world) into a quantized-mesh tile archive", cmd_bake}, "terra"},
    {{"cook", "cook elevation rasters and scenery meshes into an archive of TIN tiles (levels by screen-space error)", cmd_cook}, "terra-cook"},
    {{"check", "check a cooked archive's promises: tiles read back, borders shared at every level pair, errors, holes", cmd_check}, "terra-cook"},
    {{"edit", "append a brush (raise, lower, flatten, smooth, dig, paint) to an edit journal; --list", cmd_edit}, "terra"},
    {{"mesh", "mesh a heightmap into a triangle network (greedy insertion), write OBJ/PLY/STL; --verify checks it", cmd_mesh}, "terra"},
    {{"drive", "physics proof: ODE bodies and fast vehicles on collider blocks streamed around them", cmd_drive}, "terra-drive"},
};
static const int command_count = (int)(sizeof commands / sizeof commands[0]);

static void usage(FILE *f) {
    fprintf(f, "Usage: terra COMMAND [OPTIONS]\n\n"
               "terra: terrain too large to hold whole.\n\nCommands:\n");
    for (int i = 0; i < command_count; i++) fprintf(f, "  %-8s %s\n", commands[i].c.name, commands[i].c.summary);
    fprintf(f, "\nRun 'terra COMMAND --help' for a command's options.\n");
}

int cli_run_sibling(const char *cmd, const char *program) {
    char path[PATH_MAX + 32];
    char self[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (!terra_io_sibling_path(program, path, sizeof path) || n <= 0)
        return cli_error(cmd, "cannot locate %s, the program that runs it", program);
    self[n] = 0;
    if (!strcmp(self, path)) /* a build that left the command out of its own program */
        return cli_error(cmd, "%s was built without this command", path);
    execv(path, main_argv);
    return cli_error(cmd, "cannot run %s (it is built next to terra): %s", path, strerror(errno));
}

#ifndef TERRA_HAVE_MPI
/* The ranks of the MPI job this process was started in by mpirun (OpenMPI, or a PMI launcher), or 1. */
static int mpi_world_size(void) {
    const char *v = getenv("OMPI_COMM_WORLD_SIZE");
    if (!v) v = getenv("PMI_SIZE");
    return v ? atoi(v) : 1;
}
#endif

int main(int argc, char **argv) {
    main_argv = argv;
#ifdef TERRA_HAVE_HTTP
    terra_http_register(); /* every --archive and ARCHIVE may be an http:// or https:// URL */
#endif
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
    for (int i = 0; i < command_count; i++) {
        const command *cmd = &commands[i];
        if (strcmp(argv[1], cmd->c.name) != 0) continue;
#ifdef TERRA_HTTP_SIBLING
        /* this program reads no URLs (libcurl would slow every start): terra-http runs info and
         * export of an archive over HTTP */
        if (!strcmp(cmd->program, "terra"))
            for (int a = 2; a < argc; a++)
                if (terra_archive_path_is_url(argv[a])) return cli_run_sibling(cmd->c.name, "terra-http");
#endif
#ifndef TERRA_HAVE_MPI
        /* under mpirun with several ranks, the cook is shared among them in terra-cook-mpi */
        if (!strcmp(cmd->c.name, "cook") && mpi_world_size() > 1) {
            char path[PATH_MAX + 32];
            if (!terra_io_sibling_path("terra-cook-mpi", path, sizeof path) || access(path, X_OK) != 0)
                return cli_error("cook", "started on %d MPI ranks, but terra-cook-mpi is not built next to terra "
                                 "(cmake -DTERRA_BUILD_MPI=ON): each rank would cook the whole ground", mpi_world_size());
            return cli_run_sibling("cook", "terra-cook-mpi");
        }
#endif
        if (cmd->c.run) return cmd->c.run(argc - 1, argv + 1);
        return cli_run_sibling(cmd->c.name, cmd->program);
    }
    fprintf(stderr, "terra: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return EXIT_USAGE;
}
