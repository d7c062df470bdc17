"""``python -m dashcam``: the same command line as ``dashcam``."""
from dashcam.cli import main

main()
