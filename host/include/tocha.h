/*
** tocha.h: the public C ABI of libtocha, the one surface the Lua bindings use.
**
** Conventions: every function that can fail returns a tocha_status (0 is TOCHA_OK, failures
** are negative); the message of the last failure on the calling thread is read with
** tocha_last_error(). The library never prints, never exits and never aborts. Functions that
** free accept NULL. Objects handed out (tensors, kernels, events) are owned by the caller and
** released with their *_destroy function; devices are owned by the library.
*/
#ifndef TOCHA_H
#define TOCHA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(TOCHA_BUILDING)
#define TOCHA_API __attribute__((visibility("default")))
#else
#define TOCHA_API
#endif

#define TOCHA_MAX_DIMS 8
#define TOCHA_MAX_PARAMS 64

typedef enum tocha_status {
    TOCHA_OK = 0,
    TOCHA_E_ARGUMENT = -1,      /* a caller's argument is invalid; the message names it */
    TOCHA_E_OUT_OF_MEMORY = -2, /* host or device allocation failed */
    TOCHA_E_UNAVAILABLE = -3,   /* a device, driver or compiler cannot be used here */
    TOCHA_E_COMPILE = -4,       /* a kernel failed to compile; the message holds the log */
    TOCHA_E_DRIVER = -5,        /* the CUDA driver reported an error */
    TOCHA_E_IO = -6,            /* a file operation failed */
    TOCHA_E_FREED = -7,         /* a tensor was used after :free() */
    TOCHA_E_INTERNAL = -8       /* a broken invariant inside tocha: a bug */
} tocha_status;

typedef enum tocha_dtype {
    TOCHA_F32 = 0,
    TOCHA_F64,
    TOCHA_F16,
    TOCHA_BF16,
    TOCHA_U8,
    TOCHA_I32,
    TOCHA_I64,
    TOCHA_DTYPE_COUNT
} tocha_dtype;

typedef enum tocha_device_kind { TOCHA_DEVICE_CUDA = 0, TOCHA_DEVICE_SIM = 1 } tocha_device_kind;

typedef struct tocha_device tocha_device;
typedef struct tocha_kernel tocha_kernel;
typedef struct tocha_event tocha_event;

/* The device memory of a tensor, shared with its views; opaque. */
typedef struct tocha_storage tocha_storage;

/* A tensor: a row-major block of its own, or a view of another's (tocha_tensor_view) with
** strides of its own. Fields are read-only for callers. (Their names leave shape, dtype, device,
** numel and nbytes free for the Lua methods of the same names.) */
typedef struct tocha_tensor {
    tocha_device *dev;
    int32_t elem_type; /* a tocha_dtype */
    int32_t ndim;      /* 1..TOCHA_MAX_DIMS */
    int64_t dims[TOCHA_MAX_DIMS];
    int64_t count;  /* elements */
    uint64_t bytes; /* count times the element size (a view's elements, not its block's) */
    uint64_t data;  /* address of the first element: device (cuda) or host (sim); 0 once freed,
                    ** and 0 for an empty tensor (count 0), which holds no device memory */
    int32_t freed;  /* 1 after tocha_tensor_free */
    int32_t dense;  /* 1 when the strides are dims' row-major ones: the elements are dense */
    int64_t strides[TOCHA_MAX_DIMS]; /* elements between neighbours along each dimension */
    tocha_storage *storage;
} tocha_tensor;

typedef struct tocha_device_info {
    char name[32];              /* "cuda:0", "sim" or "sim:1" */
    char product[128];          /* e.g. "NVIDIA H200", or the host CPU for sim */
    int32_t kind;               /* a tocha_device_kind */
    int32_t ordinal;            /* CUDA ordinal; N for sim:N (0 for sim) */
    int32_t cc_major, cc_minor; /* compute capability; 0 for sim */
    int32_t multiprocessors;    /* SMs, or CPU cores for sim */
    uint64_t memory_free, memory_total;
    char target[32]; /* what kernels are compiled for: "sm_90", "sim-x86_64" */
} tocha_device_info;

/* A device's memory, as tensors hold it (tocha_memory_stats_get). */
typedef struct tocha_memory_stats {
    uint64_t allocated_bytes;      /* bytes of the live tensors */
    uint64_t peak_allocated_bytes; /* the most allocated_bytes reached (since tocha_memory_reset_peak) */
    uint64_t reserved_bytes;       /* held from the device: live tensors' blocks, their padding, and
                                   ** freed blocks kept for reuse */
    uint64_t cached_bytes;         /* of reserved_bytes, the freed blocks kept for reuse */
    int64_t allocations;           /* tensors allocated on the device, ever */
    int64_t frees;                 /* tensors freed on the device, ever */
    int64_t cache_hits;            /* allocations served from a freed block */
} tocha_memory_stats;

