/* terra cook on MPI ranks (terra-cook-mpi, built with TERRA_BUILD_MPI): every rank opens the same
 * inputs; rank 0 hashes them (the parts' fingerprint) and plans the round; each rank builds its
 * subtrees into part files beside the output; rank 0 builds the levels over them and merges every
 * part into the archive (terra/cook_io.h, terra_cook_split). `mpirun -n N terra cook ...` comes
 * here (cli/main.c). */
#include "cli.h"
#include "terra/cook_io.h"
#include "terra/io.h"

#include <dirent.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CMD "cook"

/* What each rank tells rank 0 once its round is done. */
typedef struct rank_report {
    int32_t status;
    int32_t pad;
    uint64_t built, reused;
    double seconds;
    char host[64];
    char message[512];
} rank_report;

int cli_cook_mpi_ranks(void) {
    int inited = 0, size = 1;
    MPI_Initialized(&inited);
    if (!inited) {
        int provided;
        MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    }
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    return size;
}

int cli_cook_mpi_local_ranks(void) {
    MPI_Comm node;
    int n = 1;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &n);
    MPI_Comm_free(&node);
    return n;
}

/* Rank 0 waits for the others while it cooks its own share; mpirun stops it (SIGTERM) when a rank
 * dies: it then says which ranks had not reported. */
static char pending_line[512];
static size_t pending_len;

static void on_term(int sig) {
    (void)sig;
    if (pending_len) (void)!write(STDERR_FILENO, pending_line, pending_len);
    _exit(EXIT_FAIL);
}

static void set_pending(const int *done, int ranks) {
    char *p = pending_line, *end = pending_line + sizeof pending_line - 80;
    p += snprintf(p, (size_t)(end - p), "terra cook: stopped while rank");
    int k = 0;
    for (int r = 0; r < ranks && p < end; r++)
        if (!done[r]) p += snprintf(p, (size_t)(end - p), "%s %d", k++ ? "," : "", r);
    p += snprintf(p, sizeof pending_line - (size_t)(p - pending_line),
                  " of %d had not finished its subtrees: a rank died (mpirun names it); run the same command again "
                  "to reuse every finished part\n", ranks);
    pending_len = k ? (size_t)(p - pending_line) : 0;
}

static int die_after(void *user) {
    int *left = user;
    return --*left == 0;
}

/* The file name of root i's part in round R, as the cook writes it ("BOTTOM-DEPTH-TX-TY.part"). */
static void part_name(char *out, size_t n, const terra_cook_split_round *R, size_t i) {
    snprintf(out, n, "%d-%d-%d-%d.part", R->bottom, R->top, (int)R->roots[2 * i], (int)R->roots[2 * i + 1]);
}

/* The part files no longer planned (another cook's) go once the archive is in place. */
static void prune_parts(const char *dir, const terra_cook_split_plan *plan, bool all) {
    DIR *D = opendir(dir);
    if (!D) return;
    char path[4200];
    for (struct dirent *e; (e = readdir(D));) {
        const char *dot = strrchr(e->d_name, '.');
        if (!dot || strcmp(dot, ".part")) continue;
        bool keep = false;
        for (int r = 0; !all && r < plan->round_count && !keep; r++)
            for (size_t i = 0; i < plan->round[r].root_count && !keep; i++) {
                char name[96];
                part_name(name, sizeof name, &plan->round[r], i);
                keep = !strcmp(name, e->d_name);
            }
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (!keep) unlink(path);
    }
    closedir(D);
    if (all) rmdir(dir);
}

