"""Reaching the nodes: ``hosts`` (names and node sets, validated), ``proc`` (the only place
processes start), ``bundle`` (the node package as it travels), ``nodescript`` (the sh a node
runs), ``transports`` (ssh, local, docker argv), ``fanout`` (bounded, with deadlines),
``slurm`` (one srun step), ``survey`` (every host asked, every answer read)."""
