"""The only place that prints: tables, JSON, JUnit, plots, the nccl-tests text layout, and
the words of every finding (``labels``)."""
