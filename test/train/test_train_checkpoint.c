/*
 * test_train_checkpoint.c - training checkpoints: N steps, save, load and N more give the bytes of 2N
 * steps (weights, masks, optimizer, step, schedule, random state, through pruning and ADMM);
 * corrupt, truncated and foreign checkpoints and bad ADMM state are refused and change nothing; an
 * unwritable path loses nothing; a process killed while saving leaves the last good checkpoint.
 * PDC_TEST_QUICK=1 (valgrind) kills fewer times.
 */
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/core/crc32.h"
#include "lib/train/train.h"

#include "test/common/builders.h"

/* ------------------------------------------------------------------ checkpoints */

/* PDC_TEST_QUICK=1 (valgrind): fewer kill rounds. */
static int quick(void)
{
    const char *q = getenv("PDC_TEST_QUICK");
    return q && *q && strcmp(q, "0");
}

START_TEST(resume_is_bit_exact)
{
    /* N steps + save + load into a fresh trainer + N steps == 2N steps: the same checkpoint bytes (weights,
     * masks, optimizer, step, schedule, random state), through pruning and ADMM */
    static const char *const sched[] = {"lr_schedule", "cosine", "lr_total_steps", "40", "weight_decay", "0.001", NULL};
    toy d = make_toy(24, 10);
    pdc_attrs *a = prune_options(0), *fc;
    ck_assert_ok(ctx, pdc_attrs_create(ctx, &fc));
    ck_assert_ok(ctx, pdc_attrs_set_string(fc, "block", "1x4:0.75"));
    pdc_trainer *full = toy_trainer(sched), *half = toy_trainer(sched);
    float loss;
    for (int i = 0; i < 2; i++) {
        pdc_trainer *t = i ? half : full;
        train_toy(t, &d, 1, &loss);
        ck_assert_ok(ctx, pdc_trainer_prune(t, "prune-pattern,prune-connectivity", a));
        ck_assert_ok(ctx, pdc_trainer_admm_begin(t, "prune-block", fc, 0.01f));
        train_toy(t, &d, 1, &loss);
        ck_assert_ok(ctx, pdc_trainer_admm_update(t, NULL));
    }
    /* full: N more steps */
    train_toy(full, &d, 2, &loss);
    ck_assert_ok(ctx, pdc_trainer_admm_update(full, NULL));
    ck_assert_ok(ctx, pdc_trainer_save(full, tmp_path("full.ckpt")));
    /* half: save, load into a new trainer with other options, N steps */
    ck_assert_ok(ctx, pdc_trainer_save(half, tmp_path("half.ckpt")));
    pdc_trainer_destroy(half);
    static const char *const other[] = {"lr", "0.5", "optimizer", "sgd", NULL};
    pdc_trainer *resumed = toy_trainer(other);
    ck_assert_ok(ctx, pdc_trainer_load(resumed, tmp_path("half.ckpt")));
    assert_trainer_option(resumed, "optimizer", "adam");
    train_toy(resumed, &d, 2, &loss);
    ck_assert_ok(ctx, pdc_trainer_admm_update(resumed, NULL));
    ck_assert_ok(ctx, pdc_trainer_save(resumed, tmp_path("resumed.ckpt")));
    ck_assert_msg(files_equal(tmp_path("full.ckpt"), tmp_path("resumed.ckpt")), "resumed training differs");
    ck_assert(same_weights(full, resumed));
    /* and both end the same way */
    ck_assert_ok(ctx, pdc_trainer_admm_end(full));
    ck_assert_ok(ctx, pdc_trainer_admm_end(resumed));
    assert_pruned_zero(resumed);
    pdc_attrs_destroy(a);
    pdc_attrs_destroy(fc);
    pdc_trainer_destroy(full);
    pdc_trainer_destroy(resumed);
    free_toy(&d);
}
END_TEST

/* Loading the n bytes b as a checkpoint is refused as corrupt with msg, and changes nothing: saving
 * again gives the bytes of the checkpoint `state` (saved from t before). */
