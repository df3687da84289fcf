--- The paper's constants (spec: docs/reproduction.md, "The suites"), shared by the sweep files
--- under experiments/paper/ and the figure recipes under plots/paper/.
local paper = {}

paper.widths = { 16, 32, 64, 128, 256 }
paper.lr5 = { 3e-5, 1e-4, 3e-4, 1e-3, 3e-3 }
paper.lr7 = { 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2 }
paper.extra_lrs = { 1e-2, 3e-2 }
paper.archs = { "attention", "hyena", "base_conv", "based", "h3", "mamba" }
paper.seed = 42

-- AR (16 epochs of 100,032 documents: T = 50,016, reported at 50,000) and ATR (32 epochs:
-- T = 100,032, reported at 100,000). Evaluation on 320 documents every 200 steps.
function paper.base(task, over)
  local b = {
    task = task, model = { n_layers = 2 }, train_docs = 100032, batch_size = 32, eval_docs = 320, eval_batch = 64,
    epochs = task == "ar_32" and 16 or 32, schedule = "cosine", warmup = 0.1, eval_every = 200, seed = paper.seed,
    checkpoint_every = 1000,
  }
  for k, v in pairs(over or {}) do b[k] = v end
  return b
end

-- The interchange evaluation the figures read: the key corrupted (label query_item_orig), every
-- component and layer, at the reported step.
paper.interchange = { kind = "interchange", at = "report", label_types = { "query_item_orig" } }

-- Learned positions for Attention only (the paper's intent, and its main curves).
function paper.pe_for_attention(c)
  c.pos_emb = c.arch == "attention"
end

-- The names of the layer-1 block-input attributions the paper plots (spec §6.7).
function paper.attrib_label(position, layer, component)
  local pos = ({ value = "target_item_orig", key = "query_item_orig", query = "query_item" })[position] or position
  return string.format("%d.KEY.query_item_orig.%s.%s", layer or 1, pos, component or "block_input")
end

return paper
