"""Pin: environment.yml (``spec``) solved (``solve``, ``condalock``, ``pip_lock``) into the
conda-lock v1 file (``lockfile``) by ``pin``, then installed into a prefix (``install``);
``prefixes`` knows where an environment lives."""
