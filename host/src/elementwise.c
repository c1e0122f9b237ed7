/*
** elementwise.c: the elementwise ops, y = f(x) (neg, abs, exp, log, sqrt, relu, sigmoid, tanh,
** silu, gelu) and y = g(a, b) (add, sub, mul, div, max, min), each a kernel pair of
** kernels/elementwise.cu with the function baked in at construction, and the forward kernel's
** RuntimeOp. Every tensor of one op has one shape (no broadcasting: the channel bias add is the
** op that broadcasts). The direct launches go through the RuntimeOp's own grid and packing.
*/
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const unary_names[] = {"neg",  "abs",     "exp",  "log",  "sqrt",
                                          "relu", "sigmoid", "tanh", "silu", "gelu"};
static const char *const binary_names[] = {"add", "sub", "mul", "div", "max", "min"};
#define N_UNARY (int)(sizeof unary_names / sizeof unary_names[0])
#define N_BINARY (int)(sizeof binary_names / sizeof binary_names[0])

struct tocha_elementwise {
    tocha_flat_op f; /* first, so that it casts */
    int32_t arity;   /* 1 or 2 */
    int32_t fn;      /* index into unary_names or binary_names */
};

static const tocha_runtime_op_vtable vtable;

/* The function's arity and index, or 0 when fn names none. */
static int find_fn(const char *fn, int *index)
{
    for (int i = 0; fn && i < N_UNARY; i++)
        if (strcmp(fn, unary_names[i]) == 0) return *index = i, 1;
    for (int i = 0; fn && i < N_BINARY; i++)
        if (strcmp(fn, binary_names[i]) == 0) return *index = i, 2;
    return 0;
}

static bool is_float(int dtype)
{
    return dtype == TOCHA_F32 || dtype == TOCHA_F64 || dtype == TOCHA_F16 || dtype == TOCHA_BF16;
}

int tocha_elementwise_new(const char *fn, int dtype, int block, tocha_elementwise **out)
{
    if (!out) return tocha_fail(TOCHA_E_ARGUMENT, "out: expected a place for the op, got NULL");
    *out = NULL;
    int index = 0, arity = find_fn(fn, &index);
    if (!arity)
        return tocha_fail(TOCHA_E_ARGUMENT,
                          "fn: unknown function '%s' (expected neg, abs, exp, log, sqrt, relu, sigmoid, "
                          "tanh, silu, gelu, add, sub, mul, div, max or min)",
                          fn ? fn : "(null)");
    if (!tocha_dtype_valid(dtype) || !is_float(dtype))
        return tocha_fail(TOCHA_E_ARGUMENT,
                          "dtype: expected a float dtype (f32, f64, f16, bf16), got %s",
                          tocha_dtype_valid(dtype) ? tocha_dtype_name(dtype) : "an invalid one");
    tocha_elementwise *e = calloc(1, sizeof *e);
    if (!e) return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for an op");
    e->arity = arity;
    e->fn = index;
    const char *d = tocha_dtype_name(dtype);
    snprintf(e->f.id, sizeof e->f.id, "elementwise_%s__%s__%d",
             arity == 1 ? unary_names[index] : binary_names[index], d, block);
    char targs[64], forward[128], backward[128];
    snprintf(targs, sizeof targs, "%s, %d", tocha_dtype_ctype(dtype), index);
    if (arity == 1) {
        snprintf(forward, sizeof forward, "%s* x, %s* y, i64 n", d, d);
        snprintf(backward, sizeof backward, "%s* x, %s* dy, %s* dx, i64 n", d, d, d);
    } else {
        snprintf(forward, sizeof forward, "%s* a, %s* b, %s* y, i64 n", d, d, d);
        snprintf(backward, sizeof backward, "%s* a, %s* b, %s* dy, %s* da, %s* db, i64 n", d, d, d, d,
                 d);
    }
    static const char *const unary[2] = {"tocha_unary", "tocha_unary_backward"},
                             *const binary[2] = {"tocha_binary", "tocha_binary_backward"};
    const char *const params[2] = {forward, backward};
    int st = tocha_flat_op_init(&e->f, &vtable, dtype, block, "elementwise.cu",
                                arity == 1 ? unary : binary, targs, params);
    if (st) {
        tocha_elementwise_destroy(e);
        return st;
    }
    *out = e;
    return TOCHA_OK;
}

