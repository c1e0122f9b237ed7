-- tocha.ffi: the LuaJIT FFI declarations of host/include/tocha.h, the library handle, and the
-- one place where a C status becomes a Lua error.
--
-- The library is found, in order: $TOCHA_LIBRARY; the running executable (tocha links
-- libtocha, so its symbols are in ffi.C); the path CMake recorded in tocha.location.
local ffi = require "ffi"

local M = {}

if not pcall(ffi.typeof, "struct tocha_tensor") then
  ffi.cdef [[
typedef struct tocha_device tocha_device;
typedef struct tocha_kernel tocha_kernel;
typedef struct tocha_event tocha_event;
typedef struct tocha_tensor {
  tocha_device *dev; int32_t elem_type; int32_t ndim; int64_t dims[8]; int64_t count;
  uint64_t bytes; uint64_t data; int32_t freed;
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
int tocha_tensor_fill(tocha_tensor *t, double value);
int tocha_tensor_uniform(tocha_tensor *t, uint64_t seed, double low, double high);
int tocha_tensor_normal(tocha_tensor *t, uint64_t seed, double mean, double std);
int tocha_tensor_cast(tocha_tensor *dst, const tocha_tensor *src);
int tocha_tensor_compare(const tocha_tensor *a, const tocha_tensor *b, double rtol, double atol, tocha_compare_result *out);
int tocha_kernel_new(const char *source, const char *name, const char *template_args, const char *params, tocha_kernel **out);
void tocha_kernel_destroy(tocha_kernel *k);
const char *tocha_kernel_entry_point_source(const tocha_kernel *k);
const char *tocha_kernel_entry_point_name(const tocha_kernel *k);
const char *tocha_kernel_source(const tocha_kernel *k);
const char *tocha_kernel_hash(const tocha_kernel *k);
int tocha_kernel_build(tocha_kernel *k, const char *target, uint64_t *binary_size);
int tocha_kernel_launch(tocha_kernel *k, tocha_device *device, const uint32_t grid[3], const uint32_t block[3], const tocha_arg *args, int nargs);
int tocha_builtin_kernel_get(const char *op, int dtype, int dtype2, tocha_kernel **out);
int tocha_cache_stats_get(tocha_cache_stats *out);
const char *tocha_cache_dir(void);
int tocha_cache_usage(int64_t *entries, int64_t *bytes);
int tocha_cache_clear(int64_t *removed);
int tocha_event_new(tocha_device *device, tocha_event **out);
void tocha_event_destroy(tocha_event *e);
int tocha_event_record(tocha_event *e);
int tocha_event_elapsed_ms(tocha_event *start, tocha_event *end, double *ms);
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

M.status = {
  ok = 0, argument = -1, out_of_memory = -2, unavailable = -3, compile = -4,
  driver = -5, io = -6, freed = -7, internal = -8,
}

-- The C library's last message for a failed call.
function M.message()
  return ffi.string(M.C.tocha_last_error())
end

-- Raises "tocha.<fname>: <message>" at the given level above the caller when status is not 0.
function M.check(status, fname, level)
  if status ~= 0 then
    error("tocha." .. fname .. ": " .. M.message(), (level or 1) + 2)
  end
end

return M
