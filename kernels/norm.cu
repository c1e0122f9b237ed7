// norm.cu: layer, RMS and group normalisation, forward and backward. x is viewed as `rows`
// rows of n elements, each normalised on its own: layer norm over the last dimensions (a row a
// normalised shape), group norm over a group of channels of one sample (a row = C / G channels
// x the plane). The affine parameter of element j of row r is p = ((r % G) * n + j) / HW: j for
// layer norm (G = HW = 1), the channel for group norm (HW the plane). RMS (1: RMS norm, no
// mean) and AFFINE (0 none, 1 weight, 2 weight and bias) are compile-time constants; halves
// compute in f32.
//
// Forward: y = (x - mean) * rstd * w + b, rstd = 1 / sqrt(var + eps) (biased variance; RMS
// norm: mean 0 and var the mean square). A warp a row (rows 32) or a CTA a row (rows -1), the
// host choosing by n; the row is read three times (mean, variance from it, output), the later
// reads from cache.
// Backward, two launches of one kernel: phase 0, a row as above, recomputes the row's mean and
// rstd (kept in the workspace `stats`) and writes dx = rstd (g - mean(g) - xhat mean(g xhat))
// with g = dy w and xhat = (x - mean) rstd (RMS: without the mean(g) term); phase 1, a thread a
// parameter, sums dw = sum(dy xhat) and db = sum(dy) over the elements that use it.

__device__ __forceinline__ float nm_rsqrt(float v) { return 1.0f / sqrtf(v); }
__device__ __forceinline__ double nm_rsqrt(double v) { return 1.0 / sqrt(v); }

template <typename A> __device__ __forceinline__ A nm_team_sum(A v, bool cta)
{
    for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (!cta) return v;
    __shared__ A part[32];
    const unsigned lane = threadIdx.x % 32, warps = blockDim.x / 32;
    if (lane == 0) part[threadIdx.x / 32] = v;
    __syncthreads();
    v = part[0];
    for (unsigned w = 1; w < warps; ++w) v += part[w];
    __syncthreads();
    return v;
}

// The row this thread's team normalises, its member index and team size; false for a team past
// the last row.
__device__ __forceinline__ bool nm_row(int rows_mode, long long rows, long long *row, unsigned *member, unsigned *team)
{
    const bool cta = rows_mode < 0;
    *team = cta ? blockDim.x : 32u;
    *member = cta ? threadIdx.x : threadIdx.x % 32;
    *row = cta ? (long long)blockIdx.x : (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    return *row < rows;
}

// The mean and rstd of row p of n elements (RMS: mean 0).
template <typename T, int RMS, typename A>
__device__ __forceinline__ void nm_stats(const T *p, long long n, unsigned member, unsigned team, bool cta, double eps, A *mean,
                                         A *rstd)
{
    A m = (A)0;
    if (!RMS) {
        A s = (A)0;
        for (long long j = member; j < n; j += team) s += tocha::to_compute(p[j]);
        m = nm_team_sum(s, cta) / (A)n;
    }
    A q = (A)0;
    for (long long j = member; j < n; j += team) {
        const A d = tocha::to_compute(p[j]) - m;
        q += d * d;
    }
    *mean = m;
    *rstd = nm_rsqrt(nm_team_sum(q, cta) / (A)n + (A)eps);
}

template <typename T, int RMS, int AFFINE>
__device__ void tocha_norm(const T *x, const T *w, const T *b, T *y, long long rows, long long n, long long G, long long HW,
                           double eps, int rows_mode)
{
    typedef typename tocha::compute<T>::type A;
    long long row;
    unsigned member, team;
    if (!nm_row(rows_mode, rows, &row, &member, &team)) return; // a whole CTA, or a whole warp
    const bool cta = rows_mode < 0;
    const T *p = x + row * n;
    A mean, rstd;
    nm_stats<T, RMS>(p, n, member, team, cta, eps, &mean, &rstd);
    const long long base = (row % G) * n;
    for (long long j = member; j < n; j += team) {
        A v = (tocha::to_compute(p[j]) - mean) * rstd;
        if (AFFINE >= 1) v = v * tocha::to_compute(w[(base + j) / HW]);
        if (AFFINE == 2) v = v + tocha::to_compute(b[(base + j) / HW]);
        y[row * n + j] = tocha::from_compute<T>(v);
    }
}

// stats: 2 x rows values of A (mean, rstd), written by phase 0 and read by phase 1.
template <typename T, int RMS, int AFFINE>
__device__ void tocha_norm_backward(const T *x, const T *w, const T *dy, T *dx, T *dw, T *db, unsigned char *stats,
                                    long long rows, long long n, long long G, long long HW, double eps, int rows_mode,
                                    int phase)
{
    typedef typename tocha::compute<T>::type A;
    A *st = (A *)stats;
    if (phase == 0) {
        long long row;
        unsigned member, team;
        if (!nm_row(rows_mode, rows, &row, &member, &team)) return;
        const bool cta = rows_mode < 0;
        const T *p = x + row * n, *g = dy + row * n;
        A mean, rstd;
        nm_stats<T, RMS>(p, n, member, team, cta, eps, &mean, &rstd);
        const long long base = (row % G) * n;
        A sg = (A)0, sgx = (A)0;
        for (long long j = member; j < n; j += team) {
            A gj = tocha::to_compute(g[j]);
            if (AFFINE >= 1) gj = gj * tocha::to_compute(w[(base + j) / HW]);
            sg += gj;
            sgx += gj * (tocha::to_compute(p[j]) - mean) * rstd;
        }
        sg = nm_team_sum(sg, cta) / (A)n;
        sgx = nm_team_sum(sgx, cta) / (A)n;
        for (long long j = member; j < n; j += team) {
            A gj = tocha::to_compute(g[j]);
            if (AFFINE >= 1) gj = gj * tocha::to_compute(w[(base + j) / HW]);
            const A xhat = (tocha::to_compute(p[j]) - mean) * rstd;
            dx[row * n + j] = tocha::from_compute<T>(rstd * (gj - (RMS ? (A)0 : sg) - xhat * sgx));
        }
        if (member == 0) st[2 * row] = mean, st[2 * row + 1] = rstd;
        return;
    }
    if (AFFINE == 0) return;
    // Phase 1: parameter q is used by channel q % per of group q / per in every sample, where
    // per = n / HW parameters share a row's group; those are rows (s * G + q / per), elements
    // [(q % per) * HW, (q % per + 1) * HW) of each.
    const long long per = n / HW, params = G * per, samples = rows / G;
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x; q < params; q += stride) {
        const long long grp = q / per, first = (q % per) * HW;
        A sw = (A)0, sb = (A)0;
        for (long long s = 0; s < samples; ++s) {
            const long long row = s * G + grp;
            const A mean = st[2 * row], rstd = st[2 * row + 1];
            for (long long j = first; j < first + HW; ++j) {
                const A gj = tocha::to_compute(dy[row * n + j]);
                sw += gj * (tocha::to_compute(x[row * n + j]) - mean) * rstd;
                sb += gj;
            }
        }
        dw[q] = tocha::from_compute<T>(sw);
        if (AFFINE == 2) db[q] = tocha::from_compute<T>(sb);
    }
}
