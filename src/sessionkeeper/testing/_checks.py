"""
The one check runner of the conformance kits (issue 12): a named contract check, run on subjects made by a
factory, whose failures name the check.

Both kits build on it: the store-backend kit (:mod:`sessionkeeper.testing.conformance`,
:class:`~sessionkeeper.store.StoreBackend`) and the transcript-storage kit (``_transcript_conformance``,
:class:`~sessionkeeper.abc.TranscriptStorage`). A kit subclasses :class:`ContractCheck` with its subject
type and sets :attr:`ContractCheck.failure` to its own error class; its check bodies raise that class
(through an :class:`Expect` bound to it). The runner works under asyncio and trio
alike (it only awaits what the bodies await).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from typing import ClassVar, Generic, TypeAlias, TypeVar

import attrs

from sessionkeeper.exceptions import SessionKeeperError


__all__ = ("ContractCheck", "Expect", "Factory", "run_checks")

SubjectT = TypeVar("SubjectT")

Factory: TypeAlias = Callable[[], SubjectT | Awaitable[SubjectT]]
"""Returns a new subject (a backend, a storage), synchronously or as an awaitable."""


@attrs.frozen
class Expect:
    """
    The assertions of a kit's check bodies, raising the kit's error class ``failure``.

    ``_expect = Expect(ConformanceError)`` then ``_expect.that(...)``, ``await _expect.raises(...)``,
    ``await _expect.made(factory)``.
    """

    failure: type[SessionKeeperError]

    async def made(self, factory: Factory[SubjectT] | None) -> SubjectT:
        """
        A new subject from ``factory`` (awaited when it returns an awaitable).

        Raises:
            SessionKeeperError: :attr:`failure` when ``factory`` is ``None`` (a check needing ``reopen=``).
        """
        if factory is None:
            raise self.failure("this check needs a factory")
        made = factory()
        if inspect.isawaitable(made):
            return await made
        return made

    def that(self, condition: bool, message: str) -> None:
        """
        Raise ``failure(message)`` unless ``condition`` holds.

        Raises:
            SessionKeeperError: :attr:`failure` when ``condition`` is false.
        """
        if not condition:
            raise self.failure(message)

    async def raises(
        self, kind: type[BaseException], what: str, call: Callable[[], Awaitable[object]]
    ) -> None:
        """
        Await ``call()`` and require it to raise ``kind`` (``what`` names the call in the message).

        Raises:
            SessionKeeperError: :attr:`failure` ("<what> must raise <kind>") when ``call()`` returns.
        """
        try:
            await call()
        except kind:
            return
        raise self.failure(f"{what} must raise {kind.__name__}")


@attrs.frozen(kw_only=True)
class ContractCheck(Generic[SubjectT]):
    """
    One contract check of a kit; a kit subclasses it with its subject type and its :attr:`failure`.

    Attributes:
        name: Short identifier (use as the pytest id); failure messages start with it.
        doc: The rule checked.
        body: The check: ``await body(factory, reopen)``; it raises :attr:`failure` when the rule fails.
        needs_reopen: The check needs a second instance on the same storage (``reopen``); the kit's
            run-everything function skips it without one.
        failure: (class attribute) The kit's error class, raised by :meth:`run`.
    """

    name: str
    doc: str
    body: Callable[[Factory[SubjectT], Factory[SubjectT] | None], Awaitable[None]]
    needs_reopen: bool = False

    failure: ClassVar[type[SessionKeeperError]] = SessionKeeperError

    async def run(self, factory: Factory[SubjectT], *, reopen: Factory[SubjectT] | None = None) -> None:
        """
        Run the check on subjects from ``factory`` (and ``reopen``).

        Raises:
            SessionKeeperError: The kit's :attr:`failure` class: the contract does not hold, or the subject
                raised an exception the check did not expect (the original is the ``__cause__``); the
                message starts with the check's name. Also when ``reopen`` is missing where needed.
        """
        failure = type(self).failure
        if self.needs_reopen and reopen is None:
            raise failure(f"{self.name}: needs reopen=")
        try:
            await self.body(factory, reopen)
        except failure as err:
            raise failure(f"{self.name}: {err}") from err
        except Exception as err:
            raise failure(f"{self.name}: unexpected {type(err).__name__}: {err}") from err


async def run_checks(
    checks: Iterable[ContractCheck[SubjectT]],
    factory: Factory[SubjectT],
    *,
    reopen: Factory[SubjectT] | None = None,
) -> None:
    """
    Run ``checks`` in order, skipping those that need ``reopen`` when it is ``None``.

    Raises:
        SessionKeeperError: The first failing check's :attr:`ContractCheck.failure`, naming it.
    """
    for check in checks:
        if check.needs_reopen and reopen is None:
            continue
        await check.run(factory, reopen=reopen)
