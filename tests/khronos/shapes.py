#!/usr/bin/env python3
"""Prints the shape the Khronos reference parser (`pip install nnef`) infers for every
tensor of each NNEF model given on the command line, one tab-separated line per tensor:
`path<TAB>name<TAB>d0,d1,...`, or `path<TAB>!error<TAB>message` when the reference rejects
the model. Used by nnefc's differential shape test (tests/all/khronos.rs); it computes
nothing of its own."""
import sys

import nnef

for path in sys.argv[1:]:
    try:
        graph = nnef.load_graph(path, load_variables=False)
        nnef.infer_shapes(graph)
    except Exception as e:  # the reference rejects the document: report it, go on
        msg = (str(e).splitlines() or [type(e).__name__])[0]
        print(f"{path}\t!error\t{msg}")
        continue
    for name, t in sorted(graph.tensors.items()):
        if t.shape is not None:
            print(f"{path}\t{name}\t{','.join(str(d) for d in t.shape)}")
