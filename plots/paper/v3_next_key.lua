-- v3 (spec §9.2): does Mamba's short conv carry the key to the next key's position? Box plots
-- of Attrib at layer 0 by conv width, with the key corrupted: rows the positions patched (the
-- next key, 2q + 3; the key; the value; the query), columns the mixer output and the block
-- output; every run passing the 0.01 filter. v3: restoring the next key at layer 0 restores
-- the most. Mixer-internal sites (the conv output itself) are not in the sweeps' evaluation;
-- `ic.evaluate(model, data, {mixer_sites = true})` patches them on a report checkpoint
-- (docs/interventions.md).
--   mechlab plots/paper/v3_next_key.lua DIR [OUT.png]
local paper = require "mech.paper"

local recipe = { id = "v3_next_key", sweeps = { "ar", "mamba_conv" }, title = "v3: Mamba, layer 0: the next key against the key" }

function recipe.draw(dirs, out)
  local rows = paper.rows(dirs, { "ar", "mamba_conv" })
  local function mamba(r) return r.arch == "mamba" and not r.pos_emb end
  return paper.attrib_boxes({
    { title = "mixer output", rows = rows, where = mamba, component = "attention_output" },
    { title = "block output", rows = rows, where = mamba, component = "block_output" },
  }, { "next_key", "key", "value", "query" }, out, {
    title = "Mamba, AR, key corrupted, layer 0", group = paper.mamba_conv, name = function(k) return "conv " .. k end,
    style = paper.conv_style, counts = true, alpha = 0.6,
    caption = "runs passing the 0.01 filter at the panel's site (n per kernel); fewer than 5 runs: their points, shape by width d",
    label = function(pos, st) return paper.attrib_label(pos, 0, st.component) end, width = 560, height = 820 })
end

if select("#", ...) > 0 then paper.main(recipe, ...) end
return recipe
