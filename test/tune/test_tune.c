/*
 * test_tune.c - kernel tuning for the cpu target (lib/tune): layer signatures; the tuning database
 * (round trip, damaged / other-version / foreign entries ignored with a note, concurrent writers);
 * every configuration the backend lists compiles, is honoured (the kernel description says so) and
 * computes what the reference interpreter does; pdc_model_tune, option tune, and their errors. No
 * test asserts a time.
 */
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ir/ir.h"
#include "lib/core/context.h"
#include "lib/tune/tune.h"

#include "test/common/builders.h"

static void use_tmp_cache(void)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/cache", tmpdir);
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "cache_dir", dir));
}

/* x[1,8,12,12] -> p1 (3x3 pad 1, 8->16, pattern-sparse, relu) -> p2 (the same shape, 16->16, pattern)
 * -> p4 (p2's shape and weights: the same signature) -> p3 (3x3 stride 2, 16->16, pattern) -> d1
 * (3x3 pad 1, dense) */
static pdc_model *tune_model(void)
{
    pdc_model *m = new_model("tune");
    add_input(m, "x", 4, (const int64_t[]){1, 8, 12, 12});
    add_random(m, "w1", 4, (const int64_t[]){16, 8, 3, 3}, 1, -1, 1);
    add_random(m, "b1", 1, (const int64_t[]){16}, 2, -0.1f, 0.1f);
    add_random(m, "w2", 4, (const int64_t[]){16, 16, 3, 3}, 3, -1, 1);
    add_random(m, "w3", 4, (const int64_t[]){16, 16, 3, 3}, 4, -1, 1);
    add_random(m, "w4", 4, (const int64_t[]){16, 16, 3, 3}, 5, -1, 1);
    add_random(m, "w5", 4, (const int64_t[]){16, 16, 3, 3}, 3, -1, 1);
    pdc_attrs *a = pads(1);
    ck_assert_ok(ctx, pdc_attrs_set_string(a, "activation", "relu"));
    add_layer(m, "p1", "conv", "x,w1,b1", "y1", a);
    add_layer(m, "p2", "conv", "y1,w2", "y2", pads(1));
    pdc_attrs *s = pads(1);
    ck_assert_ok(ctx, pdc_attrs_set_ints(s, "strides", 2, (const int64_t[]){2, 2}));
    add_layer(m, "p4", "conv", "y2,w5", "y5", pads(1));
    add_layer(m, "p3", "conv", "y5,w3", "y3", s);
    add_layer(m, "d1", "conv", "y3,w4", "y4", pads(1));
    add_output(m, "y4");
    pdc_attrs *o = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_int(o, "include_stem", 1));
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "layers", "p1,p2,p3,p4"));
    ck_assert_ok(ctx, transform(m, "prune-pattern,prune-connectivity", o));
    return m;
}

static int layer_index(const pdc_model *m, const char *name)
{
    int li = ir_model_find_layer(m, name);
    ck_assert_int_ge(li, 0);
    return li;
}

