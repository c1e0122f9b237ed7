/*
** view.c: views of a tensor (sizes and strides of their own over its block, no copy) and the
** copies between tensors of any layout (kernels/strided_copy.cu).
*/
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* Checks sizes (0 to 2^56) and strides (0 to 2^56 elements); *empty tells whether a size is 0. */
static int check_layout(int ndim, const int64_t *dims, const int64_t *strides, bool *empty)
{
    const int64_t limit = (int64_t)1 << 56;
    *empty = false;
    for (int i = 0; i < ndim; i++) {
        if (dims[i] < 0 || dims[i] > limit)
            return tocha_fail(TOCHA_E_ARGUMENT, "dims[%d]: size must be 0 to 2^56, got %lld", i + 1,
                              (long long)dims[i]);
        if (strides[i] < 0 || strides[i] > limit)
            return tocha_fail(TOCHA_E_ARGUMENT, "strides[%d]: expected 0 to 2^56 elements, got %lld",
                              i + 1, (long long)strides[i]);
        if (dims[i] == 0) *empty = true;
    }
    return TOCHA_OK;
}

/* The largest element offset a view of no size 0 reaches, beyond its first (layout checked). */
static int reach(int ndim, const int64_t *dims, const int64_t *strides, int64_t *out)
{
    const int64_t limit = (int64_t)1 << 56;
    int64_t far = 0;
    for (int i = 0; i < ndim; i++) {
        if (strides[i] && (dims[i] - 1) > (limit - far) / strides[i])
            return tocha_fail(TOCHA_E_ARGUMENT, "strides: the view reaches past 2^56 elements");
        far += (dims[i] - 1) * strides[i];
    }
    *out = far;
    return TOCHA_OK;
}

int tocha_tensor_view(tocha_tensor *t, int ndim, const int64_t *dims, const int64_t *strides,
                      int64_t offset, tocha_tensor **out)
{
    if (!out) return tocha_fail(TOCHA_E_ARGUMENT, "out: expected a place for the view, got NULL");
    *out = NULL;
    int st = tocha_tensor_check_live(t, "tensor");
    if (st) return st;
    if (ndim < 1 || ndim > TOCHA_MAX_DIMS)
        return tocha_fail(TOCHA_E_ARGUMENT, "dims: expected 1 to %d dimensions, got %d", TOCHA_MAX_DIMS,
                          ndim);
    if (!dims || !strides)
        return tocha_fail(TOCHA_E_ARGUMENT, "dims, strides: expected arrays, got NULL");
    bool empty;
    int64_t far = 0, numel = 1;
    if ((st = check_layout(ndim, dims, strides, &empty))) return st;
    if (!empty && (st = reach(ndim, dims, strides, &far))) return st;
    for (int i = 0; i < ndim && !empty; i++) {
        if (dims[i] > ((int64_t)1 << 56) / numel)
            return tocha_fail(TOCHA_E_ARGUMENT, "dims: too many elements for a tensor");
        numel *= dims[i];
    }
    if (empty) numel = 0;
    const uint64_t size = (uint64_t)tocha_dtype_size(t->elem_type);
    const tocha_storage *s = t->storage;
    /* The elements from t's first to the end of the block (none for an empty t, whose address
    ** is 0 and says nothing of where it lies). An empty view reaches no element and keeps no
    ** address, so any offset will do: a narrow of length 0 at the end of a view that starts
    ** inside its block lies past the block's end, and over an empty t there is no block. */
    const uint64_t avail = t->count ? s->bytes / size - (t->data - s->data) / size : 0;
    const bool anywhere = empty;
    if (offset < 0 || (!anywhere && (uint64_t)offset > avail) ||
        (!empty && (uint64_t)far >= avail - (uint64_t)offset))
        return tocha_fail(TOCHA_E_ARGUMENT,
                          "offset, strides: the view reaches element %lld of a block of %llu from the "
                          "tensor's first",
                          (long long)(offset + far), (unsigned long long)avail);
    tocha_tensor *v = calloc(1, sizeof *v);
    if (!v) return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for a view");
    v->dev = t->dev;
    v->elem_type = t->elem_type;
    v->ndim = ndim;
    memcpy(v->dims, dims, (size_t)ndim * sizeof *dims);
    v->count = numel;
    v->bytes = (uint64_t)numel * size;
    v->data = empty ? 0 : t->data + (uint64_t)offset * size; /* every empty tensor's address is 0 */
    tocha_tensor_set_dense(v);
    bool row_major = true; /* an empty view is: it has no element out of order (PyTorch's rule) */
    for (int i = 0; i < ndim && !empty; i++)
        if (dims[i] > 1 && strides[i] != v->strides[i]) row_major = false;
    memcpy(v->strides, strides, (size_t)ndim * sizeof *strides);
    v->dense = row_major;
    v->storage = t->storage;
    v->storage->holders++;
    *out = v;
    return TOCHA_OK;
}

