-- Hostile checkpoints (issue 41, docs/security.md): every way a checkpoint can name code or a file
-- is refused unless the user allowed it, and each case checks the absence of effects (no marker
-- written by a module, no file made or changed outside the test's directory, no registration or
-- loaded module left behind), not only the message. Cases that could block (a FIFO, standard
-- input) or read a stream run in a child process under `timeout`.
local T = require "check"
local json = require "mech.json"
require "mech.train" -- loaded, as in a script that trains: a loaded module's functions are no tasks either

local tmp = os.tmpname()
os.remove(tmp)
mech.sys.mkdir(tmp)
local exe = arg[-1]

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end
local function exists(path) return mech.sys.exists(path) end
local function sh(cmd) -- runs cmd with sh; ok, output
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("a")
  return p:close(), out
end
local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end -- a shell word
-- a child mechlab running `code`, in directory dir, with stdin from `stdin` (a shell fragment)
local function child(code, dir, stdin)
  return sh(string.format("cd %s && %s timeout 20 %s -e %s", q(dir), stdin or "</dev/null", q(exe), q(code)))
end

-- What the working directory and the test's process hold before the cases.
local function listing(dir) return select(2, sh("ls -A " .. q(dir))) end
local cwd_before = listing(".")
local root = select(2, sh("pwd")):gsub("\n$", "")
local function loaded_names()
  local names = {}
  for k in pairs(package.loaded) do names[#names + 1] = k end
  table.sort(names)
  return table.concat(names, ",")
end

-- A small model saved with a task record of our choosing, in directory dir.
local base_model = mech.model { arch = "attention", d_model = 8, n_layers = 1, vocab = 16 }
local function checkpoint(dir, spec)
  mech.sys.mkdir(dir)
  local path = dir .. "/checkpoint.safetensors"
  base_model:save(path, { meta = { ["task.spec"] = json.encode(spec), ["task.name"] = spec.name or "x" } })
  return path
end
-- a benign load first: the library's own modules it loads on first use are not the cases' doing
mech.load(checkpoint(tmp .. "/benign", mech.task.preset("ar_32", 1):spec()))

-- A module file that would leave a marker if it ever ran.
local function evil_module(dir, name, marker)
  write(dir .. "/" .. name .. ".lua", string.format(
    "local f = io.open(%q, 'w') f:write('ran') f:close()\nreturn function() return mech.task.preset('ar_32', 1) end\n",
    marker))
end

-- A valid JSON-lines task file.
local function jsonl_file(path)
  local ds = mech.task.ar { num_kv = 4, length = 4 }:dataset(4, { seed = 1, split = "test" })
  ds:write_jsonl(path)
end

-- The task a checkpoint's record gives mech.load, or nil and the reason.
local function loaded_task(path, opts)
  local before = loaded_names()
  local ok, m, _, meta = pcall(mech.load, path, opts)
  if not ok then return nil, m end
  T.truthy(m, "the model itself loads")
  T.eq(loaded_names(), before, "no module loaded by a refused record")
  return meta.task, meta.task_error
end

T.test("task.spec kind lua naming mech.train/run: refused, nothing trained, the directory untouched", function()
  local victim = tmp .. "/victim"
  mech.sys.mkdir(victim)
  write(victim .. "/metrics.csv", "precious\n")
  write(victim .. "/keep.tmp.123", "precious\n")
  local ck = checkpoint(tmp .. "/train_ck", { kind = "lua", module = "mech.train", name = "run", options = {
    model = { arch = "attention", d_model = 8, n_layers = 1 }, task = "ar_32", steps = 1, train_docs = 8,
    eval_docs = 8, batch_size = 8, out = victim, overwrite = true, quiet = true } })
  local task, why = loaded_task(ck)
  T.eq(mech.sys.read_file(victim .. "/metrics.csv"), "precious\n")
  T.eq(mech.sys.read_file(victim .. "/keep.tmp.123"), "precious\n")
  T.falsy(exists(victim .. "/checkpoint.safetensors"))
  T.eq(task, nil)
  T.truthy(tostring(why):find("module 'mech.train' registered no task 'run'", 1, true), why)
  T.raises(function() mech.task.from_checkpoint(ck, { modules = { "mech.train" } }) end, "registered no task 'run'")
  -- any loaded module's function is no constructor: mech.util.copy neither
  local ck2 = checkpoint(tmp .. "/util_ck", { kind = "lua", module = "mech.util", name = "copy", options = {} })
  T.raises(function() mech.task.from_checkpoint(ck2) end, "module 'mech.util' registered no task 'copy'")
end)

T.test("task.spec naming debug/debug: refused, standard input never executed", function()
  local ck = checkpoint(tmp .. "/debug_ck", { kind = "lua", module = "debug", name = "debug", options = {} })
  local marker = tmp .. "/debug_marker"
  local stdin = string.format("printf '%%s\\ncont\\n' %s |", q(string.format("local f = io.open(%q, 'w') f:write('ran') f:close()", marker)))
  local _, out = child(string.format("local m, _, meta = mech.load(%q); print('task_error', meta.task_error)", ck),
    tmp, stdin)
  T.falsy(exists(marker), out)
  T.truthy(out:find("module 'debug' registered no task 'debug'", 1, true), out)
end)

T.test("task.spec naming ./evilmod.lua in the checkpoint's directory or the working directory: never run", function()
  local ckdir = tmp .. "/evil_ck"
  local ck = checkpoint(ckdir, { kind = "lua", module = "evilmod", name = "x", options = {} })
  local marker1, marker2 = tmp .. "/evil_marker1", tmp .. "/evil_marker2"
  evil_module(ckdir, "evilmod", marker1)
  local work = tmp .. "/evil_work"
  mech.sys.mkdir(work)
  evil_module(work, "evilmod", marker2)
  -- loaded from its own directory, and from another working directory that holds the module
  local code = string.format("local m, _, meta = mech.load(%q); print('task', meta.task, meta.task_error)", ck)
  local ok1, out1 = child(code, ckdir)
  local ok2, out2 = child(code, work)
  T.falsy(exists(marker1), out1)
  T.falsy(exists(marker2), out2)
  T.truthy(ok1 and out1:find("names module 'evilmod', which this process has not loaded", 1, true), out1)
  T.truthy(ok2 and out2:find("pass {modules = {\"evilmod\"}}", 1, true), out2)
  -- experiments/interchange.lua on it stops with the refusal, and runs nothing
  local ok3, out3 = sh(string.format("cd %s && timeout 20 %s %s %s docs=8 </dev/null", q(ckdir), q(exe),
    q(root .. "/experiments/interchange.lua"), q(ck)))
  T.truthy(not ok3 and out3:find("names module 'evilmod'", 1, true), out3)
  T.falsy(exists(marker1), out3)
end)

T.test("a mixer_module of os: refused, no registration left; a genuine Lua-mixer checkpoint then loads", function()
  -- the genuine checkpoint, made in a child (tests/lua/mixer_gate.lua registers mixer_gate)
  local genuine = tmp .. "/gate.safetensors"
  local ok, out = child(string.format("require 'mixer_gate'; mech.model { mixer = 'mixer_gate', d_model = 8, "
    .. "n_layers = 1, vocab = 16 }:save(%q)", genuine), tmp)
  T.truthy(ok, out)
  -- the hostile one: the same mixer name, its module os
  local Fake = mech.nn.Module:extend("MixerGate")
  function Fake:forward(x) return x end
  mech.register_mixer(Fake, { module = "os" })
  local hostile = tmp .. "/os_mixer.safetensors"
  -- (an attacker writes any file: here save finds an os.lua, so that it records the module)
  local craft = tmp .. "/craft"
  mech.sys.mkdir(craft)
  write(craft .. "/os.lua", "return {}\n")
  local saved_path = package.path
  package.path = craft .. "/?.lua;" .. package.path
  mech.model { mixer = Fake, d_model = 8, n_layers = 1, vocab = 16 }:save(hostile)
  local code = string.format([[
local ok, err = pcall(mech.load, %q)
print('hostile', ok, err)
print('still registered', pcall(mech.model, { arch = 'mixer_gate', d_model = 8, n_layers = 1, vocab = 16 }))
if mech.allow_module then mech.allow_module('mixer_gate') end
local m = mech.load(%q)
print('genuine', m:config().arch, m:forward(mech.tensor({{1, 2, 3}}, {dtype = 'int32'})):shape()[3])]], hostile, genuine)
  ok, out = child(code, tmp)
  T.truthy(ok, out)
  T.truthy(out:find("hostile\tfalse", 1, true) and out:find("module 'os' is ", 1, true), out)
  T.truthy(out:find("still registered\tfalse", 1, true), out)
  T.truthy(out:find("genuine\tmixer_gate\t16", 1, true), out)
  -- a mixer module named by the file is never required without allowance: no marker
  local marker = tmp .. "/mixer_marker"
  local Evil = mech.nn.Module:extend("EvilMix")
  function Evil:forward(x) return x end
  mech.register_mixer(Evil, { module = "evilmix" })
  local ckdir = tmp .. "/evilmix_ck"
  mech.sys.mkdir(ckdir)
  write(ckdir .. "/evilmix.lua", string.format("io.open(%q, 'w'):write('ran')\nreturn {}\n", marker))
  write(craft .. "/evilmix.lua", "return {}\n")
  mech.model { mixer = Evil, d_model = 8, n_layers = 1, vocab = 16 }:save(ckdir .. "/m.safetensors")
  package.path = saved_path
  ok, out = child("print(pcall(mech.load, 'm.safetensors'))", ckdir)
  T.falsy(exists(marker), out)
  T.truthy(out:find("names module 'evilmix', which this process has not loaded", 1, true), out)
end)

T.test("a jsonl record naming /dev/zero, an oversize file, a path with .. or a symlink out: refused unread", function()
  local outside = tmp .. "/outside.jsonl"
  jsonl_file(outside)
  local function refused(name, path, pattern)
    local ck = checkpoint(tmp .. "/" .. name, { kind = "jsonl", name = "t", path = path, options = {} })
    return ck, function()
      local task, why = loaded_task(ck)
      T.eq(task, nil, name)
      T.truthy(tostring(why):find(pattern, 1, true), why)
    end
  end
  local _, check = refused("zero_ck", "/dev/zero", "is not a file below")
  check()
  _, check = refused("dotdot_ck", "../outside.jsonl", "is not a file below")
  check()
  _, check = refused("abs_ck", outside, "is not a file below")
  check()
  local ck = refused("link_ck", "data.jsonl", "")
  sh(string.format("ln -s %s %s", q(outside), q(tmp .. "/link_ck/data.jsonl")))
  local task, why = loaded_task(ck)
  T.eq(task, nil)
  T.truthy(tostring(why):find("is not a file below", 1, true), why)
  -- a sparse file past the bound is refused by its size, not read
  ck = refused("big_ck", "big.jsonl", "")
  local f = assert(io.open(tmp .. "/big_ck/big.jsonl", "w"))
  f:seek("set", 256 * 1024 * 1024)
  f:write("\n")
  f:close()
  task, why = loaded_task(ck)
  T.eq(task, nil)
  T.truthy(tostring(why):find("more than the 268435456 a data file may hold", 1, true), why)
  -- the legitimate case: a file beside the checkpoint, by a relative path
  ck = refused("good_ck", "data.jsonl", "")
  jsonl_file(tmp .. "/good_ck/data.jsonl")
  task = loaded_task(ck)
  T.eq(task and task:kind(), "jsonl")
  T.eq(#task:dataset({ split = "test" }), 4)
end)

T.test("a relative jsonl path never reads the working directory's file", function()
  local ck = checkpoint(tmp .. "/rel_ck", { kind = "jsonl", name = "t", path = "data.jsonl", options = {} })
  local work = tmp .. "/rel_work"
  mech.sys.mkdir(work)
  jsonl_file(work .. "/data.jsonl")
  local ok, out = child(string.format("local _, _, meta = mech.load(%q); print('task', meta.task, meta.task_error)", ck),
    work)
  T.truthy(ok and out:find("task\tnil\t", 1, true) and out:find("rel_ck/data.jsonl", 1, true), out)
end)

T.test("a jsonl record naming a FIFO or /dev/stdin: refused at once, never blocks", function()
  -- named by its absolute path inside the checkpoint's directory: only its kind refuses it
  local ck = checkpoint(tmp .. "/fifo_ck", { kind = "jsonl", name = "t", path = tmp .. "/fifo_ck/data.jsonl",
    options = {} })
  T.truthy(sh("mkfifo " .. q(tmp .. "/fifo_ck/data.jsonl")))
  local code = string.format("local _, _, meta = mech.load(%q); print('task', meta.task, meta.task_error)", ck)
  T.truthy(sh("mkfifo " .. q(tmp .. "/empty_pipe")))
  local blocking = "<>" .. q(tmp .. "/empty_pipe") -- standard input that never ends nor holds data
  local ok, out = child(code, tmp, blocking)
  T.truthy(ok and out:find("is not a regular file", 1, true), out)
  local ck2 = checkpoint(tmp .. "/stdin_ck", { kind = "jsonl", name = "t", path = "/dev/stdin", options = {} })
  ok, out = child(string.format("local _, _, meta = mech.load(%q); print('task', meta.task, meta.task_error)", ck2), tmp, blocking)
  T.truthy(ok and out:find("task\tnil\t", 1, true), out)
  T.truthy(out:find("/dev/stdin", 1, true), out)
end)

T.test("allowed modules: by the call or mech.allow_module, never by the file; registered tasks only", function()
  local dir = tmp .. "/mods"
  mech.sys.mkdir(dir)
  local marker = tmp .. "/allowed_marker"
  write(dir .. "/my_tasks.lua", string.format([[
io.open(%q, 'w'):write('ran')
local M = {}
function M.copy(o) return require('mech.task_examples').copy(o) end
function M.helper() error('never called') end
return mech.task.register({ copy = M.copy })]], marker))
  local ck = checkpoint(tmp .. "/allow_ck", { kind = "lua", module = "my_tasks", name = "copy",
    options = { n_symbols = 3 } })
  local ck_helper = checkpoint(tmp .. "/helper_ck", { kind = "lua", module = "my_tasks", name = "helper", options = {} })
  local saved = package.path
  package.path = dir .. "/?.lua;" .. package.path
  local task, why = loaded_task(ck)
  T.eq(task, nil)
  T.truthy(tostring(why):find("names module 'my_tasks'", 1, true), why)
  T.falsy(exists(marker))
  task = select(3, mech.load(ck, { modules = { "my_tasks" } })).task
  T.eq(task and task:name(), "copy")
  T.truthy(exists(marker))
  T.raises(function() mech.task.from_checkpoint(ck_helper) end, "module 'my_tasks' registered no task 'helper'")
  package.loaded.my_tasks = nil
  mech.allow_module("my_tasks")
  T.eq(mech.task.from_checkpoint(ck):name(), "copy")
  package.path = saved
  T.raises(function() mech.load(ck, { modules = { "../x" } }) end, "option 'modules' entry 1 expected a module name")
  T.raises(function() mech.allow_module(7) end, "mech.allow_module: argument 1 expected a module name")
end)

T.test("legitimate use from an empty directory: own_mixer's and own_task's checkpoints reload as documented", function()
  local empty = tmp .. "/empty"
  mech.sys.mkdir(empty)
  -- the mixer module is found from mech.home; its checkpoint loads where the module is allowed
  local p = tmp .. "/gla.safetensors"
  local ok, out = child(string.format("require 'experiments.own_mixer'; mech.model { mixer = 'gla', d_model = 16, "
    .. "n_layers = 1, vocab = 16 }:save(%q)", p), empty)
  T.truthy(ok, out)
  ok, out = child(string.format("print(mech.load(%q, { modules = { 'experiments.own_mixer' } }):config().arch)", p), empty)
  T.truthy(ok and out == "gla\n", out)
  ok, out = child(string.format("mech.load(%q)", p), empty)
  T.truthy(not ok and out:find("names module 'experiments.own_mixer'", 1, true), out)
  -- a run of a Lua mixer resumes in a fresh process: its config names the module, so it is allowed
  local cfg = "require('mech.train').run { model = { mixer = 'mixer_gate', d_model = 8, n_layers = 1 }, task = 'ar_32', "
    .. "steps = 2, train_docs = 16, eval_docs = 8, batch_size = 8, quiet = true, out = 'gate_run', resume = %s }"
  ok, out = child(string.format(cfg, "nil"), empty)
  T.truthy(ok, out)
  ok, out = child(string.format(cfg, "true"), empty)
  T.truthy(ok, out)
  -- own_task.lua runs from here (found in mech.home) and its task (mechlab's own module) reloads
  ok, out = sh(string.format("cd %s && timeout 60 %s experiments/own_task.lua smoke=true out=run </dev/null", q(empty),
    q(exe)))
  T.truthy(ok, out)
  ok, out = child("local _, _, meta = mech.load('run/checkpoint.safetensors'); print(meta.task:name(), meta.task_error)",
    empty)
  T.truthy(ok and out == "copy\tnil\n", out)
end)

T.test("a checkpoint keeps its mixer module's source hash: loading warns naming both when it changed", function()
  local dir = tmp .. "/hashmix"
  mech.sys.mkdir(dir)
  local source = "local M = mech.nn.Module:extend('HashMix')\nfunction M:forward(x) return x * 1 end\n"
    .. "mech.register_mixer(M, { module = 'hashmix' })\nreturn M\n"
  write(dir .. "/hashmix.lua", source)
  local ok, out = child("require 'hashmix'; mech.model { mixer = 'hash_mix', d_model = 8, n_layers = 1, vocab = 16 }"
    .. ":save('m.safetensors')", dir)
  T.truthy(ok, out)
  local load = "local m, _, meta = mech.load('m.safetensors', { modules = { 'hashmix' } }); print(meta['mixer.module_hash'])"
  ok, out = child(load, dir)
  local saved = out:match("^(%x+)\n$")
  T.truthy(ok and saved and #saved == 16, out)
  write(dir .. "/hashmix.lua", source .. "-- edited\n")
  ok, out = child(load, dir)
  local now = out:match("hash (%x+) now, " .. saved .. " at save")
  T.truthy(ok and now and now ~= saved and out:find("mixer module 'hashmix'", 1, true), out)
end)

T.test("nothing was created or changed in the working directory", function()
  T.eq(listing("."), cwd_before)
end)

os.execute("rm -rf " .. q(tmp))
T.done()
