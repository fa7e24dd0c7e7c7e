"""indexes.index_catalog: a database file's catalog of a collection's indexes is read from sqlite_master once per
schema version, and again after any schema change, by any connection."""

import sqlite3

from django.db.backends.sqlite3.base import SQLiteCursorWrapper

from tools_app.data_access.sql import indexes
from tools_app.data_access.sql.indexes import index_catalog

STATUS = """CREATE INDEX tr_7_status ON records ((data ->> '$."status"')) WHERE collection_id = 7"""
TOTAL = """CREATE INDEX tr_7_total ON records ((data ->> '$."total"')) WHERE collection_id = 7"""
OTHER = """CREATE INDEX tr_8_status ON records ((data ->> '$."status"')) WHERE collection_id = 8"""


def _database(path: str) -> sqlite3.Connection:
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("CREATE TABLE IF NOT EXISTS records (id INTEGER PRIMARY KEY, collection_id INT, data TEXT)")
    return raw


def _catalog_reads(statements: list[str]) -> int:
    return sum("sqlite_master" in statement for statement in statements)


def test_a_files_catalog_is_read_once_per_schema_version(tmp_path, monkeypatch):
    monkeypatch.setattr(indexes, "_catalogs", {})
    path = str(tmp_path / "records.sqlite3")
    reader, writer = _database(path), _database(path)
    writer.execute(STATUS)
    writer.execute(OTHER)
    statements: list[str] = []
    reader.set_trace_callback(statements.append)
    cursor = reader.cursor(factory=SQLiteCursorWrapper)

    assert index_catalog(cursor, records_table="records", collection_id=7) == {"tr_7_status": STATUS}
    assert index_catalog(cursor, records_table="records", collection_id=7) == {"tr_7_status": STATUS}
    assert _catalog_reads(statements) == 1

    writer.execute(TOTAL)  # another connection changes the schema: the kept catalog is stale
    assert index_catalog(cursor, records_table="records", collection_id=7) == {
        "tr_7_status": STATUS,
        "tr_7_total": TOTAL,
    }
    assert _catalog_reads(statements) == 2
    writer.execute("DROP INDEX tr_7_status")
    assert index_catalog(cursor, records_table="records", collection_id=7) == {"tr_7_total": TOTAL}
    assert index_catalog(cursor, records_table="records", collection_id=8) == {"tr_8_status": OTHER}
    assert _catalog_reads(statements) == 4
    assert index_catalog(cursor, records_table="records", collection_id=8) == {"tr_8_status": OTHER}
    assert _catalog_reads(statements) == 4


def test_an_in_memory_databases_catalog_is_not_kept(monkeypatch):
    monkeypatch.setattr(indexes, "_catalogs", {})
    raw = _database(":memory:")
    raw.execute(STATUS)
    statements: list[str] = []
    raw.set_trace_callback(statements.append)
    cursor = raw.cursor(factory=SQLiteCursorWrapper)

    for _ in range(3):
        assert index_catalog(cursor, records_table="records", collection_id=7) == {"tr_7_status": STATUS}
    assert _catalog_reads(statements) == 3
    assert indexes._catalogs == {}


def test_the_kept_catalogs_are_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(indexes, "_catalogs", {})
    monkeypatch.setattr(indexes, "CATALOGS_KEPT", 3)
    raw = _database(str(tmp_path / "records.sqlite3"))
    cursor = raw.cursor(factory=SQLiteCursorWrapper)
    for collection_id in range(1, 6):
        assert index_catalog(cursor, records_table="records", collection_id=collection_id) == {}
    assert [key[2] for key in indexes._catalogs] == [3, 4, 5]