START_TEST(signature_names_what_the_code_depends_on)
{
    pdc_model *m = tune_model();
    char host[512];
    ck_assert_ok(ctx, pdc_cpu_host_key(ctx, host, sizeof host));
    char k2[TUNE_KEY_MAX], k4[TUNE_KEY_MAX], k3[TUNE_KEY_MAX], kt[TUNE_KEY_MAX], kd[TUNE_KEY_MAX];
    ck_assert_ok(ctx, tune_layer_key(ctx, m, layer_index(m, "p2"), 1, host, k2, sizeof k2));
    ck_assert_ok(ctx, tune_layer_key(ctx, m, layer_index(m, "p4"), 1, host, k4, sizeof k4));
    ck_assert_ok(ctx, tune_layer_key(ctx, m, layer_index(m, "p3"), 1, host, k3, sizeof k3));
    ck_assert_ok(ctx, tune_layer_key(ctx, m, layer_index(m, "p2"), 2, host, kt, sizeof kt));
    ck_assert_ok(ctx, tune_layer_key(ctx, m, layer_index(m, "d1"), 1, host, kd, sizeof kd));
    /* p4 has p2's shapes, attributes and weights (so its pruning keeps the same weights) */
    ck_assert_str_eq(k2, k4);
    ck_assert_str_ne(k2, k3);
    ck_assert_str_ne(k2, kt);
    ck_assert_ptr_nonnull(strstr(k2, "conv x=1x16x12x12 w=16x16x3x3 bias=0 pads=1,1,1,1 kept=p3x3:"));
    ck_assert_ptr_nonnull(strstr(k2, host));
    ck_assert_ptr_nonnull(strstr(kt, "| threads=2 | pdc 0.4.0"));
    ck_assert_ptr_nonnull(strstr(kd, " kept=dense |"));
    ck_assert_ptr_nonnull(strstr(k3, " strides=2,2"));
    ck_assert_ptr_null(strchr(k2, '\n'));
    /* neither a conv nor an fc: no signature */
    pdc_model *f = parse_model("pdcir 1\nmodel \"r\"\ninput x : f32[1,4]\nlayer r = relu(x) -> (y)\noutput y\n");
    ck_assert_status(ctx, tune_layer_key(ctx, f, 0, 1, host, k2, sizeof k2), PDC_ERR_UNSUPPORTED);
    ck_assert_str_eq(k2, "");
    pdc_model_destroy(f);
    pdc_model_destroy(m);
}
END_TEST

static char note_text[1024];
static int notes;
static void on_note(void *user, pdc_note_kind kind, const char *pass, const char *layer, const char *text)
{
    (void)user;
    (void)layer;
    if (kind != PDC_NOTE_TUNE_IGNORED) return;
    ck_assert_str_eq(pass, "tune");
    snprintf(note_text, sizeof note_text, "%s", text);
    notes++;
}

static const tune_entry sample = {{PDC_KNOB_ROWS, 2, 1, 8, 1, 3}, 0.125, 0.25};

static void assert_entry_eq(const tune_entry *a, const tune_entry *b)
{
    ck_assert_mem_eq(&a->knobs, &b->knobs, sizeof a->knobs);
    ck_assert_double_eq_tol(a->tuned_ms, b->tuned_ms, 1e-9);
    ck_assert_double_eq_tol(a->default_ms, b->default_ms, 1e-9);
}

START_TEST(database_round_trip)
{
    use_tmp_cache();
    const char *key = "conv x=1x2 | host | threads=1 | pdc 0.4.0";
    tune_entry e;
    ck_assert_int_eq(tune_db_get(ctx, key, &e), 0); /* none yet */
    ck_assert_ok(ctx, tune_db_put(ctx, key, &sample));
    ck_assert_int_eq(tune_db_get(ctx, key, &e), 1);
    assert_entry_eq(&e, &sample);
    char path[PDC_PATH_MAX + 64];
    tune_db_path(ctx, key, path, sizeof path);
    char want[600];
    snprintf(want, sizeof want, "%s/cache/tune/", tmpdir);
    ck_assert_int_eq(strncmp(path, want, strlen(want)), 0);
    size_t len;
    char *text = test_read_file(path, &len);
    const char *head = "pdc-tune 2\nkey conv x=1x2 | host | threads=1 | pdc 0.4.0\nknobs 1 2 1 8 1 3\n";
    ck_assert_int_eq(strncmp(text, head, strlen(head)), 0);
    free(text);
    /* replaced whole by the next put */
    tune_entry other = sample;
    other.knobs.tile_y = 3;
    ck_assert_ok(ctx, tune_db_put(ctx, key, &other));
    ck_assert_int_eq(tune_db_get(ctx, key, &e), 1);
    ck_assert_int_eq(e.knobs.tile_y, 3);
}
END_TEST

