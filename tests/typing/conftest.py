"""
``tests/typing/`` is type-checked, never run: keep pytest from collecting it.

mypy (``files`` in pyproject.toml) and pyright (``[tool.pyright]``, strict here) check these modules.
"""

from __future__ import annotations


collect_ignore_glob: list[str] = ["*.py"]
