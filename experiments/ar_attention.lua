-- The paper's AR configuration for the 2-layer attention model (spec §5): ar_32, D = 64,
-- learned positions, 16 epochs of 100,032 documents, batch 32, AdamW with cosine decay after 10 %
-- warm-up, evaluation on 320 test documents every 200 steps. Usage:
--   mechlab experiments/ar_attention.lua [lr=1e-3] [d_model=64] [out=runs/ar_attention]
local train = require "mech.train"

local opts = { lr = 1e-3, d_model = 64, out = "runs/ar_attention", threads = 1 }
for _, a in ipairs(arg or {}) do
  local k, v = a:match("^(%w[%w_]*)=(.*)$")
  if not k or opts[k] == nil then error("usage: ar_attention.lua [lr=..] [d_model=..] [out=..] [threads=..]; got " .. a) end
  opts[k] = tonumber(v) or v
end

local run = train.run {
  model = { arch = "attention", d_model = math.tointeger(opts.d_model), n_layers = 2, pos_emb = true },
  task = "ar_32", train_docs = 100032, eval_docs = 320, batch_size = 32, epochs = 16,
  lr = opts.lr, schedule = "cosine", warmup = 0.1, eval_every = 200, seed = 42,
  out = opts.out, threads = math.tointeger(opts.threads), checkpoint_every = 5000,
}
print(string.format("final test accuracy %.4f (loss %.4f) after %d steps in %.0f s", run.final.accuracy,
  run.final.loss, run.steps, run.wall))