typedef struct tocha_compare_result {
    double max_abs;         /* max |a - b| over elements where both are finite */
    double max_rel;         /* max |a - b| / max(|b|, tiny) over the same */
    int64_t mismatched;     /* elements with |a - b| > atol + rtol * |b|, NaN unless both NaN */
    int64_t first_mismatch; /* flat index of the first mismatched element, or -1 */
} tocha_compare_result;

typedef struct tocha_cache_stats {
    int64_t compiles;     /* kernels compiled by NVRTC or the host compiler */
    int64_t memory_hits;  /* builds answered from this process's memory */
    int64_t disk_hits;    /* builds answered from the disk cache */
    int64_t disk_writes;  /* entries written to the disk cache */
    int64_t disk_rejects; /* bad entries found, deleted and rebuilt */
} tocha_cache_stats;

/* One argument of a raw launch: a tensor, or a scalar given as integer or float. */
/* TOCHA_ARG_POINTER carries a raw device address in i (what RuntimeOp::pack_args produces). */
typedef enum tocha_arg_kind {
    TOCHA_ARG_TENSOR = 0,
    TOCHA_ARG_INT = 1,
    TOCHA_ARG_FLOAT = 2,
    TOCHA_ARG_POINTER = 3
} tocha_arg_kind;
typedef struct tocha_arg {
    int32_t kind;
    tocha_tensor *tensor;
    int64_t i;
    double f;
} tocha_arg;

/* ---- errors and versions ---- */

/* The message of the last failure on this thread ("" if none). Valid until the next call. */
TOCHA_API const char *tocha_last_error(void);
/* A short name for a status, e.g. "argument". Never NULL. */
TOCHA_API const char *tocha_status_name(int status);
/* ---- NVTX ranges, for profilers (nsys, ncu) ---- */

/* Opens a range named name on the calling thread (NVTX's range stack); returns the number now
** open, or a negative status (name NULL). */
TOCHA_API int tocha_nvtx_push(const char *name);
/* Closes the thread's innermost range; returns the number still open, or a negative status
** when none is open. */
TOCHA_API int tocha_nvtx_pop(void);
/* How many ranges are open on the calling thread. */
TOCHA_API int tocha_nvtx_depth(void);

/* tocha's version, e.g. "0.1.0". */
TOCHA_API const char *tocha_version(void);
/* The XXH3-128 hash of size bytes at data as 32 lowercase hex digits and a NUL in out, for names
** of records keyed by text (the autotuner's). */
TOCHA_API void tocha_hash_hex(const void *data, uint64_t size, char out[33]);
/* This header as the LuaJIT FFI declares it (preprocessed at build time, its integer
** constants as one enum): the Lua bindings' cdef, so that they declare exactly what this
** library was built from. */
TOCHA_API const char *tocha_declarations(void);
/* The CUDA driver's version (e.g. 13000) in *out, or 0 if no driver could be loaded. */
TOCHA_API int tocha_driver_version(int *out);
/* NVRTC's version in *major, *minor (0, 0 if NVRTC could not be loaded). */
TOCHA_API int tocha_nvrtc_version(int *major, int *minor);

/* ---- dtypes ---- */

/* The dtype called name ("f32", "bf16", ...) in *out; TOCHA_E_ARGUMENT for an unknown name. */
TOCHA_API int tocha_dtype_from_name(const char *name, int *out);
/* The dtype's name, or NULL for a value out of range. */
TOCHA_API const char *tocha_dtype_name(int dtype);
/* Bytes per element, or 0 for a value out of range. */
TOCHA_API int tocha_dtype_size(int dtype);
/* The CUDA C type that holds the dtype's elements in a kernel, e.g. "__nv_bfloat16"; NULL for
** an unknown dtype. */
TOCHA_API const char *tocha_dtype_ctype(int dtype);

/* ---- devices ---- */

