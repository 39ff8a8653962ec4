"""The connection pool, and the one place database failures become domain errors."""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Awaitable, Callable
from typing import TypeVar

import psycopg
import psycopg.errors
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool, PoolClosed, PoolTimeout

from inboxd.domain.errors import DatabaseFault, InvalidArgument, Unavailable

log = logging.getLogger(__name__)

T = TypeVar("T")
Connection = psycopg.AsyncConnection[TupleRow]
Work = Callable[[Connection], Awaitable[T]]

# A transaction that lost a deadlock or serialization race did nothing; it is
# safe to run again. Beyond this many tries the caller gets UNAVAILABLE.
_ROLLBACK_RETRIES = 5
# By class, each: psycopg makes SerializationFailure (40001) and
# DeadlockDetected (40P01) siblings of TransactionRollback (40000), not its
# subclasses, so catching TransactionRollback alone retried neither.
_ROLLED_BACK = (
    psycopg.errors.TransactionRollback,
    psycopg.errors.SerializationFailure,
    psycopg.errors.DeadlockDetected,
)
# Once a connection is lost, a probe connects outside the pool this often until
# the database answers. While it cannot, calls are refused at once rather than
# queued for the pool's acquire timeout (5 s, longer than an edge's deadline).
PROBE_INTERVAL = 0.5
PROBE_CONNECT_TIMEOUT = 2  # libpq's connect_timeout: whole seconds, at least 2
# The PostgreSQL function that holds a COMMIT until the synchronous standby
# has its WAL. A WARNING from it means the wait was cancelled (by
# pg_cancel_backend, say): the transaction is committed on the primary, may be
# missing on the standby, and COMMIT still reports success. Matched by the
# function's name, not its message, which lc_messages may translate.
_SYNCHRONOUS_WAIT = "SyncRepWaitForLSN"
UNCONFIRMED_COMMIT = (
    "the commit was cancelled while it waited for the synchronous standby: it is committed on the primary but may"
    " be lost if the primary fails now; not acknowledged, retry (a retried Accept is answered DUPLICATE)"
)


# Every statement on the work path has an access path that does not depend on
# its parameters (tests/integration/test_claim_plans.py, test_fence_plans.py,
# test_accept_group.py check the generic plans). Left to choose, PostgreSQL
# kept planning the claim and completion statements anew on every call (their
# generic plans are estimated dearer than the custom ones): about 0.5 ms of
# its CPU per Claim, a quarter of its CPU per event under claim-complete load.
GENERIC_PLANS = "SET plan_cache_mode = force_generic_plan"
# A generic plan's cost estimate can cross jit_above_cost (a Claim's did,
# beside a 100,000-event backlog): then every execution compiles it, about
# 100 ms. Statements this short never earn that back.
NO_JIT = "SET jit = off"
# psycopg prepares a statement on its first execution on a connection, not its
# sixth (its default): the claim statement takes PostgreSQL about 7 ms to plan,
# and each new connection of the pool planned it six times, first the five
# unprepared runs, then the generic plan. That was most of what the first
# seconds after a start (or after the pool grew) cost beyond the steady state.
# (So a text of several statements cannot run on the pool; inboxd sends none.)
PREPARE_AT_FIRST_USE = 0
# An operator's read (Stats of one namespace or all, a listing) is planned for
# its actual parameters, inside its own transaction.
CUSTOM_PLANS = "SELECT set_config('plan_cache_mode', 'force_custom_plan', true)"


class _CommitWatch:
    """Listens to one connection's notices for a COMMIT the synchronous standby never confirmed."""

    __slots__ = ("unconfirmed",)

    def __init__(self) -> None:
        self.unconfirmed = False

    def __call__(self, diagnostic: psycopg.errors.Diagnostic) -> None:
        if diagnostic.source_function == _SYNCHRONOUS_WAIT:
            self.unconfirmed = True


