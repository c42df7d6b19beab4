/* Request targets, methods and Accept-Encoding for terra serve. See serve_request.h. */
#include "serve_request.h"

#include "terra/core.h"

#include <string.h>

static bool fail(serve_request *r, unsigned status, const char *message) {
    r->route = SERVE_ROUTE_ERROR;
    r->status = status;
    r->message = message;
    return false;
}

/* RFC 3986 unreserved characters, and '/' */
static bool path_byte(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '~' || c == '-' || c == '/';
}

static int hex_digit(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* A decimal number of 1 to 10 digits. */
static bool parse_uint(const char *s, size_t n, int64_t *out) {
    if (n == 0 || n > 10) return false;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
}

/* "/z/x/y" (the ".terrain" already cut): true when well-formed. */
static bool parse_tile(const char *p, size_t n, int *z, int64_t *x, int64_t *y) {
    if (n == 0 || p[0] != '/') return false;
    const char *end = p + n;
    p++;
    int64_t v[3];
    for (int k = 0; k < 3; k++) {
        const char *q = memchr(p, '/', (size_t)(end - p));
        if (!q) q = end;
        if ((k < 2 && q == end) || (k == 2 && q != end)) return false;
        if (!parse_uint(p, (size_t)(q - p), &v[k])) return false;
        p = q + 1;
    }
    if (v[0] > TERRA_TILE_MAX_LEVEL) return false;
    *z = (int)v[0];
    *x = v[1];
    *y = v[2];
    return true;
}

bool serve_request_target(const char *target, size_t n, size_t max_query_params, serve_request *out) {
    memset(out, 0, sizeof *out);
    out->status = 200;
    if (!target) n = 0;
    const char *q = n ? memchr(target, '?', n) : NULL;
    size_t path_n = q ? (size_t)(q - target) : n;
    if (path_n == 0 || target[0] != '/')
        return fail(out, 400, "malformed request target: expected /layer.json or /{z}/{x}/{y}.terrain\n");
    for (size_t i = 0; i < path_n; i++)
        if (!path_byte((unsigned char)target[i]))
            return fail(out, 400, "malformed path: only /layer.json and /{z}/{x}/{y}.terrain are served\n");
    if (q) {
        const char *s = q + 1;
        size_t sn = n - path_n - 1;
        out->query_params = sn ? 1 : 0;
        for (size_t i = 0; i < sn; i++) {
            unsigned char c = (unsigned char)s[i];
            if (c == '&' && ++out->query_params > max_query_params) break;
            if (c < 0x21 || c > 0x7e || c == '#')
                return fail(out, 400, "malformed query: a byte outside printable ASCII\n");
            if (c == '%') {
                int hi = i + 2 < sn ? hex_digit((unsigned char)s[i + 1]) : -1;
                int lo = hi >= 0 ? hex_digit((unsigned char)s[i + 2]) : -1;
                if (lo < 0) return fail(out, 400, "malformed query: '%' not followed by two hex digits\n");
                if (hi == 0 && lo == 0) return fail(out, 400, "malformed query: %00 (NUL)\n");
                i += 2;
            }
        }
        if (out->query_params > max_query_params) return fail(out, 414, "too many query parameters\n");
    }
    static const char suffix[] = ".terrain";
    const size_t sl = sizeof suffix - 1;
    if (path_n == 11 && !memcmp(target, "/layer.json", 11)) {
        out->route = SERVE_ROUTE_LAYER_JSON;
    } else if (path_n == 14 && !memcmp(target, "/archive.terra", 14)) {
        out->route = SERVE_ROUTE_ARCHIVE;
    } else if (path_n > sl && !memcmp(target + path_n - sl, suffix, sl)) {
        if (!parse_tile(target, path_n - sl, &out->z, &out->x, &out->y))
            return fail(out, 400, "malformed tile path: expected /{z}/{x}/{y}.terrain\n");
        out->route = SERVE_ROUTE_TILE;
    } else {
        return fail(out, 404, "not found: try /layer.json, /{z}/{x}/{y}.terrain or /archive.terra\n");
    }
    return true;
}

void serve_request_method(const char *method, serve_request *r) {
    bool get = method && (!strcmp(method, "GET") || !strcmp(method, "HEAD"));
    bool options = method && !strcmp(method, "OPTIONS");
    if (r->route == SERVE_ROUTE_ERROR && r->status != 404) return; /* malformed targets stay 400/414 */
    if (options) {
        r->route = SERVE_ROUTE_OPTIONS;
        r->status = 204;
        r->message = NULL;
    } else if (!get) {
        (void)fail(r, 405, "only GET, HEAD and OPTIONS\n");
    }
}

static bool ows(char c) { return c == ' ' || c == '\t'; }

static bool same_token(const char *s, size_t n, const char *lower) {
    size_t m = strlen(lower);
    if (n != m) return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
        if (c != lower[i]) return false;
    }
    return true;
}