/* Every device this process can use: cuda:0..N-1 if the GPU is usable, then the simulator's
** sim, sim:1, ... (TOCHA_SIM_DEVICES of them, 2 unless set; at most 24 devices in all). Writes
** at most cap pointers and the total count in *count. */
TOCHA_API int tocha_device_list(tocha_device **out, int cap, int *count);
/* The device called name: "cuda", "cuda:N", "sim" or "sim:N" ("sim:0" is "sim"); NULL or ""
** means the default device.
** TOCHA_E_UNAVAILABLE with the reason if that device cannot be used here. */
TOCHA_API int tocha_device_get(const char *name, tocha_device **out);
/* The default device: TOCHA_DEVICE if set, else cuda:0 when usable, else sim. */
TOCHA_API int tocha_device_default(tocha_device **out);
/* Why the default device was chosen, e.g. "cuda: no NVIDIA driver (libcuda.so.1 not found)". */
TOCHA_API const char *tocha_device_default_reason(void);
/* Why CUDA is unusable here, or "" when it is usable. */
TOCHA_API const char *tocha_cuda_unavailable_reason(void);
/* Fills *out with the device's name, capability and current memory figures. */
TOCHA_API int tocha_device_info_get(tocha_device *device, tocha_device_info *out);
/* Waits until all work queued on the device has finished. */
TOCHA_API int tocha_device_synchronize(tocha_device *device);
/* Fills *out with the device's memory figures. */
TOCHA_API int tocha_memory_stats_get(tocha_device *device, tocha_memory_stats *out);
/* Gives the freed blocks kept for reuse back to the device (or the host, on sim). */
TOCHA_API int tocha_memory_empty_cache(tocha_device *device);
/* Starts peak_allocated_bytes again from the current allocated_bytes. */
TOCHA_API int tocha_memory_reset_peak(tocha_device *device);

/* ---- tensors ---- */

/* Allocates an uninitialised tensor. shape must hold ndim sizes, each >= 0. A tensor with a size
** 0 is empty: it holds no device memory (data is 0), the backend is not asked for 0 bytes, and
** every call below does nothing on it (no launch, no copy, nothing recorded in a graph). */
TOCHA_API int tocha_tensor_new(tocha_device *device, int dtype, int ndim, const int64_t *shape,
                               tocha_tensor **out);
/* Releases the device memory; the handle stays valid (and reports freed). Idempotent; NULL ok. */
TOCHA_API void tocha_tensor_free(tocha_tensor *t);
/* Releases the memory and the handle. NULL ok. */
TOCHA_API void tocha_tensor_destroy(tocha_tensor *t);
/* Copies nbytes (== t->bytes) from host memory into t. */
TOCHA_API int tocha_tensor_write(tocha_tensor *t, const void *src, uint64_t nbytes);
/* Copies count elements starting at element offset from t into host memory dst. */
TOCHA_API int tocha_tensor_read(const tocha_tensor *t, int64_t offset, int64_t count, void *dst);
/* Copies src into dst: same dtype and shape, any devices, either a view (dst not an expanded
** one, whose elements alias). Views of one block that overlap copy as if all of src were read
** first (through a temporary). Between two GPUs it is the driver's cuMemcpyPeer (peer to peer
** where the pair allows, staged by the driver where not); between devices of different kinds
** tocha copies through host memory. */
TOCHA_API int tocha_tensor_copy(tocha_tensor *dst, const tocha_tensor *src);
/* A view of t without a copy: ndim sizes and strides (elements, each >= 0) starting `offset`
** elements after t's first; every element it reaches must lie in t's block (a view with a size
** 0 reaches none: offset may be one past t's last element, and its data is 0). The view shares
** t's device memory, which is released when the last of t and its views is freed. Copies
** (tocha_tensor_copy) take views that are not contiguous; every other call refuses them. */
TOCHA_API int tocha_tensor_view(tocha_tensor *t, int ndim, const int64_t *dims, const int64_t *strides,
                                int64_t offset, tocha_tensor **out);
/* Sets every element to value, converted as tocha_tensor_cast converts. */
TOCHA_API int tocha_tensor_fill(tocha_tensor *t, double value);
/* Fills with uniform values in [low, high) from seed: element i depends only on (seed, i). */
TOCHA_API int tocha_tensor_uniform(tocha_tensor *t, uint64_t seed, double low, double high);
/* Fills with normal values (mean, std) from seed: element i depends only on (seed, i). */
TOCHA_API int tocha_tensor_normal(tocha_tensor *t, uint64_t seed, double mean, double std);
/* Converts src into dst (same shape and device, any dtypes): floats round to nearest even;
** floats to integers truncate toward zero and saturate, NaN becomes 0. */
TOCHA_API int tocha_tensor_cast(tocha_tensor *dst, const tocha_tensor *src);
/* acc = (first ? 0 : acc) + g, element by element: acc f32 or f64, g any float dtype of acc's
** shape, on acc's device (the sum of the gradients a tensor gets from several readers). */
TOCHA_API int tocha_tensor_accumulate(tocha_tensor *acc, const tocha_tensor *g, int first);
/* Compares a with b (same dtype, shape and device) elementwise in f64. */
/* TOCHA_E_ARGUMENT, naming both, when one of the n_out outputs shares memory with another
** output (one would overwrite the other's result), or with one of the n_in inputs other than
** element for element, in place (it would overwrite elements still to be read); TOCHA_OK
** otherwise. Every op checks its launch with it; ops written outside C call it too. */
TOCHA_API int tocha_tensor_check_aliasing(const tocha_tensor *const *outputs,
                                          const char *const *out_names, int n_out,
                                          const tocha_tensor *const *inputs, const char *const *in_names,
                                          int n_in);
