/* libFuzzer target: terra serve's request path (cli/serve_request.c) over arbitrary requests.
 * Input: one byte for the query parameter limit (its low bit: HTTP/1.0), then the method up to
 * '\n', the raw target up to the next '\n' (NUL bytes and all), and the rest: the Accept-Encoding,
 * Range and If-Range value, and, split at '\n' into "name:value" lines, the header fields of the
 * request head it also is. Each piece lives in a buffer of exactly its size, so a read past it is
 * caught. Beyond memory safety it checks what the server relies on: a routed target is made of the
 * tile grammar's bytes, a tile's numbers are in range, no target with a NUL or a '%' in its path is
 * routed, errors carry a status and a line; an accepted head has token names, values free of CR,
 * LF and NUL, and the Host fields HTTP requires; If-Range lets a Range through only for the tag
 * itself; a stray byte is found exactly when one lies outside every field. */
#include "serve_request.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void *copy(const uint8_t *p, size_t n, size_t extra) {
    uint8_t *b = malloc(n + extra ? n + extra : 1);
    if (!b) abort();
    if (n) memcpy(b, p, n);
    if (extra) b[n] = 0;
    return b;
}

static bool tchar(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* Splits the rest into "name:value" fields at '\n' (the value after the colon's white space). */
static size_t split_fields(const char *p, size_t n, serve_field *f, size_t max) {
    size_t nf = 0;
    const char *end = p + n;
    while (p < end && nf < max) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) nl = end;
        const char *colon = memchr(p, ':', (size_t)(nl - p));
        const char *v = colon ? colon + 1 : nl;
        while (v < nl && (*v == ' ' || *v == '\t')) v++;
        f[nf++] = (serve_field){.name = p, .name_n = (size_t)((colon ? colon : nl) - p), .value = v, .value_n = (size_t)(nl - v)};
        p = nl + 1;
    }
    return nf;
}

static void check_head(const char *rest, size_t rn, bool http10) {
    serve_field f[64];
    size_t nf = split_fields(rest, rn, f, 64);
    serve_head h;
    bool ok = serve_request_head(f, nf, http10, &h);
    if (ok != (h.status == 0) || ok != (h.message == NULL) || (!ok && (h.status != 400 || h.content))) abort();
    if (ok) {
        size_t hosts = 0;
        for (size_t i = 0; i < nf; i++) {
            if (f[i].name_n == 0) abort();
            for (size_t k = 0; k < f[i].name_n; k++)
                if (!tchar((unsigned char)f[i].name[k])) abort();
            for (size_t k = 0; k < f[i].value_n; k++)
                if (f[i].value[k] == '\r' || f[i].value[k] == '\n' || f[i].value[k] == 0) abort();
            hosts += f[i].name_n == 4 && !strncasecmp(f[i].name, "host", 4);
        }
        if (hosts > 1 || (!http10 && hosts != 1)) abort();
    }
    /* every byte outside the fields, the separators, is stray unless NUL */
    bool stray = false;
    const char *at = rest;
    for (size_t i = 0; i < nf; i++) {
        for (; at < f[i].name; at++) stray |= *at != 0;
        at = f[i].value + f[i].value_n;
    }
    for (; at < rest + rn; at++) stray |= *at != 0;
    if (serve_request_stray(rest, rn, f, nf) != stray) abort();
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
    static const char tag[] = "\"1f-7e9c\"";
    if (serve_if_range(accept, an, tag)) {
        size_t a = 0, b = an;
        while (a < b && (accept[a] == ' ' || accept[a] == '\t')) a++;
        while (b > a && (accept[b - 1] == ' ' || accept[b - 1] == '\t')) b--;
        if (b - a != sizeof tag - 1 || memcmp(accept + a, tag, b - a)) abort();
    }
    if (serve_if_range(accept, an, NULL)) abort();
    check_head(accept, an, max_query & 1);
    free(method);
    free(target);
    free(accept);
    return 0;
}
