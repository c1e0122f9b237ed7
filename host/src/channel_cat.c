/*
** channel_cat.c: the concatenation of two tensors along dimension 1 (NCHW's channels), and its
** backward, the split of the gradient: kernels/channel_cat.cu with the dtype baked in, and the
** forward kernel's RuntimeOp. The direct launches go through the RuntimeOp's own packing.
*/
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>

struct tocha_channel_cat {
    tocha_flat_op f; /* first, so that it casts */
};

static const tocha_runtime_op_vtable vtable;

int tocha_channel_cat_new(int dtype, int block, tocha_channel_cat **out)
{
    if (!out) return tocha_fail(TOCHA_E_ARGUMENT, "out: expected a place for the op, got NULL");
    *out = NULL;
    if (!tocha_dtype_valid(dtype)) return tocha_fail(TOCHA_E_ARGUMENT, "dtype: invalid dtype %d", dtype);
    tocha_channel_cat *c = calloc(1, sizeof *c);
    if (!c) return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for an op");
    const char *d = tocha_dtype_name(dtype);
    snprintf(c->f.id, sizeof c->f.id, "channel_cat__%s__%d", d, block);
    char forward[128], backward[128];
    snprintf(forward, sizeof forward, "%s* a, %s* b, %s* y, i64 batch, i64 sa, i64 sb", d, d, d);
    snprintf(backward, sizeof backward, "%s* dy, %s* da, %s* db, i64 batch, i64 sa, i64 sb", d, d, d);
    static const char *const names[2] = {"tocha_channel_cat", "tocha_channel_split"};
    const char *const params[2] = {forward, backward};
    int st = tocha_flat_op_init(&c->f, &vtable, dtype, block, "channel_cat.cu", names,
                                tocha_dtype_ctype(dtype), params);
    if (st) {
        tocha_channel_cat_destroy(c);
        return st;
    }
    *out = c;
    return TOCHA_OK;
}

void tocha_channel_cat_destroy(tocha_channel_cat *c)
{
    if (!c) return;
    tocha_flat_op_release(&c->f);
    free(c);
}

const char *tocha_channel_cat_id(const tocha_channel_cat *c) { return c ? c->f.id : ""; }
tocha_runtime_op *tocha_channel_cat_op(tocha_channel_cat *c) { return c ? &c->f.op : NULL; }
tocha_kernel *tocha_channel_cat_kernel(const tocha_channel_cat *c) { return c ? c->f.forward : NULL; }
tocha_kernel *tocha_channel_cat_backward_kernel(const tocha_channel_cat *c)
{
    return c ? c->f.backward : NULL;
}

/* ---- shapes, grid and arguments (the RuntimeOp) ---- */

static const tocha_channel_cat *self(const tocha_runtime_op *op)
{
    return (const tocha_channel_cat *)op;
}

/* The two inputs' shapes (named name_a, name_b) checked: two or more dimensions, equal but for
** dimension 2 (C's 1); *out gets the output's, a's with that dimension the sum of both. */
static int cat_shape(const tocha_shape *a, const tocha_shape *b, const char *name_a, const char *name_b,
                     tocha_shape *out)
{
    int st = tocha_shape_check(a, name_a);
    if (!st) st = tocha_shape_check(b, name_b);
    if (st) return st;
    if (a->ndim < 2)
        return tocha_fail(TOCHA_E_ARGUMENT,
                          "%s: expected 2 or more dimensions (dimension 2 is joined), got %d", name_a,
                          a->ndim);
    tocha_shape want = *a;
    want.dims[1] = b->ndim == a->ndim ? b->dims[1] : 1;
    if (!tocha_shape_same(&want, b)) {
        char like[64];
        snprintf(like, sizeof like, "like %s but for dimension 2", name_a);
        return tocha_shape_mismatch(name_b, &want, b, like);
    }
    *out = *a;
    out->dims[1] = a->dims[1] + b->dims[1];
    return TOCHA_OK;
}

static int two_shapes(const tocha_shape *inputs, int n_inputs, tocha_shape *out)
{
    if (!inputs || n_inputs != 2)
        return tocha_fail(TOCHA_E_ARGUMENT, "inputs: expected 2 input shapes, got %d", n_inputs);
    return cat_shape(&inputs[0], &inputs[1], "inputs[1]", "inputs[2]", out);
}

static int op_n_activation_inputs(const tocha_runtime_op *op)
{
    (void)op;
    return 2;
}

static int op_output_shape(const tocha_runtime_op *op, const tocha_shape *inputs, int n_inputs,
                           tocha_shape *out)
{
    (void)op;
    return two_shapes(inputs, n_inputs, out);
}

/* Appends the three pointers, then batch and the two runs' lengths, for inputs of shapes a, b
** whose output is to be output_shape. */
static int pack(const tocha_shape *a, const tocha_shape *b, const tocha_shape *output_shape,
                const uint64_t ptrs[3], tocha_arg_list *visitor)
{
    tocha_shape out = {0};
    int st = cat_shape(a, b, "inputs[1]", "inputs[2]", &out);
    if (st) return st;
    if (!output_shape) return tocha_fail(TOCHA_E_ARGUMENT, "output_shape: expected a shape, got NULL");
    if (!tocha_shape_same(&out, output_shape))
        return tocha_shape_mismatch("output_shape", &out, output_shape, "the inputs' joined");
    int64_t batch = a->dims[0];
    int64_t runs[3] = {batch, tocha_shape_numel(a) / batch, tocha_shape_numel(b) / batch};
    return tocha_args_append(visitor, ptrs, 3, runs, 3);
}

