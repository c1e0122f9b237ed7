/*
** validation.c: libFuzzer target over the C ABI's argument checks: tensor shapes and dtypes,
** kernel names and parameter lists, packed argument lists and launch plans, and launch
** argument lists. Every call must return a status (never crash, hang or leak); the first
** input byte picks the surface, the rest are its arguments.
*/
#include "tocha.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

typedef struct {
    const unsigned char *p;
    size_t left;
} input;

static uint64_t take(input *in, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes && in->left; i++, in->p++, in->left--) v |= (uint64_t)*in->p << (8 * i);
    return v;
}

/* A NUL-terminated copy of the next up-to-n bytes (the caller frees it). */
static char *take_text(input *in, size_t n)
{
    size_t len = take(in, 1) % (n + 1);
    if (len > in->left) len = in->left;
    char *s = malloc(len + 1);
    if (!s) return NULL;
    memcpy(s, in->p, len);
    s[len] = '\0';
    in->p += len;
    in->left -= len;
    return s;
}

/* Views of t with fuzzed sizes, strides and offset (sizes 0 often), each copied to and from a
** dense tensor of its shape, read whole, and compared with itself, when it is small. */
static void views(input *in, tocha_tensor *t)
{
    int ndim = (int)(take(in, 1) % 4) + 1;
    int64_t dims[4], strides[4];
    uint64_t zeros = take(in, 1);
    for (int i = 0; i < ndim; i++) {
        dims[i] = (zeros >> i) & 1 ? 0 : (int64_t)(take(in, 1) % 6);
        strides[i] = (int64_t)(take(in, 1) % 8);
    }
    int64_t offset = (int64_t)(take(in, 1) % 16) - 2;
    tocha_tensor *v = NULL, *d = NULL;
    if (tocha_tensor_view(t, ndim, dims, strides, offset, &v) == TOCHA_OK && v->bytes <= (1u << 16) &&
        tocha_tensor_new(t->dev, t->elem_type, ndim, dims, &d) == TOCHA_OK) {
        tocha_tensor_fill(d, 3.0);
        tocha_tensor_copy(v, d);
        tocha_tensor_copy(d, v);
        double host[(1u << 16) / sizeof(double)];
        tocha_tensor_read(d, 0, d->count, host);
        tocha_compare_result r;
        if (tocha_tensor_compare(d, d, 0, 0, &r) == TOCHA_OK && r.mismatched) __builtin_trap();
    }
    tocha_tensor_destroy(d);
    tocha_tensor_destroy(v);
}

static void shapes(input *in)
{
    tocha_device *sim = NULL;
    if (tocha_device_get("sim", &sim)) return;
    int dtype = (int)(take(in, 1) % 9) - 1; /* includes invalid values */
    int ndim = (int)(take(in, 1) % 11) - 1;
    int64_t dims[10];
    /* A mask byte sets sizes to 0, so that empty shapes come often (8 random zero bytes never
    ** would). */
    uint64_t zeros = take(in, 1);
    for (int i = 0; i < 10; i++) dims[i] = (zeros >> (i % 8)) & 1 ? 0 : (int64_t)take(in, 8);
    /* The run limits allocations (ASAN_OPTIONS=max_allocation_size_mb, allocator_may_return_
    ** null), so a huge but valid shape meets an out-of-memory error; small ones are written. */
    tocha_tensor *t = NULL;
    if (tocha_tensor_new(sim, dtype, ndim, dims, &t) == TOCHA_OK) {
        if (t->bytes <= (1u << 20)) tocha_tensor_fill(t, 1.0);
        views(in, t);
        tocha_tensor_free(t);
        tocha_tensor_free(t);
        if (tocha_tensor_fill(t, 2.0) != TOCHA_E_FREED) __builtin_trap(); /* use after free */
    }
    tocha_tensor_destroy(t);
}

static void kernels(input *in)
{
    char *name = take_text(in, 40), *targs = take_text(in, 40), *params = take_text(in, 200);
    tocha_kernel *k = NULL;
    if (name && targs && params && tocha_kernel_new("__device__ void f() {}", name, targs, params, &k) == TOCHA_OK) {
        tocha_kernel_entry_point_source(k);
        tocha_kernel_hash(k);
    }
    tocha_kernel_destroy(k);
    free(name);
    free(targs);
    free(params);
}

