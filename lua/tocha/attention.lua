-- tocha.attention: scaled dot-product attention through kernels/attention.cu, eager, without
-- the L x L scores in memory.
--
--   local o = tocha.scaled_dot_product_attention(q, k, v)                  -- softmax(q k^T / sqrt(D)) v
--   local o = tocha.scaled_dot_product_attention(q, k, v, { causal = true, scale = 0.125 })
--   local o, lse = tocha.scaled_dot_product_attention(q, k, v, { lse = true })
--
-- PyTorch's F.scaled_dot_product_attention(q, k, v, is_causal=, scale=) for q [..., LQ, D], k and
-- v [..., LK, D] with the same leading (batch, head) dimensions, f16 or bf16, D a multiple of 16
-- up to 128: o [..., LQ, D], and with opts.lse the f32 log-sum-exp of each row's scaled scores
-- [..., LQ] (what a backward recomputes the probabilities from). causal masks key j > query i
-- (the upper-left triangle kept); scale defaults to 1 / sqrt(D). The scores and probabilities
-- stay in f32 registers; the probabilities are rounded to the dtype before their product with
-- v, as PyTorch's flash kernels do; o is rounded once. Views are copied dense first.
local dtype = require "tocha.dtype"
local errors = require "tocha.errors"
local raise = errors.raise

local kernel = require "tocha.kernel"
local op = require "tocha.op"
local device = require "tocha.device"
local tensor = require "tocha.tensor"

local M = {}

-- The forward's dynamic shared memory: two buffers of a k and a v tile (kernels/attention.cu's
-- ATTENTION_SHARED).
local function shared_bytes(d) return 4 * 64 * (d + 8) * 2 end

-- The wgmma forward's: q's tile, two k and two v tiles, p's tile, 1 KiB to align them
-- (ATTENTION_WG_SHARED).
local function wg_shared_bytes(d) return 5 * (d / 64 * 8192) + 8192 + 1024 end

local kernels = {}
local function build(name, dt, d, causal, params, shared)
  local key = ("%s|%s|%s|%s"):format(name, dt, tostring(d), tostring(causal))
  if not kernels[key] then
    local targs = dtype.ctype(dt) .. (d and (", %d"):format(d) or "") .. (causal ~= nil and (", %d"):format(causal and 1 or 0) or "")
    kernels[key] = kernel.new { source = op.source("tensor_core.cuh") .. "\n" .. op.source("warpgroup.cuh") .. "\n"
      .. op.source("attention.cu"), name = name,
      template_args = targs, params = params:gsub("T%*", dt .. "*"), launch_bounds = shared and { 128 } or nil,
      shared = shared or 0 }
  end
  return kernels[key]
end

-- Whether the forward and the backward's main pass run on wgmma: head sizes 64 and 128 where
-- the default device has it
-- (sim, compute capability 9.0), unless M.prefer_mma_sync (specs and benchmarks set it to run
-- the mma.sync kernel, the one other devices and head sizes take).
M.prefer_mma_sync = false
function M.forward_on_wgmma(d)
  return require("tocha.matmul").has_wgmma() and (d == 64 or d == 128) and not M.prefer_mma_sync
end

-- The forward kernel for dtype dt, head size d and the causal mask (specs build it alone): the
-- wgmma one where M.forward_on_wgmma(d), else the mma.sync one; both take the same arguments,
-- grid (heads, query tiles of 64) and 128 threads.
function M.forward_kernel(dt, d, causal)
  local params = "T* q, T* k, T* v, T* o, f32* lse, i64 heads, i32 lq, i32 lk, f32 scale"
  if M.forward_on_wgmma(d) then return build("tocha_attention_forward_wg", dt, d, causal, params, wg_shared_bytes(d)) end
  return build("tocha_attention_forward", dt, d, causal, params, shared_bytes(d))
end

-- The backward's kernels (kernels/attention.cu): delta, the main pass (on wgmma where
-- M.forward_on_wgmma(d), with the same arguments), dq's rounding.
function M.backward_kernels(dt, d, causal)
  local params = "T* q, T* k, T* v, T* dout, f32* lse, f32* delta, f32* dq_acc, T* dk, T* dv, i64 heads, i32 lq, i32 lk, "
    .. "f32 scale"
  local main = M.forward_on_wgmma(d)
    -- k, v, q, do, p^T's and ds^T's tiles, lse and delta, 1 KiB to align (ATTENTION_WG_BACKWARD_SHARED)
    and build("tocha_attention_backward_wg", dt, d, causal, params, 4 * (d / 64 * 8192) + 2 * 8192 + 2 * 64 * 4 + 1024)
    or build("tocha_attention_backward", dt, d, causal, params, 4 * 64 * (d + 8) * 2 + 64 * 72 * 2 + 2 * 64 * 4)
  return build("tocha_attention_backward_delta", dt, d, nil, "T* o, T* dout, f32* delta, f32* dq_acc, i64 rows"), main,
    build("tocha_attention_backward_dq", dt, nil, nil, "f32* dq_acc, T* dq, i64 count")
