"""A PostgreSQL cursor whose statements' rows arrive a chunk at a time, never the whole result at once.

    cursor = ChunkedCursor(psycopg_connection, size=2_000)   # wrapped by Django as any cursor (records.engine_cursor)
    cursor.execute("SET LOCAL statement_timeout = 5000; SELECT ...", params)
    cursor.nextset()                                        # to the SELECT's rows
    rows = cursor.fetchmany(2_000)                          # one chunk received, the rest still on the server
    cursor.close()                                          # the rest unread: the statement is cancelled

A plain psycopg cursor receives a statement's whole result before its first fetchmany (libpq gathers it in one
PGresult), so a bound on what is read from it bounds what Python decodes, not what the process holds: 1M records
of ~300 bytes are ~300 MB in libpq before a 50 MB bound trips. This cursor sends the message as the plain one does
(client-side binding, one simple-query message however many statements: the round trips of small answers are the
same) in libpq's chunked-rows mode: each statement's rows arrive at most `size` per PGresult, one chunk read from
the connection as the caller asks for rows. Between chunks the server waits on the socket: what it sent ahead is
what the sockets' buffers hold (up to tcp_rmem's and tcp_wmem's maximum: 36 MB on the development machine).

Why not the others (measured once over bench/scale.py's 1M-record build on PostgreSQL 18, side by side, load ~10):
- psycopg's `Cursor.stream()` uses the same chunked mode but sends through the extended protocol, one statement per
  message: the `SET LOCAL statement_timeout` that travels with each statement (records.engine_cursor) would cost
  two more round trips per statement.
- A server-side cursor (DECLARE ... / FETCH n) stops the server's work exactly, but PostgreSQL plans a cursor's
  query without parallel workers (and for its first rows, unless cursor_tuple_fraction is 1): `[?id == `5`].id`,
  a scan of every record, took 2.4x as long (1.29-1.39 s against 0.53-0.54 s), and each chunk costs a round trip.

A statement stopped part-way (close() before its rows were all read, or another execute) is cancelled (a cancel
request: libpq opens a connection of its own to ask for it), unless what is left of the message has arrived
already, and what the server had sent meanwhile is received and dropped, a chunk at a time: nothing like the whole
answer is ever held or sent. The cancel is asynchronous: the server stops at its next row once it is in, having
filled the sockets' buffers at most. Inside a transaction the message runs in a savepoint of its own (SAVEPOINT
before it and RELEASE after it, in the same message): a cancel or an error is rolled back to it (one more round
trip, on that path only), and the transaction goes on as if the message had not been sent. Outside a transaction
the message's implicit transaction ends with it either way.
"""

from types import SimpleNamespace
from typing import Any

from psycopg import ClientCursor, Connection, errors, generators, pq
from psycopg.adapt import Transformer

__all__ = ["ChunkedCursor"]

SAVEPOINT = "toolhub_chunked"

_ROWS = (pq.ExecStatus.TUPLES_CHUNK,)
_ENDS = (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK, pq.ExecStatus.EMPTY_QUERY)


