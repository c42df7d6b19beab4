/* Shared pieces of the terra command: the subcommand table and small helpers. */
#ifndef TERRA_CLI_H
#define TERRA_CLI_H

#include <stdbool.h>
#include <stdint.h>

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
/* Checks a drawing command's tiles and levels against the selection's rules (select.h); on a
 * broken rule prints it as bad usage and returns false. */
bool cli_check_select(const char *cmd, const terra_select_desc *sel);

/* The source a drawing command shows: the archive when one is named (its tile size, cells, levels
 * and area then replace those in *sel, and a non-NULL `centre_eye` is moved over the middle of the
 * area), else the default world of `seed`. */
terra_status cli_open_source(const char *archive, uint64_t seed, terra_source **src, terra_select_desc *sel,
                             double *centre_eye);

/* After drawing: if any tile failed to load (the streamer logged each once and drew its ancestor
 * in its place), names the first few and the count on stderr and returns EXIT_FAIL; else EXIT_OK. */
int cli_failed_tiles(const char *cmd, const terra_stream *stream);

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

#endif
