/* terra serve's request path (cli/serve_request.c): the target grammar byte by byte, NUL and %00,
 * the query parameter cap, methods, Accept-Encoding q-values; layer.json's available ranges cover
 * exactly the archive's tiles (random sets, empty zooms, duplicates in the index); the tile bytes
 * serve sends are the bytes its check read, once.
 *
 * `test_serve_request --archives DIR` writes the hostile archives tests/cli_serve.sh serves and
 * exports (valid checksums, hostile contents):
 *   bomb.terra     level 0 tiles (0,0) honest, (1,0) gzip of 24 MiB stated as such, (0,1) the same
 *                  gzip stated as 1000 bytes (a liar), (1,1) 200 bytes that are no tile (stored plainly)
 *   dup.terra      two index entries for tile 0/0/0 (the second's key patched, checksum recomputed)
 *   outside.terra  a tile left of the coarsest level's tiles: no place in the z/x/y tree */
#include "check.h"
#include "serve_request.h"
#include "terra/archive_io.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

static serve_request target(const char *s) {
    serve_request r;
    serve_request_target(s, strlen(s), 16, &r);
    return r;
}

static void test_routes(void) {
    serve_request r = target("/layer.json");
    CHECK(r.route == SERVE_ROUTE_LAYER_JSON && r.status == 200);
    r = target("/layer.json?v=1.0.0");
    CHECK(r.route == SERVE_ROUTE_LAYER_JSON && r.query_params == 1);
    r = target("/3/12/7.terrain?v=1.0.0&extensions=octvertexnormals-watermask");
    CHECK(r.route == SERVE_ROUTE_TILE && r.z == 3 && r.x == 12 && r.y == 7 && r.query_params == 2);
    r = target("/31/9999999999/0.terrain");
    CHECK(r.route == SERVE_ROUTE_TILE && r.z == 31 && r.x == 9999999999ll && r.y == 0);
    r = target("/0/0/0.terrain?");
    CHECK(r.route == SERVE_ROUTE_TILE && r.query_params == 0);
    /* well-formed paths that are not ours: 404 */
    const char *absent[] = {"/", "/favicon.ico", "/layer.json/", "/LAYER.JSON", "/a/b", "/0/0/0.terrainx"};
    for (size_t i = 0; i < sizeof absent / sizeof *absent; i++) {
        r = target(absent[i]);
        CHECK(r.route == SERVE_ROUTE_ERROR && r.status == 404 && r.message, "%s: %u", absent[i], r.status);
    }
    /* malformed tile paths: 400 */
    const char *bad[] = {"/x/0/0.terrain",   "/0/0.terrain",     "/0/0/0/0.terrain", "/32/0/0.terrain",
                         "/0//0.terrain",     "/0/0/.terrain",    "//0/0/0.terrain",  "/0/0/12345678901.terrain",
                         "/0/-1/0.terrain",   "0/0/0.terrain",    "",                 "*",
                         "http://a/0/0/0.terrain", "/.terrain"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        r = target(bad[i]);
        CHECK(r.route == SERVE_ROUTE_ERROR && r.status == 400 && r.message, "'%s': %u", bad[i], r.status);
    }
    serve_request_target(NULL, 5, 16, &r);
    CHECK(r.route == SERVE_ROUTE_ERROR && r.status == 400);
}

/* Every byte outside [A-Za-z0-9._~-/] anywhere in the path is 400, never a tile. */
static void test_path_bytes(void) {
    for (int c = 0; c < 256; c++) {
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                  c == '_' || c == '~' || c == '-' || c == '/' || c == '?';
        char t[32] = "/0/0/0.terrain";
        size_t n = strlen(t);
        for (size_t at = 1; at <= n; at++) {
            char u[40];
            memcpy(u, t, at);
            u[at] = (char)c;
            memcpy(u + at + 1, t + at, n - at);
            serve_request r;
            serve_request_target(u, n + 1, 16, &r);
            if (!ok) CHECK(r.route == SERVE_ROUTE_ERROR && r.status == 400, "byte %d at %zu: %u", c, at, r.status);
        }
    }
    /* the NUL the old server cut the path at, raw and escaped */
    serve_request r;
    serve_request_target("/0/0/0.terrain\0junk", 19, 16, &r);
    CHECK(r.status == 400);
    serve_request_target("/0/0/0.terrain\0", 15, 16, &r);
    CHECK(r.status == 400);
    r = target("/0/0/0.terrain%00");
    CHECK(r.status == 400);
    r = target("/0/0/0%2eterrain");
    CHECK(r.status == 400, "escapes in the path are refused: %u", r.status);
}

static void test_query(void) {
    serve_request r = target("/0/0/0.terrain?a=%00");
    CHECK(r.status == 400);
    r = target("/0/0/0.terrain?a=%2F&b=%e2%82%ac");
    CHECK(r.route == SERVE_ROUTE_TILE && r.query_params == 2);
    const char *bad[] = {"/0/0/0.terrain?a=%", "/0/0/0.terrain?a=%4", "/0/0/0.terrain?a=%zz", "/0/0/0.terrain?a b",
                         "/0/0/0.terrain?a=#x", "/0/0/0.terrain?a=\x7f", "/0/0/0.terrain?\xc3\xa9"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        r = target(bad[i]);
        CHECK(r.route == SERVE_ROUTE_ERROR && r.status == 400, "'%s': %u", bad[i], r.status);
    }
    serve_request_target("/0/0/0.terrain?a=\0", 18, 16, &r);
    CHECK(r.status == 400);
    /* the cap: 16 parameters pass, 17 are 414, and 500 stop counting one past the limit */
    char q[8192] = "/0/0/0.terrain?";
    for (int i = 0; i < 500; i++) snprintf(q + strlen(q), sizeof q - strlen(q), "%sa%d=1", i ? "&" : "", i);
    char *amp = q;
    for (int i = 0; i < 16; i++) amp = strchr(amp + 1, '&');
    serve_request_target(q, (size_t)(amp - q), 16, &r);
    CHECK(r.route == SERVE_ROUTE_TILE && r.query_params == 16, "%zu", r.query_params);
    amp = strchr(amp + 1, '&');
    serve_request_target(q, (size_t)(amp - q), 16, &r);
    CHECK(r.status == 414 && r.query_params == 17, "%u %zu", r.status, r.query_params);
    r = target(q);
    CHECK(r.status == 414 && r.query_params == 17);
    serve_request_target(q, strlen(q), 1000, &r);
    CHECK(r.route == SERVE_ROUTE_TILE && r.query_params == 500);
    serve_request_target("/0/0/0.terrain?a", 16, 0, &r);
    CHECK(r.status == 414);
    /* a 404 path with too many parameters is still 414 */
    serve_request_target("/nothing?a&b", 12, 1, &r);
    CHECK(r.status == 414);
}

