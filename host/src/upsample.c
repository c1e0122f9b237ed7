/*
** upsample.c: teeny-kernels' kernels, UpsampleNearest2dForward and UpsampleNearest2dBackward, in
** either layout (NCHW or NHWC): construction from compile-time constants, the checked forward
** and backward launches, and the forward kernel's RuntimeOp. The kernels themselves are
** kernels/upsample_nearest2d_*.cu; how a launch is cut into threads' work is
** kernels/upsample_plan.h, which sizes the grids here and is compiled ahead of each kernel.
*/
#include "internal.h"
#include "embedded.h"
#include "upsample_plan.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const files[2] = {"upsample_nearest2d_forward.cu", "upsample_nearest2d_backward.cu"};
static const char *const names[2] = {"upsample_nearest2d_forward", "upsample_nearest2d_backward"};
static const char *const block_names[2] = {"block_ow", "block_iw"};
static const tocha_runtime_op_vtable forward_vtable;

/* Each kernel's CUDA C source: the plan, then its .cu file; made once. */
static pthread_once_t sources_once = PTHREAD_ONCE_INIT;
static char *sources[2];

static void make_sources(void)
{
    const char *plan = tocha_embedded_find("upsample_plan.h");
    for (int i = 0; i < 2; i++) {
        const char *file = tocha_embedded_find(files[i]);
        if (!plan || !file) continue;
        tocha_text t = {0};
        tocha_text_appendf(&t, "%s\n%s", plan, file);
        sources[i] = tocha_text_take(&t);
    }
}

static int check_constants(int direction, int scale_h, int scale_w, int block)
{
    if (scale_h < 1 || scale_h > TOCHA_UPSAMPLE_MAX_SCALE)
        return tocha_fail(TOCHA_E_ARGUMENT, "scale_h: expected an integer from 1 to %d, got %d",
                          TOCHA_UPSAMPLE_MAX_SCALE, scale_h);
    if (scale_w < 1 || scale_w > TOCHA_UPSAMPLE_MAX_SCALE)
        return tocha_fail(TOCHA_E_ARGUMENT, "scale_w: expected an integer from 1 to %d, got %d",
                          TOCHA_UPSAMPLE_MAX_SCALE, scale_w);
    if (block < 32 || block > 1024 || block % 32 != 0)
        return tocha_fail(TOCHA_E_ARGUMENT, "%s: expected a multiple of 32 from 32 to 1024, got %d",
                          block_names[direction], block);
    return TOCHA_OK;
}

static int make(int direction, int dtype, int scale_h, int scale_w, int block, int layout,
                tocha_upsample **out)
{
    pthread_once(&sources_once, make_sources);
    tocha_upsample *up = calloc(1, sizeof *up);
    if (!up) return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for a kernel");
    up->op.vtable = direction == TOCHA_UPSAMPLE_FORWARD ? &forward_vtable : NULL;
    up->direction = direction;
    up->dtype = dtype;
    up->scale_h = scale_h;
    up->scale_w = scale_w;
    up->block = block;
    up->layout = layout;
    bool nhwc = layout == TOCHA_LAYOUT_NHWC;
    snprintf(up->name, sizeof up->name, "%s", names[direction]);
    snprintf(up->id, sizeof up->id, "%s__%s__%d__%d__%d%s", names[direction], tocha_dtype_name(dtype),
             scale_h, scale_w, block, nhwc ? "__nhwc" : "");
    char targs[96], params[160];
    snprintf(targs, sizeof targs, "%s, %d, %d, %d%s", tocha_dtype_ctype(dtype), scale_h, scale_w, block,
             nhwc ? ", true" : "");
    const char *d = tocha_dtype_name(dtype);
    if (direction == TOCHA_UPSAMPLE_FORWARD)
        snprintf(params, sizeof params, "%s* x, %s* y, i32 B, i32 C, i32 H, i32 W, i32 OH, i32 OW", d,
                 d);
    else
        snprintf(params, sizeof params, "%s* dy, %s* dx, i32 B, i32 C, i32 H, i32 W, i32 OH, i32 OW", d,
                 d);
    const char *source = sources[direction];
    int st = source ? tocha_kernel_new(source, names[direction], targs, params, &up->kernel)
                    : tocha_fail(TOCHA_E_INTERNAL, "kernel source %s is not embedded", files[direction]);
    if (st) {
        free(up);
        return st;
    }
    *out = up;
    return TOCHA_OK;
}