end

local function check(t, what)
  if not tensor.is_tensor(t) then raise(("%s: expected a tensor, got %s"):format(what, type(t))) end
  if t.freed ~= 0 then raise(what .. ": tensor was freed") end
  if t.ndim < 2 then raise(("%s: expected [..., L, D], got %d dimension%s"):format(what, t.ndim, t.ndim == 1 and "" or "s")) end
end

local function text(shape) return "[" .. table.concat(shape, ", ") .. "]" end

-- scaled_dot_product_attention(q, k, v [, {causal = false, scale = 1 / sqrt(D), lse = false}]) -> o [, lse]
function M.scaled_dot_product_attention(q, k, v, opts)
  check(q, "q")
  check(k, "k")
  check(v, "v")
  if type(opts) ~= "nil" and type(opts) ~= "table" then raise("opts: expected a table, got " .. type(opts)) end
  opts = opts or {}
  for key in pairs(opts) do
    if key ~= "causal" and key ~= "scale" and key ~= "lse" then
      raise(("opts: unknown option %s (expected causal, scale or lse)"):format(errors.show(key)))
    end
  end
  local dt = q:dtype()
  if dt ~= "f16" and dt ~= "bf16" then raise(("q: expected f16 or bf16, got %s (cast it first)"):format(dt)) end
  for _, p in ipairs({ { k, "k" }, { v, "v" } }) do
    if p[1]:dtype() ~= dt then raise(("%s: expected %s (q's dtype), got %s"):format(p[2], dt, p[1]:dtype())) end
    if p[1].dev ~= q.dev then raise(("%s: on another device than q"):format(p[2])) end
  end
  local qs, ks, vs = q:shape(), k:shape(), v:shape()
  local nd, d = #qs, qs[#qs]
  if d % 16 ~= 0 or d > 128 or d < 16 then
    raise(("q: expected a head size (last dimension) that is a multiple of 16 up to 128, got %d"):format(d))
  end
  if #ks ~= nd then raise(("k: expected %d dimensions (q's), got %d"):format(nd, #ks)) end
  if #vs ~= nd then raise(("v: expected %d dimensions (q's), got %d"):format(nd, #vs)) end
  local heads = 1
  for i = 1, nd - 2 do
    if ks[i] ~= qs[i] or vs[i] ~= qs[i] then
      raise(("k: leading dimensions %s and v's %s must equal q's %s"):format(text(ks), text(vs), text(qs)))
    end
    heads = heads * qs[i]
  end
  local lq, lk = qs[nd - 1], ks[nd - 1]
  if ks[nd] ~= d then raise(("k: expected a head size of %d (q's), got %d"):format(d, ks[nd])) end
  if vs[nd] ~= d then raise(("v: expected a head size of %d (q's), got %d"):format(d, vs[nd])) end
  if vs[nd - 1] ~= lk then raise(("v: expected %d rows (k's), got %d"):format(lk, vs[nd - 1])) end
  if lk == 0 and lq > 0 then raise("k: expected at least one key") end
  local causal = opts.causal == true
  if opts.causal ~= nil and type(opts.causal) ~= "boolean" then raise("opts.causal: expected a boolean") end
  local scale = opts.scale == nil and 1 / math.sqrt(d) or opts.scale
  if type(scale) ~= "number" or scale ~= scale or math.abs(scale) == math.huge then
    raise("opts.scale: expected a finite number, got " .. errors.show(scale))
  end
  if lq > 2 ^ 31 - 1 or lk > 2 ^ 31 - 1 then raise("q: sequences of at most 2^31 - 1 rows") end
  q, k, v = q:contiguous(), k:contiguous(), v:contiguous()
  local dev = device.wrap(q.dev)
  local o = tensor.alloc(qs, dt, dev)
  local lse_shape = {}
  for i = 1, nd - 1 do lse_shape[i] = qs[i] end
  local lse = tensor.alloc(lse_shape, "f32", dev)
  if heads > 0 and lq > 0 then
    local blocks = math.ceil(lq / 64)
    if blocks > 65535 then raise(("q: %d rows, at most %d a call"):format(lq, 65535 * 64)) end
    if heads > 2 ^ 31 - 1 then raise("q: too many heads for one call") end
    op.launch_packed(M.forward_kernel(dt, d, causal), dev, { heads, blocks, 1 }, { 128, 1, 1 },
      { q.data, k.data, v.data, o.data, lse.data, heads, lq, lk, scale })
  end
  if opts.lse then return o, lse end
  lse:free()
  return o
end

return M