/* Writes text as key's entry, then expects tune_db_get to refuse it with a note containing why. */
static void expect_refused(const char *key, const char *text, size_t len, const char *why)
{
    char path[PDC_PATH_MAX + 64];
    tune_db_path(ctx, key, path, sizeof path);
    write_file(path, text, len);
    notes = 0;
    note_text[0] = 0;
    tune_entry e = {{9, 9, 9, 9, 9, 9}, 9, 9};
    ck_assert_int_eq(tune_db_get(ctx, key, &e), 0);
    ck_assert_int_eq(notes, 1);
    ck_assert_msg(strstr(note_text, why) && strstr(note_text, path), "note '%s' lacks '%s'", note_text, why);
    ck_assert_int_eq(e.knobs.family, 9); /* untouched */
}

START_TEST(database_refuses_bad_entries)
{
    use_tmp_cache();
    pdc_context_set_option(ctx, "log_level", "error");
    pdc_context_set_note_handler(ctx, on_note, NULL);
    const char *key = "conv x=1x2 | host | threads=1 | pdc 0.4.0";
    char *text;
    size_t len;
    ck_assert_ok(ctx, tune_db_put(ctx, key, &sample)); /* creates the folder */
    ck_assert_ok(ctx, tune_entry_format(ctx, key, &sample, &text, &len));
    /* a changed value: the checksum */
    char *bad = strdup(text);
    *strstr(bad, "knobs 1 2") = 'K';
    expect_refused(key, bad, len, "malformed entry");
    strcpy(bad, text);
    strstr(bad, "knobs 1 2")[6] = '3';
    expect_refused(key, bad, len, "checksum mismatch: the entry is damaged");
    /* cut short, and empty */
    expect_refused(key, text, len - 10, "checksum line");
    expect_refused(key, "", 0, "not a pdc tuning entry");
    /* another format version: 1 (before the threads knob), and a later one */
    strcpy(bad, text);
    bad[9] = '1';
    expect_refused(key, bad, len, "format version 1, this pdc reads 2");
    bad[9] = '3';
    expect_refused(key, bad, len, "format version 3, this pdc reads 2");
    /* a valid entry of another key, copied under this key's name (foreign, or stale: an older pdc's) */
    char *foreign;
    size_t flen;
    ck_assert_ok(ctx, tune_entry_format(ctx, "conv x=1x2 | host | threads=1 | pdc 0.3.0", &sample, &foreign, &flen));
    expect_refused(key, foreign, flen, "for another layer or host");
    /* a family out of range, checksum recomputed */
    tune_entry wild = sample;
    wild.knobs.family = 7;
    char *w;
    size_t wlen;
    ck_assert_ok(ctx, tune_entry_format(ctx, key, &wild, &w, &wlen));
    expect_refused(key, w, wlen, "a value is out of range (knobs 7 2 1 8 1 3)");
    pdc_free(w);
    wild = sample;
    wild.knobs.threads = -1;
    ck_assert_ok(ctx, tune_entry_format(ctx, key, &wild, &w, &wlen));
    expect_refused(key, w, wlen, "a value is out of range (knobs 1 2 1 8 1 -1)");
    pdc_free(w);
    wild = sample;
    wild.tuned_ms = -1;
    ck_assert_ok(ctx, tune_entry_format(ctx, key, &wild, &w, &wlen));
    expect_refused(key, w, wlen, "a value is out of range (ms -1.000000 0.250000)");
    /* not a regular file */
    char path[PDC_PATH_MAX + 64];
    tune_db_path(ctx, key, path, sizeof path);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(mkdir(path, 0700), 0);
    notes = 0;
    tune_entry e;
    ck_assert_int_eq(tune_db_get(ctx, key, &e), 0);
    ck_assert_int_eq(notes, 1);
    ck_assert_ptr_nonnull(strstr(note_text, "unreadable"));
    ck_assert_int_eq(rmdir(path), 0);
    /* a good one is taken again */
    ck_assert_ok(ctx, tune_db_put(ctx, key, &sample));
    notes = 0;
    ck_assert_int_eq(tune_db_get(ctx, key, &e), 1);
    ck_assert_int_eq(notes, 0);
    pdc_free(text);
    pdc_free(foreign);
    pdc_free(w);
    free(bad);
}
END_TEST

