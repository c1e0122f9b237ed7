// tocha_sim.h: the CUDA built-ins for the CPU simulator.
// The simulator compiles a kernel's own source with the host C++ compiler behind this header
// and the ones after it (fibers.h: threads and barriers; warp.h: warp operations; atomics.h;
// cooperative_groups.h; wmma.h; tensor_core.h), so that the same CUDA C means the same on the
// host. A block's threads run on one host thread: one after another when the kernel never
// synchronises, else as fibers switched wherever a thread must wait for others (fibers.h).
// __shared__ variables are per host thread, so the threads of one block share them.
#ifdef _FORTIFY_SOURCE
#undef _FORTIFY_SOURCE // its longjmp check refuses the jumps between fibers' stacks
#endif
#include <vector_types.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <algorithm>
#include <type_traits>
#include <vector>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <atomic>
#include <assert.h>
#include <sys/mman.h>
#include <link.h>
#include <ucontext.h>

#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __launch_bounds__
#undef __shared__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
#define __shared__ static thread_local

static thread_local uint3 threadIdx;
static thread_local uint3 blockIdx;
static thread_local dim3 blockDim;
static thread_local dim3 gridDim;
static const int warpSize = 32;

using std::max;
using std::min;

static inline unsigned int __umulhi(unsigned int a, unsigned int b)
{
    return (unsigned int)(((unsigned long long)a * b) >> 32);
}
template <typename T> static inline T __ldg(const T *p) { return *p; }
// Byte n of the result is byte (s >> 4n) & 7 of the eight bytes y:x (x the low four).
static inline unsigned int __byte_perm(unsigned int x, unsigned int y, unsigned int s)
{
    const unsigned long long v = ((unsigned long long)y << 32) | x;
    unsigned int r = 0;
    for (int n = 0; n < 4; ++n) r |= (unsigned int)((v >> (8 * ((s >> (4 * n)) & 7u))) & 0xffu) << (8 * n);
    return r;
}
// The 64 bits hi:lo shifted right by shift % 32, low word.
static inline unsigned int __funnelshift_r(unsigned int lo, unsigned int hi, unsigned int shift)
{
    return (unsigned int)((((unsigned long long)hi << 32) | lo) >> (shift & 31u));
}
// The host compiler does not contract a * b + c unless asked to, so these are plain.
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __dmul_rn(double a, double b) { return a * b; }

