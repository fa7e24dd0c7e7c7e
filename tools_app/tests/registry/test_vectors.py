"""Embedding vectors shared through the database: stored once per text and model, reused by every worker (SPEC §1).

A "new worker" is simulated by emptying the per-process caches (index snapshots and vectors): what is
left is the database, which is all another process or a restarted one would see.
"""

import threading

import numpy as np
import pytest
from django.db import DatabaseError, connections

from tools_app import services
from tools_app.models import EmbeddingVector
from tools_app.registry import embedding, get_index, search_tools
from tools_app.registry.scope import UserScope
from tools_app.registry.search import index_cache

SPECS = [
    ("weather.forecast", "Get the weather forecast for a city for the next days."),
    ("slack-post_message", "Send a chat message to a channel."),
    ("github.createPullRequest", "Open a new pull request from a head branch into a base branch."),
]


@pytest.fixture(autouse=True)
def _needs_embedding_and_fresh_caches():
    if not embedding.available():
        pytest.skip("the embedding extra is not installed (pip install -r requirements-embedding.txt)")
    new_worker()
    yield
    new_worker()


def new_worker() -> None:
    """Forget everything this process holds, as a second worker or a restart would."""
    index_cache.clear()
    embedding.vector_cache.clear()


@pytest.fixture
def embedded_tools(owner, make_tool):
    return {
        name: make_tool(owner, None, type="external", name=name, description=description) for name, description in SPECS
    }


@pytest.fixture
def encoded():
    """Every list of texts the encoder is asked to embed, in call order."""
    calls: list[list[str]] = []
    encoder = embedding.encoder()
    original = encoder.encode
    encoder.encode = lambda texts: calls.append(list(texts)) or original(texts)
    yield calls
    encoder.encode = original


def tool_keys(owner) -> dict[str, str]:
    """Tool name -> the key (SHA-256 of the embedded text) of its vector."""
    index = get_index(UserScope(owner))
    return {doc.name: embedding.text_key(index.embedding_text(doc)) for doc in index.docs}


def test_tool_vectors_are_stored_once_per_text(embedded_tools, owner):
    """A first semantic search stores one float32 vector per tool text, under the model's id."""
    # when
    result = search_tools(scope=UserScope(owner), query="will it rain tomorrow", method="embedding", limit=3)
    # then
    assert result["results"][0]["tool_name"] == "weather.forecast"
    rows = list(EmbeddingVector.objects.order_by("text_hash").values_list("model_id", "text_hash", "vector"))
    assert [key for _, key, _ in rows] == sorted(tool_keys(owner).values())
    assert {model_id for model_id, _, _ in rows} == {embedding.encoder().model_id}
    assert [len(bytes(vector)) for _, _, vector in rows] == [embedding.DIMENSION * 4] * 3
    stored = np.frombuffer(bytes(rows[0][2]), dtype="<f4")
    assert abs(float(np.linalg.norm(stored)) - 1.0) < 1e-4


def test_query_texts_are_not_stored(embedded_tools, owner):
    """Callers' queries are embedded but never written to the database."""
    # when
    search_tools(scope=UserScope(owner), query="will it rain tomorrow", method="hybrid")
    # then
    assert EmbeddingVector.objects.count() == 3
    assert not EmbeddingVector.objects.filter(text_hash=embedding.text_key("will it rain tomorrow")).exists()


def test_another_worker_reuses_the_stored_vectors(embedded_tools, owner, encoded):
    """A worker that starts after the vectors were stored embeds only the query, not the tools."""
    # given
    first = search_tools(scope=UserScope(owner), query="send a chat message", method="hybrid")
    assert sorted(len(texts) for texts in encoded) == [1, 3]
    encoded.clear()
    new_worker()
    # when
    second = search_tools(scope=UserScope(owner), query="send a chat message", method="hybrid")
    # then
    assert encoded == [["send a chat message"]]
    assert [hit["tool_name"] for hit in second["results"]] == [hit["tool_name"] for hit in first["results"]]
    assert second["results"][0]["tool_name"] == "slack-post_message"
    assert EmbeddingVector.objects.count() == 3


