"""Writes trace_instrument/engine/neighbours.json: each shipped anchor's neighbourhood in verl 0.9.0,
and attribute_reads.json: the statements of each point's scope reading an attribute of self its code reads;
the release the corpus of refactors starts from (one of the catalog's validated releases).

    python tools/anchor_neighbours.py        # after changing an anchor of anchors/*.yaml
"""

from __future__ import annotations

import json

from trace_instrument.engine.neighbours import ATTRIBUTE_READS, DATA, measured, measured_attribute_reads
from trace_instrument.spec import load_catalog
from trace_instrument.wheels import verl_tree

RELEASE = "0.9.0"


def main() -> None:
    catalog = load_catalog()
    found = measured(verl_tree(RELEASE), catalog)
    DATA.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{DATA}: {len(found)} points")
    read = measured_attribute_reads(verl_tree(RELEASE), catalog)
    ATTRIBUTE_READS.write_text(json.dumps(read, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{ATTRIBUTE_READS}: {len(read)} points")


if __name__ == "__main__":
    main()
