-- What bench_nn.lua and bench_lua_mixer.lua share: their command line ([steps=20]), the paper's
-- AR setting on one thread (ar_32: D = 64, 2 layers, batch 32, 64 batches of training documents)
-- and the timing of a training step. A script loads it with
--   local S = dofile(mech.find("bench/ar_setting.lua"))(arg, "bench_nn.lua")
return function(args, script)
  local opts = { steps = 20 }
  for _, a in ipairs(args or {}) do
    local k, v = a:match("^(%w+)=(.*)$")
    if not k or opts[k] == nil then error("usage: " .. script .. " [steps=N]; got " .. a) end
    opts[k] = math.tointeger(tonumber(v)) or error(script .. ": " .. k .. " expected an integer")
  end
  mech.threads(1)

  local S = { steps = opts.steps, D = 64, NL = 2, B = 32, task = mech.task.preset("ar_32") }
  S.V = S.task:vocab_size()
  S.ds = S.task:dataset(64 * S.B, { seed = 1, split = "train" })

  -- step(i) trains on batch i mod 64: CPU milliseconds per step over S.steps steps after three
  -- warm-up steps
  function S.ms_per_step(step)
    for i = 1, 3 do step(i) end
    collectgarbage()
    local t0 = os.clock() -- CPU time: one thread, so a busy machine stretches it least
    for i = 1, S.steps do step(i) end
    return (os.clock() - t0) * 1000 / S.steps
  end
  return S
end