static void test_methods(void) {
    serve_request r = target("/0/0/0.terrain");
    serve_request_method("HEAD", &r);
    CHECK(r.route == SERVE_ROUTE_TILE);
    r = target("/layer.json");
    serve_request_method("OPTIONS", &r);
    CHECK(r.route == SERVE_ROUTE_OPTIONS && r.status == 204);
    r = target("/elsewhere");
    serve_request_method("OPTIONS", &r);
    CHECK(r.route == SERVE_ROUTE_OPTIONS, "a preflight of any well-formed path");
    const char *refused[] = {"POST", "PUT", "DELETE", "get", "", "GET ", "BREW"};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        r = target("/0/0/0.terrain");
        serve_request_method(refused[i], &r);
        CHECK(r.route == SERVE_ROUTE_ERROR && r.status == 405, "'%s'", refused[i]);
    }
    r = target("/0/0/0.terrain");
    serve_request_method(NULL, &r);
    CHECK(r.status == 405);
    r = target("/0/0/0.terrain%00");
    serve_request_method("POST", &r);
    CHECK(r.status == 400, "a malformed target stays 400 whatever the method");
}

static bool gz(const char *s) { return serve_accepts_gzip(s, s ? strlen(s) : 0); }

static void test_accept_encoding(void) {
    const char *yes[] = {"gzip", "GZIP", "gzip, deflate, br", "deflate, gzip;q=0.5", "x-gzip", " gzip ;q=1",
                         "gzip;q=1.000", "gzip;Q=0.001", "*", "br, *;q=0.1", "gzip;q=0.5;level=1",
                         "gzip;q=0, gzip;q=0.2", "identity;q=0, gzip", "gzip\t;\tq=0.9"};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) CHECK(gz(yes[i]), "'%s' accepts gzip", yes[i]);
    const char *no[] = {NULL,       "",           "identity",  "deflate, br", "gzip;q=0",     "gzip;q=0.0",
                        "gzip;q=0.000", "GZIP; Q=0", "*;q=0",     "gzip;q=0, *",  "gzip;q=2",     "gzip;q=1.5",
                        "gzip;q=0.0001", "gzip;q=abc", "gzip;q=",  "gzipx",        "gzi",          "*, gzip;q=0",
                        "x-gzip;q=0", "br;q=0.5, deflate", ",,,;;;"};
    for (size_t i = 0; i < sizeof no / sizeof *no; i++)
        CHECK(!gz(no[i]), "'%s' does not accept gzip", no[i] ? no[i] : "(none)");
    /* the length is honoured: no reading past n */
    CHECK(!serve_accepts_gzip("gzip", 3));
    CHECK(serve_accepts_gzip("gzip;q=0", 4));
}

/* Range headers on /archive.terra: one range is a part, cut to the file; past the end is 416;
 * anything else is answered whole. Property: over random headers and sizes, a part always lies
 * inside the file. */
static serve_range rng(const char *h, uint64_t size, uint64_t *a, uint64_t *b) {
    return serve_request_range(h, h ? strlen(h) : 0, size, a, b);
}

static void test_ranges(void) {
    serve_request r;
    CHECK(serve_request_target("/archive.terra", 14, 16, &r) && r.route == SERVE_ROUTE_ARCHIVE);
    CHECK(!serve_request_target("/archive.terrain", 16, 16, &r) && r.status == 400, "not a tile path either");
    uint64_t a = 7, b = 7;
    CHECK(rng("bytes=0-99", 1000, &a, &b) == SERVE_RANGE_PART && a == 0 && b == 99);
    CHECK(rng("bytes=100-", 1000, &a, &b) == SERVE_RANGE_PART && a == 100 && b == 999);
    CHECK(rng("bytes=990-5000", 1000, &a, &b) == SERVE_RANGE_PART && a == 990 && b == 999, "cut to the end");
    CHECK(rng("bytes=-64", 1000, &a, &b) == SERVE_RANGE_PART && a == 936 && b == 999);
    CHECK(rng("bytes=-5000", 1000, &a, &b) == SERVE_RANGE_PART && a == 0 && b == 999, "a suffix longer than the file");
    CHECK(rng(" bytes=5-5 ", 1000, &a, &b) == SERVE_RANGE_PART && a == 5 && b == 5);
    CHECK(rng("bytes=1000-", 1000, &a, &b) == SERVE_RANGE_UNSATISFIABLE);
    CHECK(rng("bytes=-0", 1000, &a, &b) == SERVE_RANGE_UNSATISFIABLE);
    CHECK(rng("bytes=0-", 0, &a, &b) == SERVE_RANGE_UNSATISFIABLE, "an empty file has no bytes to give");
    const char *whole[] = {NULL, "", "bytes=", "bytes=-", "bytes=5-4", "items=0-9", "bytes=0-9,20-29", "bytes=a-9",
                           "bytes=0-9x", "bytes=99999999999999999999-", "Bytes=0-9"};
    for (size_t i = 0; i < sizeof whole / sizeof *whole; i++)
        CHECK(rng(whole[i], 1000, &a, &b) == SERVE_RANGE_WHOLE, "'%s' is answered whole", whole[i] ? whole[i] : "(none)");
    CHECK(serve_request_range("bytes=0-99", 9, 1000, &a, &b) == SERVE_RANGE_PART && b == 9, "the length is honoured");
    uint64_t seed = 12345;
    for (int i = 0; i < 20000; i++) {
        char h[64];
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        const uint64_t size = (seed >> 40) % 5000, x = (seed >> 20) % 6000, y = (seed >> 8) % 6000;
        switch (i % 3) {
        case 0: snprintf(h, sizeof h, "bytes=%llu-%llu", (unsigned long long)x, (unsigned long long)y); break;
        case 1: snprintf(h, sizeof h, "bytes=%llu-", (unsigned long long)x); break;
        default: snprintf(h, sizeof h, "bytes=-%llu", (unsigned long long)y); break;
        }
        const serve_range k = rng(h, size, &a, &b);
        if (k == SERVE_RANGE_PART) CHECK(a <= b && b < size, "'%s' of %llu bytes gave %llu-%llu", h, (unsigned long long)size,
                                         (unsigned long long)a, (unsigned long long)b);
        if (k == SERVE_RANGE_UNSATISFIABLE) CHECK(i % 3 == 2 ? y == 0 || size == 0 : x >= size, "'%s' of %llu refused", h,
                                                  (unsigned long long)size);
    }
}