TOCHA_API int tocha_tensor_compare(const tocha_tensor *a, const tocha_tensor *b, double rtol,
                                   double atol, tocha_compare_result *out);

/* ---- kernels ---- */

/* The CUDA C text of a kernel file of tocha's library (kernels/<file>, e.g. "reduction.cu"), as
** libtocha carries it, for ops built around tocha_kernel_new outside C; NULL when there is no
** such file (the shared header and the simulator's are not kernel files). */
TOCHA_API const char *tocha_kernel_library_source(const char *file);
/* A kernel from CUDA C source: name is a __device__ function template in source (or a plain
** function when template_args is ""), template_args its arguments ("float, 2, 2, 128"), and
** params its parameter list, comma-separated, each "T*" for a tensor of dtype T or a scalar
** type: "f32*, f32*, i32, i32". tocha generates the extern "C" entry point
** "<name>_entry_point" that binds them. Nothing is compiled until the first build or launch. */
TOCHA_API int tocha_kernel_new(const char *source, const char *name, const char *template_args,
                               const char *params, tocha_kernel **out);
/* What a kernel carries beyond its source. options: NVRTC flags, in order (-DNAME[=V], -UNAME,
** -lineinfo, --use_fast_math, -maxrregcount=N, -ftz=/-prec-div=/-prec-sqrt=/-fmad=true|false, -G,
** --extra-device-vectorization, -restrict, -w, --ptxas-options=OPT, -Xptxas OPT); flags tocha sets
** itself (-arch, -std, -I, -o) or that break a whole-program build (-rdc, -dlto) are refused by
** name. They are part of the cache key; on the simulator only -D and -U take effect.
** max_threads (1 to 1024) and min_blocks: the entry point's __launch_bounds__, 0 for none; a
** launch of a larger block is refused. */
#define TOCHA_MAX_OPTIONS 64
typedef struct tocha_kernel_config {
    const char *const *options;
    int32_t n_options;
    int32_t max_threads;
    int32_t min_blocks;
    /* The name compile errors give the source ("blur.cu"); NULL: "<name>.cu". */
    const char *file;
} tocha_kernel_config;
/* tocha_kernel_new with config (NULL: as tocha_kernel_new). */
TOCHA_API int tocha_kernel_new_config(const char *source, const char *name, const char *template_args,
                                      const char *params, const tocha_kernel_config *config,
                                      tocha_kernel **out);
/* Releases the kernel. Compiled modules stay in the process cache. NULL ok. */
TOCHA_API void tocha_kernel_destroy(tocha_kernel *k);
/* The generated entry point's source and name, and the full source compiled
** (source .. "\n\n" .. entry point). Owned by k. */
TOCHA_API const char *tocha_kernel_entry_point_source(const tocha_kernel *k);
TOCHA_API const char *tocha_kernel_entry_point_name(const tocha_kernel *k);
TOCHA_API const char *tocha_kernel_source(const tocha_kernel *k);
/* The parameter list as normalised ("f32* x, i32 n"), and its length. Owned by k. */
TOCHA_API const char *tocha_kernel_params(const tocha_kernel *k);
TOCHA_API int tocha_kernel_param_count(const tocha_kernel *k);
/* A 32-hex-digit XXH3-128 hash of the full source. Owned by k. */
TOCHA_API const char *tocha_kernel_hash(const tocha_kernel *k);
/* Compiles the kernel for target ("sm_90", "sim") through the cache without loading it, and
** reports the binary's size. Works with no GPU present. */
TOCHA_API int tocha_kernel_build(tocha_kernel *k, const char *target, uint64_t *binary_size);
/* Launches on device with grid and block (x, y, z) and shared_bytes of dynamic shared memory per
** block. Each argument is checked against params: count, tensor or scalar, dtype, device, freed,
** integer range; the block against the kernel's launch bounds; shared_bytes (with the kernel's
** static shared memory where the device reports it) against the device's limit for a block. */
TOCHA_API int tocha_kernel_launch(tocha_kernel *k, tocha_device *device, const uint32_t grid[3],
                                  const uint32_t block[3], uint32_t shared_bytes, const tocha_arg *args,
                                  int nargs);

