"""
Pluggable compaction providers (OpenClaw spec §5.10) and their registry.

A provider turns messages into a summary body. The registry is a plain object handed to the
:class:`~sessionkeeper.compaction.Compactor` (no process-global state, STYLE item 10). As OpenClaw's
plugin API does, the **first registration of an id wins**: a second one raises
:class:`~sessionkeeper.exceptions.DuplicateProviderError`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from importlib.metadata import entry_points
from typing import Protocol, cast, runtime_checkable

import anyio
import attrs

from sessionkeeper.compaction._settings import IdentifierPolicy
from sessionkeeper.exceptions import DuplicateProviderError, ProviderError, UnknownProviderError
from sessionkeeper.records import AgentMessage


__all__ = ("ENTRY_POINT_GROUP", "CompactionProvider", "CompactionProviderRegistry", "SummaryRequest")

ENTRY_POINT_GROUP = "sessionkeeper.compaction_providers"
"""The entry point group that plugin packages declare their compaction providers in."""


def _to_messages(items: Iterable[AgentMessage]) -> tuple[AgentMessage, ...]:
    return tuple(items)


@attrs.frozen(kw_only=True)
class SummaryRequest:
    """
    What a provider is asked to summarise (OpenClaw's ``summarize(params)``, spec §5.10).

    Attributes:
        messages: The messages to summarise: the history, then the split turn's prefix.
        previous_summary: The previous compaction's summary, if any (re-distil it).
        custom_instructions: The structured instructions (required headings, identifier rule,
            ``/compact`` text), ready to use.
        identifier_policy: ``"strict" | "off" | "custom"``.
        identifier_instructions: Operator text of the ``custom`` policy.
        compression_ratio: Wanted summary size as a share of the input, when the host sets one.
        abort: Set when the caller aborts; a provider should stop and raise.
    """

    messages: tuple[AgentMessage, ...] = attrs.field(converter=_to_messages)
    previous_summary: str | None = None
    custom_instructions: str | None = None
    identifier_policy: IdentifierPolicy = "strict"
    identifier_instructions: str | None = None
    compression_ratio: float | None = None
    abort: anyio.Event | None = attrs.field(default=None, eq=False)


@runtime_checkable
class CompactionProvider(Protocol):
    """
    **Protocol:** a summariser plugged in by id (OpenClaw's ``registerCompactionProvider``).

    Attributes:
        id: Unique id; settings select it with ``agents.defaults.compaction.provider``.
        label: Human-readable name.

    An empty (or blank) result, or any exception, makes the compactor fall back to the built-in LLM
    summariser, then to the extractive one (DESIGN D3). Cancellation, a set ``abort`` and
    ``TimeoutError`` propagate instead: they never fall back.
    """

    @property
    def id(self) -> str:
        """The provider id."""
        ...

    @property
    def label(self) -> str:
        """A human-readable name."""
        ...

    async def summarize(self, request: SummaryRequest) -> str:
        """
        Return the summary body for ``request`` (headings, identifiers; the compactor adds the suffix).

        Args:
            request: The :class:`SummaryRequest`.

        Returns:
            The summary text; empty means "no result".
        """
        ...


class CompactionProviderRegistry:
    """
    Compaction providers by id (OpenClaw spec §5.10, plugin-API semantics).

    ``register`` refuses a provider without an id or without ``summarize``
    (:class:`~sessionkeeper.exceptions.ProviderError`), and a duplicate id
    (:class:`~sessionkeeper.exceptions.DuplicateProviderError`; the first registration wins).
    """

    __slots__ = ("_owners", "_providers")

    def __init__(self) -> None:
        self._providers: dict[str, CompactionProvider] = {}
        self._owners: dict[str, str | None] = {}

    def register(self, provider: CompactionProvider, *, owner: str | None = None) -> Callable[[], None]:
        """
        Register ``provider`` under its id.

        Args:
            provider: The provider.
            owner: Who registered it (a plugin id), reported in duplicate errors.

        Returns:
            A function that unregisters this provider (idempotent).

        Raises:
            ProviderError: ``provider.id`` is missing or blank, or it has no ``summarize``.
            DuplicateProviderError: The id is already registered.
        """
        provider_id = getattr(provider, "id", None)
        if not isinstance(provider_id, str) or not provider_id.strip():
            raise ProviderError("compaction provider registration missing id")
        if not callable(getattr(provider, "summarize", None)):
            raise ProviderError(f'compaction provider "{provider_id}" registration missing summarize')
        if provider_id in self._providers:
            owner_name = self._owners.get(provider_id) or "unknown"
            raise DuplicateProviderError(
                f"compaction provider already registered: {provider_id} (owner: {owner_name})"
            )
        self._providers[provider_id] = provider
        self._owners[provider_id] = owner

        def unregister() -> None:
            if self._providers.get(provider_id) is provider:
                self.unregister(provider_id)

        return unregister

    @classmethod
    def from_entry_points(cls, *, group: str = ENTRY_POINT_GROUP) -> CompactionProviderRegistry:
        """
        A registry holding the providers that installed packages declare as entry points.

        A plugin package declares, in its ``pyproject.toml``::

            [project.entry-points."sessionkeeper.compaction_providers"]
            my-summary = "my_plugin:provider"

        where ``my_plugin.provider`` is a :class:`CompactionProvider`, or a class or other callable
        with no arguments that returns one. Entry points are loaded in name order; the entry point's
        name is the owner reported on duplicates. The CLI's ``compact --provider ID`` selects among these.

        Args:
            group: The entry point group (default ``"sessionkeeper.compaction_providers"``).

        Raises:
            ProviderError: An entry point cannot be imported, or gives no valid provider (names it).
            DuplicateProviderError: Two entry points give one id (the first, in name order, wins).
        """
        registry = cls()
        for point in sorted(entry_points(group=group), key=lambda ep: ep.name):
            try:
                loaded = point.load()
                is_instance = not isinstance(loaded, type) and callable(getattr(loaded, "summarize", None))
                # entry points are untyped: the registry checks the shape in register()
                provider = cast("CompactionProvider", loaded if is_instance else loaded())
            except Exception as err:
                raise ProviderError(
                    f"compaction provider entry point {point.name!r} ({point.value}) failed to load: {err}"
                ) from err
            registry.register(provider, owner=point.name)
        return registry

    def unregister(self, provider_id: str) -> bool:
        """Remove the provider with this id; ``True`` if one was registered."""
        self._owners.pop(provider_id, None)
        return self._providers.pop(provider_id, None) is not None

    def get(self, provider_id: str) -> CompactionProvider | None:
        """The provider registered under ``provider_id``, or ``None``."""
        return self._providers.get(provider_id)

    def require(self, provider_id: str) -> CompactionProvider:
        """
        The provider registered under ``provider_id``.

        Raises:
            UnknownProviderError: No provider has this id.
        """
        provider = self._providers.get(provider_id)
        if provider is None:
            raise UnknownProviderError(f"compaction provider {provider_id!r} is not registered")
        return provider

    def ids(self) -> tuple[str, ...]:
        """Registered ids, in registration order."""
        return tuple(self._providers)

    def __contains__(self, provider_id: object) -> bool:
        return provider_id in self._providers

    def __iter__(self) -> Iterator[CompactionProvider]:
        return iter(tuple(self._providers.values()))

    def __len__(self) -> int:
        return len(self._providers)

    def __repr__(self) -> str:
        return f"CompactionProviderRegistry({list(self._providers)!r})"