def test_an_edited_tool_is_embedded_once_for_all_workers(embedded_tools, owner, encoded):
    """After an edit, one worker embeds the new text; another worker then reads it from the database."""
    # given
    search_tools(scope=UserScope(owner), query="weather", method="embedding")
    services.tool_update(tool=embedded_tools["slack-post_message"], description="Post a note to a team room.")
    encoded.clear()
    # when
    search_tools(scope=UserScope(owner), query="weather", method="embedding")
    first_worker = list(encoded)
    encoded.clear()
    new_worker()
    search_tools(scope=UserScope(owner), query="weather", method="embedding")
    # then
    assert len(first_worker) == 1
    assert len(first_worker[0]) == 1
    assert "team room" in first_worker[0][0]
    assert encoded == [["weather"]]
    assert EmbeddingVector.objects.count() == 4


def test_vectors_of_another_model_are_not_used(embedded_tools, owner, encoded):
    """A vector stored under another model id is ignored: that text is embedded again under this model."""
    # given
    key = tool_keys(owner)["weather.forecast"]
    EmbeddingVector.objects.create(model_id="other-model", text_hash=key, vector=np.ones(384, "<f4").tobytes())
    new_worker()
    # when
    search_tools(scope=UserScope(owner), query="forecast", method="embedding")
    # then
    assert sorted(len(texts) for texts in encoded) == [1, 3]
    assert EmbeddingVector.objects.filter(text_hash=key).count() == 2
    assert EmbeddingVector.objects.filter(model_id=embedding.encoder().model_id).count() == 3


def test_a_vector_written_meanwhile_by_another_worker_is_kept(embedded_tools, owner):
    """Two workers embedding the same text do not collide: the row written first stays, no error."""
    # given
    keys = tool_keys(owner)
    model_id = embedding.encoder().model_id
    theirs = np.zeros(embedding.DIMENSION, "<f4")
    theirs[0] = 1.0
    encoder = embedding.encoder()
    original = encoder.encode

    def encode_while_another_worker_writes(texts):
        # The other worker stores the weather tool's vector between this worker's read and its write.
        EmbeddingVector.objects.get_or_create(
            model_id=model_id, text_hash=keys["weather.forecast"], defaults={"vector": theirs.tobytes()}
        )
        return original(texts)

    encoder.encode = encode_while_another_worker_writes
    try:
        # when
        result = search_tools(scope=UserScope(owner), query="forecast", method="hybrid")
    finally:
        encoder.encode = original
    # then
    assert result["results"][0]["tool_name"] == "weather.forecast"
    assert EmbeddingVector.objects.count() == 3
    stored = EmbeddingVector.objects.get(text_hash=keys["weather.forecast"])
    assert bytes(stored.vector) == theirs.tobytes()


def test_a_stored_vector_of_the_wrong_size_is_replaced(embedded_tools, owner):
    """A damaged row is deleted and the text embedded and stored again."""
    # given
    key = tool_keys(owner)["weather.forecast"]
    model_id = embedding.encoder().model_id
    EmbeddingVector.objects.create(model_id=model_id, text_hash=key, vector=b"\x00" * 10)
    new_worker()
    # when
    result = search_tools(scope=UserScope(owner), query="will it rain tomorrow", method="embedding")
    # then
    assert result["results"][0]["tool_name"] == "weather.forecast"
    assert len(bytes(EmbeddingVector.objects.get(model_id=model_id, text_hash=key).vector)) == 384 * 4


def test_search_works_when_the_vectors_cannot_be_stored(embedded_tools, owner, monkeypatch, caplog):
    """A failed write is logged; the search still answers and nothing is stored."""

    # given
    def fail(*args, **kwargs):
        raise DatabaseError("disk full")

    monkeypatch.setattr(EmbeddingVector.objects, "bulk_create", fail)
    # when
    result = search_tools(scope=UserScope(owner), query="open a pull request", method="hybrid")
    # then
    assert result["results"][0]["tool_name"] == "github.createPullRequest"
    assert EmbeddingVector.objects.count() == 0
    assert "Could not store 3 embedding vectors" in caplog.text