/* The copy's dimensions with those of size 1 dropped and those dense in both merged into one:
** sizes d, strides a (of src) and b (of dst); returns how many. */
static int merged(const tocha_tensor *dst, const tocha_tensor *src, int64_t d[8], int64_t a[8],
                  int64_t b[8])
{
    int n = 0;
    for (int i = 0; i < src->ndim; i++) {
        if (src->dims[i] == 1) continue;
        if (n > 0 && a[n - 1] == src->strides[i] * src->dims[i] &&
            b[n - 1] == dst->strides[i] * src->dims[i]) {
            d[n - 1] *= src->dims[i];
            a[n - 1] = src->strides[i];
            b[n - 1] = dst->strides[i];
            continue;
        }
        d[n] = src->dims[i], a[n] = src->strides[i], b[n] = dst->strides[i];
        n++;
    }
    if (n == 0) d[n] = 1, a[n] = b[n] = 0, n = 1;
    for (int i = n; i < 8; i++) d[i] = 1, a[i] = b[i] = 0;
    return n;
}

/* The widest unit (16 bytes down to one element of size bytes) that every run along the last
** dimension divides into, aligned in both tensors: the last dimension dense in both, its length
** and every other stride whole units, both first elements on a unit boundary. */
static int unit_bytes(const tocha_tensor *dst, const tocha_tensor *src, int n, const int64_t *d,
                      const int64_t *a, const int64_t *b, int size)
{
    if (a[n - 1] != 1 || b[n - 1] != 1) return size;
    for (int w = 16; w > size; w /= 2) {
        bool fits =
            src->data % (uint64_t)w == 0 && dst->data % (uint64_t)w == 0 && d[n - 1] * size % w == 0;
        for (int k = 0; k < n - 1 && fits; k++) fits = a[k] * size % w == 0 && b[k] * size % w == 0;
        if (fits) return w;
    }
    return size;
}

/* Whether to transpose through shared memory (kernels/strided_copy.cu): a dimension dense in
** src and another dense in dst, each long enough for 64 x 64 tiles to pay. If so the dimensions
** are reordered (the copy is the same in any order) so that the one dense in src comes first
** and the one dense in dst second, where the kernel finds them at fixed places. */
static bool plan_tiles(int n, int64_t *d, int64_t *a, int64_t *b)
{
    int p = -1, q = -1;
    for (int k = 0; k < n; k++) {
        if (a[k] == 1 && b[k] == 1) return false;
        if (a[k] == 1 && d[k] >= 16) p = k;
        if (b[k] == 1 && d[k] >= 16) q = k;
    }
    if (p < 0 || q < 0) return false;
    int64_t od[8], oa[8], ob[8];
    memcpy(od, d, sizeof od), memcpy(oa, a, sizeof oa), memcpy(ob, b, sizeof ob);
    d[0] = od[p], a[0] = oa[p], b[0] = ob[p];
    d[1] = od[q], a[1] = oa[q], b[1] = ob[q];
    for (int k = 0, at = 2; k < n; k++)
        if (k != p && k != q) d[at] = od[k], a[at] = oa[k], b[at] = ob[k], at++;
    return true;
}

/* Whether a copy of n units over sizes d with strides a (src) and b (dst) stays below 2^31 in
** its unit count and in every offset, so that the 32-bit element path may take it. */
static bool fits_32(int64_t n, int ndim, const int64_t *d, const int64_t *a, const int64_t *b)
{
    const int64_t limit = (int64_t)1 << 31;
    int64_t far_a = 0, far_b = 0;
    for (int k = 0; k < ndim; k++) far_a += (d[k] - 1) * a[k], far_b += (d[k] - 1) * b[k];
    return n < limit && far_a < limit && far_b < limit;
}