START_TEST(database_concurrent_writers)
{
    /* 6 processes each replace the entry 40 times with their own tile; every read in between and the
     * final state are whole entries of one writer, and no temporary file is left */
    use_tmp_cache();
    const char *key = "conv concurrent | host | threads=1 | pdc 0.4.0";
    ck_assert_ok(ctx, tune_db_put(ctx, key, &sample));
    pid_t kids[6];
    for (int k = 0; k < 6; k++) {
        kids[k] = fork();
        ck_assert_int_ge(kids[k], 0);
        if (kids[k] == 0) {
            tune_entry e = sample;
            e.knobs.tile_y = k + 1;
            int bad = 0;
            for (int i = 0; i < 40; i++) {
                if (tune_db_put(ctx, key, &e)) bad = 1;
                tune_entry r;
                if (!tune_db_get(ctx, key, &r) || r.knobs.tile_y < 1 || r.knobs.tile_y > 6 || r.knobs.chunk != 8) bad = 1;
            }
            _exit(bad);
        }
    }
    for (int k = 0; k < 6; k++) {
        int status = 0;
        ck_assert_int_eq(waitpid(kids[k], &status, 0), kids[k]);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer %d saw a bad entry", k);
    }
    tune_entry e;
    ck_assert_int_eq(tune_db_get(ctx, key, &e), 1);
    ck_assert_int_ge(e.knobs.tile_y, 1);
    ck_assert_int_le(e.knobs.tile_y, 6);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "ls '%s/cache/tune' | grep -c tmp", tmpdir);
    FILE *p = popen(cmd, "r");
    char out[16] = "";
    ck_assert_ptr_nonnull(fgets(out, sizeof out, p));
    pclose(p);
    ck_assert_str_eq(out, "0\n");
}
END_TEST

/* m's outputs (all concatenated) on target with input seed; malloc'd. */
static float *run_on(const pdc_model *m, const char *target, pdc_program **keep, size_t *n)
{
    pdc_program *p;
    ck_assert_ok(ctx, pdc_compile(ctx, m, target, &p));
    pdc_tensor *in = io_tensor(ctx, p, 0, 0), *out = io_tensor(ctx, p, 1, 0);
    test_fill_random(pdc_tensor_data(in), pdc_tensor_size(in), 7);
    ck_assert_ok(ctx, pdc_program_run(p, 1, &in, 1, &out));
    *n = pdc_tensor_size(out);
    float *y = malloc(*n * sizeof *y);
    memcpy(y, pdc_tensor_data(out), *n * sizeof *y);
    pdc_tensor_destroy(in);
    pdc_tensor_destroy(out);
    if (keep) *keep = p;
    else pdc_program_destroy(p);
    return y;
}

/* What the kernel description of a layer compiled with k must say (NULL: nothing to check). */
static const char *expected_info(const pdc_layer_knobs *k, char *buf, size_t cap)
{
    if (k->threads) {
        snprintf(buf, cap, "; on %d of 2 threads (tuned)", (int)k->threads);
        return buf;
    }
    if (k->family == PDC_KNOB_CMAJOR) return "channel-major";
    if (k->family == PDC_KNOB_OCVEC) return "output channels vectorised";
    if (k->family == PDC_KNOB_DENSE) return "filters x";
    if (k->family == PDC_KNOB_ROWS && k->tile_y) {
        snprintf(buf, cap, "tile %dx%dx", (int)k->tile_y, (int)k->tile_x);
        return buf;
    }
    return NULL;
}

/* Every configuration of layer `layer`'s space at `threads` threads (with only_threaded: those with a
 * thread count of their own) put in the database, compiled, honoured and equal to the reference's
 * outputs `want`; counts what it saw. Returns the size of the space. */
