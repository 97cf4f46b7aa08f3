/*
 * fuzz_checkpoint.c - libFuzzer target: the training checkpoint loader, pdc_trainer_load
 * (lib/train/train_checkpoint.c), on a trainer of the small model below.
 *
 * Input: a checkpoint file image. If it starts with the "PDCTRAIN" magic and holds a header and
 * trailer, its payload length and CRC-32 are fixed up first (as fuzz.h does for .pdc), so mutations
 * reach the payload parser. The loader takes a path, so the bytes go to a scratch file.
 * Properties, beyond fuzz.h's: a refused checkpoint leaves the trainer unchanged (it saves to the
 * same bytes as before the call); an accepted one saves to bytes that load into a fresh trainer and
 * save identically (save -> load -> save is byte-identical).
 * Seeds: test/fuzz/corpus/checkpoint/, made by test/fuzz/make_checkpoint_seeds.c from this model.
 */
#include <unistd.h>

#include "fuzz.h"
#include "lib/core/fileio.h"
#include "test/fuzz/checkpoint_model.h"

#define CKPT_MAGIC "PDCTRAIN"

static char scratch_dir[64];
static char path_in[128], path_a[128], path_b[128];

static void remove_scratch(void)
{
    unlink(path_in);
    unlink(path_a);
    unlink(path_b);
    rmdir(scratch_dir);
}

static void make_scratch(void)
{
    if (scratch_dir[0]) return;
    snprintf(scratch_dir, sizeof scratch_dir, "%s/pdc-fuzz-ckpt.XXXXXX",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    if (!mkdtemp(scratch_dir)) fuzz_fail("cannot create %s", scratch_dir);
    snprintf(path_in, sizeof path_in, "%s/in.ckpt", scratch_dir);
    snprintf(path_a, sizeof path_a, "%s/a.ckpt", scratch_dir);
    snprintf(path_b, sizeof path_b, "%s/b.ckpt", scratch_dir);
    atexit(remove_scratch);
}

static uint8_t *read_all(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    fuzz_check(f != NULL, "cannot open %s", path);
    uint8_t *data = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? 2 * cap : 4096;
            data = realloc(data, cap);
            fuzz_check(data != NULL, "realloc");
        }
        size_t got = fread(data + n, 1, cap - n, f);
        n += got;
        if (!got) break;
    }
    fclose(f);
    *size = n;
    return data;
}

static void check_same_file(const char *a, const char *b, const char *what)
{
    size_t na, nb;
    uint8_t *da = read_all(a, &na), *db = read_all(b, &nb);
    fuzz_check(na == nb && !memcmp(da, db, na), "%s (%zu vs %zu bytes)", what, na, nb);
    free(da);
    free(db);
}

static pdc_trainer *new_trainer(pdc_context *ctx, const pdc_model *m)
{
    pdc_trainer *t = NULL;
    pdc_status st = pdc_trainer_create(ctx, m, &t);
    fuzz_check(st == PDC_OK, "pdc_trainer_create: %s: %s", pdc_status_string(st), pdc_context_last_error(ctx));
    return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    make_scratch();
    uint8_t *image = fuzz_copy(data, size);
    if (size >= 28 && !memcmp(image, CKPT_MAGIC, 8)) {
        pdc_store_u64le(image + 16, (uint64_t)(size - 28));
        pdc_store_u32le(image + size - 4, pdc_crc32(0, image, size - 4));
    }
    FILE *f = fopen(path_in, "wb");
    fuzz_check(f && fwrite(image, 1, size, f) == size && fclose(f) == 0, "cannot write %s", path_in);
    free(image);

    pdc_context *ctx = fuzz_context();
    pdc_model *m = NULL;
    pdc_status st = pdc_model_parse(ctx, fuzz_checkpoint_model, strlen(fuzz_checkpoint_model), &m);
    fuzz_check(st == PDC_OK, "the fuzz model does not parse: %s", pdc_context_last_error(ctx));
    pdc_trainer *t = new_trainer(ctx, m);
    st = pdc_trainer_save(t, path_a);
    fuzz_check(st == PDC_OK, "save before load: %s", pdc_context_last_error(ctx));

    st = pdc_trainer_load(t, path_in);
    if (st != PDC_OK) {
        fuzz_check_failure(ctx, st, FUZZ_UNTOUCHED, "pdc_trainer_load");
        fuzz_check(pdc_trainer_save(t, path_b) == PDC_OK, "save after a failed load: %s", pdc_context_last_error(ctx));
        check_same_file(path_a, path_b, "a failed pdc_trainer_load changed the trainer");
    } else {
        fuzz_check(pdc_trainer_save(t, path_a) == PDC_OK, "save after load: %s", pdc_context_last_error(ctx));
        pdc_trainer *t2 = new_trainer(ctx, m);
        st = pdc_trainer_load(t2, path_a);
        fuzz_check(st == PDC_OK, "a re-saved checkpoint does not load: %s: %s", pdc_status_string(st),
                   pdc_context_last_error(ctx));
        fuzz_check(pdc_trainer_save(t2, path_b) == PDC_OK, "second save: %s", pdc_context_last_error(ctx));
        check_same_file(path_a, path_b, "checkpoint save -> load -> save is not byte-identical");
        pdc_trainer_destroy(t2);
    }
    pdc_trainer_destroy(t);
    pdc_model_destroy(m);
    pdc_context_destroy(ctx);
    return 0;
}
