"""envtool: pin, build, probe and verify PyTorch DDP environments across GPU nodes."""

__version__ = "0.1.0"