/* qvalue = "0" [ "." 0*3DIGIT ] / "1" [ "." 0*3"0" ], in thousandths; -1 when malformed. */
static int parse_qvalue(const char *s, size_t n) {
    if (n == 0 || (s[0] != '0' && s[0] != '1')) return -1;
    int v = (s[0] - '0') * 1000;
    if (n == 1) return v;
    if (s[1] != '.' || n > 5) return -1;
    int scale = 100;
    for (size_t i = 2; i < n; i++, scale /= 10) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v += (s[i] - '0') * scale;
    }
    return v > 1000 ? -1 : v;
}

/* Trims optional white space from both ends of [*s, *s + *n). */
static void trim(const char **s, size_t *n) {
    while (*n && ows(**s)) (*s)++, (*n)--;
    while (*n && ows((*s)[*n - 1])) (*n)--;
}

bool serve_accepts_gzip(const char *ae, size_t n) {
    if (!ae) return false;
    int gzip_q = -1, star_q = -1; /* -1: not named */
    const char *end = ae + n;
    for (const char *p = ae;;) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        if (!comma) comma = end;
        /* one element: coding *( OWS ";" OWS name "=" value ) */
        const char *semi = memchr(p, ';', (size_t)(comma - p));
        if (!semi) semi = comma;
        const char *coding = p;
        size_t cn = (size_t)(semi - p);
        trim(&coding, &cn);
        int q = 1000;
        for (const char *s = semi; s < comma;) {
            const char *next = memchr(s + 1, ';', (size_t)(comma - s - 1));
            if (!next) next = comma;
            const char *param = s + 1;
            size_t pn = (size_t)(next - param);
            trim(&param, &pn);
            const char *eq = memchr(param, '=', pn);
            if (eq) {
                const char *name = param, *value = eq + 1;
                size_t nn = (size_t)(eq - param), vn = pn - nn - 1;
                trim(&name, &nn);
                trim(&value, &vn);
                if (same_token(name, nn, "q")) {
                    int v = parse_qvalue(value, vn);
                    q = v < 0 ? 0 : v;
                }
            }
            s = next;
        }
        if (same_token(coding, cn, "gzip") || same_token(coding, cn, "x-gzip")) {
            if (q > gzip_q) gzip_q = q;
        } else if (cn == 1 && coding[0] == '*') {
            if (q > star_q) star_q = q;
        }
        if (comma == end) break;
        p = comma + 1;
    }
    return gzip_q >= 0 ? gzip_q > 0 : star_q > 0;
}

serve_range serve_request_range(const char *v, size_t n, uint64_t size, uint64_t *first, uint64_t *last) {
    if (!v) return SERVE_RANGE_WHOLE;
    size_t i = 0;
    while (i < n && ows(v[i])) i++;
    if (n - i < 6 || memcmp(v + i, "bytes=", 6) != 0) return SERVE_RANGE_WHOLE; /* another unit: ignored */
    i += 6;
    uint64_t a = 0, b = 0;
    int da = 0, db = 0;
    for (; i < n && v[i] >= '0' && v[i] <= '9' && da < 19; i++, da++) a = a * 10 + (uint64_t)(v[i] - '0');
    if (i >= n || v[i] != '-') return SERVE_RANGE_WHOLE;
    for (i++; i < n && v[i] >= '0' && v[i] <= '9' && db < 19; i++, db++) b = b * 10 + (uint64_t)(v[i] - '0');
    while (i < n && ows(v[i])) i++;
    if (i != n || (da == 0 && db == 0)) return SERVE_RANGE_WHOLE; /* several ranges, or malformed: the whole */
    if (da == 0) { /* the last b bytes */
        if (b == 0 || size == 0) return SERVE_RANGE_UNSATISFIABLE;
        *first = b < size ? size - b : 0;
        *last = size - 1;
        return SERVE_RANGE_PART;
    }
    if (db && b < a) return SERVE_RANGE_WHOLE;
    if (a >= size) return SERVE_RANGE_UNSATISFIABLE;
    *first = a;
    *last = db == 0 || b >= size ? size - 1 : b;
    return SERVE_RANGE_PART;
}

bool serve_if_range(const char *v, size_t n, const char *etag) {
    if (!v) return true;
    while (n && ows(*v)) v++, n--;
    while (n && ows(v[n - 1])) n--;
    /* a strong entity tag, compared byte for byte (RFC 9110 8.8.3.2); W/"..." and dates never match */
    return etag && n >= 2 && v[0] == '"' && strlen(etag) == n && !memcmp(v, etag, n);
}

