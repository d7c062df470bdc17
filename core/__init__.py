"""dashcam: ask an NVIDIA Nsight Systems profile what went wrong."""

__version__ = "0.1.0"
