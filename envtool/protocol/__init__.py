"""The node protocol: every schema id, what a node's answer means, and the verify report.

- ``schemas``: the ids (the node's own come from envtool_node/schema.py), the node script's
  exit codes, the size cap
- ``types``: frozen dataclasses for what a node reports and for one host's outcome
- ``documents``: the one reader of every document a node prints (node, facts, all-reduce,
  export, DDP smoke test), validated where it is read
- ``answers``: a node's exit code, streams and document → a typed ``HostReport``
- ``verify_report``: the writer and the reader of ``envtool verify --format json``

Nothing else in envtool parses node JSON.
"""
