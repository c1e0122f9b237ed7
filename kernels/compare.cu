// compare.cu: elementwise comparison of a with b in f64, one partial result per thread.
// Each thread of the grid-stride loop keeps its own max |a-b|, max relative difference,
// mismatch count and first mismatch; the host reduces those few thousand partials. This keeps
// the kernel inside the simulator's portable subset (no shared memory, no atomics).
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
    max_abs[t] = worst_abs;
    max_rel[t] = worst_rel;
    mismatched[t] = bad;
    first_mismatch[t] = first;
}