/* ---- If-Range, header fields --------------------------------------------------------------- */

static bool if_range(const char *v, const char *etag) { return serve_if_range(v, v ? strlen(v) : 0, etag); }

/* RFC 9110 13.1.5: only the strong tag itself lets a Range through; anything else is 200 whole. */
static void test_if_range(void) {
    const char *tag = "\"1f-7e9c-65a1b2c3.000000123\"";
    CHECK(if_range(NULL, tag) && if_range(NULL, NULL), "no If-Range: the Range stands");
    CHECK(if_range(tag, tag) && if_range(" \"1f-7e9c-65a1b2c3.000000123\"\t", tag), "the same tag");
    const char *other[] = {"",
                           "\"1f-7e9c-65a1b2c3.000000124\"",
                           "W/\"1f-7e9c-65a1b2c3.000000123\"",
                           "1f-7e9c-65a1b2c3.000000123",
                           "\"1f-7e9c-65a1b2c3.000000123",
                           "\"1f-7e9c-65a1b2c3.000000123\", \"x\"",
                           "Mon, 01 Jan 2001 00:00:00 GMT",
                           "Sun, 06 Nov 1994 08:49:37 GMT",
                           "\"\""};
    for (size_t i = 0; i < sizeof other / sizeof *other; i++) {
        CHECK(!if_range(other[i], tag), "'%s' must not match", other[i]);
        CHECK(!if_range(other[i], NULL), "'%s' with no tag to match", other[i]);
    }
    CHECK(!serve_if_range(tag, strlen(tag) - 1, tag), "the length is honoured");
    /* property: a random value matches exactly when, trimmed, it is the tag */
    uint64_t seed = 99;
    const char alphabet[] = "\"W/ \t1f-7e9c.0,";
    for (int i = 0; i < 50000; i++) {
        char v[40];
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        size_t n = (size_t)(seed >> 59);
        for (size_t k = 0; k < n; k++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            v[k] = alphabet[(seed >> 33) % (sizeof alphabet - 1)];
        }
        const char *t = "\"1f-7e9c\"";
        size_t a = 0, b = n;
        while (a < b && (v[a] == ' ' || v[a] == '\t')) a++;
        while (b > a && (v[b - 1] == ' ' || v[b - 1] == '\t')) b--;
        bool same = b - a == strlen(t) && !memcmp(v + a, t, b - a);
        CHECK(serve_if_range(v, n, t) == same, "'%.*s'", (int)n, v);
    }
}

/* Splits "Name: value\n..." into fields as a parser would report them (value after the colon's
 * white space). A line without ':' is all name. */
static size_t fields_of(const char *text, serve_field *f, size_t max) {
    size_t n = 0;
    for (const char *p = text; *p && n < max;) {
        const char *nl = strchr(p, '\n');
        if (!nl) nl = p + strlen(p);
        const char *colon = memchr(p, ':', (size_t)(nl - p));
        f[n].name = p;
        f[n].name_n = (size_t)((colon ? colon : nl) - p);
        const char *v = colon ? colon + 1 : nl;
        while (v < nl && (*v == ' ' || *v == '\t')) v++;
        f[n].value = v;
        f[n].value_n = (size_t)(nl - v);
        n++;
        p = *nl ? nl + 1 : nl;
    }
    return n;
}

/* the verdict on a head: 0 (acceptable, no content), 1 (acceptable, with content), or the status */
static unsigned head(const char *text, bool http10) {
    serve_field f[16];
    size_t n = fields_of(text, f, 16);
    serve_head h;
    bool ok = serve_request_head(f, n, http10, &h);
    CHECK(ok == (h.status == 0) && ok == (h.message == NULL), "'%s': status %u", text, h.status);
    CHECK(ok || !h.content, "'%s': a refused head says nothing of content", text);
    return ok ? (h.content ? 1u : 0u) : h.status;
}

