/* libterra-io internal: a reader program run as a child process for one file (terra-raster for a
 * raster through GDAL, terra-scenery for a scenery through assimp), so the outside library's memory,
 * crashes and mappings stay out of the caller. The child writes its answer to stdout; on failure it
 * writes its message to stderr and exits with 64 + the terra_status. Both are sockets to the caller,
 * close-on-exec on this side from the start: a child another thread spawns meanwhile must not hold
 * their write ends, or the caller's reads would wait for that one to exit too. */
#ifndef TERRA_IO_CHILD_H
#define TERRA_IO_CHILD_H

#include "terra/core.h"

#include <sys/types.h>

typedef struct terra_child {
    pid_t pid;
    int out;    /* the child's stdout: read the answer here */
    int err;    /* the child's stderr */
} terra_child;

/* The program to run into path: `given` when not NULL, else $env when set, else `name` beside the
 * running program. TERRA_E_UNSUPPORTED naming `file` when it cannot be found or is not executable;
 * `what` names the program in messages ("the raster reader"). */
TERRA_INTERNAL terra_status terra_child_locate(const char *file, const char *what, const char *given, const char *env,
                                               const char *name, char *path, size_t cap);

/* Starts program with argv (argv[0] included, NULL-terminated). TERRA_E_IO naming `file`. */
TERRA_INTERNAL terra_status terra_child_start(const char *file, const char *what, const char *program,
                                              char *const argv[], terra_child *c);

/* Reads exactly n bytes from fd: false at an early end or an error. */
TERRA_INTERNAL bool terra_child_read(int fd, void *buf, size_t n);

/* Ends the child: closes its stdout (one still writing gets EPIPE and stops), reads its message,
 * waits for it. TERRA_OK when it exited 0 (the caller judges the answer it read). Else its own
 * status and message when it exited 64 + a terra_status with one; "the WHAT crashed on FILE
 * (signal N, NAME)" when a signal ended it; "FILE: the WHAT failed" with any message otherwise. */
TERRA_INTERNAL terra_status terra_child_finish(terra_child *c, const char *file, const char *what);

#endif
