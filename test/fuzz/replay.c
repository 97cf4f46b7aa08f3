/*
 * replay.c - main() for replaying fuzz inputs without libFuzzer: `replay NAME PATH...` runs the
 * target's LLVMFuzzerTestOneInput on every file given and on every regular file inside the
 * folders given (not recursively, in name order, so runs are reproducible), then prints
 * "fuzz-replay NAME: N inputs, 0 failures". A failing input aborts inside the target, with the
 * broken property on stderr; the file being replayed is named on stderr before each run, so the
 * last one named is the culprit. Built with the normal compiler (and SANITIZE flags) by
 * `make test-fuzz-regressions`.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t n_inputs;

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "fuzz-replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    uint8_t *data = NULL;
    size_t size = 0, cap = 0;
    for (;;) {
        if (size == cap) {
            cap = cap ? 2 * cap : 4096;
            uint8_t *p = realloc(data, cap);
            if (!p) {
                fprintf(stderr, "fuzz-replay: %s: out of memory\n", path);
                free(data);
                fclose(f);
                return -1;
            }
            data = p;
        }
        size_t got = fread(data + size, 1, cap - size, f);
        size += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        fprintf(stderr, "fuzz-replay: %s: read error\n", path);
        free(data);
        return -1;
    }
    fprintf(stderr, "fuzz-replay: running %s (%zu bytes)\n", path, size);
    /* The target gets a buffer of exactly `size` bytes, as libFuzzer gives it. */
    uint8_t *exact = malloc(size ? size : 1);
    if (!exact) {
        free(data);
        return -1;
    }
    if (size) memcpy(exact, data, size);
    free(data);
    LLVMFuzzerTestOneInput(exact, size);
    free(exact);
    n_inputs++;
    return 0;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int replay_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) return 0; /* a target may have no regressions yet */
        fprintf(stderr, "fuzz-replay: %s: %s\n", dir, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **p = realloc(names, cap * sizeof *names);
            if (!p) {
                rc = -1;
                break;
            }
            names = p;
        }
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        if (!(names[n] = malloc(len))) {
            rc = -1;
            break;
        }
        snprintf(names[n], len, "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, cmp_names);
    for (size_t i = 0; i < n; i++) {
        struct stat sb;
        if (rc == 0 && stat(names[i], &sb) == 0 && S_ISREG(sb.st_mode)) rc = replay_file(names[i]);
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s NAME [FILE|DIR]...\n", argv[0]);
        return 2;
    }
    for (int i = 2; i < argc; i++) {
        struct stat sb;
        int rc;
        if (stat(argv[i], &sb) == 0 && S_ISDIR(sb.st_mode)) rc = replay_dir(argv[i]);
        else rc = replay_file(argv[i]);
        if (rc) return 1;
    }
    printf("fuzz-replay %s: %zu inputs, 0 failures\n", argv[1], n_inputs);
    return 0;
}
