"""
Run one benchmark: ``python -m benchmarks <name> [args...]`` runs ``benchmarks/bench_<name>.py``'s
``main()`` with ``args`` as its command line (``python -m benchmarks`` alone lists the benchmarks).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path


def _available() -> list[str]:
    here = Path(__file__).resolve().parent
    return sorted(p.stem.removeprefix("bench_") for p in here.glob("bench_*.py"))


def main(argv: list[str] | None = None) -> int:
    """Dispatch to ``benchmarks.bench_<name>.main``; returns the exit status."""
    args = sys.argv[1:] if argv is None else argv
    names = _available()
    if not args or args[0] in ("-h", "--help"):
        print("usage: python -m benchmarks <name> [args...]\navailable: " + ", ".join(names))
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name not in names:
        print(f"unknown benchmark {name!r}; available: {', '.join(names)}", file=sys.stderr)
        return 2
    module = importlib.import_module(f"benchmarks.bench_{name}")
    sys.argv = [f"benchmarks {name}", *rest]
    result = module.main()
    return int(result) if isinstance(result, int) else 0


if __name__ == "__main__":
    raise SystemExit(main())
