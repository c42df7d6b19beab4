/* Shared pieces of the terra command: the subcommand table and small helpers. */
#ifndef TERRA_CLI_H
#define TERRA_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "terra/archive_io.h"
#include "terra/archive_mesh.h"
#include "terra/edit.h"
#include "terra/gl.h"
#include "terra/select.h"
#include "terra/source.h"
#include "terra/stream.h"

/* Exit codes of every subcommand. */
enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

typedef struct cli_command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv); /* argv[0] is the subcommand name */
} cli_command;

/* Prints "terra NAME: message" to stderr and returns EXIT_FAIL. */
int cli_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Prints "terra NAME: message\nTry 'terra NAME --help'." and returns EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Parses a number / a list of n comma-separated numbers; false if malformed. */
bool cli_parse_double(const char *s, double *out);
bool cli_parse_int(const char *s, long *out);
bool cli_parse_doubles(const char *s, double *out, int n);
/* Parses a memory size: a number of bytes with an optional K, M, G or T (powers of 1024, an
 * optional B or iB after it), from 1 MiB to 1 PiB; false if malformed or out of that range. */
bool cli_parse_bytes(const char *s, size_t *out);
/* Parses WxH. */
bool cli_parse_size(const char *s, int *w, int *h);

/* ---- range-checked options --------------------------------------------------------------------
 * Every numeric option has a range that keeps the arithmetic behind it exact (no overflow, no loop
 * without end). Each parser takes an option's argument; on a malformed value or one outside the
 * range it prints "terra CMD: --OPT wants WHAT from LO to HI, not 'ARG'" (and the --help hint) and
 * returns false: the caller returns EXIT_USAGE. */
/* Coordinates (metres) an option may name: within the default world's extent and the tile keys'
 * range at the default tile size, whatever the levels. */
#define CLI_MAX_COORD 1e9
/* A number from lo to hi (inclusive). */
bool cli_opt_double(const char *cmd, const char *opt, const char *arg, const char *what, double lo, double hi,
                    double *out);
/* A whole number from lo to hi. */
bool cli_opt_long(const char *cmd, const char *opt, const char *arg, long lo, long hi, long *out);
bool cli_opt_int(const char *cmd, const char *opt, const char *arg, int lo, int hi, int *out);
/* n comma-separated numbers, each from lo to hi; `what` names them ("X,Y,Z in metres"). */
bool cli_opt_doubles(const char *cmd, const char *opt, const char *arg, const char *what, int n, double lo, double hi,
                     double *out);
/* A seed: a whole number from 0 to 2^64 - 1. */
bool cli_opt_seed(const char *cmd, const char *opt, const char *arg, uint64_t *out);
/* Cells along a tile side: a power of two from lo to hi. */
bool cli_opt_cells(const char *cmd, const char *opt, const char *arg, int lo, int hi, int *out);
/* WxH, each side from lo to hi pixels. */
bool cli_opt_size(const char *cmd, const char *opt, const char *arg, int lo, int hi, int *w, int *h);

/* ---- the world and camera of the drawing commands (fly, render, view) ---------------------------
 * Their shared options are one table in common.c: each option's range (checked, named in the
 * message and stated in --help, all from the same numbers), its default and its help line. A
 * command takes the groups it names; its own options it parses itself, through a callback. */
enum {
    CLI_WORLD = 1 << 0,   /* --seed --source --trust-script --edits --cells --tile0 --levels --range0 */
    CLI_ARCHIVE = 1 << 1, /* --archive */
    CLI_LENS = 1 << 2,    /* --size --fov --sse */
    CLI_POSE = 1 << 3,    /* --eye --above --yaw --pitch */
    CLI_STYLE = 1 << 4,   /* --level-tint --no-morph --clear */
    CLI_PLANET = 1 << 5,  /* --planet --lat --lon --alt --heading (with --pitch of CLI_POSE) */
};
/* Scripts (script.h) where terra is built with them; elsewhere opening fails, saying so. `trusted`
 * (--trust-script) lifts the sandbox. */
typedef struct terra_script terra_script;
terra_status cli_script_open(const char *path, uint64_t seed, bool trusted, terra_script **out);
terra_source *cli_script_source(terra_script *s);
void cli_script_close(terra_script *s);
bool cli_script_changed(const terra_script *s);
/* What an archive's manifest says of its ground, as JSON members (no braces): the default world of
 * seed and scale, or the script at `script` (its terra.world's seed). */
