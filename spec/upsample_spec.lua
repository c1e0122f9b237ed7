-- teeny-kernels' kernels, UpsampleNearest2dForward and UpsampleNearest2dBackward: fields and
-- hashes, every RuntimeOp method, forward and backward on every device against a plain-Lua
-- reference, gradcheck, and bad input.
local tocha = require "tocha"
local ffi = require "ffi"
local ref = require "support.reference"
local up_ref = require "support.upsample_reference"

local POISON = 77
local Forward, Backward = tocha.UpsampleNearest2dForward, tocha.UpsampleNearest2dBackward

-- A random case whose output stays small enough for the Lua reference.
local function random_case()
  while true do
    local shape = { math.random(1, 37), math.random(1, 37), math.random(1, 37), math.random(1, 37) }
    local sh, sw = math.random(1, 8), math.random(1, 8)
    if math.random() < 0.3 then sh, sw = math.random(1, 8), 1 end
    local n = shape[1] * shape[2] * shape[3] * shape[4] * sh * sw
    if n <= 60000 then return shape, sh, sw end
  end
end

local BLOCKS = { 32, 64, 96, 128, 256, 512, 1024 }

describe("tocha upsample kernels", function()
  describe("fields", function()
    it("follow teeny-kernels: name, id, constants, sources and the entry point", function()
      for _, case in ipairs({ { 2, 2, 128, "f32" }, { 3, 1, 64, "bf16" }, { 1, 4, 1024, "u8" } }) do
        local sh, sw, block, dt = unpack(case)
        local f = Forward.new(sh, sw, block, dt)
        assert.are.equal("upsample_nearest2d_forward", f.name)
        assert.are.equal(("upsample_nearest2d_forward__%s__%d__%d__%d"):format(dt, sh, sw, block), f.id)
        assert.are.same({ sh, sw, block, dt }, { f.scale_h, f.scale_w, f.block_ow, f.dtype })
        assert.are.equal("upsample_nearest2d_forward_entry_point", f.entry_point_name)
        assert.are.equal(f.kernel_source .. "\n\n" .. f.entry_point_source, f.source)
        assert.truthy(f.kernel_source:find("__device__ void upsample_nearest2d_forward(", 1, true))
        local b = Backward.new(sh, sw, block, dt)
        assert.are.equal("upsample_nearest2d_backward", b.name)
        assert.are.equal(("upsample_nearest2d_backward__%s__%d__%d__%d"):format(dt, sh, sw, block), b.id)
        assert.are.equal(block, b.block_iw)
        assert.are.equal("upsample_nearest2d_backward_entry_point", b.entry_point_name)
        assert.are.equal(b.kernel_source .. "\n\n" .. b.entry_point_source, b.source)
      end
    end)

    it("generate the entry point that binds D and the constants", function()
      local f = Forward.new(2, 3, 128, "f16")
      assert.are.equal('extern "C" __global__ void TOCHA_ENTRY_BOUNDS(__half, 2, 3, 128) ' .. [[
upsample_nearest2d_forward_entry_point(__half *x, __half *y, int B, int C, int H, int W, int OH, int OW)
{
    upsample_nearest2d_forward<__half, 2, 3, 128>(x, y, B, C, H, W, OH, OW);
}
]], f.entry_point_source)
      assert.are.equal("f16* x, f16* y, i32 B, i32 C, i32 H, i32 W, i32 OH, i32 OW", f.args_signature)
      assert.are.equal("f16* dy, f16* dx, i32 B, i32 C, i32 H, i32 W, i32 OH, i32 OW",
        Backward.new(2, 3, 128, "f16").args_signature)
    end)

    it("hash the source: a constant or the dtype changes it, nothing else does", function()
      local base = Forward.new(2, 2, 128, "f32").hash
      assert.are.equal(base, Forward.new(2, 2, 128).hash)
      assert.are.equal(base, Forward.new(2, 2, 128, "f32", 256).hash) -- the backward's block is not the forward's source
      for _, other in ipairs({ { 3, 2, 128, "f32" }, { 2, 3, 128, "f32" }, { 2, 2, 64, "f32" }, { 2, 2, 128, "f64" } }) do
        assert.are_not.equal(base, Forward.new(unpack(other)).hash)
      end
      assert.are_not.equal(Backward.new(2, 2, 128).hash, base)
      assert.are.equal(32, #base)
    end)

    it("give the forward kernel a backward kernel, block_iw defaulting to block_ow", function()
      assert.are.equal(256, Forward.new(2, 2, 256).backward_kernel.block_iw)
      assert.are.equal(64, Forward.new(2, 2, 256, "f32", 64).backward_kernel.block_iw)
      assert.are.equal("upsample_nearest2d_backward__f32__2__2__64", Forward.new(2, 2, 256, "f32", 64).backward_kernel.id)
    end)
  end)

  describe("RuntimeOp", function()
    local shapes = { { 1, 1, 1, 1 }, { 2, 3, 5, 7 }, { 1, 1, 40000, 3 }, { 3, 700, 50, 33 } }

    it("has teeny-kernels' constant answers", function()
      local up = Forward.new(2, 3, 128)
      assert.are.equal(1, up:n_activation_inputs())
      assert.are.same({}, up:param_shapes({ { 1, 1, 2, 2 } }, { 1, 1, 4, 6 }))
      assert.are.same({}, up:param_names())
      assert.is_nil(up:param_init_data(1))
      assert.is_true(up:has_backward())
      assert.are.equal(1, up:n_launches())
      assert.are.equal(1, up:n_backward_launches())
      assert.are.same({ 128, 1, 1 }, up:block())
      assert.are.same({ 128, 1, 1 }, Forward.new(2, 3, 128, "f32", 32):block())
      assert.are.same({ 32, 1, 1 }, Forward.new(2, 3, 128, "f32", 32):backward_block())
    end)

    it("computes the output shape and natural row strides", function()
      local up = Forward.new(2, 3, 64)
      for _, s in ipairs(shapes) do
        local out = up:compute_concrete_output_shape({ s })
        assert.are.same({ s[1], s[2], s[3] * 2, s[4] * 3 }, out)
        assert.are.equal(out[4], up:forward_output_row_stride(out))
        assert.are.equal(out[4], up:backward_grad_output_row_stride(out))
      end
    end)

    it("sizes grids by the plan: a thread per 16-byte vector of y, or per batch of runs of dx", function()
      -- f32 2x2: output rows of 2048 floats are whole vectors, so the threads take each input
      -- row's 512 vectors (stored to both rows); rows of 2046 floats are not, so the flat
      -- output's 6 * 2046 / 4 vectors. Backward f32 with scale_w 2: runs of 2 dx elements,
      -- each a 16-byte load from each of 2 dy rows, so 1 run a thread; with scale_h 1 a run is
      -- one load, and a thread takes 2.
      local up = Forward.new(2, 2, 64, "f32", 64)
      assert.are.same({ 3 * 512 / 64, 1, 1 }, up:grid({ 1, 1, 6, 2048 }))
      assert.are.same({ math.ceil(6 * 2046 / 4 / 64), 1, 1 }, up:grid({ 1, 1, 6, 2046 }))
      assert.are.same({ math.ceil(3 * 1023 / 2 / 64), 1, 1 }, up:backward_grid({ { 1, 1, 3, 1023 } }, { 1, 1, 6, 2046 }))
      local wide = Forward.new(1, 2, 64, "f32", 64)
      assert.are.same({ math.ceil(3 * 1023 / 2 / 2 / 64), 1, 1 }, wide:backward_grid({ { 1, 1, 3, 1023 } }))
      assert.are.same(up:grid({ 1, 1, 6, 2046 }), up:grid_for_launch(1, { { 1, 1, 3, 1023 } }, { 1, 1, 6, 2046 }))
      -- u8 3x1, 1024 threads: rows of 999 bytes are not whole vectors (the flat output's); the
      -- backward's runs are 16 dx elements (scale_w 1: 16 bytes of each of 3 dy rows), 1 a
      -- thread.
      local u8 = Forward.new(3, 1, 1024, "u8", 1024)
      assert.are.same({ math.ceil(5 * 9 * 999 / 16 / 1024), 1, 1 }, u8:grid({ 1, 5, 9, 999 }))
      assert.are.same({ math.ceil(5 * 3 * 999 / 16 / 1024), 1, 1 }, u8:backward_grid({ { 1, 5, 3, 999 } }))
      -- NHWC: rows are pixels of C elements; C = 8 f16 pixels are whole vectors. A backward
      -- run reads its 2 x 2 dy pixels, 4 loads: one run a thread.
      local cl = Forward.new(2, 2, 128, "f16", { layout = "nhwc" })
      assert.are.same({ math.ceil(2 * 5 * 7 * 2 / 128), 1, 1 }, cl:grid({ 2, 10, 14, 8 }))
      assert.are.same({ math.ceil(2 * 5 * 7 / 128), 1, 1 }, cl:backward_grid({ { 2, 5, 7, 8 } }))
      assert.are.same({ 1, 1, 1 }, up:grid({ 1, 1, 2, 2 }))
    end)

    it("covers the whole output with any grid: a grid-stride loop past the grid", function()
      for _, layout in ipairs({ "nchw", "nhwc" }) do
        local up = Forward.new(2, 3, 32, "f16", { layout = layout })
        local fwd, bwd = up_ref.of(layout)
        local shape = { 2, 5, 7, 9 }
        local x = tocha.rand(shape, { dtype = "i32", device = "sim", seed = 11, low = 0, high = 60 }):cast("f16")
        local out = up:compute_concrete_output_shape({ shape })
        local y = tocha.empty(out, { dtype = "f16", device = "sim" }):fill(POISON)
        tocha.launch_packed(up.kernel, "sim", { 1, 1, 1 }, up:block(), up:pack_args({ x }, {}, y))
        assert.are.same(fwd(x:to_table(true), shape, 2, 3), y:to_table(true), layout)
        local dx = tocha.empty(shape, { dtype = "f16", device = "sim" }):fill(POISON)
        tocha.launch_packed(up.backward_kernel.kernel, "sim", { 2, 1, 1 }, up:backward_block(),
          up:pack_backward_args({ x }, {}, y, out, y, out[4], { dx }, {}))
        assert.are.same(bwd(y:to_table(true), shape, 2, 3), dx:to_table(true), layout .. " backward")
      end
    end)

    it("packs the Args in the signature's order: x, y, B, C, H, W, OH, OW", function()
      local up = Forward.new(2, 3, 128)
      local x = tocha.zeros({ 2, 3, 5, 7 }, { device = "sim" })
      local y = up:forward(x)
      local args = up:pack_args({ x }, {}, y, y:shape(), 21)
      assert.are.same({ x.data, y.data, 2, 3, 5, 7, 10, 21 }, args)
      assert.are.same(args, up:pack_args_for_launch(1, { x }, {}, y, y:shape(), 21))
      local dx = tocha.zeros({ 2, 3, 5, 7 }, { device = "sim" })
      local bargs = up:pack_backward_args({ x }, {}, y, y:shape(), y, 21, { dx }, {})
      assert.are.same({ y.data, dx.data, 2, 3, 5, 7, 10, 21 }, bargs)
      assert.are.same(bargs, up:pack_backward_args_for_launch(1, { x }, {}, y, y:shape(), y, 21, { dx }, {}))
    end)

    it("launches what it packs", function()
      local up = Forward.new(2, 2, 32)
      local x = tocha.rand({ 1, 2, 3, 5 }, { device = "sim", seed = 4 })
      local y = tocha.empty({ 1, 2, 6, 10 }, { device = "sim" }):fill(POISON)
      tocha.launch_packed(up.kernel, "sim", up:grid(y:shape()), up:block(), up:pack_args({ x }, {}, y))
      assert.are.same(up_ref.forward(x:to_table(true), x:shape(), 2, 2), y:to_table(true))
    end)
  end)

  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name

      setup(function() ref.rng("upsample " .. device) end)

      it("forward matches the reference bit for bit, for every dtype", function()
        for _, dt in ipairs(ref.all_dtypes) do
          local shape, sh, sw = random_case()
          local block = BLOCKS[math.random(#BLOCKS)]
          local up = Forward.new(sh, sw, block, dt)
          local x = tocha.rand(shape, { dtype = dt, device = device, seed = math.random(0, 1e6), low = -100, high = 100 })
          local y = tocha.empty({ shape[1], shape[2], shape[3] * sh, shape[4] * sw }, { dtype = dt, device = device }):fill(POISON)
          up:forward(x, y)
          local label = ("%s %s x%d,%d block %d"):format(dt, table.concat(shape, "x"), sh, sw, block)
          assert.are.same(up_ref.forward(x:to_table(true), shape, sh, sw), y:to_table(true), label)
        end
      end)

      it("backward matches the reference: exactly for integers, within rounding for floats", function()
        for _, dt in ipairs(ref.all_dtypes) do
          local shape, sh, sw = random_case()
          local block = BLOCKS[math.random(#BLOCKS)]
          local up = Forward.new(sh, sw, 128, dt, block)
          local out = { shape[1], shape[2], shape[3] * sh, shape[4] * sw }
          local lo = dt == "u8" and 0 or -100
          local hi = dt == "u8" and math.floor(256 / (sh * sw)) or 100 -- u8 sums stay in range
          local dy = tocha.rand(out, { dtype = dt, device = device, seed = math.random(0, 1e6), low = lo, high = hi })
          local x = tocha.empty(shape, { dtype = dt, device = device })
          local dx = tocha.empty(shape, { dtype = dt, device = device }):fill(POISON)
          up:backward(x, dy, dx)
          local dyv = dy:to_table(true)
          local expect = up_ref.backward(dyv, shape, sh, sw)
          local got = dx:to_table(true)
          local label = ("%s %s x%d,%d block_iw %d"):format(dt, table.concat(shape, "x"), sh, sw, block)
          for i = 1, #expect do
            local e = ref.convert(expect[i], dt)
            local tol = 0
            if ref.eps[dt] > 0 then
              -- the accumulator (f32 for f16/bf16/f32) rounds each of sh*sw additions
              local acc_eps = dt == "f64" and 2 ^ -52 or 2 ^ -23
              local magnitude = 0
              local plane = math.floor((i - 1) / (shape[3] * shape[4]))
              local ih = math.floor((i - 1) / shape[4]) % shape[3]
              local iw = (i - 1) % shape[4]
              for a = 0, sh - 1 do
                for b = 0, sw - 1 do
                  magnitude = magnitude + math.abs(dyv[((plane * out[3] + ih * sh + a) * out[4]) + iw * sw + b + 1])
                end
              end
              tol = math.abs(e) * ref.eps[dt] + sh * sw * acc_eps * magnitude
            end
            assert(math.abs(got[i] - e) <= tol, ("%s: element %d is %.17g, expected %.17g"):format(label, i, got[i], e))
          end
        end
      end)

      -- The forward of x (small integers: every sum is exact in every accumulator, so both checks
      -- are exact) into a poisoned y, and the backward of y into a poisoned dx, against the
      -- layout's reference; s = {scale_h, scale_w}.
      local function exact_both_ways(up, layout, dt, s, shape, out, seed, label)
        local fwd, bwd = up_ref.of(layout)
        local x = tocha.rand(shape, { dtype = "i32", device = device, seed = seed, low = 0, high = 16 }):cast(dt)
        local y = tocha.empty(out, { dtype = dt, device = device }):fill(POISON)
        up:forward(x, y)
        assert.are.same(fwd(x:to_table(true), shape, s[1], s[2]), y:to_table(true), label)
        local dx = tocha.empty(shape, { dtype = dt, device = device }):fill(POISON)
        up:backward(x, y, dx)
        local expect = bwd(y:to_table(true), shape, s[1], s[2])
        for i = 1, #expect do expect[i] = ref.convert(expect[i], dt) end
        assert.are.same(expect, dx:to_table(true), label .. " backward")
      end

      it("is exact for every row alignment: widths 1 to 70 across dtypes and scales", function()
        -- Rows of every width start at every alignment, exercising the single-element head and
        -- tail, the vector stores and the 4-, 8- and 16-byte loads of both kernels.
        for _, dt in ipairs({ "f32", "f16", "u8" }) do
          for _, s in ipairs({ { 1, 1 }, { 2, 2 }, { 1, 2 }, { 2, 1 }, { 3, 3 }, { 1, 8 }, { 4, 4 }, { 1, 5 }, { 2, 7 } }) do
            local up = Forward.new(s[1], s[2], 64, dt)
            for W = 1, 70 do
              exact_both_ways(up, "nchw", dt, s, { 1, 2, 3, W }, { 1, 2, 3 * s[1], W * s[2] }, W,
                ("%s %dx%d W=%d"):format(dt, s[1], s[2], W))
            end
          end
        end
      end)

      it("NHWC is exact at widths 1 to 70, with channels inside, across and beyond a vector", function()
        -- Pixels of C elements: vectors inside one pixel (a load of x at any alignment), across
        -- pixels and rows (element by element); backward runs likewise.
        local CHANNELS = { 1, 3, 8, 16, 5, 2, 32, 7, 4 }
        for _, dt in ipairs({ "f32", "f16", "u8" }) do
          for _, s in ipairs({ { 1, 1 }, { 2, 2 }, { 1, 2 }, { 2, 1 }, { 3, 3 }, { 2, 7 }, { 4, 4 } }) do
            local up = Forward.new(s[1], s[2], 64, dt, { layout = "nhwc" })
            for W = 1, 70 do
              local C = CHANNELS[W % #CHANNELS + 1]
              exact_both_ways(up, "nhwc", dt, s, { 1, 2, W, C }, { 1, 2 * s[1], W * s[2], C }, W,
                ("nhwc %s %dx%d W=%d C=%d"):format(dt, s[1], s[2], W, C))
            end
          end
        end
      end)

      it("NHWC matches the reference on random shapes, for every dtype", function()
        for _, dt in ipairs(ref.all_dtypes) do
          local shape, sh, sw = random_case()
          shape = { shape[1], shape[3], shape[4], shape[2] } -- B, H, W, C
          local block = BLOCKS[math.random(#BLOCKS)]
          local up = Forward.new(sh, sw, block, dt, { layout = "nhwc" })
          local out = up:compute_concrete_output_shape({ shape })
          assert.are.same({ shape[1], shape[2] * sh, shape[3] * sw, shape[4] }, out)
          local x = tocha.rand(shape, { dtype = "i32", device = device, seed = math.random(0, 1e6), low = 0, high = 8 }):cast(dt)
          local y = up:forward(x)
          local label = ("nhwc %s %s x%d,%d block %d"):format(dt, table.concat(shape, "x"), sh, sw, block)
          assert.are.same(up_ref.forward_nhwc(x:to_table(true), shape, sh, sw), y:to_table(true), label)
          local dx = up.backward_kernel:run(y)
          local expect = up_ref.backward_nhwc(y:to_table(true), shape, sh, sw)
          for i = 1, #expect do expect[i] = ref.convert(expect[i], dt) end
          assert.are.same(expect, dx:to_table(true), label .. " backward")
        end
      end)

      it("splits long rows into several work items and covers them all", function()
        for _, dt in ipairs({ "f32", "f16", "u8" }) do
          for _, s in ipairs({ { 1, 2 }, { 2, 1 }, { 2, 3 } }) do
            local up = Forward.new(s[1], s[2], 64, dt)
            local shape = { 1, 1, 2, 2501 + s[2] }
            local x = tocha.rand(shape, { dtype = "i32", device = device, seed = 3, low = 0, high = 40 }):cast(dt)
            local y = up:forward(x)
            local label = ("%s %dx%d"):format(dt, s[1], s[2])
            assert.are.same(up_ref.forward(x:to_table(true), shape, s[1], s[2]), y:to_table(true), label)
            local dx = up:backward(x, y)
            local expect = up_ref.backward(y:to_table(true), shape, s[1], s[2])
            for i = 1, #expect do expect[i] = ref.convert(expect[i], dt) end
            assert.are.same(expect, dx:to_table(true), label .. " backward")
          end
        end
      end)

      it("is exact on long rows of several work items, lined up with 128-byte lines or not", function()
        -- Forward rows of 2048 f32 are whole lines (each vector built once, stored to both
        -- rows); 2046 and 8198 are not (rows written one after another). Backward: dx rows
        -- of 1023 f32 and 4099 u8 start off their 8- and 16-byte boundaries.
        for _, c in ipairs({ { "f32", 1024 }, { "f32", 1023 }, { "u8", 4099 }, { "f16", 2048 } }) do
          local dt, W = c[1], c[2]
          local up = Forward.new(2, 2, 128, dt)
          local shape = { 1, 2, 3, W }
          local x = tocha.rand(shape, { dtype = "i32", device = device, seed = W, low = 0, high = 100 }):cast(dt)
          local y = tocha.empty({ 1, 2, 6, 2 * W }, { dtype = dt, device = device }):fill(POISON)
          up:forward(x, y)
          assert.are.same(up_ref.forward(x:to_table(true), shape, 2, 2), y:to_table(true), dt .. " W=" .. W)
          local dx = tocha.empty(shape, { dtype = dt, device = device }):fill(POISON)
          up:backward(x, y, dx)
          local expect = up_ref.backward(y:to_table(true), shape, 2, 2)
          for i = 1, #expect do expect[i] = ref.convert(expect[i], dt) end
          assert.are.same(expect, dx:to_table(true), dt .. " W=" .. W .. " backward")
        end
      end)

      -- Each case { dtype, scale_h, scale_w, W }: the forward of a [1, 2, 3, W] input of values
      -- below POISON, with the n-th case's block width the n-th of six in turn, checked against
      -- the reference on a poisoned output.
      local function forwards_exact(cases)
        for n, c in ipairs(cases) do
          local dt, sh, sw, W = c[1], c[2], c[3], c[4]
          local block = ({ 32, 64, 128, 256, 512, 1024 })[n % 6 + 1]
          local up = Forward.new(sh, sw, block, dt)
          local shape = { 1, 2, 3, W }
          local x = tocha.rand(shape, { dtype = "i32", device = device, seed = n, low = 0, high = POISON - 1 }):cast(dt)
          local y = tocha.empty({ 1, 2, 3 * sh, W * sw }, { dtype = dt, device = device }):fill(POISON)
          up:forward(x, y)
          local label = ("%s %dx%d W=%d block %d"):format(dt, sh, sw, W, block)
          assert.are.same(up_ref.forward(x:to_table(true), shape, sh, sw), y:to_table(true), label)
        end
      end

      it("is exact where output rows are whole vectors (each built once, stored to every row)", function()
        -- Rows of whole 16-byte vectors take each input row's vectors once and store them to all
        -- its output rows: several rows, short rows of one vector, every block width.
        local cases = {
          { "f32", 4, 4, 1023 }, { "f32", 3, 3, 1020 }, { "f32", 2, 1, 1020 }, { "u8", 4, 4, 1020 },
          { "f16", 2, 2, 1020 }, { "bf16", 4, 4, 1022 }, { "f64", 2, 2, 333 }, { "i32", 5, 3, 12 },
          { "f32", 2, 2, 2 }, { "u8", 3, 16, 1 },
        }
        forwards_exact(cases)
      end)

      it("is exact where output rows are not whole vectors (the flat output)", function()
        -- The flat output's vectors: inside a row (a load and permutes of x at any alignment) or
        -- across rows (element by element), with rows shorter than a vector among them.
        local cases = {
          { "f16", 4, 4, 1023 }, { "u8", 4, 4, 1023 }, { "bf16", 5, 3, 701 }, { "u8", 4, 3, 1021 },
          { "f32", 4, 2, 1023 }, { "i32", 6, 1, 333 }, { "u8", 8, 8, 3 }, { "f64", 4, 1, 3 },
          { "u8", 4, 1, 17 }, { "f16", 4, 4, 1021 }, { "u8", 7, 5, 301 }, { "f32", 4, 3, 1021 },
        }
        forwards_exact(cases)
      end)

      it("covers many narrow rows, each with single elements around its vectors", function()
        local up = Forward.new(2, 1, 32, "i32")
        local x = tocha.rand({ 1, 1, 40000, 3 }, { dtype = "i32", device = device, seed = 8, low = -1000, high = 1000 })
        assert.are.same({ math.ceil(80000 * 3 / 4 / 32), 1, 1 }, up:grid({ 1, 1, 80000, 3 })) -- the flat output's vectors
        local y = tocha.empty({ 1, 1, 80000, 3 }, { dtype = "i32", device = device }):fill(POISON)
        up:forward(x, y)
        assert.are.same(up_ref.forward(x:to_table(true), x:shape(), 2, 1), y:to_table(true))
        local dx = up:backward(x, y)
        assert.are.same(up_ref.backward(y:to_table(true), x:shape(), 2, 1), dx:to_table(true))
      end)

      -- One launch per pair of offsets: its input (n_in values from 0 to high - 1, as dt) and its
      -- output (n_out elements) lie 0 to 7 elements past the starts of buffers 8 elements longer,
      -- through launch(input address, output address) of a packed launch; the output must equal
      -- want(the input's values) and every element of its buffer around it stay POISON.
      local function exact_at_offsets(label, dt, seed, n_in, n_out, high, launch, want)
        for _, o in ipairs({ { 0, 0 }, { 1, 0 }, { 0, 1 }, { 3, 5 }, { 7, 2 }, { 2, 7 } }) do
          local at = ("%s in+%d out+%d"):format(label, o[1], o[2])
          local ins = tocha.rand({ n_in + 8 }, { dtype = "i32", device = device, seed = seed, low = 0, high = high }):cast(dt)
          local outs = tocha.empty({ n_out + 8 }, { dtype = dt, device = device }):fill(POISON)
          local size = ins:nbytes() / ins:numel()
          launch(ffi.cast("uint64_t", ins.data) + o[1] * size, ffi.cast("uint64_t", outs.data) + o[2] * size)
          local iv, values = ins:to_table(true), {}
          for i = 1, n_in do values[i] = iv[o[1] + i] end
          local expect, got = want(values), outs:to_table(true)
          for i = 1, n_out + 8 do
            local e = (i > o[2] and i <= o[2] + n_out) and expect[i - o[2]] or POISON
            if got[i] ~= e then error(("%s: output buffer element %d is %s, expected %s"):format(at, i - 1, got[i], e)) end
          end
        end
      end

      -- Each case {dtype, scale_h, scale_w, W}: a forward of x [2, 1, 3, W] through a packed launch,
      -- exact_at_offsets for every pair of offsets (the block width and the seed by the case's place).
      local function forwards_at_offsets(cases)
        for n, c in ipairs(cases) do
          local dt, sh, sw, W = c[1], c[2], c[3], c[4]
          local up = Forward.new(sh, sw, ({ 32, 64, 128, 256, 512, 1024 })[n % 6 + 1], dt)
          local shape, out = { 2, 1, 3, W }, { 2, 1, 3 * sh, W * sw }
          exact_at_offsets(("%s %dx%d W=%d"):format(dt, sh, sw, W), dt, n, 6 * W, 6 * W * sh * sw, POISON - 1, function(xa, ya)
            tocha.launch_packed(up.kernel, device, up:grid(out), up:block(), up:pack_args({ { xa, shape } }, {}, ya, out))
          end, function(x) return up_ref.forward(x, shape, sh, sw) end)
        end
      end

      it("is exact for x and y at any element offset with one output row per input row", function()
        -- These forwards take the whole output as one row (y's element o is x's o / scale_w), so
        -- that with x and y anywhere against 16 bytes and lines every path is taken: the single
        -- elements at y's ends, shifted input spans and windows, x's last words.
        forwards_at_offsets({
          { "f32", 1, 2, 1023 }, { "f16", 1, 2, 1020 }, { "u8", 1, 2, 1023 }, { "u8", 1, 3, 301 }, { "bf16", 1, 1, 517 },
          { "f64", 1, 2, 33 }, { "u8", 1, 5, 7 }, { "i32", 1, 4, 1 },
        })
      end)

      it("is exact for x and y at any element offset with several output rows per input row", function()
        -- With y off 16 bytes every output row has single elements at both ends, and the 16 bytes
        -- around a row's end hold the last elements of one row and the first of the next (of the
        -- same input row, or of the next one): rows alike against lines (W = 64 here), rows apart,
        -- rows too short for row-end stores (u8 2x2 W=3), y's first and last rows.
        forwards_at_offsets({
          { "u8", 2, 2, 64 }, { "f16", 3, 3, 64 }, { "f32", 2, 2, 37 }, { "u8", 3, 3, 45 }, { "f16", 2, 1, 33 },
          { "bf16", 4, 4, 21 }, { "i32", 3, 2, 5 }, { "u8", 2, 2, 3 }, { "f64", 2, 3, 2 },
        })
      end)

      it("backward is exact for dy and dx at any element offset with one dy row per dx row", function()
        -- These backwards take the whole tensor as one row (dx's element i sums dy's scale_w
        -- elements from i * scale_w), in items that are rows of their own: with dy and dx anywhere,
        -- runs start anywhere against their loads' and stores' widths, with single elements at
        -- both ends and at neither.
        local cases = {
          { "f32", 2, 1023 }, { "f16", 2, 1020 }, { "bf16", 2, 1023 }, { "f16", 3, 301 }, { "f32", 1, 517 },
          { "f64", 2, 33 }, { "i32", 5, 7 }, { "f16", 8, 2 },
        }
        for n, c in ipairs(cases) do
          local dt, sw, W = c[1], c[2], c[3]
          local up = Forward.new(1, sw, 64, dt, ({ 32, 64, 128, 256, 512, 1024 })[n % 6 + 1])
          local shape, out = { 2, 1, 3, W }, { 2, 1, 3, W * sw }
          exact_at_offsets(("%s 1x%d W=%d backward"):format(dt, sw, W), dt, n, 6 * W * sw, 6 * W, 9, function(dya, dxa)
            local args = up:pack_backward_args({ { dxa, shape } }, {}, dya, out, dya, out[4], { dxa }, {})
            tocha.launch_packed(up.backward_kernel.kernel, device, up:backward_grid({ shape }, out), up:backward_block(), args)
          end, function(dy)
            local dx = up_ref.backward(dy, shape, 1, sw)
            for i = 1, #dx do dx[i] = ref.convert(dx[i], dt) end
            return dx
          end)
        end
      end)

      it("NHWC is exact for x and y, dy and dx at any element offset", function()
        for n, c in ipairs({ { "f16", 2, 2, 5, 8 }, { "u8", 3, 1, 7, 3 }, { "f32", 1, 2, 9, 6 }, { "bf16", 2, 3, 4, 17 } }) do
          local dt, sh, sw, W, C = c[1], c[2], c[3], c[4], c[5]
          local up = Forward.new(sh, sw, ({ 32, 64, 128, 256 })[n], dt, { layout = "nhwc" })
          local shape, out = { 2, 3, W, C }, { 2, 3 * sh, W * sw, C }
          local n_in, n_out = 6 * W * C, 6 * W * C * sh * sw
          exact_at_offsets(("nhwc %s %dx%d W=%d C=%d"):format(dt, sh, sw, W, C), dt, n, n_in, n_out, POISON - 1, function(xa, ya)
            tocha.launch_packed(up.kernel, device, up:grid(out), up:block(), up:pack_args({ { xa, shape } }, {}, ya, out))
          end, function(x) return up_ref.forward_nhwc(x, shape, sh, sw) end)
          exact_at_offsets(("nhwc %s %dx%d W=%d C=%d backward"):format(dt, sh, sw, W, C), dt, n, n_out, n_in, 9, function(dya, dxa)
            local args = up:pack_backward_args({ { dxa, shape } }, {}, dya, out, dya, out[4], { dxa }, {})
            tocha.launch_packed(up.backward_kernel.kernel, device, up:backward_grid({ shape }, out), up:backward_block(), args)
          end, function(dy)
            local dx = up_ref.backward_nhwc(dy, shape, sh, sw)
            for i = 1, #dx do dx[i] = ref.convert(dx[i], dt) end
            return dx
          end)
        end
      end)

      it("backward through UpsampleNearest2dBackward alone gives the same", function()
        local b = Backward.new(3, 2, 64, "i32")
        local dy = tocha.rand({ 2, 2, 9, 8 }, { dtype = "i32", device = device, seed = 9, low = -50, high = 50 })
        local dx = b:run(dy)
        assert.are.same({ 2, 2, 3, 4 }, dx:shape())
        assert.are.same(up_ref.backward(dy:to_table(true), { 2, 2, 3, 4 }, 3, 2), dx:to_table(true))
      end)

      it("passes gradcheck in f64", function()
        local shape, sh, sw = random_case()
        shape[1], shape[2] = 1, math.min(shape[2], 2)
        local up = Forward.new(sh, sw, 64, "f64")
        local x = tocha.randn(shape, { dtype = "f64", device = device, seed = 5 })
        local ok, report = tocha.gradcheck(up, x, { max_checks = 40 })
        assert.is_true(ok, ("max error %g at %s"):format(report.max_abs, tostring(report.worst)))
        local ok2 = tocha.gradcheck(tocha.nn.UpsampleNearest2d(2, 3), tocha.randn({ 1, 2, 3, 4 }, { dtype = "f64", device = device, seed = 6 }))
        assert.is_true(ok2)
        local cl = Forward.new(3, 2, 64, "f64", { layout = "nhwc" })
        local ok3, r3 = tocha.gradcheck(cl, tocha.randn({ 1, 3, 4, 5 }, { dtype = "f64", device = device, seed = 7 }))
        assert.is_true(ok3, ("nhwc: max error %g"):format(r3.max_abs))
      end)

      it("gradcheck catches a wrong backward", function()
        local up = Forward.new(2, 2, 64, "f64")
        local wrong = {
          forward = function(_, x) return up:forward(x) end,
          backward = function(_, x, dy) return up:backward(x, dy):cast("f64"):fill(1) end,
        }
        assert.is_false((tocha.gradcheck(wrong, tocha.randn({ 1, 1, 3, 3 }, { dtype = "f64", device = device, seed = 1 }))))
      end)

      it("gradcheck fails a backward of NaN and refuses options that leave nothing to fail", function()
        -- Every comparison with NaN is false, so a test written as "fail when err > tol" passed it.
        local up = Forward.new(2, 2, 64, "f64")
        local nan = {
          forward = function(_, x) return up:forward(x) end,
          backward = function(_, x, dy) return up:backward(x, dy):fill(0 / 0) end,
        }
        local x = tocha.randn({ 1, 1, 3, 3 }, { dtype = "f64", device = device, seed = 1 })
        local ok, report = tocha.gradcheck(nan, x)
        assert.is_false(ok)
        assert.is_true(report.max_abs ~= report.max_abs) -- NaN, reported
        assert.has_error(function() tocha.gradcheck(up, x, { eps = 0 }) end)
        assert.has_error(function() tocha.gradcheck(up, x, { atol = math.huge }) end)
        assert.has_error(function() tocha.gradcheck(up, x, { max_checks = 0 }) end)
        local short = { forward = nan.forward, backward = function() return tocha.zeros({ 2 }, { dtype = "f64", device = device }) end }
        assert.has_error(function() tocha.gradcheck(short, x) end, "tocha.gradcheck: op:backward: gave 2 values for x's 9")
      end)

      it("nn.UpsampleNearest2d keeps output and gradInput", function()
        local m = tocha.nn.UpsampleNearest2d(2)
        local x = tocha.rand({ 1, 2, 3, 3 }, { device = device, seed = 2, dtype = "bf16" })
        local y = m:forward(x)
        assert.are.equal(y, m.output)
        assert.are.same({ 1, 2, 6, 6 }, y:shape())
        local dx = m:backward(x, tocha.ones({ 1, 2, 6, 6 }, { device = device, dtype = "bf16" }))
        assert.are.equal(dx, m.gradInput)
        assert.are.same(up_ref.backward(tocha.ones({ 72 }):to_table(true), { 1, 2, 3, 3 }, 2, 2), dx:to_table(true))
        assert.are.equal(m:updateOutput(x):to_table(true)[1], y:to_table(true)[1])
      end)
    end)
  end

  describe("past 2^31 output elements #gpu", function()
    -- Element i of a uniform fill is known from (seed, i) alone, so positions are checked
    -- against the reference without copying the whole tensor back.
    local function element(t, index, ctype)
      local buf = ffi.new(ctype .. "[1]")
      t:read(buf, index, 1)
      return tonumber(buf[0])
    end

    local function positions(n, count)
      local list = { 0, 1, n - 2, n - 1, 2 ^ 31 - 1, 2 ^ 31, 2 ^ 31 + 1 }
      for _ = 1, count do list[#list + 1] = math.random(0, n - 1) end
      return list
    end

    -- 2x1 takes the rows' path; 1x2 the whole-tensor one, whose x is past 2^31 elements too.
    for _, case in ipairs({ { 1, 2, 32768, 16385, 2, 1 }, { 1, 2, 32768, 32769, 1, 2 } }) do
      it(("forward is exact at boundary and sampled positions (u8 %dx%d)"):format(case[5], case[6]), function()
        local B, C, H, W, sh, sw = unpack(case) -- y: more than 2^31 elements
        local seed = 21
        local x = tocha.rand({ B, C, H, W }, { dtype = "u8", device = "cuda", seed = seed, low = 0, high = 256 })
        local up = Forward.new(sh, sw, 256, "u8")
        local y = up:forward(x)
        local OH, OW = H * sh, W * sw
        local n = B * C * OH * OW
        assert.is_true(n > 2 ^ 31)
        for _, j in ipairs(positions(n, 200)) do
          local ow, oh, plane = j % OW, math.floor(j / OW) % OH, math.floor(j / (OW * OH))
          local i = (plane * H + math.floor(oh / sh)) * W + math.floor(ow / sw)
          local e = ref.convert(ref.uniform(i, seed, 0, 256, true), "u8")
          assert.are.equal(e, element(y, j, "uint8_t"), "y[" .. j .. "]")
        end
        x:free()
        y:free()
      end)
    end

    -- 2x2: dy past 2^31 elements; 1x2 (the whole-tensor path): dy and dx past it.
    for _, case in ipairs({ { 1, 1, 16384, 32769, 2, 2 }, { 1, 1, 32768, 65537, 1, 2 } }) do
      it(("backward is exact at boundary and sampled positions (f16 %dx%d, dy of 2^31+ elements)"):format(case[5], case[6]), function()
        local B, C, H, W, sh, sw = unpack(case)
        local seed = 22
        local OH, OW = H * sh, W * sw
        local dy = tocha.rand({ B, C, OH, OW }, { dtype = "f16", device = "cuda", seed = seed, low = -4, high = 4 })
        local up = Forward.new(sh, sw, 128, "f16")
        local dx = tocha.empty({ B, C, H, W }, { dtype = "f16", device = "cuda" })
        up:backward(dx, dy, dx)
        local n = B * C * H * W
        local last = B * C * OH * OW - 1
        local checks = positions(n, 200)
        -- The dx element whose block holds dy's last element, and those around 2^31 in dy.
        checks[#checks + 1] = (H - 1) * W + (W - 1)
        checks[#checks + 1] = math.floor(2 ^ 31 / OW / sh) * W
        for _, i in ipairs(checks) do
          if i < n then
            local iw, ih = i % W, math.floor(i / W)
            local s = 0
            for a = 0, sh - 1 do
              for b = 0, sw - 1 do
                local j = (ih * sh + a) * OW + iw * sw + b
                assert(j <= last)
                s = s + ref.convert(ref.uniform(j, seed, -4, 4, false), "f16")
              end
            end
            local ffi_half = element(dx, i, "uint16_t")
            local got = require("tocha.dtype").decode("f16", ffi.new("uint16_t[1]", ffi_half), 0)
            assert.are.equal(ref.convert(s, "f16"), got, "dx[" .. i .. "]")
          end
        end
        dy:free()
        dx:free()
      end)
    end
  end)

  describe("construction", function()
    it("picks block width 128 when none is given, and honours any given", function()
      for _, dt in ipairs({ "f32", "f16", "bf16", "u8" }) do
        for _, layout in ipairs({ "nchw", "nhwc" }) do
          local up = Forward.new(2, 2, nil, dt, { layout = layout })
          assert.are.equal(128, up.block_ow)
          assert.are.equal(128, up.backward_kernel.block_iw)
          assert.are.equal(128, Backward.new(2, 2, nil, dt, { layout = layout }).block_iw)
        end
      end
      assert.are.equal(128, Forward.default_block())
      assert.are.equal(256, Forward.new(2, 2, 256).block_ow)
      assert.are.equal(256, Forward.new(2, 2, 256).backward_kernel.block_iw)
      assert.are.equal(96, Forward.new(2, 2, 256, "f32", { block_iw = 96 }).backward_kernel.block_iw)
      assert.are.equal(96, Forward.new(2, 2, 256, "f32", 96, { layout = "nhwc" }).backward_kernel.block_iw)
    end)

    it("takes the layout: NHWC kernels say so in their id, and bad options are named", function()
      local cl = Forward.new(2, 3, 64, "bf16", { layout = "nhwc" })
      assert.are.equal("nhwc", cl.layout)
      assert.are.equal("upsample_nearest2d_forward__bf16__2__3__64__nhwc", cl.id)
      assert.are.equal("upsample_nearest2d_backward__bf16__2__3__64__nhwc", cl.backward_kernel.id)
      assert.truthy(cl.entry_point_source:find("upsample_nearest2d_forward<__nv_bfloat16, 2, 3, 64, true>", 1, true))
      assert.are.equal("nchw", Forward.new(2, 3, 64, "bf16").layout)
      assert.are_not.equal(cl.hash, Forward.new(2, 3, 64, "bf16").hash)
      assert.has_error(function() Forward.new(2, 2, 64, "f32", { layout = "chwn" }) end,
        'tocha.UpsampleNearest2dForward.new: layout: expected "nchw" or "nhwc", got "chwn"')
      assert.has_error(function() Forward.new(2, 2, 64, "f32", { layuot = "nhwc" }) end,
        "tocha.UpsampleNearest2dForward.new: options: unknown option \"layuot\"")
      assert.has_error(function() Backward.new(2, 2, 64, "f32", "nhwc") end,
        "tocha.UpsampleNearest2dBackward.new: options: expected a table, got string")
      local m = tocha.nn.UpsampleNearest2d(2, 2, nil, { layout = "nhwc" })
      assert.are.equal("nhwc", m.layout)
      local y = m:forward(tocha.ones({ 1, 3, 4, 5 }, { device = "sim" }))
      assert.are.same({ 1, 6, 8, 5 }, y:shape())
    end)
  end)

  describe("NVRTC", function()
    local arch = os.getenv("TOCHA_ARCH") or "sm_90"
    it("compiles both kernels for " .. arch .. " for every dtype and layout, with no GPU needed", function()
      for _, dt in ipairs(ref.all_dtypes) do
        for _, layout in ipairs({ "nchw", "nhwc" }) do
          local f = Forward.new(2, 3, 128, dt, { layout = layout })
          assert.is_true(f.kernel:build(arch) > 1000, dt .. " " .. layout)
          assert.is_true(f.backward_kernel.kernel:build(arch) > 1000, dt .. " " .. layout)
        end
      end
    end)
  end)
end)
