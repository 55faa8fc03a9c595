"""`orchestrator layout print LAYOUT --out FILE.(svg|pdf|png) [--paper A4|A3]`: a 1:1 template."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "layout tools: `layout print` writes a 1:1 printable template (SVG, PDF or PNG) to tape to the table"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="layout_action", required=True, metavar="ACTION",
                                    parser_class=type(parser))
    printer = actions.add_parser(
        "print", help="write a 1:1-scale printable template of a layout",
        description="Write a 1:1-scale printable template of a layout: every mark as the cube "
                    "footprint with a centre cross and its id, the camera's fiducials (ArUco markers "
                    "that `orchestrator camera check` reads), the robot base outline, a 10 cm scale "
                    "bar and crop marks. Several pages (with overlap strips and registration "
                    "crosses) if the layout does not fit one sheet. SVG and PNG (300 dpi) output write one file "
                    "per page (FILE.svg, FILE-2.svg, ...); PDF output writes one multi-page file. Print "
                    "at 100 % (actual size) and check the scale bar with a ruler.")
    printer.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                         help="show tracebacks on errors")
    printer.add_argument("layout", help="layout YAML file (e.g. layouts/grid20.yaml)")
    printer.add_argument("--out", required=True, help="output file, .svg, .pdf or .png")
    printer.add_argument("--paper", type=str.upper, choices=["A4", "A3"], default="A4",
                         help="paper size (default A4)")
    printer.add_argument("--with-base", action="store_true",
                         help="tile the sheets so the whole robot base outline is printed too")


def run(args: argparse.Namespace) -> int:
    from orchestrator.design.protocol import load_layout
    from orchestrator.design.template import check_output, write_template

    out = Path(args.out)
    check_output(out)                       # fail fast, before reading the layout
    layout, _ = load_layout(Path(args.layout))
    written = write_template(layout, out, paper=args.paper, with_base=args.with_base)
    pages = "1 page" if len(written) == 1 else f"{len(written)} files"
    if out.suffix.lower() == ".pdf":
        from orchestrator.design.template import plan_pages

        n = len(plan_pages(layout, args.paper, args.with_base))
        pages = f"{n} page{'s' if n != 1 else ''}"
    print(f"{args.layout}: wrote {', '.join(str(p) for p in written)} ({pages}, {args.paper}, 1:1; "
          "print at 100 % and check the 10 cm scale bar)")
    return 0
