-- tocha.matmul and x:mm / x:matmul: matrix products on sim and, tagged #gpu, on cuda, every float
-- dtype, through every kernel of kernels/matmul.cu (the tensor cores for halves with k and n
-- multiples of 8, the f32 kernel for f32 with multiples of 4, the tiled kernel otherwise), against products computed here in f64 from the
-- inputs as stored: exactly on small integers (every product and sum exact, so any misplaced
-- fragment or tile edge shows), within the dtype's rounding on normal inputs; batches and their
-- broadcasting, the bias, views, empty operands and bad arguments.
local tocha = require "tocha"
local ref = require "support.reference"
local activations = require "support.activations"
local matmul = require "tocha.matmul"
local fails = require("support.assertions").fails

local TOL, values, small_ints = ref.product_tol, ref.values, ref.small_ints

-- The product of a and b (tables of the stored values, row-major; batch_a and batch_b
-- matrices, 1 repeated) plus bias, in f64; each element's sum of |terms| beside it.
local function product(a, b, bias, batch_a, batch_b, m, k, n)
  local out, scale = {}, {}
  for z = 0, math.max(batch_a, batch_b) - 1 do
    local oa, ob = (batch_a > 1 and z or 0) * m * k, (batch_b > 1 and z or 0) * k * n
    for i = 0, m - 1 do
      for j = 0, n - 1 do
        local s = bias and bias[j + 1] or 0
        local abs = math.abs(s)
        for p = 0, k - 1 do
          local v = a[oa + i * k + p + 1] * b[ob + p * n + j + 1]
          s, abs = s + v, abs + math.abs(v)
        end
        local e = z * m * n + i * n + j + 1
        out[e], scale[e] = s, abs + 1e-30
      end
    end
  end
  return out, scale
end


-- shape a, shape b, and whether the tensor cores take it for halves
local SHAPES = {
  { { 1, 8 }, { 8, 8 }, true }, { { 130, 32 }, { 32, 136 }, true }, { { 17, 24 }, { 24, 16 }, true },
  { { 3, 20, 16 }, { 3, 16, 24 }, true }, { { 2, 9, 8 }, { 8, 40 }, true }, { { 12, 16 }, { 4, 16, 8 }, true },
  { { 5, 7 }, { 7, 3 }, false }, { { 64, 30 }, { 30, 40 }, false }, { { 33, 16 }, { 16, 20 }, false },
  { { 2, 70, 12 }, { 1, 12, 66 }, false },
}

local function dims3(shape) return #shape == 3 and shape[1] or 1 end

