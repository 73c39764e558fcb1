"""``envtool collect``'s stage: what a job left on this node, gathered into one folder per
job on a shared path (``DEST/JOBID/HOST``, docs/commands/collect.md) before it is lost."""