void tocha_elementwise_destroy(tocha_elementwise *e)
{
    if (!e) return;
    tocha_flat_op_release(&e->f);
    free(e);
}

int tocha_elementwise_arity(const tocha_elementwise *e) { return e ? e->arity : 0; }
const char *tocha_elementwise_id(const tocha_elementwise *e) { return e ? e->f.id : ""; }
tocha_runtime_op *tocha_elementwise_op(tocha_elementwise *e) { return e ? &e->f.op : NULL; }
tocha_kernel *tocha_elementwise_kernel(const tocha_elementwise *e) { return e ? e->f.forward : NULL; }
tocha_kernel *tocha_elementwise_backward_kernel(const tocha_elementwise *e)
{
    return e ? e->f.backward : NULL;
}

/* ---- shapes, grid and arguments (the RuntimeOp) ---- */

static const tocha_elementwise *self(const tocha_runtime_op *op)
{
    return (const tocha_elementwise *)op;
}

/* The inputs' shapes, checked: arity of them, each valid, all one shape; *out gets it. */
static int input_shape(const tocha_elementwise *e, const tocha_shape *inputs, int n_inputs,
                       tocha_shape *out)
{
    if (!inputs || n_inputs != e->arity)
        return tocha_fail(TOCHA_E_ARGUMENT, "inputs: expected %d input shape%s, got %d", e->arity,
                          e->arity == 1 ? "" : "s", n_inputs);
    int st = tocha_shape_check(&inputs[0], "inputs[1]");
    if (st) return st;
    if (e->arity == 2 && !tocha_shape_same(&inputs[0], &inputs[1]))
        return tocha_shape_mismatch("inputs[2]", &inputs[0], &inputs[1], "like inputs[1]");
    *out = inputs[0];
    return TOCHA_OK;
}

static int op_n_activation_inputs(const tocha_runtime_op *op) { return self(op)->arity; }

static int op_output_shape(const tocha_runtime_op *op, const tocha_shape *inputs, int n_inputs,
                           tocha_shape *out)
{
    return input_shape(self(op), inputs, n_inputs, out);
}

/* The inputs' common shape, which output_shape must be. */
static int buffers_shape(const tocha_elementwise *e, const tocha_buffer *inputs, int n_inputs,
                         const tocha_shape *output_shape, tocha_shape *out)
{
    if (!inputs || n_inputs != e->arity)
        return tocha_fail(TOCHA_E_ARGUMENT, "inputs: expected %d input%s, got %d", e->arity,
                          e->arity == 1 ? "" : "s", n_inputs);
    tocha_shape shapes[2];
    for (int i = 0; i < n_inputs; i++) shapes[i] = inputs[i].shape;
    int st = input_shape(e, shapes, n_inputs, out);
    if (st) return st;
    if (!output_shape) return tocha_fail(TOCHA_E_ARGUMENT, "output_shape: expected a shape, got NULL");
    if (!tocha_shape_same(out, output_shape))
        return tocha_shape_mismatch("output_shape", out, output_shape, "the inputs'");
    return TOCHA_OK;
}

static int op_pack_args(const tocha_runtime_op *op, const tocha_buffer *inputs, int n_inputs,
                        const uint64_t *params, int n_params, uint64_t output,
                        const tocha_shape *output_shape, int32_t output_row_stride,
                        tocha_arg_list *visitor)
{
    (void)params, (void)n_params, (void)output_row_stride;
    const tocha_elementwise *e = self(op);
    tocha_shape s = {0};
    int st = buffers_shape(e, inputs, n_inputs, output_shape, &s);
    if (st) return st;
    uint64_t ptrs[3] = {inputs[0].data, e->arity == 2 ? inputs[1].data : output, output};
    int64_t n = tocha_shape_numel(&s);
    return tocha_args_append(visitor, ptrs, e->arity + 1, &n, 1);
}

