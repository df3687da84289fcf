-- Your own task in Lua (docs/tasks.md, "Your own task"): a copy task written in Lua, a built-in
-- mixer trained on it, and the paper's interchange evaluation (spec §6) on its test set.
--   mechlab experiments/own_task.lua [arch=attention] [steps=600] [symbols=8] [out=DIR] [smoke=true]
-- A document is <bos> s1 … sn = s1 … sn: every copied symbol is a target (read at the position
-- before it). The task declares the named positions the evaluation patches: bos, the first symbol
-- (query_item_orig: the item an interchange corrupts), the divider and the first copy (query_item).
-- About a minute by default; smoke=true (the test's run) takes a few seconds.
local train = require "mech.train"
local ic = require "mech.interchange"

local opts = { arch = "attention", steps = "600", symbols = "8", out = "", smoke = "false" }
for _, a in ipairs(arg or {}) do
  local k, v = a:match("^([%w_]+)=(.*)$")
  if not k or opts[k] == nil then
    error("usage: own_task.lua [arch=attention] [steps=600] [symbols=8] [out=DIR] [smoke=true]; got '" .. a .. "'", 0)
  end
  opts[k] = v
end
local smoke = opts.smoke == "true"
local n_sym = math.tointeger(tonumber(opts.symbols))

-- The task: the copy task of lua/mech/task_examples.lua (read how it is written there: a
-- vocabulary of names, a sample function drawing one document from `gen`, the dataset's own random
-- stream, and the positions it declares), with 2 to 5 symbols. Made by mech.task.load from a module
-- and its options, a run's checkpoint (out=DIR) names the task and rebuilds it.
local task = mech.task.load("mech.task_examples", { n_symbols = n_sym, max_len = 5 }, nil, "copy")
print(task:dataset(1, { split = "test" }):show(0))

local steps = smoke and 60 or math.tointeger(tonumber(opts.steps))
local run = train.run {
  model = { arch = opts.arch, d_model = smoke and 16 or 32, n_layers = 2 },
  task = task, steps = steps, batch_size = 32, train_docs = 32 * steps, eval_docs = smoke and 32 or 256,
  eval_every = math.max(steps // 4, 1), lr = 3e-3, seed = 1, quiet = true, threads = 1,
  out = opts.out ~= "" and opts.out or nil,
}
print(string.format("%s on copy: test accuracy %.3f over %d copied symbols after %d steps (%.1f s)", opts.arch,
  run.final.accuracy, run.final.n, steps, run.wall))

-- The interchange evaluation: the first symbol corrupted, every declared position patched, per
-- copied symbol (each target is an example).
local test = task:dataset(smoke and 32 or 128, { seed = 1, split = "test" })
local res = ic.evaluate(run.model, test, { components = { "block_input" } })
print(string.format("interchange: %d combinations on %d documents in %.1f s", res.n_combos, #test, res.seconds))
for _, layer in ipairs { 0, 1 } do
  local parts = {}
  for _, p in ipairs { "query_item_orig", "divider", "query_item" } do
    local a = ic.attrib(res, string.format("%d.KEY.query_item_orig.%s.block_input", layer, p))
    parts[#parts + 1] = string.format("%s %.3f", p, a)
  end
  print(string.format("  layer %d block-input Attrib @ %s", layer, table.concat(parts, ", ")))
end
return { accuracy = run.final.accuracy, res = res }
