-- spec/support/api_fuzz.lua: the API fuzzer's calls, run by api_fuzz_spec.lua in a child
-- tocha process (so that a crash or a hang is seen from outside). Prints "calls N findings M"
-- and one line per finding: a call that raised something other than a tocha error.
local tocha = require "tocha"
local ffi = require "ffi"

local CALLS = tonumber(os.getenv("TOCHA_FUZZ_CALLS") or "20000")
local SEED = tonumber(os.getenv("TOCHA_FUZZ_SEED") or tostring(os.time()))

-- Values to draw arguments from; tensors are made fresh for each call (some get freed).
local function values()
  local cycle = {}
  cycle[1] = cycle
  local freed = tocha.ones({ 2 }, { device = "sim" })
  freed:free()
  return {
    0, -1, 1, 2, 3, 0.5, -0.0, 0 / 0, math.huge, -math.huge, 2 ^ 31, 2 ^ 31 - 1, 2 ^ 32, 2 ^ 53, 2 ^ 63, 1e300,
    "", "f32", "f16", "u8", "sim", "cuda", "nchw", "nhwc", "x", ("a"):rep(5000),
    true, false, {}, { 1 }, { 2, 2 }, { 1, 1, 2, 2 }, { 1, nil, 3 }, { x = 1 }, cycle, { { 1, 2 }, { 3 } },
    { 1, 1, 4, 4, 1, 1, 1, 1, 1 }, { 2.5, 2 }, { -1, 4 }, { dtype = "f16" }, { device = "nope" },
    { layout = "nhwc" }, { seed = -1 }, { 1, 2, 3 }, print, function() end, ffi.new("float[1]"),
    ffi.new("uint64_t", 0), ffi.cast("void *", 0), freed,
    tocha.ones({ 4 }, { device = "sim" }), tocha.zeros({ 1, 1, 2, 2 }, { device = "sim", dtype = "f16" }),
    tocha.rand({ 1, 2, 3, 4 }, { device = "sim", seed = 1 }),
    tocha.rand({ 3, 4 }, { device = "sim", seed = 2 }):transpose(1, 2), tocha.ones({ 1, 4 }, { device = "sim" }):expand(3, 4),
    tocha.ones({ 2, 2 }, { device = "sim", dtype = "f64" }), coroutine.create(function() end), io.stdout,
    -- empty tensors and shapes with a size 0
    { 0 }, { 2, 0 }, { 1, 0, 2, 2 }, tocha.empty({ 0 }, { device = "sim" }),
    tocha.zeros({ 2, 0, 3 }, { device = "sim", dtype = "i32" }), tocha.ones({ 3, 4 }, { device = "sim" }):narrow(2, 5, 0),
    -- tocha's other objects, as arguments anywhere
    tocha.event("sim"), tocha.event("sim"):record(), tocha.stream("sim"), tocha.graph(function() end, "sim"),
    tocha.Model.input({ -1, 1, 2, 2 }), tocha.UpsampleNearest2dForward.new(2, 2, 64), tocha.Elementwise.new("relu"),
    tocha.device("sim"),
    -- a second device's tensors and lists of ranks, for the collectives
    "sim:1", tocha.ones({ 4 }, { device = "sim:1" }), tocha.rand({ 2, 2 }, { device = "sim:1", seed = 3 }),
    { tocha.ones({ 4 }, { device = "sim" }), tocha.ones({ 4 }, { device = "sim:1" }) }, { "sim", "sim:1" },
    { op = "max" }, { root = 2 }, { staged = true },
  }
end

-- Lua's operators and metamethods on a value: a and b drawn from the pool.
local OPERATORS = {
  function(a, b) return a + b end, function(a, b) return a - b end, function(a, b) return a * b end,
  function(a, b) return a / b end, function(a, b) return a % b end, function(a, b) return a ^ b end,
  function(a) return -a end, function(a, b) return a .. b end, function(a, b) return a < b end,
  function(a, b) return a <= b end, function(a, b) return a == b end, function(a) return #a end,
  function(a, ...) return a(...) end, function(a) return tostring(a) end,
  function(a, b) return a[b] end, function(a, b, c) a[b] = c end,
}

