// tocha_sim.h: the CUDA built-ins for the CPU simulator.
// The simulator compiles a kernel's own source with the host C++ compiler; this header makes
// the subset tocha's kernels use mean the same on the host. A block's threads run on one host
// thread: one after another when the kernel has no barrier, else as fibers (each with a stack
// of its own) switched at every __syncthreads, so that a barrier means what it means on the
// GPU: no thread passes it before every thread of the block has reached it. __shared__
// variables are per host thread, so the threads of one block share them.
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
#include <vector>
#include <setjmp.h>
#include <stdio.h>
#include <sys/mman.h>
#include <ucontext.h>

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
#define __shared__ static thread_local

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

// ---- a block's threads as fibers ----

constexpr unsigned MAX_THREADS = 1024;
constexpr size_t FIBER_STACK = 64 * 1024;

struct fiber {
    jmp_buf context;
    void *stack;
    int state;    // RUNNABLE, AT_BARRIER or RETURNED
    int barrier;  // which barrier it waits at (its __LINE__ in the unit)
    int value;    // the predicate it gave a counting barrier
};
enum { RUNNABLE, AT_BARRIER, RETURNED };

// The fibers of the block running on this host thread. Each fiber runs blocks' threads one
// after another in a loop (body, then back to the scheduler), so that it is made once per host
// thread; one left in the middle of a thread (a fault, a barrier error) is made again.
struct fibers {
    fiber *f = nullptr;
    unsigned made = 0;   // fibers whose context is ready
    unsigned making = 0; // the fiber being made
    unsigned current = 0;
    bool clean = true;   // false while a block runs
    jmp_buf scheduler;
    void (*body)(void *) = nullptr;
    void *arg = nullptr;
    int result = 0;      // what the last counting barrier returns
    ~fibers()
    {
        if (!f) return;
        for (unsigned i = 0; i < MAX_THREADS; ++i)
            if (f[i].stack) munmap(f[i].stack, FIBER_STACK);
        delete[] f;
    }
};
static thread_local fibers team;

static void fiber_main()
{
    fiber *self = &team.f[team.making];
    if (!_setjmp(self->context)) _longjmp(team.scheduler, 1);
    for (;;) {
        team.body(team.arg);
        self->state = RETURNED;
        if (!_setjmp(self->context)) _longjmp(team.scheduler, 1);
    }
}

// Makes fibers [team.made, n): false when a stack cannot be had.
static bool make_fibers(unsigned n)
{
    if (!team.f) team.f = new fiber[MAX_THREADS]();
    for (unsigned i = team.made; i < n; ++i) {
        fiber &f = team.f[i];
        if (!f.stack) {
            void *p = mmap(nullptr, FIBER_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (p == MAP_FAILED) return false;
            f.stack = p;
        }
        ucontext_t start;
        getcontext(&start);
        start.uc_stack.ss_sp = f.stack;
        start.uc_stack.ss_size = FIBER_STACK;
        start.uc_link = nullptr;
        makecontext(&start, fiber_main, 0);
        team.making = i;
        if (!_setjmp(team.scheduler)) setcontext(&start);
        team.made = i + 1;
    }
    return true;
}

// The barrier: the calling fiber waits at `barrier` until every thread of the block has
// reached it; returns how many gave a true value.
static inline int barrier(int at, int value)
{
    fiber &f = team.f[team.current];
    f.state = AT_BARRIER;
    f.barrier = at;
    f.value = value;
    if (!_setjmp(f.context)) _longjmp(team.scheduler, 1);
    return team.result;
}

// Runs the block's n threads as fibers; false, with the reason in error, when a barrier cannot
// be passed (threads that returned or wait elsewhere).
template <typename Body>
static bool run_block_fibers(Body &body, const unsigned *block, unsigned n, char *error, size_t size)
{
    if (!team.clean) team.made = 0; // fibers left mid-thread: make them again
    if (team.made < n && !make_fibers(n)) {
        snprintf(error, size, "sim: no memory for the stacks of %u threads", n);
        return false;
    }
    team.clean = false;
    team.body = [](void *a) { (*(Body *)a)(); };
    team.arg = &body;
    for (unsigned i = 0; i < n; ++i) team.f[i].state = RUNNABLE;
    for (;;) {
        for (unsigned i = 0; i < n; ++i) {
            fiber &f = team.f[i];
            if (f.state != RUNNABLE) continue;
            threadIdx.x = i % block[0];
            threadIdx.y = i / block[0] % block[1];
            threadIdx.z = i / (block[0] * block[1]);
            team.current = i;
            if (!_setjmp(team.scheduler)) _longjmp(f.context, 1);
        }
        unsigned waiting = 0, count = 0, other = 0;
        int at = 0;
        for (unsigned i = 0; i < n; ++i) {
            const fiber &f = team.f[i];
            if (f.state != AT_BARRIER) continue;
            if (waiting++ == 0) at = f.barrier;
            else if (f.barrier != at) other++;
            count += f.value != 0;
        }
        if (waiting == 0) break;
        if (waiting < n || other) {
            if (waiting < n)
                snprintf(error, size, "__syncthreads: %u of the block's %u threads wait at a barrier that the "
                         "other %u returned without reaching (block %u, %u, %u): on a GPU it hangs or goes wrong",
                         waiting, n, n - waiting, blockIdx.x, blockIdx.y, blockIdx.z);
            else
                snprintf(error, size, "__syncthreads: the block's threads wait at different barriers (block %u, %u, "
                         "%u): on a GPU it hangs or goes wrong", blockIdx.x, blockIdx.y, blockIdx.z);
            team.made = 0; // fibers left mid-thread
            team.clean = true;
            return false;
        }
        team.result = (int)count;
        for (unsigned i = 0; i < n; ++i) team.f[i].state = RUNNABLE;
    }
    team.clean = true;
    return true;
}

// Runs blocks [first, last) of the grid: each thread of a block in turn, or, for a kernel with
// barriers, as fibers. false, with the reason in error (a string of `size` bytes), when a block
// could not finish.
template <bool Barriers, typename Body>
inline bool run(const unsigned *grid, const unsigned *block, unsigned shared_bytes,
                unsigned long long first, unsigned long long last, char *error, size_t size, Body body)
{
    dynamic_shared = shared_bytes;
    gridDim = dim3(grid[0], grid[1], grid[2]);
    blockDim = dim3(block[0], block[1], block[2]);
    const unsigned n = block[0] * block[1] * block[2];
    for (unsigned long long b = first; b < last; ++b) {
        blockIdx.x = (unsigned)(b % grid[0]);
        blockIdx.y = (unsigned)(b / grid[0] % grid[1]);
        blockIdx.z = (unsigned)(b / ((unsigned long long)grid[0] * grid[1]));
        if (Barriers) {
            if (!run_block_fibers(body, block, n, error, size)) return false;
            continue;
        }
        for (unsigned z = 0; z < block[2]; ++z)
            for (unsigned y = 0; y < block[1]; ++y)
                for (unsigned x = 0; x < block[0]; ++x) {
                    threadIdx.x = x;
                    threadIdx.y = y;
                    threadIdx.z = z;
                    body();
                }
    }
    return true;
}
} // namespace tocha_sim

#define __syncthreads() ((void)tocha_sim::barrier(__LINE__, 0))
#define __syncthreads_count(p) tocha_sim::barrier(__LINE__, (p) != 0)
#define __syncthreads_and(p) (tocha_sim::barrier(__LINE__, (p) != 0) == (int)(blockDim.x * blockDim.y * blockDim.z))
#define __syncthreads_or(p) (tocha_sim::barrier(__LINE__, (p) != 0) != 0)
