/* Example: run an nnefc-compiled model from C.
 *
 * Build with the Makefile next to this file: it compiles a model with
 * `nnefc MODEL --prefix model --emit obj,header -o build/model.o` and links build/model.o
 * with the runtime's static library libnnefc_runtime.a.
 *
 * Usage: main INPUT.dat [ITERATIONS] [EXPECTED.dat|-] [THREADS] [WEIGHTS]
 * Reads a float32 NNEF .dat tensor, runs the model, prints its first output's top-5
 * entries and the median time per inference. With EXPECTED.dat it also compares the first
 * output with that tensor, elementwise, under |ours - expected| <= 1e-4 * max(1, max|expected|),
 * prints the largest difference and exits with status 3 on a mismatch. Every run goes
 * through model_run_ex, the general entry point. With THREADS > 1 it runs on the
 * runtime's thread pool (nnefc_pool_new), and
 * checks that the outputs are byte-identical to those of a serial run (exit 4
 * otherwise). A model compiled with `--weights external` (MODEL_WEIGHTS_EXTERNAL) reads
 * its weights file (WEIGHTS, default model.weights): loaded once to 64-byte-aligned
 * memory, checked once with model_check_weights, then passed to every model_run_ex.
 * A model compiled with a run-time batch (`--input-shape input=?,...`, MODEL_RUNTIME_BATCH)
 * also runs a batch of 3 copies of the input and checks that every sample's first output
 * is byte-identical to the single run's (exit 5 otherwise).
 * Handles models whose first input and first output are float32; it does not
 * convert other element types, and checks no output but the first. */
#define _POSIX_C_SOURCE 200112L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model.h"

static uint32_t u32_le(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Reads a float32 .dat file (128-byte header, then little-endian data) into `out`, which
 * holds `count` floats; checks the shape against `dims`. Returns 0 on success. */
static int read_dat(const char *path, float *out, size_t count, const size_t *dims, size_t rank) {
    unsigned char h[128];
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); return -1; }
    if (fread(h, 1, sizeof h, f) != sizeof h || h[0] != 0x4e || h[1] != 0xef) {
        fprintf(stderr, "%s: not an NNEF .dat file\n", path);
        fclose(f);
        return -1;
    }
    if (u32_le(h + 44) != 32 || u32_le(h + 48) != 0) {
        fprintf(stderr, "%s: only float32 tensors are read here\n", path);
        fclose(f);
        return -1;
    }
    if (u32_le(h + 8) != rank) {
        fprintf(stderr, "%s: rank %u, the model wants %zu\n", path, (unsigned)u32_le(h + 8), rank);
        fclose(f);
        return -1;
    }
    for (size_t i = 0; i < rank; i++) {
        if (u32_le(h + 12 + 4 * i) != dims[i]) {
            fprintf(stderr, "%s: extent %zu is %u, the model wants %zu\n", path, i,
                    (unsigned)u32_le(h + 12 + 4 * i), dims[i]);
            fclose(f);
            return -1;
        }
    }
    size_t got = fread(out, sizeof(float), count, f);
    fclose(f);
    if (got != count) {
        fprintf(stderr, "%s: expected %zu values, read %zu\n", path, count, got);
        return -1;
    }
    return 0; /* data is little-endian; so are the hosts this example targets */
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Compares `n` floats with the reference under the tolerance of the nnefc test suite and
 * prints the largest difference. Returns 0 when every element is within it. */
static int check_expected(const float *ours, const float *expected, size_t n) {
    double max_ref = 0, max_diff = 0, tol;
    size_t worst = 0;
    for (size_t i = 0; i < n; i++) {
        double r = fabs((double)expected[i]);
        if (r > max_ref) max_ref = r;
    }
    tol = 1e-4 * (max_ref > 1 ? max_ref : 1);
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)ours[i] - (double)expected[i]);
        /* A NaN difference is a mismatch: `d > max_diff` is false for NaN, so test it apart. */
        if (d != d) { max_diff = d; worst = i; break; }
        if (d > max_diff) { max_diff = d; worst = i; }
    }
    int ok = max_diff <= tol; /* false for NaN */
    printf("expected: %s, max |diff| %.3g at %zu (tolerance %.3g, %zu values)\n",
           ok ? "match" : "MISMATCH", max_diff, worst, tol, n);
    return ok ? 0 : -1;
}