/* Magic numbers for dividing numerators below 2^31 by d (1 to 2^31): with h = ceil(log2 d) and
** m = floor(2^32 (2^h - d) / d) + 1, n / d = (mulhi(n, m) + n) >> h (kernels/strided_copy.cu). */
static void divider(int64_t d, uint32_t *m, uint32_t *h)
{
    uint32_t shift = 0;
    while (((int64_t)1 << shift) < d) shift++;
    *h = shift;
    *m = (uint32_t)((((uint64_t)1 << 32) * (((uint64_t)1 << shift) - (uint64_t)d)) / (uint64_t)d + 1);
}

/* The 32-bit element path's launch (tocha_strided_copy32): sizes, magic numbers for the sizes of
** dimensions 1 to 7, shifts, and both tensors' strides, all as 32-bit values. */
static int launch_elements32(tocha_kernel *k, tocha_tensor *dst, const tocha_tensor *src, int64_t n,
                             int32_t ndim, const int64_t *d, const int64_t *a, const int64_t *b,
                             const uint32_t grid[3], const uint32_t block[3])
{
    uint32_t n32 = (uint32_t)n, d32[8], m32[8], h32[8], a32[8], b32[8];
    for (int i = 0; i < 8; i++) {
        d32[i] = (uint32_t)d[i], a32[i] = (uint32_t)a[i], b32[i] = (uint32_t)b[i];
        divider(d[i], &m32[i], &h32[i]);
    }
    void *args[44];
    int at = 0;
    args[at++] = (void *)&src->data, args[at++] = &dst->data, args[at++] = &n32, args[at++] = &ndim;
    for (int i = 0; i < 8; i++) args[at++] = &d32[i];
    for (int i = 1; i < 8; i++) args[at++] = &m32[i];
    for (int i = 1; i < 8; i++) args[at++] = &h32[i];
    for (int i = 0; i < 8; i++) args[at++] = &a32[i];
    for (int i = 0; i < 8; i++) args[at++] = &b32[i];
    return tocha_kernel_launch_raw(k, dst->dev, grid, block, args);
}

static int launch_strided(tocha_tensor *dst, const tocha_tensor *src)
{
    if (src->count == 0) return TOCHA_OK; /* nothing to copy: no launch */
    int64_t d[8], a[8], b[8];
    int32_t ndim = merged(dst, src, d, a, b);
    const int size = (int)tocha_dtype_size(src->elem_type);
    const int unit = unit_bytes(dst, src, ndim, d, a, b, size);
    const int64_t per = unit / size;
    if (per > 1) {
        d[ndim - 1] /= per;
        for (int k = 0; k < ndim - 1; k++) a[k] /= per, b[k] /= per;
    }
    const bool tiles = unit == size && plan_tiles(ndim, d, a, b);
    int64_t n = src->count / per;
    const tocha_copy_mapping mapping = tiles                       ? TOCHA_COPY_TILES
                                       : fits_32(n, ndim, d, a, b) ? TOCHA_COPY_ELEMENTS32
                                                                   : TOCHA_COPY_ELEMENTS;
    tocha_kernel *k;
    int st = tocha_builtin_copy_kernel(unit, mapping, &k);
    if (st) return st;
    uint32_t grid[3], block[3];
    /* units a thread in flight: 4 of 8 or 16 bytes, 8 of fewer (kernels/strided_copy.cu) */
    const int64_t flight = unit >= 8 ? 4 : 8;
    tocha_builtin_grid(dst->dev, (n + flight - 1) / flight, grid, block);
    if (mapping == TOCHA_COPY_ELEMENTS32)
        return launch_elements32(k, dst, src, n, ndim, d, a, b, grid, block);
    if (tiles) {
        /* one CTA a 64 x 64 tile, as many as fill the device a few times over */
        const int64_t count = (d[0] + 63) / 64 * ((d[1] + 63) / 64) * (n / (d[0] * d[1]));
        const int64_t cap = (int64_t)dst->dev->multiprocessors * 16;
        grid[0] = (uint32_t)(count < cap ? count : cap);
    }
    void *args[28];
    int at = 0;
    args[at++] = (void *)&src->data, args[at++] = &dst->data;
    if (!tiles) args[at++] = &n;
    args[at++] = &ndim;
    for (int i = 0; i < 8; i++)
        args[at + i] = &d[i], args[at + 8 + i] = &a[i], args[at + 16 + i] = &b[i];
    return tocha_kernel_launch_raw(k, dst->dev, grid, block, args);
}