static void load_refused(pdc_trainer *t, const uint8_t *b, size_t n, const char *what, const char *msg,
                         const char *state)
{
    write_file(tmp_path("bad.ckpt"), b, n);
    ck_assert_status(ctx, pdc_trainer_load(t, tmp_path("bad.ckpt")), PDC_ERR_CORRUPT);
    ck_assert_msg(strstr(pdc_context_last_error(ctx), msg) != NULL, "%s: message \"%s\" lacks \"%s\"", what,
                  pdc_context_last_error(ctx), msg);
    ck_assert_ok(ctx, pdc_trainer_save(t, tmp_path("again.ckpt")));
    ck_assert_msg(files_equal(tmp_path(state), tmp_path("again.ckpt")), "%s changed the trainer", what);
}

START_TEST(corrupt_and_truncated_checkpoints_are_refused)
{
    toy d = make_toy(16, 11);
    pdc_trainer *t = toy_trainer(NULL);
    float loss;
    train_toy(t, &d, 1, &loss);
    ck_assert_ok(ctx, pdc_trainer_save(t, tmp_path("good.ckpt")));
    train_toy(t, &d, 1, &loss);
    ck_assert_ok(ctx, pdc_trainer_save(t, tmp_path("now.ckpt")));
    size_t n;
    uint8_t *b = (uint8_t *)test_read_file(tmp_path("good.ckpt"), &n);
    struct {
        const char *what;
        size_t len, flip;
        const char *msg;
    } cases[] = {
        {"flipped byte", n, n / 2, "CRC-32"},       {"flipped CRC", n, n - 1, "CRC-32"},
        {"truncated", n - 100, (size_t)-1, "truncated"}, {"header only", 20, (size_t)-1, "not a pdc training checkpoint"},
        {"bad magic", n, 0, "magic"},               {"newer version", n, 8, "version"},
        {"empty", 0, (size_t)-1, "not a pdc training checkpoint"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t *c = malloc(n);
        ck_assert_ptr_nonnull(c);
        memcpy(c, b, n);
        if (cases[i].flip != (size_t)-1) c[cases[i].flip] ^= 0x5a;
        load_refused(t, c, cases[i].len, cases[i].what, cases[i].msg, "now.ckpt");
        free(c);
    }
    /* the previous good checkpoint still loads */
    ck_assert_ok(ctx, pdc_trainer_load(t, tmp_path("good.ckpt")));
    ck_assert_ok(ctx, pdc_trainer_save(t, tmp_path("again.ckpt")));
    ck_assert(files_equal(tmp_path("good.ckpt"), tmp_path("again.ckpt")));
    ck_assert_status(ctx, pdc_trainer_load(t, tmp_path("missing.ckpt")), PDC_ERR_IO);
    ck_assert_error_has(ctx, "missing.ckpt");
    free(b);
    pdc_trainer_destroy(t);
    free_toy(&d);
}
END_TEST

START_TEST(nonfinite_checkpoints_are_refused)
{
    /* a valid CRC says only that the bytes are the ones written: a NaN Adam moment or weight is
     * refused by name (it would silently poison the weight at the next step), unless the context
     * option allow_nonfinite is set; a negative second moment is always corrupt */
    toy d = make_toy(16, 11);
    pdc_trainer *t = toy_trainer(NULL);
    float loss;
    train_toy(t, &d, 1, &loss);
    tr_param *p = &t->net->params[0];
    const char *name = t->net->model->tensors[p->tensor].name;
    char want[256];
    ck_assert_ptr_nonnull(p->v);
    const float v3 = p->v[3];
    p->v[3] = NAN;
    ck_assert_ok(ctx, pdc_trainer_save(t, tmp_path("nan_v.ckpt")));
    p->v[3] = v3;
    ck_assert_ok(ctx, pdc_trainer_save(t, tmp_path("good.ckpt")));
    ck_assert_status(ctx, pdc_trainer_load(t, tmp_path("nan_v.ckpt")), PDC_ERR_NUMERIC);
    snprintf(want, sizeof want, "constant '%s' second moment holds NaN at element 3 of %zu", name, p->n);
    ck_assert_error_has(ctx, want);
    ck_assert_error_has(ctx, "allow_nonfinite=1");
    ck_assert(p->v[3] == v3); /* the trainer is unchanged */
    float *w = t->net->model->tensors[p->tensor].data;
    const float w0 = w[0];
    w[0] = -INFINITY;
    ck_assert_ok(ctx, pdc_trainer_save(t, tmp_path("inf_w.ckpt")));
    w[0] = w0;
    ck_assert_status(ctx, pdc_trainer_load(t, tmp_path("inf_w.ckpt")), PDC_ERR_NUMERIC);
    snprintf(want, sizeof want, "constant '%s' values holds -inf at element 0", name);
    ck_assert_error_has(ctx, want);
    p->v[5] = -1.0f;
    ck_assert_ok(ctx, pdc_trainer_save(t, tmp_path("neg_v.ckpt")));
    ck_assert_status(ctx, pdc_trainer_load(t, tmp_path("neg_v.ckpt")), PDC_ERR_CORRUPT);
    ck_assert_error_has(ctx, "second moment is negative (-1) at element 5");
    ck_assert_ok(ctx, pdc_trainer_load(t, tmp_path("good.ckpt")));
    /* with allow_nonfinite the NaN moment loads, as it was saved */
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "allow_nonfinite", "1"));
    ck_assert_ok(ctx, pdc_trainer_load(t, tmp_path("nan_v.ckpt")));
    ck_assert(isnan(t->net->params[0].v[3]));
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "allow_nonfinite", "0"));
    pdc_trainer_destroy(t);
    free_toy(&d);
}
END_TEST

