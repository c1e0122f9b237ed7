-- Kernel knobs: compile options (what -D and -U do on the simulator, the cache key, every
-- refusal), launch bounds, and dynamic shared memory at launch (through k:launch, plans and
-- graph capture). What the compiled code uses (k:info and friends) is in kernel_info_spec.lua.
local tocha = require "tocha"
local ref = require "support.reference"
local process = require "support.process"
local plan_of = require "tocha.plan"

local fails_with = require("support.assertions").fails_with

-- y[i] = VALUE for i < n, VALUE 1 unless the options define it.
local VALUE = [[
#ifndef VALUE
#define VALUE 1
#endif
__device__ void value(float *y, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = VALUE;
}
]]

local function value_kernel_of(options, extra)
  return tocha.kernel { source = (extra or "") .. VALUE, name = "value", params = "f32* y, i32 n",
    options = options }
end

local value_kernel = value_kernel_of

local function run_value(k, device)
  local y = tocha.full({ 5 }, -1, { device = device or "sim" })
  k:launch(1, 32, y, 5)
  return y:to_table()
end

-- The dynamic shared memory a launch gave the block, read inside the kernel: the simulator's
-- record of it, and on the GPU the %dynamic_smem_size register.
local SHARED_SIZE = [[
__device__ void shared_size(int *out)
{
#ifdef TOCHA_SIM
    const unsigned n = tocha_sim::dynamic_shared;
#else
    unsigned n;
    asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(n));
#endif
    if (blockIdx.x == 0 && threadIdx.x == 0) out[0] = (int)n;
}
]]

local function shared_size_kernel(bounds)
  return tocha.kernel { source = SHARED_SIZE, name = "shared_size", params = "i32* out", launch_bounds = bounds }
end

