"""``envtool doctor``: the ordered checks of this machine (``run``), each step composed from
the stages that do the work (``steps``)."""
