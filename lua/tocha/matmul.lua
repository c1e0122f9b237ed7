-- tocha.matmul: matrix products of tensors, eager, through kernels/matmul.cu on the tensors'
-- device.
--
--   local c = tocha.matmul(a, b)            -- a [m, k] x b [k, n] -> [m, n]
--   local y = x:mm(w, { bias = b })         -- + bias [n] on every row
--   local h = x:mm(w, { bias = b, activation = "gelu" })  -- gelu(x w + b), in the same kernel
--   local z = tocha.matmul(q, kt)           -- batched: [B, m, k] x [B, k, n] -> [B, m, n]
--
-- Operands of one float dtype and one device, as torch.matmul takes them: a vector (1
-- dimension) is a row on the left and a column on the right, its dimension dropped from the
-- result (two vectors give their dot product, of shape {1}); dimensions before the last two
-- are a batch of matrices, and an operand without them, or whose batch is one matrix, repeats
-- over the other's (batches of several matrices must have equal dimensions: PyTorch's fuller
-- broadcasting of batch dimensions is not taken). Transposed views (x:t(), x:transpose(2, 3)) are
-- read as they lie; other views are copied dense first. f16 and bf16 run on the tensor cores
-- with f32 accumulators, rounded once to the dtype, where each operand's consecutive
-- dimension is a multiple of 8 (16-byte rows); f32 where it is a multiple of 4 on 128 x 128
-- tiles of 8 x 8 outputs a thread; other shapes and f64 a 64 x 64 tiled kernel. f32 sums in
-- f32 and f64 in f64, in k order, one fma a product, on either kernel: TF32 is not used.
-- Empty operands give empty results (k = 0: zeros, plus the bias, through the activation).
-- opts.activation (M.ACTIVATIONS) applies a function to each sum + bias in the kernel's
-- epilogue, before the one rounding to the dtype.
local ffi = require "ffi"
local dtype = require "tocha.dtype"
local errors = require "tocha.errors"
local raise = errors.raise

local M = {}

-- Loaded at the first call (tocha.tensor installs this module while it loads).
local kernel, op, device, tensor
local function modules()
  if tensor then return end
  kernel, op = require "tocha.kernel", require "tocha.op"
  device, tensor = require "tocha.device", require "tocha.tensor"
end

local function is_tensor(x) return ffi.istype("tocha_tensor", x) end

local PARAMS = "%s* a, %s* b, %s* bias, %s* c, i64 m, i64 n, i64 k, i64 stride_a, i64 stride_b, i64 stride_c, i32 has_bias, "
  .. "%s* residual, %s* grad, i32 epilogue"

-- The tensor-core kernel's dynamic shared memory for tiles of bn columns: MM_SHARED(bn) of
-- kernels/matmul.cu, which the kernel is built with (MATMUL_SHARED) and checks (its wgmma main
-- loop's four stages; the mma.sync loop, built where wgmma is
-- not, uses the first 38 KB of the same). A GPU whose blocks may not have that much (99 KiB on
-- sm_86, sm_89 and sm_120; 163 KiB on sm_80, below 256-wide tiles' 193 KiB) refuses the launch
-- with the sizes: the tensor-core products are built for the H200's 227 KiB.
local function tc_shared(bn) return 4 * (16384 + bn * 128) + 1024 end
-- (for the kernels that run matmul.cu's main loop: the implicit-GEMM convolution's)
M.tensor_core_shared = tc_shared

-- The tensor-core kernel's tile width for an m x n result: 256 (the operands read from L2 a
-- quarter less a product: measured 557 against 469 TFLOP/s at 8192^3 on the H200) unless the
-- tiles of 128 finish in fewer rounds of the device's `sms` multiprocessors (one CTA each) by
-- more than that speed: estimated time ceil(tiles / sms) x width / speed, speed 1 for 256 and
-- 0.84 for 128 (their measured ratio). Without m (a Linear, whose rows come later), 256 once
-- n fills it.
function M.tile_n(n, m, sms, batch)
  if n < 256 then return 128 end
  if not m then return 256 end
  sms, batch = sms or 132, batch or 1
  local function cost(bn) return math.ceil(math.ceil(m / 128) * math.ceil(n / bn) * batch / sms) * bn end
  return cost(128) / 0.84 < cost(256) and 128 or 256
end

-- The functions a product's epilogue applies after the bias (kernels/activation.cuh's).
local ACTIVATION_NAMES = { "identity", "relu", "relu6", "sigmoid", "tanh", "silu", "gelu", "hardsigmoid", "hardswish",
  "selu", "softplus", "mish", "gelu_tanh" }
