#include "check.h"
#include "terra/core.h"

#include <math.h>
#include <string.h>

static void tile_keys_round_trip(void) {
    unsigned long long s = 1;
    for (int i = 0; i < 100000; i++) {
        int face = (int)(test_rand_u64(&s) % 8), level = (int)(test_rand_u64(&s) % 32);
        int32_t x = (int32_t)(test_rand_u64(&s) % (1u << 28)) + TERRA_TILE_COORD_MIN;
        int32_t y = (int32_t)(test_rand_u64(&s) % (1u << 28)) + TERRA_TILE_COORD_MIN;
        terra_tile_key k = terra_tile_key_make(face, level, x, y);
        CHECK(terra_tile_key_face(k) == face);
        CHECK(terra_tile_key_level(k) == level);
        CHECK(terra_tile_key_x(k) == x, "%d vs %d", terra_tile_key_x(k), x);
        CHECK(terra_tile_key_y(k) == y);
        if (level > 0 && level < 31 && x > TERRA_TILE_COORD_MIN / 2 && x < TERRA_TILE_COORD_MAX / 2 &&
            y > TERRA_TILE_COORD_MIN / 2 && y < TERRA_TILE_COORD_MAX / 2) {
            for (int c = 0; c < 4; c++)
                CHECK(terra_tile_key_parent(terra_tile_key_child(k, c)) == k);
        }
    }
    /* negative coordinates floor toward minus infinity */
    terra_tile_key p = terra_tile_key_parent(terra_tile_key_make(0, 0, -1, -3));
    CHECK(terra_tile_key_x(p) == -1 && terra_tile_key_y(p) == -2);
}

static void frustum_matches_points(void) {
    unsigned long long s = 7;
    for (int i = 0; i < 2000; i++) {
        terra_camera cam = {.eye = {test_rand_range(&s, -1e6, 1e6), test_rand_range(&s, 0, 1e4),
                                    test_rand_range(&s, -1e6, 1e6)},
                            .yaw_rad = test_rand_range(&s, -4, 4),
                            .pitch_rad = test_rand_range(&s, -1.4, 1.4)};
        terra_frustum f;
        terra_camera_frustum(&cam, &f);
        terra_vec3 fw;
        terra_camera_basis(&cam, &fw, NULL, NULL);
        terra_vec3 ahead = {cam.eye.x + fw.x * 100, cam.eye.y + fw.y * 100, cam.eye.z + fw.z * 100};
        terra_vec3 behind = {cam.eye.x - fw.x * 100, cam.eye.y - fw.y * 100, cam.eye.z - fw.z * 100};
        CHECK(terra_frustum_contains_point(&f, ahead));
        CHECK(!terra_frustum_contains_point(&f, behind));
        /* a random box: OUTSIDE only if none of a dense set of its points is inside */
        terra_box3 b;
        b.min = (terra_vec3){cam.eye.x + test_rand_range(&s, -500, 500), cam.eye.y + test_rand_range(&s, -500, 500),
                             cam.eye.z + test_rand_range(&s, -500, 500)};
        b.max = (terra_vec3){b.min.x + test_rand_range(&s, 1, 300), b.min.y + test_rand_range(&s, 1, 300),
                             b.min.z + test_rand_range(&s, 1, 300)};
        terra_cull c = terra_frustum_test_box(&f, &b);
        int inside = 0, total = 0;
        for (int a = 0; a <= 8; a++)
            for (int bb = 0; bb <= 8; bb++)
                for (int cc = 0; cc <= 8; cc++) {
                    terra_vec3 q = {b.min.x + (b.max.x - b.min.x) * a / 8, b.min.y + (b.max.y - b.min.y) * bb / 8,
                                    b.min.z + (b.max.z - b.min.z) * cc / 8};
                    inside += terra_frustum_contains_point(&f, q);
                    total++;
                }
        if (c == TERRA_CULL_OUTSIDE) CHECK(inside == 0, "box culled but %d points inside", inside);
        if (c == TERRA_CULL_INSIDE) CHECK(inside == total);
    }
}

static void oct_normals(void) {
    unsigned long long s = 3;
    for (int i = 0; i < 10000; i++) {
        float n[3] = {(float)test_rand_range(&s, -1, 1), (float)test_rand_range(&s, -1, 1),
                      (float)test_rand_range(&s, -1, 1)};
        float len = sqrtf(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
        if (len < 1e-3f) continue;
        for (int k = 0; k < 3; k++) n[k] /= len;
        int8_t e[2];
        float d[3];
        terra_oct_encode(n, e);
        terra_oct_decode(e, d);
        float dot = n[0] * d[0] + n[1] * d[1] + n[2] * d[2];
        CHECK(dot > 0.9995f, "angle too large: dot %f", dot);
    }
}

static void errors_have_sentences(void) {
    CHECK(strcmp(terra_error_string(TERRA_E_INVALID), "invalid argument") == 0);
    terra_status s = terra_fail(TERRA_E_IO, "file %s: %s", "x.bin", "gone");
    CHECK(s == TERRA_E_IO);
    CHECK(strcmp(terra_last_error(), "file x.bin: gone") == 0);
}

int main(void) {
    RUN(tile_keys_round_trip);
    RUN(frustum_matches_points);
    RUN(oct_normals);
    RUN(errors_have_sentences);
    return finish();
}
