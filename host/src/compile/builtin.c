/*
** builtin.c: tocha's own tensor kernels (kernels/fill.cu, random.cu, cast.cu, compare.cu,
** accumulate.cu, strided_copy.cu).
** They are ordinary kernels built through the same compile and cache path as a user's; each
** (op, dtype) variant is made once per process, on first use.
*/
#include "internal.h"
#include "embedded.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static tocha_kernel *made[TOCHA_OP_COUNT][TOCHA_DTYPE_COUNT][TOCHA_DTYPE_COUNT];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static const struct {
    const char *file, *function, *params; /* %s is the dtype's name; %2$s the second's */
} ops[TOCHA_OP_COUNT] = {
    [TOCHA_OP_FILL] = {"fill.cu", "tocha_fill", "%1$s* y, i64 n, f64 value"},
    [TOCHA_OP_UNIFORM] = {"random.cu", "tocha_uniform", "%1$s* y, i64 n, u64 seed, f64 low, f64 high"},
    [TOCHA_OP_NORMAL] = {"random.cu", "tocha_normal", "%1$s* y, i64 n, u64 seed, f64 mean, f64 std"},
    [TOCHA_OP_CAST] = {"cast.cu", "tocha_cast", "%1$s* x, %2$s* y, i64 n"},
    [TOCHA_OP_COMPARE] = {"compare.cu", "tocha_compare",
                          "%1$s* a, %1$s* b, i64 n, f64 rtol, f64 atol, f64* max_abs, "
                          "f64* max_rel, i64* mismatched, i64* first_mismatch"},
    [TOCHA_OP_ACCUMULATE] = {"accumulate.cu", "tocha_accumulate",
                             "%1$s* acc, %2$s* g, i64 n, i32 first"},
    /* keyed by the bytes of a unit and the mapping: tocha_builtin_copy_kernel, its params */
    [TOCHA_OP_STRIDED_COPY] = {"strided_copy.cu", "tocha_strided_copy", NULL},
};

int tocha_builtin_kernel(tocha_builtin_op op, int dtype, int dtype2, tocha_kernel **out)
{
    if (op == TOCHA_OP_STRIDED_COPY)
        return tocha_builtin_copy_kernel(tocha_dtype_size(dtype), TOCHA_COPY_ELEMENTS, out);
    bool pair = op == TOCHA_OP_CAST || op == TOCHA_OP_ACCUMULATE;
    if (!pair) dtype2 = 0;
    pthread_mutex_lock(&lock);
    tocha_kernel *k = made[op][dtype][dtype2];
    int st = TOCHA_OK;
    if (!k) {
        char params[512], targs[96];
        const char *a = tocha_dtype_name(dtype), *b = tocha_dtype_name(dtype2);
        snprintf(params, sizeof params, ops[op].params, a, b);
        if (pair)
            snprintf(targs, sizeof targs, "%s, %s", tocha_dtype_ctype(dtype), tocha_dtype_ctype(dtype2));
        else
            snprintf(targs, sizeof targs, "%s", tocha_dtype_ctype(dtype));
        const char *source = tocha_embedded_find(ops[op].file);
        st = source ? tocha_kernel_new(source, ops[op].function, targs, params, &k)
                    : tocha_fail(TOCHA_E_INTERNAL, "kernel source %s is not embedded", ops[op].file);
        if (!st) made[op][dtype][dtype2] = k;
    }
    pthread_mutex_unlock(&lock);
    *out = k;
    return st;
}