/* What a kernel's compiled code uses. Bytes except registers (per thread) and max_threads (the
** largest block it launches with, registers and launch bounds considered). */
typedef struct tocha_kernel_info {
    int32_t registers;
    int32_t max_threads;
    int64_t spill_stores, spill_loads; /* -1 where ptxas's report was not to be had */
    int64_t shared;   /* static shared memory per block */
    int64_t local;    /* stack frame per thread */
    int64_t constant; /* __constant__ memory */
    char target[32];
    int32_t from_device; /* 1: registers, shared, local, constant, max_threads are the driver's */
} tocha_kernel_info;
/* Fills out for target ("sm_90"; NULL: device's target, where device NULL means the simulator's
** compile target, TOCHA_ARCH or sm_90): ptxas's report through NVRTC (an extra compile, kept
** with the kernel), and on a cuda device whose target it is, the driver's function attributes. */
TOCHA_API int tocha_kernel_info_get(tocha_kernel *k, tocha_device *device, const char *target,
                                    tocha_kernel_info *out);
/* Blocks of threads (with shared_bytes of dynamic shared memory each) resident on one SM, and the
** fraction of the SM's warps they fill: the driver's answer on a cuda device of target (NULL: the
** device's), else computed from target's published limits (sm_80, 86, 87, 89, 90, 100, 120). */
TOCHA_API int tocha_kernel_occupancy(tocha_kernel *k, tocha_device *device, const char *target,
                                     uint32_t threads, uint32_t shared_bytes, int32_t *blocks,
                                     double *fraction);
/* The PTX text for target ("sm_90"): owned by k. */
TOCHA_API int tocha_kernel_ptx(tocha_kernel *k, const char *target, const char **ptx);
/* The binary for target ("sm_90": a cubin; "sim": a shared library) through the cache: owned by
** the cache, alive until the process ends. */
TOCHA_API int tocha_kernel_binary(tocha_kernel *k, const char *target, const void **data, uint64_t *size);

/* tocha's own kernel for op ("fill", "uniform", "normal", "cast", "compare") on dtype (cast:
** from dtype to dtype2). Owned by the library: do not destroy. For compile checks. */
TOCHA_API int tocha_builtin_kernel_get(const char *op, int dtype, int dtype2, tocha_kernel **out);

/* ---- kernel cache ---- */

TOCHA_API int tocha_cache_stats_get(tocha_cache_stats *out);
/* The disk cache folder in use, or "" when the disk cache is off (TOCHA_CACHE=off). */
TOCHA_API const char *tocha_cache_dir(void);
/* Why the disk cache is off although it was asked for (a folder that cannot be created or
** written), or "" when it is fine or off by TOCHA_CACHE=off. */
TOCHA_API const char *tocha_cache_warning(void);
/* Number of entries and their bytes in the disk cache. */
TOCHA_API int tocha_cache_usage(int64_t *entries, int64_t *bytes);
/* Deletes every entry of the disk cache and tocha.autotune's records beside them; *removed gets
** their count (may be NULL). */
TOCHA_API int tocha_cache_clear(int64_t *removed);

/* ---- files ---- */

/* What a path names, as stat(2) sees it (following links). */
typedef enum tocha_file_kind_t {
    TOCHA_FILE_MISSING = 0,
    TOCHA_FILE_REGULAR = 1,
    TOCHA_FILE_DIRECTORY = 2,
    TOCHA_FILE_FIFO = 3,
    TOCHA_FILE_DEVICE = 4, /* a character or block device */
    TOCHA_FILE_SOCKET = 5,
    TOCHA_FILE_OTHER = 6
} tocha_file_kind_t;
/* *kind gets what path names (TOCHA_FILE_MISSING when nothing is there); never opens it, so a
** FIFO does not block. TOCHA_E_IO when the path cannot be looked at (no permission). */
TOCHA_API int tocha_file_kind(const char *path, int *kind);
/* Creates an empty file of a unique name beside target (".<name>.tocha-XXXXXX" in its folder)
** with target's permissions (a new file's when target does not exist) and writes its name
** into name (size bytes). The caller writes it, then tocha_file_commit, or removes it. */
TOCHA_API int tocha_file_temp(const char *target, char *name, size_t size);
/* Syncs temp to the disk and renames it over target (then syncs the folder), so that target is
** either its old bytes or the new ones, whole. On failure removes temp and leaves target. */
TOCHA_API int tocha_file_commit(const char *temp, const char *target);

/* ---- ONNX model files ---- */

/* An ONNX model file read and checked: its graph's nodes, initializers, inputs and outputs as
** plain values, the tensors' elements as little-endian bytes in C order. Everything handed out
** lives as long as the handle. The protobuf is decoded by protobuf-c from the ONNX schema. */
typedef struct tocha_onnx tocha_onnx;

