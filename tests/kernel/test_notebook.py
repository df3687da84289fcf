"""Notebooks through Debian's nbclient on the mechlab kernel (docs/notebook.md): the example
experiments/first_steps.ipynb runs without an error and shows a valid PNG (the patching map)
and the attention viewer as text/html (the attention model's and the Mamba model's implicit
attention); a test notebook's error cell carries its ename and Lua traceback and the cells after
it still run. Run by ctest: python3 test_notebook.py build/mechlab."""
import base64
import os
import sys

import nbformat
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernelspec  # noqa: E402
from test_kernel import valid_png  # noqa: E402

check = kernelspec.check


def outputs(nb):
    return [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]


def main():
    mechlab = kernelspec.mechlab_from_argv()
    root = kernelspec.install(mechlab)
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "..", "experiments", "first_steps.ipynb")
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, kernel_name="mechlab", timeout=600, resources={"metadata": {"path": root}}).execute()
    outs = outputs(nb)
    check(not [o for o in outs if o.output_type == "error"], "first_steps.ipynb runs without an error")
    pngs = [base64.b64decode(o.data["image/png"]) for o in outs if "image/png" in o.get("data", {})]
    check(pngs and all(valid_png(p) for p in pngs), "first_steps.ipynb: the patching map is a valid image/png (%d)" % len(pngs))
    htmls = [o.data["text/html"] for o in outs if "text/html" in o.get("data", {})]
    check(len(htmls) == 2 and "blocks.1" in htmls[0] and "Mamba" in htmls[1], "first_steps.ipynb: the viewer inline, twice")
    check(any("mech.Cache" in o.get("data", {}).get("text/plain", "") for o in outs), "first_steps.ipynb: the cache as text")

    cells = ["local a = 1\nb = a + 1", "b", "local function f() error('deliberate') end\nf()", "b * 10", "while false do"]
    test_nb = new_notebook(cells=[new_code_cell(c) for c in cells])
    test_nb.metadata["kernelspec"] = {"name": "mechlab", "display_name": "mechlab", "language": "lua"}
    NotebookClient(test_nb, kernel_name="mechlab", timeout=120, allow_errors=True).execute()
    c = test_nb.cells
    check(c[1].outputs and c[1].outputs[0].data["text/plain"] == "2", "a test notebook: state across cells")
    err = [o for o in c[2].outputs if o.output_type == "error"]
    check(err and err[0].ename == "LuaError" and "deliberate" in err[0].evalue and
          any("in local 'f'" in line or "in function 'f'" in line for line in err[0].traceback) and
          any("In[3]:2: in main chunk" in line for line in err[0].traceback),
          "an error cell's ename, evalue and traceback: %s" % (err and err[0].traceback))
    check(c[3].outputs and c[3].outputs[0].data["text/plain"] == "20", "the cells after an error run")
    err = [o for o in c[4].outputs if o.output_type == "error"]
    check(err and err[0].ename == "SyntaxError", "an unfinished cell is a syntax error")
    reports = kernelspec.sanitizer_reports(root)
    check(not reports, "no sanitizer report" + ("".join("\n" + r[:3000] for r in reports)))
    kernelspec.finish()


if __name__ == "__main__":
    main()
