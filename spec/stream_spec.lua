-- Streams: the current stream that a block of code sets, work queued on a stream, and order
-- between streams through events; on sim (where work runs when queued) and, tagged #gpu, on
-- cuda, where a stream that waits on another's event must see that stream's writes.
local tocha = require "tocha"
local ffi = require "ffi"
local ref = require "support.reference"
local C = require("tocha.ffi").C

-- A kernel slow enough that a stream which did not wait for it would read too early: each
-- thread writes its element after spinning `spins` times.
local SLOW = [[
__device__ void slow_fill(float *x, long long n, float v, int spins)
{
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc = 0;
    for (int k = 0; k < spins; ++k) acc = acc * 0.5f + 1.0f;
    x[i] = v + (acc > 1e30f ? 1.0f : 0.0f);
}
]]

describe("streams", function()
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name

      it("are current for the length of s:use(fn), nested, and after an error go back", function()
        local a, b = tocha.stream(device), tocha.stream(device)
        assert.is_nil(tocha.current_stream(device))
        local got = { a:use(function(x, y)
          assert.are.equal(a, tocha.current_stream(device))
          b:use(function() assert.are.equal(b, tocha.current_stream(device)) end)
          assert.are.equal(a, tocha.current_stream(device))
          return x + y, "two"
        end, 1, 2) }
        assert.are.same({ 3, "two" }, got)
        assert.is_nil(tocha.current_stream(device))
        local ok, message = pcall(a.use, a, function() error("inside", 0) end)
        assert.is_false(ok)
        assert.are.equal("inside", message)
        assert.is_nil(tocha.current_stream(device))
      end)

      it("run the work queued on them: an upsample on a stream gives the default stream's result", function()
        local up = tocha.UpsampleNearest2dForward.new(2, 3, 64)
        local x = tocha.rand({ 2, 3, 5, 7 }, { device = device, seed = 3 })
        local want = up:forward(x):to_table(true)
        local s = tocha.stream(device)
        local y = tocha.empty({ 2, 3, 10, 21 }, { device = device }):fill(-1)
        s:use(function() up:forward(x, y) end)
        s:synchronize()
        assert.are.same(want, y:to_table(true))
        local z = tocha.empty({ 2, 3, 10, 21 }, { device = device }):fill(-1)
        s:use(function() z:copy(y) end)
        assert.are.same(want, z:to_table(true)) -- a host read sees the stream's work
      end)

      it("take {stream = s} on forward, backward, run and launch_packed, and refuse other options", function()
        local up = tocha.UpsampleNearest2dForward.new(2, 2, 64)
        local x = tocha.rand({ 1, 2, 3, 4 }, { device = device, seed = 9 })
        local want_y = up:forward(x):to_table(true)
        local dy = tocha.rand({ 1, 2, 6, 8 }, { device = device, seed = 10 })
        local want_dx = up:backward(x, dy):to_table(true)
        local s = tocha.stream(device)
        local opts = { stream = s }
        assert.are.same(want_y, up:forward(x, nil, opts):to_table(true))
        assert.are.same(want_dx, up:backward(x, dy, nil, opts):to_table(true))
        assert.are.same(want_dx, up.backward_kernel:run(dy, nil, opts):to_table(true))
        local y = tocha.empty({ 1, 2, 6, 8 }, { device = device }):fill(-1)
        tocha.launch_packed(up.kernel, device, up:grid(y:shape()), up:block(), up:pack_args({ x }, {}, y), opts)
        assert.are.same(want_y, y:to_table(true))
        assert.is_nil(tocha.current_stream(device))
        for _, case in ipairs({
          { { stream = 5 }, "options.stream: expected a stream, got number" },
          { { strem = s }, "options: unknown option \"strem\" (expected stream)" },
          { 7, "options: expected a table {stream=}, got number" },
        }) do
          local ok, message = pcall(up.forward, up, x, nil, case[1])
          assert.is_false(ok)
          assert.truthy(message:find("tocha.UpsampleNearest2dForward:forward: " .. case[2], 1, true), message)
        end
        if device ~= "sim" then
          local ok, message = pcall(up.forward, up, x, nil, { stream = tocha.stream("sim") })
          assert.is_false(ok)
          assert.truthy(message:find("options.stream: the stream is on sim, the work on " .. tocha.device(device).name,
            1, true), message)
        end
      end)

      it("order through events: a stream that waits sees the other stream's writes", function()
        local k = tocha.kernel { source = SLOW, name = "slow_fill", params = "f32* x, i64 n, f32 v, i32 spins" }
        local n = 2 ^ 20
        local x = tocha.zeros({ n }, { device = device })
        local y = tocha.zeros({ n }, { device = device })
        local producer, consumer = tocha.stream(device), tocha.stream(device)
        local spins = dev.name == "sim" and 1 or 20000
        for round = 1, 3 do
          producer:use(function() k:launch(math.ceil(n / 256), 256, x, n, round, spins) end)
          local written = producer:record()
          consumer:wait(written)
          consumer:use(function() y:copy(x) end)
          consumer:synchronize()
          local tail = ffi.new("float[1]")
          y:read(tail, n - 1, 1)
          assert.are.equal(round, tail[0])
        end
      end)

      it("refuse what is not theirs: an event never recorded, a non-event, a dot call", function()
        local s = tocha.stream(device)
        local ok, message = pcall(s.wait, s, tocha.event(device))
        assert.is_false(ok)
        assert.truthy(message:find("tocha.Stream:wait: event: it was never recorded", 1, true), message)
        for _, case in ipairs({
          { "tocha.Stream:wait: event: expected an event, got table", s.wait, s, {} },
          { "tocha.Stream:record: event: expected an event, got number", s.record, s, 5 },
          { "tocha.Stream:use: fn: expected a function, got number", s.use, s, 5 },
          { "tocha.Stream:synchronize: self: expected a Stream", s.synchronize },
        }) do
          ok, message = pcall(unpack(case, 2))
          assert.is_false(ok, case[1])
          assert.truthy(message:find(case[1], 1, true), message)
        end
      end)

      it("leave the default stream current when the current one is destroyed (C API)", function()
        local out = ffi.new("tocha_stream*[1]")
        local handle = tocha.device(device).handle
        assert.are.equal(0, C.tocha_stream_new(handle, out))
        assert.are.equal(0, C.tocha_device_set_stream(handle, out[0]))
        assert.are.equal(out[0], C.tocha_device_get_stream(handle))
        C.tocha_stream_destroy(out[0])
        assert.is_true(C.tocha_device_get_stream(handle) == nil)
      end)
    end)
  end

  it("names a bad device", function()
    local ok, message = pcall(tocha.stream, "nope")
    assert.is_false(ok)
    assert.truthy(message:find("tocha.stream: device: unknown device 'nope'", 1, true), message)
  end)
end)