/* RFC 9110 5.6.2 tchar */
static bool tchar(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* RFC 3986 authority without userinfo: reg-name, IPv4 or [IP-literal], then an optional port. */
static bool host_byte(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("-._~%!$&'()*+,;=:[]", c));
}

static bool head_fail(serve_head *out, const char *message) {
    out->status = 400;
    out->message = message;
    return false;
}

/* One Content-Length value: 1*DIGIT elements separated by commas (a list that an intermediary
 * joined). Each is compared with the one before (*len, once *seen): *differ when they differ.
 * False when malformed. */
static bool content_length(const char *v, size_t n, uint64_t *len, bool *seen, bool *differ) {
    const char *end = v + n;
    for (const char *p = v;;) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        if (!comma) comma = end;
        const char *e = p;
        size_t en = (size_t)(comma - p);
        trim(&e, &en);
        if (en == 0) return false;
        uint64_t x = 0;
        for (size_t i = 0; i < en; i++) {
            if (e[i] < '0' || e[i] > '9' || x > (UINT64_MAX - 9) / 10) return false;
            x = x * 10 + (uint64_t)(e[i] - '0');
        }
        if (*seen && x != *len) *differ = true;
        *len = x;
        *seen = true;
        if (comma == end) return true;
        p = comma + 1;
    }
}

bool serve_request_head(const serve_field *f, size_t n, bool http10, serve_head *out) {
    memset(out, 0, sizeof *out);
    size_t hosts = 0;
    const serve_field *te = NULL;
    uint64_t len = 0;
    bool have_len = false, differ = false;
    for (size_t i = 0; i < n; i++) {
        if (f[i].name_n == 0) return head_fail(out, "malformed header field: no name\n");
        for (size_t k = 0; k < f[i].name_n; k++)
            if (!tchar((unsigned char)f[i].name[k]))
                return head_fail(out, "malformed header field name (white space before ':', or a folded line)\n");
        for (size_t k = 0; k < f[i].value_n; k++) {
            unsigned char c = (unsigned char)f[i].value[k];
            if ((c < 0x20 && c != '\t') || c == 0x7f)
                return head_fail(out, "malformed header field: a control byte in its value\n");
        }
        if (same_token(f[i].name, f[i].name_n, "host")) {
            hosts++;
            const char *v = f[i].value;
            size_t vn = f[i].value_n;
            trim(&v, &vn);
            for (size_t k = 0; k < vn; k++)
                if (!host_byte((unsigned char)v[k])) return head_fail(out, "malformed Host header field\n");
        } else if (same_token(f[i].name, f[i].name_n, "content-length")) {
            if (!content_length(f[i].value, f[i].value_n, &len, &have_len, &differ))
                return head_fail(out, "malformed Content-Length\n");
        } else if (same_token(f[i].name, f[i].name_n, "transfer-encoding")) {
            te = &f[i];
        }
    }
    if (hosts > 1) return head_fail(out, "more than one Host header field\n");
    if (hosts == 0 && !http10) return head_fail(out, "no Host header field in an HTTP/1.1 request\n");
    if (differ) return head_fail(out, "Content-Length values that differ\n");
    if (te) {
        if (have_len) return head_fail(out, "both Transfer-Encoding and Content-Length\n");
        if (http10) return head_fail(out, "Transfer-Encoding in an HTTP/1.0 request\n");
        /* the last coding (of the last field) must be chunked, else the content has no end */
        const char *v = te->value, *last = v;
        for (size_t k = 0; k < te->value_n; k++)
            if (v[k] == ',') last = v + k + 1;
        size_t ln = (size_t)(v + te->value_n - last);
        const char *semi = memchr(last, ';', ln);
        if (semi) ln = (size_t)(semi - last);
        trim(&last, &ln);
        if (!same_token(last, ln, "chunked")) return head_fail(out, "Transfer-Encoding that does not end in chunked\n");
    }
    out->content = te || (have_len && len > 0);
    return true;
}

bool serve_request_stray(const char *head, size_t n, const serve_field *f, size_t nf) {
    const uintptr_t lo = (uintptr_t)head, hi = lo + n;
    uintptr_t at = lo; /* bytes before it are checked */
    for (size_t i = 0; i < nf; i++) {
        const uintptr_t a = (uintptr_t)f[i].name, b = (uintptr_t)f[i].value + f[i].value_n;
        if (a < lo || a >= hi || b > hi || b < a) continue; /* not in the head: a field moved or added */
        if (a < at) return true;                            /* out of order, or overlapping */
        for (; at < a; at++)
            if (head[at - lo]) return true;
        at = b;
    }
    for (; at < hi; at++)
        if (head[at - lo]) return true;
    return false;
}
