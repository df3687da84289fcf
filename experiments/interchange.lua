-- The paper's interchange evaluation (spec §6) of one checkpoint, stand-alone:
--   mechlab experiments/interchange.lua <checkpoint.safetensors> [out.csv] [split=test] [docs=320]
--                                       [mixer_sites=false] [threads=1] [--allow-module M]...
-- A checkpoint names the modules of its Lua mixer and Lua task; they are used only when allowed
-- with --allow-module (each once; docs/security.md): the file alone never runs code.
-- The task is the checkpoint's own (mech.load's meta.task: the record train.run writes, or for
-- older checkpoints the preset of task.name or the manifest beside it); a checkpoint that records
-- no task is evaluated on ar_32 at seed 42, with a note. The eval set is the first `docs`
-- documents of `split` at the training seed, as the training loop evaluates. Appends every
-- metric to out.csv (step = the checkpoint's train.step) and prints the layer-1 block-input
-- attributions of Fig. 3 (key corrupted; value, query and key positions).
local mech = require "mech"
local ic = require "mech.interchange"

local usage = "usage: interchange.lua <checkpoint> [out.csv] [split=test] [docs=320] [mixer_sites=false] [threads=1] "
  .. "[--allow-module M]..."
local args = arg or {}
local ckpt, out, modules = nil, nil, {}
local opts = { split = "test", docs = 320, mixer_sites = "false", threads = 1 }
local i = 1
while i <= #args do
  local a = args[i]
  local k, v = a:match("^(%w[%w_]*)=(.*)$")
  local allow = a:match("^%-%-allow%-module=(.+)$")
  if a == "--allow-module" then -- a module the checkpoint may name (docs/security.md)
    allow, i = args[i + 1], i + 1
    if not allow then error(usage .. "; --allow-module needs a module name", 0) end
  end
  if allow then modules[#modules + 1] = allow
  elseif k and opts[k] ~= nil then opts[k] = v
  elseif not k and not ckpt then ckpt = a
  elseif not k and not out then out = a
  else error(usage .. "; got " .. a, 0) end
  i = i + 1
end
if not ckpt then error(usage, 0) end
mech.threads(math.tointeger(tonumber(opts.threads)))

local model, _, meta = mech.load(ckpt, { modules = modules })
local seed = math.tointeger(tonumber(meta["train.seed"] or "42"))
local task = meta.task -- the task the checkpoint records (mech.load rebuilds it)
if meta.task_error then error(meta.task_error, 0) end -- e.g. a Lua task whose module is missing
if not task then
  io.stderr:write(select(2, mech.task.from_checkpoint(ckpt, { modules = modules })) .. "\n(interchange.lua evaluates it on ar_32 at seed 42)\n")
  task = mech.task.preset("ar_32", 42)
end
local ds = task:dataset(math.tointeger(tonumber(opts.docs)), { seed = seed, split = opts.split })
local res = ic.evaluate(model, ds, { mixer_sites = opts.mixer_sites == "true" })
local step = math.tointeger(tonumber(meta["train.step"] or "0"))
if out then ic.write_csv(res, out, step, opts.split) end

local T = ic.type_name(task)
print(string.format("%s: %d combinations on %d documents in %.1f s (%d patched examples)", ckpt, res.n_combos, #ds,
  res.seconds, res.patched_examples))
if model:config().n_layers > 1 then
  for _, p in ipairs { "target_item_orig", "query_item", "query_item_orig" } do
    local label = string.format("1.%s.query_item_orig.%s.block_input", T, p)
    if res.by_name[label .. ".prob_diff"] then -- a task made outside C patches only the positions it declares
      local a, pass = ic.attrib(res, label)
      print(string.format("  Attrib @ %-16s %7.3f%s", p, a, pass and "" or "  (filtered: original − corrupted <= 0.01)"))
    end
  end
end
