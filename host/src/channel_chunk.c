/*
** channel_chunk.c: one of `chunks` equal parts of a tensor along dimension 2 (NCHW's
** channels), and its backward (the part's gradient in place, zeros elsewhere):
** kernels/channel_chunk.cu with the dtype baked in, the forward kernel's RuntimeOp, and the
** direct launches through the RuntimeOp's own packing.
*/
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>

struct tocha_channel_chunk {
    tocha_flat_op f; /* first, so that it casts */
    int32_t chunks, index;
};

static const tocha_runtime_op_vtable vtable;

int tocha_channel_chunk_new(int chunks, int index, int dtype, int block, tocha_channel_chunk **out)
{
    if (!out) return tocha_fail(TOCHA_E_ARGUMENT, "out: expected a place for the op, got NULL");
    *out = NULL;
    if (chunks < 1) return tocha_fail(TOCHA_E_ARGUMENT, "chunks: expected at least 1, got %d", chunks);
    if (index < 0 || index >= chunks)
        return tocha_fail(TOCHA_E_ARGUMENT, "index: expected 0 to %d, got %d", chunks - 1, index);
    if (!tocha_dtype_valid(dtype)) return tocha_fail(TOCHA_E_ARGUMENT, "dtype: invalid dtype %d", dtype);
    tocha_channel_chunk *c = calloc(1, sizeof *c);
    if (!c) return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for an op");
    c->chunks = chunks;
    c->index = index;
    const char *d = tocha_dtype_name(dtype);
    snprintf(c->f.id, sizeof c->f.id, "channel_chunk__%d__%d__%s__%d", chunks, index, d, block);
    char forward[128], backward[128];
    snprintf(forward, sizeof forward, "%s* x, %s* y, i64 batch, i64 item, i64 offset, i64 run", d, d);
    snprintf(backward, sizeof backward, "%s* dy, %s* dx, i64 batch, i64 item, i64 offset, i64 run", d,
             d);
    static const char *const names[2] = {"tocha_channel_chunk", "tocha_channel_unchunk"};
    const char *const params[2] = {forward, backward};
    int st = tocha_flat_op_init(&c->f, &vtable, dtype, block, "channel_chunk.cu", names,
                                tocha_dtype_ctype(dtype), params);
    if (st) {
        tocha_channel_chunk_destroy(c);
        return st;
    }
    *out = c;
    return TOCHA_OK;
}

void tocha_channel_chunk_destroy(tocha_channel_chunk *c)
{
    if (!c) return;
    tocha_flat_op_release(&c->f);
    free(c);
}

const char *tocha_channel_chunk_id(const tocha_channel_chunk *c) { return c ? c->f.id : ""; }
tocha_runtime_op *tocha_channel_chunk_op(tocha_channel_chunk *c) { return c ? &c->f.op : NULL; }
tocha_kernel *tocha_channel_chunk_kernel(const tocha_channel_chunk *c)
{
    return c ? c->f.forward : NULL;
}
tocha_kernel *tocha_channel_chunk_backward_kernel(const tocha_channel_chunk *c)
{
    return c ? c->f.backward : NULL;
}

/* ---- shapes, grid and arguments (the RuntimeOp) ---- */

static const tocha_channel_chunk *self(const tocha_runtime_op *op)
{
    return (const tocha_channel_chunk *)op;
}

/* The input's shape (named what) checked, two or more dimensions and dimension 2 divisible by
** chunks; *out gets the part's. */
static int part_shape(const tocha_channel_chunk *c, const tocha_shape *in, const char *what,
                      tocha_shape *out)
{
    int st = tocha_shape_check(in, what);
    if (st) return st;
    if (in->ndim < 2)
        return tocha_fail(TOCHA_E_ARGUMENT,
                          "%s: expected 2 or more dimensions (dimension 2 is split), got %d", what,
                          in->ndim);
    if (in->dims[1] % c->chunks != 0)
        return tocha_fail(TOCHA_E_ARGUMENT, "%s: dimension 2 (%lld) does not split into %d equal chunks",
                          what, (long long)in->dims[1], c->chunks);
    *out = *in;
    out->dims[1] = in->dims[1] / c->chunks;
    return TOCHA_OK;
}