/* Reads a whole file into 64-byte-aligned memory (what model_run_ex wants of weights). */
static void *read_aligned(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); return NULL; }
    void *p = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        if (n >= 0 && fseek(f, 0, SEEK_SET) == 0) {
            *len = (size_t)n;
            p = aligned_alloc(64, (*len + 63) / 64 * 64 + 64);
            if (p && fread(p, 1, *len, f) != *len) { free(p); p = NULL; }
        }
    }
    fclose(f);
    if (!p) fprintf(stderr, "%s: cannot read\n", path);
    return p;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s INPUT.dat [ITERATIONS] [EXPECTED.dat|-] [THREADS] [WEIGHTS]\n", argv[0]);
        return 2;
    }
    int iterations = argc > 2 ? atoi(argv[2]) : 100;
    if (iterations < 1) iterations = 1;
    const char *expected_path = argc > 3 && strcmp(argv[3], "-") != 0 ? argv[3] : NULL;
    int threads = argc > 4 ? atoi(argv[4]) : 1;
    if (threads < 1) threads = 1;

    /* External weights: NULL when they are embedded in the object. */
    void *weights = NULL;
#if MODEL_WEIGHTS_EXTERNAL
    {
        const char *path = argc > 5 ? argv[5] : "model.weights";
        size_t len = 0;
        weights = read_aligned(path, &len);
        if (!weights) return 1;
        int st = model_check_weights(weights, len);
        if (st != 0) { fprintf(stderr, "%s: not this model's weights (status %d)\n", path, st); return 1; }
        printf("weights: %zu bytes from %s\n", len, path);
    }
#endif

    /* The descriptor: what the model takes and returns, readable at run time. */
    const nnefc_tensor_info *in0 = &model_info.inputs[0], *out0 = &model_info.outputs[0];
    printf("model `%s`: %zu input(s), %zu output(s), workspace %zu bytes\n", model_info.name,
           model_info.num_inputs, model_info.num_outputs, model_info.workspace_size);
    if (model_info.num_inputs != 1 || in0->dtype != NNEFC_DTYPE_F32 || out0->dtype != NNEFC_DTYPE_F32) {
        fprintf(stderr, "this example handles models with one float32 input and a float32 first output\n");
        return 1;
    }

    static const size_t in_dims[] = MODEL_INPUT0_SHAPE;
    float *input = malloc(sizeof(float) * MODEL_INPUT0_SIZE);
    void *outputs[MODEL_NUM_OUTPUTS];
    size_t out_sizes[MODEL_NUM_OUTPUTS];
    for (size_t k = 0; k < MODEL_NUM_OUTPUTS; k++) {
        const nnefc_tensor_info *t = &model_info.outputs[k];
        size_t n = 1;
        for (uint32_t d = 0; d < t->rank; d++) n *= t->dims[d];
        out_sizes[k] = n;
        outputs[k] = malloc(n * 4 + 1); /* 4 bytes covers every dtype; +1 for empty tensors */
    }
    /* The workspace: MODEL_WORKSPACE_SIZE_FOR(threads) bytes (MODEL_WORKSPACE_SIZE for
       one) aligned to MODEL_WORKSPACE_ALIGN. */
    size_t ws_size = (MODEL_WORKSPACE_SIZE_FOR(threads) + MODEL_WORKSPACE_ALIGN - 1) / MODEL_WORKSPACE_ALIGN * MODEL_WORKSPACE_ALIGN;
    void *workspace = aligned_alloc(MODEL_WORKSPACE_ALIGN, ws_size ? ws_size : MODEL_WORKSPACE_ALIGN);
    if (!input || !workspace) { fprintf(stderr, "out of memory\n"); return 1; }
    if (read_dat(argv[1], input, MODEL_INPUT0_SIZE, in_dims, MODEL_INPUT0_RANK) != 0) return 1;

    /* Threads: a pool created once and reused by every run; NULL par means serial. */
    nnefc_pool *pool = NULL;
    nnefc_parallel par;
    if (threads > 1) {
        pool = nnefc_pool_new((size_t)threads);
        if (!pool) { fprintf(stderr, "cannot start %d threads\n", threads); return 1; }
        par = nnefc_pool_parallel(pool);
    }
    const nnefc_parallel *parp = pool ? &par : NULL;

    const void *inputs[1] = {input};
    int status = model_run_ex(0, weights, inputs, outputs, workspace, parp);
    if (status != 0) {
        fprintf(stderr, "model_run_ex failed with status %d\n", status);
        return 1;
    }
    int differs = 0;
    if (threads > 1) {
        /* The outputs do not depend on the number of threads: compare with a serial run. */
        void *serial[MODEL_NUM_OUTPUTS];
        for (size_t k = 0; k < MODEL_NUM_OUTPUTS; k++) serial[k] = malloc(out_sizes[k] * 4 + 1);
        void *ws1 = aligned_alloc(MODEL_WORKSPACE_ALIGN, ws_size ? ws_size : MODEL_WORKSPACE_ALIGN);
        if (!ws1 || model_run_ex(0, weights, inputs, serial, ws1, NULL) != 0) { fprintf(stderr, "serial run failed\n"); return 1; }
        for (size_t k = 0; k < MODEL_NUM_OUTPUTS; k++) {
            differs |= memcmp(serial[k], outputs[k], out_sizes[k] * 4) != 0;
            free(serial[k]);
        }
        free(ws1);
        printf("threads: %d, outputs %s the serial run's\n", threads,
               differs ? "DIFFER from" : "byte-identical to");
    }