static void test_head(void) {
    struct {
        const char *text;
        bool http10;
        unsigned verdict;
    } cases[] = {
        {"Host: a", false, 0},
        {"Host: tiles.example:8080\nAccept: */*\nAccept-Encoding: gzip", false, 0},
        {"Host: [::1]:8080", false, 0},
        {"Host: ", false, 0},  /* empty: allowed (RFC 9112 3.2) */
        {"Accept: */*", true, 0}, /* HTTP/1.0 needs no Host */
        {"", true, 0},
        {"", false, 400},                      /* HTTP/1.1 without Host */
        {"Accept: */*", false, 400},
        {"Host: a\nHost: a", false, 400},      /* two, even equal */
        {"Host: a\nHost: b", true, 400},
        {"Host: a b", false, 400},
        {"Host: a/b", false, 400},
        {"Host: user@a", false, 400},
        {"Host: a\nContent-Length: 0", false, 0},
        {"Host: a\nContent-Length: 0\nContent-Length: 0", false, 0},
        {"Host: a\nContent-Length: 5", false, 1},
        {"Host: a\nContent-Length: 007", false, 1},
        {"Host: a\nContent-Length: 5, 5", false, 1},
        {"Host: a\nContent-Length: 5\ncontent-length: 05", false, 1},
        {"Host: a\nContent-Length: 0\nContent-Length: 5", false, 400},
        {"Host: a\nContent-Length: 5,6", false, 400},
        {"Host: a\nContent-Length: abc", false, 400},
        {"Host: a\nContent-Length: -1", false, 400},
        {"Host: a\nContent-Length: +5", false, 400},
        {"Host: a\nContent-Length: 0x5", false, 400},
        {"Host: a\nContent-Length: 1 2", false, 400},
        {"Host: a\nContent-Length: ", false, 400},
        {"Host: a\nContent-Length: 5,", false, 400},
        {"Host: a\nContent-Length: 99999999999999999999999", false, 400},
        {"Host: a\nTransfer-Encoding: chunked", false, 1},
        {"Host: a\nTransfer-Encoding: gzip, CHUNKED", false, 1},
        {"Host: a\nTransfer-Encoding: gzip\nTransfer-Encoding: chunked", false, 1},
        {"Host: a\nTransfer-Encoding: gzip", false, 400},
        {"Host: a\nTransfer-Encoding: chunked, gzip", false, 400},
        {"Host: a\nTransfer-Encoding: chunked\nContent-Length: 5", false, 400},
        {"Host: a\nContent-Length: 0\nTransfer-Encoding: chunked", false, 400},
        {"Transfer-Encoding: chunked", true, 400},
        {"Host: a\nX-A : b", false, 400},      /* white space before the colon */
        {" Host: a", false, 400},              /* a first line that starts with white space */
        {"Host: a\n\tX-A: b", false, 400},
        {"Host: a\n: b", false, 400},          /* no name */
        {"Host: a\nX(A): b", false, 400},
        {"Host: a\nX-A: b\tc \xff", false, 0}, /* tab and obs-text are allowed in values */
        {"Host: a\nX-A: b\rc", false, 400},
        {"Host: a\nX-A: b\x7f", false, 400},
        {"Host: a\nX-A: b\x01", false, 400},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        unsigned v = head(cases[i].text, cases[i].http10);
        CHECK(v == cases[i].verdict, "'%s' (HTTP/1.%d): %u, expected %u", cases[i].text, cases[i].http10 ? 0 : 1, v,
              cases[i].verdict);
    }
    serve_field nul = {.name = "X-A", .name_n = 3, .value = "b\0c", .value_n = 3};
    serve_field host = {.name = "Host", .name_n = 4, .value = "a", .value_n = 1};
    serve_field both[2] = {host, nul};
    serve_head h;
    CHECK(!serve_request_head(both, 2, false, &h) && h.status == 400, "a NUL in a value");

    /* property: random heads from a small vocabulary against a model of RFC 9110/9112's rules */
    static const char *names[] = {"Host", "HOST", "Content-Length", "content-length", "Transfer-Encoding", "X-A", "X A"};
    static const char *values[] = {"a", "a b", "0", "5", "05", "5, 5", "5,6", "x", "", "chunked", "gzip", "gzip, chunked",
                                   "chunked, gzip", "a\rb"};
    uint64_t seed = 7;
    for (int it = 0; it < 100000; it++) {
        serve_field f[6];
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        const size_t n = (size_t)(seed >> 61); /* 0..7, at most 6 used */
        const bool http10 = (seed >> 40) & 1;
        size_t hosts = 0, tes = 0;
        bool bad = false, te_chunked = false, have_len = false, differ = false, content = false;
        long len = -1;
        for (size_t k = 0; k < n && k < 6; k++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            const char *nm = names[(seed >> 33) % 7], *v = values[(seed >> 13) % 14];
            f[k] = (serve_field){.name = nm, .name_n = strlen(nm), .value = v, .value_n = strlen(v)};
            if (!strcmp(nm, "X A") || strchr(v, '\r')) bad = true;
            if (!strcasecmp(nm, "Host")) {
                hosts++;
                if (strchr(v, ' ')) bad = true;
            } else if (!strcasecmp(nm, "Content-Length")) {
                /* the numbers each value lists: 0, 5 (5, 05, "5, 5"), or 5 and 6; others are malformed */
                long a = !strcmp(v, "0") ? 0 : (!strcmp(v, "5") || !strcmp(v, "05") || !strcmp(v, "5, 5") || !strcmp(v, "5,6")) ? 5 : -1;
                if (a < 0) bad = true;
                if (!strcmp(v, "5,6")) differ = true;
                if (a >= 0 && have_len && a != len) differ = true;
                if (a >= 0) len = a, have_len = true;
            } else if (!strcmp(nm, "Transfer-Encoding")) {
                tes++;
                te_chunked = !strcmp(v, "chunked") || !strcmp(v, "gzip, chunked");
            }
        }
        const size_t used = n < 6 ? n : 6;
        bool ok = !bad && hosts <= 1 && (hosts == 1 || http10) && !differ &&
                  (tes == 0 || (!have_len && !http10 && te_chunked));
        content = tes > 0 || (have_len && len > 0);
        serve_head got;
        bool r = serve_request_head(f, used, http10, &got);
        CHECK(r == ok && (!ok || got.content == content), "case %d: %zu fields, HTTP/1.%d: %d (%s), expected %d", it, used,
              http10 ? 0 : 1, r, got.message ? got.message : "", ok);
    }
}

/* A request head as libmicrohttpd 0.9 leaves it: line ends and each field's colon overwritten
 * with NUL, the fields pointing into it. */
