/*
** runtime_op.c: the RuntimeOp dispatchers. Each calls the op's method or, when the vtable
** slot is NULL, gives teeny-kernels' default: no parameters, the natural row stride, no backward,
** a single launch, and *_for_launch methods that fall back to the plain ones.
*/
#include "internal.h"

static int no_op(const tocha_runtime_op *op)
{
    if (!op || !op->vtable) return tocha_fail(TOCHA_E_ARGUMENT, "op: expected a RuntimeOp, got NULL");
    return TOCHA_OK;
}

static int64_t last_dim(const tocha_shape *s) { return s && s->ndim > 0 ? s->dims[s->ndim - 1] : 0; }

int tocha_op_n_activation_inputs(const tocha_runtime_op *op)
{
    return no_op(op) ? 0 : op->vtable->n_activation_inputs(op);
}

int tocha_op_compute_concrete_output_shape(const tocha_runtime_op *op, const tocha_shape *inputs,
                                           int n_inputs, tocha_shape *out)
{
    int st = no_op(op);
    return st ? st : op->vtable->compute_concrete_output_shape(op, inputs, n_inputs, out);
}

int tocha_op_grid(const tocha_runtime_op *op, const tocha_shape *output, uint32_t grid[3])
{
    int st = no_op(op);
    return st ? st : op->vtable->grid(op, output, grid);
}

void tocha_op_block(const tocha_runtime_op *op, uint32_t block[3])
{
    if (!no_op(op)) op->vtable->block(op, block);
}

int tocha_op_pack_args(const tocha_runtime_op *op, const tocha_buffer *inputs, int n_inputs,
                       const uint64_t *params, int n_params, uint64_t output,
                       const tocha_shape *output_shape, int32_t output_row_stride,
                       tocha_arg_list *visitor)
{
    int st = no_op(op);
    return st ? st
              : op->vtable->pack_args(op, inputs, n_inputs, params, n_params, output, output_shape,
                                      output_row_stride, visitor);
}

int tocha_op_param_shapes(const tocha_runtime_op *op, const tocha_shape *inputs, int n_inputs,
                          const tocha_shape *output, tocha_shape *out, int cap, int *count)
{
    int st = no_op(op);
    if (st) return st;
    if (op->vtable->param_shapes)
        return op->vtable->param_shapes(op, inputs, n_inputs, output, out, cap, count);
    *count = 0;
    return TOCHA_OK;
}

int tocha_op_param_names(const tocha_runtime_op *op, const char *const **names, int *count)
{
    int st = no_op(op);
    if (st) return st;
    if (op->vtable->param_names) return op->vtable->param_names(op, names, count);
    *names = NULL;
    *count = 0;
    return TOCHA_OK;
}

int tocha_op_param_init_data(const tocha_runtime_op *op, int index, const void **data, uint64_t *size)
{
    int st = no_op(op);
    if (st) return st;
    if (op->vtable->param_init_data) return op->vtable->param_init_data(op, index, data, size);
    *data = NULL;
    *size = 0;
    return TOCHA_OK;
}

int64_t tocha_op_forward_output_row_stride(const tocha_runtime_op *op, const tocha_shape *output)
{
    if (no_op(op)) return 0;
    if (op->vtable->forward_output_row_stride) return op->vtable->forward_output_row_stride(op, output);
    return last_dim(output);
}

int tocha_op_has_backward(const tocha_runtime_op *op)
{
    if (no_op(op)) return 0;
    return op->vtable->has_backward ? op->vtable->has_backward(op) : 0;
}

static int no_backward(const char *method)
{
    return tocha_fail(TOCHA_E_ARGUMENT, "op: has no backward (%s)", method);
}

int tocha_op_backward_grid(const tocha_runtime_op *op, const tocha_shape *inputs, int n_inputs,
                           const tocha_shape *output, uint32_t grid[3])
{
    int st = no_op(op);
    if (st) return st;
    if (!tocha_op_has_backward(op) || !op->vtable->backward_grid) return no_backward("backward_grid");
    return op->vtable->backward_grid(op, inputs, n_inputs, output, grid);
}

int tocha_op_backward_block(const tocha_runtime_op *op, uint32_t block[3])
{
    int st = no_op(op);
    if (st) return st;
    if (!tocha_op_has_backward(op) || !op->vtable->backward_block) return no_backward("backward_block");
    op->vtable->backward_block(op, block);
    return TOCHA_OK;
}