static size_t check_space(pdc_model *m, const float *want, size_t n_ref, const char *layer, int threads,
                          int only_threaded, int *families_seen, size_t *tiles_seen, size_t *threaded_seen)
{
    char t[16];
    snprintf(t, sizeof t, "%d", threads);
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "threads", t));
    int li = layer_index(m, layer);
    char key[TUNE_KEY_MAX], host[512];
    ck_assert_ok(ctx, pdc_cpu_host_key(ctx, host, sizeof host));
    ck_assert_ok(ctx, tune_layer_key(ctx, m, (size_t)li, threads, host, key, sizeof key));
    pdc_layer_knobs *space;
    size_t n;
    ck_assert_ok(ctx, pdc_cpu_knob_space(ctx, m, (size_t)li, &space, &n));
    const pdc_layer_knobs zero = {0, 0, 0, 0, 0, 0};
    ck_assert_mem_eq(&space[0], &zero, sizeof zero);
    for (size_t c = 0; c < n; c++) {
        /* no two alike; a thread count of its own only below the team's */
        for (size_t d = 0; d < c; d++) ck_assert(memcmp(&space[c], &space[d], sizeof space[c]));
        ck_assert(space[c].threads >= 0 && space[c].threads < threads);
        if (only_threaded && !space[c].threads) continue;
        tune_entry e = {space[c], 1, 1};
        ck_assert_ok(ctx, tune_db_put(ctx, key, &e));
        pdc_program *p;
        size_t n_got;
        float *got = run_on(m, "cpu", &p, &n_got);
        ck_assert_uint_eq(n_got, n_ref);
        char what[64];
        snprintf(what, sizeof what, "%s config %zu at %d threads", layer, c, threads);
        test_assert_close(got, want, n_ref, 1e-4f, "cpu", what);
        char buf[64];
        const char *info = expected_info(&space[c], buf, sizeof buf);
        const char *got_info = NULL;
        ck_assert_ok(ctx, pdc_program_layer_kernel(p, (size_t)li, NULL, &got_info));
        if (info) ck_assert_msg(strstr(got_info, info), "%s: '%s' lacks '%s'", what, got_info, info);
        if (!space[c].threads) ck_assert_msg(!strstr(got_info, "(tuned)"), "%s: '%s'", what, got_info);
        families_seen[space[c].family]++;
        *tiles_seen += space[c].tile_y > 0;
        *threaded_seen += space[c].threads > 0;
        free(got);
        pdc_program_destroy(p);
    }
    pdc_free(space);
    return n;
}

START_TEST(every_configuration_is_honoured_and_matches_ref)
{
    use_tmp_cache();
    pdc_model *m = tune_model();
    size_t n_ref;
    float *want = run_on(m, "ref", NULL, &n_ref);
    const char *layers[] = {"p2", "p3", "d1"};
    int families_seen[PDC_KNOB_FAMILIES] = {0};
    size_t tiles_seen = 0, threaded_seen = 0;
    for (size_t j = 0; j < 3; j++)
        ck_assert_uint_gt(check_space(m, want, n_ref, layers[j], 1, 0, families_seen, &tiles_seen, &threaded_seen), 3);
    /* pattern layers offer the channel-major family, the dense one both dense families */
    ck_assert_int_ge(families_seen[PDC_KNOB_CMAJOR], 2);
    ck_assert_int_ge(families_seen[PDC_KNOB_OCVEC], 1);
    ck_assert_int_ge(families_seen[PDC_KNOB_DENSE], 1);
    ck_assert_uint_gt(tiles_seen, 4);
    ck_assert_uint_eq(threaded_seen, 0); /* one thread: nothing fewer to offer */
    /* on 2 threads each family as the heuristics set it is offered on 1 too: pattern layers the
     * heuristics, channel-major and rows, the dense one the heuristics and its three families */
    for (size_t j = 0; j < 3; j++) check_space(m, want, n_ref, layers[j], 2, 1, families_seen, &tiles_seen, &threaded_seen);
    ck_assert_uint_eq(threaded_seen, 3 + 3 + 4);
    free(want);
    pdc_model_destroy(m);
}
END_TEST

