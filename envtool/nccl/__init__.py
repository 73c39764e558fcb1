"""nccl-tests' all-reduce results: the data (``model``) and real logs read into it (``parse``)."""
