// fill.cu: y[i] = value for every element, value converted as tocha::convert does.
// A grid-stride loop, so any n is covered by any grid.
template <typename D>
__device__ void tocha_fill(D *y, long long n, double value)
{
    const D v = tocha::from_double<D>(value);
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = v;
}
