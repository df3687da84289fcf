--- The paper's suites (docs/reproduction.md, "The suites"): widths, learning rates, architectures,
--- the base run and the profiles the sweep files under experiments/paper/ share, and which runs
--- form the paper's curves. Part of mech.paper (lua/mech/paper.lua re-exports every field).
local suite = {}

suite.widths = { 16, 32, 64, 128, 256 }
suite.lr5 = { 3e-5, 1e-4, 3e-4, 1e-3, 3e-3 }
suite.lr7 = { 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2 }
suite.extra_lrs = { 1e-2, 3e-2 }
suite.archs = { "attention", "hyena", "base_conv", "based", "h3", "mamba" }
suite.seed = 42

-- AR (16 epochs of 100,032 documents: T = 50,016, reported at 50,000) and ATR (32 epochs:
-- T = 100,032, reported at 100,000). Evaluation on 320 documents every 200 steps.
function suite.base(task, over)
  local b = {
    task = task, model = { n_layers = 2 }, train_docs = 100032, batch_size = 32, eval_docs = 320, eval_batch = 64,
    epochs = task == "ar_32" and 16 or 32, schedule = "cosine", warmup = 0.1, eval_every = 200, seed = suite.seed,
    checkpoint_every = 1000,
  }
  for k, v in pairs(over or {}) do b[k] = v end
  return b
end

-- The interchange evaluation the figures read: the key corrupted (label query_item_orig), every
-- component and layer, at the reported step.
suite.interchange = { kind = "interchange", at = "report", label_types = { "query_item_orig" } }

-- Learned positions for Attention only (the paper's intent, and its main curves).
function suite.pe_for_attention(c)
  c.pos_emb = c.arch == "attention"
end

--- The runs of the paper's main curves: Attention with positions, the rest without, plus
--- Attention's NoPE runs at AR's extra learning rates, pooled with its PE runs when the best
--- learning rate is taken (docs/reproduction.md, "Model selection and the filter").
function suite.main_curve(r)
  return r.pos_emb == (r.arch == "attention") or (r.arch == "attention" and r.lr >= 1e-2 and r.task == "ar_32")
end

-- The names of the layer-1 block-input attributions the paper plots (docs/reproduction.md,
-- "Model selection and the filter").
function suite.attrib_label(position, layer, component)
  local pos = ({ value = "target_item_orig", key = "query_item_orig", query = "query_item" })[position] or position
  return string.format("%d.KEY.query_item_orig.%s.%s", layer or 1, pos, component or "block_input")
end

--- The positions v3's next-key test restores (spec §9.2), as {document position, label}: the
--- rows of experiments/mamba_next_key.lua's CSV and the columns of the page's next-key tables.
suite.next_key_positions = { { "query_item_orig", "key" }, { "target_item_orig", "value" }, { "next_key", "next key" },
  { "query_item", "query" } }

--- An ATR task for a sweep: the preset at seed 42 with the original generator's random stream,
--- so that grammars and documents are the paper's own (docs/tasks.md, "Random streams").
function suite.atr_task(preset)
  return { preset = preset, seed = suite.seed, rng = "numpy" }
end

--- The quick profile a suite extends (docs/reproduction.md, "Profiles"): widths 32 and 64, lr
--- 1e-3, one seed (42). over.grid adds or replaces axes (seed = {42, 43} for two seeds); other
--- keys (base, cell) are the profile's own.
function suite.quick(over)
  local p = { grid = { d_model = { 32, 64 }, lr = { 1e-3 }, seed = { suite.seed } } }
  for k, v in pairs(over or {}) do
    if k == "grid" then
      for axis, values in pairs(v) do p.grid[axis] = values end
    else
      p[k] = v
    end
  end
  return p
end

--- Issue 42's profiles evaluate the reported step on 1,024 test documents (standard error at most
--- 0.016, against 0.028 with the 320 of the other steps; docs/training.md, `report_docs`). It is an
--- axis of one value, not a key of suite.base: a key of the base would change every finished
--- sweep's run ids and definition hash; as an axis it is also a column of the results rows, so
--- each row says how many documents its accuracy counts.
suite.report_docs = 1024
function suite.report_all(p)
  p.grid = p.grid or {}
  p.grid.report_docs = { suite.report_docs }
  return p
end

--- The smoke profile every suite shares: a few steps on a few documents (the test suite runs it).
function suite.smoke(over)
  local p = { base = { steps = 20, train_docs = 640, eval_docs = 32, eval_every = 10, checkpoint_every = 10 } }
  for k, v in pairs(over or {}) do p[k] = v end
  return p
end

--- Is a results row of this preset's task (the task column reads "pcfg_5_20-t42[-numpy]")?
function suite.task_is(r, preset)
  local t = tostring(r.task)
  return t == preset or t:sub(1, #preset + 1) == preset .. "-"
end

--- Mamba's short-conv width (the results leave the default, 4, empty).
function suite.mamba_conv(r) return r.d_conv or 4 end

return suite
