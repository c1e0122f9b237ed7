-- Empty tensors (a size 0 in some dimension): constructors, facts, reads and writes, copies,
-- casts, fills and comparisons, views (narrow of length 0, view and reshape to and from sizes
-- 0), printing, .npy and safetensors files, tensor math and reductions (PyTorch's values:
-- sum 0, prod 1, mean, var and std NaN; max, min and the arg forms refused over an empty
-- dimension), ops and plans refusing them; and, in a process of its own, that none of it builds
-- or launches a kernel, inside a graph capture too. On sim and, tagged #gpu, on cuda.
local tocha = require "tocha"
require "tocha.assertions"
local ffi = require "ffi"
local ref = require "support.reference"
local files = require "support.files"
local process = require "support.process"
local fails_with = require("support.assertions").fails_with

local DTYPES = { "f32", "f64", "f16", "bf16", "u8", "i32", "i64" }
local SHAPES = { { 0 }, { 2, 0, 3 }, { 0, 0 }, { 3, 0 }, { 1, 1, 1, 1, 1, 1, 1, 0 } }

-- PyTorch's strides of a dense tensor: a size 0 counts as 1 (torch.empty(2, 0, 3).stride()
-- is (3, 3, 1)).
local function torch_strides(shape)
  local s, stride = {}, 1
  for i = #shape, 1, -1 do
    s[i] = stride
    stride = stride * math.max(shape[i], 1)
  end
  return s
end

local function is_nan(v) return v ~= v end

local function all_nan(list)
  for _, v in ipairs(list) do
    if not is_nan(v) then return false end
  end
  return true
end

