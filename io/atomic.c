/* Atomic file output: write to a temporary name beside the target, rename into place when complete.
 *
 * Temporaries are named PATH.tmpPID-N: the PID says whose it is (so one left by a process killed
 * mid-write can be told from one being written now), N a per-process counter (threads of one
 * process writing the same target at once get different names), and O_EXCL makes sure no two
 * writers ever share one. Before each write, the temporaries beside the same target whose process
 * is gone (kill(pid, 0) answers ESRCH) are removed; PATH.tmpPID, the name of earlier versions, is
 * recognised too. A PID says nothing about processes on other hosts: a directory shared between
 * machines (NFS) should not have the same target written from two of them at once.
 *
 * Finding them means listing the directory. A process writing many files into one directory
 * (terra export's tiles, terra fly's frames) would list it once a file, quadratic in its size, so
 * a directory is listed again only once ten times the last listing's duration has passed: in a
 * small directory that is every write, in one of 100 k files at most a tenth of the time goes to
 * listing. What a listing finds, for any target, is kept and removed when that target is written. */
#include "terra/io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
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
    if (!digits || pid <= 0 || pid > 0x7fffffff) return 0; /* pid_t is 32-bit: no kill() of a wrapped PID */
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

/* Where a temporary's name `name` (X.tmpPID or X.tmpPID-N) ends its target's name X: *prefix
 * gets X's length. The PID, or 0 when `name` is no temporary. */
static long split_temp(const char *name, size_t *prefix) {
    for (const char *t = strstr(name, ".tmp"); t; t = strstr(t + 1, ".tmp")) {
        *prefix = (size_t)(t - name);
        const char *p = t + 4;
        long v = 0;
        int digits = 0;
        for (; *p >= '0' && *p <= '9' && digits < 10; p++, digits++) v = v * 10 + (*p - '0');
        if (!digits || v <= 0 || v > 0x7fffffff) continue;
        if (*p == '-') {
            p++;
            int nd = 0;
            for (; *p >= '0' && *p <= '9' && nd < 10; p++) nd++;
            if (!nd) continue;
        }
        if (!*p && *prefix > 0) return v;
    }
    return 0;
}

typedef struct dir_seen {
    char *dir;
    double next_scan;           /* CLOCK_MONOTONIC seconds */
} dir_seen;
typedef struct leftover {
    const char *dir;            /* the dir_seen's string */
    char *target, *temp;        /* dir/X, dir/X.tmpPID[-N] */
} leftover;

/* Kept for the process's life, so in malloc's memory rather than terra_alloc's: a program may
 * change terra's allocator between writes (terra mesh counts its allocations). */
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static dir_seen *seen;          /* open addressing on the directory name; dir NULL = free */
static size_t seen_cap, seen_n;
static leftover *left;
static size_t left_n, left_cap;

static double mono_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static size_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return (size_t)(h ^ (h >> 29));
}

/* The directory's record, added when new; NULL when out of memory (then it is listed every time). */
static dir_seen *seen_find(const char *dir) {
    if (seen_n * 2 >= seen_cap) {
        size_t cap = seen_cap ? 2 * seen_cap : 64;
        dir_seen *t = calloc(cap, sizeof *t);
        if (!t) return NULL;
        for (size_t i = 0; i < seen_cap; i++) {
            if (!seen[i].dir) continue;
            size_t k = hash_str(seen[i].dir) & (cap - 1);
            while (t[k].dir) k = (k + 1) & (cap - 1);
            t[k] = seen[i];
        }
        free(seen);
        seen = t, seen_cap = cap;
    }
    size_t k = hash_str(dir) & (seen_cap - 1);
    for (; seen[k].dir; k = (k + 1) & (seen_cap - 1))
        if (!strcmp(seen[k].dir, dir)) return &seen[k];
    size_t n = strlen(dir) + 1;
    char *copy = malloc(n);
    if (!copy) return NULL;
    memcpy(copy, dir, n);
    seen[k] = (dir_seen){copy, 0};
    seen_n++;
    return &seen[k];
}

static void left_drop(size_t i) {
    free(left[i].target);
    free(left[i].temp);
    left[i] = left[--left_n];
}

/* Lists `dir` for temporaries of processes that are gone, of any target, into `left`
 * (replacing what an earlier listing of it found). Called with seen_lock held. */
static void scan_dir(const char *dir) {
    for (size_t i = left_n; i-- > 0;)
        if (left[i].dir == dir) left_drop(i);
    DIR *dh = opendir(dir);
    if (!dh) return;
    struct dirent *e;
    while ((e = readdir(dh)) != NULL) {
        size_t pl;
        long pid = split_temp(e->d_name, &pl);
        if (!pid || !process_gone(pid)) continue;
        size_t dn = strlen(dir), nn = strlen(e->d_name);
        char *temp = malloc(dn + nn + 2), *target = malloc(dn + pl + 2);
        struct stat st;
        if (temp) snprintf(temp, dn + nn + 2, "%s/%s", dir, e->d_name);
        if (temp && (lstat(temp, &st) != 0 || !S_ISREG(st.st_mode))) {
            free(temp), free(target);
            continue;
        }
        if (temp && target && left_n == left_cap) {
            size_t cap = left_cap ? 2 * left_cap : 16;
            leftover *t = realloc(left, cap * sizeof *t);
            if (t) left = t, left_cap = cap;
        }
        if (!temp || !target || left_n == left_cap) {
            free(temp), free(target);
            continue;
        }
        snprintf(target, dn + pl + 2, "%s/%.*s", dir, (int)pl, e->d_name);
        left[left_n++] = (leftover){dir, target, temp};
    }
    closedir(dh);
}

/* Before writing `path`: removes the temporaries of dead processes beside it, listing its
 * directory when due (see the top of this file). */
static void sweep_before_write(const char *path) {
    const char *base;
    char *dir = dir_of(path, &base);
    if (!dir || !*base) {
        terra_free(dir);
        return;
    }
    size_t n = strlen(dir) + strlen(base) + 2;
    char *key = terra_alloc(n);
    if (!key) {
        terra_free(dir);
        return;
    }
    snprintf(key, n, "%s/%s", dir, base);
    pthread_mutex_lock(&seen_lock);
    dir_seen *d = seen_find(dir);
    double now = mono_now();
    if (!d) {
        (void)terra_io_remove_stale_temps(path);
    } else if (now >= d->next_scan) {
        scan_dir(d->dir);
        double took = mono_now() - now;
        d->next_scan = now + 10 * took;
    }
    for (size_t i = left_n; i-- > 0;)
        if (!strcmp(left[i].target, key)) {
            unlink(left[i].temp);
            left_drop(i);
        }
    pthread_mutex_unlock(&seen_lock);
    terra_free(key);
    terra_free(dir);
}

terra_status terra_io_open_temp(const char *path, char **tmp_out, void **file_out) {
    *tmp_out = NULL;
    *file_out = NULL;
    if (!path || !*path) return terra_fail(TERRA_E_INVALID, "cannot write: no file name");
    /* Leftovers of killed writers of the same target go first; failing to list them is no reason
     * not to write (the create below says what is wrong with the directory, if anything). */
    sweep_before_write(path);
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