int tocha_upsample_new(int direction, int dtype, int scale_h, int scale_w, int block, int backward_block,
                       int layout, tocha_upsample **out)
{
    *out = NULL;
    if (direction != TOCHA_UPSAMPLE_FORWARD && direction != TOCHA_UPSAMPLE_BACKWARD)
        return tocha_fail(TOCHA_E_ARGUMENT, "direction: expected forward or backward, got %d",
                          direction);
    if (!tocha_dtype_valid(dtype)) return tocha_fail(TOCHA_E_ARGUMENT, "dtype: invalid dtype %d", dtype);
    if (layout != TOCHA_LAYOUT_NCHW && layout != TOCHA_LAYOUT_NHWC)
        return tocha_fail(TOCHA_E_ARGUMENT, "layout: expected nchw (0) or nhwc (1), got %d", layout);
    int st = check_constants(direction, scale_h, scale_w, block);
    if (st) return st;
    if (direction == TOCHA_UPSAMPLE_FORWARD && backward_block != TOCHA_UPSAMPLE_SAME_BLOCK &&
        (st = check_constants(TOCHA_UPSAMPLE_BACKWARD, scale_h, scale_w, backward_block)))
        return st;
    st = make(direction, dtype, scale_h, scale_w, block, layout, out);
    if (st || direction == TOCHA_UPSAMPLE_BACKWARD) return st;
    st = make(TOCHA_UPSAMPLE_BACKWARD, dtype, scale_h, scale_w,
              backward_block != TOCHA_UPSAMPLE_SAME_BLOCK ? backward_block : block, layout,
              &(*out)->backward);
    if (st) {
        tocha_upsample_destroy(*out);
        *out = NULL;
    }
    return st;
}

void tocha_upsample_destroy(tocha_upsample *up)
{
    if (!up) return;
    tocha_upsample_destroy(up->backward);
    tocha_kernel_destroy(up->kernel);
    free(up);
}

const char *tocha_upsample_name(const tocha_upsample *up) { return up->name; }
const char *tocha_upsample_id(const tocha_upsample *up) { return up->id; }

void tocha_upsample_constants(const tocha_upsample *up, int32_t out[6])
{
    int32_t c[6] = {up->direction, up->dtype, up->scale_h, up->scale_w, up->block, up->layout};
    memcpy(out, c, sizeof c);
}

tocha_kernel *tocha_upsample_kernel(const tocha_upsample *up) { return up->kernel; }
tocha_upsample *tocha_upsample_backward_kernel(const tocha_upsample *up) { return up->backward; }
tocha_runtime_op *tocha_upsample_op(tocha_upsample *up)
{
    return up->direction == TOCHA_UPSAMPLE_FORWARD ? &up->op : NULL;
}

const char *tocha_upsample_kernel_source(const tocha_upsample *up)
{
    pthread_once(&sources_once, make_sources);
    return sources[up->direction];
}

/* ---- shapes and grids ---- */

/* The axes of a 4-D shape that hold H and W, and its dimensions' names, by layout. */
static int h_axis(const tocha_upsample *up) { return up->layout == TOCHA_LAYOUT_NHWC ? 1 : 2; }
static const char *dims_text(const tocha_upsample *up)
{
    return up->layout == TOCHA_LAYOUT_NHWC ? "[B, H, W, C]" : "[B, C, H, W]";
}

/* B, C, H, W of a 4-D shape in the kernel's layout. */
static void bchw(const tocha_upsample *up, const tocha_shape *s, int32_t out[4])
{
    bool nhwc = up->layout == TOCHA_LAYOUT_NHWC;
    out[0] = (int32_t)s->dims[0];
    out[1] = (int32_t)s->dims[nhwc ? 3 : 1];
    out[2] = (int32_t)s->dims[nhwc ? 1 : 2];
    out[3] = (int32_t)s->dims[nhwc ? 2 : 3];
}

/* The rows of a launch whose input (forward: x, backward: dx) is `in`, output width ow. */
static tocha_upsample_rows rows_of(const tocha_upsample *k, const tocha_shape *in, int64_t ow)
{
    int32_t d[4];
    bchw(k, in, d);
    return tocha_upsample_rows_of(k->layout == TOCHA_LAYOUT_NHWC, d[0], d[1], d[2], d[3], (int)ow);
}

