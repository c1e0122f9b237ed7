// random.cu: counter-based random fills. Element i is a function of (seed, i) alone, through
// Philox-4x32-10 (Salmon et al., SC'11), so that every device and every grid gives the same
// tensor for a seed. Uniform values take 53 random bits; normal values use Box-Muller.
// Integer dtypes take floor() of uniform values and round normal ones. Uniform values are
// bit-identical on every device; normal ones differ by the last bits of log() and cos().

__device__ __forceinline__ void tocha_philox(unsigned long long counter, unsigned long long seed,
                                             unsigned out[4])
{
    unsigned c0 = (unsigned)counter, c1 = (unsigned)(counter >> 32), c2 = 0, c3 = 0;
    unsigned k0 = (unsigned)seed, k1 = (unsigned)(seed >> 32);
    for (int round = 0; round < 10; ++round) {
        const unsigned hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
        const unsigned hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

// A double in [0, 1) from 53 bits of two words.
__device__ __forceinline__ double tocha_unit(unsigned a, unsigned b)
{
    return (double)(((unsigned long long)(a >> 5) << 26) | (b >> 6)) * (1.0 / 9007199254740992.0);
}

template <typename D>
__device__ void tocha_uniform(D *y, long long n, unsigned long long seed, double low, double high)
{
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        unsigned r[4];
        tocha_philox((unsigned long long)i, seed, r);
        // Explicit rounding: a fused multiply-add here would differ from the simulator.
        double v = __dadd_rn(low, __dmul_rn(__dsub_rn(high, low), tocha_unit(r[0], r[1])));
        if (tocha::is_integer<D>::value) v = floor(v);
        y[i] = tocha::from_double<D>(v);
    }
}

template <typename D>
__device__ void tocha_normal(D *y, long long n, unsigned long long seed, double mean, double std)
{
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        unsigned r[4];
        tocha_philox((unsigned long long)i, seed, r);
        const double u1 = 1.0 - tocha_unit(r[0], r[1]); // (0, 1]: log() stays finite
        const double u2 = tocha_unit(r[2], r[3]);
        double v = mean + std * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
        if (tocha::is_integer<D>::value) v = rint(v);
        y[i] = tocha::from_double<D>(v);
    }
}
