/*
 * fuzz_raw_input.c - libFuzzer target: how the pdc tool reads its inputs (examples/pdc): the
 * --shape NAME=DIMS parser (cli_parse_shape), the element count with its overflow check
 * (cli_shape_elems), and the raw little-endian float32 reader with its file-size check
 * (raw_read_f32), exactly as `pdc run --shape ... --input FILE` uses them.
 *
 * Input: a --shape value, a newline, then the bytes of the raw input file (written to a scratch
 * file, since the reader takes a path and checks the file's size and type).
 * Properties, beyond no crash: a refused spec gets a "bad --shape" message; an accepted one has
 * 1..PDC_MAX_RANK dims in 1..2^40 and formats back (cli_format_shape) to a spec that parses to the
 * same shape; the reader accepts the file exactly when it holds 4 x elements bytes, and then the
 * floats are the file's bytes, bit for bit; writing them back (raw_write_f32) gives the same file.
 * The tool prints one line per refused file on stderr: run this target with -close_fd_mask=2.
 */
#include <fcntl.h>
#include <unistd.h>

#include "examples/pdc/cli.h"
#include "fuzz.h"

#define READ_MAX_ELEMS ((size_t)1 << 20) /* larger inputs would be refused by the tensor allocation first */

static char scratch[64];

static void remove_scratch(void) { unlink(scratch); }

/* The scratch file, created once, in /dev/shm when there is one. */
static const char *scratch_path(void)
{
    if (scratch[0]) return scratch;
    snprintf(scratch, sizeof scratch, "%s/pdc-fuzz-raw.XXXXXX", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    int fd = mkstemp(scratch);
    if (fd < 0) fuzz_fail("cannot create %s", scratch);
    close(fd);
    atexit(remove_scratch);
    return scratch;
}

static void write_file(const char *path, const uint8_t *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    fuzz_check(f && fwrite(p, 1, n, f) == n && fclose(f) == 0, "cannot write %s", path);
}

static void check_format_round_trip(const cli_shape *sh)
{
    char dims[512], spec[1024], err[1024];
    cli_format_shape(sh->rank, sh->dims, dims, sizeof dims);
    snprintf(spec, sizeof spec, "%s=%s", sh->name, dims);
    cli_shape again;
    fuzz_check(cli_parse_shape(spec, &again, err, sizeof err) == 0, "formatted spec '%s' does not parse: %s", spec, err);
    fuzz_check(!strcmp(again.name, sh->name) && again.rank == sh->rank &&
                   !memcmp(again.dims, sh->dims, sh->rank * sizeof *sh->dims),
               "spec '%s' parses to a different shape", spec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nl = memchr(data, '\n', size);
    size_t spec_len = nl ? (size_t)(nl - data) : size;
    const uint8_t *raw = nl ? nl + 1 : data + size;
    size_t raw_len = nl ? size - spec_len - 1 : 0;

    char *spec = malloc(spec_len + 1);
    fuzz_check(spec != NULL, "malloc");
    memcpy(spec, data, spec_len);
    spec[spec_len] = '\0';

    cli_shape sh;
    char err[1024] = "";
    if (cli_parse_shape(spec, &sh, err, sizeof err) != 0) {
        fuzz_check(!strncmp(err, "bad --shape '", 13), "refused spec without a message: '%s'", err);
        free(spec);
        return 0;
    }
    fuzz_check(sh.name[0] != '\0' && sh.rank >= 1 && sh.rank <= PDC_MAX_RANK, "accepted a spec of rank %zu", sh.rank);
    for (size_t i = 0; i < sh.rank; i++)
        fuzz_check(sh.dims[i] >= 1 && sh.dims[i] <= ((int64_t)1 << 40), "accepted dim %lld", (long long)sh.dims[i]);
    check_format_round_trip(&sh);

    size_t n = 0;
    if (cli_shape_elems(sh.rank, sh.dims, &n) == 0 && n <= READ_MAX_ELEMS) {
        const char *path = scratch_path();
        write_file(path, raw, raw_len);
        float *dst = malloc(n ? n * 4 : 1);
        fuzz_check(dst != NULL, "malloc");
        int rc = raw_read_f32(path, dst, n, "fuzz input");
        fuzz_check((rc == CLI_EXIT_OK) == (raw_len == n * 4), "raw_read_f32 returned %d for %zu bytes, %zu floats",
                   rc, raw_len, n);
        if (rc == CLI_EXIT_OK) {
            for (size_t i = 0; i < n; i++) {
                uint32_t want = pdc_load_u32le(raw + 4 * i), got;
                memcpy(&got, &dst[i], 4);
                fuzz_check(got == want, "float %zu reads as %08x, file has %08x", i, got, want);
            }
            fuzz_check(raw_write_f32(path, dst, n) == CLI_EXIT_OK, "raw_write_f32 failed");
            float *again = malloc(n ? n * 4 : 1);
            fuzz_check(again != NULL, "malloc");
            fuzz_check(raw_read_f32(path, again, n, "fuzz input") == CLI_EXIT_OK && !memcmp(again, dst, n * 4),
                       "write -> read changed the floats");
            free(again);
        }
        free(dst);
    }
    free(spec);
    return 0;
}
