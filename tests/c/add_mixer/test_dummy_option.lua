-- The dummy mixer's own option (tests/c/add_mixer/mixer_dummy.c, dummy_gain), declared in its
-- file only, reaches everything the options table serves: mech.model's keys and range checks,
-- model:config(), the forward, and the checkpoint's JSON config (docs/ARCHITECTURE.md, "Adding a mixer").
local T = require "check"

local base = { d_model = 16, vocab = 13, max_pos = 16, seed = 3 }
local function model(extra)
  local o = {}
  for k, v in pairs(base) do o[k] = v end
  for k, v in pairs(extra) do o[k] = v end
  return mech.model(o)
end
local tok = mech.tensor({ { 1, 5, 6, 7, 2 } }, { dtype = "int32" })

T.test("dummy_gain is a key of mech.model for the dummy only, with its default and range", function()
  T.eq(model { arch = "dummy" }:config().dummy_gain, 1)
  T.eq(model { arch = "dummy", dummy_gain = 3 }:config().dummy_gain, 3)
  T.raises(function() model { arch = "attention", dummy_gain = 2 } end, "option 'dummy_gain' does not apply to arch 'attention'")
  T.raises(function() model { arch = "dummy", dummy_gain = 9 } end, "dummy_gain")
  T.raises(function() model { arch = "dummy", dummy_gain = 0 } end, "dummy_gain")
end)

T.test("the mixer reads it: its output is attention's times the gain", function()
  local name = "blocks.0.attention_output"
  local _, c1 = model { arch = "dummy" }:run_with_cache(tok, { names = name })
  local _, c2 = model { arch = "dummy", dummy_gain = 2 }:run_with_cache(tok, { names = name })
  local _, ca = model { arch = "attention" }:run_with_cache(tok, { names = name })
  T.eq((c1[name] - ca[name]):abs():max():item(), 0)
  T.truthy(c1[name]:abs():max():item() > 0)
  T.truthy((c2[name] - c1[name] * 2):abs():max():item() < 1e-6)
end)

T.test("checkpoints carry it for the dummy, and nothing new for the other mixers", function()
  local path = os.tmpname()
  model { arch = "dummy", dummy_gain = 2 }:save(path)
  local m = mech.load(path)
  T.eq(m:config().dummy_gain, 2)
  local _, meta = mech.load_tensors(path)
  T.truthy(meta["mechlab.config"]:find('"dummy_gain":2', 1, true), meta["mechlab.config"])
  model { arch = "attention" }:save(path)
  _, meta = mech.load_tensors(path)
  T.eq(meta["mechlab.config"]:find("dummy_gain", 1, true), nil)
  os.remove(path)
end)

T.done()