START_TEST(checkpoint_admm_state_is_checked)
{
    /* a checkpoint with a right CRC-32 but ADMM state pdc_trainer_admm_begin refuses: a pass that
     * is not a pruning pass (admm_end would restructure the model: 9 layers became 6), an unknown
     * pass, rho = inf. Each is refused as corrupt and leaves the trainer as it was. */
    pdc_trainer *t = toy_trainer(NULL);
    ck_assert_ok(ctx, pdc_trainer_admm_begin(t, "prune-unstructured", NULL, 0.25f));
    ck_assert_ok(ctx, pdc_trainer_save(t, tmp_path("admm.ckpt")));
    size_t n;
    uint8_t *b = (uint8_t *)test_read_file(tmp_path("admm.ckpt"), &n);
    static const char pipe[] = "prune-unstructured";
    const size_t len = sizeof pipe - 1;
    size_t at = 0;
    while (at + len <= n && memcmp(b + at, pipe, len)) at++;
    ck_assert_uint_lt(at + len, n); /* the pipeline, after its u32 length and the f64 rho */
    static const uint8_t inf_le[8] = {0, 0, 0, 0, 0, 0, 0xf0, 0x7f};
    struct {
        const char *what;
        size_t off;
        const void *bytes;
        size_t nb;
        const char *msg;
    } cases[] = {
        {"not a pruning pass", at, "canonicalize      ", len, "is refused (trainer: pass 'canonicalize' is not a pruning pass"},
        {"unknown pass", at, "prune-nothing-else", len, "ADMM pipeline \"prune-nothing-else\" is refused"},
        {"rho inf", at - 12, inf_le, 8, "ADMM rho inf"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t *c = malloc(n);
        ck_assert_ptr_nonnull(c);
        memcpy(c, b, n);
        memcpy(c + cases[i].off, cases[i].bytes, cases[i].nb);
        uint32_t crc = pdc_crc32(0, c, n - 4);
        for (int k = 0; k < 4; k++) c[n - 4 + (size_t)k] = (uint8_t)(crc >> (8 * k));
        load_refused(t, c, n, cases[i].what, cases[i].msg, "admm.ckpt");
        free(c);
    }
    free(b);
    pdc_trainer_destroy(t);
}
END_TEST

START_TEST(checkpoint_of_another_model_is_refused)
{
    pdc_trainer *t = toy_trainer(NULL);
    ck_assert_ok(ctx, pdc_trainer_save(t, tmp_path("toy.ckpt")));
    /* same layers, one constant of another shape */
    char ir[2048];
    snprintf(ir, sizeof ir, "%s", toy_cnn);
    char *at = strstr(ir, "c2w : f32[8,8,3,3]");
    ck_assert_ptr_nonnull(at);
    memcpy(at, "c2w : f32[8,8,1,1]", 18);
    at = strstr(ir, "{pads=[1,1,1,1]}\nlayer r2");
    memcpy(at, "{pads=[0,0,0,0]}", 16);
    pdc_model *m = parse_model(ir);
    pdc_trainer *u;
    ck_assert_ok(ctx, pdc_trainer_create(ctx, m, &u));
    pdc_model_destroy(m);
    ck_assert_status(ctx, pdc_trainer_load(u, tmp_path("toy.ckpt")), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "another model");
    ck_assert_error_has(ctx, "c2w");
    pdc_trainer_destroy(u);
    /* another structure entirely */
    m = parse_model(CONV3X3_IR);
    ck_assert_ok(ctx, pdc_trainer_create(ctx, m, &u));
    pdc_model_destroy(m);
    ck_assert_status(ctx, pdc_trainer_load(u, tmp_path("toy.ckpt")), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "layers");
    pdc_trainer_destroy(u);
    pdc_trainer_destroy(t);
}
END_TEST

START_TEST(unwritable_checkpoint_path_loses_nothing)
{
    toy d = make_toy(8, 12);
    pdc_trainer *t = toy_trainer(NULL);
    float loss;
    train_toy(t, &d, 1, &loss);
    ck_assert_ok(ctx, pdc_trainer_save(t, tmp_path("keep.ckpt")));
    ck_assert_status(ctx, pdc_trainer_save(t, tmp_path("no/such/dir/x.ckpt")), PDC_ERR_IO);
    ck_assert_error_has(ctx, "no/such/dir");
    /* a path that is a directory */
    ck_assert_int_eq(mkdir(tmp_path("adir"), 0700), 0);
    ck_assert_status(ctx, pdc_trainer_save(t, tmp_path("adir")), PDC_ERR_IO);
    /* the trainer and the earlier checkpoint are intact */
    ck_assert_ok(ctx, pdc_trainer_save(t, tmp_path("again.ckpt")));
    ck_assert(files_equal(tmp_path("keep.ckpt"), tmp_path("again.ckpt")));
    train_toy(t, &d, 1, &loss);
    ck_assert_ok(ctx, pdc_trainer_load(t, tmp_path("keep.ckpt")));
    pdc_trainer_destroy(t);
    free_toy(&d);
}
END_TEST

/* 1 if a file in dir has a name starting with prefix. */
static int dir_has_prefix(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    int found = 0;
    const size_t n = strlen(prefix);
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL) found = !strncmp(e->d_name, prefix, n);
    closedir(d);
    return found;
}