void cli_ground_json(char *out, size_t n, const char *script, uint64_t seed, double scale);

typedef struct cli_scene {
    unsigned groups;           /* the groups parsed */
    uint64_t seed;             /* the default world's */
    terra_select_desc sel;     /* grid (tile0_size, cells), levels, range0 (0: the selection's default) */
    const char *archive;       /* NULL: the default world of `seed`, or the script's ground */
    const char *script;        /* --source: a Lua script's ground (its terra.world of `seed`) */
    bool trust_script;         /* --trust-script: the script runs outside the sandbox */
    terra_script *lua, *retired; /* the script open, and the one it replaced while workers still call it */
    const char *journal;       /* --edits: an edit journal replayed over the ground (edit.h) */
    bool want_edits;           /* an edit layer even without --edits (terra view's mouse) */
    terra_edit_layer *edits, *retired_edits; /* over the ground; the one retired with the old script */
    terra_source *world;       /* the default world, when it is the ground (under the edits) */
    double reload_at;          /* terra_now_s() of the next look at the script's files */
    char reload_error[512];    /* the last reload's failure, said once */
    terra_archive_mesh *mesh;  /* the archive's tiles, once cli_scene_open opened it */
    int width, height;         /* pixels */
    double fov;                /* vertical field of view, degrees */
    double sse;                /* the projected error a drawn tile may have, pixels */
    double eye[3];             /* metres, y up */
    double above;              /* metres over the ground at the eye's x, z */
    double yaw, pitch;         /* degrees */
    bool have_eye, have_above; /* given (without --eye, --above is implied) */
    bool level_tint, no_morph, no_occlusion;
    double clear[3];           /* --clear R,G,B (0..255) */
    bool have_clear, have_cells;
    bool planet;               /* --planet: the built-in planet of `seed` instead of the plane */
    bool wgs84;                /* --wgs84 (implied by --planet --archive): the planet on the WGS84 ellipsoid */
    double lat, lon, alt, heading; /* degrees; metres over the ground under the eye; degrees from north toward east */
    bool have_lat, have_lon;
    double ramp[2];            /* --ramp LO,HI: the ground gray by height */
    bool have_ramp;
    const char *material_path; /* --material FILE.glsl, */
    const char *material;      /* its text (read by cli_scene_parse) */
} cli_scene;
/* A command's own option (getopt_long's value, below CLI_SCENE_OPT, and its argument): false once
 * it has said why the value is refused (the cli_opt_* parsers do). */
typedef bool (*cli_own_fn)(void *own, int opt, const char *arg);
enum { CLI_SCENE_OPT = 0x1000, CLI_HELP = -1 };
/* Parses argv (argv[0] the command's name): the shared options of `groups` into *scene, from the
 * shared defaults; -h, --help; and the command's own (`shortopts` without h, `longopts` ending in a
 * zero entry, either may be NULL), each handed to fn(own, ...). Refuses an unknown option, an
 * argument left over and, unless --archive is given, tiles and levels that break the selection's
 * rules (select.h). Returns EXIT_OK; EXIT_USAGE after the message; CLI_HELP after usage(stdout). */
int cli_scene_parse(const char *cmd, int argc, char **argv, unsigned groups, const char *shortopts,
                    const struct option *longopts, cli_own_fn fn, void *own, void (*usage)(FILE *),
                    cli_scene *scene);
/* Prints the help lines of the shared options of `groups`, under a heading of their own. */
void cli_scene_help(FILE *f, unsigned groups);
/* Opens the scene's source. An archive (scene->archive) of TIN tiles is drawn by its own tiles,
 * chosen by their geometric error: scene->mesh is opened and *src is its source; one of grid tiles
 * (terra bake's) is opened as a source of heights whose grids are meshed and morphed again (CDLOD,
 * the lattice rule checked). Either way its levels, tile size and area replace those in
 * scene->sel, and without --eye the eye moves over the middle of the area. Else
 * the default world of the seed, and without --range0 its ranges are derived from --sse, the
 * picture's height and --fov (each level's error measured around the eye: select.h). With
 * CLI_POSE, --above then sets the eye's height. cli_scene_close lets go of what it opened. */
terra_status cli_scene_open(cli_scene *scene, terra_source **src);
void cli_scene_close(cli_scene *scene, terra_source *src);
/* Hot reload of --source: at most four times a second, when the script or a module it requires has
 * changed, opens it again; on success the scene draws the new ground (the old tiles until the new
 * stand) and `log` is told; on failure the ground stays and the error (file:line) is told once.
 * Returns true when the ground was replaced. */