int tocha_op_pack_backward_args(const tocha_runtime_op *op, const tocha_buffer *inputs, int n_inputs,
                                const uint64_t *params, int n_params, uint64_t output,
                                const tocha_shape *output_shape, uint64_t grad_output,
                                int32_t grad_output_row_stride, const uint64_t *grad_inputs,
                                int n_grad_inputs, const uint64_t *grad_params, int n_grad_params,
                                tocha_arg_list *visitor)
{
    int st = no_op(op);
    if (st) return st;
    if (!tocha_op_has_backward(op) || !op->vtable->pack_backward_args)
        return no_backward("pack_backward_args");
    return op->vtable->pack_backward_args(op, inputs, n_inputs, params, n_params, output, output_shape,
                                          grad_output, grad_output_row_stride, grad_inputs,
                                          n_grad_inputs, grad_params, n_grad_params, visitor);
}

int64_t tocha_op_backward_grad_output_row_stride(const tocha_runtime_op *op, const tocha_shape *output)
{
    if (no_op(op)) return 0;
    if (op->vtable->backward_grad_output_row_stride)
        return op->vtable->backward_grad_output_row_stride(op, output);
    return last_dim(output);
}

int tocha_op_n_launches(const tocha_runtime_op *op)
{
    if (no_op(op)) return 0;
    return op->vtable->n_launches ? op->vtable->n_launches(op) : 1;
}

static int check_launch(int launch, int n, const char *what)
{
    if (launch < 0 || launch >= n)
        return tocha_fail(TOCHA_E_ARGUMENT, "launch: %s has launches 0..%d, got %d", what, n - 1,
                          launch);
    return TOCHA_OK;
}

int tocha_op_grid_for_launch(const tocha_runtime_op *op, int launch, const tocha_shape *inputs,
                             int n_inputs, const tocha_shape *output, uint32_t grid[3])
{
    int st = no_op(op);
    if (!st) st = check_launch(launch, tocha_op_n_launches(op), "forward");
    if (st) return st;
    if (op->vtable->grid_for_launch)
        return op->vtable->grid_for_launch(op, launch, inputs, n_inputs, output, grid);
    return op->vtable->grid(op, output, grid);
}

int tocha_op_pack_args_for_launch(const tocha_runtime_op *op, int launch, const tocha_buffer *inputs,
                                  int n_inputs, const uint64_t *params, int n_params, uint64_t output,
                                  const tocha_shape *output_shape, int32_t output_row_stride,
                                  tocha_arg_list *visitor)
{
    int st = no_op(op);
    if (!st) st = check_launch(launch, tocha_op_n_launches(op), "forward");
    if (st) return st;
    if (op->vtable->pack_args_for_launch)
        return op->vtable->pack_args_for_launch(op, launch, inputs, n_inputs, params, n_params, output,
                                                output_shape, output_row_stride, visitor);
    return op->vtable->pack_args(op, inputs, n_inputs, params, n_params, output, output_shape,
                                 output_row_stride, visitor);
}

int tocha_op_n_backward_launches(const tocha_runtime_op *op)
{
    if (no_op(op) || !tocha_op_has_backward(op)) return 0;
    return op->vtable->n_backward_launches ? op->vtable->n_backward_launches(op) : 1;
}

int tocha_op_backward_grid_for_launch(const tocha_runtime_op *op, int launch, const tocha_shape *inputs,
                                      int n_inputs, const tocha_shape *output, uint32_t grid[3])
{
    int st = no_op(op);
    if (!st && !tocha_op_has_backward(op)) return no_backward("backward_grid_for_launch");
    if (!st) st = check_launch(launch, tocha_op_n_backward_launches(op), "backward");
    if (st) return st;
    if (op->vtable->backward_grid_for_launch)
        return op->vtable->backward_grid_for_launch(op, launch, inputs, n_inputs, output, grid);
    return tocha_op_backward_grid(op, inputs, n_inputs, output, grid);
}

int tocha_op_pack_backward_args_for_launch(const tocha_runtime_op *op, int launch,
                                           const tocha_buffer *inputs, int n_inputs,
                                           const uint64_t *params, int n_params, uint64_t output,
                                           const tocha_shape *output_shape, uint64_t grad_output,
                                           int32_t grad_output_row_stride, const uint64_t *grad_inputs,
                                           int n_grad_inputs, const uint64_t *grad_params,
                                           int n_grad_params, tocha_arg_list *visitor)
{
    int st = no_op(op);
    if (!st && !tocha_op_has_backward(op)) return no_backward("pack_backward_args_for_launch");
    if (!st) st = check_launch(launch, tocha_op_n_backward_launches(op), "backward");
    if (st) return st;
    if (op->vtable->pack_backward_args_for_launch)
        return op->vtable->pack_backward_args_for_launch(
            op, launch, inputs, n_inputs, params, n_params, output, output_shape, grad_output,
            grad_output_row_stride, grad_inputs, n_grad_inputs, grad_params, n_grad_params, visitor);
    return tocha_op_pack_backward_args(op, inputs, n_inputs, params, n_params, output, output_shape,
                                       grad_output, grad_output_row_stride, grad_inputs, n_grad_inputs,
                                       grad_params, n_grad_params, visitor);
}