describe("tocha.kernel", function()
  describe("options", function()
    it("-D and -U change what the source means on the simulator, in the order given", function()
      -- A source of this run's own, so that the host compiler runs rather than the disk cache answering.
      local fresh = ("// %d %d\n"):format(os.time(), math.random(1, 1e9))
      local function value_kernel(options, extra) return value_kernel_of(options, (extra or "") .. fresh) end
      assert.are.same({ 1, 1, 1, 1, 1 }, run_value(value_kernel()))
      assert.are.same({ 7, 7, 7, 7, 7 }, run_value(value_kernel({ "-DVALUE=7" })))
      assert.are.same({ 5, 5, 5, 5, 5 }, run_value(value_kernel({ "--define-macro=VALUE=5" })))
      assert.are.same({ 1, 1, 1, 1, 1 }, run_value(value_kernel({ "-DVALUE=7", "-UVALUE" })))
      assert.are.same({ 1, 1, 1, 1, 1 }, run_value(value_kernel({ "-DVALUE=7", "--undefine-macro=VALUE" })))
      -- -DNAME alone defines it as 1, as a C compiler does.
      assert.are.same({ 3, 3, 3, 3, 3 }, run_value(value_kernel({ "-DTHREE" }, "#ifdef THREE\n#define VALUE 3\n#endif\n")))
    end)

    it("reach NVRTC: a source that needs a macro compiles for sm_90 only with it", function()
      local needs = "#ifndef NEEDED\n#error NEEDED is not defined\n#endif\n"
      assert.is_true(value_kernel({ "-DNEEDED" }, needs):build("sm_90") > 1000)
      local ok, err = pcall(function() value_kernel(nil, needs):build("sm_90") end)
      assert.is_false(ok)
      assert.truthy(tostring(err):find("NEEDED is not defined", 1, true))
      ok, err = pcall(function() value_kernel({ "-DNEEDED", "-UNEEDED" }, needs):build("sim") end)
      assert.is_false(ok)
      assert.truthy(tostring(err):find("NEEDED is not defined", 1, true))
    end)

    it("that only shape GPU code are taken and leave the simulator's result as it is", function()
      local k = value_kernel({ "-lineinfo", "--use_fast_math", "-maxrregcount=32", "-ftz=true", "-prec-div=false",
        "-prec-sqrt=false", "-fmad=true", "--extra-device-vectorization", "-restrict", "-w",
        "--ptxas-options=-O2", "-Xptxas", "--warn-on-spills", "-Xptxas=-dlcm=cg", "-DVALUE=4" })
      assert.are.same({ 4, 4, 4, 4, 4 }, run_value(k))
      assert.is_true(k:build("sm_90") > 1000)
      -- Device debug code (-G) builds too, without ptxas optimisation asked for beside it.
      assert.is_true(value_kernel({ "-G", "-lineinfo" }):build("sm_90") > 1000)
    end)

    it("are kept as given in k.options, a copy of the list", function()
      local given = { "-DVALUE=2", "-lineinfo" }
      local k = value_kernel(given)
      given[1] = "-DVALUE=9"
      assert.are.same({ "-DVALUE=2", "-lineinfo" }, k.options)
      assert.are.same({}, value_kernel().options)
    end)

    it("are part of the cache key: kernels differing only in options are separate entries, on disk too", function()
      local dir = process.tempdir()
      finally(function() process.remove_tree(dir) end)
      -- Each child builds value for sim and sm_90 with the options given and reports its counters.
      local function build(options)
        local out, err, status = process.run {
          args = { "-e", ([[
            local tocha = require "tocha"
            local k = tocha.kernel { source = %q, name = "value", params = "f32* y, i32 n", options = { %s } }
            k:build("sim")
            k:build("sm_90")
            local s = tocha.cache.stats()
            io.write(s.compiles, " ", s.disk_hits)
          ]]):format("// kernel_knobs_spec cache key\n" .. VALUE, options) },
          env = { TOCHA_CACHE_DIR = dir },
        }
        assert.are.equal(0, status, err)
        local compiles, hits = out:match("^(%d+) (%d+)$")
        return { tonumber(compiles), tonumber(hits) }
      end
      local function entries()
        local p = io.popen("ls " .. process.quote(dir))
        local n = 0
        for name in p:lines() do if name:match("%.tkc$") then n = n + 1 end end
        p:close()
        return n
      end
      assert.are.same({ 2, 0 }, build('"-DVALUE=2"'))
      assert.are.equal(2, entries())
      assert.are.same({ 2, 0 }, build('"-DVALUE=3"'))
      assert.are.same({ 2, 0 }, build('"-DVALUE=2", "-lineinfo"'))
      assert.are.same({ 2, 0 }, build('"-DVALUE=2", "-w"'))
      assert.are.same({ 2, 0 }, build(''))
      assert.are.equal(10, entries())
      -- The same options again: both from disk.
      assert.are.same({ 0, 2 }, build('"-DVALUE=3"'))
      assert.are.same({ 0, 2 }, build('"-DVALUE=2", "-lineinfo"'))
    end)

    it("refuses what is not a list of strings", function()
      fails_with("tocha.kernel: options: expected a list of strings, got string",
        function() value_kernel("-DVALUE=2") end)
      fails_with("tocha.kernel: options[2]: expected a string, got number", function() value_kernel({ "-w", 3 }) end)
      fails_with('tocha.kernel: options: expected a list of strings, got the key "D"',
        function() value_kernel({ D = "VALUE" }) end)
      local many = {}
      for i = 1, 65 do many[i] = "-w" end
      fails_with("tocha.kernel: options: at most 64, got 65", function() value_kernel(many) end)
    end)

    it("refuses, naming it, an option tocha sets itself or that breaks what it builds", function()
      local target = "is refused: tocha sets the target (the device's, or TOCHA_ARCH without a GPU)"
      fails_with("tocha.kernel: options: '-arch=sm_80' " .. target, function() value_kernel({ "-arch=sm_80" }) end)
      fails_with("tocha.kernel: options: '-arch' " .. target, function() value_kernel({ "-arch", "sm_80" }) end)
      fails_with("tocha.kernel: options: '--gpu-architecture=compute_90' " .. target,
        function() value_kernel({ "--gpu-architecture=compute_90" }) end)
      fails_with("tocha.kernel: options: '-std=c++20' is refused: tocha compiles C++17",
        function() value_kernel({ "-std=c++20" }) end)
      fails_with("tocha.kernel: options: '-I/tmp' is refused: tocha sets the include path (the toolkit's headers and its own)",
        function() value_kernel({ "-I/tmp" }) end)
      fails_with("tocha.kernel: options: '--include-path=/tmp' is refused: tocha sets the include path (the toolkit's headers and its own)",
        function() value_kernel({ "--include-path=/tmp" }) end)
      fails_with("tocha.kernel: options: '-include' is refused: tocha sets what every kernel includes",
        function() value_kernel({ "-include", "x.h" }) end)
      fails_with("tocha.kernel: options: '-o' is refused: tocha keeps the compiled binary itself",
        function() value_kernel({ "-o", "x.cubin" }) end)
      local whole = "is refused: a kernel is one whole program: tocha links no device code"
      fails_with("tocha.kernel: options: '-rdc=true' " .. whole, function() value_kernel({ "-rdc=true" }) end)
      fails_with("tocha.kernel: options: '-dlto' " .. whole, function() value_kernel({ "-dlto" }) end)
    end)

    it("refuses an option it does not know, naming it and what it takes", function()
      fails_with("tocha.kernel: options: '--fancy' is not an option tocha passes (it takes -DNAME[=V], -UNAME, "
        .. "-lineinfo, --use_fast_math, -maxrregcount=N, -ftz=, -prec-div=, -prec-sqrt=, -fmad= (true or false), "
        .. "-G, --extra-device-vectorization, -restrict, -w, --ptxas-options=OPT or -Xptxas OPT)",
        function() value_kernel({ "--fancy" }) end)
    end)

    it("refuses a malformed value of an option it takes", function()
      fails_with("tocha.kernel: options: '-D': expected a macro name (a C identifier)", function() value_kernel({ "-D" }) end)
      fails_with("tocha.kernel: options: '-D1X': expected a macro name (a C identifier)",
        function() value_kernel({ "-D1X" }) end)
      fails_with("tocha.kernel: options: '-DA B': expected a macro name (a C identifier) and an optional =value",
        function() value_kernel({ "-DA B" }) end)
      fails_with("tocha.kernel: options: '-UA=1': expected a macro name (a C identifier)",
        function() value_kernel({ "-UA=1" }) end)
      fails_with("tocha.kernel: options: '-DA=1\n#define B': a macro's value is one line",
        function() value_kernel({ "-DA=1\n#define B" }) end)
      fails_with("tocha.kernel: options: '-DTOCHA_SIM=0': TOCHA_ macros are tocha's own",
        function() value_kernel({ "-DTOCHA_SIM=0" }) end)
      fails_with("tocha.kernel: options: '-UTOCHA_CUDA': TOCHA_ macros are tocha's own",
        function() value_kernel({ "-UTOCHA_CUDA" }) end)
      fails_with("tocha.kernel: options: '-maxrregcount=0': expected a register count from 1 to 255",
        function() value_kernel({ "-maxrregcount=0" }) end)
      fails_with("tocha.kernel: options: '-maxrregcount=lots': expected a register count from 1 to 255",
        function() value_kernel({ "-maxrregcount=lots" }) end)
      fails_with("tocha.kernel: options: '-ftz=yes': expected true or false after '='",
        function() value_kernel({ "-ftz=yes" }) end)
      fails_with("tocha.kernel: options: '-Xptxas': expected a ptxas option after it",
        function() value_kernel({ "-Xptxas" }) end)
      local ptxas_takes = "is not one tocha passes (it takes -v, -O0 to -O3, --warn-on-spills, "
        .. "--warn-on-local-memory-usage, --warn-on-double-precision-use, -dlcm=ca|cg, "
        .. "--allow-expensive-optimizations=true|false)"
      fails_with("tocha.kernel: options: '--ptxas-options=-o x': ptxas option '-o x' " .. ptxas_takes,
        function() value_kernel({ "--ptxas-options=-o x" }) end)
      fails_with("tocha.kernel: options: '-Xptxas': ptxas option '--output-file' " .. ptxas_takes,
        function() value_kernel({ "-Xptxas", "--output-file" }) end)
    end)
  end)

  describe("launch_bounds", function()
    it("puts __launch_bounds__ on the entry point, with min_blocks when given", function()
      local k = shared_size_kernel({ 128 })
      assert.are.equal('extern "C" __global__ void __launch_bounds__(128) shared_size_entry_point(int *out)\n'
        .. "{\n    shared_size(out);\n}\n", k.entry_point_source)
      assert.are.same({ 128 }, k.launch_bounds)
      local k2 = shared_size_kernel({ 256, 2 })
      assert.truthy(k2.entry_point_source:find("__launch_bounds__(256, 2) shared_size_entry_point", 1, true))
      assert.are.same({ 256, 2 }, k2.launch_bounds)
      assert.is_true(k2:build("sm_90") > 1000)
      assert.is_nil(shared_size_kernel().launch_bounds)
    end)

    it("refuses a launch whose block is above max_threads, before it runs", function()
      local k = shared_size_kernel({ 128 })
      local out = tocha.full({ 1 }, 7, { dtype = "i32", device = "sim" })
      k:launch(1, { 64, 2 }, out) -- 128 threads: within
      fails_with("tocha.Kernel:launch: block: 256 threads per block, above the kernel's launch_bounds max_threads 128",
        function() k:launch(1, { 64, 4 }, out) end)
      fails_with("tocha.Kernel:launch: block: 129 threads per block, above the kernel's launch_bounds max_threads 128",
        function() k:launch({ grid = 1, block = 129, shared = 16 }, out) end)
      local plan = plan_of.new("sim", 0)
      fails_with("tocha.Plan:add: block: 256 threads per block, above the kernel's launch_bounds max_threads 128",
        function() plan:add(k, 1, 256, { out.data }) end)
    end)

    it("refuses bounds that are not {max_threads [, min_blocks]} of sizes a GPU takes", function()
      local function bounded(b)
        return tocha.kernel { source = SHARED_SIZE, name = "shared_size", params = "i32* out", launch_bounds = b }
      end
      fails_with("tocha.kernel: launch_bounds: expected {max_threads [, min_blocks]}", function() bounded(128) end)
      fails_with("tocha.kernel: launch_bounds: expected {max_threads [, min_blocks]}", function() bounded({}) end)
      fails_with("tocha.kernel: launch_bounds: expected {max_threads [, min_blocks]}", function() bounded({ 1, 2, 3 }) end)
      fails_with("tocha.kernel: launch_bounds: max_threads: expected a positive integer, got 0",
        function() bounded({ 0 }) end)
      fails_with("tocha.kernel: launch_bounds: max_threads: expected a positive integer, got 1.5",
        function() bounded({ 1.5 }) end)
      fails_with('tocha.kernel: launch_bounds: min_blocks: expected a positive integer, got "2"',
        function() bounded({ 128, "2" }) end)
      fails_with("tocha.kernel: launch_bounds: max_threads must be 1 to 1024, got 2048", function() bounded({ 2048 }) end)
      fails_with("tocha.kernel: launch_bounds: min_blocks must be 1 to 32, got 33", function() bounded({ 128, 33 }) end)
      fails_with("tocha.kernel: launch_bounds: the source gives its entry point bounds already (TOCHA_ENTRY_BOUNDS)",
        function()
          tocha.kernel { source = "#define TOCHA_ENTRY_BOUNDS(T) __launch_bounds__(64)\n" .. VALUE, name = "value",
            params = "f32* y, i32 n", launch_bounds = { 128 } }
        end)
    end)
  end)

  for _, dev in ipairs(ref.devices()) do
    describe("launch{shared=} on " .. dev.name .. dev.tag, function()
      local device = dev.name

      local function size_seen(launch)
        local out = tocha.full({ 1 }, -1, { dtype = "i32", device = device })
        launch(out)
        tocha.synchronize(device)
        return out:to_table()[1]
      end

      it("gives the block the dynamic shared memory asked for; the positional form gives none", function()
        local k = shared_size_kernel()
        assert.are.equal(0, size_seen(function(out) k:launch(2, 64, out) end))
        assert.are.equal(4096, size_seen(function(out) k:launch({ grid = 2, block = 64, shared = 4096 }, out) end))
        assert.are.equal(0, size_seen(function(out) k:launch({ grid = { 2 }, block = { 64 } }, out) end))
        -- Above the 48 KiB a function has by default: the device must allow it first.
        assert.are.equal(100 * 1024, size_seen(function(out) k:launch({ grid = 1, block = 32, shared = 100 * 1024 }, out) end))
        assert.are.equal(227 * 1024, size_seen(function(out) k:launch({ grid = 1, block = 32, shared = 227 * 1024 }, out) end))
        assert.are.equal(8, size_seen(function(out) k:launch({ grid = 1, block = 32, shared = 8 }, out) end))
      end)

      it("carries the size through a plan", function()
        local k = shared_size_kernel()
        assert.are.equal(60000, size_seen(function(out)
          local plan = plan_of.new(device, 0)
          plan:add(k, 1, 32, { out.data }, 60000)
          plan:add(k, 1, 32, { out.data + 0 }, 60000)
          plan:run({})
        end))
        assert.are.equal(0, size_seen(function(out)
          local plan = plan_of.new(device, 0)
          plan:add(k, 1, 32, { out.data })
          plan:run({})
        end))
      end)

      it("carries the size through a graph capture and its replays", function()
        local k = shared_size_kernel()
        local out = tocha.full({ 1 }, -1, { dtype = "i32", device = device })
        k:launch({ grid = 1, block = 32, shared = 1 }, out) -- loaded before the capture
        local g = tocha.graph(function() k:launch({ grid = 1, block = 32, shared = 70000 }, out) end, device)
        out:fill(-1)
        g:replay()
        tocha.synchronize(device)
        assert.are.equal(70000, out:to_table()[1])
        out:fill(-1)
        g:replay()
        tocha.synchronize(device)
        assert.are.equal(70000, out:to_table()[1])
      end)

      it("refuses more than a block of the device may have, counting the kernel's static shared memory", function()
        local k = shared_size_kernel()
        local out = tocha.zeros({ 1 }, { dtype = "i32", device = device })
        local name = tocha.device(device).name
        fails_with(("tocha.Kernel:launch: shared: 232449 bytes of dynamic shared memory are above the 232448 bytes a "
          .. "block may use on %s"):format(name),
          function() k:launch({ grid = 1, block = 32, shared = 227 * 1024 + 1 }, out) end)
        local static = tocha.kernel { source = [[
__device__ void tile(int *out)
{
    __shared__ float t[256];
    t[threadIdx.x] = threadIdx.x;
    __syncthreads();
    out[0] = (int)t[255 - threadIdx.x];
}
]], name = "tile", params = "i32* out" }
        static:info() -- what the simulator knows of static shared memory comes from the readout
        fails_with(("tocha.Kernel:launch: shared: 231425 bytes of dynamic shared memory and the kernel's 1024 static "
          .. "are above the 232448 bytes a block may use on %s"):format(name),
          function() static:launch({ grid = 1, block = 256, shared = 227 * 1024 - 1023 }, out) end)
        static:launch({ grid = 1, block = 256, shared = 227 * 1024 - 1024 }, out)
        local plan = plan_of.new(device, 0)
        fails_with(("tocha.Plan:add: shared: 232449 bytes of dynamic shared memory are above the 232448 bytes a "
          .. "block may use on %s"):format(name),
          function() plan:add(k, 1, 32, { out.data }, 227 * 1024 + 1) end)
      end)
    end)
  end

  describe("launch{} refusals", function()
    local k = shared_size_kernel()
    local out = tocha.zeros({ 1 }, { dtype = "i32", device = "sim" })
    it("refuses a field it does not know, a missing grid or block, and a size that is not bytes", function()
      fails_with('tocha.Kernel:launch: "shared_bytes": unknown field (expected grid, block and shared)',
        function() k:launch({ grid = 1, block = 32, shared_bytes = 4 }, out) end)
      fails_with("tocha.Kernel:launch: grid: expected a number or {x [, y [, z]]}, got nil",
        function() k:launch({ block = 32, shared = 4 }, out) end)
      fails_with('tocha.Kernel:launch: "shared_bytes": unknown field (expected grid, block and shared)',
        function() k:launch({ shared_bytes = 4 }, 32, out) end)
      fails_with("tocha.Kernel:launch: block: expected a number or {x [, y [, z]]}, got nil",
        function() k:launch({ grid = 1 }, out) end)
      fails_with("tocha.Kernel:launch: shared: expected a number of bytes (0 to 2^32 - 1), got -1",
        function() k:launch({ grid = 1, block = 32, shared = -1 }, out) end)
      fails_with("tocha.Kernel:launch: shared: expected a number of bytes (0 to 2^32 - 1), got 1.5",
        function() k:launch({ grid = 1, block = 32, shared = 1.5 }, out) end)
      fails_with('tocha.Kernel:launch: shared: expected a number of bytes (0 to 2^32 - 1), got "4"',
        function() k:launch({ grid = 1, block = 32, shared = "4" }, out) end)
      fails_with("tocha.Kernel:launch: block[1]: expected a positive integer, got 0",
        function() k:launch({ grid = 1, block = 0 }, out) end)
      local plan = plan_of.new("sim", 0)
      fails_with("tocha.Plan:add: shared: expected a number of bytes (0 to 2^32 - 1), got -4",
        function() plan:add(k, 1, 32, { out.data }, -4) end)
    end)
  end)

  -- A block's dynamic shared memory used as an array: each thread writes its slot, then reads
  -- its mirror's.
  local MIRROR = [[
__device__ void mirror(float *y, int per_thread)
{
    extern __shared__ float buf[];
    const int n = blockDim.x * per_thread;
    for (int j = 0; j < per_thread; j++) buf[threadIdx.x * per_thread + j] = threadIdx.x * per_thread + j;
    __syncthreads();
    for (int j = 0; j < per_thread; j++) {
        const int i = threadIdx.x * per_thread + j;
        y[i] = buf[n - 1 - i];
    }
}
]]
  for _, dev in ipairs(ref.devices()) do
    it("fills " .. dev.name .. "'s dynamic shared memory past 48 KiB as an extern __shared__ array"
      .. dev.tag, function()
      local k = tocha.kernel { source = MIRROR, name = "mirror", params = "f32* y, i32 per_thread" }
      local threads, per_thread = 256, 200 -- 51200 floats: 200 KiB
      local n = threads * per_thread
      local y = tocha.full({ n }, -1, { device = dev.name })
      k:launch({ grid = 1, block = threads, shared = n * 4 }, y, per_thread)
      local got = y:to_table()
      for i = 1, n do
        if got[i] ~= n - i then assert.are.equal(n - i, got[i], "element " .. i) end
      end
    end)

    -- A kernel that says its dynamic shared memory once, at new(), gets it from every launch
    -- path that gives none: k:launch, a plan's add and an op's packed launch.
    it("gives a kernel's own dynamic shared memory to every launch on " .. dev.name .. dev.tag, function()
      local threads, per_thread = 128, 160 -- 20480 floats: 80 KiB
      local n = threads * per_thread
      local k = tocha.kernel { source = MIRROR, name = "mirror", params = "f32* y, i32 per_thread", shared = n * 4 }
      assert.are.equal(n * 4, k.shared)
      local function check(y, how)
        local got = y:to_table()
        for i = 1, n do
          if got[i] ~= n - i then assert.are.equal(n - i, got[i], how .. ": element " .. i) end
        end
      end
      local y = tocha.full({ n }, -1, { device = dev.name })
      k:launch(1, threads, y, per_thread)
      check(y, "k:launch")
      y:fill(-1)
      local plan = plan_of.new(dev.name, 0)
      plan:add(k, 1, threads, { y.data, per_thread })
      plan:run({})
      check(y, "plan")
      y:fill(-1)
      require("tocha.op").launch_packed(k, dev.name, 1, threads, { y.data, per_thread })
      check(y, "launch_packed")
    end)
  end

  it("refuses a kernel's shared bytes that are not a count, naming the field", function()
    for _, bad in ipairs({ -1, 1.5, "64", 2 ^ 33 }) do
      local ok, err = pcall(tocha.kernel, { source = MIRROR, name = "mirror", params = "f32* y, i32 per_thread", shared = bad })
      assert.is_false(ok)
      assert.truthy(tostring(err):find("shared: expected a number of bytes (0 to 2^32 - 1)", 1, true), tostring(err))
    end
  end)
end)
