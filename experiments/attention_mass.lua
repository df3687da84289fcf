-- Where the query looks: for every finished Attention and Based run of the given sweeps, the mean
-- attention weight (their `mixer.pattern`, summed over heads; the paper's models have one) from
-- the query position to the value, the key and the query itself, per layer, on the run's test
-- documents. It reads an Attrib at the layer-1 block input: induction attends from the query to
-- the value in layer 1; a layer-0 head that already attends there retrieves directly, and then
-- patching the query's layer-1 input restores the answer (Attrib @ Query).
--   mechlab experiments/attention_mass.lua SWEEP_DIR|CHECKPOINT ... [out=attention_mass] [n=256]
-- writes OUT.csv (a row per run, layer and position) and prints a line per run. A checkpoint
-- (a .safetensors file, e.g. runs/default/checkpoint.safetensors) is measured on its own task
-- (mech.task.from_checkpoint) at its training seed.
local ic = require "mech.interchange"
local sweep = require "mech.sweep"
local train = require "mech.train"

local usage = "usage: mechlab experiments/attention_mass.lua SWEEP_DIR|CHECKPOINT ... [out=attention_mass] [n=256]"
local dirs, out, n = {}, "attention_mass", 256
for _, a in ipairs(arg or {}) do
  local k, v = a:match("^(%w+)=(.*)$")
  if k == "out" then out = v
  elseif k == "n" then n = math.tointeger(tonumber(v)) or error(usage .. "\n(n= expects a count, got '" .. v .. "')", 0)
  elseif k then error(usage .. "\n(unknown option '" .. k .. "=')", 0)
  else dirs[#dirs + 1] = a end
end
if #dirs == 0 then error(usage, 0) end

-- (position name, label); Mamba's implicit attention is a (B, E, L, L) tensor per layer, too large
-- for a test set: ic.attention_mass on a few documents gives it
local positions = { { "target_item_orig", "value" }, { "query_item_orig", "key" }, { "query_item", "query" } }
local archs = { attention = true, based = true }

-- The runs to measure: (id, checkpoint, config-like table {model, seed, eval_docs}, task or nil).
local runs = {}
for _, dir in ipairs(dirs) do
  if dir:match("%.safetensors$") then
    local model, _, meta = mech.load(dir)
    local task = meta.task -- the task the checkpoint records (mech.load rebuilds it)
    if not task then error("attention_mass.lua: " .. (meta.task_error or select(2, mech.task.from_checkpoint(dir))), 0) end
    local mc = model:config()
    runs[#runs + 1] = { id = dir, path = dir, task = task, c = { model = { arch = mc.arch, d_model = mc.d_model,
      n_layers = mc.n_layers, pos_emb = mc.pos_emb }, seed = math.tointeger(tonumber(meta["train.seed"] or "42")),
      eval_docs = n } }
  else
    for _, r in ipairs(sweep.status(dir).runs) do
      local c = r.manifest and r.manifest.config
      if r.state == "done" then
        local path = dir .. "/runs/" .. r.id .. "/checkpoint-report.safetensors"
        runs[#runs + 1] = { id = r.id, path = path, c = c }
      end
    end
  end
end

local csv, n_runs = { "run,arch,d_model,pos_emb,seed,layer,position,mass" }, 0
for _, r in ipairs(runs) do
  local c = r.c
  if archs[c.model.arch] then
    -- the checkpoint's own task record; a sweep run written before records: its config's task
    local task = r.task or mech.task.from_checkpoint(r.path) or train.make_task(c)
    local ds = task:dataset(math.min(n, c.eval_docs), { seed = c.seed, split = "test" })
    local model = mech.load(r.path)
    local by_layer = {}
    for _, p in ipairs(positions) do
      local mass = ic.attention_mass(model, ds, { query = "query_item", key = p[1] })
      for l = 0, c.model.n_layers - 1 do
        if mass[l] then
          csv[#csv + 1] = string.format("%s,%s,%d,%s,%d,%d,%s,%.6g", r.id, c.model.arch, c.model.d_model,
            tostring(c.model.pos_emb or false), c.seed, l, p[2], mass[l])
          by_layer[l] = (by_layer[l] and by_layer[l] .. ", " or "") .. string.format("%s %.3f", p[2], mass[l])
        end
      end
    end
    local line = {}
    for l = 0, c.model.n_layers - 1 do
      if by_layer[l] then line[#line + 1] = string.format("layer %d: %s", l, by_layer[l]) end
    end
    print(string.format("%s: %s", r.id, table.concat(line, "; ")))
    n_runs = n_runs + 1
  end
end
if n_runs == 0 then error("attention_mass.lua: no finished Attention or Based run in " .. table.concat(dirs, ", "), 0) end
mech.sys.write_atomic(out .. ".csv", table.concat(csv, "\n") .. "\n")
print(string.format("%d runs; %s.csv", n_runs, out))
