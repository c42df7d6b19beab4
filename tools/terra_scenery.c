/* terra-scenery: reads one scenery through assimp (terra_scenery_read) and writes its ground to
 * standard output for terra_scenery_read_isolated, so assimp's memory, a crash or an abort in it
 * stay out of the cook. Not meant to be run by hand:
 *   terra-scenery PATH MAX_TRIANGLES MAX_BYTES
 * Its address space is limited first to what it maps at the start plus the memory budget (MAX_BYTES,
 * 0: half of physical memory), except in sanitizer builds, whose shadow memory needs more, and its
 * CPU time to what one read may take (io/child.h). stdout: the ground (see
 * io/cook/scenery_wire.h). On failure: nothing on stdout, the message on stderr, exit status 64 +
 * the terra_status. */
#include "child.h"
#include "cook/scenery_wire.h"
#include "terra/raster.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define UNDER_SANITIZER 1
#endif
#endif

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "terra-scenery: reads a scenery for terra (usage: terra-scenery PATH MAX_TRIANGLES "
                        "MAX_BYTES)\n");
        return 64 + TERRA_E_INVALID;
    }
    terra_scenery_desc d = {.path = argv[1],
                            .max_triangles = (size_t)strtoull(argv[2], NULL, 10),
                            .max_bytes = (size_t)strtoull(argv[3], NULL, 10)};
    /* the answer goes out on a descriptor of its own: whatever assimp prints goes nowhere */
    int out = dup(1), null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (out < 0 || null < 0 || dup2(null, 1) < 0) {
        fprintf(stderr, "%s: the scenery reader cannot set up its output\n", d.path);
        return 64 + TERRA_E_IO;
    }
    close(null);
    signal(SIGPIPE, SIG_IGN); /* a caller that stops reading is an error to report, not a signal */
    terra_child_limit_cpu();
    const size_t budget = terra_raster_memory_budget(d.max_bytes);
    bool limited = false;
#ifndef UNDER_SANITIZER
    /* on top of what the program maps already (its code and libraries, ~30 MiB with assimp's) */
    unsigned long pages = 0;
    FILE *statm = fopen("/proc/self/statm", "r");
    if (statm && fscanf(statm, "%lu", &pages) != 1) pages = 0;
    if (statm) fclose(statm);
    const uint64_t mapped = (uint64_t)pages * (uint64_t)sysconf(_SC_PAGESIZE);
    struct rlimit rl = {.rlim_cur = mapped + budget, .rlim_max = mapped + budget};
    limited = setrlimit(RLIMIT_AS, &rl) == 0;
#endif
    terra_scenery s;
    terra_status st = terra_scenery_read(&d, &s);
    if (st == TERRA_E_NOMEM && limited) {
        fprintf(stderr, "%s: reading it takes more than the memory budget of %.1f MiB%s\n", d.path,
                (double)budget / 1048576.0, d.max_bytes ? "" : " (half of physical memory)");
        return 64 + TERRA_E_CAPACITY;
    }
    if (st != TERRA_OK) {
        fprintf(stderr, "%s\n", terra_last_error());
        return 64 + (int)st;
    }
    bool ok = terra_scenery_send(out, &s);
    terra_scenery_free(&s);
    if (!ok) {
        fprintf(stderr, "%s: cannot hand the ground over (the caller stopped reading)\n", d.path);
        return 64 + TERRA_E_IO;
    }
    return 0;
}