/* --stage: each part a rank other than 0 owns, from its directory to rank 0's (size, then bytes). */
static int ship_parts(const terra_cook_split *s, int rank) {
    for (int r = 0; r < s->plan.round_count; r++) {
        const terra_cook_split_round *R = &s->plan.round[r];
        for (size_t i = 0; i < R->root_count; i++) {
            if (R->owner[i] == 0 || (rank && R->owner[i] != rank)) continue;
            char name[96], path[4200];
            part_name(name, sizeof name, R, i);
            snprintf(path, sizeof path, "%s/%s", s->parts, name);
            uint8_t *b = NULL;
            uint64_t n = 0;
            if (rank) {
                size_t got = 0;
                if (terra_io_read_file(path, (size_t)1 << 31, &b, &got) != TERRA_OK)
                    return cli_error(CMD, "rank %d: %s", rank, terra_last_error());
                n = got;
                MPI_Send(&n, 1, MPI_UINT64_T, 0, 8, MPI_COMM_WORLD);
                MPI_Send(b, (int)n, MPI_BYTE, 0, 8, MPI_COMM_WORLD);
                terra_free(b);
                continue;
            }
            MPI_Recv(&n, 1, MPI_UINT64_T, R->owner[i], 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (!(b = terra_alloc(n + 1))) return cli_error(CMD, "out of memory for a part of %llu bytes", (unsigned long long)n);
            MPI_Recv(b, (int)n, MPI_BYTE, R->owner[i], 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            char *tmp = NULL;
            void *fv = NULL;
            terra_status st = terra_io_open_temp(path, &tmp, &fv);
            if (st == TERRA_OK) {
                FILE *f = fv;
                const bool ok = fwrite(b, 1, n, f) == n;
                if (fclose(f) != 0 || !ok) {
                    terra_io_abort(tmp);
                    st = terra_fail(TERRA_E_IO, "%s: write failed", path);
                } else {
                    st = terra_io_commit(tmp, path);
                }
            }
            terra_free(b);
            if (st != TERRA_OK) return cli_error(CMD, "%s", terra_last_error());
        }
    }
    return EXIT_OK;
}

static void bcast_plan(terra_cook_split_plan *p, int rank) {
    int32_t head[4] = {p->ranks, p->round_count, p->top_bottom, 0};
    MPI_Bcast(head, 4, MPI_INT32_T, 0, MPI_COMM_WORLD);
    MPI_Bcast(&p->imbalance, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank) p->ranks = head[0], p->round_count = head[1], p->top_bottom = head[2];
    for (int r = 0; r < p->round_count; r++) {
        terra_cook_split_round *R = &p->round[r];
        uint64_t h[3] = {(uint64_t)R->bottom, (uint64_t)R->top, R->root_count};
        MPI_Bcast(h, 3, MPI_UINT64_T, 0, MPI_COMM_WORLD);
        if (rank) {
            R->bottom = (int)h[0], R->top = (int)h[1], R->root_count = (size_t)h[2];
            R->roots = terra_alloc(2 * R->root_count * sizeof *R->roots + 1);
            R->work = terra_alloc(R->root_count * sizeof *R->work + 1);
            R->owner = terra_alloc(R->root_count * sizeof *R->owner + 1);
            if (!R->roots || !R->work || !R->owner) MPI_Abort(MPI_COMM_WORLD, EXIT_FAIL);
        }
        MPI_Bcast(R->roots, (int)(2 * R->root_count), MPI_INT32_T, 0, MPI_COMM_WORLD);
        MPI_Bcast(R->work, (int)R->root_count, MPI_UINT64_T, 0, MPI_COMM_WORLD);
        MPI_Bcast(R->owner, (int)R->root_count, MPI_INT32_T, 0, MPI_COMM_WORLD);
    }
}

/* The part files' directory: beside the cook cache's record (DIR/NAME.parts, DIR = OUT.cache or
 * --cache), or OUT.parts with --no-cache (removed once the archive is in place). */
static char *parts_dir(const char *out, const char *cache, bool no_cache) {
    char *rec = NULL;
    if (no_cache) {
        const size_t n = strlen(out) + 8;
        char *p = malloc(n);
        if (p) snprintf(p, n, "%s.parts", out);
        return p;
    }
    if (terra_cook_cache_record_path(cache, out, &rec) != TERRA_OK) return NULL;
    char *dot = strrchr(rec, '.');
    const size_t n = strlen(rec) + 8;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%.*s.parts", (int)(dot ? dot - rec : (ptrdiff_t)strlen(rec)), rec);
    /* its directory (the cache's) first */
    char *slash = strrchr(rec, '/');
    if (slash) *slash = 0, mkdir(rec, 0777);
    terra_free(rec);
    return p;
}

int cli_cook_mpi(terra_cook_desc *d, const char *options, const char *cache, bool no_cache, const char *stage, bool quiet,
                 void (*report)(const char *out, const terra_cook_report *r, double read_s), double read_s) {
    int rank = 0, ranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    const double t0 = MPI_Wtime();
    int rc = EXIT_OK;
    /* rank 0: the fingerprint of the inputs' contents and the options (the cook cache's manifest) */
    uint64_t fp = 0;
    char *parts = NULL;
    if (rank == 0) {
        terra_cook_manifest *m = NULL;
        if (terra_cook_manifest_create(options, &m) != TERRA_OK) rc = cli_error(CMD, "%s", terra_last_error());
        for (size_t i = 0; rc == EXIT_OK && i < d->input_count; i++)
            if (terra_cook_manifest_add_input(m, d->inputs[i].path, NULL) != TERRA_OK) rc = cli_error(CMD, "%s", terra_last_error());
        char head[64];
        snprintf(head, sizeof head, "terra-cook-parts %d %d", TERRA_COOK_VERSION, TERRA_ARCHIVE_VERSION);
        fp = terra_cook_xxh64(head, strlen(head), terra_cook_xxh64(options, strlen(options), 0));
        for (uint32_t i = 0; rc == EXIT_OK && i < terra_cook_manifest_count(m); i++) {
            const terra_cook_file *f = terra_cook_manifest_file(m, i);
            const uint64_t h[2] = {f->size, f->hash};
            fp = terra_cook_xxh64(h, sizeof h, fp);
        }
        terra_cook_manifest_free(m);
        if (rc == EXIT_OK && !(parts = parts_dir(d->output, cache, no_cache))) rc = cli_error(CMD, "out of memory");
    }
    /* the plan, on rank 0, to everyone */
    terra_cook_split s = {.stage = TERRA_COOK_STAGE_PLAN, .ranks = ranks, .rank = rank};
    terra_cook_report rep;
    d->split = &s;
    d->cache = NULL;
    if (rank == 0 && rc == EXIT_OK && terra_cook(d, &rep) != TERRA_OK) rc = cli_error(CMD, "%s", terra_last_error());
    int32_t ok = rc == EXIT_OK;
    MPI_Bcast(&ok, 1, MPI_INT32_T, 0, MPI_COMM_WORLD);
    if (!ok) {
        free(parts);
        return EXIT_FAIL;
    }
    uint32_t plen = rank == 0 ? (uint32_t)strlen(parts) + 1 : 0;
    MPI_Bcast(&plen, 1, MPI_UINT32_T, 0, MPI_COMM_WORLD);
    if (rank) parts = malloc(plen);
    if (!parts) MPI_Abort(MPI_COMM_WORLD, EXIT_FAIL);
    MPI_Bcast(parts, (int)plen, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (stage) { /* every rank's own directory: STAGE/NAME.parts */
        const char *slash = strrchr(d->output, '/'), *name = slash ? slash + 1 : d->output;
        free(parts);
        const size_t n = strlen(stage) + strlen(name) + 16;
        if (!(parts = malloc(n))) MPI_Abort(MPI_COMM_WORLD, EXIT_FAIL);
        snprintf(parts, n, "%s/%s.parts", stage, name);
        mkdir(stage, 0777);
    }
    MPI_Bcast(&fp, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    bcast_plan(&s.plan, rank);
    s.parts = parts, s.fingerprint = fp;
    if (rank == 0 && !quiet) {
        fprintf(stderr, "terra cook: %d ranks, ", ranks);
        if (s.plan.round_count)
            fprintf(stderr, "%zu subtrees of depth %d (work max/mean %.3f), parts in %s\n", s.plan.round[0].root_count,
                    s.plan.round[0].top, s.plan.imbalance, parts);
        else
            fprintf(stderr, "too little ground to share: rank 0 cooks it all\n");
    }
    /* tests: TERRA_COOK_MPI_DIE=R:N ends rank R after its Nth part */
    int die_left = 0;
    const char *die = getenv("TERRA_COOK_MPI_DIE");
    if (die) {
        int r = -1, n = 0;
        if (sscanf(die, "%d:%d", &r, &n) == 2 && r == rank && n > 0) die_left = n, s.die_after = die_after, s.die_user = &die_left;
    }
    /* the round: rank 0 listens for the others' reports (a signal handler names who is missing) */
    rank_report mine = {0}, *all = rank == 0 ? calloc((size_t)ranks, sizeof *all) : NULL;
    MPI_Request *req = rank == 0 ? calloc((size_t)ranks, sizeof *req) : NULL;
    int *done = rank == 0 ? calloc((size_t)ranks, sizeof *done) : NULL;
    if (rank == 0 && (!all || !req || !done)) MPI_Abort(MPI_COMM_WORLD, EXIT_FAIL);
    if (rank == 0) {
        for (int r = 1; r < ranks; r++) MPI_Irecv(&all[r], (int)sizeof *all, MPI_BYTE, r, 7, MPI_COMM_WORLD, &req[r]);
        set_pending(done, ranks);
        signal(SIGTERM, on_term);
    }
    const double r0 = MPI_Wtime();
    terra_status st = TERRA_OK;
    for (int r = 0; r < s.plan.round_count && st == TERRA_OK; r++) {
        s.stage = TERRA_COOK_STAGE_ROUND, s.round = r;
        d->progress = NULL; /* one bar for N ranks would only interleave */
        st = terra_cook(d, &rep);
    }
    mine.status = st;
    mine.built = s.parts_built, mine.reused = s.parts_reused, mine.seconds = MPI_Wtime() - r0;
    gethostname(mine.host, sizeof mine.host - 1);
    if (st != TERRA_OK) snprintf(mine.message, sizeof mine.message, "%s", terra_last_error());
    if (rank) {
        MPI_Send(&mine, (int)sizeof mine, MPI_BYTE, 0, 7, MPI_COMM_WORLD);
    } else {
        all[0] = mine, done[0] = 1;
        set_pending(done, ranks);
        for (int left = ranks - 1; left > 0;) {
            int idx;
            MPI_Waitany(ranks - 1, req + 1, &idx, MPI_STATUS_IGNORE);
            if (idx == MPI_UNDEFINED) break;
            done[idx + 1] = 1, left--;
            set_pending(done, ranks);
        }
        signal(SIGTERM, SIG_DFL);
    }
    /* staged parts: every rank's to rank 0, in the plan's order, once every round went well */
    int32_t all_ok = 1;
    for (int r = 0; rank == 0 && r < ranks; r++) all_ok = all_ok && all[r].status == TERRA_OK;
    MPI_Bcast(&all_ok, 1, MPI_INT32_T, 0, MPI_COMM_WORLD);
    if (stage && all_ok && (rc = ship_parts(&s, rank)) != EXIT_OK) MPI_Abort(MPI_COMM_WORLD, EXIT_FAIL);
    const double round_s = MPI_Wtime() - r0;
    /* rank 0: the failures by rank, or the levels over the subtrees and the merge */
    ok = 1;
    if (rank == 0) {
        for (int r = 0; r < ranks; r++)
            if (all[r].status != TERRA_OK) {
                ok = 0;
                fprintf(stderr, "terra cook: rank %d of %d (%s) failed: %s\n", r, ranks, all[r].host, all[r].message);
            }
        if (!ok)
            fprintf(stderr, "terra cook: nothing written to %s; run the same command again to reuse every finished part "
                            "(%s)\n", d->output, parts);
        s.stage = TERRA_COOK_STAGE_MERGE;
        if (ok && terra_cook(d, &rep) != TERRA_OK) ok = 0, cli_error(CMD, "%s", terra_last_error());
        if (ok) {
            uint64_t built = 0, reused = 0;
            for (int r = 0; r < ranks; r++) built += all[r].built, reused += all[r].reused;
            rep.seconds = MPI_Wtime() - t0;
            report(d->output, &rep, read_s);
            printf("ranks %d\nsubtrees %zu\nsubtree_depth %d\nwork_max_over_mean %.4f\nparts_built %llu\nparts_reused %llu\n"
                   "round_s %.3f\ntop_s %.3f\nmerge_s %.3f\nmerge_share %.4f\n",
                   ranks, s.plan.round_count ? s.plan.round[0].root_count : 0, s.plan.round_count ? s.plan.round[0].top : -1,
                   s.plan.imbalance, (unsigned long long)built, (unsigned long long)reused, round_s, s.top_s, s.merge_s,
                   rep.seconds > 0 ? s.merge_s / rep.seconds : 0);
            for (int r = 0; r < ranks; r++)
                printf("rank %d host %s parts_built %llu parts_reused %llu seconds %.3f\n", r, all[r].host,
                       (unsigned long long)all[r].built, (unsigned long long)all[r].reused, all[r].seconds);
            prune_parts(parts, &s.plan, no_cache);
        }
    }
    MPI_Bcast(&ok, 1, MPI_INT32_T, 0, MPI_COMM_WORLD);
    if (ok && rank && stage && no_cache) prune_parts(parts, &s.plan, true); /* each machine's own */
    rc = ok ? EXIT_OK : EXIT_FAIL;
    terra_cook_split_plan_free(&s.plan);
    free(all), free(req), free(done), free(parts);
    d->split = NULL;
    return rc;
}

void cli_cook_mpi_end(void) {
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (inited && !finalized) MPI_Finalize();
}
