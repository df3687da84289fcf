-- Issue 43's new-user check: four experiments of a page of Lua each (tests/new_user/), each copied
-- into an empty directory and run there as a user runs them: the build's mechlab, no LUA_PATH, the
-- working directory the experiment's own.
local T = require "check"

local exe = mech.sys.realpath(arg[-1])
local src = assert(mech.find("tests/new_user/rglru.lua")):match("^(.*)/[^/]*$")

-- A fresh empty directory holding the named files of tests/new_user/.
local function workdir(files)
  local dir = os.tmpname()
  os.remove(dir)
  mech.sys.mkdir(dir)
  for _, f in ipairs(files) do mech.sys.write_atomic(dir .. "/" .. f, assert(mech.sys.read_file(src .. "/" .. f))) end
  return dir
end

-- Runs a script in dir; its output (stdout and stderr), failing the test when it fails.
local function run(dir, script)
  local p = io.popen(string.format("cd '%s' && env -u LUA_PATH '%s' %s 2>&1", dir, exe, script))
  local out = p:read("a")
  local ok = p:close()
  if not ok then error(script .. " failed:\n" .. out, 2) end
  return out
end

local function field(out, name) return out:match("\n?" .. name .. "\t([^\n]*)") end

T.test("an RG-LRU mixer of one's own: trained, saved, reloaded bit-exactly in a new process, evaluated", function()
  local dir = workdir { "rglru.lua", "rglru_train.lua", "rglru_evaluate.lua" }
  local trained = run(dir, "rglru_train.lua")
  T.eq(field(trained, "trained"), "done\ttrue")
  local again = run(dir, "rglru_evaluate.lua")
  T.eq(field(again, "logits"), field(trained, "logits"), "the reloaded model's logits")
  T.eq(field(again, "combinations"), "72")
  T.eq(field(again, "sites"), "6", "the mixer's own sites (its submodules and hook_h)")
  os.execute("rm -rf '" .. dir .. "'")
end)

T.test("a 2-hop task of one's own with a position called `bridge`: shown, trained, through patching_map", function()
  local dir = workdir { "two_hop.lua" }
  local out = run(dir, "two_hop.lua")
  T.eq(field(out, "positions"), "bos,query_item_orig,target_item_orig,divider,query_item,target_item,query_type,next_key,bridge")
  T.truthy(out:find("\n  bridge%s+2  b%d"), out)
  T.eq(field(out, "columns"), "query_item_orig,bridge,query_item")
  T.eq(field(out, "rows"), "2")
  os.execute("rm -rf '" .. dir .. "'")
end)

T.test("the toolkit: cache, logit lens, decomposition, an ablation hook, a literal name filter, a suggestion", function()
  local dir = workdir { "toolkit.lua" }
  local out = run(dir, "toolkit.lua")
  T.eq(field(out, "pattern"), "8x2x13x13")
  T.eq(field(out, "lens"), "true")
  T.eq(field(out, "parts"), "6", "embed, pos_embed and a mixer and MLP output per layer")
  T.eq(field(out, "ablation changes logits"), "true")
  T.eq(field(out, "filtered"), "1")
  T.truthy(out:find("did you mean 'attention_output'", 1, true), out)
  os.execute("rm -rf '" .. dir .. "'")
end)

T.test("a hand-written optimizer loop lowers the loss; mech.adamw's lr says where it goes", function()
  local dir = workdir { "optim_loop.lua" }
  local out = run(dir, "optim_loop.lua")
  T.truthy(out:find("pass the learning rate to each step", 1, true), out)
  T.truthy(out:match("loss [%d.]+ %-> [%d.]+\ttrue"), out)
  os.execute("rm -rf '" .. dir .. "'")
end)

T.done()
