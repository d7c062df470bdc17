"""Whether text has Chinese characters, and the English words of text that has them.

chinese.py (its word tables, OpenCC, jieba) is imported only for text with Chinese characters: an English
question never loads it (issue 29: a warm command imports only what it runs).
"""
from __future__ import annotations

import re

HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def has_chinese(text: str) -> bool:
    return bool(HAN.search(text or ""))


def to_english(text: str) -> str:
    """chinese.to_english for text with Chinese characters; any other text as it is."""
    if not has_chinese(text):
        return text
    from .chinese import to_english as translated

    return translated(text)