/* A dense conv with fewer filters than a vector has lanes: the output-channel-vector family cannot take
 * it (whole vectors of filters), so it is not offered; nor either dense family for a depthwise conv (one
 * filter a group); what is offered is honoured. */
START_TEST(configurations_offered_are_the_ones_honoured)
{
    use_tmp_cache();
    pdc_model *m = new_model("narrow");
    add_input(m, "x", 4, (const int64_t[]){1, 8, 12, 12});
    add_random(m, "w", 4, (const int64_t[]){4, 8, 3, 3}, 1, -1, 1);
    add_layer(m, "n1", "conv", "x,w", "y", pads(1));
    add_output(m, "y");
    size_t n_ref;
    float *want = run_on(m, "ref", NULL, &n_ref);
    int families_seen[PDC_KNOB_FAMILIES] = {0};
    size_t tiles_seen = 0, threaded_seen = 0;
    check_space(m, want, n_ref, "n1", 1, 0, families_seen, &tiles_seen, &threaded_seen);
    ck_assert_int_eq(families_seen[PDC_KNOB_OCVEC], 0);
    ck_assert_int_eq(families_seen[PDC_KNOB_DENSE], 1);
    free(want);
    pdc_model_destroy(m);
    /* depthwise: one filter a group, neither dense family can take it */
    m = new_model("depthwise");
    add_input(m, "x", 4, (const int64_t[]){1, 16, 12, 12});
    add_random(m, "w", 4, (const int64_t[]){16, 1, 3, 3}, 2, -1, 1);
    pdc_attrs *a = pads(1);
    ck_assert_ok(ctx, pdc_attrs_set_int(a, "group", 16));
    add_layer(m, "dw", "conv", "x,w", "y", a);
    add_output(m, "y");
    want = run_on(m, "ref", NULL, &n_ref);
    check_space(m, want, n_ref, "dw", 1, 0, families_seen, &tiles_seen, &threaded_seen);
    ck_assert_int_eq(families_seen[PDC_KNOB_OCVEC], 0);
    ck_assert_int_eq(families_seen[PDC_KNOB_DENSE], 1);
    free(want);
    pdc_model_destroy(m);
}
END_TEST

/* An fc layer: its thread count is its knob. */
START_TEST(fc_threads_are_tuned_and_honoured)
{
    use_tmp_cache();
    pdc_model *m = new_model("fc");
    add_input(m, "x", 2, (const int64_t[]){4, 256});
    add_random(m, "w", 2, (const int64_t[]){64, 256}, 1, -1, 1);
    add_random(m, "b", 1, (const int64_t[]){64}, 2, -0.1f, 0.1f);
    add_layer(m, "f", "fc", "x,w,b", "y", NULL);
    add_output(m, "y");
    char host[512], key[TUNE_KEY_MAX];
    ck_assert_ok(ctx, pdc_cpu_host_key(ctx, host, sizeof host));
    ck_assert_ok(ctx, tune_layer_key(ctx, m, 0, 2, host, key, sizeof key));
    ck_assert_ptr_nonnull(strstr(key, "fc x=4x256 w=64x256 bias=1 kept=dense |"));
    size_t n_ref;
    float *want = run_on(m, "ref", NULL, &n_ref);
    int families_seen[PDC_KNOB_FAMILIES] = {0};
    size_t tiles_seen = 0, threaded_seen = 0;
    /* 1 thread: nothing to choose; 2: the heuristics on 2 or on 1 */
    ck_assert_uint_eq(check_space(m, want, n_ref, "f", 1, 0, families_seen, &tiles_seen, &threaded_seen), 1);
    ck_assert_uint_eq(check_space(m, want, n_ref, "f", 2, 0, families_seen, &tiles_seen, &threaded_seen), 2);
    ck_assert_uint_eq(threaded_seen, 1);
    ck_assert_int_eq(families_seen[PDC_KNOB_AUTO], 3);
    free(want);
    pdc_model_destroy(m);
}
END_TEST