class ChunkedCursor:
    """The DB-API subset records' engine cursor and sql_query.run_sql use (execute, nextset, fetchone, fetchmany,
    fetchall, close) over one psycopg connection, with the message's results read as they are asked for."""

    def __init__(self, connection: Connection, *, size: int) -> None:
        self._conn = connection
        self._size = size
        self._binder = ClientCursor(connection)  # the connection's adapters: Django's cursors bind with the same
        self._tx = Transformer(connection)
        self._rows: list[tuple] = []  # rows received and not yet returned
        self._statement_done = True  # the current statement's rows are all received
        self._pending = False  # results of the message remain to be read from the connection
        self._savepoint = False  # the message runs in SAVEPOINT (inside a transaction)
        self._query: SimpleNamespace | None = None  # the message as sent, where Django's query log reads a cursor's

    # DB-API

    def execute(self, sql: str, params: Any = None) -> None:
        self._stop()
        query = self._binder.mogrify(sql, params) if params is not None else sql
        conn, pgconn = self._conn, self._conn.pgconn
        with conn.lock:
            # BEGIN where psycopg opens transactions itself (not in autocommit), as its own cursors do (its private
            # generator: the statement depends on the connection's isolation level and read-only setting).
            conn.wait(conn._start_query())
            self._savepoint = pgconn.transaction_status == pq.TransactionStatus.INTRANS
            if self._savepoint:
                query = f"SAVEPOINT {SAVEPOINT}; {query}; RELEASE SAVEPOINT {SAVEPOINT}"
            sent = query.encode(conn.info.encoding)
            self._query = SimpleNamespace(query=sent)
            pgconn.send_query(sent)
            pgconn.set_chunked_rows_mode(self._size)
            conn.wait(generators.send(pgconn))
        self._pending = True
        if self._savepoint:
            self._next_statement()  # past SAVEPOINT's
        self._next_statement()

    def nextset(self) -> bool | None:
        """To the next statement's rows (or command): True, or None when the message has no more."""
        while not self._statement_done:
            self._receive()
        self._rows = []
        return True if self._next_statement() else None

    def fetchmany(self, size: int) -> list[tuple]:
        while len(self._rows) < size and not self._statement_done:
            self._receive()
        taken, self._rows = self._rows[:size], self._rows[size:]
        return taken

    def fetchall(self) -> list[tuple]:
        while not self._statement_done:
            self._receive()
        taken, self._rows = self._rows, []
        return taken

    def fetchone(self) -> tuple | None:
        taken = self.fetchmany(1)
        return taken[0] if taken else None

    def close(self) -> None:
        self._stop()

    # The message's results

    def _next_statement(self) -> bool:
        """The next statement's first result read: False at the end of the message."""
        result = self._result()
        if result is None:
            self._statement_done = True
            return False
        self._tx.set_pgresult(result)
        self._statement_done = False
        self._take(result)
        return True

    def _receive(self) -> None:
        result = self._result()
        if result is None:  # the message ended (no statement's end before it: cannot happen with rows pending)
            self._statement_done = True
            return
        self._tx.set_pgresult(result, set_loaders=False)
        self._take(result)

    def _take(self, result: pq.abc.PGresult) -> None:
        status = result.status
        if status in _ROWS:
            self._rows.extend(self._tx.load_rows(0, result.ntuples, tuple))
        elif status in _ENDS:
            if result.ntuples:  # a statement's rows in one result (not chunked)
                self._rows.extend(self._tx.load_rows(0, result.ntuples, tuple))
            self._statement_done = True
        else:
            self._statement_done = True
            self._fail(result)

    def _result(self) -> pq.abc.PGresult | None:
        if not self._pending:
            return None
        with self._conn.lock:
            result = self._conn.wait(generators.fetch(self._conn.pgconn))
        if result is None:
            self._pending = False
        return result

    def _fail(self, result: pq.abc.PGresult) -> None:
        """An error of the message: its other results drained (the connection is then ready), the transaction
        rolled back to the message's savepoint, and the error raised."""
        error = errors.error_from_result(result, encoding=self._conn.info.encoding)
        self._drain()
        self._rows = []
        raise error

    def _stop(self) -> None:
        """The message's results not read yet: its running statement cancelled, the rest received and dropped."""
        if not self._pending:
            return
        if not self._statement_done and not self._received():
            self._conn.cancel_safe()
        self._rows = []
        self._statement_done = True
        self._drain()

    def _received(self) -> bool:
        """The message's results all arrived already (read and dropped now, without waiting for more)."""
        pgconn = self._conn.pgconn
        with self._conn.lock:
            pgconn.consume_input()
            while self._pending and not pgconn.is_busy():
                if pgconn.get_result() is None:
                    self._pending = False
        return not self._pending

    def _drain(self) -> None:
        try:
            while self._pending:
                self._result()
        finally:
            self._rollback_if_failed()

    def _rollback_if_failed(self) -> None:
        pgconn = self._conn.pgconn
        if self._savepoint and pgconn.transaction_status == pq.TransactionStatus.INERROR:
            self._savepoint = False
            with self._conn.lock:
                pgconn.send_query(f"ROLLBACK TO SAVEPOINT {SAVEPOINT}; RELEASE SAVEPOINT {SAVEPOINT}".encode())
                results = self._conn.wait(generators.execute(pgconn))
            for result in results:
                if result.status != pq.ExecStatus.COMMAND_OK:
                    raise errors.error_from_result(result, encoding=self._conn.info.encoding)
