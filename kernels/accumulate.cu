// accumulate.cu: acc[i] = (first ? 0 : acc[i]) + g[i], acc in f32 (or f64 for f64 gradients),
// g of any float dtype: the sum of the gradients a tensor receives from each of its readers,
// kept in f32 whatever their dtype (a model's fan-out sums).
template <typename A, typename G>
__device__ void tocha_accumulate(A *acc, const G *g, long long n, int first)
{
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        A v = tocha::convert<A>(g[i]);
        acc[i] = first ? v : acc[i] + v;
    }
}
