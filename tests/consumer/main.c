/* A program built against an installed terra (tests/cli_install.sh): with the core alone, it asks
 * the default world for heights; with libterra-io (TERRA_CONSUMER_IO) it also bakes a small archive
 * and reads the heights back through it; with TERRA_CONSUMER_ALL it names a function of every
 * other library, so each one's link interface is proven. Prints "consumer ok" and exits 0. */
#include <terra/terra.h>
#ifdef TERRA_CONSUMER_IO
#include <terra/bake.h>
#include <terra/archive_io.h>
#endif
#ifdef TERRA_CONSUMER_ALL
#include <terra/raster.h>
#include <terra/cook_io.h>
#include <terra/gl.h>
#include <terra/ode.h>
#include <terra/http.h>
#endif

#include <math.h>
#include <stdio.h>

static int fail(const char *what, terra_status st) {
    fprintf(stderr, "consumer: %s: %s (%s)\n", what, terra_error_string(st), terra_last_error());
    return 1;
}

int main(int argc, char **argv) {
    terra_source *world = NULL;
    terra_status st = terra_world_create(&(terra_world_desc){.seed = 7}, &world);
    if (st != TERRA_OK) return fail("terra_world_create", st);
    float h = NAN;
    st = terra_source_height(world, 300.0, 500.0, &h);
    if (st != TERRA_OK) return fail("terra_source_height", st);
    if (!(h >= TERRA_WORLD_MIN_HEIGHT && h <= TERRA_WORLD_MAX_HEIGHT)) {
        fprintf(stderr, "consumer: height %g outside the world's range\n", h);
        return 1;
    }
#ifdef TERRA_CONSUMER_IO
    if (argc < 2) {
        fprintf(stderr, "usage: consumer ARCHIVE\n");
        return 2;
    }
    terra_bake_desc bake = {.levels = 1, .area = {0, 0, 512, 512}, .tile0_size = 256, .threads = 1};
    terra_bake_stats stats;
    st = terra_bake(world, argv[1], &bake, &stats);
    if (st != TERRA_OK) return fail("terra_bake", st);
    terra_source *baked = NULL;
    st = terra_archive_source_create(argv[1], &baked, NULL);
    if (st != TERRA_OK) return fail("terra_archive_source_create", st);
    float g = NAN;
    st = terra_source_height(baked, 300.0, 500.0, &g);
    if (st != TERRA_OK) return fail("terra_source_height (archive)", st);
    if (!(fabs(g - h) <= stats.max_error_per_level[0] + 0.5)) {
        fprintf(stderr, "consumer: the archive says %g where the world says %g\n", g, h);
        return 1;
    }
    printf("consumer: %llu tiles baked, height %.2f read back as %.2f\n", (unsigned long long)stats.tiles, h, g);
    terra_source_destroy(baked);
#endif
#ifdef TERRA_CONSUMER_ALL
    /* never true: the calls only need to link */
    if (argc > 99) {
        terra_raster_read(NULL, NULL);
        terra_cook(NULL, NULL);
        terra_gl_renderer_name();
        terra_ode_destroy(NULL);
        terra_http_register();
    }
#endif
    (void)argc, (void)argv;
    terra_source_destroy(world);
    printf("consumer ok\n");
    return 0;
}
