-- Several devices in one process: the simulator's sim, sim:1, ... (TOCHA_SIM_DEVICES), each
-- with memory of its own; tensors and ops on any of them, copies between them, errors that
-- name both devices when tensors of two meet; and tocha.comm's collectives, checked against
-- references computed here on random inputs of every dtype.
local tocha = require "tocha"
local process = require "support.process"
local reload = require "support.reload"

-- Random small integers from -4 to 4 (seeded): their sums, products of up to 4 and means over
-- 2 or 4 ranks are exact in every dtype, so results compare exactly.
local function small_ints(n, seed)
  local state, out = seed, {}
  for i = 1, n do
    state = (state * 1103515245 + 12345) % 2147483648
    out[i] = math.floor(state / 65536) % 9 - 4
  end
  return out
end

local function values(t) return t:cast("f64"):to_table(true) end

local FOLD = {
  sum = function(a, b) return a + b end, mean = function(a, b) return a + b end,
  prod = function(a, b) return a * b end, max = math.max, min = math.min,
}

-- The reduction over ranks of lists (tables of numbers of one length), in rank order.
local function reference(lists, op)
  local out = {}
  for i = 1, #lists[1] do
    local acc = lists[1][i]
    for r = 2, #lists do acc = FOLD[op](acc, lists[r][i]) end
    out[i] = op == "mean" and acc / #lists or acc
  end
  return out
end

-- One tensor a rank of shape on devices, from small_ints; returns the tensors and their values.
local function ranks(devices, shape, dt, seed)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  local tensors, lists = {}, {}
  for r, dev in ipairs(devices) do
    lists[r] = small_ints(n, seed + r)
    tensors[r] = tocha.tensor(lists[r], { dtype = dt, device = dev }):reshape(shape)
  end
  return tensors, lists
end

local function poisoned(shape, dt, dev) return tocha.full(shape, 77, { dtype = dt, device = dev }) end

local TWO = { "sim", "sim:1" }

