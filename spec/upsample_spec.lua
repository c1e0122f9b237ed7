-- The seed's kernels, UpsampleNearest2dForward and UpsampleNearest2dBackward: fields and
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
    it("follow the seed: name, id, constants, sources and the entry point", function()
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

    it("has the seed's constant answers", function()
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

    it("has grids that cover each output and input element exactly once", function()
      -- The kernels' mappings, walked in Lua for f32 (see the kernels' headers): a warp per
      -- work item, one segment of a row, grid-stride over items.
      local SEGMENT, SHORT, VEC = 4, 2, 4
      -- The segment lengths and their rule are the kernels' (kernels/tocha.cuh) and the host's
      -- grid's (host/src/upsample.c, checked through up:grid below): all three must agree.
      local src_dir = assert(os.getenv("TOCHA_SOURCE_DIR"), "TOCHA_SOURCE_DIR is set by CTest")
      local cuh = assert(io.open(src_dir .. "/kernels/tocha.cuh")):read("*a")
      assert.are.equal(SEGMENT, tonumber(cuh:match("#define TOCHA_UPSAMPLE_SEGMENT (%d+)")))
      assert.are.equal(SHORT, tonumber(cuh:match("#define TOCHA_UPSAMPLE_SEGMENT_SHORT (%d+)")))
      -- Forward: the short item when several output rows are each whole 128-byte lines.
      -- f32 rows alike against lines: one warp step for four or more rows (forward_plan's
      -- alike_steps), else the short item; rows that are not take the long one (no shared
      -- memory through the RuntimeOp's grid).
      local function forward_seg_len(cols, sh)
        if sh > 1 and cols * 4 % 128 == 0 then return 32 * (sh >= 4 and 1 or SHORT) end
        return 32 * SEGMENT
      end
      local function forward_segments(cols, sh) return math.max(1, math.ceil(math.floor(cols / VEC) / forward_seg_len(cols, sh))) end
      -- Backward: the short item when a lane reads several dy rows in whole 16-byte loads.
      local function backward_k(sw) return math.max(1, math.floor(VEC / sw)) end
      local function backward_seg_len(sw, sh)
        local k = backward_k(sw)
        return 32 * k * ((sh > 1 and k * sw * 4 == 16) and SHORT or SEGMENT)
      end
      local function backward_segments(cols, sw, sh) return math.max(1, math.ceil(cols / backward_seg_len(sw, sh))) end

      -- Work items are (row of `rows`, segment); each writes whole elements of `out_rows`
      -- rows of `cols`, which must all be hit exactly once.
      local function visit(g, block, rows, segs, out_rows, cols, each_item)
        local warps, hits, n = block / 32, {}, 0
        local function hit(row, col)
          assert(row >= 0 and row < out_rows and col >= 0 and col < cols)
          local k = row * cols + col
          hits[k] = (hits[k] or 0) + 1
          n = n + 1
        end
        for bx = 0, g[1] - 1 do
          for w = 0, warps - 1 do
            local item = bx * warps + w
            while item < rows * segs do
              each_item(math.floor(item / segs), item % segs, hit)
              item = item + g[1] * warps
            end
          end
        end
        assert.are.equal(out_rows * cols, n)
        for k = 0, out_rows * cols - 1 do assert(hits[k] == 1, "element " .. k) end
      end

      -- Forward: an item is a segment of an input row and writes it to the sh output rows.
      local function walk_forward(g, block, in_rows, sh, cols)
        local segs, seg_len = forward_segments(cols, sh), forward_seg_len(cols, sh)
        visit(g, block, in_rows, segs, in_rows * sh, cols, function(in_row, seg, hit)
          for row = in_row * sh, in_row * sh + sh - 1 do
            local function to(bytes) -- elements from the row's start to its next `bytes` boundary
              local mis = (row * cols * 4) % bytes / 4 -- the base address is 256-byte aligned
              return math.min(mis > 0 and bytes / 4 - mis or 0, cols)
            end
            -- Vectors in slots of the 128-byte line grid, the first `skip` slots before the row.
            local single = to(16)
            local skip = ((row * cols + single) * 4) % 128 / 16
            local lined = single - skip * VEC
            local vectors = skip + math.floor((cols - single) / VEC)
            if seg == 0 then
              for col = 0, single - 1 do hit(row, col) end
            end
            local v_end = seg == segs - 1 and vectors or math.min(vectors, (seg + 1) * seg_len)
            for v = math.max(skip, seg * seg_len), v_end - 1 do
              -- Slot v is 16-byte slot v % 8 of its line: a warp's 32 slots fill 4 whole lines.
              assert.are.equal((v % 8) * 16, ((row * cols + lined + v * VEC) * 4) % 128)
              for e = 0, VEC - 1 do hit(row, lined + v * VEC + e) end
            end
            if seg == segs - 1 then for col = lined + vectors * VEC, cols - 1 do hit(row, col) end end
          end
        end)
      end

      -- Forward with one output row per input row: the whole output is one row of n elements
      -- (y `off` elements past a 256-byte boundary), its slots on y's 128-byte line grid, an
      -- item SEGMENT warp steps of them; the first item writes the single elements before y's
      -- first 16-byte boundary, the last those after its last whole vector.
      local function walk_flat(g, block, n, off)
        local seg_len = 32 * SEGMENT
        local single = math.min((off * 4) % 16 > 0 and (16 - (off * 4) % 16) / 4 or 0, n)
        local skip = ((off + single) * 4) % 128 / 16
        local lined = single - skip * VEC
        local slots = skip + math.floor((n - single) / VEC)
        local items = slots > seg_len and math.ceil(slots / seg_len) or 1
        visit(g, block, items, 1, 1, n, function(item, _, hit)
          if item == 0 then for col = 0, single - 1 do hit(0, col) end end
          for v = math.max(skip, item * seg_len), math.min(slots, (item + 1) * seg_len) - 1 do
            assert.are.equal((v % 8) * 16, ((off + lined + v * VEC) * 4) % 128)
            for e = 0, VEC - 1 do hit(0, lined + v * VEC + e) end
          end
          if item == items - 1 then for col = lined + slots * VEC, n - 1 do hit(0, col) end end
        end)
      end

      -- Backward: lanes take runs of k dx elements (k * 4 bytes: 4, 8 or 16 for f32) from the
      -- row's first boundary of k * 4 bytes; the elements before it and after the last whole
      -- run one per lane, in the row's first and last segments.
      local function walk_backward(g, block, rows, cols, sw, sh)
        local k, segs, seg_len = backward_k(sw), backward_segments(cols, sw, sh), backward_seg_len(sw, sh)
        local bytes = k * 4
        visit(g, block, rows, segs, rows, cols, function(row, seg, hit)
          local mis = (row * cols * 4) % bytes / 4 -- the base address is 256-byte aligned
          local head = math.min(mis > 0 and bytes / 4 - mis or 0, cols)
          local runs_end = head + math.floor((cols - head) / k) * k
          if seg == 0 then for col = 0, head - 1 do hit(row, col) end end
          local iw_end = seg == segs - 1 and runs_end or math.min(runs_end, head + (seg + 1) * seg_len)
          for lane = 0, 31 do
            local iw0 = head + seg * seg_len + lane * k
            while iw0 < iw_end do
              assert.are.equal(0, ((row * cols + iw0) * 4) % bytes) -- one aligned store
              for e = 0, k - 1 do hit(row, iw0 + e) end
              iw0 = iw0 + 32 * k
            end
          end
          if seg == segs - 1 then for col = runs_end, cols - 1 do hit(row, col) end end
        end)
      end

      -- Backward with one dy row per dx row: the whole tensor is one row of n elements (dx
      -- `off` elements past a 256-byte boundary); item 0 is its head and first segment, each
      -- later one a segment from the head, the last the rest, each a row of its own.
      local function walk_backward_flat(g, block, n, sw, off)
        local k = backward_k(sw)
        local seg_len, bytes = 32 * k * SEGMENT, k * 4
        local mis = (off * 4) % bytes / 4
        local head = math.min(mis > 0 and bytes / 4 - mis or 0, n)
        local items = n > head + seg_len and 1 + math.floor((n - head - 1) / seg_len) or 1
        visit(g, block, items, 1, 1, n, function(item, _, hit)
          local base = item == 0 and 0 or head + item * seg_len
          local width = math.min(n - base, item == 0 and head + seg_len or seg_len)
          local h = item == 0 and head or 0 -- later items start on a run's boundary
          for col = 0, h - 1 do hit(0, base + col) end
          local runs_end = h + math.floor((width - h) / k) * k
          for iw0 = h, runs_end - 1, k do
            assert.are.equal(0, ((off + base + iw0) * 4) % bytes) -- one aligned store
            for e = 0, k - 1 do hit(0, base + iw0 + e) end
          end
          for col = runs_end, width - 1 do hit(0, base + col) end
        end)
      end

      for _, block in ipairs({ 32, 128, 1024 }) do
        local up = Forward.new(3, 2, block, "f32", 64)
        for _, s in ipairs(shapes) do
          local out = up:compute_concrete_output_shape({ s })
          local rows, in_rows = out[1] * out[2] * out[3], s[1] * s[2] * s[3]
          assert.are.same({ math.ceil(in_rows * forward_segments(out[4], 3) / (block / 32)), 1, 1 }, up:grid(out))
          assert.are.same({ math.ceil(in_rows * backward_segments(s[4], 2, 3) / 2), 1, 1 }, up:backward_grid({ s }, out))
          if rows * out[4] <= 50000 then
            walk_forward(up:grid(out), block, in_rows, 3, out[4])
            walk_backward(up:backward_grid({ s }, out), 64, in_rows, s[4], 2, 3)
          end
          assert.are.same(up:grid(out), up:grid_for_launch(1, { s }, out))
          assert.are.same(up:backward_grid({ s }, out), up:backward_grid_for_launch(1, { s }, out))
        end
      end
      -- Long rows split into several segments, walked too, with items of both lengths: forward
      -- outputs of one row per input row as one row (walk_flat), rows of whole lines (2048
      -- floats) and not with several rows per input row,
      -- backward with one dy row per dx row and with several.
      local up = Forward.new(1, 2, 64, "f32", 64)
      assert.are.same({ math.ceil(6000 / 4 / 128 / 2), 1, 1 }, up:grid({ 1, 1, 3, 2000 }))
      assert.are.same({ 1, 1, 1 }, up:grid({ 1, 1, 1, 6 }))
      for _, n in ipairs({ 6000, 6144, 3, 517 }) do
        -- y on a 256-byte boundary, as the grid assumes, and 1 to 31 elements past it (the
        -- grid-stride loop then takes an item the grid may lack)
        for _, off in ipairs({ 0, 1, 2, 3, 5, 8, 31 }) do walk_flat(up:grid({ 1, 1, 1, n }), 64, n, off) end
      end
      for _, n in ipairs({ 3000, 3072, 3, 517 }) do
        for _, off in ipairs({ 0, 1, 3, 8, 31 }) do
          walk_backward_flat(up:backward_grid({ { 1, 1, 1, n } }, { 1, 1, 1, 2 * n }), 64, n, 2, off)
        end
      end
      assert.are.same({ math.ceil(3000 / (32 * 2 * SEGMENT) / 2), 1, 1 }, up:backward_grid({ { 1, 1, 3, 1000 } }, { 1, 1, 3, 2000 }))
      up = Forward.new(2, 2, 64, "f32", 64)
      walk_forward(up:grid({ 1, 1, 6, 2000 }), 64, 3, 2, 2000)
      walk_forward(up:grid({ 1, 1, 6, 2048 }), 64, 3, 2, 2048)
      assert.are.same({ 3 * 2048 / 4 / (32 * SHORT) / 2, 1, 1 }, up:grid({ 1, 1, 6, 2048 })) -- short items
      assert.are.same({ 3 * 4 / 2, 1, 1 }, up:grid({ 1, 1, 6, 2000 })) -- long ones: 500 vectors in 4
      walk_backward(up:backward_grid({ { 1, 1, 3, 1000 } }, { 1, 1, 6, 2000 }), 64, 3, 1000, 2, 2)
      up = Forward.new(4, 4, 64, "f32", 64)
      walk_forward(up:grid({ 1, 1, 12, 2048 }), 64, 3, 4, 2048)
      assert.are.same({ 3 * 2048 / 4 / 32 / 2, 1, 1 }, up:grid({ 1, 1, 12, 2048 })) -- one-step items
      walk_forward(up:grid({ 1, 1, 12, 2044 }), 64, 3, 4, 2044)
      walk_backward(up:backward_grid({ { 1, 1, 5, 1023 } }, { 1, 1, 10, 2046 }), 64, 5, 1023, 2, 2)
      up = Forward.new(2, 1, 64, "f32", 64)
      walk_backward(up:backward_grid({ { 1, 1, 5, 1023 } }, { 1, 1, 10, 1023 }), 64, 5, 1023, 1, 2)
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

      it("is exact for every row alignment: widths 1 to 40 across dtypes and scales", function()
        -- Rows of every width start at every alignment, exercising the single-element head and
        -- tail, the vector stores and the 4-, 8- and 16-byte loads of both kernels.
        for _, dt in ipairs({ "f32", "f16", "u8" }) do
          for _, s in ipairs({ { 1, 1 }, { 2, 2 }, { 1, 2 }, { 2, 1 }, { 3, 3 }, { 1, 8 }, { 4, 4 }, { 1, 5 }, { 2, 7 } }) do
            local up = Forward.new(s[1], s[2], 64, dt)
            for W = 1, 40 do
              local shape = { 1, 2, 3, W }
              local out = { 1, 2, 3 * s[1], W * s[2] }
              -- small integers: every sum is exact in every accumulator, so the check is exact
              local x = tocha.rand(shape, { dtype = "i32", device = device, seed = W, low = 0, high = 16 }):cast(dt)
              local y = tocha.empty(out, { dtype = dt, device = device }):fill(POISON)
              up:forward(x, y)
              local label = ("%s %dx%d W=%d"):format(dt, s[1], s[2], W)
              assert.are.same(up_ref.forward(x:to_table(true), shape, s[1], s[2]), y:to_table(true), label)
              local dx = tocha.empty(shape, { dtype = dt, device = device }):fill(POISON)
              up:backward(x, y, dx)
              local expect = up_ref.backward(y:to_table(true), shape, s[1], s[2])
              for i = 1, #expect do expect[i] = ref.convert(expect[i], dt) end
              assert.are.same(expect, dx:to_table(true), label .. " backward")
            end
          end
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

      it("is exact where output rows are whole vectors but not whole lines (bulk copies)", function()
        -- These forwards build each segment once in shared memory and copy it to every output
        -- row (on sm_90, and on the simulator with lane 0 doing each warp's work): rows at each
        -- 16-byte place against lines and sectors (the two images), several segments per row,
        -- short rows of one segment, and every block width (1024 takes no buffer, as it would
        -- need more than 48 KiB, and so the per-row path).
        local cases = {
          { "f32", 4, 4, 1023 }, { "f32", 3, 3, 1020 }, { "f32", 2, 1, 1020 }, { "u8", 4, 4, 1020 },
          { "f16", 2, 2, 1020 }, { "bf16", 4, 4, 1022 }, { "f64", 2, 2, 333 }, { "i32", 5, 3, 12 },
          { "f32", 2, 2, 2 }, { "u8", 3, 16, 1 },
        }
        forwards_exact(cases)
      end)

      it("is exact where four or more output rows are not whole vectors (row images)", function()
        -- These forwards build each segment once into shared memory, element by element in a
        -- row's order, and each row's vectors read it at that row's own place against 16
        -- bytes (16, 8, 4 or 1-2 bytes off): spans, windows and single elements as inputs,
        -- several segments per row, rows shorter than one segment, every block width (1024
        -- takes no buffer and so the per-row path).
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
        assert.are.same({ 40000, 1, 1 }, up:grid({ 1, 1, 80000, 3 })) -- a warp per input row
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
      end)

      it("gradcheck catches a wrong backward", function()
        local up = Forward.new(2, 2, 64, "f64")
        local wrong = {
          forward = function(_, x) return up:forward(x) end,
          backward = function(_, x, dy) return up:backward(x, dy):cast("f64"):fill(1) end,
        }
        assert.is_false((tocha.gradcheck(wrong, tocha.randn({ 1, 1, 3, 3 }, { dtype = "f64", device = device, seed = 1 }))))
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
    it("picks the measured block widths when none is given, and honours any given", function()
      local tuning = require "tocha.upsample_tuning"
      for _, dt in ipairs({ "f32", "f16", "bf16", "u8" }) do
        local up = Forward.new(2, 2, nil, dt)
        assert.are.equal(tuning.best["forward " .. dt] or tuning.fallback, up.block_ow)
        assert.are.equal(tuning.best["backward " .. dt] or tuning.fallback, up.backward_kernel.block_iw)
        assert.are.equal(tuning.best["backward " .. dt] or tuning.fallback, Backward.new(2, 2, nil, dt).block_iw)
      end
      assert.are.equal(64, tuning.best["forward f32"])
      assert.are.equal(256, Forward.new(2, 2, 256).block_ow)
      assert.are.equal(256, Forward.new(2, 2, 256).backward_kernel.block_iw)
    end)
  end)

  describe("NVRTC", function()
    local arch = os.getenv("TOCHA_ARCH") or "sm_90"
    it("compiles both kernels for " .. arch .. " for every dtype, with no GPU needed", function()
      for _, dt in ipairs(ref.all_dtypes) do
        local f = Forward.new(2, 2, 128, dt)
        assert.is_true(f.kernel:build(arch) > 1000, dt)
        assert.is_true(f.backward_kernel.kernel:build(arch) > 1000, dt)
      end
    end)
  end)
end)
