/* internal.h: declarations shared by libtocha's modules; not part of the ABI. */
#ifndef TOCHA_INTERNAL_H
#define TOCHA_INTERNAL_H

#include "tocha.h"
#include <stdatomic.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TOCHA_MAX_SIM_DEVICES 8 /* sim, sim:1 .. sim:7 (TOCHA_SIM_DEVICES) */
#define TOCHA_MAX_DEVICES (16 + TOCHA_MAX_SIM_DEVICES) /* up to 16 GPUs, then the simulator's */

/* ---- error.c ---- */
/* Records the formatted message for tocha_last_error() and returns status. */
int tocha_fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- text.c: a growable string ---- */
typedef struct {
    char *data;
    size_t len, cap;
    bool failed; /* an allocation failed; data holds what fitted */
} tocha_text;
void tocha_text_append(tocha_text *t, const char *s);
void tocha_text_appendf(tocha_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Returns the string (owned by the caller) or NULL if an allocation failed; resets t. */
char *tocha_text_take(tocha_text *t);
/* Appends source with a line number before each line, so that a compiler's "(12): error"
** can be read against it. */
void tocha_text_append_numbered(tocha_text *t, const char *source);
/* Writes ndim sizes joined by sep ("2x3", "1, 1, 4, 4") into out (cap bytes, cut if short). */
void tocha_format_dims(const int64_t *dims, int ndim, const char *sep, char *out, size_t cap);
/* Joins n words with single spaces into out (cap bytes, always terminated; cut if too long). */
void tocha_join_words(const char *const *words, size_t n, char *out, size_t cap);
/* A copy of s, or NULL. */
char *tocha_strdup(const char *s);

/* ---- options.c: a kernel's compile options ---- */
/* A kernel's compile options, in order (NULL or count 0: none). */
typedef struct tocha_options {
    char **items;
    int count;
} tocha_options;
/* TOCHA_E_ARGUMENT naming the first option that tocha does not pass (see options.c). */
int tocha_options_check(const char *const *options, int count);
/* Whether opt defines or undefines a macro (-D, -U and their long forms): the options that
** mean something to the simulator's compiler. */
bool tocha_option_is_macro(const char *opt);

/* ---- arch.c: published limits of GPU targets ---- */
typedef struct tocha_arch {
    const char *target; /* "sm_90" */
    int threads_per_sm, blocks_per_sm;
    int registers_per_sm, registers_per_block;
    uint32_t shared_per_sm, shared_per_block; /* the block's: the opt-in maximum */
    uint32_t shared_reserved;                 /* per block, for the system */
} tocha_arch;
/* The limits of target ("sm_90"), or NULL when tocha has no table for it. */
const tocha_arch *tocha_arch_find(const char *target);
/* The target that kernels are compiled for without a GPU: TOCHA_ARCH, else "sm_90". */
const char *tocha_arch_default(void);
/* Blocks of threads (each using registers per thread and shared bytes, static and dynamic
** together) that fit on one SM of a; 0 when one does not fit. */
int tocha_arch_blocks_per_sm(const tocha_arch *a, uint32_t threads, int registers, uint64_t shared);

/* ---- dtype.c ---- */
bool tocha_dtype_valid(int dtype);

/* ---- devices ---- */
typedef struct tocha_module tocha_module; /* a loaded binary: CUmodule or dlopen handle */

/* What a device kind does; cuda_driver.c and sim.c each provide one. */
typedef struct tocha_backend {
    /* A block for nbytes (from the backend's cache of freed blocks where it keeps one;
    ** *cached tells which); release gives it back, to that cache where there is one. */
    int (*alloc)(tocha_device *d, uint64_t nbytes, uint64_t *out, bool *cached);
    void (*release)(tocha_device *d, uint64_t ptr, uint64_t nbytes);
    /* Bytes held from the device (live and cached blocks), and of them the cached ones. */
    void (*reserved)(tocha_device *d, uint64_t *reserved, uint64_t *cached);
    /* Gives the cached blocks back. */
    void (*empty_cache)(tocha_device *d);
    int (*write)(tocha_device *d, uint64_t dst, const void *src, uint64_t nbytes);
    int (*read)(tocha_device *d, void *dst, uint64_t src, uint64_t nbytes);
    int (*copy)(tocha_device *d, uint64_t dst, uint64_t src, uint64_t nbytes, void *stream);
    /* Copies between two devices of this backend without the host's help (cuda); NULL where
    ** tocha copies through host memory (sim, whose memory is the host's). */
    int (*copy_peer)(tocha_device *dst_dev, uint64_t dst, tocha_device *src_dev, uint64_t src,
                     uint64_t nbytes);
    /* Loads a binary built for this device's target and finds entry in it. */
    int (*load)(tocha_device *d, const void *binary, uint64_t size, const char *entry, void **module,
                void **function);
    /* shared_bytes: the launch's dynamic shared memory per CTA (on the simulator only a size
    ** that its kernels can read: tocha::dynamic_shared_bytes()). */
    int (*launch)(tocha_device *d, void *function, const uint32_t grid[3], const uint32_t block[3],
                  uint32_t shared_bytes, void **args, void *stream);
    /* What the device says of a loaded function (registers, static shared, local and constant
    ** bytes, its largest block); NULL where the device cannot say (sim). */
    int (*function_info)(tocha_device *d, void *function, tocha_kernel_info *out);
    /* Lets function launch with up to bytes of dynamic shared memory (above the default 48 KiB);
    ** NULL where any size up to the device's limit launches as it is (sim). */
    int (*allow_dynamic_shared)(tocha_device *d, void *function, uint32_t bytes);
    /* Blocks of function, of threads each with shared_bytes of dynamic shared memory, that are
    ** resident on one SM at once; NULL where the device cannot say (sim). */
    int (*occupancy)(tocha_device *d, void *function, uint32_t threads, uint32_t shared_bytes,
                     int *blocks);
    int (*synchronize)(tocha_device *d);
    int (*memory)(tocha_device *d, uint64_t *free_bytes, uint64_t *total_bytes);
    int (*event_new)(tocha_device *d, void **out);
    void (*event_destroy)(tocha_device *d, void *event);
    int (*event_record)(tocha_device *d, void *event, void *stream);
    /* Streams (the stream arguments above: NULL for the device's default stream). Work on a
    ** stream runs in order; a stream waits for an event recorded on another. */
    int (*stream_new)(tocha_device *d, void **out);
    void (*stream_destroy)(tocha_device *d, void *stream);
    int (*stream_synchronize)(tocha_device *d, void *stream);
    int (*stream_wait_event)(tocha_device *d, void *stream, void *event);
    /* Graph capture by the device itself (cuda's stream capture); NULL where tocha records
    ** the work (sim). capture_end gives an executable graph that graph_launch runs. */
    int (*capture_begin)(tocha_device *d, void *stream);
    int (*capture_end)(tocha_device *d, void *stream, void **exec);
    int (*graph_launch)(tocha_device *d, void *exec, void *stream);
    void (*graph_destroy)(tocha_device *d, void *exec);
    int (*event_elapsed)(tocha_device *d, void *start, void *end, double *ms);
} tocha_backend;

/* What a device's tensors hold (memory.c); updated on the thread that allocates or frees. */
typedef struct tocha_memory_counters {
    atomic_ullong allocated, peak;
    atomic_llong allocations, frees, cache_hits;
    atomic_ullong held; /* a backend's own count of the bytes it holds (cuda) */
    /* Blocks freed during a graph capture, given back when it ends: (address, bytes) pairs. */
    uint64_t *deferred;
    size_t n_deferred, cap_deferred;
} tocha_memory_counters;

struct tocha_device {
    int index; /* position in the process's device table; indexes per-device caches */
    int load_slot; /* where the kernel cache keeps this device's loaded modules: its index, or
                   ** the first sim device's for every sim device (one module serves them all) */
    int kind;  /* tocha_device_kind */
    int ordinal;
    char name[32];
    char product[128];
    char target[32]; /* compile target: "sm_90" or "sim" */
    int cc_major, cc_minor, multiprocessors;
    uint32_t shared_per_block; /* a block's dynamic and static shared memory at most (opt-in) */
    int threads_per_sm;
    const tocha_backend *backend;
    void *context; /* CUcontext for cuda */
    void *pool;    /* cuda: the CUmemoryPool of tensors' blocks, made on first use */
    bool pool_unsupported;
    void *side_stream; /* cuda: where allocations go while a stream captures */
    tocha_memory_counters memory;
    tocha_stream *stream; /* where launches, copies and events go; NULL: the default stream */
    int capturing;        /* graph captures under way on the device's streams */
    /* Every block a tensor holds, so that a capture can find the block behind an address it
    ** is given (tocha_storage_find) and hold it for its graph. */
    tocha_storage **live;
    int64_t n_live, cap_live;
};

struct tocha_stream {
    tocha_device *device;
    void *handle;
    tocha_graph *capture; /* the graph being captured on this stream, or NULL */
};

/* ---- graph.c ---- */
/* An error naming what when a graph capture is under way on d (work that would wait for the
** device or read it from the host cannot be recorded), else TOCHA_OK. */
int tocha_refuse_during_capture(const tocha_device *d, const char *what);
/* Whether d's current stream is capturing for a backend that cannot capture itself (sim):
** then its launches and copies are recorded here instead of run. */
bool tocha_graph_recording(const tocha_device *d);
/* Records a launch (args[i] pointing at sizes[i] bytes) or a copy on d's capturing stream. */
int tocha_graph_record_launch(tocha_device *d, void *function, const uint32_t grid[3],
                              const uint32_t block[3], uint32_t shared_bytes, void **args,
                              const uint8_t *sizes, int nargs);
int tocha_graph_record_copy(tocha_device *d, uint64_t dst, uint64_t src, uint64_t nbytes);
/* While d's current stream captures (either backend), its graph takes a hold on the blocks that
** a launch's 8-byte arguments (args[i] pointing at sizes[i] bytes) or a copy's addresses point
** into, so that they outlive the tensors that held them for as long as the graph is replayed.
** TOCHA_OK when nothing captures. */
int tocha_graph_hold_arguments(tocha_device *d, void **args, const uint8_t *sizes, int nargs);
int tocha_graph_hold_address(tocha_device *d, uint64_t address);
/* Ends a capture whose stream is being destroyed, dropping what it recorded. */
void tocha_graph_capture_abandon(tocha_stream *s);

/* The backend handle of d's current stream (NULL for the default one). */
void *tocha_device_stream_handle(const tocha_device *d);
/* An event's backend handle, with its device and whether it was recorded (event.c). */
void *tocha_event_parts(const tocha_event *e, tocha_device **device, bool *recorded);

/* ---- memory.c ---- */
/* A block of nbytes for a tensor on d, counted in d's memory figures. */
int tocha_memory_alloc(tocha_device *d, uint64_t nbytes, uint64_t *out);
/* Gives back a block of tocha_memory_alloc; during a graph capture it is kept until the
** capture ends (freeing device memory would wait for the device, and a recorded launch may
** still name the block). */
void tocha_memory_release(tocha_device *d, uint64_t ptr, uint64_t nbytes);
/* Gives back the blocks freed during the capture that just ended on d. */
void tocha_memory_release_deferred(tocha_device *d);

/* ---- cuda_driver.c ---- */
/* Loads the driver and fills devs with one device per GPU (at most cap). Returns the count,
** or 0 with *why set to the reason CUDA is unusable. */
int tocha_cuda_discover(tocha_device *devs, int cap, int first_index, const char **why);
int tocha_cuda_driver_version(void);

/* ---- sim.c ---- */
/* Fills d as sim device ordinal (0: "sim", else "sim:N") at table position index, its
** modules loaded where the device at first_sim_index loads them. */
void tocha_sim_init(tocha_device *d, int index, int ordinal, int first_sim_index);
/* How many sim devices TOCHA_SIM_DEVICES asks for (1 to TOCHA_MAX_SIM_DEVICES; 2 when it is
** unset or empty); for any other value, 1 with the reason written into error. */
int tocha_sim_device_count(char *error, size_t size);
/* Host compiler target name for sim binaries, e.g. "sim-x86_64". */
const char *tocha_sim_target(void);

/* ---- nvrtc.c ---- */
/* Loads NVRTC; returns false with *why set when it cannot be loaded. */
bool tocha_nvrtc_available(const char **why);
/* Compiles source for arch ("sm_90") to a cubin; *binary is malloc'd. The log of a failure
** becomes the error message. */
int tocha_nvrtc_compile(const char *source, const char *arch, const tocha_options *options,
                        void **binary, uint64_t *size);
/* Compiles source for arch with options and ptxas's report asked for: *log gets the program's log
** (ptxas's lines), *ptx the PTX text, *cubin the binary (each malloc'd). For readouts. */
int tocha_nvrtc_report(const char *source, const char *arch, const tocha_options *options, char **log,
                       char **ptx, void **cubin, uint64_t *cubin_size);
/* "nvrtc 13.0" */
const char *tocha_nvrtc_identity(void);
/* NVRTC's fixed compile options, space-separated: used to compile and to key the cache. */
const char *tocha_nvrtc_options(void);
/* The toolkit include folder holding cuda_fp16.h, or NULL. */
const char *tocha_cuda_include_dir(void);

/* ---- sim_guard.c: the simulator's memory protection ---- */
/* Zeroed, 256-byte aligned memory of `rounded` bytes (a multiple of 256) whose end abuts an
** inaccessible guard page and whose size is kept on a read-only page below it; NULL when it
** cannot be mapped. tocha_sim_mapped_bytes gives back `rounded`; tocha_sim_unmap releases it. */
void *tocha_sim_map(uint64_t rounded);
uint64_t tocha_sim_mapped_bytes(const void *data);
void tocha_sim_unmap(void *data);
/* ---- sim_blocks.c: the simulator's cache of freed blocks ---- */
/* Each sim device (its ordinal: device) keeps a cache of its own, so that a block counts
** against the device that mapped it.
** A cached block of exactly `rounded` mapped bytes, taken out of the cache, or NULL. */
void *tocha_sim_blocks_take(int device, uint64_t rounded);
/* Keeps a freed block (of tocha_sim_map) for reuse; false when the cache is full and the
** caller is to unmap it. */
bool tocha_sim_blocks_put(int device, void *data);
/* The bytes of the cached blocks. */
uint64_t tocha_sim_blocks_cached(int device);
/* Unmaps every cached block; returns their bytes. */
uint64_t tocha_sim_blocks_empty(int device);

/* Runs run(arg) on the calling thread with memory faults caught: 0 when it returned, 1 when it
** faulted (the faulting address in *address; run stopped where it faulted). */
int tocha_sim_guarded(void (*run)(void *), void *arg, uintptr_t *address);

/* ---- sim.c: compile with the host C++ compiler ---- */
/* Of options, only the macro ones (-D, -U) are passed to the host compiler. */
int tocha_sim_compile(const char *source, const tocha_options *options, void **binary, uint64_t *size);
/* The simulator's compile options, as one string (hashed into cache keys). */
const char *tocha_sim_options(void);
/* Identity of the host compiler, e.g. "/usr/bin/c++ c++ (Debian 12.2.0-14) 12.2.0". */
int tocha_sim_compiler_identity(const char **out);

/* ---- sim_source.c ---- */
/* source with each `extern __shared__ T name[];` made a pointer to the simulator's dynamic
** shared memory, lines kept; malloc'd, NULL when out of memory. */
char *tocha_sim_rewrite_source(const char *source);

/* ---- diagnostics.c: compile failures in the kernel's own terms ---- */
/* The message for a failed compile: header, then the log's first errors at the kernel's own
** lines, each with three lines of its source and a caret, and a count of the rest; the whole
** log and unit written to TOCHA_DUMP_DIR where it is set (named by the unit's hash and tag).
** nvrtc: the log is NVRTC's, else the host compiler's. malloc'd; NULL when out of memory. */
char *tocha_compile_diagnostic(const char *header, const char *tag, const char *log, const char *unit,
                               bool nvrtc);
/* Writes data to TOCHA_DUMP_DIR/<hash of unit>-<tag>.<ext> when that is set; the path written
** in path (empty when none). */
void tocha_dump_file(const char *unit, const char *tag, const char *ext, const void *data, size_t size,
                     char *path, size_t room);

/* ---- compiler.c: the text each target compiles ---- */
/* The full translation unit for target: prelude + kernel source (+ sim launcher), each part
** under a #line directive that names it: the kernel source as `file` from its line 1, its
** generated entry point (from line entry_line of source; 0: none) as "<entry point>", tocha's
** headers by their names. malloc'd. */
char *tocha_translation_unit(const char *source, const char *file, int entry_line, const char *target,
                             const char *sim_launcher);
/* Compiles a translation unit for target, consulting no cache. */
int tocha_compile_unit(const char *unit, const char *target, const tocha_options *options, void **binary,
                       uint64_t *size);
/* Compiler identity, version and options for target, as hashed into cache keys. */
int tocha_compiler_fingerprint(const char *target, const char **out);

/* ---- cache.c ---- */
typedef struct tocha_cache_entry tocha_cache_entry;
/* The binary for (unit, target): from memory, from disk, or compiled and stored. The entry
** lives until the process ends. */
int tocha_cache_build(const char *unit, const char *target, const tocha_options *options,
                      tocha_cache_entry **out);
uint64_t tocha_cache_entry_size(const tocha_cache_entry *e);
/* The entry's binary (owned by the entry, which lives until the process ends). */
const void *tocha_cache_entry_binary(const tocha_cache_entry *e);
/* Checks a whole entry file in memory against key: 0 and the payload's place when it is valid
** (magic, schema, header size, key, payload size and payload hash), -1 otherwise. */
int tocha_cache_parse_entry(const unsigned char *data, uint64_t size, const unsigned char key[16],
                            uint64_t *payload_offset, uint64_t *payload_size);
/* Loads the entry's binary on device (once per device) and returns the entry function. An
** entry from disk that fails to load is deleted and rebuilt from unit. */
int tocha_cache_entry_function(tocha_cache_entry *e, tocha_device *d, const char *unit,
                               const tocha_options *options, const char *entry, void **function);

/* ---- device.c ---- */
/* Finds the devices once (every usable GPU, then the simulator); always TOCHA_OK. */
int tocha_devices_init(void);

/* ---- builtin.c: tocha's own tensor kernels ---- */
typedef enum {
    TOCHA_OP_FILL = 0,
    TOCHA_OP_UNIFORM,
    TOCHA_OP_NORMAL,
    TOCHA_OP_CAST,
    TOCHA_OP_COMPARE,
    TOCHA_OP_ACCUMULATE,
    TOCHA_OP_STRIDED_COPY,
    TOCHA_OP_COUNT
} tocha_builtin_op;
/* The kernel for op on dtype (and dtype2 for cast's destination; else ignored). */
int tocha_builtin_kernel(tocha_builtin_op op, int dtype, int dtype2, tocha_kernel **out);
/* The strided copy's mappings (kernels/strided_copy.cu): a unit a thread with 64-bit offsets,
** the same with 32-bit offsets and magic-number divisions, or 64 x 64 tiles through shared memory. */
typedef enum { TOCHA_COPY_ELEMENTS, TOCHA_COPY_ELEMENTS32, TOCHA_COPY_TILES } tocha_copy_mapping;
/* The strided copy's kernel for units of unit_bytes (1, 2, 4, 8 or 16; at most 8 with tiles) and
** the mapping; made once each. */
int tocha_builtin_copy_kernel(int unit_bytes, tocha_copy_mapping mapping, tocha_kernel **out);
/* A 1-D launch shape covering n elements with a grid-stride loop. */
void tocha_builtin_grid(tocha_device *d, int64_t n, uint32_t grid[3], uint32_t block[3]);

/* ---- kernel.c ---- */
/* Launch without argument checks, for callers that built args themselves (builtin ops). */
int tocha_kernel_launch_raw(tocha_kernel *k, tocha_device *d, const uint32_t grid[3],
                            const uint32_t block[3], void **args);
/* The same with shared_bytes of dynamic shared memory per CTA, unchecked (tocha_kernel_check_launch
** checks it); above 48 KiB the function is allowed the size first, once per size it grows to. */
int tocha_kernel_launch_shared(tocha_kernel *k, tocha_device *d, const uint32_t grid[3],
                               const uint32_t block[3], uint32_t shared_bytes, void **args);

/* Checks a packed argument list against k's parameters (count, kinds, integer ranges) as
** tocha_kernel_launch_packed does, and stores each argument's bytes at the start of values[i]
** (a device address, or the scalar in its parameter's type). */
int tocha_kernel_pack_values(const tocha_kernel *k, const tocha_arg_list *list,
                             uint64_t values[TOCHA_MAX_PARAMS]);
/* k's entry function on d, built through the cache and loaded on first use. */
int tocha_kernel_function(tocha_kernel *k, tocha_device *d, void **fn);
/* A grid and block within the device limits every launch checks. */
int tocha_kernel_check_dims(const uint32_t grid[3], const uint32_t block[3]);
/* A block within k's launch bounds and shared_bytes (with k's static shared memory where known)
** within d's limit for a block. */
int tocha_kernel_check_launch(tocha_kernel *k, tocha_device *d, const uint32_t block[3],
                              uint32_t shared_bytes);
/* Lets k's function fn on d launch with shared_bytes of dynamic shared memory (the device's
** allow_dynamic_shared, once per size it grows to above 48 KiB); the size is not checked. */
int tocha_kernel_allow_shared(tocha_kernel *k, tocha_device *d, void *fn, uint32_t shared_bytes);
/* target ("sm_90", or "sim" for the simulator's own) as the cache names it, checked. */
int tocha_kernel_resolve_target(const char *target, char resolved[32]);
/* k's translation unit for target (malloc'd), its options and its launch bounds' max_threads (0:
** none). */
char *tocha_kernel_unit(const tocha_kernel *k, const char *target);
const tocha_options *tocha_kernel_options(const tocha_kernel *k);
int tocha_kernel_max_threads(const tocha_kernel *k);

/* ---- readout.c: what a kernel's compiled code uses ---- */
/* A target's readout, kept with the kernel: ptxas's report and the PTX. */
typedef struct tocha_readout {
    tocha_kernel_info info;
    bool reported; /* ptxas's report was in NVRTC's log (info holds it); else only ptx and the
                      constant bytes are known */
    char *ptx;
    struct tocha_readout *next;
} tocha_readout;
/* The kernel's list of readouts (readout.c fills it). */
tocha_readout **tocha_kernel_readouts(tocha_kernel *k);
/* Frees a list of readouts (NULL ok). */
void tocha_readouts_free(tocha_readout *r);

/* ---- tensor.c ---- */
/* A tensor's device block and how many tensors (it and its views) hold it. */
struct tocha_storage {
    tocha_device *dev;
    uint64_t data, bytes;
    int64_t holders;    /* tensors and graphs that hold the block */
    int64_t live_index; /* its place in dev->live */
};
/* The block of d that holds address, or NULL. Linear in the live blocks: for captures only. */
tocha_storage *tocha_storage_find(const tocha_device *d, uint64_t address);
/* Drops one hold on s (NULL accepted); the last gives the block back. */
void tocha_storage_release(tocha_storage *s);
/* TOCHA_E_FREED or TOCHA_E_ARGUMENT (naming what) when t cannot be used: NULL, freed, or a
** view that is not contiguous (which only copies take). */
int tocha_tensor_check(const tocha_tensor *t, const char *what);
/* The same, any layout. */
int tocha_tensor_check_live(const tocha_tensor *t, const char *what);
/* Sets t's strides to dims' row-major ones and dense to 1. */
void tocha_tensor_set_dense(tocha_tensor *t);

/* ---- view.c ---- */
/* dst = src on one device, either strided (dst not aliasing); shapes and dtypes checked. */
int tocha_tensor_copy_strided(tocha_tensor *dst, const tocha_tensor *src);
/* When dst and src share bytes of one block, copies src through a dense temporary (as if every
** element of src were read before any of dst is written) and sets *handled; else does nothing
** and clears it. */
int tocha_tensor_copy_overlapping(tocha_tensor *dst, const tocha_tensor *src, bool *handled);
/* How two tensors' elements share memory: not at all, element for element (the same block,
** first element, shape and strides), or otherwise. */
typedef enum { TOCHA_OVERLAP_NONE, TOCHA_OVERLAP_SAME, TOCHA_OVERLAP_PARTIAL } tocha_overlap;
tocha_overlap tocha_tensor_overlap(const tocha_tensor *a, const tocha_tensor *b);

#endif