/* A dense tensor of t's shape and dtype on device d. */
static int dense_like(const tocha_tensor *t, tocha_device *d, tocha_tensor **out)
{
    return tocha_tensor_new(d, t->elem_type, t->ndim, t->dims, out);
}

int tocha_tensor_copy_strided(tocha_tensor *dst, const tocha_tensor *src)
{
    for (int i = 0; i < dst->ndim; i++)
        if (dst->strides[i] == 0 && dst->dims[i] > 1)
            return tocha_fail(TOCHA_E_ARGUMENT,
                              "dst: an expanded view (stride 0 along dimension %d): its elements alias, "
                              "so it cannot be written",
                              i + 1);
    if (dst->dev == src->dev) return launch_strided(dst, src);
    /* Between devices: the dense copies of each side's view on its own device, and the dense
    ** transfer between them. */
    tocha_tensor *from = NULL, *to = NULL;
    int st = TOCHA_OK;
    if (!src->dense) {
        st = dense_like(src, src->dev, &from);
        if (!st) st = launch_strided(from, src);
    }
    if (!st && !dst->dense) st = dense_like(dst, dst->dev, &to);
    if (!st) st = tocha_tensor_copy(to ? to : dst, from ? from : src);
    if (!st && to) st = launch_strided(dst, to);
    tocha_tensor_destroy(from);
    tocha_tensor_destroy(to);
    return st;
}

/* One past the last byte t's elements reach (strides are never negative). */
static uint64_t extent_end(const tocha_tensor *t)
{
    uint64_t far = 0;
    for (int i = 0; i < t->ndim; i++) far += (uint64_t)(t->dims[i] - 1) * (uint64_t)t->strides[i];
    return t->data + (far + 1) * (uint64_t)tocha_dtype_size(t->elem_type);
}

static bool same_elements(const tocha_tensor *a, const tocha_tensor *b)
{
    if (a->data != b->data || a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->dims[i] != b->dims[i] || (a->dims[i] > 1 && a->strides[i] != b->strides[i])) return false;
    return true;
}

tocha_overlap tocha_tensor_overlap(const tocha_tensor *a, const tocha_tensor *b)
{
    /* An empty tensor has no element to share (and its extent would wrap below its address). */
    if (a->count == 0 || b->count == 0) return TOCHA_OVERLAP_NONE;
    if (a->storage != b->storage || a->data >= extent_end(b) || b->data >= extent_end(a))
        return TOCHA_OVERLAP_NONE;
    return same_elements(a, b) ? TOCHA_OVERLAP_SAME : TOCHA_OVERLAP_PARTIAL;
}

int tocha_tensor_check_aliasing(const tocha_tensor *const *outputs, const char *const *out_names,
                                int n_out, const tocha_tensor *const *inputs,
                                const char *const *in_names, int n_in)
{
    for (int i = 0; i < n_out; i++) {
        for (int j = 0; j < i; j++)
            if (tocha_tensor_overlap(outputs[i], outputs[j]) != TOCHA_OVERLAP_NONE)
                return tocha_fail(TOCHA_E_ARGUMENT,
                                  "%s: shares memory with %s: each output needs a tensor of its own",
                                  out_names[i], out_names[j]);
        for (int j = 0; j < n_in; j++)
            if (tocha_tensor_overlap(outputs[i], inputs[j]) == TOCHA_OVERLAP_PARTIAL)
                return tocha_fail(TOCHA_E_ARGUMENT,
                                  "%s: overlaps %s (an output may be its input only element for "
                                  "element, in place)",
                                  out_names[i], in_names[j]);
    }
    return TOCHA_OK;
}

int tocha_tensor_copy_overlapping(tocha_tensor *dst, const tocha_tensor *src, bool *handled)
{
    *handled = false;
    tocha_overlap overlap = tocha_tensor_overlap(dst, src);
    if (overlap == TOCHA_OVERLAP_NONE) return TOCHA_OK;
    *handled = true;
    if (overlap == TOCHA_OVERLAP_SAME) return TOCHA_OK; /* every element onto itself */
    tocha_tensor *first = NULL;
    int st = dense_like(src, src->dev, &first);
    if (!st) st = tocha_tensor_copy(first, src);
    if (!st) st = tocha_tensor_copy(dst, first);
    tocha_tensor_destroy(first);
    return st;
}
