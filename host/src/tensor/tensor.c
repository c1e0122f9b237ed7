/*
** tensor.c: dense tensors on a device, and the operations every script needs on them.
** Device-side work (fill, random, cast, compare) runs as kernels from kernels/; this file
** checks arguments, allocates, and launches.
*/
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* No tensor may hold more bytes than this: it keeps every size computation in range. */
#define MAX_TENSOR_BYTES ((uint64_t)1 << 56)

int tocha_tensor_check_live(const tocha_tensor *t, const char *what)
{
    if (!t) return tocha_fail(TOCHA_E_ARGUMENT, "%s: expected a tensor, got NULL", what);
    if (t->freed) return tocha_fail(TOCHA_E_FREED, "%s: tensor was freed", what);
    return TOCHA_OK;
}

int tocha_tensor_check(const tocha_tensor *t, const char *what)
{
    int st = tocha_tensor_check_live(t, what);
    if (!st && !t->dense)
        return tocha_fail(TOCHA_E_ARGUMENT,
                          "%s: not contiguous (a view): call :contiguous() on it first", what);
    return st;
}

void tocha_tensor_set_dense(tocha_tensor *t)
{
    /* A size 0 counts as 1 (PyTorch's rule: [2, 0, 3] has strides 3, 3, 1), so that no
    ** dimension of an empty tensor gets stride 0 and reads as an expanded one. */
    int64_t stride = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        t->strides[i] = stride;
        stride *= t->dims[i] ? t->dims[i] : 1;
    }
    for (int i = t->ndim; i < TOCHA_MAX_DIMS; i++) t->strides[i] = 0;
    t->dense = 1;
}

static int check_same_shape(const tocha_tensor *a, const tocha_tensor *b, const char *what)
{
    bool same = a->ndim == b->ndim;
    for (int i = 0; same && i < a->ndim; i++) same = a->dims[i] == b->dims[i];
    if (same) return TOCHA_OK;
    char sa[160], sb[160];
    tocha_format_dims(a->dims, a->ndim, "x", sa, sizeof sa);
    tocha_format_dims(b->dims, b->ndim, "x", sb, sizeof sb);
    return tocha_fail(TOCHA_E_ARGUMENT, "%s: shapes differ: [%s] and [%s]", what, sa, sb);
}

/* Adds s to d's live blocks; false when there is no host memory for the list. */
static bool register_live(tocha_device *d, tocha_storage *s)
{
    if (d->n_live == d->cap_live) {
        int64_t cap = d->cap_live ? 2 * d->cap_live : 64;
        tocha_storage **grown = realloc(d->live, (size_t)cap * sizeof *grown);
        if (!grown) return false;
        d->live = grown;
        d->cap_live = cap;
    }
    s->live_index = d->n_live;
    d->live[d->n_live++] = s;
    return true;
}

int tocha_tensor_new(tocha_device *d, int dtype, int ndim, const int64_t *shape, tocha_tensor **out)
{
    *out = NULL;
    if (!d) return tocha_fail(TOCHA_E_ARGUMENT, "device: expected a device, got NULL");
    if (!tocha_dtype_valid(dtype)) return tocha_fail(TOCHA_E_ARGUMENT, "dtype: invalid dtype %d", dtype);
    if (ndim < 1 || ndim > TOCHA_MAX_DIMS)
        return tocha_fail(TOCHA_E_ARGUMENT, "shape: expected 1 to %d dimensions, got %d", TOCHA_MAX_DIMS,
                          ndim);
    uint64_t numel = 1, limit = MAX_TENSOR_BYTES / (uint64_t)tocha_dtype_size(dtype);
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return tocha_fail(TOCHA_E_ARGUMENT,
                              "shape[%d]: size must be a non-negative integer, got %lld", i + 1,
                              (long long)shape[i]);
        if (numel && (uint64_t)shape[i] > limit / numel)
            return tocha_fail(TOCHA_E_ARGUMENT,
                              "shape: too many elements (the limit is %llu bytes per tensor)",
                              (unsigned long long)MAX_TENSOR_BYTES);
        numel *= (uint64_t)shape[i];
    }
    tocha_tensor *t = calloc(1, sizeof *t);
    tocha_storage *s = calloc(1, sizeof *s);
    if (!t || !s) {
        free(t);
        free(s);
        return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for a tensor");
    }
    t->dev = d;
    t->elem_type = dtype;
    t->ndim = ndim;
    memcpy(t->dims, shape, (size_t)ndim * sizeof *shape);
    t->count = (int64_t)numel;
    t->bytes = numel * (uint64_t)tocha_dtype_size(dtype);
    tocha_tensor_set_dense(t);
    /* An empty tensor holds no device memory: its address is 0 (as PyTorch's data_ptr()), no
    ** backend is asked for 0 bytes, and every operation on it returns before any launch. */
    int st = t->bytes ? tocha_memory_alloc(d, t->bytes, &t->data) : TOCHA_OK;
    if (st) {
        free(t);
        free(s);
        return st;
    }
    *s = (tocha_storage){.dev = d, .data = t->data, .bytes = t->bytes, .holders = 1};
    if (!register_live(d, s)) {
        if (t->bytes) tocha_memory_release(d, t->data, t->bytes);
        free(t);
        free(s);
        return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for a tensor");
    }
    t->storage = s;
    *out = t;
    return TOCHA_OK;
}