/* 3-D convs: each runs as 2-D convs of its depth planes, every plane with the layer's knobs; the space
 * is that of its middle plane. x[1,8,3,12,12] -> c1 (3x3x3 pad 1, 8->16, dense, relu; the stem) -> k1
 * (3x3x3 pad 1, 16->16, KGS) -> k2 (3x3x3 pad 1 stride 2, 16->16, KGS). */
START_TEST(conv3d_configurations_are_honoured_and_match_ref)
{
    use_tmp_cache();
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "threads", "1"));
    pdc_model *m = new_model("tune3d");
    add_input(m, "x", 5, (const int64_t[]){1, 8, 3, 12, 12});
    add_random(m, "w1", 5, (const int64_t[]){16, 8, 3, 3, 3}, 31, -1, 1);
    add_random(m, "b1", 1, (const int64_t[]){16}, 32, -0.1f, 0.1f);
    add_random(m, "w2", 5, (const int64_t[]){16, 16, 3, 3, 3}, 33, -1, 1);
    add_random(m, "w3", 5, (const int64_t[]){16, 16, 3, 3, 3}, 34, -1, 1);
    const int64_t p1[6] = {1, 1, 1, 1, 1, 1};
    pdc_attrs *a = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "pads", 6, p1));
    ck_assert_ok(ctx, pdc_attrs_set_string(a, "activation", "relu"));
    add_layer(m, "c1", "conv", "x,w1,b1", "y1", a);
    a = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "pads", 6, p1));
    add_layer(m, "k1", "conv", "y1,w2", "y2", a);
    a = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "pads", 6, p1));
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "strides", 3, (const int64_t[]){2, 2, 2}));
    add_layer(m, "k2", "conv", "y2,w3", "y3", a);
    add_output(m, "y3");
    /* at most 8 group masks: their depth slices fit the pattern generator's 32 (more run dense) */
    pdc_attrs *o = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_int(o, "kgs_masks", 8));
    ck_assert_ok(ctx, pdc_model_transform(m, "prune-kgs", o));
    pdc_attrs_destroy(o);
    size_t n_ref;
    float *want = run_on(m, "ref", NULL, &n_ref);
    int families_seen[PDC_KNOB_FAMILIES] = {0};
    size_t tiles_seen = 0, threaded_seen = 0;
    const char *layers[] = {"c1", "k1", "k2"};
    for (size_t j = 0; j < 3; j++)
        ck_assert_uint_gt(check_space(m, want, n_ref, layers[j], 1, 0, families_seen, &tiles_seen, &threaded_seen), 3);
    /* the dense stem offers both dense families, the KGS layers the channel-major one, and tiles */
    ck_assert_int_ge(families_seen[PDC_KNOB_OCVEC], 1);
    ck_assert_int_ge(families_seen[PDC_KNOB_DENSE], 1);
    ck_assert_int_ge(families_seen[PDC_KNOB_CMAJOR], 2);
    ck_assert_uint_gt(tiles_seen, 2);
    free(want);
    pdc_model_destroy(m);
}
END_TEST

static int tuned_notes;
static void on_tuned(void *user, pdc_note_kind kind, const char *pass, const char *layer, const char *text)
{
    (void)user;
    (void)pass;
    ck_assert_int_eq(kind, PDC_NOTE_TUNED);
    ck_assert(strcmp(layer, "p4")); /* p4 shares p2's signature: tuned once */
    ck_assert_ptr_nonnull(strstr(text, " ms (heuristics "));
    tuned_notes++;
}

