/*
** elementwise.c: the elementwise ops, y = f(x) (neg, abs, exp, log, sqrt, relu, sigmoid, tanh,
** silu, gelu) and y = g(a, b) (add, sub, mul, div, max, min), each a kernel pair of
** kernels/elementwise.cu with the function baked in at construction, and the forward kernel's
** RuntimeOp. Every tensor of one op has one shape (no broadcasting: the channel bias add is the
** op that broadcasts). The direct launches go through the RuntimeOp's own grid and packing.
*/
#include "internal.h"
#include "embedded.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const unary_names[] = {"neg",  "abs",     "exp",  "log",  "sqrt",
                                          "relu", "sigmoid", "tanh", "silu", "gelu"};
static const char *const binary_names[] = {"add", "sub", "mul", "div", "max", "min"};
#define N_UNARY (int)(sizeof unary_names / sizeof unary_names[0])
#define N_BINARY (int)(sizeof binary_names / sizeof binary_names[0])

struct tocha_elementwise {
    tocha_runtime_op op; /* first, so that it casts */
    int32_t arity;       /* 1 or 2 */
    int32_t fn;          /* index into unary_names or binary_names */
    int32_t dtype, block;
    char id[64];
    tocha_kernel *forward, *backward;
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
    if (block < 32 || block > 1024 || block % 32 != 0)
        return tocha_fail(TOCHA_E_ARGUMENT, "block: expected a multiple of 32 from 32 to 1024, got %d",
                          block);
    const char *source = tocha_embedded_find("elementwise.cu");
    if (!source) return tocha_fail(TOCHA_E_INTERNAL, "kernel source elementwise.cu is not embedded");
    tocha_elementwise *e = calloc(1, sizeof *e);
    if (!e) return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for an op");
    e->op.vtable = &vtable;
    e->arity = arity;
    e->fn = index;
    e->dtype = dtype;
    e->block = block;
    const char *d = tocha_dtype_name(dtype);
    snprintf(e->id, sizeof e->id, "elementwise_%s__%s__%d",
             arity == 1 ? unary_names[index] : binary_names[index], d, block);
    char targs[64], params[2][128];
    snprintf(targs, sizeof targs, "%s, %d", tocha_dtype_ctype(dtype), index);
    if (arity == 1) {
        snprintf(params[0], sizeof params[0], "%s* x, %s* y, i64 n", d, d);
        snprintf(params[1], sizeof params[1], "%s* x, %s* dy, %s* dx, i64 n", d, d, d);
    } else {
        snprintf(params[0], sizeof params[0], "%s* a, %s* b, %s* y, i64 n", d, d, d);
        snprintf(params[1], sizeof params[1], "%s* a, %s* b, %s* dy, %s* da, %s* db, i64 n", d, d, d, d,
                 d);
    }
    int st = tocha_kernel_new(source, arity == 1 ? "tocha_unary" : "tocha_binary", targs, params[0],
                              &e->forward);
    if (!st)
        st = tocha_kernel_new(source, arity == 1 ? "tocha_unary_backward" : "tocha_binary_backward",
                              targs, params[1], &e->backward);
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
    tocha_kernel_destroy(e->forward);
    tocha_kernel_destroy(e->backward);
    free(e);
}

int tocha_elementwise_arity(const tocha_elementwise *e) { return e ? e->arity : 0; }
const char *tocha_elementwise_id(const tocha_elementwise *e) { return e ? e->id : ""; }
tocha_runtime_op *tocha_elementwise_op(tocha_elementwise *e) { return e ? &e->op : NULL; }
tocha_kernel *tocha_elementwise_kernel(const tocha_elementwise *e) { return e ? e->forward : NULL; }
tocha_kernel *tocha_elementwise_backward_kernel(const tocha_elementwise *e)
{
    return e ? e->backward : NULL;
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

static void grid_for(const tocha_elementwise *e, const tocha_shape *s, uint32_t grid[3])
{
    grid[0] = tocha_vector_grid(tocha_shape_numel(s), tocha_dtype_size(e->dtype), e->block);
    grid[1] = grid[2] = 1;
}

static int op_grid(const tocha_runtime_op *op, const tocha_shape *output, uint32_t grid[3])
{
    int st = tocha_shape_check(output, "output_shape");
    if (st) return st;
    grid_for(self(op), output, grid);
    return TOCHA_OK;
}

static void op_block(const tocha_runtime_op *op, uint32_t block[3])
{
    block[0] = (uint32_t)self(op)->block;
    block[1] = block[2] = 1;
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

static int op_has_backward(const tocha_runtime_op *op)
{
    (void)op;
    return 1;
}

static int op_backward_grid(const tocha_runtime_op *op, const tocha_shape *inputs, int n_inputs,
                            const tocha_shape *output, uint32_t grid[3])
{
    (void)output;
    tocha_shape s = {0};
    int st = input_shape(self(op), inputs, n_inputs, &s);
    if (st) return st;
    grid_for(self(op), &s, grid);
    return TOCHA_OK;
}

static void op_backward_block(const tocha_runtime_op *op, uint32_t block[3]) { op_block(op, block); }

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
    .grid = op_grid,
    .block = op_block,
    .pack_args = op_pack_args,
    .has_backward = op_has_backward,
    .backward_grid = op_backward_grid,
    .backward_block = op_backward_block,
    .pack_backward_args = op_pack_backward_args,
};

/* ---- direct launches ---- */

static int check_tensor(const tocha_elementwise *e, const tocha_tensor *t, const char *what)
{
    int st = tocha_tensor_check(t, what);
    if (st) return st;
    if (t->elem_type != e->dtype)
        return tocha_fail(TOCHA_E_ARGUMENT, "%s: expected dtype %s (the op's), got %s", what,
                          tocha_dtype_name(e->dtype), tocha_dtype_name(t->elem_type));
    return TOCHA_OK;
}

/* Checks the tensors of a launch (names[i] for each) for the op's dtype, one device and one
** shape, the first's. */
static int check_all(const tocha_elementwise *e, const tocha_tensor *const *t, const char *const *names,
                     int n)
{
    for (int i = 0; i < n; i++) {
        int st = check_tensor(e, t[i], names[i]);
        if (st) return st;
        if (t[i]->dev != t[0]->dev)
            return tocha_fail(TOCHA_E_ARGUMENT, "%s: the tensor is on %s, %s on %s", names[i],
                              t[i]->dev->name, names[0], t[0]->dev->name);
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
    uint32_t grid[3], block[3] = {(uint32_t)e->block, 1, 1};
    grid_for(e, &s, grid);
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
    int st = check_all(e, t, e->arity == 1 ? unary : binary, e->arity + 1);
    return st ? st : launch(e, e->forward, t, e->arity + 1);
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
        return st ? st : launch(e, e->backward, t, 3);
    }
    const tocha_tensor *t[5] = {a, b, dy, da, db};
    static const char *const names[] = {"a", "b", "dy", "da", "db"};
    int st = check_all(e, t, names, 5);
    return st ? st : launch(e, e->backward, t, 5);
}