/* ONNX's TensorProto.DataType values that tocha names. */
#define TOCHA_ONNX_FLOAT 1
#define TOCHA_ONNX_UINT8 2
#define TOCHA_ONNX_INT8 3
#define TOCHA_ONNX_INT16 5
#define TOCHA_ONNX_INT32 6
#define TOCHA_ONNX_INT64 7
#define TOCHA_ONNX_STRING 8
#define TOCHA_ONNX_BOOL 9
#define TOCHA_ONNX_FLOAT16 10
#define TOCHA_ONNX_DOUBLE 11
#define TOCHA_ONNX_BFLOAT16 16

/* ONNX's AttributeProto.AttributeType values. */
#define TOCHA_ONNX_ATTR_FLOAT 1
#define TOCHA_ONNX_ATTR_INT 2
#define TOCHA_ONNX_ATTR_STRING 3
#define TOCHA_ONNX_ATTR_TENSOR 4
#define TOCHA_ONNX_ATTR_GRAPH 5
#define TOCHA_ONNX_ATTR_FLOATS 6
#define TOCHA_ONNX_ATTR_INTS 7
#define TOCHA_ONNX_ATTR_STRINGS 8

/* Which list of values tocha_onnx_value reads. */
#define TOCHA_ONNX_INPUTS 0
#define TOCHA_ONNX_OUTPUTS 1
#define TOCHA_ONNX_VALUE_INFOS 2

typedef struct tocha_onnx_info {
    int64_t ir_version;
    const char *producer_name, *producer_version, *graph_name; /* "" where absent */
    int64_t n_opsets, n_nodes, n_initializers, n_inputs, n_outputs, n_value_infos;
} tocha_onnx_info;

/* A tensor: an initializer or a TENSOR attribute (a Constant's value). data holds n_elements
** elements of element_bytes each (bytes in all); it is NULL when n_elements is 0 and for data
** types without fixed-size elements (STRING, complex, 4-bit), whose element_bytes is 0. */
typedef struct tocha_onnx_tensor {
    const char *name;
    int32_t data_type;
    int32_t n_dims;
    const int64_t *dims;
    int64_t n_elements;
    int32_t element_bytes;
    const void *data;
    uint64_t bytes;
} tocha_onnx_tensor;

typedef struct tocha_onnx_node {
    const char *name, *op_type, *domain; /* "" where absent ("" is ONNX's default domain) */
    int32_t n_inputs, n_outputs, n_attributes;
    const char *const *inputs; /* an input "" is an optional one left out */
    const char *const *outputs;
} tocha_onnx_node;

/* An attribute: the fields its type uses (f, i, s, floats, ints, strings or tensor). */
typedef struct tocha_onnx_attribute {
    const char *name;
    int32_t type;
    float f;
    int64_t i;
    const char *s; /* s_bytes bytes, NUL-terminated ("" where absent) */
    uint64_t s_bytes;
    int64_t n_floats, n_ints, n_strings;
    const float *floats;
    const int64_t *ints;
    const char *const *strings; /* NUL-terminated; a string holding a NUL ends there */
    tocha_onnx_tensor tensor;   /* TOCHA_ONNX_ATTR_TENSOR */
} tocha_onnx_attribute;

/* A graph input, output or value_info: elem_type 0 and n_dims -1 where the file gives no
** tensor type or no shape; a dimension -1 where it is symbolic (dim_names[d] its name) or
** unknown. */
typedef struct tocha_onnx_value {
    const char *name;
    int32_t elem_type;
    int32_t n_dims;
    const int64_t *dims;
    const char *const *dim_names; /* "" where a dimension has no name */
} tocha_onnx_value;

/* Reads the ONNX model file at path (at most 2 GiB, protobuf's limit) into *out. Refuses,
** naming the path and what is wrong: a file that is not a protobuf of the ONNX schema (cut
** short, malformed, nested deeper than 100 messages), a model without a graph, a tensor whose
** data does not match its dims and type, and tensors whose data lies in other files. */
TOCHA_API int tocha_onnx_read(const char *path, tocha_onnx **out);
/* The same from size bytes in memory; name stands for the file in messages. */
TOCHA_API int tocha_onnx_read_bytes(const void *bytes, size_t size, const char *name, tocha_onnx **out);
/* NULL ok. */
TOCHA_API void tocha_onnx_destroy(tocha_onnx *model);
TOCHA_API int tocha_onnx_get_info(const tocha_onnx *model, tocha_onnx_info *out);
/* Opset import i (0-based): its domain ("" the default one) and version. */
TOCHA_API int tocha_onnx_get_opset(const tocha_onnx *model, int64_t i, const char **domain, int64_t *version);
/* Node i (0-based) of the graph, in the file's order (ONNX's: topological). */
TOCHA_API int tocha_onnx_get_node(const tocha_onnx *model, int64_t i, tocha_onnx_node *out);
/* Attribute j of node i. */
TOCHA_API int tocha_onnx_get_attribute(const tocha_onnx *model, int64_t i, int64_t j, tocha_onnx_attribute *out);
/* Initializer i of the graph. */
TOCHA_API int tocha_onnx_get_initializer(const tocha_onnx *model, int64_t i, tocha_onnx_tensor *out);
/* Value i of a list (TOCHA_ONNX_INPUTS, TOCHA_ONNX_OUTPUTS, TOCHA_ONNX_VALUE_INFOS). */
TOCHA_API int tocha_onnx_get_value(const tocha_onnx *model, int list, int64_t i, tocha_onnx_value *out);

