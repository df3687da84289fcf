-- The README's interchange command on the default job's checkpoint: experiments/default.lua (a
-- short run) then experiments/interchange.lua and experiments/attention_mass.lua on its checkpoint,
-- each evaluating on the task the checkpoint records.
local T = require "check"

local tmp = os.tmpname()
os.remove(tmp)
mech.sys.mkdir(tmp)
local exe = arg[-1]

local function run(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("a")
  local ok = p:close()
  return ok, out
end

T.test("mechlab experiments/interchange.lua runs/default/checkpoint.safetensors out.csv works", function()
  local dir = tmp .. "/default"
  local ok, out = run(string.format("%q experiments/default.lua steps=30 eval_docs=64 eval_every=10 out=%q min_accuracy=0",
    exe, dir))
  T.truthy(ok, out)
  T.truthy(out:find("next: mechlab experiments/interchange.lua " .. dir .. "/checkpoint.safetensors", 1, true), out)
  local ckpt = dir .. "/checkpoint.safetensors"
  -- the checkpoint's task is the default job's own (mech.task.ar{num_kv = 32, length = 4}), not a preset
  local task = mech.task.from_checkpoint(ckpt)
  T.eq(task:spec(), mech.task.ar { num_kv = 32, length = 4 }:spec())
  -- mech.load gives it back too
  local _, _, meta = mech.load(ckpt)
  T.eq(tostring(meta.task):match("^mech.Task"), "mech.Task")
  T.eq(meta.task:spec(), task:spec())
  ok, out = run(string.format("%q experiments/interchange.lua %q %q docs=64", exe, ckpt, tmp .. "/out.csv"))
  T.truthy(ok, out)
  T.truthy(out:find("combinations on 64 documents", 1, true), out)
  T.truthy(out:find("Attrib @ target_item_orig", 1, true), out)
  T.truthy(not out:find("ar_32", 1, true), "no fallback task: " .. out)
  local csv = mech.sys.read_file(tmp .. "/out.csv")
  T.truthy(csv and csv:match("^step,split,metric,value\n30,test,"), csv)
  ok, out = run(string.format("%q experiments/attention_mass.lua %q out=%q n=32", exe, ckpt, tmp .. "/mass"))
  T.truthy(ok, out)
  T.truthy(out:find("layer 1: value", 1, true), out)
  T.truthy(mech.sys.read_file(tmp .. "/mass.csv"):find(",attention,64,true,42,1,value,", 1, true))
end)

T.test("a checkpoint that records no task: interchange.lua says so and falls back to ar_32", function()
  local m = mech.model { arch = "attention", d_model = 8, n_layers = 2, vocab = 8196, max_pos = 64 }
  local p = tmp .. "/bare.safetensors"
  m:save(p)
  local ok, out = run(string.format("%q experiments/interchange.lua %q docs=8", exe, p))
  T.truthy(ok, out)
  T.truthy(out:find("records no task", 1, true), out)
  T.truthy(out:find("ar_32 at seed 42", 1, true), out)
  local _, _, meta = mech.load(p)
  T.eq(meta.task, nil)
  T.eq(meta.task_error, nil)
  ok, out = run(string.format("%q experiments/attention_mass.lua %q n=8", exe, p))
  T.truthy(not ok and out:find("records no task", 1, true), out)
end)

os.execute("rm -rf '" .. tmp .. "'")
T.done()
