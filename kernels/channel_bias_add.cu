// channel_bias_add.cu: y = x + bias[c] for x viewed as [batch, channels, plane] (NCHW's
// channels, plane = H * W), computed in f32 for f16 and bf16, f64 for f64. Where the plane is a
// whole number of 16-byte vectors and x and y are 16-byte aligned, a thread reads and writes one
// vector (one channel's); else one element. The backward is tocha_reduce's (reduction.cu): dx = dy
// copied while the bias gradient is summed over batch and plane.

template <typename T>
__device__ void tocha_channel_bias_add(const T *x, const T *bias, T *y, long long total, long long channels, long long plane)
{
    typedef typename tocha::compute<T>::type A;
    const long long stride = (long long)blockDim.x * gridDim.x, first = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const int V = tocha::vec16<T>::n;
    if (plane % V == 0 && (((unsigned long long)x | (unsigned long long)y) & 15u) == 0) {
        for (long long v = first; v < total / V; v += stride) {
            const long long e = v * V;
            const A b = tocha::to_compute(bias[(e / plane) % channels]);
            unsigned w[4];
            tocha::load_words<16>(x + e, w);
            tocha::pack16<T> out;
#pragma unroll
            for (int j = 0; j < V; ++j)
                out.set(j, tocha::from_compute<T>(tocha::to_compute(tocha::element_of<T>(w, j)) + b));
            tocha::store_pack(y + e, out);
        }
        return;
    }
    for (long long e = first; e < total; e += stride)
        y[e] = tocha::from_compute<T>(tocha::to_compute(x[e]) + tocha::to_compute(bias[(e / plane) % channels]));
}