describe("tocha.matmul", function()
  -- Without a GPU, NVRTC and ptxas still build the kernels for the H200: both take what they
  -- are given, without spilling registers to local memory, and the tensor-core kernel's main
  -- loop is wgmma's (HGMMA in its machine code), or mma.sync's where asked. The f32 kernel
  -- holds 8 x 8 sums a thread at the 128 registers that let two CTAs share an SM: ptxas spills
  -- 16 bytes of it in two of the four layouts (the benchmark's f32 figures include them);
  -- anything more fails here. With B row-major, where the device has wgmma, the tiles run on
  -- the warp-specialized loop (384 threads, setmaxnreg), which fits too.
  it("builds every kernel for sm_90 without local memory, the tensor cores' on wgmma", function()
    for _, c in ipairs({ { "f16", "row", "row" }, { "bf16", "row", "col" }, { "f16", "col", "row" },
      { "bf16", "col", "col" }, { "f32", "row", "row" }, { "f32", "row", "col" }, { "f32", "col", "row" },
      { "f32", "col", "col" }, { "f64", "col", "row" } }) do
      local hows = { { tile_n = 128 }, { tile_n = 256 }, { mma_sync = true } }
      if c[3] == "row" then -- the warp-specialized loop, which B row-major takes where wgmma is
        hows[4], hows[5] = { tile_n = 128, wgmma = true }, { tile_n = 256, wgmma = true }
      end
      for _, how in ipairs(hows) do
        local sync = how.mma_sync == true
        local k, _, block, kind = matmul.launch_of(c[1], 256, 256, 256, 1, c[2], c[3], how)
        local what = table.concat(c, " ") .. (sync and " mma.sync" or " " .. how.tile_n) .. (how.wgmma and " ws" or "")
        if kind == "tensor_cores" then assert.are.equal(how.wgmma and 384 or 256, block[1], what) end
        local info = k:info("sm_90")
        if kind == "f32_tiles" then
          assert.is_true(info["local"] <= 16 and info.registers <= 128, what)
        else
          assert.are.equal(0, info["local"], what)
        end
        assert.is_true(info.registers <= 255 and info.shared <= 48 * 1024, what)
        local want = ({ f16 = "tensor_cores", bf16 = "tensor_cores", f32 = "f32_tiles" })[c[1]] or false
        assert.are.equal(want, kind, what)
        if kind == "tensor_cores" then
          local ptx = k:ptx("sm_90")
          assert.are.equal(not sync, ptx:find("wgmma.mma_async", 1, true) ~= nil, what)
          assert.are.equal(sync, ptx:find("mma.sync", 1, true) ~= nil, what)
          -- the copying warpgroup gives registers back, the multiplying ones take them
          assert.are.equal(how.wgmma == true, ptx:find("setmaxnreg.dec", 1, true) ~= nil, what)
          local sass = k:sass("sm_90") -- where the toolkit has a disassembler
          if sass then assert.are.equal(not sync, sass:find("HGMMA", 1, true) ~= nil, what) end
        end
      end
    end
  end)

  -- tf32 (the opt-in): tiles of 128 x 128 on wgmma m64n128k8 in every layout (an MN-major
  -- operand transposed into the stages through registers), without local memory.
  it("builds the tf32 kernel for sm_90 in every layout on wgmma's tf32 form, without local memory", function()
    for _, l in ipairs({ { "row", "row" }, { "row", "col" }, { "col", "row" }, { "col", "col" } }) do
      local k, grid, block, kind = matmul.launch_of("f32", 256, 256, 256, 1, l[1], l[2], { tf32 = true, wgmma = true })
      local what = table.concat(l, " ")
      assert.are.equal("tf32", kind, what)
      assert.are.same({ 4, 1, 1 }, grid, what)
      assert.are.equal(256, block[1], what)
      local info = k:info("sm_90")
      assert.are.equal(0, info["local"], what)
      assert.is_true(info.registers <= 255, what)
      assert.truthy(k:ptx("sm_90"):find("wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32", 1, true), what)
      local sass = k:sass("sm_90")
      if sass then assert.truthy(sass:find("HGMMA", 1, true), what) end
    end
    -- where the device is known to lack wgmma, the f32 tiles
    assert.are.equal("f32_tiles", select(4, matmul.launch_of("f32", 256, 256, 256, 1, "row", "row", { tf32 = true, wgmma = false })))
    -- f32 operands whose consecutive dimension is not whole 16-byte chunks: the tiled kernel
    assert.is_false(select(4, matmul.launch_of("f32", 256, 254, 256, 1, "row", "row", { tf32 = true, wgmma = true })))
  end)

  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name

      -- tf32: exact on small integers (tf32 holds them) in every layout, with edges of m, n and
      -- k (a last slice of k in part); on normal inputs within tf32's rounding (each operand's
      -- 13 low mantissa bits dropped: a product within 2^-9 of its size) and not f32's result
      -- (the tensor cores did read tf32), the bits of the same product of K-major operands (an
      -- MN-major one is copied K-major first); the switch, PyTorch's set_float32_matmul_precision.
      it("reads f32 as tf32 where asked, every layout", function()
        local seed = 900
        for _, c in ipairs({ { 130, 68, 200, "row", "row" }, { 64, 36, 132, "col", "row" }, { 100, 260, 40, "row", "col" },
          { 12, 8, 20, "col", "col" }, { 2, 132, 4, "row", "row" } }) do
          local m, k, n, la, lb = c[1], c[2], c[3], c[4], c[5]
          seed = seed + 3
          local function operand(rows, cols, layout, s, ints)
            local shape = layout == "row" and { rows, cols } or { cols, rows }
            local t = ints and small_ints(shape, "f32", device, s) or tocha.randn(shape, { device = device, seed = s })
            return layout == "row" and t or t:t()
          end
          local what = ("%dx%dx%d %s %s"):format(m, k, n, la, lb)
          local a, b = operand(m, k, la, seed, true), operand(k, n, lb, seed + 1, true)
          local bias = small_ints({ n }, "f32", device, seed + 2)
          local want = product(values(a:contiguous()), values(b:contiguous()), values(bias), 1, 1, m, k, n)
          assert.are.same(want, values(tocha.matmul(a, b, { bias = bias, tf32 = true })), what)
          a, b = operand(m, k, la, seed, false), operand(k, n, lb, seed + 1, false)
          local got, f32 = values(a:mm(b, { tf32 = true })), values(a:mm(b, { tf32 = false }))
          local near, scale = product(values(a:contiguous()), values(b:contiguous()), nil, 1, 1, m, k, n)
          local differs = false
          for e = 1, #near do
            assert(math.abs(got[e] - near[e]) <= 2 ^ -9 * scale[e], ("%s: element %d is %.9g, expected %.9g"):format(what, e,
              got[e], near[e]))
            differs = differs or got[e] ~= f32[e]
          end
          assert.is_true(differs, what .. ": tf32 gave f32's result")
          -- an MN-major operand is copied K-major first: the same bits as a K-major one
          local ak, bk = a:contiguous(), b:t():contiguous():t()
          assert.are.same(got, values(ak:mm(bk, { tf32 = true })), what .. ": as K-major operands")
        end
        assert.are.equal("highest", tocha.get_float32_matmul_precision())
        local a, b = tocha.randn({ 16, 32 }, { device = device, seed = 1 }), tocha.randn({ 32, 8 }, { device = device, seed = 2 })
        local old = tocha.set_float32_matmul_precision("high")
        local ok, high = pcall(tocha.matmul, a, b)
        tocha.set_float32_matmul_precision(old)
        assert.is_true(ok, tostring(high))
        assert.are.same(values(tocha.matmul(a, b, { tf32 = true })), values(high))
        assert.are.same(values(tocha.matmul(a, b, { tf32 = false })), values(tocha.matmul(a, b)))
        fails('precision: expected "highest" or "high" (tf32), got "medium"', tocha.set_float32_matmul_precision, "medium")
        fails("opts.tf32: expected a boolean, got 1", tocha.matmul, a, b, { tf32 = 1 })
      end)

      -- autotune (tocha.set_autotune, or a call's option): the tensor cores' configuration timed
      -- per shape (tile width, plain or warp-specialized loop), each giving the heuristic's
      -- bits; the choice kept per key; f32 and other kinds untouched.
      it("times the tensor cores' configurations where asked, giving the same bits", function()
        assert.is_false(tocha.get_autotune())
        local on = tocha.device(device)
        for i, c in ipairs({ { 130, 64, 296, "row", "row", "relu" }, { 70, 40, 136, "row", "col", "identity" },
          { 24, 24, 264, "col", "row", "identity" } }) do
          local m, k, n, la, lb, act = c[1], c[2], c[3], c[4], c[5], c[6]
          assert.are.equal("tensor_cores", select(4, matmul.launch_of("bf16", m, k, n, 2, la, lb)))
          local a = tocha.randn(la == "row" and { 2, m, k } or { 2, k, m }, { device = device, seed = 40 + i }):cast("bf16")
          local b = tocha.randn(lb == "row" and { k, n } or { n, k }, { device = device, seed = 50 + i }):cast("bf16")
          if la == "col" then a = a:transpose(2, 3) end
          if lb == "col" then b = b:t() end
          local bias = tocha.randn({ n }, { device = device, seed = 60 + i }):cast("bf16")
          local want = tocha.matmul(a, b, { bias = bias, activation = act })
          local old = tocha.set_autotune(true)
          local ok, got = pcall(tocha.matmul, a, b, { bias = bias, activation = act })
          tocha.set_autotune(old)
          assert.is_true(ok, tostring(got))
          local what = table.concat(c, " ")
          assert.is_true(tocha.allclose(got, want, 0, 0), what)
          assert.is_true(tocha.allclose(tocha.matmul(a, b, { bias = bias, activation = act, autotune = true }), want, 0, 0), what)
          local tuner = matmul.tuner("bf16", la, lb, act, on)
          local cfg, how = tuner:choice(a, b, bias, got, m, n, k, m * k, 0, 1, 2)
          assert.are.equal("memory", how.source, what)
          assert.truthy(cfg.tile_n == 128 or cfg.tile_n == 256, what)
          assert.are.equal(0, #how.dropped, what .. ": every configuration built, ran and agreed")
        end
        -- f32 (no tensor-core configurations to choose from) as without it
        local a, b = tocha.randn({ 20, 12 }, { device = device, seed = 1 }), tocha.randn({ 12, 8 }, { device = device, seed = 2 })
        assert.is_true(tocha.allclose(tocha.matmul(a, b, { autotune = true }), tocha.matmul(a, b), 0, 0))
        fails("opts.autotune: expected a boolean, got 1", tocha.matmul, a, b, { autotune = 1 })
        fails("flag: expected a boolean, got nil", tocha.set_autotune)
      end)

      it("multiplies matrices and batches of them exactly on small integers, every float dtype", function()
        local seed = 0
        for _, dt in ipairs(ref.float_dtypes) do
          for _, s in ipairs(SHAPES) do
            local sa, sb = s[1], s[2]
            seed = seed + 1
            local a, b = small_ints(sa, dt, device, seed), small_ints(sb, dt, device, seed + 1000)
            local m, k, n = sa[#sa - 1], sa[#sa], sb[#sb]
            local bias = seed % 2 == 0 and small_ints({ n }, dt, device, seed + 2000) or nil
            local c = tocha.matmul(a, b, bias and { bias = bias } or nil)
            local batch = math.max(dims3(sa), dims3(sb))
            local want_shape = (#sa == 3 or #sb == 3) and { batch, m, n } or { m, n }
            assert.are.same(want_shape, c:shape())
            assert.are.equal(dt, c:dtype())
            local want = product(values(a), values(b), bias and values(bias), dims3(sa), dims3(sb), m, k, n)
            local got = values(c)
            for e = 1, #want do
              assert(got[e] == want[e], ("%s %s x %s: element %d is %.17g, expected %.17g"):format(dt,
                table.concat(sa, "x"), table.concat(sb, "x"), e, got[e], want[e]))
            end
          end
        end
      end)

      it("stays within the dtype's rounding on normal inputs and long sums", function()
        local seed = 100
        for _, dt in ipairs(ref.float_dtypes) do
          for _, s in ipairs({ { { 40, 296 }, { 296, 48 } }, { { 2, 19, 200 }, { 200, 24 } }, { { 9, 131 }, { 131, 7 } } }) do
            local sa, sb = s[1], s[2]
            seed = seed + 1
            local a = tocha.randn(sa, { dtype = dt, device = device, seed = seed })
            local b = tocha.randn(sb, { dtype = dt, device = device, seed = seed + 1 })
            local bias = tocha.randn({ sb[#sb] }, { dtype = dt, device = device, seed = seed + 2 })
            local c = a:mm(b, { bias = bias })
            local want, scale = product(values(a), values(b), values(bias), dims3(sa), 1, sa[#sa - 1], sa[#sa], sb[#sb])
            local got = values(c)
            for e = 1, #want do
              local err = math.abs(got[e] - want[e]) / scale[e]
              assert(err <= TOL[dt], ("%s %s: element %d is %.17g, expected %.17g"):format(dt, table.concat(sa, "x"), e,
                got[e], want[e]))
            end
          end
        end
      end)

      -- opts.activation in the epilogue of every kernel (the warp-specialized tensor cores for
      -- halves with B row-major, a batch; the f32 tiles; the tiled kernel), against F of the
      -- reference's sums; k = 0 too.
      it("applies an activation in the epilogue, every kernel", function()
        local seed = 300
        for _, c in ipairs({ { "bf16", { 2, 130, 32 }, { 32, 136 }, "gelu" }, { "f16", { 17, 24 }, { 24, 16 }, "silu" },
          { "f32", { 40, 64 }, { 64, 36 }, "tanh" }, { "f64", { 9, 13 }, { 13, 7 }, "sigmoid" },
          { "f32", { 5, 0 }, { 0, 3 }, "sigmoid" }, { "f32", { 12, 16 }, { 16, 20 }, "hardswish" },
          { "f64", { 7, 5 }, { 5, 9 }, "hardsigmoid" } }) do
          local dt, sa, sb, act = c[1], c[2], c[3], c[4]
          seed = seed + 1
          local a = tocha.randn(sa, { dtype = dt, device = device, seed = seed })
          local b = tocha.randn(sb, { dtype = dt, device = device, seed = seed + 1 })
          local bias = tocha.randn({ sb[#sb] }, { dtype = dt, device = device, seed = seed + 2 })
          local got = values(tocha.matmul(a, b, { bias = bias, activation = act }))
          local want, scale = product(values(a), values(b), values(bias), dims3(sa), 1, sa[#sa - 1], sa[#sa], sb[#sb])
          local f = activations[act][1]
          for e = 1, #want do
            local err = math.abs(got[e] - f(want[e])) / (1.2 * scale[e] + math.abs(f(want[e])))
            assert(err <= TOL[dt], ("%s %s %s: element %d is %.17g, expected %.17g"):format(dt, table.concat(sa, "x"), act, e,
              got[e], f(want[e])))
          end
        end
        fails("opts.activation: expected one of identity", tocha.matmul, tocha.zeros({ 2, 2 }), tocha.zeros({ 2, 2 }),
          { activation = 1 })
      end)

      -- Transposed views are read as they lie (a column-major operand), every combination, on
      -- both kernels; a batch's transposes too.
      it("reads transposed operands in place, every combination, exactly on small integers", function()
        local seed = 300
        for _, dt in ipairs({ "bf16", "f16", "f32" }) do
          for _, s in ipairs({ { 130, 40, 136 }, { 24, 16, 8 }, { 9, 13, 5 } }) do
            local m, k, n = s[1], s[2], s[3]
            for _, ta in ipairs({ false, true }) do
              for _, tb in ipairs({ false, true }) do
                seed = seed + 1
                local a = ta and small_ints({ k, m }, dt, device, seed):t() or small_ints({ m, k }, dt, device, seed)
                local b = tb and small_ints({ n, k }, dt, device, seed + 500):t() or small_ints({ k, n }, dt, device, seed + 500)
                local want = product(values(a:contiguous()), values(b:contiguous()), nil, 1, 1, m, k, n)
                assert.are.same(want, values(tocha.matmul(a, b)), ("%s %dx%dx%d ta %s tb %s"):format(dt, m, k, n,
                  tostring(ta), tostring(tb)))
              end
            end
          end
        end
        local a = small_ints({ 3, 16, 24 }, "f16", device, 900):transpose(2, 3) -- [3, 24, 16], each matrix column-major
        local b = small_ints({ 3, 8, 16 }, "f16", device, 901):transpose(2, 3) -- [3, 16, 8]
        local want = product(values(a:contiguous()), values(b:contiguous()), nil, 3, 3, 24, 16, 8)
        assert.are.same(want, values(tocha.matmul(a, b)))
      end)

      -- Long sums cross every stage of the tensor cores' pipeline (k = 392: seven slices of 64
      -- through four stages, the last partly past k) with edges in m and n, each layout, on both
      -- main loops (wgmma with tiles 128 and 256 wide, and mma.sync, launched directly), and
      -- the f32 kernel's 49 slices of 8 through its two buffers: values -1, 0, 1 keep the f32
      -- sums exact, so the one rounding to the dtype is the reference's too.
      it("sums long k through every pipeline stage exactly, each layout, every matrix kernel", function()
        local op, devices = require "tocha.op", require "tocha.device"
        local m, k, n = 136, 392, 144
        local seed = 1200
        for _, dt in ipairs({ "f16", "bf16", "f32" }) do
          for _, la in ipairs({ "row", "col" }) do
            for _, lb in ipairs({ "row", "col" }) do
              seed = seed + 2
              local function ones(shape, sd)
                return tocha.randn(shape, { device = device, seed = sd }):mul(0.8):round():clamp(-1, 1):cast(dt)
              end
              local a = ones(la == "row" and { m, k } or { k, m }, seed)
              local b = ones(lb == "row" and { k, n } or { n, k }, seed + 1)
              local av = values(la == "row" and a or a:t():contiguous())
              local bv = values(lb == "row" and b or b:t():contiguous())
              local want = product(av, bv, nil, 1, 1, m, k, n)
              for i = 1, #want do want[i] = ref.convert(want[i], dt) end
              local hows = dt == "f32" and { {} } or { { tile_n = 128 }, { tile_n = 256 }, { mma_sync = true },
                { tile_n = 128, warp_specialized = true }, { tile_n = 256, warp_specialized = true } }
              for _, how in ipairs(hows) do
                local kern, grid, block, kind = matmul.launch_of(dt, m, k, n, 1, la, lb, how)
                assert.are.equal(dt == "f32" and "f32_tiles" or "tensor_cores", kind)
                local c = tocha.full({ m, n }, -77, { dtype = dt, device = device })
                op.launch_packed(kern, devices.wrap(a.dev), grid, block, { a.data, b.data, c.data, c.data, m, n, k, 0, 0, 0, 0, c.data, c.data, 0 })
                assert.are.same(want, values(c), ("%s %s x %s %s"):format(dt, la, lb, how.mma_sync and "mma.sync" or how.tile_n)
                  .. (how.warp_specialized and " warp-specialized" or ""))
              end
            end
          end
        end
      end)

      -- torch.matmul's shapes: vectors on either side (their dimension dropped), both (a dot
      -- product, shape {1}), batches of several dimensions, one repeated over the other's.
      it("takes vectors and batches of several dimensions as torch.matmul does", function()
        local seed = 700
        local cases = { -- a, b, the result's shape, a's and b's matrices as [batch, rows, cols]
          { { 24 }, { 24, 16 }, { 16 }, { 1, 1, 24 }, { 1, 24, 16 } },
          { { 40, 24 }, { 24 }, { 40 }, { 1, 40, 24 }, { 1, 24, 1 } },
          { { 24 }, { 24 }, { 1 }, { 1, 1, 24 }, { 1, 24, 1 } },
          { { 2, 3, 17, 16 }, { 2, 3, 16, 8 }, { 2, 3, 17, 8 }, { 6, 17, 16 }, { 6, 16, 8 } },
          { { 2, 3, 17, 16 }, { 16, 24 }, { 2, 3, 17, 24 }, { 6, 17, 16 }, { 1, 16, 24 } },
          { { 1, 1, 9, 16 }, { 2, 2, 16, 8 }, { 2, 2, 9, 8 }, { 1, 9, 16 }, { 4, 16, 8 } },
          { { 1, 1, 9, 16 }, { 3, 16, 8 }, { 1, 3, 9, 8 }, { 1, 9, 16 }, { 3, 16, 8 } },
        }
        for _, dt in ipairs({ "bf16", "f32" }) do
          for _, c in ipairs(cases) do
            seed = seed + 1
            local a, b = small_ints(c[1], dt, device, seed), small_ints(c[2], dt, device, seed + 1)
            local y = tocha.matmul(a, b)
            assert.are.same(c[3], y:shape())
            local ma, mb = c[4], c[5]
            local want = product(values(a), values(b), nil, ma[1], mb[1], ma[2], ma[3], mb[3])
            assert.are.same(want, values(y), dt .. " " .. table.concat(c[1], "x") .. " @ " .. table.concat(c[2], "x"))
          end
        end
        -- a batch of transposed matrices of four dimensions, read in place
        local a = small_ints({ 2, 2, 16, 24 }, "f16", device, 800):transpose(3, 4) -- [2, 2, 24, 16]
        local b = small_ints({ 2, 2, 16, 8 }, "f16", device, 801)
        local want = product(values(a:contiguous()), values(b), nil, 4, 4, 24, 16, 8)
        assert.are.same(want, values(tocha.matmul(a, b)))
      end)

      it("reads other views through a dense copy, and takes x:matmul as x:mm", function()
        local a = small_ints({ 24, 50 }, "bf16", device, 7):narrow(2, 3, 40) -- rows 50 apart
        local b = small_ints({ 24, 20 }, "bf16", device, 8):narrow(2, 2, 16)
        local c = a:t():matmul(b) -- [40, 24] x [24, 16]
        local want = product(values(a:t():contiguous()), values(b:contiguous()), nil, 1, 1, 40, 24, 16)
        assert.are.same(want, values(c))
      end)

      it("gives empty results for empty operands, and the bias alone for k = 0", function()
        local e = tocha.matmul(tocha.empty({ 0, 8 }, { device = device }), tocha.empty({ 8, 5 }, { device = device }))
        assert.are.same({ 0, 5 }, e:shape())
        local bias = tocha.tensor({ 1, 2, 3 }, { device = device })
        local z = tocha.matmul(tocha.empty({ 2, 0 }, { device = device }), tocha.empty({ 0, 3 }, { device = device }),
          { bias = bias })
        assert.are.same({ 1, 2, 3, 1, 2, 3 }, z:to_table(true))
      end)

      it("refuses bad arguments, naming them, and goes on", function()
        local a = tocha.zeros({ 4, 6 }, { device = device })
        local b = tocha.zeros({ 6, 3 }, { device = device })
        fails("b: expected 6 rows (a's columns), got 4", tocha.matmul, a, tocha.zeros({ 4, 3 }, { device = device }))
        fails("b: expected f32 (a's dtype), got f64", tocha.matmul, a, b:cast("f64"))
        fails("a: expected a float dtype, got i32", tocha.matmul, a:cast("i32"), b:cast("i32"))
        fails("b: expected 6 rows (a's columns), got 3", tocha.matmul, a, tocha.zeros({ 3 }, { device = device }))
        fails("b: expected a tensor, got number", tocha.matmul, a, 3)
        fails("b: batch dimensions [3] do not match a's [2]", tocha.matmul, tocha.zeros({ 2, 4, 6 }, { device = device }),
          tocha.zeros({ 3, 6, 3 }, { device = device }))
        fails("opts.bias: expected shape [3] (b's columns), got [4]", tocha.matmul, a, b,
          { bias = tocha.zeros({ 4 }, { device = device }) })
        fails("opts: unknown option \"alpha\"", tocha.matmul, a, b, { alpha = 2 })
        assert.are.same({ 4, 3 }, tocha.matmul(a, b):shape())
      end)
    end)
  end
end)

-- tocha.MatMul: the product of two computed tensors as an op (a model's node: attention's q k^T
-- and p v), batched, b a batch of its own or one matrix; exact on small integers through each
-- kind of kernel (the tensor cores, the f32 tiles, the tiled kernel of odd sizes), forward and
-- backward (da = dy b^T, db = a^T dy summed over a's batch where b is one matrix).
describe("tocha.MatMul", function()
  for _, dev in ipairs(ref.devices()) do
    it("multiplies batches of computed matrices as tocha.matmul does, on " .. dev.name .. dev.tag, function()
      local seed = 7000
      for _, c in ipairs({ { "bf16", { 2, 3, 17, 16 }, { 2, 3, 16, 24 }, "tensor_cores" }, { "f32", { 3, 9, 12 }, { 12, 20 }, "f32_tiles" },
        { "f16", { 4, 5, 7 }, { 4, 7, 6 }, false }, { "f64", { 2, 3, 4 }, { 2, 4, 5 }, false },
        { "f32", { 2, 6, 12 }, { 2, 12, 8 }, "tf32", true } }) do
        local dt, sa, sb, kind = c[1], c[2], c[3], c[4]
        seed = seed + 10
        local mm = tocha.MatMul.new(sa[#sa], sb[#sb], { dtype = dt, tf32 = c[5] })
        assert.are.equal(kind, mm.matrix_kind, dt)
        local a, b = small_ints(sa, dt, dev.name, seed), small_ints(sb, dt, dev.name, seed + 1)
        local y = mm:forward(a, b)
        local m, k, n = sa[#sa - 1], sa[#sa], sb[#sb]
        local batch_a, batch_b = ref.numel(sa) / (m * k), ref.numel(sb) / (k * n)
        local want = product(values(a), values(b), nil, batch_a, batch_b, m, k, n)
        local shape = {}
        for i = 1, #sa - 1 do shape[i] = sa[i] end
        shape[#shape + 1] = n
        assert.are.same(shape, y:shape())
        assert.are.same(want, values(y), dt)
        -- in a model, as the import places it
        local ia, ib = tocha.Model.input(sa, { name = "a", dtype = dt }), tocha.Model.input(sb, { name = "b", dtype = dt })
        local model = tocha.Model({ ia, ib }, { mm(ia, ib) })
        model:load(sa[1], dev.name)
        assert.are.same(want, values(model:forward({ a, b })[1]), dt .. " in a model")
        -- backward, against sums written out (every element: da and db poisoned first)
        local dy = small_ints(shape, dt, dev.name, seed + 2)
        local av, bv, dyv = values(a), values(b), values(dy)
        local wda, wdb = {}, {}
        for e = 1, #bv do wdb[e] = 0 end
        for z = 0, batch_a - 1 do
          local ob = (batch_b > 1 and z or 0) * k * n
          for i = 0, m - 1 do
            for p = 0, k - 1 do
              local s = 0
              for j = 0, n - 1 do
                local g = dyv[z * m * n + i * n + j + 1]
                s = s + g * bv[ob + p * n + j + 1]
                wdb[ob + p * n + j + 1] = wdb[ob + p * n + j + 1] + av[z * m * k + i * k + p + 1] * g
              end
              wda[z * m * k + i * k + p + 1] = s
            end
          end
        end
        local da, db = tocha.full(sa, 99, { dtype = dt, device = dev.name }), tocha.full(sb, 99, { dtype = dt, device = dev.name })
        mm:backward(a, b, dy, da, db)
        assert.are.same(wda, values(da), dt .. " da")
        assert.are.same(wdb, values(db), dt .. " db")
        local _, cache = model:forward_train({ a, b })
        local grads = model:backward({ dy }, cache)
        assert.are.same(wda, values(grads[1]), dt .. " da in a model")
        assert.are.same(wdb, values(grads[2]), dt .. " db in a model")
      end
      local mm = tocha.MatMul.new(4, 5)
      fails("inputs[1]: expected 4 columns (k), got 3", mm.compute_concrete_output_shape, mm, { { 2, 3 }, { 4, 5 } })
      fails("batch dimensions [3, 4, 5] do not match", mm.compute_concrete_output_shape, mm, { { 2, 6, 4 }, { 3, 4, 5 } })
      fails("k, n: expected positive sizes", tocha.MatMul.new, 0, 5)
      assert.is_true(mm:has_backward())
    end)
  end
end)
