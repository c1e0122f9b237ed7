// cast.cu: y[i] = convert<D>(x[i]); the rules are tocha::convert's (tocha.cuh).
template <typename S, typename D>
__device__ void tocha_cast(const S *x, D *y, long long n)
{
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = tocha::convert<D>(x[i]);
}
