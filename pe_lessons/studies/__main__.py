"""``python -m pe_lessons.studies NAME [--out FILE]``: run a study and write its results file."""

from __future__ import annotations

import argparse
import sys

from . import STUDIES, module, results_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pe_lessons.studies", description=__doc__)
    parser.add_argument("name", choices=sorted(STUDIES), help="the study to run")
    parser.add_argument("--out", help="where to write the CSV (default: the package's results file)")
    args = parser.parse_args(argv)
    frame = module(args.name).run()
    out = args.out or results_path(args.name)
    frame.to_csv(out, index=False)
    print(f"{len(frame)} rows written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