static int one_shape(const tocha_channel_chunk *c, const tocha_shape *inputs, int n_inputs,
                     tocha_shape *out)
{
    if (!inputs || n_inputs != 1)
        return tocha_fail(TOCHA_E_ARGUMENT, "inputs: expected 1 input shape, got %d", n_inputs);
    return part_shape(c, &inputs[0], "inputs[1]", out);
}

static int op_n_activation_inputs(const tocha_runtime_op *op)
{
    (void)op;
    return 1;
}

static int op_output_shape(const tocha_runtime_op *op, const tocha_shape *inputs, int n_inputs,
                           tocha_shape *out)
{
    return one_shape(self(op), inputs, n_inputs, out);
}

/* Appends the two pointers, then batch, the item's length, the part's offset and length, for
** an input of shape in whose part is to be output_shape. */
static int pack(const tocha_channel_chunk *c, const tocha_shape *in, const tocha_shape *output_shape,
                const uint64_t ptrs[2], tocha_arg_list *visitor)
{
    tocha_shape part = {0};
    int st = part_shape(c, in, "inputs[1]", &part);
    if (st) return st;
    if (!output_shape) return tocha_fail(TOCHA_E_ARGUMENT, "output_shape: expected a shape, got NULL");
    if (!tocha_shape_same(&part, output_shape))
        return tocha_shape_mismatch("output_shape", &part, output_shape, "the chunk's");
    int64_t batch = in->dims[0], item = tocha_shape_numel(in) / batch, run = item / c->chunks;
    int64_t ints[4] = {batch, item, run * c->index, run};
    return tocha_args_append(visitor, ptrs, 2, ints, 4);
}

static int op_pack_args(const tocha_runtime_op *op, const tocha_buffer *inputs, int n_inputs,
                        const uint64_t *params, int n_params, uint64_t output,
                        const tocha_shape *output_shape, int32_t output_row_stride,
                        tocha_arg_list *visitor)
{
    (void)params, (void)n_params, (void)output_row_stride;
    if (!inputs || n_inputs != 1)
        return tocha_fail(TOCHA_E_ARGUMENT, "inputs: expected 1 input, got %d", n_inputs);
    uint64_t ptrs[2] = {inputs[0].data, output};
    return pack(self(op), &inputs[0].shape, output_shape, ptrs, visitor);
}

/* The backward writes every element of dx: its grid covers the input. */
static int op_backward_grid(const tocha_runtime_op *op, const tocha_shape *inputs, int n_inputs,
                            const tocha_shape *output, uint32_t grid[3])
{
    (void)output;
    tocha_shape part = {0};
    int st = one_shape(self(op), inputs, n_inputs, &part);
    if (st) return st;
    tocha_flat_op_grid_of(&self(op)->f, &inputs[0], grid);
    return TOCHA_OK;
}

static int op_pack_backward_args(const tocha_runtime_op *op, const tocha_buffer *inputs, int n_inputs,
                                 const uint64_t *params, int n_params, uint64_t output,
                                 const tocha_shape *output_shape, uint64_t grad_output,
                                 int32_t grad_output_row_stride, const uint64_t *grad_inputs,
                                 int n_grad_inputs, const uint64_t *grad_params, int n_grad_params,
                                 tocha_arg_list *visitor)
{
    (void)params, (void)n_params, (void)output, (void)grad_output_row_stride;
    (void)grad_params, (void)n_grad_params;
    if (!inputs || n_inputs != 1)
        return tocha_fail(TOCHA_E_ARGUMENT, "inputs: expected 1 input, got %d", n_inputs);
    if (!grad_inputs || n_grad_inputs != 1)
        return tocha_fail(TOCHA_E_ARGUMENT, "grad_inputs: expected 1, got %d", n_grad_inputs);
    uint64_t ptrs[2] = {grad_output, grad_inputs[0]};
    return pack(self(op), &inputs[0].shape, output_shape, ptrs, visitor);
}

