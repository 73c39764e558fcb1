"""One module per command, each with ``run(...) -> int``: take typed options, call the stage,
hand the result to report/, return the exit code. They parse nothing (cli/ does) and catch
nothing (cli/ maps exceptions to exit codes)."""
