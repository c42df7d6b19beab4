/* Atomic file output: write to a temporary name beside the target, rename into place when complete.
 *
 * Temporaries are named PATH.tmpPID-N: the PID says whose it is (so one left by a process killed
 * mid-write can be told from one being written now), N a per-process counter (threads of one
 * process writing the same target at once get different names), and O_EXCL makes sure no two
 * writers ever share one. Before each write, the temporaries beside the same target whose process
 * is gone (kill(pid, 0) answers ESRCH) are removed; PATH.tmpPID, the name of earlier versions, is
 * recognised too. A PID says nothing about processes on other hosts: a directory shared between
 * machines (NFS) should not have the same target written from two of them at once. */
#include "terra/io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static atomic_uint temp_counter;

/* The directory of `path` ("." when it has none) and where its last component starts. */
static char *dir_of(const char *path, const char **base) {
    const char *slash = strrchr(path, '/');
    *base = slash ? slash + 1 : path;
    size_t n = slash ? (size_t)(slash - path) : 0;
    char *dir = terra_alloc(n + 2);
    if (!dir) return NULL;
    if (!slash) {
        strcpy(dir, ".");
    } else if (n == 0) {
        strcpy(dir, "/");
    } else {
        memcpy(dir, path, n);
        dir[n] = 0;
    }
    return dir;
}

/* The PID in a temporary's name `name` for the target named `base` (base.tmpPID or
 * base.tmpPID-N), or 0 when `name` is no temporary of that target. */
static long temp_pid(const char *name, const char *base) {
    size_t bn = strlen(base);
    if (strncmp(name, base, bn) != 0 || strncmp(name + bn, ".tmp", 4) != 0) return 0;
    const char *p = name + bn + 4;
    long pid = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9' && digits < 10; p++, digits++) pid = pid * 10 + (*p - '0');
    if (!digits || pid <= 0) return 0;
    if (*p == '-') {
        p++;
        int nd = 0;
        for (; *p >= '0' && *p <= '9' && nd < 10; p++) nd++;
        if (!nd) return 0;
    }
    return *p ? 0 : pid;
}

/* True when no process `pid` runs on this host. EPERM means it exists under another user. */
static bool process_gone(long pid) { return pid != (long)getpid() && kill((pid_t)pid, 0) != 0 && errno == ESRCH; }

/* Calls fn for each temporary beside `path` whose process is gone; 0, or -1 with errno when
 * the directory cannot be read. */
typedef void (*stale_fn)(void *ctx, const char *temp, long pid, uint64_t bytes);
static int each_stale(const char *path, stale_fn fn, void *ctx) {
    const char *base;
    char *dir = dir_of(path, &base);
    if (!dir) {
        errno = ENOMEM;
        return -1;
    }
    DIR *dh = *base ? opendir(dir) : NULL;
    if (!dh) {
        int e = *base ? errno : EINVAL;
        terra_free(dir);
        errno = e;
        return -1;
    }
    size_t dn = strlen(dir);
    struct dirent *e;
    while ((e = readdir(dh)) != NULL) {
        long pid = temp_pid(e->d_name, base);
        if (!pid || !process_gone(pid)) continue;
        size_t n = dn + strlen(e->d_name) + 2;
        char *full = terra_alloc(n);
        if (!full) continue;
        snprintf(full, n, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(full, &st) == 0 && S_ISREG(st.st_mode)) fn(ctx, full, pid, (uint64_t)st.st_size);
        terra_free(full);
    }
    closedir(dh);
    terra_free(dir);
    return 0;
}

typedef struct stale_sum {
    terra_io_temp_fn fn;
    void *ctx;
    size_t count;
    uint64_t bytes;
} stale_sum;

static void sum_one(void *ctx, const char *temp, long pid, uint64_t bytes) {
    stale_sum *s = ctx;
    s->count++;
    s->bytes += bytes;
    if (s->fn) s->fn(s->ctx, temp, pid, bytes);
}

terra_status terra_io_stale_temps(const char *path, terra_io_temp_fn fn, void *ctx, size_t *count, uint64_t *bytes) {
    if (count) *count = 0;
    if (bytes) *bytes = 0;
    if (!path || !*path) return terra_fail(TERRA_E_INVALID, "stale temporaries: no target path");
    stale_sum s = {fn, ctx, 0, 0};
    if (each_stale(path, sum_one, &s) != 0)
        return terra_fail(TERRA_E_IO, "%s: cannot list the directory for leftover temporaries: %s", path,
                          strerror(errno));
    if (count) *count = s.count;
    if (bytes) *bytes = s.bytes;
    return TERRA_OK;
}

static void remove_one(void *ctx, const char *temp, long pid, uint64_t bytes) {
    (void)pid;
    (void)bytes;
    /* Another writer may have removed it first: only ours count. */
    if (unlink(temp) == 0) ++*(size_t *)ctx;
}

size_t terra_io_remove_stale_temps(const char *path) {
    size_t n = 0;
    if (path && *path) (void)each_stale(path, remove_one, &n);
    return n;
}

terra_status terra_io_open_temp(const char *path, char **tmp_out, void **file_out) {
    *tmp_out = NULL;
    *file_out = NULL;
    if (!path || !*path) return terra_fail(TERRA_E_INVALID, "cannot write: no file name");
    /* Leftovers of killed writers of the same target go first; failing to list them is no reason
     * not to write (the create below says what is wrong with the directory, if anything). */
    (void)terra_io_remove_stale_temps(path);
    size_t n = strlen(path) + 40;
    char *tmp = terra_alloc(n);
    if (!tmp) return terra_fail(TERRA_E_NOMEM, "%s: out of memory", path);
    int fd = -1, err = 0;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        snprintf(tmp, n, "%s.tmp%ld-%u", path, (long)getpid(), atomic_fetch_add(&temp_counter, 1u));
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        err = errno;
        if (fd < 0 && err != EEXIST) break;
    }
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        if (fd >= 0) {
            err = errno;
            close(fd);
            unlink(tmp);
        }
        terra_status s = terra_fail(TERRA_E_IO, "%s: cannot create (temporary file %s beside it): %s", path, tmp,
                                    strerror(err));
        terra_free(tmp);
        return s;
    }
    *tmp_out = tmp;
    *file_out = f;
    return TERRA_OK;
}

terra_status terra_io_commit(char *tmp, const char *path) {
    terra_status s = TERRA_OK;
    if (rename(tmp, path) != 0) {
        s = terra_fail(TERRA_E_IO, "%s: cannot rename into place (from %s): %s", path, tmp, strerror(errno));
        remove(tmp);
    }
    terra_free(tmp);
    return s;
}

void terra_io_abort(char *tmp) {
    if (!tmp) return;
    remove(tmp);
    terra_free(tmp);
}
