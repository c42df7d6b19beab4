/* libFuzzer target: the archive reader on arbitrary files: open, verify, look up and read every
 * entry. Must never crash or read out of bounds; damage is reported, not survived silently. */
#include "terra/archive.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char path[64];
    if (!path[0]) snprintf(path, sizeof path, "/tmp/terra_fuzz_archive_%ld.terra", (long)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    for (int mode = 0; mode < 2; mode++) {
        terra_archive_open_desc od = {.use_pread = mode == 1};
        terra_archive *a;
        if (terra_archive_open(path, &od, &a) != TERRA_OK) continue;
        uint64_t bad;
        (void)terra_archive_verify(a, &bad);
        const terra_archive_info *I = terra_archive_get_info(a);
        for (uint64_t i = 0; i < I->tile_count && i < 4096; i++) {
            terra_archive_entry e, g;
            if (terra_archive_entry_at(a, i, &e) != TERRA_OK) continue;
            if (terra_archive_find(a, e.key, &g) == TERRA_OK && e.size <= (1u << 24)) {
                uint8_t *buf = malloc(g.size ? g.size : 1);
                if (buf) (void)terra_archive_read_stored(a, &g, buf, g.size);
                free(buf);
            }
        }
        terra_archive_close(a);
    }
    return 0;
}