/* The kernel and tensor the launch surfaces share: an empty kernel of four parameters. */
static int fixture(tocha_device **sim, tocha_kernel **k, tocha_tensor **t)
{
    static tocha_kernel *kernel;
    static tocha_tensor *tensor;
    if (tocha_device_get("sim", sim)) return -1;
    if (!kernel && tocha_kernel_new("__device__ void nop(float *a, int n, double x, unsigned long long u) {}",
                                    "nop", "", "f32* a, i32 n, f64 x, u64 u", &kernel))
        return -1;
    if (!tensor) {
        int64_t dims[1] = {4};
        if (tocha_tensor_new(*sim, TOCHA_F32, 1, dims, &tensor)) return -1;
    }
    *k = kernel;
    *t = tensor;
    return 0;
}

/* Packed argument lists (what an op's pack methods give) for a launch, then for a plan of one
** launch run with fuzzed slots: a pointer argument is the tensor's address, a slot's
** placeholder (plus an offset) or raw bytes. Slots run at the tensor's address, so that a
** plan that passes writes nothing outside it (the kernel is empty anyway). */
static void packed(input *in)
{
    tocha_device *sim = NULL;
    tocha_kernel *k = NULL;
    tocha_tensor *t = NULL;
    if (fixture(&sim, &k, &t)) return;
    tocha_arg_list list = {.count = (int32_t)(take(in, 1) % 8) - 1};
    int n = list.count < 0 ? 0 : list.count;
    for (int i = 0; i < n; i++) {
        tocha_arg *a = &list.args[i];
        a->kind = (int32_t)(take(in, 1) % 5);
        int source = (int)(take(in, 1) % 3);
        a->i = source == 0   ? (int64_t)t->data
               : source == 1 ? (int64_t)(tocha_plan_slot_address((int)(take(in, 1) % 3)) + take(in, 5))
                             : (int64_t)take(in, 8);
        uint64_t bits = take(in, 8);
        memcpy(&a->f, &bits, 8);
    }
    uint32_t grid[3] = {(uint32_t)take(in, 1) % 4, 1, 1}, block[3] = {(uint32_t)take(in, 1) % 65, 1, 1};
    if (take(in, 1) & 1) {
        tocha_kernel_launch_packed(k, sim, grid, block, &list);
        return;
    }
    int n_slots = (int)(take(in, 1) % 4) - 1;
    tocha_plan *p = NULL;
    if (tocha_plan_new(sim, n_slots, &p) == TOCHA_OK) {
        uint64_t slots[3] = {t->data, t->data, t->data};
        if (take(in, 1) & 1) slots[take(in, 1) % 3] = 0;
        tocha_plan_add(p, k, grid, block, &list);
        tocha_plan_run(p, slots, n_slots);
    }
    tocha_plan_destroy(p);
}

/* Launch argument lists against a fixed signature; a list that passes launches an empty
** kernel on a tiny grid. */
static void launches(input *in)
{
    tocha_device *sim = NULL;
    tocha_kernel *k = NULL;
    tocha_tensor *t = NULL;
    if (fixture(&sim, &k, &t)) return;
    int nargs = (int)(take(in, 1) % 7);
    tocha_arg args[6];
    for (int i = 0; i < nargs; i++) {
        args[i].kind = (int32_t)(take(in, 1) % 5);
        args[i].tensor = take(in, 1) & 1 ? t : NULL;
        args[i].i = (int64_t)take(in, 8);
        uint64_t bits = take(in, 8);
        memcpy(&args[i].f, &bits, 8);
    }
    uint32_t grid[3] = {1 + (uint32_t)(take(in, 1) % 4), 1, 1}, block[3] = {1 + (uint32_t)(take(in, 1) % 64), 1, 1};
    tocha_kernel_launch(k, sim, grid, block, 0, args, nargs);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    input in = {data, size};
    switch (take(&in, 1) % 4) {
    case 0: shapes(&in); break;
    case 1: kernels(&in); break;
    case 2: packed(&in); break;
    default: launches(&in); break;
    }
    return 0;
}
