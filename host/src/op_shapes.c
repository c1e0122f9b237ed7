/*
** op_shapes.c: what the tensor ops built in C (elementwise.c, channel_cat.c) share: shapes
** checked and compared with messages that name the argument, and the packing of pointer and
** count arguments into a RuntimeOp's argument list.
*/
#include "internal.h"

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
