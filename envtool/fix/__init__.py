"""``envtool fix``: drifted prefixes back to their lock, in generations switched atomically."""