tocha_storage *tocha_storage_find(const tocha_device *d, uint64_t address)
{
    for (int64_t i = 0; i < d->n_live; i++) {
        tocha_storage *s = d->live[i];
        if (address >= s->data && address - s->data < s->bytes) return s;
    }
    return NULL;
}

void tocha_storage_release(tocha_storage *s)
{
    if (!s || --s->holders > 0) return;
    tocha_device *d = s->dev;
    tocha_storage *last = d->live[--d->n_live];
    d->live[s->live_index] = last;
    last->live_index = s->live_index;
    if (s->bytes) tocha_memory_release(d, s->data, s->bytes); /* an empty tensor's has none */
    free(s);
}

/* The device memory goes back when the last tensor holding it (a tensor or one of its views)
** lets go. */
void tocha_tensor_free(tocha_tensor *t)
{
    if (!t || t->freed) return;
    tocha_storage_release(t->storage);
    t->storage = NULL;
    t->data = 0;
    t->freed = 1;
}

void tocha_tensor_destroy(tocha_tensor *t)
{
    tocha_tensor_free(t);
    free(t);
}

int tocha_tensor_write(tocha_tensor *t, const void *src, uint64_t nbytes)
{
    int st = tocha_tensor_check(t, "tensor");
    if (st) return st;
    if (nbytes != t->bytes)
        return tocha_fail(TOCHA_E_ARGUMENT, "nbytes: the tensor holds %llu bytes, got %llu",
                          (unsigned long long)t->bytes, (unsigned long long)nbytes);
    if (nbytes == 0) return TOCHA_OK; /* an empty tensor: nothing to transfer, src unread */
    if (!src) return tocha_fail(TOCHA_E_ARGUMENT, "src: expected host memory, got NULL");
    st = tocha_refuse_during_capture(t->dev, "write a tensor from the host");
    if (st) return st;
    return t->dev->backend->write(t->dev, t->data, src, nbytes);
}

int tocha_tensor_read(const tocha_tensor *t, int64_t offset, int64_t count, void *dst)
{
    int st = tocha_tensor_check(t, "tensor");
    if (st) return st;
    if (offset < 0 || count < 0 || offset > t->count || count > t->count - offset)
        return tocha_fail(TOCHA_E_ARGUMENT, "range: elements %lld..%lld are outside the tensor's %lld",
                          (long long)offset, (long long)(offset + count), (long long)t->count);
    if (count == 0) return TOCHA_OK; /* nothing to transfer, dst untouched */
    if (!dst) return tocha_fail(TOCHA_E_ARGUMENT, "dst: expected host memory, got NULL");
    st = tocha_refuse_during_capture(t->dev, "read a tensor to the host");
    if (st) return st;
    uint64_t size = (uint64_t)tocha_dtype_size(t->elem_type);
    return t->dev->backend->read(t->dev, dst, t->data + (uint64_t)offset * size, (uint64_t)count * size);
}