#if MODEL_RUNTIME_BATCH
    /* A run-time batch: 3 samples in one call; batched tensors hold 3 x SIZE elements. */
    {
        enum { N = 3 };
        float *in3 = malloc(sizeof(float) * MODEL_INPUT0_SIZE * N);
        void *out3[MODEL_NUM_OUTPUTS];
        for (size_t k = 0; k < MODEL_NUM_OUTPUTS; k++)
            out3[k] = malloc(out_sizes[k] * 4 * (model_info.outputs[k].batched ? N : 1) + 1);
        if (!in3) { fprintf(stderr, "out of memory\n"); return 1; }
        for (int i = 0; i < N; i++) memcpy(in3 + (size_t)i * MODEL_INPUT0_SIZE, input, sizeof(float) * MODEL_INPUT0_SIZE);
        const void *inputs3[1] = {in3};
        if (model_run_ex(N, weights, inputs3, out3, workspace, parp) != 0) { fprintf(stderr, "batch run failed\n"); return 1; }
        int same = 1;
        for (int i = 0; i < N; i++)
            same &= memcmp((char *)out3[0] + (size_t)i * out_sizes[0] * 4, outputs[0], out_sizes[0] * 4) == 0;
        printf("batch: %d samples, each %s the single run's\n", N, same ? "byte-identical to" : "DIFFERENT from");
        for (size_t k = 0; k < MODEL_NUM_OUTPUTS; k++) free(out3[k]);
        free(in3);
        if (!same) return 5;
    }
#endif

    /* Top-5 of the first output. */
    const float *scores = outputs[0];
    size_t n = out_sizes[0], top[5];
    size_t k_max = n < 5 ? n : 5;
    for (size_t k = 0; k < k_max; k++) {
        size_t best = (size_t)-1;
        for (size_t i = 0; i < n; i++) {
            int taken = 0;
            for (size_t j = 0; j < k; j++) taken |= top[j] == i;
            if (!taken && (best == (size_t)-1 || scores[i] > scores[best])) best = i;
        }
        top[k] = best;
    }
    printf("top-%zu of `%s`:\n", k_max, out0->name);
    for (size_t k = 0; k < k_max; k++) printf("  class %zu: %.6f\n", top[k], scores[top[k]]);

    /* The optional check against a reference output (before timing, which reruns the model). */
    int mismatch = 0;
    if (expected_path) {
        float *expected = malloc(sizeof(float) * n + 1);
        if (!expected) { fprintf(stderr, "out of memory\n"); return 1; }
        if (read_dat(expected_path, expected, n, out0->dims, out0->rank) != 0) return 1;
        mismatch = check_expected(scores, expected, n) != 0;
        free(expected);
    }

    /* Time per inference: median of `iterations` runs after a few warm-up runs. */
    double *ms = malloc(sizeof(double) * iterations);
    if (!ms) { fprintf(stderr, "out of memory\n"); return 1; }
    for (int i = 0; i < 5; i++) model_run_ex(0, weights, inputs, outputs, workspace, parp);
    for (int i = 0; i < iterations; i++) {
        double t0 = now_ms();
        model_run_ex(0, weights, inputs, outputs, workspace, parp);
        ms[i] = now_ms() - t0;
    }
    qsort(ms, iterations, sizeof(double), cmp_double);
    printf("time: %.4f ms per inference (median of %d runs, min %.4f ms)\n", ms[iterations / 2], iterations, ms[0]);

    free(ms);
    free(workspace);
    free(weights);
    nnefc_pool_free(pool);
    for (size_t k = 0; k < MODEL_NUM_OUTPUTS; k++) free(outputs[k]);
    free(input);
    return mismatch ? 3 : differs ? 4 : 0;
}
