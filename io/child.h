/* libterra-io internal: a reader program run as a child process for one file (terra-raster for a
 * raster through GDAL, terra-scenery for a scenery through assimp), so the outside library's memory,
 * crashes and mappings stay out of the caller. The child writes its answer to stdout; on failure it
 * writes its message to stderr and exits with 64 + the terra_status. Both are sockets to the caller,
 * close-on-exec on this side from the start: a child another thread spawns meanwhile must not hold
 * their write ends, or the caller's reads would wait for that one to exit too. A child in a
 * conversation (terra-raster --serve) reads its requests from the same socket as it answers on.
 * Each read, or each request of a conversation, may take TERRA_CHILD_CPU_S seconds of the child's CPU
 * time ($TERRA_READER_CPU_S sets another whole number): the child limits itself
 * (terra_child_limit_cpu) and the kernel ends it with SIGXCPU past that, so a reader caught in a loop
 * never holds the caller forever. */
#ifndef TERRA_IO_CHILD_H
#define TERRA_IO_CHILD_H

#include "terra/core.h"

#include <sys/types.h>

#define TERRA_CHILD_CPU_S 600 /* CPU seconds a reader child may spend on one read or request */

typedef struct terra_child {
    pid_t pid;
    int out;    /* the child's stdout: read the answer here (in a conversation, its stdin too) */
    int err;    /* the child's stderr; -1 in a conversation (it stays the caller's) */
} terra_child;

/* The program to run into path: `given` when not NULL, else $env when set, else `name` beside the
 * running program. TERRA_E_UNSUPPORTED naming `file` when it cannot be found or is not executable;
 * `what` names the program in messages ("the raster reader"). */
TERRA_INTERNAL terra_status terra_child_locate(const char *file, const char *what, const char *given, const char *env,
                                               const char *name, char *path, size_t cap);

/* Starts program with argv (argv[0] included, NULL-terminated); `conversation`: requests go to its
 * stdin over c->out, and its stderr is left the caller's (a long conversation's messages would fill a
 * socket no one reads until the end). TERRA_E_IO naming `file`. */
TERRA_INTERNAL terra_status terra_child_start(const char *file, const char *what, const char *program,
                                              char *const argv[], bool conversation, terra_child *c);

/* Reads exactly n bytes from fd: false at an early end or an error. */
TERRA_INTERNAL bool terra_child_read(int fd, void *buf, size_t n);

/* Ends the child: closes its stdout (one still writing gets EPIPE and stops; one in a conversation
 * reads its end of input), reads its message, waits for it. TERRA_OK when it exited 0 (the caller
 * judges the answer it read). Else its own status and message when it exited 64 + a terra_status
 * with one; "the WHAT ran out of CPU time on FILE (signal N, ...)" for SIGXCPU; "the WHAT crashed
 * on FILE (signal N, NAME)" when another signal ended it; "FILE: the WHAT failed" with any message
 * otherwise. */
TERRA_INTERNAL terra_status terra_child_finish(terra_child *c, const char *file, const char *what);

/* The CPU seconds one read or request may take: $TERRA_READER_CPU_S when a whole number from 1,
 * else TERRA_CHILD_CPU_S. */
TERRA_INTERNAL long terra_child_cpu_limit_s(void);

/* In a reader child, before each read or request: allows it terra_child_cpu_limit_s() more seconds
 * of CPU time from now (RLIMIT_CPU's soft limit, within the hard one). */
TERRA_INTERNAL void terra_child_limit_cpu(void);

#endif
