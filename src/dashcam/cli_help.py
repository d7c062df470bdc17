"""What ``dashcam ... --help`` shows beyond the options: examples for every command, flags shown as flags.

:data:`EXAMPLES` is the one list of example invocations (the README's among them: tests/test_output.py
checks both that every command has one and that each parses against the command's options).
"""
from __future__ import annotations

EXAMPLES: dict[str, list[str]] = {  # command path ("" for dashcam itself) -> invocations
    "": ['dashcam ask "why is GPU 1 idle?" examples/demo.sqlite', "dashcam summary run.sqlite",
         "dashcam diff before.sqlite after.sqlite", "dashcam --version",
         "dashcam --nsys /opt/nvidia/nsight-systems/2024.2.3/bin/nsys summary run.nsys-rep"],
    "tool": ["dashcam tool list", "dashcam tool run overview run.sqlite"],
    "cache": ["dashcam cache list", "dashcam cache clear --older-than 30"],
    "ask": ['dashcam ask "why is GPU 1 idle?" examples/demo.sqlite',
            'dashcam ask "why is GPU 1 idle after 50 ms?" run.sqlite --json',
            'dashcam ask "第二張卡為什麼閒置?" run.sqlite'],
    "chat": ["dashcam chat run.sqlite", "dashcam chat runs/ --offline"],
    "info": ["dashcam info run.sqlite", "dashcam info run.nsys-rep --format json"],
    "cache list": ["dashcam cache list", "dashcam cache list --in ~/runs --format csv"],
    "cache clear": ["dashcam cache clear run.sqlite", "dashcam cache clear --older-than 30",
                    "dashcam cache clear --all --in ~/runs --json"],
    "cache info": ["dashcam cache info run.sqlite", "dashcam cache info run.sqlite --json"],
    "tool list": ["dashcam tool list", "dashcam tool list --json"],
    "tool run": ["dashcam tool run gpu_gaps run.sqlite --gpu 1 --start 50 --end 120",
                 "dashcam tool run launch_latency run.sqlite -a kernel=gemm",
                 'dashcam tool run sql run.sqlite -a query="SELECT device_id, count(*) FROM kernels GROUP BY 1"',
                 "dashcam tool run top_kernels run.sqlite --format csv",
                 "dashcam tool run top_kernels run.sqlite --format markdown"],
    "summary": ["dashcam summary run.sqlite", "dashcam summary run.sqlite --format markdown",
                "dashcam summary run.sqlite --picture gap.svg"],
    "fleet": ["dashcam fleet runs/", "dashcam fleet 'runs/report_*.sqlite' --format markdown",
              "dashcam fleet runs/ --scheduler tcp://10.0.0.5:8786", "dashcam fleet runs/ --workers 1 --format csv"],
    "diff": ["dashcam diff before.sqlite after.sqlite", "dashcam diff before.sqlite after.sqlite --fail-on-regression",
             "dashcam diff before.sqlite after.sqlite --format csv",
             "dashcam diff before.sqlite after.sqlite --format markdown --threshold 2",
             "dashcam diff before.sqlite after.sqlite --min-shared 80"],
    "pr-comment": ["dashcam pr-comment after.sqlite --baseline before.sqlite --dry-run",
                   "dashcam pr-comment after.sqlite --baseline before.sqlite --repo octo-org/octo-repo --pr 42"],
    "eval": ["dashcam eval --offline", "dashcam eval --replay", "dashcam eval --model qwen --json"],
    "timeline": ["dashcam timeline run.sqlite --gpu 1 --around gap", "dashcam timeline run.sqlite -o timeline.svg",
                 "dashcam timeline run.sqlite --around gap -o gap.png"],
    "record": ["dashcam record --goal cpu -o run -- python train.py",
               "dashcam record --goal memory --duration 60 -- ./solver input.dat",
               'dashcam record --ask "why is the GPU idle?" -- python train.py',
               "dashcam --nsys /opt/nvidia/nsight-systems/2024.2.3/bin/nsys record -- ./app"],
    "mcp": ["dashcam mcp", "dashcam mcp --http --host 127.0.0.1 --port 8765 --root ~/profiles"],
}


def epilog(command: str) -> str:
    """The examples of ``command`` as the help's last section, one per line (click's ``\\b`` keeps the paragraph
    from being rewrapped)."""
    return "\n".join(["\b", "Examples:", *("  " + x for x in EXAMPLES[command])])


def add_examples(app, prefix: str = "") -> None:
    """Give ``app``, its commands and its sub-apps their examples; one without any is a KeyError."""
    app.info.epilog = epilog(prefix)
    for info in app.registered_commands:
        name = info.name or info.callback.__name__.replace("_", "-")
        info.epilog = epilog((prefix + " " + name).strip())
    for group in app.registered_groups:
        add_examples(group.typer_instance, (prefix + " " + group.name).strip())


def show_flags_as_flags() -> None:
    """typer's rich help shows every option's type, a flag's too (``--json <bool>``, ``--help <bool>``), though a
    flag takes no value: show none for flags. (typer before 0.29 has no such hook and shows no type for flags.)"""
    from typer.core import TyperOption

    shown = getattr(TyperOption, "display_type_rich", None)
    if shown is None or getattr(shown, "_dashcam", False):
        return

    def display_type_rich(self, ctx):
        return None if self.is_flag else shown(self, ctx)

    display_type_rich._dashcam = True
    TyperOption.display_type_rich = display_type_rich
