-- The README's tour (the first ```lua block after "## The Lua API in short") runs as pasted
-- into a file: taken from README.md, written into a fresh folder and run there by the tocha
-- executable on sim, it exits 0, prints none of the results it shows as true as false, and
-- leaves nothing behind: its folder holds only the script, and no file named like one the tour
-- writes appears in the checkout, its examples/ or /tmp.
local process = require "support.process"
local isolated = require "support.isolated"

local source = os.getenv("TOCHA_SOURCE_DIR") or "."

-- The tour's text: the block's lines between its fences.
local function tour()
  local f = assert(io.open(source .. "/README.md", "rb"))
  local readme = f:read("*a")
  f:close()
  local heading = assert(readme:find("\n## The Lua API in short\n", 1, true), "README has no tour heading")
  local block = readme:match("\n```lua\n(.-\n)```\n", heading)
  return assert(block, "README has no ```lua block after the tour's heading")
end

-- What the tour's files are called: the last path parts of its string literals that end in an
-- extension ("-small.png"). The tour writes them beside os.tmpname()'s name, whose letters and
-- digits never hold a "-"; the README's earlier tour wrote "small.png" and the like into the
-- current folder. An entry is the tour's when it ends in one of them or is one without its
-- leading "-".
local function written_names(text)
  local names = {}
  for literal in text:gmatch('"([^"\n]*)"') do
    local last = literal:match("[^/]*$")
    if last:match("^[%w_.-]*%.%a+$") and not last:match("%.lua$") then names[#names + 1] = last end
  end
  return names
end

local function the_tours(names)
  return function(entry)
    for _, name in ipairs(names) do
      if entry:sub(-#name) == name or entry == name:gsub("^%-", "") then return true end
    end
    return false
  end
end

describe("the README's tour", function()
  it("runs as pasted into a file, on sim, from a fresh folder, and leaves no file behind", function()
    local text = tour()
    local names = written_names(text)
    assert.is_true(#names > 0, "the tour writes no file: the spec's name search needs updating")
    local watched = { source, source .. "/examples", "/tmp" }
    local before = {}
    for i, dir in ipairs(watched) do before[i] = isolated.listing(dir) end
    local cwd = process.tempdir()
    local script = cwd .. "/tour.lua"
    local f = assert(io.open(script, "wb"))
    f:write(text)
    f:close()

    local out, err, status = isolated.run(cwd, { "tour.lua" }, { TOCHA_DEVICE = "sim" })
    local left = isolated.new_names({ ["tour.lua"] = true }, isolated.listing(cwd))
    process.remove_tree(cwd)
    assert.are.equal(0, status, err .. out)
    assert.truthy(out:find("upsample_nearest2d_forward__f32__2__2__128", 1, true), out)
    assert.is_nil(out:find("%f[%w]false%f[%W]"), out)
    assert.are.same({}, left)
    for i, dir in ipairs(watched) do
      assert.are.same({}, isolated.new_names(before[i], isolated.listing(dir), the_tours(names)), dir)
    end
  end)
end)
