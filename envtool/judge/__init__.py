"""Pure judgement: typed reports in, Findings out; no I/O, no text.

``findings`` (kinds, severities, the exit code), ``packages`` (environment vs environment),
``consensus`` (nodes vs each other), ``gpu`` (CUDA, driver, all-reduce), ``verdict`` (all of
it over a verify run).
"""