/* k's grid for input shape `in` (forward: x; backward: dx) and output width ow: the plan's
** count of work (vectors, or batches of runs) over `block` threads for an output on a
** 16-byte boundary (as tocha's allocations are), at least one CTA, capped at the grid's
** limit. The kernels loop over what a grid does not cover, so an output elsewhere only has
** one thread do one step more. */
static void kernel_grid(const tocha_upsample *k, const tocha_shape *in, int64_t ow, uint32_t grid[3])
{
    tocha_upsample_rows g = rows_of(k, in, ow);
    int size = tocha_dtype_size(k->dtype), nhwc = k->layout == TOCHA_LAYOUT_NHWC;
    int64_t work, batch = 1;
    if (k->direction == TOCHA_UPSAMPLE_FORWARD) {
        work = tocha_upsample_forward_vectors(g, size, k->scale_h, 0);
    } else {
        work = tocha_upsample_backward_runs(g, tocha_upsample_backward_run(size, k->scale_w, nhwc), 0);
        batch = tocha_upsample_backward_batch(size, k->scale_h, k->scale_w, nhwc);
    }
    int64_t blocks = (work + batch * k->block - 1) / (batch * k->block);
    grid[0] = (uint32_t)(blocks < 1 ? 1 : blocks < INT32_MAX ? blocks : INT32_MAX);
    grid[1] = grid[2] = 1;
}

/* Checks an input shape (B, C, H, W in the kernel's layout) and derives the output shape;
** names the argument. A row of the output (OW, or OW * C in NHWC) must fit in 32 bits. */
static int output_shape(const tocha_upsample *up, const tocha_shape *in, const char *what,
                        tocha_shape *out)
{
    if (in->ndim != 4)
        return tocha_fail(TOCHA_E_ARGUMENT, "%s: expected a 4-D tensor %s, got %d-D", what,
                          dims_text(up), in->ndim);
    for (int i = 0; i < 4; i++)
        if (in->dims[i] < 1 || in->dims[i] > INT32_MAX)
            return tocha_fail(TOCHA_E_ARGUMENT, "%s: size %lld of dimension %d is outside 1..2147483647",
                              what, (long long)in->dims[i], i + 1);
    int h = h_axis(up);
    *out = *in;
    out->dims[h] = in->dims[h] * up->scale_h;
    out->dims[h + 1] = in->dims[h + 1] * up->scale_w;
    int64_t row = up->layout == TOCHA_LAYOUT_NHWC ? out->dims[2] * out->dims[3] : out->dims[3];
    if (out->dims[h] > INT32_MAX || out->dims[h + 1] > INT32_MAX || row > INT32_MAX) {
        char text[200];
        tocha_format_dims(out->dims, 4, ", ", text, sizeof text);
        return tocha_fail(TOCHA_E_ARGUMENT, "%s: the output [%s] has %s past 2147483647", what, text,
                          row > INT32_MAX && out->dims[h + 1] <= INT32_MAX ? "a row (OW x C elements)"
                                                                           : "a dimension");
    }
    return TOCHA_OK;
}

static tocha_shape shape_of(const tocha_tensor *t)
{
    tocha_shape s = {.ndim = t->ndim};
    memcpy(s.dims, t->dims, sizeof s.dims);
    return s;
}

static int check_tensor(const tocha_upsample *up, const tocha_tensor *t, const char *what)
{
    int st = tocha_tensor_check(t, what);
    if (st) return st;
    if (t->elem_type != up->dtype)
        return tocha_fail(TOCHA_E_ARGUMENT, "%s: expected dtype %s (the kernel's), got %s", what,
                          tocha_dtype_name(up->dtype), tocha_dtype_name(t->elem_type));
    return TOCHA_OK;
}

static int check_shape_is(const tocha_tensor *t, const tocha_shape *want, const char *what,
                          const char *why)
{
    tocha_shape got = shape_of(t);
    bool same = got.ndim == want->ndim;
    for (int i = 0; same && i < got.ndim; i++) same = got.dims[i] == want->dims[i];
    if (same) return TOCHA_OK;
    char a[200], b[200];
    tocha_format_dims(want->dims, want->ndim, ", ", a, sizeof a);
    tocha_format_dims(got.dims, got.ndim, ", ", b, sizeof b);
    return tocha_fail(TOCHA_E_ARGUMENT, "%s: expected shape [%s] (%s), got [%s]", what, a, why, b);
}

/* ---- launches ---- */

static int pack(const tocha_upsample *up, const tocha_shape *in, const tocha_shape *out, uint64_t src,
                uint64_t dst, tocha_arg_list *visitor);

/* Launches k from src to dst, `in` being the input side's shape (forward: x; backward: dx) and
** `out` the output side's: through the grid, block and packed arguments of the RuntimeOp's
** methods (kernel_grid, pack), so that a direct launch is the RuntimeOp's launch. */
static int launch(tocha_upsample *k, const tocha_tensor *src, tocha_tensor *dst, const tocha_shape *in,
                  const tocha_shape *out)
{
    tocha_arg_list args = {0};
    int st = pack(k, in, out, src->data, dst->data, &args);
    if (st) return st;
    uint32_t grid[3], block[3] = {(uint32_t)k->block, 1, 1};
    kernel_grid(k, in, out->dims[h_axis(k) + 1], grid);
    return tocha_kernel_launch_packed(k->kernel, dst->dev, grid, block, &args);
}