static void test_stray(void) {
    char h1[] = "Host\0 a\0\0X-A\0 b\0\0\0"; /* ends with the empty line's CR LF */
    serve_field f[3] = {{.name = h1, .name_n = 4, .value = h1 + 6, .value_n = 1},
                        {.name = h1 + 9, .name_n = 3, .value = h1 + 14, .value_n = 1}};
    const size_t n1 = sizeof h1 - 1;
    CHECK(!serve_request_stray(h1, n1, f, 2), "every byte is a field's or a NUL");
    CHECK(serve_request_stray(h1, n1, f, 1), "a line no field covers");
    f[2] = (serve_field){.name = "Content-Length", .name_n = 14, .value = "0", .value_n = 1};
    CHECK(!serve_request_stray(h1, n1, f, 3), "a field outside the head is skipped");
    serve_field swapped[2] = {f[1], f[0]};
    CHECK(serve_request_stray(h1, n1, swapped, 2), "fields out of order");
    /* obs-fold: the parser moved "X-A: b" elsewhere (zeroing its line) and joined " c" to it */
    char moved[] = "X-A\0 bc";
    char h2[] = "Host\0 a\0\0\0\0\0\0\0\0\0\0 c\0\0\0";
    serve_field g[2] = {{.name = h2, .name_n = 4, .value = h2 + 6, .value_n = 1},
                        {.name = moved, .name_n = 3, .value = moved + 5, .value_n = 2}};
    CHECK(serve_request_stray(h2, sizeof h2 - 1, g, 2), "the folded line stays behind");
    CHECK(!serve_request_stray(h2, 12, g, 2), "the head's length is honoured");

    /* property: random heads and sorted spans against a byte-by-byte model */
    uint64_t seed = 3;
    for (int it = 0; it < 20000; it++) {
        char buf[64];
        serve_field s[8];
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        const size_t n = 1 + (size_t)(seed >> 58);
        size_t ns = 0, at = 0;
        bool covered[64] = {false};
        while (ns < 8 && at < n) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            size_t a = at + (size_t)((seed >> 33) % 4), name_n = (size_t)((seed >> 40) % 4), gap = (size_t)((seed >> 45) % 3),
                   value_n = (size_t)((seed >> 50) % 5);
            if (a + name_n + gap + value_n > n) break;
            s[ns++] = (serve_field){.name = buf + a, .name_n = name_n, .value = buf + a + name_n + gap, .value_n = value_n};
            for (size_t i = a; i < a + name_n + gap + value_n; i++) covered[i] = true;
            at = a + name_n + gap + value_n;
        }
        /* fields' bytes are anything; the others NUL, now and then not */
        for (size_t i = 0; i < n; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            buf[i] = (char)(covered[i] ? (seed >> 56) : (seed >> 58) == 0 ? 'a' + (seed >> 40) % 26 : 0);
        }
        bool stray = false;
        for (size_t i = 0; i < n; i++) stray |= buf[i] && !covered[i];
        CHECK(serve_request_stray(buf, n, s, ns) == stray, "case %d", it);
    }
}

/* ---- layer.json ---------------------------------------------------------------------------- */

static char dir[256];

static void path_in(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", dir, name); }

static terra_status write_archive(const char *path, terra_frame frame, const terra_tile_key *keys, int n) {
    terra_archive_write_desc wd = {0};
    wd.frame = frame;
    terra_archive_writer *w;
    terra_status st = terra_archive_writer_create(path, &wd, &w);
    if (st) return st;
    for (int i = 0; i < n && st == TERRA_OK; i++) {
        terra_archive_tile_info info = {0};
        st = terra_archive_writer_add_stored(w, keys[i], &keys[i], sizeof keys[i], sizeof keys[i], TERRA_COMPRESS_NONE,
                                             &info);
    }
    if (st) {
        terra_archive_writer_abort(w);
        return st;
    }
    return terra_archive_writer_finish(w);
}

/* Every tile of the archive in the tree lies in exactly one rectangle of its zoom, and every cell of
 * every rectangle is a tile. */
static void check_available(const char *path, const char *what) {
    terra_archive *a;
    if (terra_archive_open(path, NULL, &a) != TERRA_OK) {
        CHECK(0, "%s: %s", what, terra_last_error());
        return;
    }
    terra_tms_map m;
    char *json = NULL;
    CHECK(terra_archive_tms_map(a, &m) == TERRA_OK && terra_archive_layer_json(a, &m, &json) == TERRA_OK, "%s: %s",
          what, terra_last_error());
    cJSON *root = json ? cJSON_Parse(json) : NULL;
    const cJSON *av = cJSON_GetObjectItem(root, "available");
    int zmax = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(root, "maxzoom"));
    CHECK(cJSON_IsArray(av) && cJSON_GetArraySize(av) == zmax + 1, "%s: available", what);
    /* count, for every tile, the rectangles holding it */
    const terra_archive_info *I = terra_archive_get_info(a);
    long long cells = 0, tiles = 0;
    for (uint64_t i = 0; i < I->tile_count; i++) {
        terra_archive_entry e;
        int z;
        int64_t x, y;
        if (terra_archive_entry_at(a, i, &e) != TERRA_OK || !terra_tms_from_key(&m, e.key, &z, &x, &y) || z > zmax)
            continue;
        if (i > 0) { /* a duplicated entry is one tile */
            terra_archive_entry p;
            if (terra_archive_entry_at(a, i - 1, &p) == TERRA_OK && p.key == e.key) continue;
        }
        tiles++;
        int holders = 0;
        const cJSON *r;
        cJSON_ArrayForEach(r, cJSON_GetArrayItem(av, z)) {
            double x0 = cJSON_GetNumberValue(cJSON_GetObjectItem(r, "startX"));
            double x1 = cJSON_GetNumberValue(cJSON_GetObjectItem(r, "endX"));
            double y0 = cJSON_GetNumberValue(cJSON_GetObjectItem(r, "startY"));
            double y1 = cJSON_GetNumberValue(cJSON_GetObjectItem(r, "endY"));
            holders += x >= x0 && x <= x1 && y >= y0 && y <= y1;
        }
        CHECK(holders == 1, "%s: tile %d/%lld/%lld in %d rectangles", what, z, (long long)x, (long long)y, holders);
    }
    const cJSON *level;
    cJSON_ArrayForEach(level, av) {
        const cJSON *r;
        cJSON_ArrayForEach(r, level) {
            cells += (long long)(cJSON_GetNumberValue(cJSON_GetObjectItem(r, "endX")) -
                                 cJSON_GetNumberValue(cJSON_GetObjectItem(r, "startX")) + 1) *
                     (long long)(cJSON_GetNumberValue(cJSON_GetObjectItem(r, "endY")) -
                                 cJSON_GetNumberValue(cJSON_GetObjectItem(r, "startY")) + 1);
        }
    }
    CHECK(cells == tiles, "%s: rectangles cover %lld cells for %lld tiles", what, cells, tiles);
    cJSON_Delete(root);
    terra_free(json);
    terra_archive_close(a);
}