/* ---- collectives (NCCL) ---- */

typedef enum tocha_collective {
    TOCHA_ALL_REDUCE = 0,
    TOCHA_BROADCAST = 1,
    TOCHA_ALL_GATHER = 2,
    TOCHA_REDUCE_SCATTER = 3
} tocha_collective;
/* A collective's reduction; the values are NCCL's ncclRedOp_t. */
typedef enum tocha_reduce_op {
    TOCHA_REDUCE_SUM = 0,
    TOCHA_REDUCE_PROD = 1,
    TOCHA_REDUCE_MAX = 2,
    TOCHA_REDUCE_MIN = 3,
    TOCHA_REDUCE_AVG = 4
} tocha_reduce_op;
/* 1 when NCCL (TOCHA_NCCL_LIBRARY, else libnccl.so.2) is loaded, with its version code in
** *version (e.g. 22105 for 2.21.5); else 0 with the reason in *why (static text). Either
** pointer may be NULL. */
TOCHA_API int tocha_nccl_available(const char **why, int *version);
/* Runs collective kind over n ranks through NCCL: rank i reads inputs[i] and writes
** outputs[i] (the same tensor for an in-place all-reduce or broadcast), each pair on a cuda
** device of its own, contiguous, of one dtype, on each device's current stream. Counts: equal
** for TOCHA_ALL_REDUCE and TOCHA_BROADCAST; outputs n times the inputs' for TOCHA_ALL_GATHER
** (rank order); inputs n times the outputs' for TOCHA_REDUCE_SCATTER. op (a tocha_reduce_op)
** serves the reductions, root (0-based) the broadcast. One NCCL communicator is made per
** ordered list of devices and kept. TOCHA_E_UNAVAILABLE when NCCL cannot be loaded. */
TOCHA_API int tocha_nccl_collective(int kind, int op, int root, int n, tocha_tensor *const *inputs,
                                    tocha_tensor *const *outputs);

/* ---- streams ---- */

/* A queue of work on a device: what is queued on one stream runs in order, and streams run
** beside one another. Every device has a default stream (the CUDA legacy stream), which the
** streams made here also wait for and are waited for by, so that host transfers and
** allocations stay ordered with them. */
typedef struct tocha_stream tocha_stream;
TOCHA_API int tocha_stream_new(tocha_device *device, tocha_stream **out);
/* Destroys s (its queued work still runs); a device whose current stream it was goes back to
** the default stream. */
TOCHA_API void tocha_stream_destroy(tocha_stream *s);
TOCHA_API tocha_device *tocha_stream_device(const tocha_stream *s);
/* Waits until the work queued on s has finished. */
TOCHA_API int tocha_stream_synchronize(tocha_stream *s);
/* Work queued on s from now on waits for e's point in its own stream (e must be recorded). */
TOCHA_API int tocha_stream_wait_event(tocha_stream *s, tocha_event *e);
/* Makes s the stream that launches, copies and event records on its device go to; NULL on a
** device (with s NULL) restores its default stream. */
TOCHA_API int tocha_device_set_stream(tocha_device *device, tocha_stream *s);
/* The device's current stream, NULL for its default one. */
TOCHA_API tocha_stream *tocha_device_get_stream(tocha_device *device);

/* ---- graphs ---- */

/* Work captured once and replayed: the launches and copies queued on a stream between
** capture_begin and capture_end are recorded, not run, and tocha_graph_replay runs them again,
** on the same tensors, each time. The graph holds the device blocks its work reads and writes
** until it is destroyed, so a tensor freed after the capture gives its block to the graph,
** never to a tensor allocated later. During a capture the device refuses what would wait for it
** or read it from the host (synchronizing, host transfers, event records) and a kernel not yet
** loaded on it. cuda uses the driver's stream capture; sim records the work itself. */
typedef struct tocha_graph tocha_graph;
/* Starts a capture on s (a stream of tocha_stream_new), one capture at a time per device. */
TOCHA_API int tocha_graph_capture_begin(tocha_stream *s);
/* Ends s's capture; *out gets the graph. */
TOCHA_API int tocha_graph_capture_end(tocha_stream *s, tocha_graph **out);
/* Runs the graph's work on its device's current stream. */
TOCHA_API int tocha_graph_replay(tocha_graph *g);
TOCHA_API void tocha_graph_destroy(tocha_graph *g);

