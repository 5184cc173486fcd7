#!/usr/bin/env python3
"""Prints, as JSON, the shape the Khronos reference parser (`pip install nnef`) infers for
every tensor of each NNEF model given on the command line: {path: {tensor: shape}} or
{path: {"error": message}}. Used by nnefc's differential shape test; it computes nothing
of its own."""
import json
import sys

import nnef


def shapes(path):
    try:
        graph = nnef.load_graph(path, load_variables=False)
        nnef.infer_shapes(graph)
    except Exception as e:  # the reference rejects the document: report, do not fail
        return {"error": str(e).splitlines()[0] if str(e) else type(e).__name__}
    return {name: list(t.shape) for name, t in graph.tensors.items() if t.shape is not None}


print(json.dumps({p: shapes(p) for p in sys.argv[1:]}))
