"""The node side of envtool: what runs on every node, under the environment's own Python.

Python 3.9 syntax, standard library plus torch (imported only inside the functions that need
it), never an envtool import. envtool ships this package to a node as a tar stream and runs
``python -m envtool_node`` (or one of its modules) from a private temporary copy; envtool
itself imports the same modules in-process where it needs them (export, sizes, schema ids).

- ``node``: the one document a node answers with (export + facts + all-reduce)
- ``facts``: GPU, driver, torch, CUDA, NCCL facts; ``export`` (+ ``channels``,
  ``conda_meta``, ``site_packages``, ``yaml_emit``): ``conda env export`` without conda
- ``allreduce``, ``ddp_smoke`` (+ ``launch``, ``rank``, ``elastic``, ``perf``): what runs
  across ranks, started directly on one node and by torchrun across nodes
- ``schema``: the ids and markers envtool's reader (envtool/protocol/) relies on
"""
