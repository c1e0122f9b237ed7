// atomics.h: CUDA's atomic functions on the simulator, for the types CUDA gives them. Blocks run
// on several host threads at once, so every one is a real atomic of the host (a compare-and-swap
// loop where the host has no instruction for it); each returns the old value, as on a GPU.
// Each is also a point where a thread that spins lets the block's other threads run
// (fibers.h's spin_point). The _block and _system forms are the same functions here.
namespace tocha_sim {

template <typename T> static inline T atomic_load_bits(T *p) { tocha_sim::spin_point(); return __atomic_load_n(p, __ATOMIC_RELAXED); }

// Replaces *p by f(*p) atomically; returns the old value. T is the storage (an unsigned integer of
// the element's size), V the element, f works on V.
template <typename V, typename T, typename F> static inline V atomic_update(V *address, F f)
{
    static_assert(sizeof(V) == sizeof(T), "storage and element differ in size");
    spin_point();
    T *p = (T *)(void *)address;
    T old = atomic_load_bits(p), next;
    V v;
    do {
        memcpy(&v, &old, sizeof v);
        const V n = f(v);
        memcpy(&next, &n, sizeof next);
    } while (!__atomic_compare_exchange_n(p, &old, next, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
    memcpy(&v, &old, sizeof v);
    return v;
}

// f32 atomic adds on global memory flush subnormal inputs and results to zero of the same sign,
// as the GPU's do (measured on the H200); on shared memory they keep them.
static inline float flush_subnormal(float x) { return fabsf(x) < 1.17549435e-38f ? copysignf(0.0f, x) : x; }
} // namespace tocha_sim

#define TOCHA_SIM_INTEGER_ATOMICS(T)                                                                              \
    static inline T atomicAdd(T *p, T v) { tocha_sim::spin_point(); return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }                   \
    static inline T atomicExch(T *p, T v) { tocha_sim::spin_point(); return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }                 \
    static inline T atomicCAS(T *p, T compare, T v)                                                               \
    {                                                                                                             \
        tocha_sim::spin_point();                                                                                  \
        __atomic_compare_exchange_n(p, &compare, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                   \
        return compare;                                                                                           \
    }                                                                                                             \
    static inline T atomicAnd(T *p, T v) { tocha_sim::spin_point(); return __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST); }                   \
    static inline T atomicOr(T *p, T v) { tocha_sim::spin_point(); return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }                     \
    static inline T atomicXor(T *p, T v) { tocha_sim::spin_point(); return __atomic_fetch_xor(p, v, __ATOMIC_SEQ_CST); }                   \
    static inline T atomicMin(T *p, T v)                                                                          \
    {                                                                                                             \
        return tocha_sim::atomic_update<T, T>(p, [v](T o) { return v < o ? v : o; });                            \
    }                                                                                                             \
    static inline T atomicMax(T *p, T v)                                                                          \
    {                                                                                                             \
        return tocha_sim::atomic_update<T, T>(p, [v](T o) { return v > o ? v : o; });                            \
    }
TOCHA_SIM_INTEGER_ATOMICS(int)
TOCHA_SIM_INTEGER_ATOMICS(unsigned int)
TOCHA_SIM_INTEGER_ATOMICS(unsigned long long)
#undef TOCHA_SIM_INTEGER_ATOMICS

static inline int atomicSub(int *p, int v) { tocha_sim::spin_point(); return __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST); }
static inline unsigned int atomicSub(unsigned int *p, unsigned int v) { tocha_sim::spin_point(); return __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST); }
static inline long long atomicMin(long long *p, long long v)
{
    return tocha_sim::atomic_update<long long, long long>(p, [v](long long o) { return v < o ? v : o; });
}
static inline long long atomicMax(long long *p, long long v)
{
    return tocha_sim::atomic_update<long long, long long>(p, [v](long long o) { return v > o ? v : o; });
}
static inline unsigned short atomicCAS(unsigned short *p, unsigned short compare, unsigned short v)
{
    tocha_sim::spin_point();
    __atomic_compare_exchange_n(p, &compare, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return compare;
}
// ((old >= v) ? 0 : old + 1) and (((old == 0) || (old > v)) ? v : old - 1), as CUDA defines them.
static inline unsigned int atomicInc(unsigned int *p, unsigned int v)
{
    return tocha_sim::atomic_update<unsigned, unsigned>(p, [v](unsigned o) { return o >= v ? 0u : o + 1u; });
}
static inline unsigned int atomicDec(unsigned int *p, unsigned int v)
{
    return tocha_sim::atomic_update<unsigned, unsigned>(p, [v](unsigned o) { return o == 0u || o > v ? v : o - 1u; });
}
static inline float atomicExch(float *p, float v)
{
    return tocha_sim::atomic_update<float, unsigned>(p, [v](float) { return v; });
}
static inline float atomicAdd(float *p, float v)
{
    if (tocha_sim::is_shared(p)) return tocha_sim::atomic_update<float, unsigned>(p, [v](float o) { return o + v; });
    return tocha_sim::atomic_update<float, unsigned>(
        p, [v](float o) { return tocha_sim::flush_subnormal(tocha_sim::flush_subnormal(o) + tocha_sim::flush_subnormal(v)); });
}
static inline double atomicAdd(double *p, double v)
{
    return tocha_sim::atomic_update<double, unsigned long long>(p, [v](double o) { return o + v; });
}
static inline __half atomicAdd(__half *p, __half v)
{
    return tocha_sim::atomic_update<__half, unsigned short>(p, [v](__half o) { return __float2half_rn(__half2float(o) + __half2float(v)); });
}
static inline __nv_bfloat16 atomicAdd(__nv_bfloat16 *p, __nv_bfloat16 v)
{
    return tocha_sim::atomic_update<__nv_bfloat16, unsigned short>(
        p, [v](__nv_bfloat16 o) { return __float2bfloat16_rn(__bfloat162float(o) + __bfloat162float(v)); });
}
// The pair forms are atomic for each half of the pair (as on a GPU: not for the pair as a whole).
static inline __half2 atomicAdd(__half2 *p, __half2 v)
{
    __half *h = (__half *)(void *)p;
    __half2 old;
    old.x = atomicAdd(h, v.x);
    old.y = atomicAdd(h + 1, v.y);
    return old;
}
static inline __nv_bfloat162 atomicAdd(__nv_bfloat162 *p, __nv_bfloat162 v)
{
    __nv_bfloat16 *h = (__nv_bfloat16 *)(void *)p;
    __nv_bfloat162 old;
    old.x = atomicAdd(h, v.x);
    old.y = atomicAdd(h + 1, v.y);
    return old;
}

// A thread that sleeps waits for another: the others run first.
static inline void __nanosleep(unsigned int)
{
    if (tocha_sim::team.running) tocha_sim::pass_on(tocha_sim::team.f[tocha_sim::team.current]);
}

#define atomicAdd_block atomicAdd
#define atomicAdd_system atomicAdd
#define atomicSub_block atomicSub
#define atomicSub_system atomicSub
#define atomicExch_block atomicExch
#define atomicExch_system atomicExch
#define atomicMin_block atomicMin
#define atomicMin_system atomicMin
#define atomicMax_block atomicMax
#define atomicMax_system atomicMax
#define atomicInc_block atomicInc
#define atomicInc_system atomicInc
#define atomicDec_block atomicDec
#define atomicDec_system atomicDec
#define atomicCAS_block atomicCAS
#define atomicCAS_system atomicCAS
#define atomicAnd_block atomicAnd
#define atomicAnd_system atomicAnd
#define atomicOr_block atomicOr
#define atomicOr_system atomicOr
#define atomicXor_block atomicXor
#define atomicXor_system atomicXor