/* Parameters, row strides and launch counts keep teeny-kernels' defaults (NULL slots). */
static const tocha_runtime_op_vtable vtable = {
    .n_activation_inputs = op_n_activation_inputs,
    .compute_concrete_output_shape = op_output_shape,
    .grid = tocha_flat_op_grid,
    .block = tocha_flat_op_block,
    .pack_args = op_pack_args,
    .has_backward = tocha_flat_op_has_backward,
    .backward_grid = op_backward_grid,
    .backward_block = tocha_flat_op_block,
    .pack_backward_args = op_pack_backward_args,
};

/* ---- direct launches ---- */

/* Launches k with the whole tensor x (named x_name) and its part y (named y_name); ptrs in
** k's order; the grid covers `grid_shape`. */
static int launch(const tocha_channel_chunk *c, tocha_kernel *k, const tocha_tensor *x,
                  const tocha_tensor *y, const uint64_t ptrs[2], const char *x_name, const char *y_name,
                  const tocha_tensor *grid_of)
{
    const tocha_tensor *t[2] = {x, y};
    const char *names[2] = {x_name, y_name};
    for (int i = 0; i < 2; i++) {
        int st = tocha_flat_op_check_tensor(&c->f, t[i], t[0], names[i], names[0]);
        if (st) return st;
    }
    /* The output is y going forward, x (dx) going backward. */
    bool forward = k == c->f.forward;
    int st = tocha_tensor_check_aliasing(&t[forward ? 1 : 0], &names[forward ? 1 : 0], 1,
                                         &t[forward ? 0 : 1], &names[forward ? 0 : 1], 1);
    if (st) return st;
    tocha_shape sx = tocha_shape_of(x), sy = tocha_shape_of(y), part = {0};
    st = part_shape(c, &sx, x_name, &part);
    if (st) return st;
    if (!tocha_shape_same(&part, &sy)) {
        char like[64];
        snprintf(like, sizeof like, "chunk %d of %d of %s", c->index + 1, c->chunks, x_name);
        return tocha_shape_mismatch(y_name, &part, &sy, like);
    }
    tocha_arg_list args = {0};
    if ((st = pack(c, &sx, &sy, ptrs, &args))) return st;
    tocha_shape sg = tocha_shape_of(grid_of);
    uint32_t grid[3], block[3];
    tocha_flat_op_grid_of(&c->f, &sg, grid);
    tocha_flat_op_block(&c->f.op, block);
    return tocha_kernel_launch_packed(k, x->dev, grid, block, &args);
}

int tocha_channel_chunk_forward(tocha_channel_chunk *c, const tocha_tensor *x, tocha_tensor *y)
{
    if (!c) return tocha_fail(TOCHA_E_ARGUMENT, "op: expected a channel_chunk op, got NULL");
    if (!x || !y) return tocha_fail(TOCHA_E_ARGUMENT, "%s: expected a tensor, got NULL", x ? "y" : "x");
    uint64_t ptrs[2] = {x->data, y->data};
    return launch(c, c->f.forward, x, y, ptrs, "x", "y", y);
}

int tocha_channel_chunk_backward(tocha_channel_chunk *c, const tocha_tensor *dy, tocha_tensor *dx)
{
    if (!c) return tocha_fail(TOCHA_E_ARGUMENT, "op: expected a channel_chunk op, got NULL");
    if (!dy || !dx)
        return tocha_fail(TOCHA_E_ARGUMENT, "%s: expected a tensor, got NULL", dy ? "dx" : "dy");
    uint64_t ptrs[2] = {dy->data, dx->data};
    return launch(c, c->f.backward, dx, dy, ptrs, "dx", "dy", dx);
}
