-- The kernel cache across processes: a miss then a hit, bad entries rebuilt, TOCHA_CACHE=off
-- and TOCHA_CACHE_DIR. Each run is a child process with a cache folder of its own.
local process = require "support.process"

-- Builds one kernel (fill f32) on sim in a child; returns its cache counters.
local function run_once(env)
  local out, err, status = process.run {
    args = { "-e", [[
      local tocha = require "tocha"
      tocha.zeros({ 5 }, { device = "sim" })
      local s = tocha.cache.stats()
      io.write(s.compiles, " ", s.disk_hits, " ", s.disk_rejects, " ", tostring(tocha.cache.dir()))
    ]] },
    env = env,
  }
  assert.are.equal(0, status, err)
  local compiles, hits, rejects, dir = out:match("^(%d+) (%d+) (%d+) (.*)$")
  return { compiles = tonumber(compiles), hits = tonumber(hits), rejects = tonumber(rejects), dir = dir }
end

local function entries(dir)
  local list = {}
  local p = io.popen("ls " .. process.quote(dir) .. " 2>/dev/null")
  for name in p:lines() do
    if name:match("%.tkc$") then list[#list + 1] = dir .. "/" .. name end
  end
  p:close()
  return list
end

local function rewrite(path, fn)
  local f = assert(io.open(path, "rb"))
  local data = f:read("*a")
  f:close()
  f = assert(io.open(path, "wb"))
  f:write(fn(data))
  f:close()
end

describe("tocha kernel cache", function()
  local dir
  before_each(function() dir = process.tempdir() end)
  after_each(function() process.remove_tree(dir) end)

  it("compiles on a miss and compiles nothing on the next run", function()
    local first = run_once { TOCHA_CACHE_DIR = dir }
    assert.are.same({ compiles = 1, hits = 0, rejects = 0, dir = dir }, first)
    assert.are.equal(1, #entries(dir))
    local second = run_once { TOCHA_CACHE_DIR = dir }
    assert.are.same({ compiles = 0, hits = 1, rejects = 0, dir = dir }, second)
  end)

  it("rebuilds a truncated entry", function()
    run_once { TOCHA_CACHE_DIR = dir }
    local path = entries(dir)[1]
    rewrite(path, function(data) return data:sub(1, math.floor(#data / 2)) end)
    assert.are.same({ compiles = 1, hits = 0, rejects = 1, dir = dir }, run_once { TOCHA_CACHE_DIR = dir })
    assert.are.same({ compiles = 0, hits = 1, rejects = 0, dir = dir }, run_once { TOCHA_CACHE_DIR = dir })
  end)

  it("rebuilds an entry whose payload is garbage", function()
    run_once { TOCHA_CACHE_DIR = dir }
    local path = entries(dir)[1]
    rewrite(path, function(data) return data:sub(1, 64) .. string.rep("\255", #data - 64) end)
    assert.are.same({ compiles = 1, hits = 0, rejects = 1, dir = dir }, run_once { TOCHA_CACHE_DIR = dir })
    assert.are.same({ compiles = 0, hits = 1, rejects = 0, dir = dir }, run_once { TOCHA_CACHE_DIR = dir })
  end)

  it("rebuilds an empty entry", function()
    run_once { TOCHA_CACHE_DIR = dir }
    rewrite(entries(dir)[1], function() return "" end)
    assert.are.same({ compiles = 1, hits = 0, rejects = 1, dir = dir }, run_once { TOCHA_CACHE_DIR = dir })
  end)

  it("writes nothing and compiles every time with TOCHA_CACHE=off", function()
    local env = { TOCHA_CACHE_DIR = dir, TOCHA_CACHE = "off" }
    assert.are.same({ compiles = 1, hits = 0, rejects = 0, dir = "nil" }, run_once(env))
    assert.are.same({ compiles = 1, hits = 0, rejects = 0, dir = "nil" }, run_once(env))
    assert.are.equal(0, #entries(dir))
  end)

  it("creates a missing TOCHA_CACHE_DIR, private to the user", function()
    local nested = dir .. "/a/b"
    run_once { TOCHA_CACHE_DIR = nested }
    assert.are.equal(1, #entries(nested))
    local p = io.popen("stat -c %a " .. process.quote(nested))
    assert.are.equal("700", p:read("*l"))
    p:close()
  end)

  it("uses $XDG_CACHE_HOME/tocha when TOCHA_CACHE_DIR is unset", function()
    local r = run_once { TOCHA_CACHE_DIR = false, XDG_CACHE_HOME = dir }
    assert.are.equal(dir .. "/tocha", r.dir)
    assert.are.equal(1, #entries(dir .. "/tocha"))
  end)

  -- Builds three kernels for sm_90 (no GPU needed) and prints the cache counters.
  local BUILD_THREE = [[
    local tocha = require "tocha"
    for _, b in ipairs({ 32, 64, 96 }) do
      tocha.UpsampleNearest2dForward.new(2, 2, b).kernel:build("sm_90")
    end
    local s = tocha.cache.stats()
    io.write(s.compiles, " ", s.disk_hits, " ", s.disk_rejects)
  ]]

  it("gives 8 processes building the same kernels at once one valid entry per kernel", function()
    local script = {}
    for i = 1, 8 do
      script[#script + 1] = ("(TOCHA_CACHE_DIR=%s %s -e %s > %s/out%d 2>&1; echo $? > %s/rc%d) &"):format(
        process.quote(dir), process.quote(process.exe), process.quote(BUILD_THREE), dir, i, dir, i)
    end
    script[#script + 1] = "wait"
    os.execute(table.concat(script, "\n"))
    for i = 1, 8 do
      local f = assert(io.open(dir .. "/rc" .. i))
      local rc = f:read("*l")
      f:close()
      local g = assert(io.open(dir .. "/out" .. i))
      local out = g:read("*a")
      g:close()
      assert.are.equal("0", rc, out)
      local compiles, hits, rejects = out:match("^(%d+) (%d+) (%d+)$")
      assert.are.equal(3, tonumber(compiles) + tonumber(hits), out)
      assert.are.equal("0", rejects)
    end
    assert.are.equal(3, #entries(dir))
    local out = process.run { args = { "-e", BUILD_THREE }, env = { TOCHA_CACHE_DIR = dir } }
    assert.are.equal("0 3 0", out)
  end)

  it("loads nothing wrong after writers are killed (SIGKILL) mid-build", function()
    for _, delay in ipairs({ "0.05", "0.15", "0.3" }) do
      os.execute(("TOCHA_CACHE_DIR=%s %s -e %s >/dev/null 2>&1 & pid=$!; sleep %s; kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null")
        :format(process.quote(dir), process.quote(process.exe), process.quote(BUILD_THREE), delay))
    end
    local out, err, status = process.run { args = { "-e", BUILD_THREE }, env = { TOCHA_CACHE_DIR = dir } }
    assert.are.equal(0, status, err)
    local compiles, hits, rejects = out:match("^(%d+) (%d+) (%d+)$")
    assert.are.equal(3, tonumber(compiles) + tonumber(hits))
    assert.are.equal("0", rejects) -- an entry is whole or absent: never half-written
    assert.are.equal(3, #entries(dir))
  end)

  it("works without a disk cache, and says so once, when the folder cannot be used", function()
    local file = dir .. "/plain-file"
    local f = assert(io.open(file, "w"))
    f:write("x")
    f:close()
    for _, bad in ipairs({ file, file .. "/sub" }) do
      local out, err, status = process.run {
        args = { "-e", [[
          local tocha = require "tocha"
          tocha.zeros({ 2 }, { device = "sim" }); tocha.ones({ 2 }, { device = "sim" })
          io.write(tocha.cache.stats().compiles, " ", tostring(tocha.cache.dir()))
        ]] },
        env = { TOCHA_CACHE_DIR = bad },
      }
      assert.are.equal(0, status, err)
      assert.are.equal("1 nil", out)
      local _, count = err:gsub("tocha: kernel cache folder " .. bad:gsub("%p", "%%%0") .. " is unusable %(", "")
      assert.are.equal(1, count, err)
    end
  end)

  it("takes a folder path of any length the system takes, and refuses a longer one whole", function()
    -- Folder names of 200 bytes: 6 deep is 1200 bytes and more, 21 deep past 4096.
    local function deep(levels)
      local path = dir
      for i = 1, levels do path = path .. "/" .. string.rep(string.char(96 + i % 26), 200) end
      return path
    end
    local code = [[
      local tocha = require "tocha"
      tocha.zeros({ 2 }, { device = "sim" })
      io.write(tocha.cache.stats().compiles, " ", tostring(tocha.cache.dir()))
    ]]
    local long = deep(6)
    local out, err, status = process.run { args = { "-e", code }, env = { TOCHA_CACHE_DIR = long } }
    assert.are.equal(0, status, err)
    assert.are.equal("1 " .. long, out)
    assert.are.equal(1, #entries(long))
    local too_long = deep(21)
    out, err, status = process.run { args = { "-e", code }, env = { TOCHA_CACHE_DIR = too_long } }
    assert.are.equal(0, status, err)
    assert.are.equal("1 nil", out)
    assert.truthy(err:find("is unusable (its path is " .. #too_long .. " bytes, at most 4095): " ..
      "compiling without a disk cache", 1, true), err)
    -- Nothing was made at a cut path.
    assert.is_nil(io.open(deep(20) .. "/" .. string.rep("u", 200)))
  end)

  it("writes TOCHA_DUMP_DIR's files at the whole folder path, however long", function()
    local long = dir
    for i = 1, 6 do long = long .. "/" .. string.rep(string.char(96 + i), 200) end
    assert.is_true(os.execute("mkdir -p " .. process.quote(long)) == 0)
    local _, err, status = process.run {
      args = { "-e", "require('tocha').UpsampleNearest2dForward.new(2, 2, 32).kernel:build('sm_90')" },
      env = { TOCHA_CACHE = "off", TOCHA_DUMP_DIR = long },
    }
    assert.are.equal(0, status, err)
    local p = io.popen("ls " .. process.quote(long))
    local names = p:read("*a")
    p:close()
    assert.truthy(names:find("%x+%-sm_90%.cu\n"), names)
    assert.truthy(names:find("%x+%-sm_90%.cubin\n"), names)
  end)

  it("neither loads nor deletes an entry owned by another user", function()
    run_once { TOCHA_CACHE_DIR = dir }
    local path = entries(dir)[1]
    if os.execute("chown 12345 " .. process.quote(path) .. " 2>/dev/null") ~= 0 then
      pending("needs root to give the entry to another user")
      return
    end
    assert.are.same({ compiles = 1, hits = 0, rejects = 1, dir = dir }, run_once { TOCHA_CACHE_DIR = dir })
    local p = io.popen("stat -c %u " .. process.quote(path))
    assert.are.equal("12345", p:read("*l")) -- still there, still theirs
    p:close()
  end)

  it("never writes through a link planted at an entry's name", function()
    run_once { TOCHA_CACHE_DIR = dir }
    local path = entries(dir)[1]
    local target = dir .. "/outside"
    os.remove(path)
    os.execute(("ln -s %s %s"):format(process.quote(target), process.quote(path)))
    assert.are.same({ compiles = 1, hits = 0, rejects = 0, dir = dir }, run_once { TOCHA_CACHE_DIR = dir })
    assert.is_nil(io.open(target, "r")) -- nothing was written where the link pointed
    local p = io.popen("test -L " .. process.quote(path) .. " && echo link || echo file")
    assert.are.equal("file", p:read("*l")) -- the new entry replaced the link itself
    p:close()
  end)

  it("answers a kernel built twice in one process from memory", function()
    local out, err, status = process.run {
      args = { "-e", [[
        local tocha = require "tocha"
        local src = "__device__ void twice(float *x) { x[0] = 1; }"
        local a = tocha.kernel { source = src, name = "twice", params = "f32* x" }
        local b = tocha.kernel { source = src, name = "twice", params = "f32* x" }
        a:build("sim"); b:build("sim")
        local s = tocha.cache.stats()
        io.write(s.compiles, " ", s.memory_hits)
      ]] },
      env = { TOCHA_CACHE_DIR = dir },
    }
    assert.are.equal(0, status, err)
    assert.are.equal("1 1", out)
  end)
end)

describe("tocha kernel cache against a hostile folder", function()
  local dir
  before_each(function() dir = process.tempdir() end)
  after_each(function() process.remove_tree(dir) end)

  local function sh(cmd) assert(os.execute(cmd) == 0 or os.execute(cmd) == true, cmd) end

  it("does not wait on a FIFO planted at an entry's name", function()
    run_once { TOCHA_CACHE_DIR = dir }
    local path = entries(dir)[1]
    os.remove(path)
    sh("mkfifo " .. process.quote(path))
    -- the open used to block until a writer came; now the entry is rejected and rebuilt
    local out, err, status = process.run { exe = "timeout", args = { "20", process.exe, "-e",
      "require('tocha').zeros({ 5 }, { device = 'sim' }) io.write(require('tocha').cache.stats().compiles)" },
      env = { TOCHA_CACHE_DIR = dir } }
    assert.are.equal(0, status, err)
    assert.are.equal("1", out)
  end)

  it("counts and clears only the names it writes", function()
    run_once { TOCHA_CACHE_DIR = dir }
    for _, name in ipairs({ "notes.txt", ".tmp-mine", "0123456789ABCDEF0123456789abcdef.tkc", "x.tkc" }) do
      local f = assert(io.open(dir .. "/" .. name, "w"))
      f:write("keep")
      f:close()
    end
    local out, err, status = process.run { args = { "cache", "clear" }, env = { TOCHA_CACHE_DIR = dir } }
    assert.are.equal(0, status, err)
    assert.are.equal("kernel cache: removed 1 entries from " .. dir .. "\n", out) -- its one entry
    assert.are.equal(0, #entries(dir) - 2) -- the two foreign .tkc names stay
    for _, name in ipairs({ "notes.txt", ".tmp-mine", "0123456789ABCDEF0123456789abcdef.tkc", "x.tkc" }) do
      assert.are.equal("keep", assert(io.open(dir .. "/" .. name)):read("*a"), name)
    end
  end)

  it("does not write a debug dump through a link planted at its name", function()
    local build = "require('tocha').UpsampleNearest2dForward.new(2, 2, 64).kernel:build('sm_90')"
    local env = { TOCHA_DUMP_DIR = dir, TOCHA_CACHE = "off" }
    local _, err, status = process.run { args = { "-e", build }, env = env }
    assert.are.equal(0, status, err)
    local p = io.popen("ls " .. process.quote(dir))
    local names = {}
    for name in p:lines() do names[#names + 1] = name end
    p:close()
    assert.are.equal(2, #names) -- the unit and its cubin
    local victim = dir .. "/victim"
    local f = assert(io.open(victim, "w"))
    f:write("untouched")
    f:close()
    for _, name in ipairs(names) do
      os.remove(dir .. "/" .. name)
      sh("ln -s " .. process.quote(victim) .. " " .. process.quote(dir .. "/" .. name))
    end
    _, err, status = process.run { args = { "-e", build }, env = env }
    assert.are.equal(0, status, err) -- a dump is best effort: the build goes on
    assert.are.equal("untouched", assert(io.open(victim)):read("*a"))
  end)

  it("works from a warm cache when TMPDIR is not a usable folder", function()
    run_once { TOCHA_CACHE_DIR = dir }
    assert.are.same({ compiles = 0, hits = 1, rejects = 0, dir = dir },
      run_once { TOCHA_CACHE_DIR = dir, TMPDIR = "/nonexistent/tmp" })
  end)

  it("removes what killed processes left in the temporary folder, and nothing else", function()
    local tmp = process.tempdir()
    -- a build folder and a module of a process that is gone (no process has pid 2^22 + 1 here:
    -- the kernel's limit is below it), another user's name pattern alive (pid 1), a foreign file
    sh(("mkdir %s/tocha-sim-4194305-abc && touch %s/tocha-sim-4194305-abc/kernel.cpp"):format(tmp, tmp))
    sh(("touch %s/tocha-cxx-4194305-def.so %s/tocha-sim-1-ghi.so %s/other"):format(tmp, tmp, tmp))
    run_once { TOCHA_CACHE = "off", TMPDIR = tmp }
    local p = io.popen("ls -A " .. process.quote(tmp))
    local left = p:read("*a")
    p:close()
    process.remove_tree(tmp)
    assert.are.equal("other\ntocha-sim-1-ghi.so\n", left)
  end)
end)
