/* A reader program in a child process (io/child.h). */
#include "child.h"
#include "terra/io.h"

#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

terra_status terra_child_locate(const char *file, const char *what, const char *given, const char *env,
                                const char *name, char *path, size_t cap) {
    const char *e = env ? getenv(env) : NULL;
    bool ok = given ? snprintf(path, cap, "%s", given) < (int)cap
                    : e && *e ? snprintf(path, cap, "%s", e) < (int)cap : terra_io_sibling_path(name, path, cap);
    if (!ok) return terra_fail(TERRA_E_UNSUPPORTED, "%s: cannot locate %s, %s", file, name, what);
    if (access(path, X_OK) != 0)
        return terra_fail(TERRA_E_UNSUPPORTED, "%s: %s %s is missing (it is built next to terra)", file, what, path);
    return TERRA_OK;
}

terra_status terra_child_start(const char *file, const char *what, const char *program, char *const argv[],
                               bool conversation, terra_child *c) {
    int out[2] = {-1, -1}, err[2] = {-1, -1};
    /* a socket pair: POSIX has no pipe2 to make a pipe close-on-exec from the start (dup2 into the
     * child's 0, 1 and 2 clears it there) */
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, out) != 0 ||
        (!conversation && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, err) != 0)) {
        terra_status st = terra_fail(TERRA_E_IO, "%s: cannot start %s: %s", file, what, strerror(errno));
        for (int i = 0; i < 2; i++) {
            if (out[i] >= 0) close(out[i]);
            if (err[i] >= 0) close(err[i]);
        }
        return st;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (conversation) posix_spawn_file_actions_adddup2(&fa, out[1], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    if (!conversation) posix_spawn_file_actions_adddup2(&fa, err[1], 2);
    int rc = posix_spawn(&c->pid, program, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(out[1]);
    if (err[1] >= 0) close(err[1]);
    if (rc != 0) {
        close(out[0]);
        if (err[0] >= 0) close(err[0]);
        return terra_fail(TERRA_E_IO, "%s: cannot start %s %s: %s", file, what, program, strerror(rc));
    }
    c->out = out[0], c->err = err[0];
    return TERRA_OK;
}

bool terra_child_read(int fd, void *buf, size_t n) {
    uint8_t *p = buf;
    while (n) {
        ssize_t k = read(fd, p, n > (1u << 20) ? (1u << 20) : n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        p += k;
        n -= (size_t)k;
    }
    return true;
}

terra_status terra_child_finish(terra_child *c, const char *file, const char *what) {
    close(c->out);
    char msg[1024];
    size_t n = 0;
    for (; c->err >= 0;) {
        ssize_t k = read(c->err, msg + n, sizeof msg - 1 - n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        n += (size_t)k;
        if (n == sizeof msg - 1) break;
    }
    msg[n] = 0;
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r')) msg[--n] = 0;
    if (c->err >= 0) close(c->err);
    int status = 0;
    while (waitpid(c->pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return TERRA_OK;
    if (WIFEXITED(status) && WEXITSTATUS(status) > 64 && WEXITSTATUS(status) <= 64 + TERRA_E_CAPACITY && n)
        return terra_fail((terra_status)(WEXITSTATUS(status) - 64), "%s", msg);
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGXCPU)
        return terra_fail(TERRA_E_IO, "%s ran out of CPU time on %s (signal %d: more than the %ld s one read may take; "
                          "TERRA_READER_CPU_S sets it)%s%s", what, file, SIGXCPU, terra_child_cpu_limit_s(),
                          n ? ": " : "", msg);
    if (WIFSIGNALED(status))
        return terra_fail(TERRA_E_IO, "%s crashed on %s (signal %d, %s)%s%s", what, file, WTERMSIG(status),
                          strsignal(WTERMSIG(status)), n ? ": " : "", msg);
    return terra_fail(TERRA_E_IO, "%s: %s failed%s%s", file, what, n ? ": " : "", msg);
}

long terra_child_cpu_limit_s(void) {
    const char *e = getenv("TERRA_READER_CPU_S");
    char *end = NULL;
    const long v = e ? strtol(e, &end, 10) : 0;
    return e && *e && !*end && v >= 1 ? v : TERRA_CHILD_CPU_S;
}

void terra_child_limit_cpu(void) {
    struct rusage ru;
    struct rlimit rl;
    if (getrusage(RUSAGE_SELF, &ru) || getrlimit(RLIMIT_CPU, &rl)) return;
    const rlim_t used = (rlim_t)ru.ru_utime.tv_sec + (rlim_t)ru.ru_stime.tv_sec + 1; /* whole seconds, rounded up */
    rlim_t want = used + (rlim_t)terra_child_cpu_limit_s();
    if (rl.rlim_max != RLIM_INFINITY && want > rl.rlim_max) want = rl.rlim_max;
    rl.rlim_cur = want;
    setrlimit(RLIMIT_CPU, &rl);
}
