-- tocha: GPU tensors and run-time compiled CUDA C kernels for Lua.
--
--   local tocha = require "tocha"
--   local x = tocha.rand({2, 3, 4, 4}, {dtype = "f32", seed = 1})
--   print(x)                         --> tocha.Tensor f32 [2x3x4x4] cuda:0 [0.1, ...]
--
-- Misuse (a bad shape, dtype or argument) raises "tocha.<function>: <detail>" at the
-- caller's line. Conditions of the environment (no GPU, a compile failure) raise too, with
-- the reason; use pcall where a script wants to go on without them.
local ffi = require "ffi"
local native = require "tocha.ffi"
local dtype = require "tocha.dtype"
local device = require "tocha.device"
local tensor = require "tocha.tensor"
local kernel = require "tocha.kernel"
local errors = require "tocha.errors"
local C, check, raise = native.C, native.check, errors.raise

local tocha = {}

tocha.version = ffi.string(C.tocha_version())
tocha.dtypes = dtype.names

-- Tensors
tocha.empty, tocha.zeros, tocha.ones, tocha.full = tensor.empty, tensor.zeros, tensor.ones, tensor.full
tocha.rand, tocha.randn, tocha.tensor = tensor.rand, tensor.randn, tensor.tensor
tocha.manual_seed = tensor.manual_seed
tocha.is_tensor = tensor.is_tensor
tocha.Tensor = tensor.methods
-- Tensors from a rule (tocha.tensor_create) and joins (tocha.tensor_join).
do
  local create, join = require "tocha.tensor_create", require "tocha.tensor_join"
  for _, name in ipairs({ "arange", "range", "linspace", "eye", "empty_like", "zeros_like", "ones_like",
    "full_like", "rand_like", "randn_like" }) do
    tocha[name] = create[name]
  end
  tocha.cat, tocha.stack = join.cat, join.stack
end
-- tocha.where(condition, input, other): input where the u8 mask condition is non-zero, else other.
tocha.where = errors.name(require("tocha.tensor_math").where, "where")
-- tocha.matmul(a, b [, {bias =}]): the matrix product, batched over a first dimension.
tocha.matmul = errors.name(require("tocha.matmul").matmul, "matmul")
-- tocha.set_float32_matmul_precision("high" | "highest"): f32 products on tf32 (the tensor
-- cores) or not, PyTorch's; tocha.get_float32_matmul_precision() reads it.
tocha.set_float32_matmul_precision = errors.name(require("tocha.matmul").set_float32_matmul_precision,
  "set_float32_matmul_precision")
