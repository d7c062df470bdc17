"""Which language a question is in, and what dashcam says about it.

dashcam reads English and Chinese (Traditional or Simplified, alone or mixed with English terms: chinese.py).

- ``not_understood(question)``: one line saying the question's language is not one dashcam reads, and what it
  reads, for a question mostly in another script (Japanese kana, Korean Hangul, Cyrillic, Greek, Arabic,
  Hebrew, Thai, Devanagari: more of its letters than Latin ones; any kana is Japanese) or Chinese with no
  word of chinese.py's table beyond question words; else None. The offline answer is then that line, never
  another question's answer (the CLI exits 0, as for any question it cannot place).
- ``offline_note(question)``: for a Chinese question, the first line of the offline answer, in the question's
  script and in English: the answer is in English.
- ``reply_language(question)``: for a Chinese question, the LLM mode's hint to answer in Chinese, in the
  question's script (the model reads the question itself; the profile's text stays data).
"""
from __future__ import annotations

import re

from .han import has_chinese

SCRIPTS = (  # (language, letters); kana first: Japanese mixes kana with Chinese characters
    ("Japanese", re.compile(r"[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f]")),
    ("Korean", re.compile(r"[\uac00-\ud7af\u1100-\u11ff\u3130-\u318f]")),
    ("Russian or another Cyrillic-script language", re.compile(r"[\u0400-\u04ff]")),
    ("Greek", re.compile(r"[\u0370-\u03ff\u1f00-\u1fff]")),
    ("Arabic or another Arabic-script language", re.compile(r"[\u0600-\u06ff\u0750-\u077f]")),
    ("Hebrew", re.compile(r"[\u0590-\u05ff]")),
    ("Thai", re.compile(r"[\u0e00-\u0e7f]")),
    ("Hindi or another Devanagari-script language", re.compile(r"[\u0900-\u097f]")),
)
LATIN = re.compile(r"[A-Za-z]")
READS = ('dashcam reads questions in English and in Chinese (Traditional or Simplified), for example '
         '"which kernel takes the most time?" or "哪個 kernel 最耗時?"')
NOTE_TRADITIONAL = "（以下以英文回答：離線模式只用英文作答。）Answering in English: offline answers are in English."
NOTE_SIMPLIFIED = "（以下以英文回答：离线模式只用英文作答。）Answering in English: offline answers are in English."


def foreign_script(question: str) -> str | None:
    """The language of a question mostly written in a script dashcam does not read (module docstring)."""
    latin = len(LATIN.findall(question))
    for name, letters in SCRIPTS:
        n = len(letters.findall(question))
        if n and (name == "Japanese" or n >= latin):
            return name
    return None


def _chinese():
    """chinese.py, imported for a question with Chinese characters only (han.py)."""
    from . import chinese

    return chinese


def not_understood(question: str) -> str | None:
    """One line for a question in a language dashcam does not read, else None (module docstring)."""
    name = foreign_script(question or "")
    if name:
        return f"dashcam does not understand questions in {name}. {READS}."
    if has_chinese(question) and not _chinese().translate(question).content:
        head = "dashcam 看不懂這個問題" if _chinese().is_traditional(question) else "dashcam 看不懂这个问题"
        return (f"{head}: no word of this Chinese question names something dashcam measures (GPU idle time, "
                f"kernels, copies, synchronization, launches, NCCL, NVTX ranges, steps, memory). {READS}.")
    return None


def offline_note(question: str) -> str | None:
    """The offline answer's first line for a Chinese question (module docstring), else None."""
    if not has_chinese(question):
        return None
    return NOTE_TRADITIONAL if _chinese().is_traditional(question) else NOTE_SIMPLIFIED


def reply_language(question: str) -> str | None:
    """The LLM hint on the reply's language for a Chinese question (module docstring), else None."""
    if not has_chinese(question):
        return None
    script = "Traditional" if _chinese().is_traditional(question) else "Simplified"
    return (f"The question is in Chinese: write the answer in Chinese ({script} characters, as the question is), "
            "keeping kernel, API and NVTX names and every number and unit exactly as the tool results give them.")
