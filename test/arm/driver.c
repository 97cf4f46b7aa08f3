/*
 * driver.c - runs one emitted AArch64 model (pdc_model_emit "aarch64-linux-gnu") under qemu for the
 * tests and the report. Built per model:
 *   aarch64-linux-gnu-gcc -O2 -I DIR -DPDC_MODEL=NAME '-DPDC_HEADER="NAME.h"' driver.c DIR/libNAME.a -lm
 * Usage: driver [-nCOUNT] IN0.bin ... -- OUT0.bin ...
 * Reads each input (raw float32, exactly NAME_INPUTi_SIZE floats), calls NAME_run COUNT times
 * (default 1; the report subtracts runs to count the instructions of one inference) and writes each
 * output as raw float32. Exit status 0 on success; prints NAME_version to stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include PDC_HEADER

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define M(x) CAT(PDC_MODEL, x)

#define MAX_IO 16

static float *read_floats(const char *path, long *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *p = malloc(bytes > 0 ? (size_t)bytes : 1);
    if (p && fread(p, 1, (size_t)bytes, f) != (size_t)bytes) {
        free(p);
        p = NULL;
    }
    fclose(f);
    *n = bytes / (long)sizeof(float);
    return p;
}

int main(int argc, char **argv)
{
    long count = 1;
    int a = 1;
    if (a < argc && !strncmp(argv[a], "-n", 2)) count = atol(argv[a++] + 2);
    float *in[MAX_IO], *out[MAX_IO];
    long in_n[MAX_IO];
    const char *out_path[MAX_IO];
    long out_n[MAX_IO];
    int ni = 0, no = 0;
    for (; a < argc && strcmp(argv[a], "--"); a++) {
        if (ni == MAX_IO || !(in[ni] = read_floats(argv[a], &in_n[ni]))) {
            fprintf(stderr, "driver: cannot read %s\n", argv[a]);
            return 2;
        }
        ni++;
    }
    for (a++; a < argc; a++) {
        /* OUT.bin:FLOATS */
        char *colon = strrchr(argv[a], ':');
        if (no == MAX_IO || !colon) {
            fprintf(stderr, "driver: output argument %s is not PATH:FLOATS\n", argv[a]);
            return 2;
        }
        *colon = 0;
        out_path[no] = argv[a];
        out_n[no] = atol(colon + 1);
        out[no] = calloc((size_t)out_n[no] + 1, sizeof(float));
        no++;
    }
    if (ni != M(_NUM_INPUTS) || no != M(_NUM_OUTPUTS) || in_n[0] != M(_INPUT0_SIZE)) {
        fprintf(stderr, "driver: model wants %d inputs (the first of %ld floats) and %d outputs\n", M(_NUM_INPUTS),
                (long)M(_INPUT0_SIZE), M(_NUM_OUTPUTS));
        return 2;
    }
    fprintf(stderr, "%s\n", M(_version));
    for (long r = 0; r < count; r++) {
#if M(_NUM_INPUTS) == 1 && M(_NUM_OUTPUTS) == 1
        int rc = M(_run)(in[0], out[0]);
#else
        int rc = M(_run)((const float *const *)in, out);
#endif
        if (rc != 0) {
            fprintf(stderr, "driver: run returned %d\n", rc);
            return 3;
        }
    }
    for (int i = 0; i < no; i++) {
        FILE *f = fopen(out_path[i], "wb");
        if (!f || fwrite(out[i], sizeof(float), (size_t)out_n[i], f) != (size_t)out_n[i] || fclose(f)) {
            fprintf(stderr, "driver: cannot write %s\n", out_path[i]);
            return 2;
        }
    }
    return 0;
}