class Database:
    """A pool of connections; `run` executes one unit of work in one transaction."""

    def __init__(
        self,
        conninfo: str,
        *,
        min_size: int = 2,
        max_size: int = 20,
        acquire_timeout: float = 5.0,
    ) -> None:
        self.conninfo = conninfo
        self._acquire_timeout = acquire_timeout
        self._pool: AsyncConnectionPool[Connection] = AsyncConnectionPool(
            conninfo,
            min_size=min_size,
            max_size=max_size,
            open=False,
            kwargs={"autocommit": True, "prepare_threshold": PREPARE_AT_FIRST_USE},
            timeout=acquire_timeout,
            name="inboxd",
            configure=self._configure,
        )
        self._commit_watches: weakref.WeakKeyDictionary[Connection, _CommitWatch] = weakref.WeakKeyDictionary()
        self._check_task: asyncio.Task[None] | None = None
        # Why the database is known to be down (the probe's last failure), or None.
        self._down: str | None = None
        self._probe_task: asyncio.Task[None] | None = None

    async def open(self, *, wait_timeout: float = 30.0) -> None:
        await self._pool.open(wait=True, timeout=wait_timeout)

    async def close(self) -> None:
        if self._probe_task is not None:
            self._probe_task.cancel()
        await self._pool.close()

    async def run(self, work: Work[T], *, transaction: bool = True, custom_plans: bool = False) -> T:
        """Runs `work` in a transaction and commits; answers only after the commit.

        With transaction=False, `work` gets an autocommit connection and owns
        its transactions: a lone statement is then its own transaction, one
        round trip instead of three (BEGIN, statement, COMMIT).

        Statements run under generic plans (see GENERIC_PLANS) unless
        custom_plans (with a transaction): an operator's reads, planned for
        their parameters.

        Raises Unavailable when the database cannot be reached or the commit's
        fate is unknown: the caller must not take anything as acknowledged.
        While the database is known to be down, that is at once.
        """
        if self._down is not None:
            raise Unavailable(f"database unavailable: {self._down} (checked every {PROBE_INTERVAL:g} s)")
        for attempt in range(1, _ROLLBACK_RETRIES + 1):
            try:
                return await self._attempt(work, transaction, custom_plans)
            except _ROLLED_BACK:
                if attempt == _ROLLBACK_RETRIES:
                    raise Unavailable(
                        f"transaction lost {_ROLLBACK_RETRIES} deadlock or serialization races; retry"
                    ) from None
            except (PoolTimeout, PoolClosed) as exc:
                self._check_soon()
                if isinstance(exc, PoolTimeout):
                    self._probe_soon()
                raise Unavailable(f"no database connection within {self._acquire_timeout:.2f} s: {exc}") from None
            except psycopg.DataError as exc:
                # Validation should have caught it; never let a caller's bytes become INTERNAL.
                raise InvalidArgument(
                    "request", f"PostgreSQL refused a value: {exc.diag.message_primary or exc}"
                ) from None
            except (psycopg.ProgrammingError, psycopg.InternalError) as exc:
                # A statement inboxd got wrong, a trigger, a fault inside PostgreSQL: INTERNAL,
                # never grpc's UNKNOWN; logged here, since the caller only sees the status.
                log.error("database error: %s", first_line(exc), exc_info=True)
                raise DatabaseFault(f"database error: {first_line(exc)}") from None
            except psycopg.OperationalError as exc:
                self._check_soon()
                if _lost_connection(exc):
                    self._probe_soon()
                raise Unavailable(f"database unavailable: {first_line(exc)}") from None
        raise AssertionError("unreachable")

    async def _attempt(self, work: Work[T], transaction: bool, custom_plans: bool) -> T:
        async with self._pool.connection() as conn:
            watch = self._commit_watches.get(conn)
            if watch is not None:
                watch.unconfirmed = False
            if transaction:
                async with conn.transaction():
                    if custom_plans:
                        await conn.execute(CUSTOM_PLANS)
                    result = await work(conn)
            else:
                result = await work(conn)
            if watch is not None and watch.unconfirmed:
                raise Unavailable(UNCONFIRMED_COMMIT)
            return result

    async def _configure(self, conn: Connection) -> None:
        """Each pool connection: generic plans, no JIT, and an ear for unconfirmed commits."""
        await conn.execute(GENERIC_PLANS)
        await conn.execute(NO_JIT)
        watch = _CommitWatch()
        conn.add_notice_handler(watch)
        self._commit_watches[conn] = watch

    async def ping(self) -> None:
        """Raises Unavailable unless the database answers a trivial query."""
        await self.run(_select_one, transaction=False)

    def _check_soon(self) -> None:
        """Drops broken idle connections in the background, so recovery needs no restart."""
        if self._check_task is None or self._check_task.done():
            self._check_task = asyncio.create_task(self._check())

    async def _check(self) -> None:
        try:
            await self._pool.check()
        except Exception:
            log.debug("pool check failed", exc_info=True)

    def _probe_soon(self) -> None:
        if self._probe_task is None or self._probe_task.done():
            self._probe_task = asyncio.create_task(self._probe())

    async def _probe(self) -> None:
        """Connects outside the pool until the database answers; until then `run` refuses at once."""
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self.conninfo, autocommit=True, connect_timeout=PROBE_CONNECT_TIMEOUT
                ) as conn:
                    await conn.execute("SELECT 1")
            except psycopg.Error as exc:
                if self._down is None:
                    log.warning("database down, refusing calls until it answers: %s", first_line(exc))
                self._down = first_line(exc)
                await asyncio.sleep(PROBE_INTERVAL)
                continue
            if self._down is not None:
                await self._check()  # drop the pool's broken connections before calls use them again
                self._down = None
                log.info("database reachable again")
            return


def _lost_connection(exc: psycopg.OperationalError) -> bool:
    """A connection that broke or was refused, not a statement that failed (a lock or statement timeout, say)."""
    state = exc.sqlstate
    return state is None or state.startswith("08") or state.startswith("57P")


async def _select_one(conn: Connection) -> None:
    await conn.execute("SELECT 1")


def first_line(exc: BaseException) -> str:
    """The first line of an error's text: psycopg's messages run on with context and hints."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
