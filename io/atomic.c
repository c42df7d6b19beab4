/* Atomic file output: write to a temporary name beside the target, rename into place when complete. */
#include "terra/io.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

terra_status terra_io_open_temp(const char *path, char **tmp_out, void **file_out) {
    size_t n = strlen(path) + 32;
    char *tmp = terra_alloc(n);
    if (!tmp) return terra_fail(TERRA_E_NOMEM, "%s: out of memory", path);
    snprintf(tmp, n, "%s.tmp%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        terra_status s = terra_fail(TERRA_E_IO, "%s: cannot create: %s", tmp, strerror(errno));
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
        s = terra_fail(TERRA_E_IO, "%s: cannot rename into place: %s", path, strerror(errno));
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