tocha.get_float32_matmul_precision = require("tocha.matmul").get_float32_matmul_precision
-- tocha.set_autotune(flag): tensor-core products choose their configuration by timing, per
-- shape (PyTorch's torch.backends.cudnn.benchmark); tocha.get_autotune() reads it.
tocha.set_autotune = errors.name(require("tocha.matmul").set_autotune, "set_autotune")
tocha.get_autotune = require("tocha.matmul").get_autotune
-- tocha.scaled_dot_product_attention(q, k, v [, {causal, scale, lse}]): attention without the
-- L x L scores in memory (tocha.attention).
tocha.scaled_dot_product_attention = errors.name(require("tocha.attention").scaled_dot_product_attention,
  "scaled_dot_product_attention")

-- Devices
tocha.devices = device.list
tocha.device = function(name)
  local d = device.get(name)
  return d -- not a tail call: errors name tocha.device
end
tocha.default_device = device.default
function tocha.synchronize(name)
  device.get(name):synchronize()
end

-- Kernels
tocha.kernel = kernel.new
local upsample = require "tocha.ops.upsample"
tocha.UpsampleNearest2dForward = upsample.UpsampleNearest2dForward
tocha.UpsampleNearest2dBackward = upsample.UpsampleNearest2dBackward
tocha.UpsampleBilinear2d = require("tocha.ops.upsample_bilinear").UpsampleBilinear2d
tocha.launch_packed = require("tocha.op").launch_packed
tocha.Elementwise = require("tocha.ops.elementwise").Elementwise
tocha.ChannelCat = require("tocha.ops.channel_cat").ChannelCat
tocha.ChannelChunk = require("tocha.ops.channel_chunk").ChannelChunk
tocha.Reduce = require("tocha.ops.reduction").Reduce
tocha.ChannelBiasAdd = require("tocha.ops.channel_bias_add").ChannelBiasAdd
tocha.Linear = require("tocha.ops.linear").Linear
tocha.MatMul = require("tocha.ops.batch_matmul").MatMul
tocha.Conv2d = require("tocha.ops.conv2d").Conv2d
tocha.ConvTranspose2d = require("tocha.ops.conv_transpose2d").ConvTranspose2d
local softmax = require "tocha.ops.softmax"
tocha.Softmax, tocha.LogSoftmax = softmax.Softmax, softmax.LogSoftmax
tocha.Embedding = require("tocha.ops.embedding").Embedding
tocha.Cast = require("tocha.ops.cast").Cast
tocha.Recurrent = require("tocha.ops.recurrent").Recurrent
tocha.CumSum = require("tocha.ops.cumsum").CumSum
tocha.Attention = require("tocha.ops.attention").Attention
local norm = require "tocha.ops.norm"
tocha.LayerNorm, tocha.RMSNorm, tocha.GroupNorm = norm.LayerNorm, norm.RMSNorm, norm.GroupNorm
tocha.loss = require "tocha.loss"
-- tocha.comm: collectives over tensors of several devices (all_reduce, broadcast, all_gather,
-- reduce_scatter).
tocha.comm = require "tocha.comm"
tocha.optim = require "tocha.optim"
tocha.BatchNorm2d = require("tocha.ops.batch_norm").BatchNorm2d
tocha.Dropout = require("tocha.ops.dropout").Dropout
tocha.Pad = require("tocha.ops.pad").Pad
tocha.Broadcast = require("tocha.ops.broadcast").Broadcast
tocha.BroadcastConstant = require("tocha.ops.broadcast_constant").BroadcastConstant
tocha.Constant = require("tocha.ops.constant").Constant
local strided = require "tocha.ops.strided"
tocha.Permute, tocha.Slice = strided.Permute, strided.Slice
local views = require "tocha.ops.view"
tocha.Flatten, tocha.View = views.Flatten, views.View
local pool = require "tocha.ops.pool"
tocha.MaxPool2d, tocha.AvgPool2d, tocha.AdaptiveAvgPool2d = pool.MaxPool2d, pool.AvgPool2d, pool.AdaptiveAvgPool2d
local safetensors = require "tocha.safetensors"
tocha.save, tocha.load = safetensors.save, safetensors.load
tocha.bench = require "tocha.bench"
local npy = require "tocha.npy"
tocha.save_npy, tocha.load_npy = npy.save_npy, npy.load_npy
tocha.nn = require "tocha.nn"
tocha.gradcheck = require "tocha.gradcheck"
tocha.image = require "tocha.image"
tocha.builtin_kernel = kernel.builtin

-- Comparison. Tensors of different dtypes are compared in f64; b moves to a's device.
local function comparable(a, b)
  if not tensor.is_tensor(a) then raise("a: expected a tensor, got " .. type(a)) end
  if not tensor.is_tensor(b) then raise("b: expected a tensor, got " .. type(b)) end
  if a.freed ~= 0 then raise("a: tensor was freed") end
  if b.freed ~= 0 then raise("b: tensor was freed") end
  a, b = a:contiguous(), b:contiguous()
  if a.dev ~= b.dev then b = b:clone(device.wrap(a.dev)) end
  if a.elem_type ~= b.elem_type then return a:cast("f64"), b:cast("f64") end
  return a, b
end

-- tocha.compare(a, b [, {rtol=, atol=}]): {max_abs, max_rel, mismatched, first_mismatch, ok}.
-- Defaults rtol = 1e-5, atol = 1e-8 (numpy's); NaN matches NaN.
-- A tolerance: a number >= 0, or the default where nil.
local function tolerance(v, default, what)
  if type(v) == "nil" then return default end
  if type(v) ~= "number" or v ~= v or v < 0 then raise(("%s: expected a number >= 0, got %s"):format(what, errors.show(v))) end
  return v
end

function tocha.compare(a, b, opts)
  if type(opts) ~= "nil" and type(opts) ~= "table" then raise("options: expected a table {rtol=, atol=}, got " .. type(opts)) end
  opts = opts or {}
  local rtol, atol = tolerance(opts.rtol, 1e-5, "rtol"), tolerance(opts.atol, 1e-8, "atol")
  a, b = comparable(a, b)
  local r = ffi.new("tocha_compare_result")
  check(C.tocha_tensor_compare(a, b, rtol, atol, r))
  return {
    max_abs = r.max_abs, max_rel = r.max_rel, mismatched = tonumber(r.mismatched),
    first_mismatch = r.first_mismatch >= 0 and tonumber(r.first_mismatch) + 1 or nil,
    ok = r.mismatched == 0,
  }
end

-- tocha.allclose(a, b [, rtol [, atol]]): true when |a - b| <= atol + rtol * |b| everywhere.
function tocha.allclose(a, b, rtol, atol)
  rtol, atol = tolerance(rtol, 1e-5, "rtol"), tolerance(atol, 1e-8, "atol")
  a, b = comparable(a, b)
  local r = ffi.new("tocha_compare_result")
  check(C.tocha_tensor_compare(a, b, rtol, atol, r))
  return r.mismatched == 0
end

-- Timing: tocha.event([device]), events on a device's queue (lua/tocha/event.lua).
tocha.event = require("tocha.event").new

-- Streams: tocha.stream([device]), tocha.current_stream([device]) (lua/tocha/stream.lua).
local stream = require "tocha.stream"
tocha.stream = stream.new
tocha.current_stream = stream.current

-- Models: tocha.Model(inputs, outputs), tocha.Model.input, .node, .op (lua/tocha/model.lua).
tocha.Model = require "tocha.model"
-- tocha.DataParallel(model, devices [, opts]): a model trained on several devices, a slice of
-- each batch a device, gradients averaged (tocha.data_parallel).
tocha.DataParallel = require("tocha.data_parallel").new
-- ONNX files: tocha.onnx.read (the file as Lua values), tocha.onnx.load (a loaded tocha.Model).
tocha.onnx = require "tocha.onnx"

-- Graphs: tocha.graph(fn [, device]) (lua/tocha/graph.lua).
tocha.graph = require("tocha.graph").capture

-- Sweeps: a kernel timed over a grid of named axes, as Markdown, CSV and a plot:
-- tocha.sweep{...} (lua/tocha/sweep.lua).
tocha.sweep = require("tocha.sweep").run

-- NVTX ranges for profilers: tocha.nvtx.range(name, fn, ...), push, pop (lua/tocha/nvtx.lua).
tocha.nvtx = require "tocha.nvtx"

-- The fastest of a kernel's configurations per key of its arguments: tocha.autotune{...}
-- (lua/tocha/autotune.lua).
tocha.autotune = require("tocha.autotune").new

-- tocha.time(fn [, device]): runs fn once between two events; returns milliseconds.
function tocha.time(fn, name)
  if type(fn) ~= "function" then raise("fn: expected a function, got " .. type(fn)) end
  local start, stop = tocha.event(name), tocha.event(name)
  start:record()
  fn()
  stop:record()
  return start:elapsed(stop)
end

-- Device memory: stats, empty_cache, reset_peak
tocha.memory = require "tocha.memory"

-- Kernel cache
tocha.cache = {}
function tocha.cache.stats()
  local s = ffi.new("tocha_cache_stats")
  check(C.tocha_cache_stats_get(s))
  return {
    compiles = tonumber(s.compiles), memory_hits = tonumber(s.memory_hits),
    disk_hits = tonumber(s.disk_hits), disk_writes = tonumber(s.disk_writes),
    disk_rejects = tonumber(s.disk_rejects),
  }
end
function tocha.cache.dir()
  local d = ffi.string(C.tocha_cache_dir())
  return d ~= "" and d or nil
end
function tocha.cache.usage()
  local n, bytes = ffi.new("int64_t[1]"), ffi.new("int64_t[1]")
  check(C.tocha_cache_usage(n, bytes))
  return tonumber(n[0]), tonumber(bytes[0])
end
function tocha.cache.clear()
  local n = ffi.new("int64_t[1]")
  check(C.tocha_cache_clear(n))
  return tonumber(n[0])
end

-- "" or why the disk cache is off although it was asked for.
function tocha.cache.warning() return ffi.string(C.tocha_cache_warning()) end

-- Say once per process when the disk cache cannot be used: work goes on without it.
do
  local warning = tocha.cache.warning()
  if warning ~= "" then io.stderr:write("tocha: ", warning, "\n") end
end

-- Versions of the parts underneath.
function tocha.versions()
  local drv, major, minor = ffi.new("int[1]"), ffi.new("int[1]"), ffi.new("int[1]")
  C.tocha_driver_version(drv)
  C.tocha_nvrtc_version(major, minor)
  return {
    tocha = tocha.version,
    luajit = jit and jit.version or _VERSION,
    driver = drv[0] > 0 and ("%d.%d"):format(math.floor(drv[0] / 1000), drv[0] % 1000 / 10) or nil,
    nvrtc = major[0] > 0 and ("%d.%d"):format(major[0], minor[0]) or nil,
    cuda_unavailable = ffi.string(C.tocha_cuda_unavailable_reason()),
  }
end

for _, name in ipairs({ "device", "synchronize", "compare", "allclose", "time", "versions" }) do
  errors.name(tocha[name], name)
end
errors.register(tocha.cache, "cache.")
errors.name(tocha.gradcheck, "gradcheck")
errors.name(tocha.bench, "bench")
return tocha