/* ---- timing ---- */

/* An event on device: a point in its queue of work (host clock on sim). */
TOCHA_API int tocha_event_new(tocha_device *device, tocha_event **out);
TOCHA_API void tocha_event_destroy(tocha_event *e);
/* Records the event after the work queued so far. */
TOCHA_API int tocha_event_record(tocha_event *e);
/* Milliseconds between two recorded events of one device; waits for end. */
TOCHA_API int tocha_event_elapsed_ms(tocha_event *start, tocha_event *end, double *ms);

/* ---- packed launches: the arguments an op packs (its RuntimeOp lives in Lua, lua/tocha/op.lua) ---- */

/* teeny-kernels' ArgVisitor: pack_args appends the launch arguments here, in order. */
typedef struct tocha_arg_list {
    int32_t count;
    tocha_arg args[TOCHA_MAX_PARAMS];
} tocha_arg_list;

/* Launches k with arguments packed by an op (raw pointers and integers): checks count, kinds
** and integer ranges; pointers cannot be checked further. */
TOCHA_API int tocha_kernel_launch_packed(tocha_kernel *k, tocha_device *device, const uint32_t grid[3],
                                         const uint32_t block[3], const tocha_arg_list *args);
/* The same with shared_bytes of dynamic shared memory per block, checked as tocha_kernel_launch
** checks it. */
TOCHA_API int tocha_kernel_launch_packed_shared(tocha_kernel *k, tocha_device *device, const uint32_t grid[3],
                                                const uint32_t block[3], uint32_t shared_bytes,
                                                const tocha_arg_list *args);

/* ---- launch plans: launches packed once, run many times ---- */

/* A fixed list of launches on one device whose arguments are checked and packed when added,
** so that running it is a loop of launches (what a loaded model's forward is). Addresses that
** change between runs are slots: an argument packed with tocha_plan_slot_address(s) + offset
** (offset below 2^40) becomes, at each run, that run's address of slot s + offset. Every other
** address the plan names keeps its device block allocated while the plan lives. The kernels
** must outlive the plan. On a capturing stream a run is captured like any launch. */
typedef struct tocha_plan tocha_plan;
#define TOCHA_PLAN_MAX_SLOTS 4096
/* A plan on device with n_slots slots (0 to TOCHA_PLAN_MAX_SLOTS). */
TOCHA_API int tocha_plan_new(tocha_device *device, int n_slots, tocha_plan **out);
/* NULL ok. */
TOCHA_API void tocha_plan_destroy(tocha_plan *plan);
/* The placeholder address of slot (0-based), far above every real address; 0 out of range. */
TOCHA_API uint64_t tocha_plan_slot_address(int slot);
/* Appends a launch of k: the grid, block and arguments are checked as tocha_kernel_launch_packed
** checks them, and k is built and loaded on the plan's device now. */
TOCHA_API int tocha_plan_add(tocha_plan *plan, tocha_kernel *k, const uint32_t grid[3],
                             const uint32_t block[3], const tocha_arg_list *args);
/* The same with shared_bytes of dynamic shared memory per block, checked as tocha_kernel_launch
** checks it. */
TOCHA_API int tocha_plan_add_shared(tocha_plan *plan, tocha_kernel *k, const uint32_t grid[3],
                                    const uint32_t block[3], uint32_t shared_bytes,
                                    const tocha_arg_list *args);
/* Each run first refuses, as "<name>: tensor was freed", when t has been freed (t must outlive
** the plan: a model's parameters). */
TOCHA_API int tocha_plan_guard(tocha_plan *plan, const tocha_tensor *t, const char *name);
/* Runs every launch in order on the device's current stream, slots[i] (n_slots of them, none 0)
** the addresses of the slots. */
TOCHA_API int tocha_plan_run(tocha_plan *plan, const uint64_t *slots, int n_slots);
/* Launches first .. first + count - 1 (0-based) alone, checked and patched as tocha_plan_run
** does: a part of the plan, to time it (a model's profile, node by node). */
TOCHA_API int tocha_plan_run_range(tocha_plan *plan, const uint64_t *slots, int n_slots, int first, int count);
/* The launches added (0 for NULL). */
TOCHA_API int tocha_plan_launch_count(const tocha_plan *plan);

#ifdef __cplusplus
}
#endif
#endif
