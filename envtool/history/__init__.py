"""The fleet over time: the history store, each finding's life on a host, metrics."""
