/* A scenery read in a child process, terra-scenery (terra/scenery.h: terra_scenery_read_isolated),
 * and the ground handed over its stdout (scenery_wire.h). */
#include "scenery_wire.h"
#include "terra/raster.h"
#include "../child.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the child's side ---------------------------------------------------------------------------- */

static bool put(FILE *f, const void *p, size_t n) { return !n || fwrite(p, 1, n, f) == n; }

static bool put_string(FILE *f, const char *s) {
    uint32_t n = s ? (uint32_t)strlen(s) : 0;
    return put(f, &n, sizeof n) && put(f, s, n);
}

bool terra_scenery_send(int fd, const terra_scenery *s) {
    FILE *f = fdopen(fd, "wb");
    if (!f) return false;
    terra_scenery_wire w = {TERRA_SCENERY_WIRE_MAGIC, sizeof w, s->vertex_count, s->triangle_count, s->layer_count,
                            s->left_out_count, s->file_count, s->degenerate, s->duplicate, s->not_triangles,
                            s->out_of_range};
    bool ok = put(f, &w, sizeof w) && put(f, s->position, 3 * s->vertex_count * sizeof(double)) &&
              put(f, s->material, s->vertex_count * sizeof(uint16_t)) &&
              put(f, s->tri, 3 * s->triangle_count * sizeof(uint32_t));
    for (size_t i = 0; ok && i < s->layer_count; i++) {
        const terra_scenery_layer *l = &s->layers[i];
        ok = put(f, l->tint, sizeof l->tint) && put(f, &l->metres_per_repeat, sizeof(double)) &&
             put(f, &l->triangles, sizeof(uint64_t)) && put_string(f, l->name);
    }
    for (size_t i = 0; ok && i < s->left_out_count; i++) {
        const terra_scenery_left_out *l = &s->left_out[i];
        uint32_t reason = (uint32_t)l->reason;
        ok = put(f, &reason, sizeof reason) && put(f, &l->triangles, sizeof(uint64_t)) && put_string(f, l->name);
    }
    for (size_t i = 0; ok && i < s->file_count; i++) {
        uint8_t present = s->files[i].present;
        ok = put(f, &present, 1) && put_string(f, s->files[i].path);
    }
    return fclose(f) == 0 && ok;
}

/* ---- the caller's side ---------------------------------------------------------------------------- */

typedef enum answer { ANSWER_OK, ANSWER_SHORT, ANSWER_NOMEM, ANSWER_BAD } answer;

/* A name or path: at most 64 KiB (assimp's names hold 1 KiB, paths PATH_MAX). */
static answer get_string(int fd, char **out) {
    uint32_t n;
    if (!terra_child_read(fd, &n, sizeof n)) return ANSWER_SHORT;
    if (n > 65536) return ANSWER_BAD;
    if (!(*out = terra_alloc((size_t)n + 1))) return ANSWER_NOMEM;
    (*out)[n] = 0;
    return terra_child_read(fd, *out, n) ? ANSWER_OK : ANSWER_SHORT; /* the caller frees it either way */
}

/* Allocates n items of `size` bytes (at least one) into *p and reads them. */
static answer get_array(int fd, void **p, uint64_t n, size_t size) {
    if (!(*p = terra_calloc(n ? (size_t)n : 1, size))) return ANSWER_NOMEM;
    return terra_child_read(fd, *p, (size_t)n * size) ? ANSWER_OK : ANSWER_SHORT;
}