describe("empty tensors", function()
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name
      local function opts(dt, extra)
        local o = { dtype = dt or "f32", device = device }
        for k, v in pairs(extra or {}) do o[k] = v end
        return o
      end

      describe("constructors", function()
        it("make tensors with a size 0 of every dtype and shape, holding no device memory", function()
          collectgarbage("collect")
          local before = tocha.memory.stats(device)
          local kept = {}
          for _, dt in ipairs(DTYPES) do
            for _, shape in ipairs(SHAPES) do
              local made = {
                tocha.empty(shape, opts(dt)), tocha.zeros(shape, opts(dt)), tocha.ones(shape, opts(dt)),
                tocha.full(shape, 7, opts(dt)), tocha.rand(shape, opts(dt, { seed = 1 })),
                tocha.randn(shape, opts(dt, { seed = 2 })),
              }
              for _, t in ipairs(made) do
                assert.are.same(shape, t:shape())
                assert.are.equal(0, t:numel())
                assert.are.equal(0, t:nbytes())
                assert.are.equal(dt, t:dtype())
                assert.are.equal(#shape, t:dim())
                assert.are.equal(device, t:device():match("^[a-z]+"))
                assert.is_true(t:is_contiguous())
                assert.are.same(torch_strides(shape), t:stride())
                assert.are.same({}, t:to_table(true))
                kept[#kept + 1] = t
              end
            end
          end
          local after = tocha.memory.stats(device)
          assert.are.equal(before.allocated, after.allocated)
          assert.are.equal(before.allocations, after.allocations)
          assert.are.equal(#DTYPES * #SHAPES * 6, #kept)
        end)

        it("take the sizes as numbers too", function()
          assert.are.same({ 2, 0 }, tocha.zeros(2, 0, opts()):shape())
          assert.are.same({ 0 }, tocha.ones(0, opts("i64")):shape())
        end)

        it("refuse a negative, fractional or NaN size, naming it", function()
          fails_with("tocha.empty: shape[1]: size must be a non-negative integer, got -1", function() tocha.empty({ -1 }) end)
          fails_with("tocha.zeros: shape[2]: size must be a non-negative integer, got -2", function() tocha.zeros(0, -2) end)
          fails_with("tocha.full: shape[1]: size must be a non-negative integer, got 0.5", function() tocha.full({ 0.5 }, 1) end)
          fails_with("tocha.rand: shape[2]: size must be a non-negative integer, got nan", function() tocha.rand({ 0, 0 / 0 }) end)
        end)

        it("read empty tables in tocha.tensor as a size 0, as torch.tensor([]) does", function()
          local a = tocha.tensor({}, opts())
          assert.are.same({ 0 }, a:shape())
          local b = tocha.tensor({ {}, {}, {} }, opts("i32"))
          assert.are.same({ 3, 0 }, b:shape())
          assert.are.same({ {}, {}, {} }, b:to_table())
          fails_with("tocha.tensor: data[2]: ragged nesting: expected 0 elements, got 1",
            function() tocha.tensor({ {}, { 1 } }) end)
          fails_with("tocha.tensor: data: expected a list without holes or other keys, got 1 keys",
            function() tocha.tensor({ x = 1 }) end)
        end)

        it("free once, and refuse use after it", function()
          local t = tocha.zeros({ 2, 0 }, opts())
          t:free()
          t:free()
          assert.is_true(t:is_freed())
          fails_with("tocha.Tensor:fill: tensor: tensor was freed", function() t:fill(1) end)
          assert.are.equal("tocha.Tensor f32 [2x0] " .. t:device() .. " (freed)", tostring(t))
        end)
      end)

      describe("reads, writes and printing", function()
        it("give nested tables of the shape with no numbers", function()
          assert.are.same({ {}, {} }, tocha.zeros({ 2, 0 }, opts()):to_table())
          assert.are.same({}, tocha.zeros({ 0, 2 }, opts()):to_table())
          assert.are.same({ { {}, {} } }, tocha.zeros({ 1, 2, 0 }, opts()):to_table())
        end)

        it("refuse item(), saying the tensor has no element", function()
          fails_with("tocha.Tensor:item: self: item() of an empty tensor (shape [2, 0, 3]): it has no element",
            function() tocha.empty({ 2, 0, 3 }, opts()):item() end)
        end)

        it("read and write no bytes", function()
          local t = tocha.empty({ 0, 4 }, opts("i32"))
          assert.are.equal(t, t:write(""))
          local buf = ffi.new("int32_t[1]", 42)
          t:read(buf)
          assert.are.equal(42, buf[0]) -- untouched
          assert.are.equal(0, ffi.sizeof(t:to_host()))
          fails_with("tocha.Tensor:read: range: elements 0..1 are outside the tensor's 0",
            function() t:read(buf, 0, 1) end)
        end)

        it("print the one line naming the tensor, marked empty", function()
          local t = tocha.zeros({ 2, 0, 3 }, opts("bf16"))
          local name = t:device()
          assert.are.equal("tocha.Tensor bf16 [2x0x3] " .. name .. " (empty)", tostring(t))
          assert.are.equal(tostring(t), t:summary())
        end)
      end)

      describe("copies, casts, fills and comparisons", function()
        it("copy, clone, move and cast to every dtype", function()
          local x = tocha.zeros({ 2, 0, 3 }, opts("f16"))
          for _, dt in ipairs(DTYPES) do
            local y = x:cast(dt)
            assert.are.same({ 2, 0, 3 }, y:shape())
            assert.are.equal(dt, y:dtype())
            local z = tocha.ones({ 2, 0, 3 }, opts(dt))
            assert.are.equal(z, y:cast_into(z))
          end
          assert.are.same({ 2, 0, 3 }, x:clone():shape())
          assert.are.same({ 2, 0, 3 }, x:to("sim"):shape())
          assert.are.equal(x, x:copy(tocha.ones({ 2, 0, 3 }, opts("f16"))))
          assert.are.equal(x, x:fill(5))
          assert.are.equal(x, x:uniform(3, -1, 1))
          assert.are.equal(x, x:normal(3, 0, 1))
          fails_with("tocha.Tensor:copy: src: shapes differ: [2x0x3] and [2x3]",
            function() x:copy(tocha.ones({ 2, 3 }, opts("f16"))) end)
        end)

        it("compare equal with nothing mismatched, and refuse another shape", function()
          local a, b = tocha.zeros({ 0, 5 }, opts()), tocha.ones({ 0, 5 }, opts())
          local r = tocha.compare(a, b)
          assert.are.same({ max_abs = 0, max_rel = 0, mismatched = 0, ok = true }, r)
          assert.is_true(tocha.allclose(a, b))
          fails_with("tocha.allclose: b: shapes differ: [0x5] and [5x0]",
            function() tocha.allclose(a, tocha.zeros({ 5, 0 }, opts())) end)
        end)

        it("leave the elements around an empty view of a tensor untouched", function()
          local x = tocha.rand({ 3, 4 }, opts("f32", { seed = 5 }))
          local want = x:to_table()
          local v = x:narrow(2, 5, 0)
          v:fill(9)
          v:copy(tocha.empty({ 3, 0 }, opts()))
          v:add_(1)
          x[{ {}, { 2, 3 } }]:narrow(1, 2, 0):mul_(0)
          x:narrow(1, 1, 0)[{}] = 4
          assert.are.same(want, x:to_table())
        end)
      end)

      describe("views", function()
        it("narrow to length 0 anywhere from the first element to one past the last", function()
          local x = tocha.rand({ 3, 4 }, opts("f32", { seed = 6 }))
          for start = 1, 5 do
            local v = x:narrow(2, start, 0)
            assert.are.same({ 3, 0 }, v:shape())
            assert.is_true(v:is_contiguous())
          end
          assert.are.same({ 0, 4 }, x:narrow(1, -1, 0):shape())
          assert.are.same({ 2, 0 }, tocha.zeros({ 2, 0 }, opts()):narrow(2, 1, 0):shape())
          -- one past the end of a view that starts inside its block (past the block's end)
          assert.are.same({ 0, 3 }, x:narrow(2, 2, 3):narrow(1, 4, 0):shape())
          assert.are.same({ 2, 0 }, x:view(2, 6):narrow(2, 5, 2):narrow(2, 3, 0):shape())
          fails_with("tocha.Tensor:narrow: start: expected 1 to 5 for length 0, got 6", function() x:narrow(2, 6, 0) end)
          fails_with("tocha.Tensor:narrow: length: expected 0 to 4 (from 1 of 4), got -1", function() x:narrow(2, 1, -1) end)
          fails_with("tocha.Tensor:narrow: start: expected 1 to 4 (or -1 to -4), got 5", function() x:narrow(2, 5, 1) end)
          fails_with("tocha.Tensor:narrow: start: the dimension has size 0: there is no element 1",
            function() tocha.zeros({ 2, 0 }, opts()):narrow(2, 1, 1) end)
        end)

        it("view and reshape to and from shapes with a size 0", function()
          local x = tocha.empty({ 2, 0, 3 }, opts())
          assert.are.same({ 0 }, x:view(0):shape())
          assert.are.same({ 0 }, x:view(-1):shape())
          assert.are.same({ 6, 0 }, x:view(6, 0):shape())
          assert.are.same({ 2, 0, 3 }, x:view(2, -1, 3):shape())
          assert.are.same({ 0, 5, 1 }, x:reshape({ 0, 5, 1 }):shape())
          assert.are.same({ 1, 1, 0 }, x:transpose(1, 3):reshape(1, 1, 0):shape())
          assert.are.same({ 2, 0, 3 }, tocha.ones(0, opts()):view(2, 0, 3):shape())
          fails_with("tocha.Tensor:view: sizes: -1 is ambiguous beside a size 0 in [-1, 0]", function() x:view(-1, 0) end)
          fails_with("tocha.Tensor:view: sizes: [2, 3] holds 6 elements, the tensor 0", function() x:view(2, 3) end)
          fails_with("tocha.Tensor:view: sizes[1]: expected a non-negative size or -1, got -2", function() x:view(-2, 0) end)
        end)

        it("permute, transpose, t, squeeze, unsqueeze, expand and contiguous keep the size 0", function()
          local x = tocha.empty({ 2, 0, 3 }, opts())
          assert.are.same({ 3, 2, 0 }, x:permute(3, 1, 2):shape())
          assert.are.same({ 3, 0, 2 }, x:transpose(1, 3):contiguous():shape())
          assert.are.same({ 5, 0 }, tocha.empty({ 0, 5 }, opts()):t():shape())
          assert.are.same({ 0 }, tocha.empty({ 1, 0, 1 }, opts()):squeeze():shape())
          assert.are.same({ 2, 1, 0, 3 }, x:unsqueeze(2):shape())
          assert.are.same({ 0, 3 }, tocha.ones({ 1, 3 }, opts()):expand(0, 3):shape())
          assert.are.same({ 4, 2, 0, 3 }, x:expand(4, 2, 0, 3):shape())
          assert.are.same({ 2, 0, 3 }, x[{ {}, {}, { 2, 3 } }]:narrow(3, 1, 0):view(2, 0, 3):shape())
          fails_with("tocha.Tensor:select: index: the dimension has size 0: there is no element 1", function() x:select(2, 1) end)
          fails_with("tocha.Tensor:index: index: the dimension has size 0: there is no element 1",
            function() return tocha.empty({ 0 }, opts())[1] end)
        end)
      end)

      describe("files", function()
        it("save and load .npy files of empty arrays, written as numpy.save writes them", function()
          local path = os.tmpname()
          for _, case in ipairs({ { { 2, 0, 3 }, "i32", "<i4", "(2, 0, 3)" }, { { 0 }, "f64", "<f8", "(0,)" } }) do
            tocha.save_npy(path, tocha.empty(case[1], opts(case[2])))
            local bytes = files.slurp(path)
            local want = ("{'descr': '%s', 'fortran_order': False, 'shape': %s, }"):format(case[3], case[4])
            assert.are.equal(want, bytes:sub(11, 10 + #want))
            assert.are.equal(0, #bytes % 64) -- the header padded to 64 bytes, and no data after it
            assert.are.equal("\n", bytes:sub(-1))
            local t = tocha.load_npy(path, { device = device })
            assert.are.same(case[1], t:shape())
            assert.are.equal(case[2], t:dtype())
          end
          os.remove(path)
        end)

        it("save and load safetensors files holding empty tensors, whose ranges are [a, a]", function()
          local json = require "dkjson"
          local path = os.tmpname()
          tocha.save(path, { a = tocha.empty({ 0, 4 }, opts()), b = tocha.tensor({ 1, 2 }, opts("i32")),
            c = tocha.empty({ 0 }, opts("bf16")) })
          local bytes = files.slurp(path)
          local header = json.decode(bytes:sub(9, 8 + bytes:byte(1) + 256 * bytes:byte(2)))
          assert.are.same({ 0, 0 }, header.a.data_offsets)
          assert.are.same({ 0, 4 }, header.a.shape)
          assert.are.same({ 0, 8 }, header.b.data_offsets)
          assert.are.same({ 8, 8 }, header.c.data_offsets)
          local t = tocha.load(path, { device = device })
          assert.are.same({ 0, 4 }, t.a:shape())
          assert.are.same({ 1, 2 }, t.b:to_table())
          assert.are.same({ 0 }, t.c:shape())
          assert.are.equal("bf16", t.c:dtype())
          -- written by hand: the empty tensor's range [0, 0] listed after the one it precedes
          local text = '{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"e":{"dtype":"I64","shape":[3,0],"data_offsets":[0,0]}}'
          text = text .. (" "):rep((8 - #text % 8) % 8)
          local n = #text
          files.spit(path, string.char(n % 256, math.floor(n / 256), 0, 0, 0, 0, 0, 0) .. text .. ffi.string(ffi.new("float[2]", 1.5, -2), 8))
          t = tocha.load(path, { device = device })
          assert.are.same({ 3, 0 }, t.e:shape())
          assert.are.same({ 1.5, -2 }, t.x:to_table())
          os.remove(path)
        end)
      end)

      describe("tensor math", function()
        it("gives empty results of the promoted dtype for every function", function()
          local x = tocha.rand({ 2, 0, 3 }, opts("i32", { seed = 1 }))
          local math_ops = require "tocha.tensor_math"
          for _, fn in ipairs(math_ops.unary_names) do
            local y = x[fn](x)
            assert.are.same({ 2, 0, 3 }, y:shape())
            local kind = math_ops.UNARY[fn]
            assert.are.equal(kind == "float" and "f32" or kind == "mask" and "u8" or "i32", y:dtype(), fn)
          end
          for _, fn in ipairs(math_ops.binary_names) do
            local y = x[fn](x, 2)
            assert.are.same({ 2, 0, 3 }, y:shape())
          end
          local promoted = x + tocha.empty({ 3 }, opts("f64"))
          assert.are.same({ 2, 0, 3 }, promoted:shape())
          assert.are.equal("f64", promoted:dtype())
        end)

        it("broadcasts a size 0 as PyTorch does, and refuses a size 0 against a size above 1", function()
          local a = tocha.ones({ 2, 1, 3 }, opts())
          assert.are.same({ 2, 0, 3 }, (a * tocha.ones({ 1, 0, 1 }, opts())):shape())
          assert.are.same({ 0, 3 }, (tocha.ones({ 0, 1 }, opts()) - tocha.ones({ 3 }, opts())):shape())
          assert.are.same({ 0 }, (tocha.ones({ 0 }, opts()) + 5):shape())
          assert.are.same({ 2, 0 }, tocha.where(tocha.ones({ 2, 0 }, opts("u8")), 1, tocha.zeros({ 1 }, opts())):shape())
          assert.are.same({ 2, 0, 3 }, tocha.empty({ 2, 0, 3 }, opts()):clamp(0, 1):shape())
          fails_with("tocha.Tensor.__add: right operand: shape [0] does not broadcast with [2, 2] (left operand's): sizes 0 and 2 at dimension 1 from the end",
            function() return tocha.ones({ 2, 2 }, opts()) + tocha.ones({ 0 }, opts()) end)
        end)

        it("works in place on an empty tensor, returning it", function()
          local x = tocha.empty({ 0, 3 }, opts())
          assert.are.equal(x, x:add_(1))
          assert.are.equal(x, x:exp_())
          assert.are.equal(x, x:clamp_(0, 1))
          fails_with("tocha.Tensor:add_: self: the result has shape [2, 0, 3], which cannot be written into self's [0, 3]",
            function() x:add_(tocha.ones({ 2, 1, 1 }, opts())) end)
        end)

        it("sums to 0, multiplies to 1 and averages to NaN over an empty dimension", function()
          local x = tocha.rand({ 2, 0, 3 }, opts("f32", { seed = 4 }))
          assert.are.same({ 0 }, x:sum():to_table())
          assert.are.same({ { 0, 0, 0 }, { 0, 0, 0 } }, x:sum(2):to_table())
          assert.are.same({ { { 0, 0, 0 } }, { { 0, 0, 0 } } }, x:sum(2, true):to_table())
          assert.are.same({ { 1, 1, 1 }, { 1, 1, 1 } }, x:prod(2):to_table())
          assert.are.same({ 1, 1 }, x:prod({ 2, 3 }):to_table())
          assert.is_true(all_nan(x:mean(2):to_table(true)))
          assert.are.equal(6, x:mean(-2):numel())
          assert.is_true(is_nan(x:mean():item()))
          -- a kept dimension of size 0: the result is empty
          assert.are.same({ 0, 3 }, x:sum(1):shape())
          assert.are.same({ 0 }, x:prod({ 1, 3 }):shape())
          -- integers sum and multiply in i64
          local i = tocha.zeros({ 4, 0 }, opts("u8"))
          assert.are.equal("i64", i:sum(2):dtype())
          assert.are.same({ 0, 0, 0, 0 }, i:sum(2):to_table())
          assert.are.same({ 1, 1, 1, 1 }, i:prod(2):to_table())
          fails_with("tocha.Tensor:mean: self: mean() needs a float tensor, got u8 (cast it first: x:cast(\"f32\"))",
            function() i:mean(2) end)
        end)

        it("gives NaN for var and std over an empty dimension", function()
          local x = tocha.empty({ 2, 0 }, opts("f64"))
          for _, correction in ipairs({ 0, 1 }) do
            assert.is_true(all_nan(x:var(2, false, correction):to_table(true)))
            assert.is_true(all_nan(x:std(2, true, correction):to_table(true)))
          end
          assert.are.same({ 2, 1 }, x:std(2, true):shape())
          assert.are.same({ 0 }, x:var(1):shape())
          assert.is_true(is_nan(x:var():item()))
        end)

        it("refuses max, min and their arg forms over an empty dimension, naming it", function()
          local x = tocha.empty({ 2, 0, 3 }, opts())
          fails_with("tocha.Tensor:amax: self: amax() cannot reduce over an empty dimension (dimension 2 has size 0)",
            function() x:amax(2) end)
          fails_with("tocha.Tensor:amin: self: amin() cannot reduce over an empty dimension (dimension 2 has size 0)",
            function() x:amin() end)
          fails_with("tocha.Tensor:max: self: max() cannot reduce over an empty dimension (dimension 2 has size 0)",
            function() x:max(-2) end)
          fails_with("tocha.Tensor:min: self: min() cannot reduce over an empty dimension (dimension 2 has size 0)",
            function() x:min() end)
          fails_with("tocha.Tensor:argmax: self: argmax() of an empty tensor over every element: it has no element to pick",
            function() x:argmax() end)
          fails_with("tocha.Tensor:argmin: self: argmin() cannot reduce over an empty dimension (dimension 2 has size 0)",
            function() x:argmin(2) end)
          -- over a dimension that is not empty: empty results, indices in i64
          local v, i = x:max(3)
          assert.are.same({ 2, 0 }, v:shape())
          assert.are.same({ 2, 0 }, i:shape())
          assert.are.equal("i64", i:dtype())
          assert.are.same({ 0, 3 }, x:argmin(1):shape())
          assert.are.same({ 1, 0, 3 }, x:amax(1, true):shape())
        end)

        it("gives empty softmax and log_softmax", function()
          local x = tocha.empty({ 2, 0 }, opts("f16"))
          assert.are.same({ 2, 0 }, x:softmax(2):shape())
          assert.are.same({ 2, 0 }, x:log_softmax(1):shape())
          assert.are.equal("f16", x:softmax(-1):dtype())
        end)
      end)

      describe("ops, plans and images", function()
        it("refuse an empty tensor, saying why", function()
          fails_with("tocha.Softmax:forward: x: an empty tensor (shape [0, 3]): ops and models take tensors without a size 0",
            function() tocha.Softmax.new(2):forward(tocha.empty({ 0, 3 }, opts())) end)
          fails_with("tocha.UpsampleNearest2dForward:forward: x: an empty tensor (shape [1, 0, 2, 2]): ops and models take tensors without a size 0",
            function() tocha.UpsampleNearest2dForward.new(2, 2):forward(tocha.empty({ 1, 0, 2, 2 }, opts())) end)
          local plan = require "tocha.plan"
          local p = plan.new(device, 1)
          fails_with("tocha.Plan:run: slots[1]: an empty tensor (a size 0) has no memory for the plan's launches",
            function() p:run({ tocha.empty({ 0 }, opts()) }) end)
        end)

        it("are refused by image.write, since a PNG has rows and columns", function()
          fails_with("tocha.image.write: image: a PNG needs at least one row and column, got [1x3x0x4]",
            function() tocha.image.write(os.tmpname() .. ".png", tocha.empty({ 1, 3, 0, 4 }, opts("u8"))) end)
        end)
      end)

      describe("in a process of their own", function()
        -- A fresh process has built no kernel: any launch would build one first (a compile, or
        -- a hit in the disk or memory cache). The work runs inside a graph capture too, where
        -- loading a kernel is refused.
        local script = [[
local tocha = require "tocha"
local dev = arg[1]
local function work(n)
  local o = { dtype = "f32", device = dev }
  local x = tocha.rand({ 2, n, 3 }, { device = dev, seed = 1 })
  local y = tocha.zeros({ 2, n, 3 }, { dtype = "f16", device = dev })
  y:fill(2):uniform(1):normal(2)
  y:cast_into(x)
  x:copy(x:cast("i64"):cast("f32"))
  local z = (x + 1):exp() * x:transpose(1, 3):contiguous():transpose(1, 3)
  z:add_(x:narrow(2, 1, n))
  local v = tocha.empty({ 3, 4 }, o):narrow(2, 5, 0) -- (empty: a full would launch a fill)
  v:fill(3)
  v:copy(tocha.empty({ 3, 0 }, o))
  return z, x:softmax(2), tocha.where(x:gt(0), x, 0), x:clone(), x:to(dev), x:reshape(-1, 3)
end
local ok, z = pcall(work, tonumber(arg[2]))
if not ok then io.write("failed: ", tostring(z)) return end
assert(tocha.allclose(z, z)) -- (a comparison reads to the host: not in a capture)
local g = tocha.graph(function() work(tonumber(arg[2])) end, dev)
g:replay()
tocha.synchronize(dev)
local s = tocha.cache.stats()
io.write(("kernels %d"):format(s.compiles + s.memory_hits + s.disk_hits))
]]

        it("build and launch no kernel, captured in a graph or not (and a size 1 does)", function()
          local path = process.write_script(script)
          local out, err = process.tocha({ path, device, "0" })
          assert.are.equal("kernels 0", out, err)
          -- the measure itself: the same work on one element builds kernels
          local out1, err1 = process.tocha({ path, device, "1" })
          local built = tonumber(out1:match("^kernels (%d+)$"))
          assert.truthy(built and built > 0, out1 .. err1)
          os.remove(path)
        end)
      end)
    end)
  end
end)