static int op_pack_args(const tocha_runtime_op *op, const tocha_buffer *inputs, int n_inputs,
                        const uint64_t *params, int n_params, uint64_t output,
                        const tocha_shape *output_shape, int32_t output_row_stride,
                        tocha_arg_list *visitor)
{
    (void)op, (void)params, (void)n_params, (void)output_row_stride;
    if (!inputs || n_inputs != 2)
        return tocha_fail(TOCHA_E_ARGUMENT, "inputs: expected 2 inputs, got %d", n_inputs);
    uint64_t ptrs[3] = {inputs[0].data, inputs[1].data, output};
    return pack(&inputs[0].shape, &inputs[1].shape, output_shape, ptrs, visitor);
}

static int op_backward_grid(const tocha_runtime_op *op, const tocha_shape *inputs, int n_inputs,
                            const tocha_shape *output, uint32_t grid[3])
{
    (void)output;
    tocha_shape out = {0};
    int st = two_shapes(inputs, n_inputs, &out);
    if (st) return st;
    tocha_flat_op_grid_of(&self(op)->f, &out, grid);
    return TOCHA_OK;
}

static int op_pack_backward_args(const tocha_runtime_op *op, const tocha_buffer *inputs, int n_inputs,
                                 const uint64_t *params, int n_params, uint64_t output,
                                 const tocha_shape *output_shape, uint64_t grad_output,
                                 int32_t grad_output_row_stride, const uint64_t *grad_inputs,
                                 int n_grad_inputs, const uint64_t *grad_params, int n_grad_params,
                                 tocha_arg_list *visitor)
{
    (void)op, (void)params, (void)n_params, (void)output, (void)grad_output_row_stride;
    (void)grad_params, (void)n_grad_params;
    if (!inputs || n_inputs != 2)
        return tocha_fail(TOCHA_E_ARGUMENT, "inputs: expected 2 inputs, got %d", n_inputs);
    if (!grad_inputs || n_grad_inputs != 2)
        return tocha_fail(TOCHA_E_ARGUMENT, "grad_inputs: expected 2, got %d", n_grad_inputs);
    uint64_t ptrs[3] = {grad_output, grad_inputs[0], grad_inputs[1]};
    return pack(&inputs[0].shape, &inputs[1].shape, output_shape, ptrs, visitor);
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

/* Launches k over the parts a, b and the joined tensor y (names[0..2] theirs); ptrs in k's
** order. */
static int launch(const tocha_channel_cat *c, tocha_kernel *k, const tocha_tensor *a,
                  const tocha_tensor *b, const tocha_tensor *y, const uint64_t ptrs[3],
                  const char *const names[3])
{
    tocha_shape sa = tocha_shape_of(a), sb = tocha_shape_of(b), sy = tocha_shape_of(y), out = {0};
    int st = cat_shape(&sa, &sb, names[0], names[1], &out);
    if (st) return st;
    if (!tocha_shape_same(&out, &sy)) {
        char like[64];
        snprintf(like, sizeof like, "%s and %s joined", names[0], names[1]);
        return tocha_shape_mismatch(names[2], &out, &sy, like);
    }
    tocha_arg_list args = {0};
    if ((st = pack(&sa, &sb, &sy, ptrs, &args))) return st;
    uint32_t grid[3], block[3];
    tocha_flat_op_grid_of(&c->f, &sy, grid);
    tocha_flat_op_block(&c->f.op, block);
    return tocha_kernel_launch_packed(k, y->dev, grid, block, &args);
}

int tocha_channel_cat_forward(tocha_channel_cat *c, const tocha_tensor *a, const tocha_tensor *b,
                              tocha_tensor *y)
{
    if (!c) return tocha_fail(TOCHA_E_ARGUMENT, "op: expected a channel_cat op, got NULL");
    const tocha_tensor *t[3] = {a, b, y};
    static const char *const names[] = {"a", "b", "y"};
    for (int i = 0; i < 3; i++) {
        int st = tocha_flat_op_check_tensor(&c->f, t[i], t[0], names[i], names[0]);
        if (st) return st;
    }
    int st = tocha_tensor_check_aliasing(&t[2], &names[2], 1, t, names, 2);
    if (st) return st;
    uint64_t ptrs[3] = {a->data, b->data, y->data};
    return launch(c, c->f.forward, a, b, y, ptrs, names);
}

int tocha_channel_cat_backward(tocha_channel_cat *c, const tocha_tensor *dy, tocha_tensor *da,
                               tocha_tensor *db)
{
    if (!c) return tocha_fail(TOCHA_E_ARGUMENT, "op: expected a channel_cat op, got NULL");
    const tocha_tensor *t[3] = {dy, da, db};
    static const char *const names[] = {"dy", "da", "db"}, *const parts[] = {"da", "db", "dy"};
    for (int i = 0; i < 3; i++) {
        int st = tocha_flat_op_check_tensor(&c->f, t[i], t[0], names[i], names[0]);
        if (st) return st;
    }
    int st = tocha_tensor_check_aliasing(&t[1], &names[1], 2, t, names, 1);
    if (st) return st;
    uint64_t ptrs[3] = {dy->data, da->data, db->data};
    return launch(c, c->f.backward, da, db, dy, ptrs, parts);
}