-- The public surface: name -> function(args...) calling it.
local function surface(pool)
  local up = tocha.UpsampleNearest2dForward.new(2, 2, 64)
  local bwd = tocha.UpsampleNearest2dBackward.new(2, 2, 64)
  local k = tocha.kernel { source = "__device__ void f(float *x, int n) { (void)x; (void)n; }", name = "f",
    params = "f32* x, i32 n" }
  local t = tocha.ones({ 2, 3 }, { device = "sim" })
  local calls = {}
  local function add(name, fn) calls[#calls + 1] = { name, fn } end
  for _, name in ipairs({ "empty", "zeros", "ones", "full", "rand", "randn", "tensor", "manual_seed", "device",
    "synchronize", "compare", "allclose", "event", "time", "kernel", "launch_packed", "gradcheck",
    "builtin_kernel", "is_tensor", "arange", "range", "linspace", "eye", "empty_like", "zeros_like", "ones_like",
    "full_like", "rand_like", "randn_like", "cat", "stack" }) do
    add("tocha." .. name, tocha[name])
  end
  add("UpsampleNearest2dForward.new", tocha.UpsampleNearest2dForward.new)
  add("UpsampleNearest2dBackward.new", tocha.UpsampleNearest2dBackward.new)
  add("nn.UpsampleNearest2d", tocha.nn.UpsampleNearest2d)
  local stream = tocha.stream("sim")
  add("tocha.stream", tocha.stream)
  add("tocha.current_stream", tocha.current_stream)
  add("Stream:use", function(...) return stream:use(...) end)
  add("Stream:wait", function(...) return stream:wait(...) end)
  add("Stream:record", function(...) return stream:record(...) end)
  add("Stream:synchronize", function(...) return stream:synchronize(...) end)
  add("Stream.use", stream.use)
  add("Stream.wait", stream.wait)
  add("Model.input", tocha.Model.input)
  add("Model.node", tocha.Model.node)
  add("Model.op", tocha.Model.op)
  add("Model", tocha.Model.new)
  local mx = tocha.Model.input({ -1, 1, 2, 2 })
  local model = tocha.Model({ mx }, { up(mx) })
  add("Model:load", function(...) return model:load(...) end)
  add("Model:forward", function(...) return model:forward(...) end)
  add("Model.forward", model.forward)
  add("tocha.graph", tocha.graph)
  local graph = tocha.graph(function() end, "sim")
  add("Graph:replay", function(...) return graph:replay(...) end)
  add("Graph.replay", graph.replay)
  add("Model:forward_train", function(...) return model:forward_train(...) end)
  add("Model:backward", function(...) return model:backward(...) end)
  add("Model:capture", function(...) return model:capture(...) end)
  add("Model:parameters", function(...) return model:parameters(...) end)
  add("Model:load_parameters", function(...) return model:load_parameters(...) end)
  add("Node:named", function(...) return mx:named(...) end)
  add("tocha.load", tocha.load)
  add("tocha.load_npy", tocha.load_npy)
  add("tocha.bench", function(fn, o) if type(o) == "table" then o.reps = 1 end return tocha.bench(fn, o) end)
  add("Elementwise.new", tocha.Elementwise.new)
  add("ChannelCat.new", tocha.ChannelCat.new)
  add("ChannelChunk.new", tocha.ChannelChunk.new)
  local ops = { relu = tocha.Elementwise.new("relu"), mul = tocha.Elementwise.new("mul"),
    cat = tocha.ChannelCat.new(), chunk = tocha.ChannelChunk.new(2, 1), reduce = tocha.Reduce.new("max", 2),
    bias = tocha.ChannelBiasAdd.new(), bilinear = tocha.UpsampleBilinear2d.new { scale = 1.5 },
    pad = tocha.Pad.new({ 1, -1, 2, 0 }, { mode = "circular" }), embedding = tocha.Embedding.new(10, 4, { base = 0 }),
    cast = tocha.Cast.new("i64", "f32") }
  for kind, op in pairs(ops) do
    for _, name in ipairs({ "forward", "backward", "grid", "block", "pack_args", "pack_backward_args",
      "compute_concrete_output_shape", "backward_grid", "grid_for_launch", "pack_args_for_launch",
      "backward_grid_for_launch", "pack_backward_args_for_launch", "workspace_bytes" }) do
      if op[name] then
        add(kind .. ":" .. name, function(...) return op[name](op, ...) end)
        add(kind .. "." .. name, op[name])
      end
    end
  end
  add("tocha.set_float32_matmul_precision", tocha.set_float32_matmul_precision)
  -- (put back at once: a session left tuning every product would time each new shape)
  add("tocha.set_autotune", function(...)
    local old = tocha.set_autotune(...)
    tocha.set_autotune(old)
  end)
  add("BatchNorm2d.new", tocha.BatchNorm2d.new)
  add("UpsampleBilinear2d.new", tocha.UpsampleBilinear2d.new)
  add("Pad.new", tocha.Pad.new)
  add("Embedding.new", tocha.Embedding.new)
  add("Cast.new", tocha.Cast.new)
  add("Conv2d.new", tocha.Conv2d.new)
  add("tocha.matmul", tocha.matmul)
  add("memory.stats", tocha.memory.stats)
  add("memory.empty_cache", tocha.memory.empty_cache)
  add("memory.reset_peak", tocha.memory.reset_peak)
  for _, name in ipairs({ "all_reduce", "broadcast", "all_gather", "reduce_scatter" }) do
    add("comm." .. name, tocha.comm[name])
  end
  add("comm.nccl", tocha.comm.nccl)
  add("DataParallel", tocha.DataParallel)
  local x_in = tocha.Model.input({ -1, 4 })
  local dp = tocha.DataParallel(tocha.Model({ x_in }, { tocha.Linear.new(4, 2)(x_in) }), { "sim", "sim:1" }):load(2)
  for _, name in ipairs({ "load", "scatter", "forward_train", "backward", "all_reduce_gradients", "optimizers",
    "train_step", "parameters", "broadcast_parameters" }) do
    add("DataParallel:" .. name, function(...) return dp[name](dp, ...) end)
    add("DataParallel." .. name, dp[name])
  end
  add("image.read", tocha.image.read)
  add("image.write", tocha.image.write)
  for name, fn in pairs(tocha.Tensor) do
    add("Tensor:" .. name, function(...) return fn(t, ...) end)
    add("Tensor." .. name, fn) -- a dot for the colon: the first value drawn stands for self
  end
  for _, name in ipairs({ "forward", "backward", "grid", "block", "pack_args", "pack_backward_args",
    "compute_concrete_output_shape", "backward_grid", "grid_for_launch", "pack_args_for_launch",
    "param_shapes", "param_init_data", "forward_output_row_stride", "backward_grad_output_row_stride" }) do
    add("UpsampleNearest2dForward:" .. name, function(...) return up[name](up, ...) end)
    add("UpsampleNearest2dForward." .. name, up[name])
  end
  add("UpsampleNearest2dBackward:run", function(...) return bwd:run(...) end)
  add("UpsampleNearest2dForward.tuned", function(a, b, c, d) return tocha.UpsampleNearest2dForward.tuned(a, b, c, d) end)
  add("tocha.nvtx.push", function(...)
    local ok, r = pcall(tocha.nvtx.push, ...)
    if ok then tocha.nvtx.pop() end
    if not ok then error(r, 0) end
  end)
  add("tocha.nvtx.range", tocha.nvtx.range)
  add("tocha.autotune", tocha.autotune)
  local tuned = tocha.autotune { name = "fuzz", configs = { { b = 32 }, { b = 64 } }, outputs = { 1 },
    build = function() return k end, launch = function(kk, cfg, x, n) kk:launch(1, cfg.b, x, n) end }
  add("Autotune:choice", function(...) return tuned:choice(...) end)
  add("Autotune:call", function(...) return tuned(...) end)
  add("tocha.sweep", function(spec)
    if type(spec) == "table" then spec.out, spec.progress, spec.reps, spec.warmup = nil, false, 1, 0 end
    return tocha.sweep(spec)
  end)
  add("Kernel:launch", function(...) return k:launch(...) end)
  add("Kernel:build", function(...) return k:build(...) end)
  for _, name in ipairs({ "info", "occupancy", "ptx", "cubin", "sass" }) do
    add("Kernel:" .. name, function(...) return k[name](k, ...) end)
  end
  add("tocha.kernel with knobs", function(a, b)
    return tocha.kernel { source = "__device__ void f(float *x, int n) { (void)x; (void)n; }", name = "f",
      params = "f32* x, i32 n", options = a, launch_bounds = b }
  end)
  add("Kernel.launch", k.launch)
  -- Metamethods of tensors (fresh ones, views and freed ones from the pool) and of every other
  -- object tocha hands out.
  -- (Plain Lua values among the operands raise Lua's own errors: those calls are not made. The
  -- objects other than tensors are tables: reading and writing their fields is Lua's.)
  local objects = { tocha.event("sim"), stream, graph, k, model, mx, up, ops.relu, tocha.device("sim") }
  local function own(v)
    local mt = type(v) == "table" and getmetatable(v)
    return tocha.is_tensor(v) or (type(mt) == "table" and rawget(mt, "__add") ~= nil)
  end
  for i, op in ipairs(OPERATORS) do
    add("operator " .. i .. " on a tensor", function(b, c, ...) return op(tocha.rand({ 2, 3 }, { device = "sim", seed = 3 }), b, c, ...) end)
    if i < 15 then
      add("operator " .. i .. " on a value", function(a, b, ...)
        local unary = i == 7 or i >= 12
        -- Lua 5.1 compares values of two types without asking any metamethod (but cdata's).
        -- and two tables only when both carry the same metamethod.
        -- (and with a cdata among them, LuaJIT asks the FFI, which knows only tensors of ours).
        local comparable = (i ~= 9 and i ~= 10) or tocha.is_tensor(a) or tocha.is_tensor(b)
          or (type(a) == "table" and type(b) == "table" and own(a) and own(b))
        -- (LuaJIT does the arithmetic of a cdata it knows before asking the other operand.)
        if comparable and (own(a) or (own(b) and not unary and type(a) ~= "cdata")) then return op(a, b, ...) end
      end)
      add("operator " .. i .. " on an object", function(b, c, ...)
        local a = objects[math.random(#objects)]
        if (i == 9 or i == 10) and not own(b) then b = objects[math.random(#objects)] end
        return op(a, b, c, ...)
      end)
    end
  end
  -- Events, graphs and model building with every Lua type.
  local event = tocha.event("sim"):record()
  add("Event:record", function(...) return event:record(...) end)
  add("Event:elapsed", function(...) return event:elapsed(...) end)
  add("Event.elapsed", event.elapsed)
  add("Event.record", event.record)
  add("tocha.graph of a call", function(name, a, b)
    local target = calls[math.random(#calls)][2]
    return tocha.graph(function() return target(a, b) end, name)
  end)
  add("Graph of up:forward, then its output freed and replayed", function()
    local x = tocha.ones({ 1, 1, 2, 2 }, { device = "sim" })
    local g = tocha.graph(function() return up:forward(x) end, "sim")
    g.outputs[1]:free()
    x:free()
    return g:replay()
  end)
  add("op(values)", function(...) return up(...) end)
  add("Model(values)", function(a, b) return tocha.Model(a, b) end)
  add("Model of an input and values", function(a) return tocha.Model({ mx }, { up(mx), a }) end)
  local _ = pool
  return calls
end

print(("seed %d"):format(SEED))
math.randomseed(SEED)
local found = {}
local pool = values()
local calls = surface(pool)
for n = 1, CALLS do
  if n % 200 == 0 then pool = values() end -- fresh tensors now and then
  local entry = calls[math.random(#calls)]
  local args, count = {}, math.random(0, 5)
  for i = 1, count do args[i] = pool[math.random(#pool)] end
  if os.getenv("TOCHA_FUZZ_TRACE") then
    local d = {}
    for i = 1, count do d[i] = type(args[i]) == "table" and "table" or tostring(args[i]):sub(1, 40) end
    io.stderr:write(n, " ", entry[1], "(", table.concat(d, ", "), ")\n")
  end
  local ok, err = pcall(entry[2], unpack(args, 1, count))
  if not ok then
    local text = tostring(err)
    -- a position may come first (the caller's line), then the tocha error itself
    if not (text:find("^[^\n]-tocha[%w._: ]-: ") or text:find("^tocha[%w._: ]-: ")) then
      local key = entry[1] .. ": " .. text:sub(1, 160)
      if not found[key] then
        found[key] = true
        found[#found + 1] = key
      end
    end
  end
end
-- The session still works.
local y = tocha.UpsampleNearest2dForward.new(2, 2, 64):forward(tocha.ones({ 1, 1, 2, 2 }, { device = "sim" }))
assert(y:numel() == 16, "the session no longer works")
print(("calls %d findings %d"):format(CALLS, #found))
for _, f in ipairs(found) do print(f) end
