"""Prompt texts shipped as package data."""
from importlib.resources import files


def load(name: str) -> str:
    """The text of ``prompts/<name>.txt``."""
    return files(__name__).joinpath(f"{name}.txt").read_text(encoding="utf-8")