def test_search_works_when_the_vectors_cannot_be_read(embedded_tools, owner, monkeypatch, caplog):
    """A failed read is logged and the texts are embedded instead; the search still answers."""
    # given
    search_tools(scope=UserScope(owner), query="warm up", method="embedding")
    new_worker()

    def fail(*args, **kwargs):
        raise DatabaseError("connection lost")

    monkeypatch.setattr(EmbeddingVector.objects, "filter", fail)
    # when
    result = search_tools(scope=UserScope(owner), query="will it rain tomorrow", method="embedding")
    # then
    assert result["results"][0]["tool_name"] == "weather.forecast"
    assert "Could not read stored embedding vectors" in caplog.text
    monkeypatch.undo()
    assert EmbeddingVector.objects.count() == 3


@pytest.mark.postgres
def test_workers_indexing_the_same_cold_catalogue_share_the_work(postgres_db, owner, make_tool, monkeypatch):
    """Four workers embedding a cold 41-tool catalogue at once all succeed, store each vector once, and
    skip rounds another worker has stored (rounds are taken in random order and checked before each)."""
    # given
    monkeypatch.setattr(embedding, "ROUND", 4)
    for number in range(40):
        make_tool(owner, None, type="external", name=f"tool_{number}", description=f"Tool number {number} of many.")
    make_tool(owner, None, type="external", name="weather.forecast", description=SPECS[0][1])
    index = get_index(UserScope(owner))
    texts = [index.embedding_text(doc) for doc in index.docs]
    weather = next(doc.position for doc in index.docs if doc.name == "weather.forecast")
    encoder = embedding.encoder()
    original = encoder.encode
    encoded: list[int] = []
    encoder.encode = lambda batch: encoded.append(len(batch)) or original(batch)
    barrier = threading.Barrier(4)
    results: list = [None] * 4

    def worker(number: int) -> None:
        try:
            barrier.wait(timeout=60)
            # A cache of its own: separate processes share nothing but the database.
            results[number] = embedding.VectorCache().embed(encoder, texts, persist=True)
        except BaseException as exc:  # noqa: BLE001 - reported to the test, which asserts on it
            results[number] = exc
        finally:
            connections.close_all()

    # when
    try:
        threads = [threading.Thread(target=worker, args=(number,)) for number in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
    finally:
        encoder.encode = original
    # then
    query = original(["will it rain tomorrow"])[0]
    assert [int((vectors @ query).argmax()) for vectors in results] == [weather] * 4
    assert EmbeddingVector.objects.count() == 41
    assert EmbeddingVector.objects.values("text_hash").distinct().count() == 41
    assert 41 <= sum(encoded) < 4 * 41


def test_texts_run_in_batches_of_similar_length_within_the_token_budget(monkeypatch):
    """Tool texts are sorted by token length and padded per batch to its longest, at most BATCH_TOKENS positions
    a batch; a text's vector does not depend on the batch it ran in."""
    encoder = embedding.encoder()
    monkeypatch.setattr(embedding, "BATCH_TOKENS", 64)
    shapes = []
    run = encoder._session.run
    monkeypatch.setattr(
        encoder._session, "run", lambda names, feeds: shapes.append(feeds["input_ids"].shape) or run(names, feeds)
    )
    texts = ["weather " * n for n in (40, 1, 3, 12, 2, 30, 5)]
    # when
    together = encoder.encode(texts)
    alone = np.stack([encoder.encode([text])[0] for text in texts])
    # then
    batched = shapes[: len(shapes) - len(texts)]
    # 3, 4, 5, 7, 14, 32 and 42 word pieces ([CLS] and [SEP] included): 4 × 7, then 2 × 32 (14 padded), then 42
    assert batched == [(4, 7), (2, 32), (1, 42)]
    assert all(rows * width <= 64 for rows, width in batched)
    assert np.abs(together - alone).max() < 1e-5
