-- tocha.ffi: the LuaJIT FFI declarations of host/include/tocha.h, the library handle, and the
-- one place where a C status becomes a Lua error.
--
-- The library is found, in order: $TOCHA_LIBRARY; the running executable (tocha links
-- libtocha, so its symbols are in ffi.C); the path CMake recorded in tocha.location.
local ffi = require "ffi"
local errors = require "tocha.errors"

local M = {}

if not pcall(ffi.typeof, "struct tocha_tensor") then
  ffi.cdef [[
typedef struct tocha_device tocha_device;
typedef struct tocha_kernel tocha_kernel;
typedef struct tocha_event tocha_event;
typedef struct tocha_storage tocha_storage;
typedef struct tocha_tensor {
  tocha_device *dev; int32_t elem_type; int32_t ndim; int64_t dims[8]; int64_t count;
  uint64_t bytes; uint64_t data; int32_t freed; int32_t dense; int64_t strides[8];
  tocha_storage *storage;
} tocha_tensor;
typedef struct tocha_device_info {
  char name[32]; char product[128]; int32_t kind; int32_t ordinal; int32_t cc_major, cc_minor;
  int32_t multiprocessors; uint64_t memory_free, memory_total; char target[32];
} tocha_device_info;
typedef struct tocha_compare_result {
  double max_abs; double max_rel; int64_t mismatched; int64_t first_mismatch;
} tocha_compare_result;
typedef struct tocha_cache_stats {
  int64_t compiles, memory_hits, disk_hits, disk_writes, disk_rejects;
} tocha_cache_stats;
typedef struct tocha_arg { int32_t kind; tocha_tensor *tensor; int64_t i; double f; } tocha_arg;
typedef struct tocha_memory_stats {
  uint64_t allocated_bytes, peak_allocated_bytes, reserved_bytes, cached_bytes;
  int64_t allocations, frees, cache_hits;
} tocha_memory_stats;

const char *tocha_last_error(void);
const char *tocha_status_name(int status);
const char *tocha_version(void);
int tocha_driver_version(int *out);
int tocha_nvrtc_version(int *major, int *minor);
int tocha_dtype_from_name(const char *name, int *out);
const char *tocha_dtype_name(int dtype);
int tocha_dtype_size(int dtype);
int tocha_device_list(tocha_device **out, int cap, int *count);
int tocha_device_get(const char *name, tocha_device **out);
int tocha_device_default(tocha_device **out);
const char *tocha_device_default_reason(void);
const char *tocha_cuda_unavailable_reason(void);
int tocha_device_info_get(tocha_device *device, tocha_device_info *out);
int tocha_device_synchronize(tocha_device *device);
int tocha_tensor_new(tocha_device *device, int dtype, int ndim, const int64_t *shape, tocha_tensor **out);
void tocha_tensor_free(tocha_tensor *t);
void tocha_tensor_destroy(tocha_tensor *t);
int tocha_tensor_write(tocha_tensor *t, const void *src, uint64_t nbytes);
int tocha_tensor_read(const tocha_tensor *t, int64_t offset, int64_t count, void *dst);
int tocha_tensor_copy(tocha_tensor *dst, const tocha_tensor *src);
int tocha_tensor_view(tocha_tensor *t, int ndim, const int64_t *dims, const int64_t *strides, int64_t offset, tocha_tensor **out);
int tocha_tensor_fill(tocha_tensor *t, double value);
int tocha_tensor_uniform(tocha_tensor *t, uint64_t seed, double low, double high);
int tocha_tensor_normal(tocha_tensor *t, uint64_t seed, double mean, double std);
int tocha_tensor_cast(tocha_tensor *dst, const tocha_tensor *src);
int tocha_tensor_accumulate(tocha_tensor *acc, const tocha_tensor *g, int first);
int tocha_file_kind(const char *path, int *kind);
int tocha_file_temp(const char *target, char *name, size_t size);
int tocha_file_commit(const char *temp, const char *target);
int tocha_tensor_check_aliasing(const tocha_tensor *const *outputs, const char *const *out_names, int n_out,
  const tocha_tensor *const *inputs, const char *const *in_names, int n_in);
int tocha_tensor_compare(const tocha_tensor *a, const tocha_tensor *b, double rtol, double atol, tocha_compare_result *out);
const char *tocha_kernel_library_source(const char *file);
int tocha_kernel_new(const char *source, const char *name, const char *template_args, const char *params, tocha_kernel **out);
void tocha_kernel_destroy(tocha_kernel *k);
const char *tocha_kernel_entry_point_source(const tocha_kernel *k);
const char *tocha_kernel_entry_point_name(const tocha_kernel *k);
const char *tocha_kernel_source(const tocha_kernel *k);
const char *tocha_kernel_hash(const tocha_kernel *k);
const char *tocha_kernel_params(const tocha_kernel *k);
int tocha_kernel_param_count(const tocha_kernel *k);
int tocha_kernel_build(tocha_kernel *k, const char *target, uint64_t *binary_size);
int tocha_kernel_launch(tocha_kernel *k, tocha_device *device, const uint32_t grid[3], const uint32_t block[3], const tocha_arg *args, int nargs);
int tocha_builtin_kernel_get(const char *op, int dtype, int dtype2, tocha_kernel **out);
typedef struct tocha_stream tocha_stream;
int tocha_stream_new(tocha_device *device, tocha_stream **out);
void tocha_stream_destroy(tocha_stream *s);
tocha_device *tocha_stream_device(const tocha_stream *s);
int tocha_stream_synchronize(tocha_stream *s);
int tocha_stream_wait_event(tocha_stream *s, tocha_event *e);
int tocha_device_set_stream(tocha_device *device, tocha_stream *s);
tocha_stream *tocha_device_get_stream(tocha_device *device);
typedef struct tocha_graph tocha_graph;
int tocha_graph_capture_begin(tocha_stream *s);
int tocha_graph_capture_end(tocha_stream *s, tocha_graph **out);
int tocha_graph_replay(tocha_graph *g);
void tocha_graph_destroy(tocha_graph *g);
int tocha_memory_stats_get(tocha_device *device, tocha_memory_stats *out);
int tocha_memory_empty_cache(tocha_device *device);
int tocha_memory_reset_peak(tocha_device *device);
int tocha_cache_stats_get(tocha_cache_stats *out);
const char *tocha_cache_dir(void);
const char *tocha_cache_warning(void);
int tocha_cache_usage(int64_t *entries, int64_t *bytes);
int tocha_cache_clear(int64_t *removed);
int tocha_event_new(tocha_device *device, tocha_event **out);
void tocha_event_destroy(tocha_event *e);
int tocha_event_record(tocha_event *e);
int tocha_event_elapsed_ms(tocha_event *start, tocha_event *end, double *ms);

typedef struct tocha_shape { int32_t ndim; int64_t dims[8]; } tocha_shape;
typedef struct tocha_buffer { uint64_t data; tocha_shape shape; } tocha_buffer;
typedef struct tocha_arg_list { int32_t count; tocha_arg args[32]; } tocha_arg_list;
typedef struct tocha_runtime_op tocha_runtime_op;
typedef struct tocha_upsample tocha_upsample;
int tocha_op_n_activation_inputs(const tocha_runtime_op *op);
int tocha_op_compute_concrete_output_shape(const tocha_runtime_op *op, const tocha_shape *inputs, int n_inputs, tocha_shape *out);
int tocha_op_grid(const tocha_runtime_op *op, const tocha_shape *output, uint32_t grid[3]);
void tocha_op_block(const tocha_runtime_op *op, uint32_t block[3]);
int tocha_op_pack_args(const tocha_runtime_op *op, const tocha_buffer *inputs, int n_inputs, const uint64_t *params, int n_params, uint64_t output, const tocha_shape *output_shape, int32_t output_row_stride, tocha_arg_list *visitor);
int tocha_op_param_shapes(const tocha_runtime_op *op, const tocha_shape *inputs, int n_inputs, const tocha_shape *output, tocha_shape *out, int cap, int *count);
int tocha_op_param_names(const tocha_runtime_op *op, const char *const **names, int *count);
int tocha_op_param_init_data(const tocha_runtime_op *op, int index, const void **data, uint64_t *size);
int64_t tocha_op_forward_output_row_stride(const tocha_runtime_op *op, const tocha_shape *output);
int tocha_op_has_backward(const tocha_runtime_op *op);
int tocha_op_backward_grid(const tocha_runtime_op *op, const tocha_shape *inputs, int n_inputs, const tocha_shape *output, uint32_t grid[3]);
int tocha_op_backward_block(const tocha_runtime_op *op, uint32_t block[3]);
int tocha_op_pack_backward_args(const tocha_runtime_op *op, const tocha_buffer *inputs, int n_inputs, const uint64_t *params, int n_params, uint64_t output, const tocha_shape *output_shape, uint64_t grad_output, int32_t grad_output_row_stride, const uint64_t *grad_inputs, int n_grad_inputs, const uint64_t *grad_params, int n_grad_params, tocha_arg_list *visitor);
int64_t tocha_op_backward_grad_output_row_stride(const tocha_runtime_op *op, const tocha_shape *output);
int tocha_op_n_launches(const tocha_runtime_op *op);
int tocha_op_grid_for_launch(const tocha_runtime_op *op, int launch, const tocha_shape *inputs, int n_inputs, const tocha_shape *output, uint32_t grid[3]);
int tocha_op_pack_args_for_launch(const tocha_runtime_op *op, int launch, const tocha_buffer *inputs, int n_inputs, const uint64_t *params, int n_params, uint64_t output, const tocha_shape *output_shape, int32_t output_row_stride, tocha_arg_list *visitor);
int tocha_op_n_backward_launches(const tocha_runtime_op *op);
int tocha_op_backward_grid_for_launch(const tocha_runtime_op *op, int launch, const tocha_shape *inputs, int n_inputs, const tocha_shape *output, uint32_t grid[3]);
int tocha_op_pack_backward_args_for_launch(const tocha_runtime_op *op, int launch, const tocha_buffer *inputs, int n_inputs, const uint64_t *params, int n_params, uint64_t output, const tocha_shape *output_shape, uint64_t grad_output, int32_t grad_output_row_stride, const uint64_t *grad_inputs, int n_grad_inputs, const uint64_t *grad_params, int n_grad_params, tocha_arg_list *visitor);
int tocha_kernel_launch_packed(tocha_kernel *k, tocha_device *device, const uint32_t grid[3], const uint32_t block[3], const tocha_arg_list *args);
typedef struct tocha_plan tocha_plan;
int tocha_plan_new(tocha_device *device, int n_slots, tocha_plan **out);
void tocha_plan_destroy(tocha_plan *plan);
uint64_t tocha_plan_slot_address(int slot);
int tocha_plan_add(tocha_plan *plan, tocha_kernel *k, const uint32_t grid[3], const uint32_t block[3],
                   const tocha_arg_list *args);
int tocha_plan_guard(tocha_plan *plan, const tocha_tensor *t, const char *name);
int tocha_plan_run(tocha_plan *plan, const uint64_t *slots, int n_slots);
int tocha_plan_launch_count(const tocha_plan *plan);
int tocha_upsample_new(int direction, int dtype, int scale_h, int scale_w, int block, int backward_block, int layout, tocha_upsample **out);
void tocha_upsample_destroy(tocha_upsample *up);
const char *tocha_upsample_name(const tocha_upsample *up);
const char *tocha_upsample_id(const tocha_upsample *up);
void tocha_upsample_constants(const tocha_upsample *up, int32_t out[6]);
tocha_kernel *tocha_upsample_kernel(const tocha_upsample *up);
tocha_upsample *tocha_upsample_backward_kernel(const tocha_upsample *up);
tocha_runtime_op *tocha_upsample_op(tocha_upsample *up);
const char *tocha_upsample_kernel_source(const tocha_upsample *up);
int tocha_upsample_forward(tocha_upsample *up, const tocha_tensor *x, tocha_tensor *y);
int tocha_upsample_backward(tocha_upsample *up, const tocha_tensor *dy, tocha_tensor *dx);
typedef struct tocha_elementwise tocha_elementwise;
int tocha_elementwise_new(const char *fn, int dtype, int block, tocha_elementwise **out);
void tocha_elementwise_destroy(tocha_elementwise *op);
int tocha_elementwise_arity(const tocha_elementwise *op);
const char *tocha_elementwise_id(const tocha_elementwise *op);
tocha_runtime_op *tocha_elementwise_op(tocha_elementwise *op);
tocha_kernel *tocha_elementwise_kernel(const tocha_elementwise *op);
tocha_kernel *tocha_elementwise_backward_kernel(const tocha_elementwise *op);
int tocha_elementwise_forward(tocha_elementwise *op, const tocha_tensor *a, const tocha_tensor *b, tocha_tensor *y);
int tocha_elementwise_backward(tocha_elementwise *op, const tocha_tensor *a, const tocha_tensor *b, const tocha_tensor *dy, tocha_tensor *da, tocha_tensor *db);
typedef struct tocha_channel_cat tocha_channel_cat;
int tocha_channel_cat_new(int dtype, int block, tocha_channel_cat **out);
void tocha_channel_cat_destroy(tocha_channel_cat *op);
const char *tocha_channel_cat_id(const tocha_channel_cat *op);
tocha_runtime_op *tocha_channel_cat_op(tocha_channel_cat *op);
tocha_kernel *tocha_channel_cat_kernel(const tocha_channel_cat *op);
tocha_kernel *tocha_channel_cat_backward_kernel(const tocha_channel_cat *op);
int tocha_channel_cat_forward(tocha_channel_cat *op, const tocha_tensor *a, const tocha_tensor *b, tocha_tensor *y);
int tocha_channel_cat_backward(tocha_channel_cat *op, const tocha_tensor *dy, tocha_tensor *da, tocha_tensor *db);
typedef struct tocha_channel_chunk tocha_channel_chunk;
int tocha_channel_chunk_new(int chunks, int index, int dtype, int block, tocha_channel_chunk **out);
void tocha_channel_chunk_destroy(tocha_channel_chunk *op);
const char *tocha_channel_chunk_id(const tocha_channel_chunk *op);
tocha_runtime_op *tocha_channel_chunk_op(tocha_channel_chunk *op);
tocha_kernel *tocha_channel_chunk_kernel(const tocha_channel_chunk *op);
tocha_kernel *tocha_channel_chunk_backward_kernel(const tocha_channel_chunk *op);
int tocha_channel_chunk_forward(tocha_channel_chunk *op, const tocha_tensor *x, tocha_tensor *y);
int tocha_channel_chunk_backward(tocha_channel_chunk *op, const tocha_tensor *dy, tocha_tensor *dx);
]]
end

local function load_library()
  local explicit = os.getenv("TOCHA_LIBRARY")
  if explicit and explicit ~= "" then return ffi.load(explicit) end
  if pcall(function() return ffi.C.tocha_version end) then return ffi.C end
  local ok, location = pcall(require, "tocha.location")
  if not ok then
    error("tocha: cannot find libtocha: set TOCHA_LIBRARY, or run from a built or installed tree", 0)
  end
  return ffi.load(location.library)
end

M.C = load_library()

-- tocha_upsample_new's backward_block for "the forward's block" (TOCHA_UPSAMPLE_SAME_BLOCK).
M.upsample_same_block = -1

M.status = {
  ok = 0, argument = -1, out_of_memory = -2, unavailable = -3, compile = -4,
  driver = -5, io = -6, freed = -7, internal = -8,
}

-- The C library's last message for a failed call.
function M.message()
  return ffi.string(M.C.tocha_last_error())
end

-- Raises the C library's message for a failed call (status not 0) as misuse of the public
-- function the user called (tocha.errors.raise).
function M.check(status)
  if status ~= 0 then errors.raise(M.message()) end
end

return M
