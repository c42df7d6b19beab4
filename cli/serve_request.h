/* What `terra serve` makes of a request before it touches the archive: the raw request target
 * (as sent: not unescaped, its length known, so a NUL inside it is seen), the method and the
 * Accept-Encoding header. Pure C (no libmicrohttpd, no allocation), so the whole request path is
 * unit-tested (tests/test_serve_request.c) and fuzzed (fuzz/fuzz_serve_request.c).
 *
 * The grammar: the path is /layer.json, /{z}/{x}/{y}.terrain (decimal, at most 10 digits each,
 * z <= 31) or /archive.terra (the archive file itself, for range requests); any other path made of unreserved characters ([A-Za-z0-9._~-] and '/') is 404; a
 * path with any other byte (NUL, '%', controls, spaces, non-ASCII) is 400. The query after '?'
 * is printable ASCII with well-formed %XX escapes other than %00, and at most max_query_params
 * parameters ('&'-separated), else 400 (grammar) or 414 (count). */
#ifndef TERRA_SERVE_REQUEST_H
#define TERRA_SERVE_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum serve_route {
    SERVE_ROUTE_ERROR = 0,  /* answer `status` with `message` */
    SERVE_ROUTE_LAYER_JSON, /* GET /layer.json */
    SERVE_ROUTE_TILE,       /* GET /{z}/{x}/{y}.terrain: z, x, y */
    SERVE_ROUTE_ARCHIVE,    /* GET /archive.terra: the file, whole or the range asked for */
    SERVE_ROUTE_OPTIONS     /* a CORS preflight for a well-formed target */
} serve_route;

typedef struct serve_request {
    serve_route route;
    unsigned status;     /* SERVE_ROUTE_ERROR: 400, 404, 405 or 414; else 200 */
    const char *message; /* SERVE_ROUTE_ERROR: a line for the response body (static text) */
    int z;
    int64_t x, y;
    size_t query_params; /* parameters counted in the query (up to one past the limit) */
} serve_request;

/* Classifies a raw request target of n bytes (may hold NUL bytes): false when the answer is an
 * error (out->status, out->message). The route is what a GET would get; serve_request_method
 * then applies the method. */
bool serve_request_target(const char *target, size_t n, size_t max_query_params, serve_request *out);

/* GET and HEAD keep the route; OPTIONS of a well-formed target becomes SERVE_ROUTE_OPTIONS; any
 * other method is 405 (after a malformed target's 400/414, which win). */
void serve_request_method(const char *method, serve_request *r);

/* Whether an Accept-Encoding value (n bytes) accepts gzip: "gzip" or "x-gzip" with a q-value
 * above 0, or "*" above 0 when gzip is not named (RFC 9110 12.5.3). Names are case-insensitive;
 * a malformed q-value counts as 0. NULL (no header) accepts nothing. */
bool serve_accepts_gzip(const char *accept_encoding, size_t n);

/* What a Range header value (n bytes; NULL: none) asks of a file of `size` bytes (RFC 9110 14):
 * one range "bytes=a-b", "bytes=a-" or "bytes=-n" is a part, *first..*last (b past the end is
 * cut to it); one that starts past the end, or a suffix of 0 bytes, is unsatisfiable (416);
 * anything else (no header, another unit, several ranges, malformed) is answered whole (200). */
typedef enum serve_range { SERVE_RANGE_WHOLE, SERVE_RANGE_PART, SERVE_RANGE_UNSATISFIABLE } serve_range;
serve_range serve_request_range(const char *v, size_t n, uint64_t size, uint64_t *first, uint64_t *last);

#endif