int tocha_upsample_forward(tocha_upsample *up, const tocha_tensor *x, tocha_tensor *y)
{
    if (!up) return tocha_fail(TOCHA_E_ARGUMENT, "kernel: expected a kernel, got NULL");
    if (up->direction != TOCHA_UPSAMPLE_FORWARD)
        return tocha_fail(TOCHA_E_ARGUMENT, "kernel: %s is a backward kernel", up->id);
    int st = check_tensor(up, x, "x");
    if (!st) st = check_tensor(up, y, "y");
    if (st) return st;
    tocha_shape in = shape_of(x), out;
    if ((st = output_shape(up, &in, "x", &out))) return st;
    if ((st = check_shape_is(y, &out, "y", "the forward's output"))) return st;
    if (x->dev != y->dev)
        return tocha_fail(TOCHA_E_ARGUMENT, "y: tensor is on %s, x on %s", y->dev->name, x->dev->name);
    const tocha_tensor *outs[] = {y}, *ins[] = {x};
    static const char *const out_names[] = {"y"}, *const in_names[] = {"x"};
    if ((st = tocha_tensor_check_aliasing(outs, out_names, 1, ins, in_names, 1))) return st;
    return launch(up, x, y, &in, &out);
}

int tocha_upsample_backward(tocha_upsample *up, const tocha_tensor *dy, tocha_tensor *dx)
{
    if (!up) return tocha_fail(TOCHA_E_ARGUMENT, "kernel: expected a kernel, got NULL");
    tocha_upsample *k = up->direction == TOCHA_UPSAMPLE_FORWARD ? up->backward : up;
    int st = check_tensor(k, dy, "dy");
    if (!st) st = check_tensor(k, dx, "dx");
    if (st) return st;
    tocha_shape in = shape_of(dx), out;
    if ((st = output_shape(k, &in, "dx", &out))) return st;
    if ((st = check_shape_is(dy, &out, "dy", "the forward's output for dx"))) return st;
    if (dy->dev != dx->dev)
        return tocha_fail(TOCHA_E_ARGUMENT, "dx: tensor is on %s, dy on %s", dx->dev->name,
                          dy->dev->name);
    const tocha_tensor *outs[] = {dx}, *ins[] = {dy};
    static const char *const out_names[] = {"dx"}, *const in_names[] = {"dy"};
    if ((st = tocha_tensor_check_aliasing(outs, out_names, 1, ins, in_names, 1))) return st;
    return launch(k, dy, dx, &in, &out);
}

/* ---- the forward kernel's RuntimeOp ---- */

static const tocha_upsample *self(const tocha_runtime_op *op) { return (const tocha_upsample *)op; }

static int op_n_activation_inputs(const tocha_runtime_op *op)
{
    (void)op;
    return 1;
}

static int one_input(const tocha_shape *inputs, int n_inputs)
{
    if (n_inputs != 1 || !inputs)
        return tocha_fail(TOCHA_E_ARGUMENT, "inputs: expected 1 input shape, got %d", n_inputs);
    return TOCHA_OK;
}

static int op_output_shape(const tocha_runtime_op *op, const tocha_shape *inputs, int n_inputs,
                           tocha_shape *out)
{
    int st = one_input(inputs, n_inputs);
    return st ? st : output_shape(self(op), &inputs[0], "inputs[1]", out);
}

static int check_output(const tocha_shape *output)
{
    if (output->ndim != 4)
        return tocha_fail(TOCHA_E_ARGUMENT, "output_shape: expected 4-D, got %d-D", output->ndim);
    for (int i = 0; i < 4; i++)
        if (output->dims[i] < 1 || output->dims[i] > INT32_MAX)
            return tocha_fail(TOCHA_E_ARGUMENT,
                              "output_shape: size %lld of dimension %d is outside 1..2147483647",
                              (long long)output->dims[i], i + 1);
    return TOCHA_OK;
}

/* The input shape whose forward output is `output`, checked: 4-D, H and W multiples of the
** scales. */
static int input_of_output(const tocha_upsample *up, const tocha_shape *output, tocha_shape *in)
{
    int st = check_output(output);
    if (st) return st;
    int h = h_axis(up);
    if (output->dims[h] % up->scale_h != 0 || output->dims[h + 1] % up->scale_w != 0)
        return tocha_fail(
            TOCHA_E_ARGUMENT,
            "output_shape: height %lld and width %lld must be multiples of the scales %d and %d",
            (long long)output->dims[h], (long long)output->dims[h + 1], up->scale_h, up->scale_w);
    *in = *output;
    in->dims[h] /= up->scale_h;
    in->dims[h + 1] /= up->scale_w;
    return TOCHA_OK;
}

