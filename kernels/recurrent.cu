// recurrent.cu: one time step of a recurrent layer (tocha.Recurrent), the pointwise part, forward
// and backward. The products are matmul.cu's: before each step the op writes gh = h_prev R^T +
// b_hh ([B, G H]); the input's projection gx = x W^T + b_ih ([B, G H] a step) comes from a Linear
// before the op. Gates lie in PyTorch's order, G blocks of H columns a row:
//
//   MODE 0, LSTM (G = 4: i, f, g, o): a = gx + gh; c = sigmoid(f) c_prev + sigmoid(i) tanh(g);
//           h = sigmoid(o) tanh(c)
//   MODE 1, GRU  (G = 3: r, z, n):    r, z = sigmoid(gx + gh); n = tanh(gx_n + r gh_n);
//           h = (1 - z) n + z h_prev  (ONNX's linear_before_reset = 1, PyTorch's nn.GRU)
//   MODE 2, 3, RNN (G = 1):           h = tanh(gx + gh), relu(gx + gh)
//
// A thread an element (b, j) of [B, H], computing in A (f32 for halves, f64 for f64) and rounding
// h and c once to T. zero_state: the step before the first has h = c = 0, so gh is b_hh alone
// (the op launches no product for it) and h_prev, c_prev are not read.

#define RNN_LSTM 0
#define RNN_GRU 1
#define RNN_TANH 2
#define RNN_RELU 3

template <typename A> __device__ __forceinline__ A rnn_sigmoid(A v) { return (A)1 / ((A)1 + ew_exp(-v)); }

template <int MODE> __device__ __forceinline__ int rnn_gates() { return MODE == RNN_LSTM ? 4 : MODE == RNN_GRU ? 3 : 1; }

// Column col of a gate row, widened to A.
template <typename A, typename T> __device__ __forceinline__ A rnn_at(const T *row, long long col)
{
    return tocha::widen<A>(row[col]);
}

// An LSTM's gates at one element, activated: i, f, o sigmoids, g the tanh.
template <typename A> struct rnn_lstm { A i, f, g, o; };
template <typename A, typename T>
__device__ __forceinline__ rnn_lstm<A> rnn_lstm_gates(const T *gxr, const T *ghr, long long hidden)
{
    rnn_lstm<A> q;
    q.i = rnn_sigmoid(rnn_at<A>(gxr, 0) + rnn_at<A>(ghr, 0));
    q.f = rnn_sigmoid(rnn_at<A>(gxr, hidden) + rnn_at<A>(ghr, hidden));
    q.g = ew_tanh(rnn_at<A>(gxr, 2 * hidden) + rnn_at<A>(ghr, 2 * hidden));
    q.o = rnn_sigmoid(rnn_at<A>(gxr, 3 * hidden) + rnn_at<A>(ghr, 3 * hidden));
    return q;
}

// A GRU's gates at one element: r, z (sigmoids), gh's n block (which r scales) and n.
template <typename A> struct rnn_gru { A r, z, ghn, n; };
template <typename A, typename T>
__device__ __forceinline__ rnn_gru<A> rnn_gru_gates(const T *gxr, const T *ghr, long long hidden)
{
    rnn_gru<A> q;
    q.r = rnn_sigmoid(rnn_at<A>(gxr, 0) + rnn_at<A>(ghr, 0));
    q.z = rnn_sigmoid(rnn_at<A>(gxr, hidden) + rnn_at<A>(ghr, hidden));
    q.ghn = rnn_at<A>(ghr, 2 * hidden);
    q.n = ew_tanh(rnn_at<A>(gxr, 2 * hidden) + q.r * q.ghn);
    return q;
}

// One element e = (b, j) of [B, H]: xr, the offset of its first gate's column (row b, column j)
// in gx and gh ([B, G H]); pointers to that column of gx and of gh (of b_hh, one row for every b,
// where the state is zero); h_prev there widened (0 from a zero state).
template <typename T, typename A> struct rnn_site {
    long long xr;
    const T *gxr, *ghr;
    A hp;
};
template <typename T, typename A, int MODE>
__device__ __forceinline__ rnn_site<T, A> rnn_site_of(long long e, const T *gx, const T *gh, const T *bias_hh,
                                                      const T *h_prev, long long hidden, int zero_state)
{
    rnn_site<T, A> s;
    const long long b = e / hidden, j = e - b * hidden;
    s.xr = b * rnn_gates<MODE>() * hidden + j;
    s.gxr = gx + s.xr;
    s.ghr = zero_state ? bias_hh + j : gh + s.xr;
    s.hp = zero_state ? (A)0 : tocha::widen<A>(h_prev[e]);
    return s;
}