int tocha_tensor_copy(tocha_tensor *dst, const tocha_tensor *src)
{
    int st = tocha_tensor_check_live(dst, "dst");
    if (!st) st = tocha_tensor_check_live(src, "src");
    if (!st) st = check_same_shape(dst, src, "src");
    if (st) return st;
    if (dst->elem_type != src->elem_type)
        return tocha_fail(TOCHA_E_ARGUMENT, "src: dtype %s differs from dst's %s (use cast)",
                          tocha_dtype_name(src->elem_type), tocha_dtype_name(dst->elem_type));
    if (dst->count == 0) return TOCHA_OK; /* empty: no copy, launch or graph node */
    bool overlapping = false;
    st = tocha_tensor_copy_overlapping(dst, src, &overlapping);
    if (st || overlapping) return st;
    if (!dst->dense || !src->dense) return tocha_tensor_copy_strided(dst, src);
    if (dst->dev == src->dev) {
        st = tocha_graph_hold_address(dst->dev, dst->data);
        if (!st) st = tocha_graph_hold_address(dst->dev, src->data);
        if (st) return st;
        if (tocha_graph_recording(dst->dev))
            return tocha_graph_record_copy(dst->dev, dst->data, src->data, dst->bytes);
        return dst->dev->backend->copy(dst->dev, dst->data, src->data, dst->bytes,
                                       tocha_device_stream_handle(dst->dev));
    }
    st = tocha_refuse_during_capture(dst->dev, "copy between devices");
    if (!st) st = tocha_refuse_during_capture(src->dev, "copy between devices");
    if (st) return st;
    if (dst->dev->backend == src->dev->backend && dst->dev->backend->copy_peer)
        return dst->dev->backend->copy_peer(dst->dev, dst->data, src->dev, src->data, dst->bytes);
    /* Between devices: through host memory, in pieces so that a huge tensor needs no huge
    ** buffer. The source's queue is drained first by the read itself (it is synchronous). */
    const uint64_t piece = (uint64_t)64 << 20;
    void *buf = malloc(dst->bytes < piece ? dst->bytes : piece);
    if (!buf) return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for a copy");
    for (uint64_t at = 0; at < dst->bytes && !st; at += piece) {
        uint64_t n = dst->bytes - at < piece ? dst->bytes - at : piece;
        st = src->dev->backend->read(src->dev, buf, src->data + at, n);
        if (!st) st = dst->dev->backend->write(dst->dev, dst->data + at, buf, n);
    }
    free(buf);
    return st;
}

/* Launches a built-in op over t's elements with the given leading pointers and scalars; over
** no elements it launches nothing (an empty tensor's address is 0, and a grid of 0 blocks is
** no launch on either device), and builds no kernel. */
static int launch_builtin(tocha_builtin_op op, int dtype, int dtype2, tocha_device *d, int64_t n,
                          void **args)
{
    if (n == 0) return TOCHA_OK;
    tocha_kernel *k;
    int st = tocha_builtin_kernel(op, dtype, dtype2, &k);
    if (st) return st;
    uint32_t grid[3], block[3];
    tocha_builtin_grid(d, n, grid, block);
    return tocha_kernel_launch_raw(k, d, grid, block, args);
}

int tocha_tensor_fill(tocha_tensor *t, double value)
{
    int st = tocha_tensor_check(t, "tensor");
    if (st) return st;
    void *args[] = {&t->data, &t->count, &value};
    return launch_builtin(TOCHA_OP_FILL, t->elem_type, 0, t->dev, t->count, args);
}

int tocha_tensor_uniform(tocha_tensor *t, uint64_t seed, double low, double high)
{
    int st = tocha_tensor_check(t, "tensor");
    if (st) return st;
    if (!isfinite(low) || !isfinite(high) || !(low < high))
        return tocha_fail(TOCHA_E_ARGUMENT, "low, high: expected finite low < high, got %g, %g", low,
                          high);
    void *args[] = {&t->data, &t->count, &seed, &low, &high};
    return launch_builtin(TOCHA_OP_UNIFORM, t->elem_type, 0, t->dev, t->count, args);
}

int tocha_tensor_normal(tocha_tensor *t, uint64_t seed, double mean, double std)
{
    int st = tocha_tensor_check(t, "tensor");
    if (st) return st;
    if (!isfinite(mean) || !isfinite(std) || std < 0)
        return tocha_fail(TOCHA_E_ARGUMENT, "mean, std: expected finite mean and std >= 0, got %g, %g",
                          mean, std);
    void *args[] = {&t->data, &t->count, &seed, &mean, &std};
    return launch_builtin(TOCHA_OP_NORMAL, t->elem_type, 0, t->dev, t->count, args);
}

int tocha_tensor_cast(tocha_tensor *dst, const tocha_tensor *src)
{
    int st = tocha_tensor_check(dst, "dst");
    if (!st) st = tocha_tensor_check(src, "src");
    if (!st) st = check_same_shape(dst, src, "src");
    if (st) return st;
    if (dst->dev != src->dev)
        return tocha_fail(TOCHA_E_ARGUMENT, "src: tensor is on %s, dst on %s", src->dev->name,
                          dst->dev->name);
    if (dst->elem_type == src->elem_type) return tocha_tensor_copy(dst, src);
    void *args[] = {(void *)&src->data, &dst->data, &dst->count};
    return launch_builtin(TOCHA_OP_CAST, src->elem_type, dst->elem_type, dst->dev, dst->count, args);
}

