/* libFuzzer target: terra serve's request path (cli/serve_request.c) over arbitrary requests.
 * Input: one byte for the query parameter limit, then the method up to '\n', the raw target up to
 * the next '\n' (NUL bytes and all), and the rest as the Accept-Encoding value. Each piece lives in
 * a buffer of exactly its size, so a read past it is caught. Beyond memory safety it checks what
 * the server relies on: a routed target is made of the tile grammar's bytes, a tile's numbers are
 * in range, no target with a NUL or a '%' in its path is routed, errors carry a status and a line. */
#include "serve_request.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void *copy(const uint8_t *p, size_t n, size_t extra) {
    uint8_t *b = malloc(n + extra ? n + extra : 1);
    if (!b) abort();
    if (n) memcpy(b, p, n);
    if (extra) b[n] = 0;
    return b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    size_t max_query = data[0];
    data++, size--;
    const uint8_t *nl = memchr(data, '\n', size);
    size_t mn = nl ? (size_t)(nl - data) : size;
    char *method = copy(data, mn, 1);
    const uint8_t *rest = nl ? nl + 1 : data + size;
    size_t rn = (size_t)(data + size - rest);
    const uint8_t *nl2 = memchr(rest, '\n', rn);
    size_t tn = nl2 ? (size_t)(nl2 - rest) : rn;
    char *target = copy(rest, tn, 0);
    const uint8_t *ae = nl2 ? nl2 + 1 : rest + rn;
    size_t an = (size_t)(data + size - ae);
    char *accept = copy(ae, an, 0);

    serve_request r;
    bool routed = serve_request_target(target, tn, max_query, &r);
    if (routed != (r.route != SERVE_ROUTE_ERROR)) abort();
    if (routed) {
        size_t path_n = tn;
        const char *q = memchr(target, '?', tn);
        if (q) path_n = (size_t)(q - target);
        if (path_n == 0 || target[0] != '/' || r.status != 200 || r.query_params > max_query) abort();
        for (size_t i = 0; i < path_n; i++)
            if (target[i] == 0 || target[i] == '%' || (unsigned char)target[i] > 0x7e) abort();
        for (size_t i = 0; i < tn; i++)
            if (target[i] == 0) abort();
        if (r.route == SERVE_ROUTE_TILE && (r.z < 0 || r.z > 31 || r.x < 0 || r.y < 0 || r.x > 9999999999ll ||
                                            r.y > 9999999999ll))
            abort();
    } else if (!r.message || (r.status != 400 && r.status != 404 && r.status != 414)) {
        abort();
    }
    serve_request_method(method, &r);
    if (r.route == SERVE_ROUTE_ERROR && (!r.message || r.status < 400 || r.status > 414)) abort();
    if (r.route == SERVE_ROUTE_OPTIONS && (!routed && r.status != 204)) abort();
    uint64_t first = 0, last = 0, file_size = an ? (unsigned char)accept[0] * 257u : 0;
    if (serve_request_range(accept, an, file_size, &first, &last) == SERVE_RANGE_PART && (first > last || last >= file_size))
        abort();
    bool gz = serve_accepts_gzip(accept, an);
    /* the answer depends on the bytes given, not on what follows them */
    if (an && serve_accepts_gzip(accept, an) != gz) abort();
    free(method);
    free(target);
    free(accept);
    return 0;
}
