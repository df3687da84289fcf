-- A train.run refused for a bad task or model leaves no file, lock or directory behind
-- (docs/training.md, "Run directories"); a refusal in a directory that already existed leaves it
-- as it was.
local T = require "check"
local train = require "mech.train"

local root = os.tmpname()
os.remove(root)
mech.sys.mkdir(root)

local function listing(dir)
  local names = {}
  local p = io.popen("ls -A '" .. dir .. "' 2>/dev/null")
  for line in p:lines() do names[#names + 1] = line end
  p:close()
  table.sort(names)
  return names
end

local base = { model = { arch = "attention", d_model = 8 }, train_docs = 8, eval_docs = 4, batch_size = 4, steps = 1,
  quiet = true }
local function config(extra)
  local c = {}
  for k, v in pairs(base) do c[k] = v end
  for k, v in pairs(extra) do c[k] = v end
  return c
end

T.test("an unknown task name leaves no directory (nested ones included)", function()
  local out = root .. "/runs/bad_task"
  T.raises(function() train.run(config { task = "ar_no_such", out = out }) end, "ar_no_such")
  T.falsy(mech.sys.exists(out))
  T.falsy(mech.sys.exists(root .. "/runs"))
end)

T.test("a task of the wrong type leaves nothing behind", function()
  local out = root .. "/wrong_type"
  T.raises(function() train.run(config { task = 5, out = out }) end, "train.run: 'task' expected a preset name")
  T.falsy(mech.sys.exists(out))
  T.raises(function() train.run(config { task = { presets = "ar_32" }, out = out }) end, "a table without kind")
  T.falsy(mech.sys.exists(out))
  T.raises(function() train.run(config { task = { preset = "nope" }, out = out }) end, "nope")
  T.falsy(mech.sys.exists(out))
end)

T.test("a bad model config leaves nothing behind", function()
  local out = root .. "/bad_model"
  T.raises(function() train.run(config { task = "ar_32", model = { arch = "no_such_arch" }, out = out }) end,
    "no_such_arch")
  T.falsy(mech.sys.exists(out))
end)

T.test("a directory that existed is left as it was", function()
  local out = root .. "/existing"
  mech.sys.mkdir(out)
  mech.sys.write_atomic(out .. "/notes.txt", "mine\n")
  T.raises(function() train.run(config { task = "ar_no_such", out = out }) end, "ar_no_such")
  T.raises(function() train.run(config { task = "ar_32", model = { arch = "no_such_arch" }, out = out }) end)
  T.eq(listing(out), { "notes.txt" })
end)

T.test("a run that starts still writes its directory", function()
  local out = root .. "/good"
  local run = train.run(config { task = "ar_32", out = out })
  T.eq(run.status, "done")
  T.truthy(mech.sys.exists(out .. "/manifest.json"))
end)

os.execute("rm -rf '" .. root .. "'")
T.done()
