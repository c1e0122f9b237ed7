// tocha_sim.h: the CUDA built-ins for the CPU simulator.
// The simulator compiles a kernel's own source with the host C++ compiler; this header makes
// the subset tocha's kernels use mean the same on the host. Threads of a block run one after
// another on one host thread, so there is no __syncthreads() and no warp intrinsic here: a
// kernel that needs them gives the simulator its own path under #ifdef TOCHA_SIM.
#include <vector_types.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <algorithm>
#include <vector>

#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __launch_bounds__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)

static thread_local uint3 threadIdx;
static thread_local uint3 blockIdx;
static thread_local dim3 blockDim;
static thread_local dim3 gridDim;

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

namespace tocha_sim {
// The launch's dynamic shared memory in bytes: only a size here, which a kernel reads to know
// what the launch gave it (tocha::dynamic_shared_bytes()).
static thread_local unsigned dynamic_shared;

// A buffer of at least `bytes` for the shared memory of the one warp that runs at a time on
// this host thread (tocha::warp_shared_slots()), 128-byte aligned.
inline void *shared_buffer(size_t bytes)
{
    static thread_local std::vector<uint4> slots;
    const size_t n = bytes / sizeof(uint4) + 8;
    if (slots.size() < n) slots.resize(n);
    return (void *)(((uintptr_t)slots.data() + 127u) & ~(uintptr_t)127u);
}

// Runs blocks [first, last) of the grid, each thread of a block in turn.
template <typename Body>
inline void run(const unsigned *grid, const unsigned *block, unsigned shared_bytes,
                unsigned long long first, unsigned long long last, Body body)
{
    dynamic_shared = shared_bytes;
    gridDim = dim3(grid[0], grid[1], grid[2]);
    blockDim = dim3(block[0], block[1], block[2]);
    for (unsigned long long b = first; b < last; ++b) {
        blockIdx.x = (unsigned)(b % grid[0]);
        blockIdx.y = (unsigned)(b / grid[0] % grid[1]);
        blockIdx.z = (unsigned)(b / ((unsigned long long)grid[0] * grid[1]));
        for (unsigned z = 0; z < block[2]; ++z)
            for (unsigned y = 0; y < block[1]; ++y)
                for (unsigned x = 0; x < block[0]; ++x) {
                    threadIdx.x = x;
                    threadIdx.y = y;
                    threadIdx.z = z;
                    body();
                }
    }
}
} // namespace tocha_sim
