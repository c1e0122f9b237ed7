// mbarrier.cuh: shared-memory barriers that threads arrive at and wait on by phase, sm_90's
// mbarrier, behind functions that run the same on the simulator: what lets one group of threads
// (a producer warpgroup copying tiles) hand shared memory to another (the warpgroups
// multiplying them) without stopping the whole CTA at __syncthreads. A kernel that uses them is
// built with tensor_core.cuh (cp.async, shared_address) and this file before its own source.
//
// An mbarrier is 8 bytes of shared memory (8-byte aligned) that one thread sets up with
// mbarrier_init(bar, count) before a __syncthreads; each phase completes when `count` arrivals
// have been made (mbarrier_arrive, or cp_async_arrive: an arrival made once the calling thread's
// cp.async copies so far have landed, counted against `count`), and the next phase begins.
// mbarrier_wait(bar, parity) returns once the phase of that parity (0 for the first, 1 for the
// second, then 0 again) has completed, and the writes the arrivals followed are then visible;
// waiting on parity 1 before the first phase completes returns at once (the phase before the
// first counts as complete), so that a ring of stages starts with every stage free. On the
// simulator a waiting thread lets the block's others run; a wait that can never end fails the
// launch, as it would hang a GPU.

namespace tocha
{

__device__ __forceinline__ void mbarrier_init(unsigned long long *bar, unsigned count)
{
#ifdef TOCHA_SIM
    tocha_sim::mbarrier_init(bar, count);
#else
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(bar)), "r"(count)
                 : "memory");
#endif
}

__device__ __forceinline__ void mbarrier_arrive(unsigned long long *bar)
{
#ifdef TOCHA_SIM
    tocha_sim::mbarrier_arrive(bar);
#else
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(shared_address(bar)) : "memory");
#endif
}

// An arrival once this thread's cp.async copies started so far have landed (noinc: it counts
// against the barrier's count like any other arrival).
__device__ __forceinline__ void cp_async_arrive(unsigned long long *bar)
{
#ifdef TOCHA_SIM
    tocha_sim::mbarrier_arrive(bar); // the simulator's copies have landed already
#else
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(shared_address(bar))
                 : "memory");
#endif
}

__device__ __forceinline__ void mbarrier_wait(unsigned long long *bar, unsigned parity)
{
#ifdef TOCHA_SIM
    tocha_sim::mbarrier_wait(bar, parity);
#else
    // try_wait (sm_90) lets the hardware suspend the thread a while; test_wait only looks
#if __CUDA_ARCH__ >= 900
#define TOCHA_MBARRIER_TEST "mbarrier.try_wait.parity.shared::cta.b64"
#else
#define TOCHA_MBARRIER_TEST "mbarrier.test_wait.parity.shared::cta.b64"
#endif
    const unsigned address = shared_address(bar);
    unsigned done = 0;
    while (!done)
        asm volatile("{.reg .pred p; " TOCHA_MBARRIER_TEST " p, [%1], %2; selp.u32 %0, 1, 0, p;}"
                     : "=r"(done)
                     : "r"(address), "r"(parity)
                     : "memory");
#undef TOCHA_MBARRIER_TEST
#endif
}

} // namespace tocha