START_TEST(model_tune_then_compiles_use_it)
{
    use_tmp_cache();
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "threads", "1"));
    pdc_model *m = tune_model();
    pdc_context_set_note_handler(ctx, on_tuned, NULL);
    pdc_attrs *o = opt_i("budget_s", 2);
    size_t n = 99;
    tuned_notes = 0;
    ck_assert_ok(ctx, pdc_model_tune(ctx, m, "cpu", o, &n));
    ck_assert_uint_eq(n, 4); /* p1, p2 (= p4), p3, d1 */
    ck_assert_int_eq(tuned_notes, 4);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "ls '%s/cache/tune' | grep -c '\\.txt$'", tmpdir);
    FILE *p = popen(cmd, "r");
    char out[16] = "";
    ck_assert_ptr_nonnull(fgets(out, sizeof out, p));
    pclose(p);
    ck_assert_str_eq(out, "4\n");
    /* a second run finds them all */
    ck_assert_ok(ctx, pdc_model_tune(ctx, m, NULL, NULL, &n));
    ck_assert_uint_eq(n, 0);
    /* compiles read them: outputs as the reference's, with tune cached (default), off and on */
    size_t nr, nc;
    float *want = run_on(m, "ref", NULL, &nr);
    assert_context_option("tune", "cached");
    const char *modes[] = {"cached", "off", "on"};
    for (int k = 0; k < 3; k++) {
        ck_assert_ok(ctx, pdc_context_set_option(ctx, "tune", modes[k]));
        assert_context_option("tune", modes[k]);
        float *got = run_on(m, "cpu", NULL, &nc);
        ck_assert_uint_eq(nc, nr);
        test_assert_close(got, want, nr, 1e-4f, "cpu", modes[k]);
        free(got);
    }
    ck_assert_int_eq(tuned_notes, 4); /* nothing was missing */
    /* tune=on in a fresh cache tunes during the compile */
    char dir[600];
    snprintf(dir, sizeof dir, "%s/cache2", tmpdir);
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "cache_dir", dir));
    float *got = run_on(m, "cpu", NULL, &nc);
    test_assert_close(got, want, nr, 1e-4f, "cpu", "tune=on");
    ck_assert_int_eq(tuned_notes, 8);
    free(got);
    free(want);
    pdc_attrs_destroy(o);
    pdc_model_destroy(m);
}
END_TEST

START_TEST(bad_arguments)
{
    pdc_model *m = tune_model();
    ck_assert_status(ctx, pdc_context_set_option(ctx, "tune", "yes"), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "option tune: expected off, cached or on, got \"yes\"");
    ck_assert_status(ctx, pdc_model_tune(ctx, m, "ref", NULL, NULL), PDC_ERR_UNSUPPORTED);
    ck_assert_error_has(ctx, "only \"cpu\" has kernels to tune");
    ck_assert_status(ctx, pdc_model_tune(ctx, m, "tpu", NULL, NULL), PDC_ERR_UNKNOWN_TARGET);
    ck_assert_status(ctx, pdc_model_tune(ctx, NULL, "cpu", NULL, NULL), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "model is NULL");
    pdc_attrs *o = opt_i("budget_s", 0);
    ck_assert_status(ctx, pdc_model_tune(ctx, m, "cpu", o, NULL), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "option budget_s: expected seconds in 1..3600");
    pdc_attrs_destroy(o);
    o = opt_i("seed", 1);
    ck_assert_status(ctx, pdc_model_tune(ctx, m, "cpu", o, NULL), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "unknown option 'seed' (known: budget_s)");
    pdc_attrs_destroy(o);
    pdc_model_destroy(m);
}
END_TEST

int main(void)
{
    return run_tests("tune", tmpdir_setup, tmpdir_teardown, 300,
                     TEST_LIST(signature_names_what_the_code_depends_on, database_round_trip, database_refuses_bad_entries,
                               database_concurrent_writers, every_configuration_is_honoured_and_matches_ref,
                               configurations_offered_are_the_ones_honoured, fc_threads_are_tuned_and_honoured, conv3d_configurations_are_honoured_and_match_ref,
                               model_tune_then_compiles_use_it, bad_arguments));
}