static void test_layer_json_ranges(void) {
    char path[512];
    path_in(path, sizeof path, "ranges.terra");
    unsigned long long seed = 12;
    enum { N = 1500 };
    static terra_tile_key keys[N];
    for (int round = 0; round < 40; round++) {
        terra_frame frame = round % 3 == 0 ? TERRA_FRAME_GEOGRAPHIC : TERRA_FRAME_LOCAL;
        int levels = 1 + (int)(test_rand_u64(&seed) % 4), span = 2 + (int)(test_rand_u64(&seed) % 40);
        int n = 1 + (int)(test_rand_u64(&seed) % N), got = 0;
        for (int i = 0; i < n; i++) {
            int l = (int)(test_rand_u64(&seed) % (unsigned)levels);
            if (frame == TERRA_FRAME_GEOGRAPHIC && l == 1 && round % 2) l = 2; /* an empty zoom in the middle */
            int s = span >> (frame == TERRA_FRAME_LOCAL ? l : 0);
            if (s < 1) s = 1;
            /* rows of runs, scattered tiles, and a few left of the coarsest tiles in local archives */
            int x = (int)(test_rand_u64(&seed) % (unsigned)s) - (frame == TERRA_FRAME_LOCAL && round % 4 == 1 ? 1 : 0);
            int y = round % 2 ? (int)(test_rand_u64(&seed) % 3) : (int)(test_rand_u64(&seed) % (unsigned)s);
            terra_tile_key k = terra_tile_key_make(0, l, x, y);
            bool dup = false;
            for (int j = 0; j < got && !dup; j++) dup = keys[j] == k;
            if (!dup) keys[got++] = k;
        }
        char what[64];
        snprintf(what, sizeof what, "round %d (%d tiles)", round, got);
        CHECK(write_archive(path, frame, keys, got) == TERRA_OK, "%s", terra_last_error());
        check_available(path, what);
    }
    /* a checkerboard: every tile its own rectangle */
    int got = 0;
    for (int y = 0; y < 30; y++)
        for (int x = y % 2; x < 40; x += 2) keys[got++] = terra_tile_key_make(0, 0, x, y);
    CHECK(write_archive(path, TERRA_FRAME_LOCAL, keys, got) == TERRA_OK);
    check_available(path, "checkerboard");
    unlink(path);
}

/* The z/x/y map's corner (the coarsest level's smallest x and y, found by searching the Morton
 * order) is the one a scan of every entry finds, whatever the spread of tiles. */
static void test_tms_map_corner(void) {
    char path[512];
    path_in(path, sizeof path, "corner.terra");
    unsigned long long seed = 77;
    enum { N = 3000 };
    static terra_tile_key keys[N];
    for (int round = 0; round < 60; round++) {
        int got = 0, n = 1 + (int)(test_rand_u64(&seed) % N), top = (int)(test_rand_u64(&seed) % 3);
        int shape = round % 5;
        int64_t span = (int64_t)1 << (1 + test_rand_u64(&seed) % 26);
        int64_t off = (int64_t)(test_rand_u64(&seed) % (uint64_t)(2 * span)) - span;
        for (int i = 0; i < n; i++) {
            int l = i % 4 ? top : (int)(test_rand_u64(&seed) % (unsigned)(top + 1));
            int64_t x, y;
            uint64_t r = test_rand_u64(&seed);
            if (shape == 0) { /* a dense block */
                x = off + (int64_t)(r % 40);
                y = -off + (int64_t)((r >> 20) % 40);
            } else if (shape == 1) { /* a diagonal */
                x = off + (int64_t)(r % 1000);
                y = x - 2 * off + (int64_t)((r >> 30) % 3);
            } else if (shape == 2) { /* scattered across the whole coordinate range */
                x = (int64_t)(r % (1u << 28)) - (1 << 27);
                y = (int64_t)((r >> 28) % (1u << 28)) - (1 << 27);
            } else { /* scattered in a span around an offset */
                x = off + (int64_t)(r % (uint64_t)span);
                y = off / 2 + (int64_t)((r >> 32) % (uint64_t)span);
            }
            if (x < TERRA_TILE_COORD_MIN || x > TERRA_TILE_COORD_MAX || y < TERRA_TILE_COORD_MIN ||
                y > TERRA_TILE_COORD_MAX)
                continue;
            terra_tile_key k = terra_tile_key_make(0, l, (int32_t)x, (int32_t)y);
            bool dup = false;
            for (int j = 0; j < got && !dup; j++) dup = keys[j] == k;
            if (!dup) keys[got++] = k;
        }
        if (!got) continue;
        int max_level = 0;
        for (int i = 0; i < got; i++)
            if (terra_tile_key_level(keys[i]) > max_level) max_level = terra_tile_key_level(keys[i]);
        int32_t x0 = INT32_MAX, y0 = INT32_MAX;
        for (int i = 0; i < got; i++)
            if (terra_tile_key_level(keys[i]) == max_level) {
                if (terra_tile_key_x(keys[i]) < x0) x0 = terra_tile_key_x(keys[i]);
                if (terra_tile_key_y(keys[i]) < y0) y0 = terra_tile_key_y(keys[i]);
            }
        CHECK(write_archive(path, TERRA_FRAME_LOCAL, keys, got) == TERRA_OK, "%s", terra_last_error());
        terra_archive *a;
        terra_tms_map m;
        if (terra_archive_open(path, NULL, &a) != TERRA_OK) {
            CHECK(0, "%s", terra_last_error());
            continue;
        }
        CHECK(terra_archive_tms_map(a, &m) == TERRA_OK);
        CHECK(m.max_level == max_level && m.x0 == x0 && m.y0 == y0, "round %d shape %d (%d tiles): map %d (%d, %d), scan %d (%d, %d)",
              round, shape, got, m.max_level, m.x0, m.y0, max_level, x0, y0);
        terra_archive_close(a);
    }
    unlink(path);
}

/* ---- hostile archives for tests/cli_serve.sh ------------------------------------------------ */

/* Four level-0 tiles of a TIN archive every reader opens (terra_archive_validate: sound metadata, a
 * coarsest tile that decodes): a flat square, then two bombs and a tile that does not decode, which
 * serve must refuse as it is asked for them. */
