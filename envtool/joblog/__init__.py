"""A failed job's output as people have it: read line by line with a bound (``stream``),
launcher prefixes off and each line attributed to a host and rank (``origin``), each line
classified (``signs``), a file summed up in one pass (``scan``). Pure but for ``stream``,
which reads the binary stream it is given."""
