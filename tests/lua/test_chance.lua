-- One definition of chance: task:chance() (guessing among the answers the task can have), the
-- number ic.evaluate and patching_map both report for the same task (docs/interventions.md).
local T = require "check"
local ic = require "mech.interchange"

T.test("task:chance is 1 / the number of answers the task can have", function()
  local ar = mech.task.ar { num_kv = 32, min_length = 8, max_length = 8 } -- 16 values, V = 36
  T.near(ar:chance(), 1 / 16, 1e-12)
  T.near(mech.task.ar { num_kv = 32, min_length = 8, max_length = 8, query_type = "value" }:chance(), 1 / 16, 1e-12)
  local mq = mech.task.mqar { vocab_size = 64, num_kv_pairs = 4, input_seq_len = 32 }
  T.near(mq:chance(), 1 / 32, 1e-12) -- values 32 .. 63
  local atr = mech.task.preset("pcfg_5_20")
  local lo, hi = atr:corrupt_range()
  T.near(atr:chance(), 1 / (hi - lo + 1), 1e-12) -- the terminals
end)

T.test("ic.evaluate and patching_map report the same chance for the same task", function()
  local task = mech.task.ar { num_kv = 32, min_length = 8, max_length = 8 }
  local ds = task:dataset(8, { seed = 3, split = "test" })
  local model = mech.model { arch = "attention", d_model = 16, n_layers = 1, vocab = task:vocab_size(), seed = 2 }
  local res = ic.evaluate(model, ds, { layers = { 0 }, components = { "block_input" }, workers = 1 })
  local clean = ds:batch(0, 8)
  local map = mech.interp.patching_map(model, clean, { ablate = "zero", dataset = ds, layers = { 0 },
    components = { "block_input" } })
  T.near(res.chance, task:chance(), 1e-12)
  T.near(map.chance, res.chance, 1e-12)
  T.truthy(res.chance ~= 1 / task:vocab_size())
end)

T.done()