bool cli_scene_reload(cli_scene *scene, terra_gl_scene *gl_scene, FILE *log); /* cmd_fly.c */
/* The style of CLI_STYLE: level tint, no morph, and with --clear a flat colour behind the ground. */
terra_gl_style cli_scene_style(const cli_scene *scene);
/* The camera of CLI_POSE and CLI_LENS (the aspect is the picture's, set when drawing). */
terra_camera cli_scene_camera(const cli_scene *scene);
/* With --planet: the planet of the scene's seed (with --archive its ground laid over the WGS84
 * planet where it lies; cli_planet_close frees both), the camera of --lat --lon --alt --heading --pitch and
 * CLI_LENS over it (its up the local up), the sun of the plane's style turned into the eye's local
 * frame, and the planet scene drawing it at the picture's size (offscreen) or into the window's
 * framebuffer, every frame whole (budget_ms 0) or in real time (terra_gl_planet). */
terra_status cli_planet_open(const cli_scene *scene, terra_planet **planet);
void cli_planet_close(terra_planet *planet);
terra_camera cli_planet_camera(const cli_scene *scene, const terra_planet *planet);
terra_vec3 cli_planet_sun(terra_vec3 eye);
terra_status cli_planet_scene(const cli_scene *scene, const terra_planet *planet, bool offscreen, double budget_ms,
                              terra_gl_planet **out); /* cmd_fly.c */

/* After drawing: if any tile failed to load (the streamer logged each once and drew its ancestor
 * in its place), names the first few and the count on stderr and returns EXIT_FAIL; else EXIT_OK. */
int cli_failed_tiles(const char *cmd, const terra_stream *stream);

/* terra_archive_verify_tiles over `a`, as info --verify and export run it: the first
 * CLI_REPORT_LINES problems on stderr ("terra CMD: ..."), the first notes on stdout ("note ..."),
 * then how many went unnamed and the totals. EXIT_OK when there is no problem, else EXIT_FAIL. */
#define CLI_REPORT_LINES 20
int cli_verify_archive(const char *cmd, const terra_archive *a);

/* Subcommands: one file each (cli/cmd_NAME.c). */
int cmd_fly(int argc, char **argv);
int cmd_drive(int argc, char **argv);
int cmd_render(int argc, char **argv);
int cmd_view(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_bake(int argc, char **argv);
int cmd_mesh(int argc, char **argv);
int cmd_cook(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_edit(int argc, char **argv);

/* Runs `program` (built next to the running one) with the arguments terra was given, in place of
 * the command `cmd`, for a part of a command that program links (main.c). Returns only on failure. */
int cli_run_sibling(const char *cmd, const char *program);

/* terra bake --tin: the default world sampled at `spacing` over `area` and cooked into TIN tiles as
 * terra cook cooks a raster (cli/cmd_cook.c, in terra-cook: meshoptimizer; a weak, null symbol in
 * the other programs, which run terra-cook in their place). */
typedef struct cli_bake_tin {
    const char *out;
    const char *script; /* --source, or NULL: the default world */
    bool trust_script;  /* --trust-script */
    const char *journal; /* --edits over it, or NULL */
    uint64_t seed;
    double scale;
    double area[4];   /* x0, z0, x1, z1 metres: the archive's local frame starts at (x0, z0) */
    double spacing;   /* metres between samples */
    double max_error; /* the finest level's bound, metres */
    int levels;       /* 0: up to one tile over all */
    int threads;
    int compression;  /* terra_compression */
    bool quiet;
} cli_bake_tin;
int cli_bake_tin_run(const cli_bake_tin *d);

#ifdef TERRA_HAVE_MPI
#include "terra/cook_io.h"
/* terra cook on MPI ranks (cli/cook_mpi.c, terra-cook-mpi): the ranks in the job (MPI initialised
 * here on the first call), those on this machine, the cook itself (every rank calls it with the
 * same desc; rank 0 prints the report) and MPI's end. */
int cli_cook_mpi_ranks(void);
int cli_cook_mpi_local_ranks(void);
int cli_cook_mpi(terra_cook_desc *d, const char *options, const char *cache, bool no_cache, const char *stage, bool quiet,
                 void (*report)(const char *out, const terra_cook_report *r, double read_s), double read_s);
void cli_cook_mpi_end(void);
#endif

#endif
