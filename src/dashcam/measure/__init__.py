"""The measurement primitives: the definitions every number rests on (window, busy, gap,
percentage), interval unions and gaps on them, and kernel / NVTX name handling."""