static int op_grid(const tocha_runtime_op *op, const tocha_shape *output, uint32_t grid[3])
{
    const tocha_upsample *up = self(op);
    tocha_shape in;
    int st = input_of_output(up, output, &in);
    if (st) return st;
    kernel_grid(up, &in, output->dims[h_axis(up) + 1], grid);
    return TOCHA_OK;
}

static void op_block(const tocha_runtime_op *op, uint32_t block[3])
{
    block[0] = (uint32_t)self(op)->block;
    block[1] = block[2] = 1;
}

/* Appends the kernel's Args: two pointers, then B, C, H, W, OH, OW. `in` (x, or dx) must be
** the input of the output shape `out`. */
static int pack(const tocha_upsample *up, const tocha_shape *in, const tocha_shape *out, uint64_t src,
                uint64_t dst, tocha_arg_list *visitor)
{
    if (!visitor) return tocha_fail(TOCHA_E_ARGUMENT, "visitor: expected an argument list, got NULL");
    tocha_shape want;
    int st = input_of_output(up, out, &want);
    if (st) return st;
    if ((st = output_shape(up, in, "inputs[1]", &want))) return st;
    bool same = true;
    for (int i = 0; i < 4; i++) same = same && want.dims[i] == out->dims[i];
    if (!same) {
        char a[200], b[200];
        tocha_format_dims(in->dims, 4, ", ", a, sizeof a);
        tocha_format_dims(out->dims, 4, ", ", b, sizeof b);
        return tocha_fail(TOCHA_E_ARGUMENT, "output_shape: [%s] is not the output of inputs[1] [%s]", b,
                          a);
    }
    if (visitor->count < 0 || visitor->count > TOCHA_MAX_PARAMS - 8)
        return tocha_fail(TOCHA_E_ARGUMENT, "visitor: no room for 8 more arguments");
    int32_t d[4];
    bchw(up, in, d);
    int h = h_axis(up);
    tocha_arg *a = &visitor->args[visitor->count];
    uint64_t ptrs[2] = {src, dst};
    int64_t ints[6] = {d[0], d[1], d[2], d[3], out->dims[h], out->dims[h + 1]};
    for (int i = 0; i < 2; i++) a[i] = (tocha_arg){.kind = TOCHA_ARG_POINTER, .i = (int64_t)ptrs[i]};
    for (int i = 0; i < 6; i++) a[2 + i] = (tocha_arg){.kind = TOCHA_ARG_INT, .i = ints[i]};
    visitor->count += 8;
    return TOCHA_OK;
}

static int op_pack_args(const tocha_runtime_op *op, const tocha_buffer *inputs, int n_inputs,
                        const uint64_t *params, int n_params, uint64_t output,
                        const tocha_shape *output_shape, int32_t output_row_stride,
                        tocha_arg_list *visitor)
{
    (void)params, (void)n_params, (void)output_row_stride;
    if (n_inputs != 1 || !inputs)
        return tocha_fail(TOCHA_E_ARGUMENT, "inputs: expected 1 input, got %d", n_inputs);
    return pack(self(op), &inputs[0].shape, output_shape, inputs[0].data, output, visitor);
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
    int st = one_input(inputs, n_inputs);
    if (st) return st;
    const tocha_upsample *k = self(op)->backward;
    tocha_shape out;
    if ((st = output_shape(k, &inputs[0], "inputs[1]", &out))) return st;
    kernel_grid(k, &inputs[0], out.dims[h_axis(k) + 1], grid);
    return TOCHA_OK;
}

static void op_backward_block(const tocha_runtime_op *op, uint32_t block[3])
{
    block[0] = (uint32_t)self(op)->backward->block;
    block[1] = block[2] = 1;
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
    if (n_inputs != 1 || !inputs)
        return tocha_fail(TOCHA_E_ARGUMENT, "inputs: expected 1 input, got %d", n_inputs);
    if (n_grad_inputs != 1 || !grad_inputs)
        return tocha_fail(TOCHA_E_ARGUMENT, "grad_inputs: expected 1, got %d", n_grad_inputs);
    return pack(self(op), &inputs[0].shape, output_shape, grad_output, grad_inputs[0], visitor);
}

/* Parameters, row strides and launch counts keep teeny-kernels' defaults (NULL slots). */
static const tocha_runtime_op_vtable forward_vtable = {
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