static terra_status write_bomb(const char *path) {
    terra_archive_write_desc wd = {.frame = TERRA_FRAME_LOCAL, .compression = TERRA_COMPRESS_GZIP, .tin = true,
                                   .tile_size_m = 64, .bounds = {0, 0, 128, 128}};
    terra_archive_writer *w;
    terra_status st = terra_archive_writer_create(path, &wd, &w);
    if (st) return st;
    const size_t big = (size_t)24 << 20; /* over serve's default cap, within the format's */
    uint8_t *zeros = terra_calloc(big, 1), *packed = NULL;
    size_t pn = 0;
    st = zeros ? terra_compress(TERRA_COMPRESS_GZIP, 9, zeros, big, &packed, &pn) : TERRA_E_NOMEM;
    terra_archive_tile_info info = {0};
    uint16_t u[4] = {0, 32767, 0, 32767}, v[4] = {0, 0, 32767, 32767}, h[4] = {0};
    uint32_t idx[6] = {0, 1, 2, 2, 1, 3}, west[2] = {0, 2}, south[2] = {0, 1}, east[2] = {1, 3}, north[2] = {2, 3};
    terra_qmesh q = {.vertex_count = 4, .triangle_count = 2, .u = u, .v = v, .h = h, .indices = idx,
                     .edge_count = {2, 2, 2, 2}, .edges = {west, south, east, north}};
    const double xyz[12] = {0, 0, 0, 64, 0, 0, 0, 0, 64, 64, 0, 64};
    terra_qmesh_header_local(&q.header, xyz, 4, 0, 0);
    uint8_t honest[256];
    size_t hn = 0;
    if (st == TERRA_OK) st = terra_qmesh_encode(&q, honest, sizeof honest, &hn);
    if (st == TERRA_OK) st = terra_archive_writer_add(w, terra_tile_key_make(0, 0, 0, 0), honest, hn, &info);
    if (st == TERRA_OK)
        st = terra_archive_writer_add_stored(w, terra_tile_key_make(0, 0, 1, 0), packed, pn, (uint32_t)big,
                                             TERRA_COMPRESS_GZIP, &info);
    if (st == TERRA_OK)
        st = terra_archive_writer_add_stored(w, terra_tile_key_make(0, 0, 0, 1), packed, pn, 1000, TERRA_COMPRESS_GZIP,
                                             &info);
    uint8_t garbage[200]; /* not a quantized-mesh tile, its checksum and sizes valid */
    memset(garbage, 0xab, sizeof garbage);
    if (st == TERRA_OK)
        st = terra_archive_writer_add_stored(w, terra_tile_key_make(0, 0, 1, 1), garbage, sizeof garbage, sizeof garbage,
                                             TERRA_COMPRESS_NONE, &info);
    terra_free(zeros);
    terra_free(packed);
    if (st) {
        terra_archive_writer_abort(w);
        return st;
    }
    return terra_archive_writer_finish(w);
}

/* Gives index entry 1 the key of entry 0, with the checksum recomputed. */
static terra_status write_dup(const char *path) {
    terra_tile_key keys[3] = {terra_tile_key_make(0, 0, 0, 0), terra_tile_key_make(0, 0, 1, 0),
                              terra_tile_key_make(0, 0, 1, 1)};
    terra_status st = write_archive(path, TERRA_FRAME_LOCAL, keys, 3);
    if (st) return st;
    terra_archive *a;
    if ((st = terra_archive_open(path, NULL, &a))) return st;
    terra_archive_entry e0, e1;
    uint64_t index = terra_archive_get_info(a)->index_offset;
    if ((st = terra_archive_entry_at(a, 0, &e0)) || (st = terra_archive_entry_at(a, 1, &e1))) {
        terra_archive_close(a);
        return st;
    }
    uint8_t payload[64];
    st = terra_archive_read_stored(a, &e1, payload, sizeof payload);
    terra_archive_close(a);
    if (st) return st;
    e1.key = e0.key;
    e1.checksum = terra_archive_entry_checksum(&e1, payload);
    uint8_t b[TERRA_ARCHIVE_ENTRY_SIZE];
    terra_archive_entry_pack(&e1, b);
    int fd = open(path, O_WRONLY);
    bool ok = fd >= 0 && pwrite(fd, b, sizeof b, (off_t)(index + TERRA_ARCHIVE_ENTRY_SIZE)) == (ssize_t)sizeof b;
    if (fd >= 0) ok = close(fd) == 0 && ok;
    return ok ? TERRA_OK : terra_fail(TERRA_E_IO, "%s: cannot patch", path);
}

static terra_status write_outside(const char *path) {
    terra_tile_key keys[4] = {terra_tile_key_make(0, 1, 0, 0), terra_tile_key_make(0, 0, 0, 0),
                              terra_tile_key_make(0, 0, 1, 1), terra_tile_key_make(0, 0, -1, 0)};
    return write_archive(path, TERRA_FRAME_LOCAL, keys, 4);
}

static int write_hostile(const char *out) {
    char path[512];
    struct {
        const char *name;
        terra_status (*write)(const char *);
    } all[] = {{"bomb.terra", write_bomb}, {"dup.terra", write_dup}, {"outside.terra", write_outside}};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        snprintf(path, sizeof path, "%s/%s", out, all[i].name);
        if (all[i].write(path) != TERRA_OK) {
            fprintf(stderr, "test_serve_request: %s: %s\n", path, terra_last_error());
            return 1;
        }
    }
    return 0;
}

/* An archive in memory whose reader counts the reads that touch one byte range. */
typedef struct counted {
    const uint8_t *data;
    uint64_t lo, hi; /* the range watched */
    int reads;
} counted;
static terra_status counted_read(void *user, uint64_t offset, void *buf, size_t n) {
    counted *c = user;
    memcpy(buf, c->data + offset, n);
    c->reads += offset < c->hi && offset + n > c->lo;
    return TERRA_OK;
}

/* What serve sends is what it checked, read once: terra_archive_check_tile_bytes hands back the
 * stored payload (for a client taking gzip) or the decompressed tile, after one read of the payload;
 * a tile the rules refuse hands back nothing and is named as Cesium names it, with terra's key. */