template <typename T, typename A, int MODE>
__device__ void tocha_recurrent_cell(const T *gx, const T *gh, const T *bias_hh, const T *h_prev, const T *c_prev,
                                     T *h, T *c, long long batch, long long hidden, int zero_state)
{
    const long long count = batch * hidden;
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < count; e += stride) {
        const rnn_site<T, A> at = rnn_site_of<T, A, MODE>(e, gx, gh, bias_hh, h_prev, hidden, zero_state);
        const T *gxr = at.gxr, *ghr = at.ghr;
        const A hp = at.hp;
        if (MODE == RNN_LSTM) {
            const rnn_lstm<A> q = rnn_lstm_gates<A>(gxr, ghr, hidden);
            const A cp = zero_state ? (A)0 : tocha::widen<A>(c_prev[e]);
            const A cn = q.f * cp + q.i * q.g;
            c[e] = tocha::narrow<T>(cn);
            h[e] = tocha::narrow<T>(q.o * ew_tanh(cn));
        } else if (MODE == RNN_GRU) {
            const rnn_gru<A> q = rnn_gru_gates<A>(gxr, ghr, hidden);
            h[e] = tocha::narrow<T>(((A)1 - q.z) * q.n + q.z * hp);
        } else {
            const A a = rnn_at<A>(gxr, 0) + rnn_at<A>(ghr, 0);
            h[e] = tocha::narrow<T>(MODE == RNN_TANH ? ew_tanh(a) : (a > (A)0 ? a : (A)0));
        }
    }
}

// The backward of one step, the forward's gates recomputed from gx, gh (as the forward had it)
// and the state before. dh = dy_h + dh_carry, and for LSTM dc = dy_c + dc_in + the path through
// h; writes d gx (dgx) and d gh (dgh: equal to d gx but for GRU's n block; may be dgx itself),
// dc_out = dc c_prev's gradient (LSTM; may be dc_in, each element read before it is written), and
// dh_direct = the gradient of h_prev other than through gh (GRU's dh z; 0 for the others, which
// the op does not read). start: the carries are zero (the walk's last step, the backward's first).
template <typename T, typename A, int MODE>
__device__ void tocha_recurrent_cell_backward(const T *gx, const T *gh, const T *bias_hh, const T *h_prev,
                                              const T *c_prev, const T *dy_h, const T *dy_c, const T *dh_carry,
                                              const T *dc_in, T *dgx, T *dgh, T *dc_out, T *dh_direct,
                                              long long batch, long long hidden, int zero_state, int start)
{
    const long long count = batch * hidden;
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < count; e += stride) {
        const rnn_site<T, A> at = rnn_site_of<T, A, MODE>(e, gx, gh, bias_hh, h_prev, hidden, zero_state);
        const T *gxr = at.gxr, *ghr = at.ghr;
        const A hp = at.hp;
        T *dx = dgx + at.xr;
        T *dg = dgh + at.xr;
        const A dh = tocha::widen<A>(dy_h[e]) + (start ? (A)0 : tocha::widen<A>(dh_carry[e]));
        if (MODE == RNN_LSTM) {
            const rnn_lstm<A> q = rnn_lstm_gates<A>(gxr, ghr, hidden);
            const A i = q.i, f = q.f, g = q.g, o = q.o;
            const A cp = zero_state ? (A)0 : tocha::widen<A>(c_prev[e]);
            const A tc = ew_tanh(f * cp + i * g);
            const A dc = tocha::widen<A>(dy_c[e]) + (start ? (A)0 : tocha::widen<A>(dc_in[e])) + dh * o * ((A)1 - tc * tc);
            const A di = dc * g * i * ((A)1 - i);
            const A df = dc * cp * f * ((A)1 - f);
            const A dgg = dc * i * ((A)1 - g * g);
            const A dout = dh * tc * o * ((A)1 - o);
            dx[0] = tocha::narrow<T>(di);
            dx[hidden] = tocha::narrow<T>(df);
            dx[2 * hidden] = tocha::narrow<T>(dgg);
            dx[3 * hidden] = tocha::narrow<T>(dout);
            if (dg != dx) {
                dg[0] = dx[0];
                dg[hidden] = dx[hidden];
                dg[2 * hidden] = dx[2 * hidden];
                dg[3 * hidden] = dx[3 * hidden];
            }
            dc_out[e] = tocha::narrow<T>(dc * f);
        } else if (MODE == RNN_GRU) {
            const rnn_gru<A> q = rnn_gru_gates<A>(gxr, ghr, hidden);
            const A r = q.r, z = q.z, ghn = q.ghn, n = q.n;
            const A dn = dh * ((A)1 - z) * ((A)1 - n * n);
            const A dr = dn * ghn * r * ((A)1 - r);
            const A dz = dh * (hp - n) * z * ((A)1 - z);
            dx[0] = tocha::narrow<T>(dr);
            dx[hidden] = tocha::narrow<T>(dz);
            dx[2 * hidden] = tocha::narrow<T>(dn);
            dg[0] = tocha::narrow<T>(dr);
            dg[hidden] = tocha::narrow<T>(dz);
            dg[2 * hidden] = tocha::narrow<T>(dn * r);
            dh_direct[e] = tocha::narrow<T>(dh * z);
        } else {
            const A a = rnn_at<A>(gxr, 0) + rnn_at<A>(ghr, 0);
            A da;
            if (MODE == RNN_TANH) {
                const A t = ew_tanh(a);
                da = dh * ((A)1 - t * t);
            } else {
                da = a > (A)0 ? dh : (A)0;
            }
            dx[0] = tocha::narrow<T>(da);
            if (dg != dx) dg[0] = dx[0];
        }
    }
}