int tocha_builtin_copy_kernel(int unit_bytes, tocha_copy_mapping mapping, tocha_kernel **out)
{
    static const char *const functions[3] = {"tocha_strided_copy", "tocha_strided_copy32",
                                             "tocha_tiled_copy"};
    static const char *const params[3] = {
        "u8* src, u8* dst, i64 n, i32 ndim, i64 d0, i64 d1, i64 d2, i64 d3, i64 d4, i64 d5, i64 d6, "
        "i64 d7, i64 s0, i64 s1, i64 s2, i64 s3, i64 s4, i64 s5, i64 s6, i64 s7, i64 t0, i64 t1, "
        "i64 t2, i64 t3, i64 t4, i64 t5, i64 t6, i64 t7",
        "u8* src, u8* dst, u32 n, i32 ndim, u32 d0, u32 d1, u32 d2, u32 d3, u32 d4, u32 d5, u32 d6, "
        "u32 d7, u32 m1, u32 m2, u32 m3, u32 m4, u32 m5, u32 m6, u32 m7, u32 h1, u32 h2, u32 h3, "
        "u32 h4, u32 h5, u32 h6, u32 h7, u32 s0, u32 s1, u32 s2, u32 s3, u32 s4, u32 s5, u32 s6, "
        "u32 s7, u32 t0, u32 t1, u32 t2, u32 t3, u32 t4, u32 t5, u32 t6, u32 t7",
        "u8* src, u8* dst, i32 ndim, i64 d0, i64 d1, i64 d2, i64 d3, i64 d4, i64 d5, i64 d6, i64 d7, "
        "i64 s0, i64 s1, i64 s2, i64 s3, i64 s4, i64 s5, i64 s6, i64 s7, i64 t0, i64 t1, i64 t2, "
        "i64 t3, i64 t4, i64 t5, i64 t6, i64 t7"};
    int slot = 0;
    while (slot < 5 && (1 << slot) != unit_bytes) slot++;
    *out = NULL;
    const bool tiles = mapping == TOCHA_COPY_TILES;
    if (slot == 5 || (tiles && unit_bytes > 8))
        return tocha_fail(TOCHA_E_INTERNAL, "strided copy: unit of %d bytes (expected 1, 2, 4, 8%s)",
                          unit_bytes, tiles ? " for tiles" : " or 16");
    pthread_mutex_lock(&lock);
    tocha_kernel *k = made[TOCHA_OP_STRIDED_COPY][slot][mapping];
    int st = TOCHA_OK;
    if (!k) {
        char targs[8];
        snprintf(targs, sizeof targs, "%d", unit_bytes);
        const char *file = ops[TOCHA_OP_STRIDED_COPY].file;
        const char *source = tocha_embedded_find(file);
        st = source ? tocha_kernel_new(source, functions[mapping], targs, params[mapping], &k)
                    : tocha_fail(TOCHA_E_INTERNAL, "kernel source %s is not embedded", file);
        if (!st) made[TOCHA_OP_STRIDED_COPY][slot][mapping] = k;
    }
    pthread_mutex_unlock(&lock);
    *out = k;
    return st;
}

void tocha_builtin_grid(tocha_device *d, int64_t n, uint32_t grid[3], uint32_t block[3])
{
    const int64_t threads = 256; /* compare.cu's block tree holds at most 256, a power of two */
    /* Enough blocks to fill the device a few times over; the loop strides over the rest. */
    int64_t cap = d->kind == TOCHA_DEVICE_CUDA ? (int64_t)d->multiprocessors * 16
                                               : (int64_t)d->multiprocessors * 4;
    int64_t blocks = (n + threads - 1) / threads;
    if (blocks > cap) blocks = cap;
    if (blocks < 1) blocks = 1;
    grid[0] = (uint32_t)blocks;
    grid[1] = grid[2] = 1;
    block[0] = (uint32_t)threads;
    block[1] = block[2] = 1;
}

int tocha_builtin_kernel_get(const char *op, int dtype, int dtype2, tocha_kernel **out)
{
    static const char *names[TOCHA_OP_COUNT] = {"fill",    "uniform",    "normal",      "cast",
                                                "compare", "accumulate", "strided_copy"};
    *out = NULL;
    if (!tocha_dtype_valid(dtype)) return tocha_fail(TOCHA_E_ARGUMENT, "dtype: invalid dtype %d", dtype);
    if (!tocha_dtype_valid(dtype2))
        return tocha_fail(TOCHA_E_ARGUMENT, "dtype2: invalid dtype %d", dtype2);
    for (int i = 0; i < TOCHA_OP_COUNT; i++)
        if (op && strcmp(op, names[i]) == 0)
            return tocha_builtin_kernel((tocha_builtin_op)i, dtype, dtype2, out);
    return tocha_fail(TOCHA_E_ARGUMENT,
                      "op: unknown built-in kernel '%s' (expected fill, uniform, normal, cast, compare, "
                      "accumulate or strided_copy)",
                      op ? op : "(null)");
}
