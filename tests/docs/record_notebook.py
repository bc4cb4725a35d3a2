"""Record a GPU notebook's outputs on the machine that has the GPU, labelled with where they came from.

The docs build executes every notebook, except the ones that carry recorded outputs: those are
rendered as committed. Run this on the GPU machine for each notebook marked ``"gdsstore": {"gpu": true}``:

    python tests/docs/record_notebook.py docs/notebooks/xarray-on-gpu.ipynb --machine "one NVIDIA H200, ..."

It executes the notebook (in its own directory, on this interpreter's kernel), keeps the outputs, writes
``metadata.gdsstore.outputs_recorded_on`` (machine, date, gdsstore version) and puts a note saying so
after the notebook's title. ``--clear`` undoes it (outputs, note and metadata), after which the docs
build executes the notebook again.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path
from typing import Any

RECORDED_KEY = "outputs_recorded_on"  # the key docs/conf.py reads
NOTE_TAG = "gdsstore-recorded-outputs"


def note_text(record: dict[str, str]) -> str:
    """The Markdown note at the top of a notebook with recorded outputs."""
    return (
        f"> **Outputs recorded on {record['machine']}**, {record['date']} (gdsstore {record['gdsstore']}). "
        "The docs build shows them as recorded and does not re-run this notebook, which needs a GPU to "
        "show what it is about."
    )


def clear(nb: Any) -> None:
    """Remove outputs, the recorded-outputs note and the metadata key."""
    nb.cells = [c for c in nb.cells if NOTE_TAG not in c.get("metadata", {}).get("tags", [])]
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    nb.metadata.get("gdsstore", {}).pop(RECORDED_KEY, None)


def label(nb: Any, record: dict[str, str]) -> None:
    """Add the note (after the title cell) and the metadata that mark the outputs as recorded."""
    import nbformat

    note = nbformat.v4.new_markdown_cell(note_text(record), metadata={"tags": [NOTE_TAG]})
    title_first = bool(nb.cells) and nb.cells[0].cell_type == "markdown"
    nb.cells.insert(1 if title_first else 0, note)
    nb.metadata.setdefault("gdsstore", {})[RECORDED_KEY] = record


def record(path: Path, machine: str, kernel: str = "python3", timeout: int = 600) -> None:
    """Execute ``path`` here and write it back with its outputs, labelled with ``machine``."""
    import nbformat
    from nbclient import NotebookClient

    import gdsstore

    nb = nbformat.read(path, as_version=4)
    clear(nb)
    NotebookClient(
        nb, timeout=timeout, kernel_name=kernel, resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    label(nb, {"machine": machine, "date": date, "gdsstore": gdsstore.__version__})
    nbformat.write(nb, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--machine", help="where the outputs come from, e.g. 'one NVIDIA H200, 16 cores'")
    parser.add_argument("--kernel", default="python3")
    parser.add_argument("--clear", action="store_true", help="remove recorded outputs and the label")
    args = parser.parse_args(argv)
    if not args.clear and not args.machine:
        parser.error("--machine is required to record outputs (or pass --clear)")
    import nbformat

    for path in args.notebooks:
        if args.clear:
            nb = nbformat.read(path, as_version=4)
            clear(nb)
            nbformat.write(nb, path)
        else:
            record(path, args.machine, kernel=args.kernel)
        print(f"{path}: {'cleared' if args.clear else 'recorded on ' + args.machine}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