static answer receive(int fd, size_t budget, terra_scenery *s) {
    terra_scenery_wire w;
    if (!terra_child_read(fd, &w, sizeof w)) return ANSWER_SHORT;
    if (w.magic != TERRA_SCENERY_WIRE_MAGIC || w.size != sizeof w || w.vertex_count > UINT32_MAX ||
        w.triangle_count > UINT32_MAX || w.layer_count > 65536 || w.left_out_count > budget / 16 ||
        w.file_count > budget / 16 || w.vertex_count * 26 + w.triangle_count * 12 > budget)
        return ANSWER_BAD; /* another build's, or more than its reader could have held */
    s->vertex_count = (size_t)w.vertex_count, s->triangle_count = (size_t)w.triangle_count;
    s->degenerate = (size_t)w.degenerate, s->duplicate = (size_t)w.duplicate;
    s->not_triangles = (size_t)w.not_triangles, s->out_of_range = (size_t)w.out_of_range;
    answer a = get_array(fd, (void **)&s->position, 3 * w.vertex_count, sizeof(double));
    if (!a) a = get_array(fd, (void **)&s->material, w.vertex_count, sizeof(uint16_t));
    if (!a) a = get_array(fd, (void **)&s->tri, 3 * w.triangle_count, sizeof(uint32_t));
    if (a) return a;
    /* the records: zeroed arrays, filled one record at a time */
    s->layers = terra_calloc(w.layer_count + 1, sizeof *s->layers);
    s->left_out = terra_calloc(w.left_out_count + 1, sizeof *s->left_out);
    s->files = terra_calloc(w.file_count + 1, sizeof *s->files);
    if (!s->layers || !s->left_out || !s->files) return ANSWER_NOMEM;
    for (; !a && s->layer_count < w.layer_count; s->layer_count++) {
        terra_scenery_layer *l = &s->layers[s->layer_count];
        if (!terra_child_read(fd, l->tint, sizeof l->tint) ||
            !terra_child_read(fd, &l->metres_per_repeat, sizeof(double)) ||
            !terra_child_read(fd, &l->triangles, sizeof(uint64_t)))
            return ANSWER_SHORT;
        a = get_string(fd, &l->name);
    }
    for (; !a && s->left_out_count < w.left_out_count; s->left_out_count++) {
        terra_scenery_left_out *l = &s->left_out[s->left_out_count];
        uint32_t reason;
        if (!terra_child_read(fd, &reason, sizeof reason) || !terra_child_read(fd, &l->triangles, sizeof(uint64_t)))
            return ANSWER_SHORT;
        l->reason = (terra_scenery_reason)reason;
        a = get_string(fd, &l->name);
    }
    for (; !a && s->file_count < w.file_count; s->file_count++) {
        uint8_t present;
        if (!terra_child_read(fd, &present, 1)) return ANSWER_SHORT;
        s->files[s->file_count].present = present != 0;
        a = get_string(fd, &s->files[s->file_count].path);
    }
    for (size_t i = 0; !a && i < s->vertex_count; i++)
        if (s->material[i] >= s->layer_count) a = ANSWER_BAD;
    for (size_t i = 0; !a && i < 3 * s->triangle_count; i++)
        if (s->tri[i] >= s->vertex_count) a = ANSWER_BAD;
    return a;
}

terra_status terra_scenery_read_isolated(const terra_scenery_desc *desc, const char *reader, terra_scenery *out) {
    if (!out) return terra_fail(TERRA_E_INVALID, "scenery: NULL argument");
    memset(out, 0, sizeof *out);
    if (!desc || !desc->path) return terra_fail(TERRA_E_INVALID, "scenery: no path");
    const char *what = "the scenery reader";
    char path[PATH_MAX + 32], tris[32], bytes[32];
    terra_status st = terra_child_locate(desc->path, what, reader, "TERRA_SCENERY_READER", "terra-scenery", path,
                                         sizeof path);
    if (st != TERRA_OK) return st;
    snprintf(tris, sizeof tris, "%zu", desc->max_triangles);
    snprintf(bytes, sizeof bytes, "%zu", desc->max_bytes);
    char *argv[] = {path, (char *)desc->path, tris, bytes, NULL};
    terra_child c;
    if ((st = terra_child_start(desc->path, what, path, argv, false, &c)) != TERRA_OK) return st;
    answer a = receive(c.out, terra_raster_memory_budget(desc->max_bytes), out);
    st = terra_child_finish(&c, desc->path, what);
    if (a == ANSWER_OK && st == TERRA_OK) return TERRA_OK;
    terra_scenery_free(out);
    if (a == ANSWER_NOMEM) return terra_fail(TERRA_E_NOMEM, "%s: out of memory for the scenery's ground", desc->path);
    if (a == ANSWER_BAD)
        return terra_fail(TERRA_E_IO, "%s: %s gave an answer that does not hold together", desc->path, what);
    if (st == TERRA_OK) return terra_fail(TERRA_E_IO, "%s: %s's answer is cut short", desc->path, what);
    return st;
}
