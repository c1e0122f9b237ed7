/*
** flat_op.c: what the flat tensor ops built in C (elementwise.c)
** need: shapes checked and compared with messages that name the argument,
** the packing of pointer and count arguments into a RuntimeOp's argument list, their kernels'
** making, and the RuntimeOp slots that are the same for all of them (one thread a 16-byte
** vector of the output).
*/
#include "internal.h"
#include "embedded.h"

#include <string.h>

tocha_shape tocha_shape_of(const tocha_tensor *t)
{
    tocha_shape s = {.ndim = t->ndim};
    memcpy(s.dims, t->dims, sizeof s.dims);
    return s;
}

int64_t tocha_shape_numel(const tocha_shape *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++) n *= s->dims[i];
    return n;
}

bool tocha_shape_same(const tocha_shape *a, const tocha_shape *b)
{
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

int tocha_shape_mismatch(const char *what, const tocha_shape *want, const tocha_shape *got,
                         const char *like)
{
    char a[200], b[200];
    tocha_format_dims(want->dims, want->ndim, ", ", a, sizeof a);
    tocha_format_dims(got->dims, got->ndim, ", ", b, sizeof b);
    return tocha_fail(TOCHA_E_ARGUMENT, "%s: expected shape [%s] (%s), got [%s]", what, a, like, b);
}

int tocha_shape_check(const tocha_shape *s, const char *what)
{
    if (s->ndim < 1 || s->ndim > TOCHA_MAX_DIMS)
        return tocha_fail(TOCHA_E_ARGUMENT, "%s: expected 1 to %d dimensions, got %d", what,
                          TOCHA_MAX_DIMS, s->ndim);
    for (int i = 0; i < s->ndim; i++)
        if (s->dims[i] < 1)
            return tocha_fail(TOCHA_E_ARGUMENT, "%s: size %lld of dimension %d is not positive", what,
                              (long long)s->dims[i], i + 1);
    return TOCHA_OK;
}

int tocha_args_append(tocha_arg_list *visitor, const uint64_t *ptrs, int n_ptrs, const int64_t *ints,
                      int n_ints)
{
    if (!visitor) return tocha_fail(TOCHA_E_ARGUMENT, "visitor: expected an argument list, got NULL");
    int n = n_ptrs + n_ints;
    if (visitor->count < 0 || visitor->count > TOCHA_MAX_PARAMS - n)
        return tocha_fail(TOCHA_E_ARGUMENT, "visitor: no room for %d more arguments", n);
    tocha_arg *a = &visitor->args[visitor->count];
    for (int i = 0; i < n_ptrs; i++)
        a[i] = (tocha_arg){.kind = TOCHA_ARG_POINTER, .i = (int64_t)ptrs[i]};
    for (int i = 0; i < n_ints; i++) a[n_ptrs + i] = (tocha_arg){.kind = TOCHA_ARG_INT, .i = ints[i]};
    visitor->count += n;
    return TOCHA_OK;
}

uint32_t tocha_vector_grid(int64_t elements, int elem_size, int block)
{
    int64_t per_vector = elem_size >= 16 ? 1 : 16 / elem_size;
    int64_t work = (elements + per_vector - 1) / per_vector;
    int64_t blocks = (work + block - 1) / block;
    return (uint32_t)(blocks < 1 ? 1 : blocks < INT32_MAX ? blocks : INT32_MAX);
}

int tocha_flat_op_init(tocha_flat_op *f, const tocha_runtime_op_vtable *vtable, int dtype, int block,
                       const char *file, const char *const names[2], const char *targs,
                       const char *const params[2])
{
    if (block < 32 || block > 1024 || block % 32 != 0)
        return tocha_fail(TOCHA_E_ARGUMENT, "block: expected a multiple of 32 from 32 to 1024, got %d",
                          block);
    const char *source = tocha_embedded_find(file);
    if (!source) return tocha_fail(TOCHA_E_INTERNAL, "kernel source %s is not embedded", file);
    f->op.vtable = vtable;
    f->dtype = dtype;
    f->block = block;
    int st = tocha_kernel_new(source, names[0], targs, params[0], &f->forward);
    if (!st) st = tocha_kernel_new(source, names[1], targs, params[1], &f->backward);
    return st;
}

void tocha_flat_op_release(tocha_flat_op *f)
{
    tocha_kernel_destroy(f->forward);
    tocha_kernel_destroy(f->backward);
}

void tocha_flat_op_grid_of(const tocha_flat_op *f, const tocha_shape *output, uint32_t grid[3])
{
    grid[0] = tocha_vector_grid(tocha_shape_numel(output), tocha_dtype_size(f->dtype), f->block);
    grid[1] = grid[2] = 1;
}

int tocha_flat_op_grid(const tocha_runtime_op *op, const tocha_shape *output, uint32_t grid[3])
{
    int st = tocha_shape_check(output, "output_shape");
    if (st) return st;
    tocha_flat_op_grid_of((const tocha_flat_op *)op, output, grid);
    return TOCHA_OK;
}

void tocha_flat_op_block(const tocha_runtime_op *op, uint32_t block[3])
{
    block[0] = (uint32_t)((const tocha_flat_op *)op)->block;
    block[1] = block[2] = 1;
}

int tocha_flat_op_has_backward(const tocha_runtime_op *op)
{
    (void)op;
    return 1;
}

int tocha_flat_op_check_tensor(const tocha_flat_op *f, const tocha_tensor *t, const tocha_tensor *first,
                               const char *what, const char *first_name)
{
    int st = tocha_tensor_check(t, what);
    if (st) return st;
    if (t->elem_type != f->dtype)
        return tocha_fail(TOCHA_E_ARGUMENT, "%s: expected dtype %s (the op's), got %s", what,
                          tocha_dtype_name(f->dtype), tocha_dtype_name(t->elem_type));
    if (first && t->dev != first->dev)
        return tocha_fail(TOCHA_E_ARGUMENT, "%s: the tensor is on %s, %s on %s", what, t->dev->name,
                          first_name, first->dev->name);
    return TOCHA_OK;
}