int tocha_tensor_accumulate(tocha_tensor *acc, const tocha_tensor *g, int first)
{
    int st = tocha_tensor_check(acc, "acc");
    if (!st) st = tocha_tensor_check(g, "g");
    if (!st) st = check_same_shape(acc, g, "g");
    if (st) return st;
    if (acc->elem_type != TOCHA_F32 && acc->elem_type != TOCHA_F64)
        return tocha_fail(TOCHA_E_ARGUMENT, "acc: expected an f32 or f64 tensor, got %s",
                          tocha_dtype_name(acc->elem_type));
    if (g->elem_type != TOCHA_F32 && g->elem_type != TOCHA_F64 && g->elem_type != TOCHA_F16 &&
        g->elem_type != TOCHA_BF16)
        return tocha_fail(TOCHA_E_ARGUMENT, "g: expected a float tensor, got %s",
                          tocha_dtype_name(g->elem_type));
    if (acc->dev != g->dev)
        return tocha_fail(TOCHA_E_ARGUMENT, "g: tensor is on %s, acc on %s", g->dev->name,
                          acc->dev->name);
    int32_t f = first ? 1 : 0;
    void *args[] = {&acc->data, (void *)&g->data, &acc->count, &f};
    return launch_builtin(TOCHA_OP_ACCUMULATE, acc->elem_type, g->elem_type, acc->dev, acc->count, args);
}

int tocha_tensor_compare(const tocha_tensor *a, const tocha_tensor *b, double rtol, double atol,
                         tocha_compare_result *out)
{
    int st = tocha_tensor_check(a, "a");
    if (!st) st = tocha_tensor_check(b, "b");
    if (!st) st = check_same_shape(a, b, "b");
    if (st) return st;
    if (a->elem_type != b->elem_type)
        return tocha_fail(TOCHA_E_ARGUMENT, "b: dtype %s differs from a's %s",
                          tocha_dtype_name(b->elem_type), tocha_dtype_name(a->elem_type));
    if (a->dev != b->dev)
        return tocha_fail(TOCHA_E_ARGUMENT, "b: tensor is on %s, a on %s", b->dev->name, a->dev->name);
    if (!(rtol >= 0) || !(atol >= 0))
        return tocha_fail(TOCHA_E_ARGUMENT, "rtol, atol: expected >= 0, got %g, %g", rtol, atol);
    if (a->count == 0) { /* no pairs: nothing differs */
        *out = (tocha_compare_result){0, 0, 0, -1};
        return TOCHA_OK;
    }
    tocha_device *d = a->dev;
    uint32_t grid[3], block[3];
    tocha_builtin_grid(d, a->count, grid, block);
    int64_t partials = (int64_t)grid[0]; /* one a block */
    tocha_tensor *parts[4] = {0};
    int dtypes[4] = {TOCHA_F64, TOCHA_F64, TOCHA_I64, TOCHA_I64};
    for (int i = 0; i < 4 && !st; i++) st = tocha_tensor_new(d, dtypes[i], 1, &partials, &parts[i]);
    tocha_kernel *k = NULL;
    if (!st) st = tocha_builtin_kernel(TOCHA_OP_COMPARE, a->elem_type, 0, &k);
    int64_t n = a->count;
    void *args[] = {
        (void *)&a->data, (void *)&b->data, &n, &rtol, &atol, &parts[0]->data, &parts[1]->data,
        &parts[2]->data,  &parts[3]->data};
    if (!st) st = tocha_kernel_launch_raw(k, d, grid, block, args);
    double *host = st ? NULL : malloc((size_t)partials * 4 * sizeof(double));
    if (!st && !host) st = tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for a comparison");
    for (int i = 0; i < 4 && !st; i++)
        st = tocha_tensor_read(parts[i], 0, partials, host + i * partials);
    if (!st) {
        tocha_compare_result r = {0, 0, 0, -1};
        const int64_t *bad = (const int64_t *)(host + 2 * partials);
        const int64_t *first = (const int64_t *)(host + 3 * partials);
        for (int64_t i = 0; i < partials; i++) {
            r.max_abs = fmax(r.max_abs, host[i]);
            r.max_rel = fmax(r.max_rel, host[partials + i]);
            r.mismatched += bad[i];
            if (first[i] >= 0 && (r.first_mismatch < 0 || first[i] < r.first_mismatch))
                r.first_mismatch = first[i];
        }
        *out = r;
    }
    free(host);
    for (int i = 0; i < 4; i++) tocha_tensor_destroy(parts[i]);
    return st;
}
