/* Streaming scenarios in the headless simulator (bench/stream_sim.h): deterministic figures. */
#include "bench.h"
#include "stream_sim.h"

#include "../cli/fly_path.h"

/* ---- the streamer's own CPU at 1080p ---------------------------------------------------------------
 * terra fly's built-in path (12 km in `frames` frames) through the real default loader: tiles meshed
 * from the default world on a pool of two workers, ranges derived as terra fly derives them (tau 2 px,
 * 1080 rows, 60 degrees, the world's measured level errors), the scene's cache at 1080 rows (4,608
 * tiles), 64 in flight, stand-ins within 2 levels, a 4 ms budget, the first frame settled, then a
 * frame every `frame_s` (the update, then a sleep for the rest: a game's frame, or a software GL's
 * draw). The bookkeeping is each frame's first update less its selection and its budgeted work
 * (taking tiles in, uploading them): what terra_stream_update costs a frame beyond the tiles, in the
 * thread's CPU time (the streamer's clock). With `wait`, a frame whose stand-ins are more than 2
 * levels coarser updates again until they are not, at most 1 s, as terra_gl_scene_frame does. */

/* The calling thread's CPU time: what the streamer costs, not the time others' threads took the core
 * from it (the machine is shared). */
static double fly_cpu_clock(void *user) {
    (void)user;
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static terra_status fly_upload(void *user, terra_tile_key key, const void *data, size_t bytes) {
    (void)key;
    memcpy(user, data, bytes); /* a copy, as a renderer's upload makes */
    return TERRA_OK;
}

typedef struct fly_figures {
    double p50, p99, max, select_p50, work_p50, wait_s;
    int frames, deep_frames, standin_max, waited;
} fly_figures;

static int fly_1080(const terra_source *src, int frames, double frame_s, bool wait, fly_figures *out) {
    terra_stream_desc d = {.source = src, .capacity_tiles = 4608, .max_in_flight = 64, .max_cameras = 1, .max_foci = 4,
                           .max_standin_levels = 2, .budget_ms = 4, .upload = fly_upload, .clock = fly_cpu_clock};
    if (sim_fly_select(src, &d.select) != TERRA_OK || terra_pool_create(&(terra_pool_desc){.threads = 2}, &d.pool) != TERRA_OK)
        return 1;
    void *copy = malloc((size_t)terra_grid_vertex_count(32) * sizeof(terra_grid_vertex));
    d.upload_user = copy;
    terra_stream *s;
    if (!copy || terra_stream_create(&d, &s) != TERRA_OK) {
        fprintf(stderr, "bench_stream: %s\n", terra_last_error());
        return 1;
    }
    double *book = malloc(sizeof(double) * 3 * (size_t)frames), *sel = book + frames, *work = sel + frames;
    terra_focus cam = 0;
    *out = (fly_figures){0};
    for (int f = 0; f < frames; f++) {
        const double t0 = bench_now();
        terra_camera c = terra_fly_path_camera(src, (double)f / (frames - 1));
        if (f == 0) terra_stream_add_focus(s, &(terra_focus_desc){.kind = TERRA_FOCUS_CAMERA, .camera = c}, &cam);
        else terra_stream_update_focus(s, cam, &c);
        if (terra_stream_update(s) != TERRA_OK) {
            fprintf(stderr, "bench_stream: frame %d: %s\n", f, terra_last_error());
            return 1;
        }
        const terra_stream_stats *st = terra_stream_get_stats(s);
        while (f == 0 && st->waiting > 0) { /* the first frame settles, as terra fly's does */
            nanosleep(&(struct timespec){0, 1000000}, NULL);
            if (terra_stream_update(s) != TERRA_OK) return 1;
        }
        book[f] = st->update_ms - st->select_ms - st->work_ms;
        sel[f] = st->select_ms, work[f] = st->work_ms;
        out->deep_frames += st->standin_levels > 2;
        if (st->standin_levels > out->standin_max) out->standin_max = st->standin_levels;
        if (wait && f > 0 && st->standin_levels > 2) {
            const double w0 = bench_now();
            while (st->standin_levels > 2 && bench_now() - w0 < 1.0) {
                if (st->in_flight == 0 && st->ready == 0 && st->arrived == 0 && st->requested == 0) break; /* stuck */
                if (st->pieces[TERRA_WORK_UPLOAD] == 0 && st->arrived == 0) nanosleep(&(struct timespec){0, 500000}, NULL);
                if (terra_stream_update(s) != TERRA_OK) return 1;
            }
            out->waited++, out->wait_s += bench_now() - w0;
        }
        const double left = frame_s - (bench_now() - t0);
        if (left > 0) nanosleep(&(struct timespec){(time_t)left, (long)((left - (double)(time_t)left) * 1e9)}, NULL);
    }
    out->frames = frames;
    qsort(book, (size_t)frames, sizeof *book, bench_cmp_double);
    out->p50 = book[frames / 2], out->p99 = book[(int)(0.99 * (frames - 1))], out->max = book[frames - 1];
    out->select_p50 = bench_median(sel, frames), out->work_p50 = bench_median(work, frames);
    terra_stream_destroy(s);
    terra_pool_destroy(d.pool);
    free(book);
    free(copy);
    return 0;
}

static void record(const char *scenario, const char *what, double v, const char *unit, const char *stat) {
    char name[160];
    snprintf(name, sizeof name, "stream.%s.%s", scenario, what);
    bench_record(name, v, unit, 1, stat);
}

int main(int argc, char **argv) {
    terra_source *src;
    if (terra_world_create(&(terra_world_desc){.seed = 1}, &src) != TERRA_OK) return 1;
    if (argc > 1 && strcmp(argv[1], "--sim-fly") == 0) { /* the fly_1080 scenario alone (for callgrind) */
        sim_result r;
        const sim_config cfg = sim_fly_config();
        return sim_run(src, &sim_fly_scenario, &cfg, &r) != 0 || r.coverage_errors || r.uncovered_frames;
    }
    fly_figures fly;
    if (argc > 3 && strcmp(argv[1], "--scene") == 0) { /* bench_stream --scene FRAMES SECONDS: waiting as the scene does */
        const int frames = atoi(argv[2]);
        if (frames < 2 || fly_1080(src, frames, atof(argv[3]), true, &fly) != 0) return 1;
        printf("  %d frames, %s s a frame: %d waited for stand-ins (%.2f s in all); bookkeeping p50 %.3f ms, p99 %.3f ms\n",
               frames, argv[3], fly.waited, fly.wait_s, fly.p50, fly.p99);
        return 0;
    }
    if (fly_1080(src, 240, 1 / 60.0, false, &fly) != 0) return 1;
    bench_record("stream.cpu_ms.update.p50", fly.p50, "ms", fly.frames, "p50");
    bench_record("stream.cpu_ms.update.p99", fly.p99, "ms", fly.frames, "p99");
    printf("  (1080p flight: bookkeeping max %.3f ms; selection p50 %.3f ms, budgeted work p50 %.3f ms; %d frames with "
           "stand-ins more than 2 levels coarser, at most %d)\n",
           fly.max, fly.select_p50, fly.work_p50, fly.deep_frames, fly.standin_max);
    if (argc > 1 && strcmp(argv[1], "--fly") == 0) return 0;
    int failures = 0;
    const sim_config fly_cfg = sim_fly_config();
    for (int k = 0; k <= SIM_SCENARIOS; k++) {
        const sim_scenario *sc = k < SIM_SCENARIOS ? &sim_scenarios[k] : &sim_fly_scenario;
        sim_result r;
        double t0 = bench_now();
        if (sim_run(src, sc, k < SIM_SCENARIOS ? &sim_default_config : &fly_cfg, &r) != 0) return 1;
        double wall = bench_now() - t0;
        const char *n = sc->name;
        record(n, "uncovered_frames", r.uncovered_frames, "frames", "value");
        record(n, "frames_to_full_detail", r.frames_to_full_detail, "frames", "max");
        record(n, "wasted_loads", (double)r.wasted_loads, "tiles", "value");
        record(n, "loads", (double)r.arrivals, "tiles", "value");
        record(n, "reloads", (double)r.reloads, "tiles", "value");
        record(n, "peak_bytes", (double)r.peak_bytes, "bytes", "max");
        record(n, "cap_bytes", (double)r.cap_bytes, "bytes", "value");
        record(n, "main_ms_p50", r.main_ms_p50, "ms", "p50");
        record(n, "main_ms_p99", r.main_ms_p99, "ms", "p99");
        record(n, "main_ms_max", r.main_ms_max, "ms", "max");
        record(n, "allocs_per_frame", r.allocs_per_frame, "allocs", "mean");
        record(n, "sim_us_per_frame", wall * 1e6 / r.frames, "us", "mean");
        failures += r.uncovered_frames != 0 || r.coverage_errors != 0;
    }
    sim_scenario small = {"world_8km", SIM_FLYOVER, 100, 20, 4000}, big = {"world_8000km", SIM_FLYOVER, 100, 20, 4e6};
    sim_config cfg = sim_default_config;
    cfg.load_radius = 1500;
    sim_result rs, rb;
    if (sim_run(src, &small, &cfg, &rs) || sim_run(src, &big, &cfg, &rb)) return 1;
    bench_record("stream.peak_bytes.world_8km", (double)rs.peak_bytes, "bytes", 1, "max");
    bench_record("stream.peak_bytes.world_8000km", (double)rb.peak_bytes, "bytes", 1, "max");
    terra_source_destroy(src);
    return failures ? 1 : 0;
}