static inline int __popc(unsigned int x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
static inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned int __brev(unsigned int x)
{
    x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
    x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
    x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
    x = ((x >> 8) & 0x00ff00ffu) | ((x & 0x00ff00ffu) << 8);
    return (x >> 16) | (x << 16);
}
static inline int __mul24(int a, int b) { return (int)((long long)(a << 8 >> 8) * (b << 8 >> 8)); }
static inline unsigned int __umul24(unsigned int a, unsigned int b) { return (a & 0xffffffu) * (b & 0xffffffu); }
static inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
static inline int __float_as_int(float x) { int i; memcpy(&i, &x, 4); return i; }
static inline unsigned int __float_as_uint(float x) { unsigned int i; memcpy(&i, &x, 4); return i; }
static inline float __int_as_float(int i) { float x; memcpy(&x, &i, 4); return x; }
static inline float __uint_as_float(unsigned int i) { float x; memcpy(&x, &i, 4); return x; }
static inline long long __double_as_longlong(double x) { long long i; memcpy(&i, &x, 8); return i; }
static inline double __longlong_as_double(long long i) { double x; memcpy(&x, &i, 8); return x; }
static inline float __saturatef(float x) { return x != x ? 0.0f : x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
// The fast and the explicitly rounded float intrinsics, computed here as the host's correctly
// rounded float operations (the GPU's fast forms are within a few ulps of them; the _rn forms
// are the same IEEE operations).
// (glibc's math.h declares its own __expf and the like, so these are macros)
#define __expf(x) expf(x)
#define __exp10f(x) exp10f(x)
#define __logf(x) logf(x)
#define __log2f(x) log2f(x)
#define __log10f(x) log10f(x)
#define __powf(a, b) powf(a, b)
#define __sinf(x) sinf(x)
#define __cosf(x) cosf(x)
#define __tanf(x) tanf(x)
#define __sincosf(x, s, c) sincosf(x, s, c)
static inline float __fdividef(float a, float b) { return a / b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __frcp_rn(float x) { return 1.0f / x; }
static inline float __fsqrt_rn(float x) { return sqrtf(x); }
static inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
static inline double __drcp_rn(double x) { return 1.0 / x; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline double __dsqrt_rn(double x) { return sqrt(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
// Memory fences: the host's, which order at least as strongly as the GPU's.
static inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
static inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }
static inline void __threadfence_system() { std::atomic_thread_fence(std::memory_order_seq_cst); }
static inline long long clock64()
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

namespace tocha_sim {
// The launch's dynamic shared memory in bytes.
static thread_local unsigned dynamic_shared;

// The dynamic shared memory of the block running on this host thread: one region per host
// thread, as large as a GPU's largest (227 KiB on sm_90), mapped once and kept, so that a
// pointer to it stays valid for every block the thread runs. The simulator compiles each
// `extern __shared__ T name[];` as a pointer to it. Only the launch's bytes (rounded up to
// whole pages) can be touched: past them the pages are mapped without access, so that a
// kernel reading beyond what its launch gave faults as on a GPU (a fault the launch reports).
constexpr size_t DYNAMIC_SHARED_MAX = 227 * 1024;
static thread_local void *dynamic_region;
static thread_local size_t dynamic_open; // bytes of the region open to the kernel
inline void *dynamic_shared_memory()
{
    if (!dynamic_region) {
        void *p = mmap(nullptr, DYNAMIC_SHARED_MAX, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        dynamic_region = p == MAP_FAILED ? nullptr : p;
        dynamic_open = 0;
    }
    return dynamic_region;
}
// Opens the first `bytes` of the region (whole pages) and closes the rest; false when the
// region cannot be had or is smaller.
inline bool open_dynamic_shared(size_t bytes)
{
    char *base = (char *)dynamic_shared_memory();
    if (!base || bytes > DYNAMIC_SHARED_MAX) return false;
    const size_t page = 4096, want = (bytes + page - 1) / page * page;
    if (want == dynamic_open) return true;
    if (want > dynamic_open) mprotect(base + dynamic_open, want - dynamic_open, PROT_READ | PROT_WRITE);
    else mprotect(base + want, dynamic_open - want, PROT_NONE);
    dynamic_open = want;
    return true;
}

// Whether p is shared memory: in this module's thread-local block on the calling thread (where
// static __shared__ variables live) or in the dynamic shared memory region.
struct address_range {
    uintptr_t lo, hi;
};
static thread_local address_range static_shared;
static int find_own_tls(struct dl_phdr_info *info, size_t, void *data)
{
    const uintptr_t self = (uintptr_t)&find_own_tls;
    bool mine = false;
    size_t tls_size = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) &ph = info->dlpi_phdr[i];
        const uintptr_t start = info->dlpi_addr + ph.p_vaddr;
        if (ph.p_type == PT_LOAD && self >= start && self < start + ph.p_memsz) mine = true;
        if (ph.p_type == PT_TLS) tls_size = ph.p_memsz;
    }
    if (!mine) return 0;
    address_range *r = (address_range *)data;
    r->lo = (uintptr_t)info->dlpi_tls_data;
    r->hi = r->lo + tls_size;
    return 1;
}
inline bool is_shared(const void *p)
{
    const uintptr_t a = (uintptr_t)p;
    if (!static_shared.hi) dl_iterate_phdr(find_own_tls, &static_shared);
    if (a >= static_shared.lo && a < static_shared.hi) return true;
    const uintptr_t d = (uintptr_t)dynamic_region;
    return dynamic_region && a >= d && a < d + DYNAMIC_SHARED_MAX;
}
} // namespace tocha_sim
