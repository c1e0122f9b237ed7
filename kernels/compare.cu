// compare.cu: elementwise comparison of a with b in f64, one partial result per block.
// Each thread of the grid-stride loop keeps its own max |a-b|, max relative difference,
// mismatch count and first mismatch; the block combines its threads' in shared memory (a tree
// over blockDim.x, a power of two up to 256), and the host reduces the blocks' few thousand.
template <typename D>
__device__ void tocha_compare(const D *a, const D *b, long long n, double rtol, double atol,
                              double *max_abs, double *max_rel, long long *mismatched,
                              long long *first_mismatch)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)blockDim.x * gridDim.x;
    double worst_abs = 0.0, worst_rel = 0.0;
    long long bad = 0, first = -1;
    for (long long i = t; i < n; i += stride) {
        const double x = tocha::to_double(a[i]), y = tocha::to_double(b[i]);
        bool ok;
        if (x != x || y != y) {
            ok = (x != x) && (y != y);
        } else if (x == y) {
            ok = true;
        } else {
            const double diff = fabs(x - y);
            if (diff <= 1.7976931348623157e308) { // finite: not NaN, not inf
                worst_abs = fmax(worst_abs, diff);
                worst_rel = fmax(worst_rel, diff / fmax(fabs(y), 1e-300));
            }
            ok = diff <= atol + rtol * fabs(y);
        }
        if (!ok) {
            if (first < 0) first = i;
            ++bad;
        }
    }
    __shared__ double block_abs[256], block_rel[256];
    __shared__ long long block_bad[256], block_first[256];
    const unsigned i = threadIdx.x;
    block_abs[i] = worst_abs;
    block_rel[i] = worst_rel;
    block_bad[i] = bad;
    block_first[i] = first;
    __syncthreads();
    for (unsigned o = blockDim.x / 2; o > 0; o /= 2) {
        if (i < o) {
            block_abs[i] = fmax(block_abs[i], block_abs[i + o]);
            block_rel[i] = fmax(block_rel[i], block_rel[i + o]);
            block_bad[i] += block_bad[i + o];
            const long long other = block_first[i + o];
            if (other >= 0 && (block_first[i] < 0 || other < block_first[i])) block_first[i] = other;
        }
        __syncthreads();
    }
    if (i == 0) {
        max_abs[blockIdx.x] = block_abs[0];
        max_rel[blockIdx.x] = block_rel[0];
        mismatched[blockIdx.x] = block_bad[0];
        first_mismatch[blockIdx.x] = block_first[0];
    }
}