M.ACTIVATIONS = {}
for _, name in ipairs(ACTIVATION_NAMES) do M.ACTIVATIONS[name] = true end

-- The activation option of a product or a layer (nil: "identity"), checked; `what` names it.
function M.activation(v, what)
  if v == nil then return "identity" end
  if not M.ACTIVATIONS[v] then
    raise(("%s: expected one of %s, got %s"):format(what, table.concat(ACTIVATION_NAMES, ", "), errors.show(v)))
  end
  return v
end

-- The source of the kernels that run matmul.cu (its headers first).
function M.source()
  modules()
  return op.source("tensor_core.cuh") .. "\n" .. op.source("warpgroup.cuh") .. "\n" .. op.source("mbarrier.cuh") .. "\n"
    .. op.source("activation.cuh") .. "\n" .. op.source("epilogue.cuh") .. "\n" .. op.source("matmul.cu")
end

-- ---- tf32: PyTorch's float32 matmul precision ----
--
-- "highest" (the default, as PyTorch's): f32 products sum f32 products of f32 operands (the f32
-- tiles). "high": they may read their operands as tf32 (10 bits of mantissa, the tensor cores:
-- tocha_matmul_tc on f32), PyTorch's torch.set_float32_matmul_precision("high") or
-- torch.backends.cuda.matmul.allow_tf32 = True. Read where a product's kernel is chosen: at each
-- tocha.matmul call, and when a Linear or MatMul op is made (its kernels are baked in then).
local precision = "highest"

-- tocha.set_float32_matmul_precision(p): "highest" or "high" (tf32); returns the previous one.
function M.set_float32_matmul_precision(p)
  if p ~= "highest" and p ~= "high" then
    raise(("precision: expected \"highest\" or \"high\" (tf32), got %s"):format(errors.show(p)))
  end
  local old = precision
  precision = p
  return old
end

-- tocha.get_float32_matmul_precision() -> "highest" or "high".
function M.get_float32_matmul_precision() return precision end

-- Whether a product made now reads f32 as tf32: opt (a call's or an op's tf32 option, a
-- boolean or nil) over the precision set; `what` names the option.
function M.tf32(opt, what)
  if opt == nil then return precision == "high" end
  if type(opt) ~= "boolean" then raise(("%s: expected a boolean, got %s"):format(what, errors.show(opt))) end
  return opt
end