/* A big model, so that writing a checkpoint takes a while. */
static const char *big_model =
    HDR "input x : f32[1,2048]\nconst w : f32[1024,2048] = dense<elided>\nconst b : f32[1024] = dense<elided>\n"
    "layer f = fc(x, w, b) -> (y)\noutput y\n";

/* Loads path into a fresh trainer and returns the first bias value (each save in the child writes its round
 * number there), or -1 if the file is refused. */
static float saved_round(const char *path)
{
    pdc_model *m = parse_model(big_model);
    pdc_trainer *t;
    ck_assert_ok(ctx, pdc_trainer_create(ctx, m, &t));
    pdc_model_destroy(m);
    float r = -1.0f;
    if (pdc_trainer_load(t, path) == PDC_OK) r = t->net->model->tensors[t->net->params[1].tensor].data[0];
    pdc_trainer_destroy(t);
    return r;
}

START_TEST(killed_while_saving_leaves_the_last_good_checkpoint)
{
    const char *path = tmp_path("big.ckpt");
    {
        pdc_model *m = parse_model(big_model);
        pdc_trainer *t;
        ck_assert_ok(ctx, pdc_trainer_create(ctx, m, &t));
        pdc_model_destroy(m);
        ck_assert_ok(ctx, pdc_trainer_save(t, path)); /* round 0 */
        pdc_trainer_destroy(t);
    }
    const int rounds = quick() ? 4 : 12;
    int mid_write = 0;
    srand(1234);
    for (int round = 1; round <= rounds; round++) {
        const float before = saved_round(path);
        ck_assert_msg(before >= 0.0f, "round %d: the checkpoint does not load: %s", round, pdc_context_last_error(ctx));
        fflush(NULL);
        const pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) { /* child: save rounds forever, each with its round number in b[0] */
            pdc_model *m = parse_model(big_model);
            pdc_trainer *t;
            if (pdc_trainer_create(ctx, m, &t)) _exit(3);
            for (int k = 1;; k++) {
                float *b = t->net->model->tensors[t->net->params[1].tensor].data;
                b[0] = before + (float)k;
                if (pdc_trainer_save(t, path)) _exit(4);
            }
        }
        /* parent: odd rounds kill as soon as a temporary file shows up (mid-write for sure), even rounds
         * after a random delay (anywhere: before, during or between saves) */
        if (round % 2) {
            char tmpname[600];
            snprintf(tmpname, sizeof tmpname, "%s.tmp.", path);
            const char *base = strrchr(tmpname, '/') + 1;
            int seen = 0;
            for (int spin = 0; spin < 200000 && !seen; spin++) {
                seen = dir_has_prefix(tmpdir, base);
                if (!seen) {
                    struct timespec ts = {0, 20000};
                    nanosleep(&ts, NULL);
                }
            }
            if (seen) mid_write++;
        } else {
            struct timespec ts = {0, (long)(rand() % 30000) * 1000L};
            nanosleep(&ts, NULL);
        }
        kill(pid, SIGKILL);
        int status;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFSIGNALED(status), "child exited with %d", WEXITSTATUS(status));
        const float after = saved_round(path);
        ck_assert_msg(after >= before && after == floorf(after), "round %d: checkpoint holds %g after the kill (before: %g): %s",
                      round, (double)after, (double)before, pdc_context_last_error(ctx));
    }
    ck_assert_msg(mid_write > 0, "no kill landed while a checkpoint was being written");
    /* the killed saves' temp files: once stale (backdated here), the next save removes them */
    char base[600];
    snprintf(base, sizeof base, "%s.tmp.", strrchr(path, '/') + 1);
    DIR *dir = opendir(tmpdir);
    struct dirent *e;
    int left = 0;
    while ((e = readdir(dir)) != NULL) {
        if (strncmp(e->d_name, base, strlen(base))) continue;
        char full[1200];
        snprintf(full, sizeof full, "%s/%s", tmpdir, e->d_name);
        struct timespec old[2] = {{time(NULL) - 3600, 0}, {time(NULL) - 3600, 0}};
        ck_assert_int_eq(utimensat(AT_FDCWD, full, old, 0), 0);
        left++;
    }
    closedir(dir);
    pdc_model *m = parse_model(big_model);
    pdc_trainer *t;
    ck_assert_ok(ctx, pdc_trainer_create(ctx, m, &t));
    pdc_model_destroy(m);
    ck_assert_ok(ctx, pdc_trainer_save(t, path));
    pdc_trainer_destroy(t);
    ck_assert_msg(!dir_has_prefix(tmpdir, base), "%d stale temp files, not all removed", left);
}
END_TEST

int main(void)
{
    return run_tests("train_checkpoint", tmpdir_setup, tmpdir_teardown, 120,
                     TEST_LIST(resume_is_bit_exact, corrupt_and_truncated_checkpoints_are_refused,
                               nonfinite_checkpoints_are_refused,
                               checkpoint_admm_state_is_checked, checkpoint_of_another_model_is_refused,
                               unwritable_checkpoint_path_loses_nothing,
                               killed_while_saving_leaves_the_last_good_checkpoint));
}
