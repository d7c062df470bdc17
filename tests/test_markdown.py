"""The one markdown escaper (dashcam.text.markdown): profile text into PR comments, inert."""
from __future__ import annotations

from dashcam.text.markdown import cell, inline

HOSTILE = "evil|kernel`<img src=x onerror=alert(1)>\n| col | a&b \\|"


def test_a_cell_is_one_line_with_its_pipes_escaped():
    c = cell(HOSTILE)
    assert "\n" not in c
    assert c.replace("\\|", "").count("|") == 0  # no pipe left to split the table row
    assert "<" not in c and ">" not in c and "&lt;img" in c and "&amp;" in c


def test_a_code_cell_keeps_the_text_verbatim_but_inert():
    c = cell(HOSTILE, code=True)
    assert c.startswith("`` ") and c.endswith(" ``")  # the text holds a backtick: a double-backtick span
    assert c.replace("\\|", "").count("|") == 0
    assert "<img src=x onerror=alert(1)>" in c  # inside a code span HTML is shown, not run
    assert cell("gemm<float>|x", code=True) == "`gemm<float>\\|x`"


def test_inline_text_is_one_line():
    assert inline("a\nb  c") == "a b c"
    assert inline("x`y", code=True) == "`` x`y ``"
    assert inline("<b>") == "&lt;b&gt;"