-- ---- autotune: the tensor cores' configuration timed per shape ----
--
-- Off by default (the tile width and main loop come from M.tile_n and the operands' layouts:
-- deterministic, no first-call cost). On (tocha.set_autotune(true), PyTorch's
-- torch.backends.cudnn.benchmark; or a call's autotune option), a tensor-core product's first
-- call for a shape times each of its configurations (tile width 128 or 256; where the device
-- has wgmma, the plain or the warp-specialized loop) through tocha.autotune and keeps the
-- fastest, in memory and on disk under the kernel cache. The configurations sum every output
-- in the same order (wgmma's k steps in k order), so the choice changes the time, never the
-- result.
local autotune_on = false

-- tocha.set_autotune(flag) -> the previous setting.
function M.set_autotune(flag)
  if type(flag) ~= "boolean" then raise("flag: expected a boolean, got " .. errors.show(flag)) end
  local old = autotune_on
  autotune_on = flag
  return old
end

-- tocha.get_autotune() -> whether products choose their configuration by timing.
function M.get_autotune() return autotune_on end

local kernels = {}
-- The kernel `name` (tocha_matmul_tc, tocha_matmul_f32 or tocha_matmul_simt) for dtype dt and
-- the operands' layouts ("row" or "col"); for tocha_matmul_tc, bn its tile width, and mma_sync
-- builds its mma.sync main loop where the device has wgmma too (its specs run both); act, the
-- epilogue's activation. Its parameters: a, b, bias, c, m, n, k, stride_a, stride_b, stride_c,
-- has_bias, residual, grad, epilogue (kernels/matmul.cu: residual and grad read where the
-- epilogue's flags name them, kernels/epilogue.cuh).
local function kernel_of(name, dt, layout_a, layout_b, bn, mma_sync, act)
  modules()
  local ta, tb = layout_a == "col" and 1 or 0, layout_b == "col" and 1 or 0
  local ws = name == "tocha_matmul_ws"
  local tc = name == "tocha_matmul_tc" or ws
  local targs = ("%s, %d, %d"):format(dtype.ctype(dt), ta, tb) .. (tc and (", %d"):format(bn) or "")
    .. ", ew_fn_" .. (act or "identity")
  local key = ("%s|%s|%s"):format(name, targs, mma_sync and "sync" or "")
  if not kernels[key] then
    kernels[key] = kernel.new { source = M.source(), name = name, template_args = targs,
      -- the f32 kernel's 8 x 8 outputs fit two CTAs an SM only at 128 registers a thread
      params = PARAMS:format(dt, dt, dt, dt, dt, dt),
      launch_bounds = { ws and 384 or 256, tc and 1 or name == "tocha_matmul_f32" and 2 or nil },
      -- the kernel checks at compile time that its stages fit the bytes its launches give
      options = tc and { "-DMATMUL_SHARED=" .. tc_shared(bn), mma_sync and "-DMATMUL_MMA_SYNC" or nil } or nil,
      shared = tc and tc_shared(bn) + (ws and 64 or 0) or 0 }
    -- the tile width the kernel is built for, which its grid must number (M.grid_of)
    kernels[key].tile_n = tc and bn or nil
  end
  return kernels[key]
end

-- How t's matrices lie, from its sizes d and strides st (lists, 2 dimensions or more): "row"
-- (each row's elements consecutive), "col" (each column's: a transposed view), or nil for any
-- other view, which is copied dense; the batch dimensions (all but the last two) must step over
-- whole matrices one after another.
local function layout_of(d, st)
  local nd = #d
  local r, c, sr, sc = d[nd - 1], d[nd], st[nd - 1], st[nd]
  local kind
  if (c == 1 or sc == 1) and (r == 1 or sr == c) then
    kind = "row"
  elseif (r == 1 or sr == 1) and (c == 1 or sc == r) then
    kind = "col"
  end
  local step = r * c
  for i = nd - 2, 1, -1 do
    if d[i] > 1 and st[i] ~= step then return nil end
    step = step * d[i]
  end
  return kind
end

local function sizes_of(t)
  local d, st = {}, {}
  for i = 0, t.ndim - 1 do d[i + 1], st[i + 1] = tonumber(t.dims[i]), tonumber(t.strides[i]) end
  return d, st
end

local function check_operand(v, what)
  if not is_tensor(v) then raise(("%s: expected a tensor, got %s"):format(what, type(v))) end
  if v.freed ~= 0 then raise(what .. ": tensor was freed") end
end

-- An operand as matrices: the tensor (a dense copy where its layout needs one), its sizes
-- with a vector made a matrix (a [k] as [1, k], b [k] as [k, 1]) and its layout.
local function as_matrices(t, vector_shape)
  local d, st = sizes_of(t)
  if #d == 1 then
    local k = d[1]
    if k > 1 and st[1] ~= 1 then t = t:contiguous() end
    if vector_shape == "row" then return t, { 1, k }, "row" end
    return t, { k, 1 }, "row"
  end
  local layout = layout_of(d, st)
  if not layout then
    t = t:contiguous()
    layout = "row"
  end
  return t, d, layout
end

local function product_of(d, from, to)
  local n = 1
  for i = from, to do n = n * d[i] end
  return n
end

local function text(d) return "[" .. table.concat(d, ", ") .. "]" end

-- Which kernel takes a product of dtype dt and these sizes and layouts when its operands are
-- 16-byte aligned: "tensor_cores" for halves and "f32_tiles" for f32 ("tf32" where tf32 is asked
-- for) where each operand's consecutive dimension is whole 16-byte chunks, else false (the tiled
-- kernel of any shape).
local function kind_of(dt, m, k, n, layout_a, layout_b, tf32)
  local per_chunk = (dt == "f16" or dt == "bf16") and 8 or dt == "f32" and 4
  if not per_chunk then return false end
  if (layout_a == "row" and k or m) % per_chunk ~= 0 or (layout_b == "row" and n or k) % per_chunk ~= 0 then return false end
  if per_chunk == 8 then return "tensor_cores" end
  return tf32 and "tf32" or "f32_tiles"
end

-- The grid of an m x n result (a batch of `batch`) for a kernel of `kind` (kind_of): the
-- tensor cores' tiles (128 x tile_n, default M.tile_n(n), the width without m) and the f32
-- kernel's (128 x 128) all along grid.x, the tiled kernel's (64 x 64, kind false) as columns
-- by rows. Raises past the grid's limits, naming `rows` (the operand that has them, default a).
function M.grid_of(kind, m, n, batch, rows, tile_n)
  rows = rows or "a"
  if batch > 65535 then raise(("%s: a batch of %d matrices, at most 65535 a call"):format(rows, batch)) end
  if kind then
    local width = kind == "tensor_cores" and (tile_n or M.tile_n(n)) or 128
    local tiles = math.ceil(m / 128) * math.ceil(n / width)
    if tiles > 2147483647 then raise(("%s: %d x %d results, too many tiles for one call"):format(rows, m, n)) end
    return { math.max(1, tiles), 1, math.max(1, batch) }
  end
  local tiles_m = math.ceil(m / 64)
  if tiles_m > 65535 then raise(("%s: %d rows, at most %d a call"):format(rows, m, 65535 * 64)) end
  return { math.max(1, math.ceil(n / 64)), math.max(1, tiles_m), math.max(1, batch) }
end

local KERNEL_NAME = { tensor_cores = "tocha_matmul_tc", f32_tiles = "tocha_matmul_f32", tf32 = "tocha_matmul_tc" }

-- The kernel, grid and block of an m x k by k x n product (a batch of `batch`) of dtype dt
-- with these layouts, and its kind ("tensor_cores", "f32_tiles": both need 16-byte aligned
-- operands; false for the tiled kernel of any shape). how (optional): aligned = false when
-- the operands are not 16-byte aligned (the tiled kernel then); sms, the device's
-- multiprocessors, with which the tensor cores' tile width is chosen for m rows (M.tile_n);
-- wgmma, true where the device has it (sm_90, sim): with B row-major the tensor cores' tiles
-- then run on the warp-specialized loop (tocha_matmul_ws: measured 681 against 561 TFLOP/s at
-- 8192^3 on the H200; with B column-major it loses, 320 against 353 at 8192 x 768 x 3072);
-- for specs and benchmarks, tile_n (128 or 256), mma_sync (the tensor cores' mma.sync main
-- loop even where wgmma is) and warp_specialized (true or false: that loop or not, where wgmma
-- is); activation, the epilogue's function (M.ACTIVATIONS; default "identity"); tf32, f32 read as
-- tf32 (tocha_matmul_tc on f32, kind "tf32": tiles of 128 x 128 on wgmma; false where wgmma is known
-- to be missing, how.wgmma == false). Raises past the grid's limits.
function M.launch_of(dt, m, k, n, batch, layout_a, layout_b, how)
  how = how or {}
  if type(how) ~= "table" then
    raise("how: expected a table {aligned =, sms =, wgmma =, tile_n =, mma_sync =, warp_specialized =, activation =}, got " .. type(how))
  end
  if how.tile_n ~= nil and how.tile_n ~= 128 and how.tile_n ~= 256 then
    raise("how.tile_n: expected 128 or 256, got " .. errors.show(how.tile_n))
  end
  local kind = how.aligned ~= false and kind_of(dt, m, k, n, layout_a, layout_b, how.tf32 and how.wgmma ~= false)
  local bn = kind == "tf32" and 128 or how.tile_n or M.tile_n(n, how.sms and m, how.sms, batch)
  local ws = how.warp_specialized
  if ws == nil then ws = how.wgmma and layout_b == "row" end
  ws = ws and kind == "tensor_cores" and not how.mma_sync
  local act = M.activation(how.activation, "how.activation")
  return kernel_of(ws and "tocha_matmul_ws" or kind and KERNEL_NAME[kind] or "tocha_matmul_simt", dt, layout_a, layout_b,
    bn, kind == "tensor_cores" and how.mma_sync, act), M.grid_of(kind, m, n, batch, nil, bn), { ws and 384 or 256, 1, 1 }, kind
end

-- Whether dev (default: the default device) runs wgmma (sim, or compute capability 9.0: the
-- H100 and H200); the convolutions and attention ask it too.
local function has_wgmma(dev)
  dev = dev or require("tocha.device").default()
  local cc = dev.compute_capability
  return dev.kind == "sim" or cc ~= nil and cc[1] == 9 and cc[2] == 0
end
M.has_wgmma = has_wgmma

-- The tuner of the tensor cores' products of dtype dt, layouts and activation act (one a
-- combination; its key, each call's sizes, batch strides and bias, and the device): its
-- launch takes (a, b, bias or c, c, m, n, k, stride_a, stride_b, has_bias, batch) and writes c.
local tuners = {}
local function tuner_of(dt, layout_a, layout_b, act, dev)
  local name = ("matmul-%s-%s%s-%s"):format(dt, layout_a, layout_b, act)
  local wgmma = has_wgmma(dev)
  local id = name .. (wgmma and "-wgmma" or "")
  if tuners[id] then return tuners[id] end
  local configs = { { tile_n = 128 }, { tile_n = 256 } }
  if wgmma then
    configs[3], configs[4] = { tile_n = 128, warp_specialized = true }, { tile_n = 256, warp_specialized = true }
  end
  local sim = dev.kind == "sim"
  tuners[id] = require("tocha.autotune").new {
    name = name, configs = configs, outputs = { 4 },
    -- (sim's times say nothing of a GPU's: one run each there, enough to check the mechanism)
    reps = sim and 1 or 10, min_ms = sim and 0 or 2,
    build = function(cfg)
      return kernel_of(cfg.warp_specialized and "tocha_matmul_ws" or "tocha_matmul_tc", dt, layout_a, layout_b,
        cfg.tile_n, false, act)
    end,
    launch = function(k_, cfg, a, b, bias, c, m, n, k, stride_a, stride_b, has_bias, batch)
      op.launch_packed(k_, device.wrap(c.dev), M.grid_of("tensor_cores", m, n, batch, nil, cfg.tile_n),
        { cfg.warp_specialized and 384 or 256, 1, 1 }, { a.data, b.data, bias.data, c.data, m, n, k, stride_a, stride_b,
          m * n, has_bias, c.data, c.data, 0 })
    end,
    -- what decides the time: the sizes, the batch and its strides (not the operands' values)
    key = function(_, _, _, _, m, n, k, stride_a, stride_b, has_bias, batch)
      return { m, n, k, stride_a, stride_b, has_bias, batch }
    end,
  }
  return tuners[id]
end
M.tuner = tuner_of

-- a x b (+ opts.bias), a new tensor; names the operands a and b in errors.
function M.matmul(a, b, opts)
  modules()
  check_operand(a, "a")
  check_operand(b, "b")
  if type(opts) ~= "nil" and type(opts) ~= "table" then raise("opts: expected a table, got " .. type(opts)) end
  opts = opts or {}
  for key in pairs(opts) do
    if key ~= "bias" and key ~= "activation" and key ~= "tf32" and key ~= "autotune" then
      raise(("opts: unknown option %s (expected bias, activation, tf32 or autotune)"):format(errors.show(key)))
    end
  end
  local act = M.activation(opts.activation, "opts.activation")
  local tf32 = M.tf32(opts.tf32, "opts.tf32")
  local tuned = opts.autotune
  if tuned == nil then tuned = autotune_on end
  if type(tuned) ~= "boolean" then raise("opts.autotune: expected a boolean, got " .. errors.show(tuned)) end
  if a.dev ~= b.dev then
    raise(("b: on %s, but a is on %s (move one with :to())"):format(device.wrap(b.dev).name, device.wrap(a.dev).name))
  end
  local dt = dtype.name(a.elem_type)
  if dtype.name(b.elem_type) ~= dt then raise(("b: expected %s (a's dtype), got %s"):format(dt, dtype.name(b.elem_type))) end
  if not dtype.is_float(dt) then raise(("a: expected a float dtype, got %s (cast it first: x:cast(\"f32\"))"):format(dt)) end
  local shape_a, shape_b = sizes_of(a), sizes_of(b)
  if #shape_a == 0 or #shape_b == 0 then raise("a: expected tensors of at least one dimension") end
  local da, db, layout_a, layout_b
  a, da, layout_a = as_matrices(a, "row")
  b, db, layout_b = as_matrices(b, "col")
  local m, k = da[#da - 1], da[#da]
  local kb, n = db[#db - 1], db[#db]
  if kb ~= k then
    raise(("b: expected %d rows (a's columns), got %d (a is %s, b is %s)"):format(k, kb, text(shape_a), text(shape_b)))
  end
  -- the batch dimensions: one operand's, or both's when they are equal (a batch of 1 repeats)
  local lead_a, lead_b = {}, {}
  for i = 1, #da - 2 do lead_a[i] = da[i] end
  for i = 1, #db - 2 do lead_b[i] = db[i] end
  local batch_a, batch_b = product_of(lead_a, 1, #lead_a), product_of(lead_b, 1, #lead_b)
  if batch_a > 1 and batch_b > 1 and text(lead_a) ~= text(lead_b) then
    raise(("b: batch dimensions %s do not match a's %s (equal ones, or a batch of 1, which repeats)"):format(text(lead_b),
      text(lead_a)))
  end
  -- aligned from the right, as PyTorch broadcasts them: where one side is a batch of 1, its
  -- sizes are all 1 and the other's stand
  local lead = {}
  local count = math.max(#lead_a, #lead_b)
  for i = 1, count do
    lead[i] = math.max(lead_a[#lead_a - count + i] or 1, lead_b[#lead_b - count + i] or 1)
  end
  local batch = math.max(batch_a, batch_b)
  local bias = opts.bias
  if bias ~= nil then
    if not is_tensor(bias) then raise("opts.bias: expected a tensor, got " .. type(bias)) end
    if bias.freed ~= 0 then raise("opts.bias: tensor was freed") end
    if bias.dev ~= a.dev then raise("opts.bias: on another device than a") end
    if dtype.name(bias.elem_type) ~= dt then
      raise(("opts.bias: expected %s (a's dtype), got %s"):format(dt, dtype.name(bias.elem_type)))
    end
    if bias.ndim ~= 1 or tonumber(bias.dims[0]) ~= n then
      raise(("opts.bias: expected shape [%d] (b's columns), got [%s]"):format(n, table.concat(sizes_of(bias), ", ")))
    end
    bias = bias:contiguous()
  end
  -- the result: the batch dimensions, then m (unless a is a vector), then n (unless b is)
  local out = {}
  for i, v in ipairs(lead) do out[i] = v end
  if #shape_a > 1 then out[#out + 1] = m end
  if #shape_b > 1 then out[#out + 1] = n end
  if #out == 0 then out[1] = 1 end
  local dev = device.wrap(a.dev)
  local c = tensor.alloc(out, dt, dev)
  if m == 0 or n == 0 or batch == 0 then return c end
  if k == 0 then
    c:fill(0)
    if bias then c:add_(bias) end
    if act ~= "identity" then c:copy(c[act](c)) end
    return c
  end
  -- tf32 reads K-major operands by cp.async and MN-major ones (a row-major b, a transposed a)
  -- through registers at about half the speed (results/matmul): an MN-major operand is copied
  -- K-major first where the copy stays tf32's (k in 4s), a pass over it against a product's
  -- k passes. (Ops, whose operands are fixed in a plan, keep the transposing copy.)
  local copies = {}
  if tf32 and dt == "f32" and has_wgmma(dev) and k % 4 == 0 and kind_of(dt, m, k, n, layout_a, layout_b, true) == "tf32" then
    if layout_b == "row" then
      local r = b.ndim
      local view = b:transpose(r - 1, r)
      local dense = view:contiguous()
      if dense ~= view then copies[#copies + 1] = dense end
      b, layout_b = dense:transpose(r - 1, r), "col"
    end
    if layout_a == "col" then
      local dense = a:contiguous()
      if dense ~= a then copies[#copies + 1] = dense end
      a, layout_a = dense, "row"
    end
  end
  local aligned = tonumber(a.data) % 16 == 0 and tonumber(b.data) % 16 == 0
  local k_, grid, block, kind = M.launch_of(dt, m, k, n, batch, layout_a, layout_b,
    { aligned = aligned, sms = dev.multiprocessors, wgmma = has_wgmma(dev), activation = act, tf32 = tf32 })
  if tuned and kind == "tensor_cores" then
    tuner_of(dt, layout_a, layout_b, act, dev)(a, b, bias or c, c, m, n, k, batch_a > 1 and m * k or 0,
      batch_b > 1 and k * n or 0, bias and 1 or 0, batch)
    return c
  end
  op.launch_packed(k_, dev, grid, block, { a.data, b.data, bias and bias.data or c.data, c.data, m, n, k,
    batch_a > 1 and m * k or 0, batch_b > 1 and k * n or 0, m * n, bias and 1 or 0, c.data, c.data, 0 })
  -- (the pool is stream-ordered: the copies' blocks are reused only after the product)
  for _, t in ipairs(copies) do t:free() end
  return c
end

-- Installs x:mm(y [, opts]) and x:matmul(y [, opts]) (methods: the tensor method table).
function M.install(methods)
  methods.mm = errors.name(function(a, b, opts) local r = M.matmul(a, b, opts) return r end, "Tensor:mm")
  methods.matmul = errors.name(function(a, b, opts) local r = M.matmul(a, b, opts) return r end, "Tensor:matmul")
end

return M
