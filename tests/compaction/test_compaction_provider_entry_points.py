"""
Compaction providers from installed packages: ``CompactionProviderRegistry.from_entry_points`` (entry point
group ``sessionkeeper.compaction_providers``). The CLI's ``compact --provider`` on a really installed one:
``tests/cli/test_cli_compact_providers.py``.
"""

from __future__ import annotations

import sys
import types
from importlib.metadata import EntryPoint

import pytest

from sessionkeeper.compaction import ENTRY_POINT_GROUP, CompactionProviderRegistry, SummaryRequest
from sessionkeeper.compaction import _providers as providers_module
from sessionkeeper.exceptions import DuplicateProviderError, ProviderError


class _Plugin:
    def __init__(self, provider_id: str) -> None:
        self.id = provider_id
        self.label = f"plugin {provider_id}"

    async def summarize(self, request: SummaryRequest) -> str:
        return f"## Goal\nsummary by {self.id} of {len(request.messages)} messages"


@pytest.fixture
def plugin_module(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    module = types.ModuleType("sk_test_plugin")
    module.instance = _Plugin("from-instance")  # type: ignore[attr-defined]
    module.factory = lambda: _Plugin("from-factory")  # type: ignore[attr-defined]
    module.other = _Plugin("from-instance")  # type: ignore[attr-defined]

    class PluginClass(_Plugin):
        def __init__(self) -> None:
            super().__init__("from-class")

    module.PluginClass = PluginClass  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sk_test_plugin", module)
    return module


def _points(monkeypatch: pytest.MonkeyPatch, **values: str) -> None:
    points = [EntryPoint(name=name, value=value, group=ENTRY_POINT_GROUP) for name, value in values.items()]

    def fake(*, group: str) -> list[EntryPoint]:
        return points if group == ENTRY_POINT_GROUP else []

    monkeypatch.setattr(providers_module, "entry_points", fake)


def test_instances_and_factories_are_registered_under_their_ids(
    monkeypatch: pytest.MonkeyPatch, plugin_module: types.ModuleType
) -> None:
    _points(
        monkeypatch, b="sk_test_plugin:factory", a="sk_test_plugin:instance", c="sk_test_plugin:PluginClass"
    )
    registry = CompactionProviderRegistry.from_entry_points()
    assert registry.ids() == ("from-instance", "from-factory", "from-class")  # entry point name order
    assert isinstance(registry.require("from-class"), _Plugin)  # a class is instantiated


def test_two_entry_points_with_one_id_name_the_first_owner(
    monkeypatch: pytest.MonkeyPatch, plugin_module: types.ModuleType
) -> None:
    _points(monkeypatch, first="sk_test_plugin:instance", second="sk_test_plugin:other")
    with pytest.raises(DuplicateProviderError, match="owner: first"):
        CompactionProviderRegistry.from_entry_points()


def test_a_broken_entry_point_is_a_provider_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    _points(monkeypatch, broken="sk_no_such_module_here:provider")
    with pytest.raises(ProviderError, match="'broken'"):
        CompactionProviderRegistry.from_entry_points()
