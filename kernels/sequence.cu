// sequence.cu: tensors whose elements follow from their positions alone: arange's and
// linspace's evenly spaced values and eye's identity matrix. Grid-stride loops, so any n is
// covered by any grid.

// y[i] = start + i * step for i < n. Integer dtypes take istart + i * istep in 64-bit integer
// arithmetic (exact over i64's whole range, which a double is not past 2^53; the product in
// unsigned words, so that a product past i64 whose sum fits wraps back without signed overflow); floats compute
// in f64 and round once to D. The multiply and the add are rounded each (no fused multiply-add,
// which the GPU's compiler would otherwise make and the simulator's host compiler might not), so
// that every device gives the same bits.
template <typename D>
__device__ void tocha_arange(D *y, long long n, double start, double step, long long istart, long long istep)
{
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        if (tocha::is_integer<D>::value)
            y[i] = (D)(istart + (long long)((unsigned long long)i * (unsigned long long)istep));
        else
            y[i] = tocha::from_double<D>(__dadd_rn(start, __dmul_rn((double)i, step)));
    }
}

// n values from start to stop evenly spaced (n >= 2; n == 1 gives start): the first half
// counted up from start and the second down from stop, as PyTorch's linspace, so that both ends
// are exact and the values are symmetric about the middle. f64 arithmetic without fused
// multiply-adds (as arange's), one rounding to D (integer dtypes truncate toward zero, as a
// cast does).
template <typename D>
__device__ void tocha_linspace(D *y, long long n, double start, double stop)
{
    const double step = n > 1 ? (stop - start) / (double)(n - 1) : 0.0;
    const long long half = n / 2;
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const double v = (i < half || n == 1) ? __dadd_rn(start, __dmul_rn((double)i, step))
                                  : __dsub_rn(stop, __dmul_rn((double)(n - 1 - i), step));
        y[i] = tocha::from_double<D>(v);
    }
}

// The rows x cols identity: 1 where row == column, else 0, row-major.
template <typename D>
__device__ void tocha_eye(D *y, long long rows, long long cols)
{
    const long long n = rows * cols;
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = tocha::from_double<D>(i / cols == i % cols ? 1.0 : 0.0);
}