static void test_tile_bytes(void) {
    char path[512];
    path_in(path, sizeof path, "bomb.terra");
    uint8_t *data;
    size_t n;
    CHECK(terra_io_read_file(path, 1u << 30, &data, &n) == TERRA_OK, "%s", terra_last_error());
    counted c = {data, 0, 0, 0};
    const terra_archive_reader r = {.user = &c, .size = n, .read = counted_read};
    terra_archive *a;
    terra_archive_layout L;
    terra_tms_map m;
    CHECK(terra_archive_open_reader(path, &r, &a) == TERRA_OK && terra_archive_validate(a, NULL, NULL, &L) == TERRA_OK &&
              terra_archive_tms_map(a, &m) == TERRA_OK,
          "%s", terra_last_error());
    terra_archive_entry e;
    CHECK(terra_archive_find(a, terra_tile_key_make(0, 0, 0, 0), &e) == TERRA_OK && e.compression == TERRA_COMPRESS_GZIP);
    c.lo = e.offset, c.hi = e.offset + e.size;
    for (int as_stored = 0; as_stored < 2; as_stored++) {
        uint8_t *bytes = NULL, *raw = NULL;
        size_t bn = 0, rn = 0;
        c.reads = 0;
        CHECK(terra_archive_check_tile_bytes(a, &e, &L.rules, &m, NULL, as_stored, &bytes, &bn) == TERRA_OK, "%s",
              terra_last_error());
        CHECK(c.reads == 1, "the payload read %d times", c.reads);
        if (as_stored) CHECK(bn == e.size && bytes && !memcmp(bytes, data + e.offset, bn), "not the stored bytes");
        CHECK(as_stored || (terra_archive_read_entry(a, &e, &raw, &rn) == TERRA_OK && bn == rn && bytes &&
                            !memcmp(bytes, raw, rn)),
              "not the decompressed tile");
        terra_free(bytes);
        terra_free(raw);
    }
    /* the liar (gzip of 24 MiB stated as 1000 bytes) and the tile that does not decode (stored plainly) */
    const int bad[2][2] = {{0, 1}, {1, 1}};
    for (int k = 0; k < 2; k++) {
        uint8_t *bytes = (uint8_t *)data;
        size_t bn = 1;
        char name[64];
        snprintf(name, sizeof name, "tile 0/%d/%d (level 0, x %d, y %d): ", bad[k][0], bad[k][1], bad[k][0], bad[k][1]);
        CHECK(terra_archive_find(a, terra_tile_key_make(0, 0, bad[k][0], bad[k][1]), &e) == TERRA_OK);
        CHECK(terra_archive_check_tile_bytes(a, &e, &L.rules, &m, NULL, k == 0, &bytes, &bn) != TERRA_OK &&
                  !bytes && !bn && strstr(terra_last_error(), name),
              "%s", terra_last_error());
    }
    terra_archive_close(a);
    terra_free(data);
}

/* The hostile archives are what they claim: open, checksums valid, the bomb's statements. */
static void test_hostile_archives(void) {
    CHECK(write_hostile(dir) == 0);
    char path[512];
    terra_archive *a;
    path_in(path, sizeof path, "bomb.terra");
    if (terra_archive_open(path, NULL, &a) == TERRA_OK) {
        uint64_t bad = 1;
        CHECK(terra_archive_verify(a, &bad) == TERRA_OK && bad == 0, "checksums valid");
        terra_archive_entry e;
        CHECK(terra_archive_find(a, terra_tile_key_make(0, 0, 1, 0), &e) == TERRA_OK && e.raw_size == 24u << 20 &&
              e.size < 100000);
        CHECK(terra_archive_find(a, terra_tile_key_make(0, 0, 0, 1), &e) == TERRA_OK && e.raw_size == 1000);
        uint8_t *raw;
        size_t n;
        CHECK(terra_archive_read_entry(a, &e, &raw, &n) != TERRA_OK, "the liar does not inflate to 1000 bytes");
        terra_archive_close(a);
    } else CHECK(0, "%s", terra_last_error());
    path_in(path, sizeof path, "dup.terra");
    if (terra_archive_open(path, NULL, &a) == TERRA_OK) {
        terra_archive_entry e0, e1;
        CHECK(terra_archive_entry_at(a, 0, &e0) == TERRA_OK && terra_archive_entry_at(a, 1, &e1) == TERRA_OK &&
              e0.key == e1.key);
        uint8_t buf[64];
        CHECK(terra_archive_read_stored(a, &e1, buf, sizeof buf) == TERRA_OK, "the duplicate's checksum holds");
        terra_archive_close(a);
    } else CHECK(0, "%s", terra_last_error());
    check_available(path, "dup");
    path_in(path, sizeof path, "outside.terra");
    if (terra_archive_open(path, NULL, &a) == TERRA_OK) {
        terra_tms_map m;
        int z;
        int64_t x, y;
        CHECK(terra_archive_tms_map(a, &m) == TERRA_OK && m.max_level == 1 && m.min_level == 0 && m.x0 == 0);
        CHECK(!terra_tms_from_key(&m, terra_tile_key_make(0, 0, -1, 0), &z, &x, &y));
        terra_archive_close(a);
    } else CHECK(0, "%s", terra_last_error());
    check_available(path, "outside");
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--archives")) return write_hostile(argv[2]);
    snprintf(dir, sizeof dir, "%s/terra_test_serve_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) return 1;
    RUN(test_routes);
    RUN(test_path_bytes);
    RUN(test_query);
    RUN(test_methods);
    RUN(test_accept_encoding);
    RUN(test_ranges);
    RUN(test_if_range);
    RUN(test_head);
    RUN(test_stray);
    RUN(test_layer_json_ranges);
    RUN(test_tms_map_corner);
    RUN(test_hostile_archives);
    RUN(test_tile_bytes);
    const char *names[] = {"bomb.terra", "dup.terra", "outside.terra"};
    char path[512];
    for (size_t i = 0; i < 3; i++) {
        path_in(path, sizeof path, names[i]);
        unlink(path);
    }
    rmdir(dir);
    return finish();
}
