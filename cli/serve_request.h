/* What `terra serve` makes of a request before it touches the archive: the raw request target
 * (as sent: not unescaped, its length known, so a NUL inside it is seen), the method, the header
 * fields as a whole (framing, Host), Accept-Encoding, Range and If-Range. Pure C (no libmicrohttpd, no allocation), so the whole request path is
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

/* Whether a Range may be honoured under an If-Range value (n bytes; NULL: none) for a representation
 * whose strong entity tag is etag (quotes included; NULL: it has none) (RFC 9110 13.1.5): only an
 * entity tag equal to etag byte for byte matches. A weak tag never does, nor a date: a file time is
 * not known to be a strong validator (the file may have changed twice within its second). When this
 * is false the Range is ignored and the whole representation is sent (200). */
bool serve_if_range(const char *v, size_t n, const char *etag);

/* One header field of a request as received: its name, and its value after the leading white space.
 * Neither need be NUL-terminated. */
typedef struct serve_field {
    const char *name, *value;
    size_t name_n, value_n;
} serve_field;

/* What a request's header fields say about its framing (RFC 9110 5, 7.2, 8.6; RFC 9112 3.2, 6):
 * false, with out->status 400 and out->message, when a field name is not a token (white space
 * before the colon, or a first line that starts with white space), a value holds a control byte
 * other than tab (CR, LF, NUL...), an HTTP/1.1 request (http10 false) has no Host or any request
 * has several or a malformed one, a Content-Length is not a list of decimal numbers or the numbers
 * differ, or Transfer-Encoding comes with Content-Length, in HTTP/1.0, or does not end in chunked.
 * out->content: the request carries content (a Content-Length above 0, or chunked), which terra
 * serve never reads: it answers such a request and closes the connection. */
typedef struct serve_head {
    unsigned status;     /* 0 when acceptable, else 400 */
    const char *message; /* a line for the response body (static text), NULL when acceptable */
    bool content;
} serve_head;
bool serve_request_head(const serve_field *f, size_t n, bool http10, serve_head *out);

/* Whether the n bytes at head, a request head whose fields a parser cut in place (their names and
 * values point into it, in order; line ends and separators overwritten with NUL bytes), hold a
 * byte that is neither NUL nor inside some field's span, from its name to the end of its value:
 * a line the parser did not report as a field of its own. Fields whose span lies outside head are
 * skipped; fields inside it out of order count as stray. libmicrohttpd 0.9 parses in place and
 * joins a folded line (obs-fold) to the field before it without a trace other than this. */
bool serve_request_stray(const char *head, size_t n, const serve_field *f, size_t nf);

#endif