describe("several sim devices", function()
  it("lists sim and sim:1 by default, sim:0 naming sim", function()
    local names = {}
    for _, d in ipairs(tocha.devices()) do if d.kind == "sim" then names[#names + 1] = d.name end end
    assert.are.same({ "sim", "sim:1" }, names)
    assert.are.equal(tocha.device("sim"), tocha.device("sim:0"))
    assert.are.equal("sim:1", tocha.device("sim:1"):info().name)
    assert.has_error(function() tocha.device("sim:2") end,
      "tocha.device: device: sim:2 does not exist (this process has sim:0 to sim:1; TOCHA_SIM_DEVICES sets how many, at most 8)")
    assert.has_error(function() tocha.device("sim:x") end,
      "tocha.device: device: unknown device 'sim:x' (expected cuda, cuda:N, sim or sim:N)")
  end)

  it("takes TOCHA_SIM_DEVICES from 1 to 8 and refuses anything else by name", function()
    local script = process.write_script([[
      local tocha = require "tocha"
      local names = {}
      for _, d in ipairs(tocha.devices()) do if d.kind == "sim" then names[#names + 1] = d.name end end
      print(table.concat(names, " "))
    ]])
    local out, err, status = process.run { args = { script }, env = { TOCHA_SIM_DEVICES = "4" } }
    assert.are.equal(0, status, err)
    assert.are.equal("sim sim:1 sim:2 sim:3\n", out)
    out, err, status = process.run { args = { script }, env = { TOCHA_SIM_DEVICES = "1" } }
    assert.are.equal(0, status, err)
    assert.are.equal("sim\n", out)
    for _, bad in ipairs({ "0", "9", "two", "2x", "-1" }) do
      out, err, status = process.run { args = { script }, env = { TOCHA_SIM_DEVICES = bad } }
      assert.are.equal("", out)
      assert.are_not.equal(0, status)
      assert.truthy(err:find(("TOCHA_SIM_DEVICES: expected a whole number from 1 to 8, got '%s'"):format(bad), 1, true), err)
    end
    os.remove(script)
  end)

  it("keeps each device's memory apart", function()
    collectgarbage("collect")
    local before0, before1 = tocha.memory.stats("sim"), tocha.memory.stats("sim:1")
    local t = tocha.zeros({ 1024, 256 }, { device = "sim:1" }) -- 1 MiB
    local after0, after1 = tocha.memory.stats("sim"), tocha.memory.stats("sim:1")
    assert.are.equal(before1.allocated + 2 ^ 20, after1.allocated)
    assert.are.equal(before0.allocated, after0.allocated)
    assert.is_true(after1.reserved >= after1.allocated)
    t:free()
    assert.are.equal(before1.allocated, tocha.memory.stats("sim:1").allocated)
  end)

  it("runs kernels and ops on sim:1 as on sim, and copies between them", function()
    local x0 = tocha.rand({ 2, 3, 5, 4 }, { device = "sim", seed = 5 })
    local x1 = x0:to("sim:1")
    assert.are.equal("sim:1", x1:device())
    assert.are.same(values(x0), values(x1))
    local up = tocha.UpsampleNearest2dForward.new(2, 3, 64)
    local y0, y1 = up:forward(x0), up:forward(x1)
    assert.are.equal("sim:1", y1:device())
    assert.are.same(values(y0), values(y1))
    local conv = tocha.Conv2d.new(3, 4, 3, { padding = 1, bias = false, dtype = "f64" })
    local w = tocha.rand({ 4, 3, 3, 3 }, { dtype = "f64", seed = 2, device = "sim" })
    local xd = x0:cast("f64")
    local c0 = conv:forward(xd, w)
    local c1 = conv:forward(xd:to("sim:1"), w:to("sim:1"))
    assert.are.same(values(c0), values(c1))
    -- A strided view copies across too.
    local v = x0:transpose(3, 4)
    assert.are.same(values(v), values(v:to("sim:1")))
  end)

  it("runs streams, events and graph replays on sim:1", function()
    local up = tocha.UpsampleNearest2dForward.new(2, 2, 64)
    local x = tocha.rand({ 1, 2, 4, 4 }, { device = "sim:1", seed = 4 })
    local want = values(up:forward(x:to("sim")))
    local s = tocha.stream("sim:1")
    local y = s:use(function() return up:forward(x) end)
    s:synchronize()
    assert.are.equal("sim:1", y:device())
    assert.are.same(want, values(y))
    assert.is_true(tocha.time(function() up:forward(x) end, "sim:1") >= 0)
    local x_in = tocha.Model.input({ -1, 2, 4, 4 })
    local m = tocha.Model({ x_in }, { up(x_in) }):load(1, "sim:1")
    local replayed = m:capture(1):replay({ x })[1]
    assert.are.equal("sim:1", replayed:device())
    assert.are.same(want, values(replayed))
    assert.has_error(function() s:use(function() up:forward(x, tocha.empty({ 1, 2, 8, 8 }, { device = "sim" })) end) end)
  end)

  it("names both devices when tensors of two meet", function()
    local a = tocha.ones({ 3 }, { device = "sim" })
    local b = tocha.ones({ 3 }, { device = "sim:1" })
    assert.has_error(function() return a + b end,
      "tocha.Tensor.__add: right operand: on sim:1, but left operand is on sim (move one with :to())")
    local up = tocha.UpsampleNearest2dForward.new(2, 2, 64)
    local x = tocha.rand({ 1, 1, 2, 2 }, { device = "sim:1", seed = 1 })
    local dst = tocha.empty({ 1, 1, 4, 4 }, { device = "sim" })
    assert.has_error(function() up:forward(x, dst) end)
    local ok, err = pcall(up.forward, up, x, dst)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("sim:1", 1, true) and tostring(err):find("on sim", 1, true), err)
  end)
end)

describe("tocha.comm", function()
  local dtypes = { "f64", "f32", "f16", "bf16", "i32" }

  it("all_reduce: sum, mean, prod, max and min in every dtype, every rank the same", function()
    for _, dt in ipairs(dtypes) do
      for _, op in ipairs({ "sum", "mean", "prod", "max", "min" }) do
        if op ~= "mean" or dt ~= "i32" then
          local tensors, lists = ranks(TWO, { 3, 7 }, dt, #dt + #op)
          assert.are.equal(tensors, tocha.comm.all_reduce(tensors, { op = op }))
          local want = reference(lists, op)
          for r, t in ipairs(tensors) do
            assert.are.equal(dt, t:dtype())
            assert.are.equal(TWO[r], t:device())
            assert.are.same(want, values(t), ("%s %s rank %d"):format(dt, op, r))
          end
        end
      end
    end
  end)

  it("all_reduce on a single rank leaves it, and on empty tensors does nothing", function()
    local t = tocha.tensor({ 1, 2, 3 }, { device = "sim:1" })
    tocha.comm.all_reduce({ t })
    assert.are.same({ 1, 2, 3 }, values(t))
    local e0, e1 = tocha.empty({ 0, 4 }, { device = "sim" }), tocha.empty({ 0, 4 }, { device = "sim:1" })
    tocha.comm.all_reduce({ e0, e1 })
    assert.are.same({ 0, 4 }, e1:shape())
  end)

  it("refuses a collective inside a graph capture of one rank's device, and the ranks keep their values", function()
    local a, b = tocha.tensor({ 1, 2 }, { device = "sim" }), tocha.tensor({ 3, 4 }, { device = "sim:1" })
    local ok, err = pcall(tocha.graph, function() tocha.comm.all_reduce({ a, b }) end, "sim")
    assert.is_false(ok)
    assert.truthy(tostring(err):find("tocha.comm.all_reduce: cannot copy between devices while a graph is being captured on sim",
      1, true), err)
    assert.are.same({ { 1, 2 }, { 3, 4 } }, { values(a), values(b) })
    tocha.comm.all_reduce({ a, b }) -- outside a capture, as ever
    assert.are.same({ { 4, 6 }, { 4, 6 } }, { values(a), values(b) })
  end)

  it("works after tocha's modules are loaded again (busted, between spec files)", function()
    -- A second instance of every module but the tensor methods (an FFI metatype is set once):
    -- the staged path's clone onto a device of the new instance runs the first instance's
    -- Tensor:clone, which must take that device as its own.
    reload.with_second_load(function(again)
      assert.are_not.equal(tocha, again)
      assert.are.equal(tocha.device("sim:1"), again.device("sim:1"))
      local tensors, lists = ranks(TWO, { 3, 5 }, "f32", 5)
      again.comm.all_reduce(tensors, { op = "max", staged = true })
      local want = reference(lists, "max")
      for r = 1, 2 do assert.are.same(want, values(tensors[r])) end
      assert.are.equal("sim:1", tensors[1]:clone(again.device("sim:1")):device())
    end)
  end)

  it("broadcast copies the root to every rank", function()
    for _, root in ipairs({ 1, 2 }) do
      local tensors, lists = ranks(TWO, { 4, 5 }, "bf16", 10 * root)
      tocha.comm.broadcast(tensors, { root = root })
      for _, t in ipairs(tensors) do assert.are.same(lists[root], values(t)) end
    end
  end)

  it("all_gather joins every rank's input along the first dimension, into given or new outputs", function()
    local tensors, lists = ranks(TWO, { 2, 3 }, "f32", 3)
    local want = {}
    for _, l in ipairs(lists) do for _, v in ipairs(l) do want[#want + 1] = v end end
    local out = tocha.comm.all_gather(tensors)
    for r, o in ipairs(out) do
      assert.are.same({ 4, 3 }, o:shape())
      assert.are.equal(TWO[r], o:device())
      assert.are.same(want, values(o))
    end
    local given = { poisoned({ 4, 3 }, "f32", "sim"), poisoned({ 4, 3 }, "f32", "sim:1") }
    assert.are.equal(given, tocha.comm.all_gather(tensors, given))
    for _, o in ipairs(given) do assert.are.same(want, values(o)) end
  end)

  it("reduce_scatter gives rank i the reduction of every rank's i-th slice", function()
    for _, op in ipairs({ "sum", "max", "mean" }) do
      local tensors, lists = ranks(TWO, { 6, 5 }, "f16", 7)
      local out = tocha.comm.reduce_scatter(tensors, { poisoned({ 3, 5 }, "f16", "sim"), poisoned({ 3, 5 }, "f16", "sim:1") }, { op = op })
      local full = reference(lists, op)
      for r, o in ipairs(out) do
        assert.are.same({ 3, 5 }, o:shape())
        local want = {}
        for i = 1, 15 do want[i] = full[(r - 1) * 15 + i] end
        assert.are.same(want, values(o), op .. " rank " .. r)
      end
    end
  end)

  it("runs over four ranks in a process of four sim devices", function()
    local script = process.write_script([[
      local tocha = require "tocha"
      local devs = { "sim", "sim:1", "sim:2", "sim:3" }
      local t = {}
      for r, d in ipairs(devs) do t[r] = tocha.tensor({ r, 10 * r, -r, r * r, 0, 1, 2, 3 }, { dtype = "f32", device = d }) end
      tocha.comm.all_reduce(t)
      local out = {}
      for r = 1, 4 do out[r] = table.concat(t[r]:to_table(true), ",") end
      print(table.concat(out, " "))
      local s = tocha.comm.reduce_scatter(t, nil, { op = "max" })
      out = {}
      for r = 1, 4 do out[r] = table.concat(s[r]:to_table(true), ",") .. "@" .. s[r]:device() end
      print(table.concat(out, " "))
    ]])
    local out, err, status = process.run { args = { script }, env = { TOCHA_SIM_DEVICES = "4" } }
    os.remove(script)
    assert.are.equal(0, status, err)
    -- Sums over r = 1..4: r -> 10, 10r -> 100, -r -> -10, r*r -> 30; the constants times 4.
    local sum = "10,100,-10,30,0,4,8,12"
    assert.are.equal(("%s %s %s %s\n10,100@sim -10,30@sim:1 0,4@sim:2 8,12@sim:3\n"):format(sum, sum, sum, sum), out)
  end)

  it("loads NCCL at run time and says why not when it cannot", function()
    local version, why = tocha.comm.nccl()
    if version then assert.truthy(version:match("^2%.%d+%.%d+$"), version) else assert.truthy(why:find("^NCCL is missing"), why) end
    local out, err, status = process.run { args = { "-e", "print(select(2, require('tocha').comm.nccl()))" },
      env = { TOCHA_NCCL_LIBRARY = "/nonexistent/libnccl.so.2" } }
    assert.are.equal(0, status, err)
    assert.are.equal("NCCL is missing: TOCHA_NCCL_LIBRARY=/nonexistent/libnccl.so.2 could not be loaded\n", out)
  end)

  it("takes the staged path off cuda, and tocha_nccl_collective refuses what NCCL cannot run", function()
    if not tocha.comm.nccl() then return end -- the C checks below run once NCCL has loaded
    local ffi = require "ffi"
    local C = require("tocha.ffi").C
    local a, b = tocha.ones({ 4 }, { device = "sim" }), tocha.ones({ 4 }, { device = "sim:1" })
    local pair = ffi.new("tocha_tensor*[2]", { a, b })
    local function fails(want, ...)
      assert.are.equal(-1, C.tocha_nccl_collective(...))
      assert.are.equal(want, ffi.string(C.tocha_last_error()))
    end
    fails("inputs[1]: on sim: NCCL runs on cuda devices only", C.TOCHA_ALL_REDUCE, C.TOCHA_REDUCE_SUM, 0, 2, pair, pair)
    fails("kind: unknown collective 7", 7, 0, 0, 2, pair, pair)
    fails("op: unknown reduction 9", C.TOCHA_ALL_REDUCE, 9, 0, 2, pair, pair)
    fails("root: expected a rank from 0 to 1, got 2", C.TOCHA_BROADCAST, 0, 2, 2, pair, pair)
    fails("n: expected 1 to 24 ranks, got 0", C.TOCHA_ALL_REDUCE, 0, 0, 0, pair, pair)
    fails("inputs, outputs: expected arrays of n tensors", C.TOCHA_ALL_REDUCE, 0, 0, 2, nil, pair)
    -- Through tocha.comm, sim tensors take the staged path whether NCCL loads or not.
    tocha.comm.all_reduce({ a, b })
    assert.are.same({ 2, 2, 2, 2 }, values(b))
    assert.has_error(function() tocha.comm.all_reduce({ a, b }, { staged = "yes" }) end,
      'tocha.comm.all_reduce: options.staged: expected a boolean, got "yes"')
  end)

  it("refuses bad ranks, options and outputs by name", function()
    local a, b = tocha.ones({ 4 }, { device = "sim" }), tocha.ones({ 4 }, { device = "sim:1" })
    local function on1(shape, dt) return tocha.ones(shape, { device = "sim:1", dtype = dt }) end
    local function on0(shape) return tocha.ones(shape, { device = "sim" }) end
    local comm = tocha.comm
    local cases = {
      { function() comm.all_reduce(a) end,
        "tocha.comm.all_reduce: tensors: expected a list of tensors, one a device, got a tensor (a list of one is {t})" },
      { function() comm.all_reduce({}) end, "tocha.comm.all_reduce: tensors: expected at least one tensor, got an empty list" },
      { function() comm.all_reduce({ a, 3 }) end, "tocha.comm.all_reduce: tensors[2]: expected a tensor, got 3" },
      { function() comm.all_reduce({ a, a }) end,
        "tocha.comm.all_reduce: tensors[2]: on sim, as tensors[1] is: each rank needs a device of its own" },
      { function() comm.all_reduce({ a, on1({ 5 }) }) end, "tocha.comm.all_reduce: tensors[2]: shape [5], but tensors[1] is [4]" },
      { function() comm.all_reduce({ a, on1({ 4 }, "f16") }) end, "tocha.comm.all_reduce: tensors[2]: dtype f16, but tensors[1] is f32" },
      { function() comm.all_reduce({ a, b }, { op = "xor" }) end,
        'tocha.comm.all_reduce: options.op: expected one of sum, mean (or avg), prod, max, min, got "xor"' },
      { function() comm.all_reduce({ a:cast("i32"), b:cast("i32") }, { op = "mean" }) end,
        "tocha.comm.all_reduce: options.op: mean averages, which needs a float dtype, got i32" },
      { function() comm.broadcast({ a, b }, { root = 3 }) end, "tocha.comm.broadcast: options.root: expected a rank from 1 to 2, got 3" },
      { function() comm.all_gather({ a, b }, { a, b }) end, "tocha.comm.all_gather: outputs[1]: shape [4], expected [8]" },
      { function() comm.all_gather({ a, b }, { on1({ 8 }), on0({ 8 }) }) end,
        "tocha.comm.all_gather: outputs[1]: on sim:1, but inputs[1] is on sim" },
      { function() comm.all_gather({ a, b }, { on0({ 8 }) }) end, "tocha.comm.all_gather: outputs: 1 tensors for 2 ranks" },
      { function() comm.all_gather({ a, b }, { staged = true }) end,
        "tocha.comm.all_gather: outputs: got a table of options where the outputs go: pass nil before the options" },
      { function() comm.all_gather({ a, b }, nil, { op = "bogus" }) end, 'tocha.comm.all_gather: options.op: all_gather reduces nothing, got "bogus"' },
      { function() comm.reduce_scatter({ on0({ 3 }), on1({ 3 }) }) end,
        "tocha.comm.reduce_scatter: inputs[1]: its first dimension 3 does not divide among 2 ranks" },
    }
    for _, c in ipairs(cases) do assert.has_error(c[1], c[2]) end
    local freed = tocha.ones({ 4 }, { device = "sim:1" })
    freed:free()
    assert.has_error(function() tocha.comm.all_reduce({ a, freed }) end, "tocha.comm.all_reduce: tensors[2]: the tensor was freed")
    local m = tocha.ones({ 4, 4 }, { device = "sim:1" })
    assert.has_error(function() tocha.comm.all_reduce({ tocha.ones({ 4, 4 }, { device = "sim" }), m:transpose(1, 2) }) end,
      "tocha.comm.all_reduce: tensors[2]: expected a contiguous tensor (a collective works on whole buffers), got a strided view; "
      .. "use :contiguous()")
    -- The process goes on: the tensors are untouched and a good call works.
    tocha.comm.all_reduce({ a, b })
    assert.are.same({ 2, 2, 2, 2 }, values(b))
  end)
end)

-- On the GPU machine: every cuda device a rank, each collective through NCCL against the staged
-- path and the reference (one GPU makes one rank: NCCL's own path still runs).
describe("tocha.comm through NCCL #gpu", function()
  it("gives the staged path's and the reference's values on every cuda device", function()
    local version, why = tocha.comm.nccl()
    assert.truthy(version, why)
    local cudas = {}
    for _, d in ipairs(tocha.devices()) do if d.kind == "cuda" then cudas[#cudas + 1] = d.name end end
    -- 1, 2 or 4 ranks: the small integers' products and means stay exact (at most 4 factors,
    -- means over a power of two)
    local R = #cudas >= 4 and 4 or math.min(#cudas, 2)
    for i = #cudas, R + 1, -1 do cudas[i] = nil end
    for _, dt in ipairs({ "f32", "bf16", "f64", "i32" }) do
      for _, op in ipairs({ "sum", "mean", "prod", "max", "min" }) do
        if op ~= "mean" or dt ~= "i32" then
          local tensors, lists = ranks(cudas, { 2 * R, 9 }, dt, #dt * 3 + #op)
          local staged = {}
          for r, t in ipairs(tensors) do staged[r] = t:clone() end
          tocha.comm.all_reduce(tensors, { op = op })
          tocha.comm.all_reduce(staged, { op = op, staged = true })
          local want = reference(lists, op)
          for r = 1, R do
            assert.are.same(want, values(tensors[r]), dt .. " " .. op)
            assert.are.same(values(staged[r]), values(tensors[r]), dt .. " " .. op)
          end
          local outs = tocha.comm.reduce_scatter(tensors, nil, { op = op })
          local souts = tocha.comm.reduce_scatter(staged, nil, { op = op, staged = true })
          for r = 1, R do assert.are.same(values(souts[r]), values(outs[r]), dt .. " reduce_scatter " .. op) end
        end
      end
      local tensors, lists = ranks(cudas, { 3, 4 }, dt, 77)
      local gathered = tocha.comm.all_gather(tensors)
      local want = {}
      for _, l in ipairs(lists) do for _, v in ipairs(l) do want[#want + 1] = v end end
      for r = 1, R do assert.are.same(want, values(gathered[r])) end
      tocha.comm.broadcast(tensors, { root = R })
      for r = 1, R do assert.are.same(lists[R], values(tensors[r])) end
    end
  end)
end)

describe("copies between GPUs #gpu", function()
  it("copies cuda:0 to every other GPU and back, views too", function()
    local cudas = {}
    for _, d in ipairs(tocha.devices()) do if d.kind == "cuda" then cudas[#cudas + 1] = d.name end end
    if #cudas < 2 then
      pending("one GPU here: copies between GPUs need two")
      return
    end
    local x = tocha.rand({ 3, 1000, 37 }, { device = cudas[1], seed = 11 })
    local want = values(x)
    for i = 2, #cudas do
      local y = x:to(cudas[i])
      assert.are.equal(cudas[i], y:device())
      assert.are.same(want, values(y))
      assert.are.same(want, values(y:to(cudas[1])))
      assert.are.same(values(x:transpose(2, 3)), values(x:transpose(2, 3):to(cudas[i])))
      assert.has_error(function() return x + y end)
    end
  end)
end)