static int op_backward_grid(const tocha_runtime_op *op, const tocha_shape *inputs, int n_inputs,
                            const tocha_shape *output, uint32_t grid[3])
{
    (void)output;
    tocha_shape s = {0};
    int st = input_shape(self(op), inputs, n_inputs, &s);
    if (st) return st;
    tocha_flat_op_grid_of(&self(op)->f, &s, grid);
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
    const tocha_elementwise *e = self(op);
    tocha_shape s = {0};
    int st = buffers_shape(e, inputs, n_inputs, output_shape, &s);
    if (st) return st;
    if (!grad_inputs || n_grad_inputs != e->arity)
        return tocha_fail(TOCHA_E_ARGUMENT, "grad_inputs: expected %d, got %d", e->arity, n_grad_inputs);
    if (e->arity == 1) {
        uint64_t ptrs[3] = {inputs[0].data, grad_output, grad_inputs[0]};
        int64_t n = tocha_shape_numel(&s);
        return tocha_args_append(visitor, ptrs, 3, &n, 1);
    }
    uint64_t ptrs[5] = {inputs[0].data, inputs[1].data, grad_output, grad_inputs[0], grad_inputs[1]};
    int64_t n = tocha_shape_numel(&s);
    return tocha_args_append(visitor, ptrs, 5, &n, 1);
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

/* Checks the tensors of a launch (names[i] for each) for the op's dtype, one device and one
** shape, the first's. */
static int check_all(const tocha_elementwise *e, const tocha_tensor *const *t, const char *const *names,
                     int n)
{
    for (int i = 0; i < n; i++) {
        int st = tocha_flat_op_check_tensor(&e->f, t[i], t[0], names[i], names[0]);
        if (st) return st;
        tocha_shape a = tocha_shape_of(t[0]), b = tocha_shape_of(t[i]);
        if (!tocha_shape_same(&a, &b)) {
            char like[64];
            snprintf(like, sizeof like, "like %s", names[0]);
            return tocha_shape_mismatch(names[i], &a, &b, like);
        }
    }
    return TOCHA_OK;
}

static int launch(const tocha_elementwise *e, tocha_kernel *k, const tocha_tensor *const *t, int n)
{
    tocha_arg_list args = {0};
    uint64_t ptrs[5];
    for (int i = 0; i < n; i++) ptrs[i] = t[i]->data;
    int st = tocha_args_append(&args, ptrs, n, &t[0]->count, 1);
    if (st) return st;
    tocha_shape s = tocha_shape_of(t[0]);
    uint32_t grid[3], block[3];
    tocha_flat_op_grid_of(&e->f, &s, grid);
    tocha_flat_op_block(&e->f.op, block);
    return tocha_kernel_launch_packed(k, t[0]->dev, grid, block, &args);
}

int tocha_elementwise_forward(tocha_elementwise *e, const tocha_tensor *a, const tocha_tensor *b,
                              tocha_tensor *y)
{
    if (!e) return tocha_fail(TOCHA_E_ARGUMENT, "op: expected an elementwise op, got NULL");
    if (e->arity == 1 && b)
        return tocha_fail(TOCHA_E_ARGUMENT, "b: a unary op takes one input, got a second");
    const tocha_tensor *t[3] = {a, e->arity == 2 ? b : y, y};
    static const char *const unary[] = {"x", "y"}, *const binary[] = {"a", "b", "y"};
    const char *const *names = e->arity == 1 ? unary : binary;
    int st = check_all(e, t, names, e->arity + 1);
    if (!st) st = tocha_tensor_check_aliasing(&t[e->arity], &names[e->arity], 1, t, names, e->arity);
    return st ? st : launch(e, e->f.forward, t, e->arity + 1);
}

int tocha_elementwise_backward(tocha_elementwise *e, const tocha_tensor *a, const tocha_tensor *b,
                               const tocha_tensor *dy, tocha_tensor *da, tocha_tensor *db)
{
    if (!e) return tocha_fail(TOCHA_E_ARGUMENT, "op: expected an elementwise op, got NULL");
    if (e->arity == 1) {
        if (b || db) return tocha_fail(TOCHA_E_ARGUMENT, "b: a unary op takes one input, got a second");
        const tocha_tensor *t[3] = {a, dy, da};
        static const char *const names[] = {"x", "dy", "dx"};
        int st = check_all(e, t, names, 3);
        if (!st) st = tocha_tensor_check_aliasing(&t[2], &names[2], 1, t, names, 2);
        return st ? st : launch(e, e->f.backward, t, 3);
    }
    const tocha_tensor *t[5] = {a, b, dy, da, db};
    static const char *const names[] = {"a", "b", "dy", "da", "db"};
    int st = check_all(e, t, names, 5);
    if (!st) st = tocha_tensor_check_aliasing(&t[3], &names[3], 2, t, names, 3);
    return st ? st : launch(e, e->f.backward, t, 5);
}
