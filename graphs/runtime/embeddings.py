"""The embeddings of the store's semantic search (AGENT_STORE_INDEX, a
langgraph.json's `store.index`), loaded as langgraph-api loads them, and
`hashed`: a deterministic embedding that needs no model, no network and no
key, for tests and trials (docs/agent-protocol.md, "Store").

`embed` names `./file.py:attr` (made absolute by core.store_config) or
`module.path:attr` — an `Embeddings`, or a function from texts to vectors —
or else a provider's model for LangChain's `init_embeddings`
(`openai:text-embedding-3-small`). A provider has no period in its name; a
module path before the colon has one, which is how the two are told apart.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import math
import re
import sys
from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string
from langchain_core.embeddings import Embeddings
from langgraph.store.base import ensure_embeddings, get_text_at_path, tokenize_path

WORD = re.compile(r"\w+")


class HashedEmbeddings(Embeddings):
    """Each word of three letters or more and each of its three-letter
    pieces, hashed to a dimension with a sign, the sum scaled to length 1:
    texts sharing words (or parts of words) point the same way. The same text gives the same vector in every
    process, with no model, no network and no key. Not a language model:
    "car" and "automobile" do not meet."""

    def __init__(self, dims: int = 256) -> None:
        self.dims = dims

    def _features(self, text: str) -> list[tuple[str, float]]:
        features: list[tuple[str, float]] = []
        for word in WORD.findall(text.lower()):
            if len(word) < 3:  # "a", "to", "of": shared by everything, they say nothing
                continue
            features.append((f"w:{word}", 1.0))
            padded = f"#{word}#"
            features.extend((f"t:{padded[i : i + 3]}", 0.5) for i in range(len(padded) - 2))
        return features

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * self.dims
        for feature, weight in self._features(text):
            digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
            number = int.from_bytes(digest, "big")
            vector[number % self.dims] += weight if number >> 63 else -weight
        norm = math.sqrt(sum(x * x for x in vector))
        if norm == 0.0:  # no words: one fixed direction, never a zero vector
            return [1.0] + [0.0] * (self.dims - 1)
        return [x / norm for x in vector]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


# What `"embed": "graphs.runtime.embeddings:hashed"` names; it takes the
# index's `dims`.
hashed = HashedEmbeddings()


def _target(embed: str) -> Any:
    module, _, attribute = embed.rpartition(":")
    if module.endswith(".py"):
        name = f"agentsite_embeddings_{hashlib.sha256(module.encode()).hexdigest()[:12]}"
        found = sys.modules.get(name)
        if found is None:
            spec = importlib.util.spec_from_file_location(name, module)
            if spec is None or spec.loader is None:
                raise ImportError(f"{module} is not a Python module")
            found = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(found)
            sys.modules[name] = found
        return getattr(found, attribute)
    return import_string(f"{module}.{attribute}")


def load_embeddings(embed: str, dims: int) -> Embeddings:
    """The embeddings `embed` names, or ImproperlyConfigured in one line."""
    where = f"AGENT_STORE_INDEX (store.index.embed={embed!r})"
    provider, colon, _ = embed.partition(":")
    by_path = colon and ("." in provider or "/" in provider)
    try:
        if not by_path:
            from langchain.embeddings import init_embeddings

            return init_embeddings(embed)
        target = _target(embed)
    except ImportError as exc:
        raise ImproperlyConfigured(f"{where} cannot be imported: {exc}") from exc
    except Exception as exc:  # a provider's own complaint: no key, no such model, …
        raise ImproperlyConfigured(f"{where}: {type(exc).__name__}: {exc}".replace("\n", " ")) from exc
    if isinstance(target, HashedEmbeddings):
        return HashedEmbeddings(dims)
    if isinstance(target, Embeddings):
        return target
    if callable(target):
        return ensure_embeddings(target)
    raise ImproperlyConfigured(f"{where} is neither an Embeddings nor a function of texts")


@functools.cache
def _index(embed: str, dims: int, fields: tuple[str, ...] | None) -> dict[str, Any]:
    paths = list(fields) if fields else ["$"]
    # LangGraph's SQLite store reads its fields from `text_fields`, the
    # PostgreSQL store (and IndexConfig) from `fields`: both, so both embed
    # the same texts.
    return {"embed": load_embeddings(embed, dims), "dims": dims, "fields": paths, "text_fields": paths}


def store_index() -> dict[str, Any] | None:
    """LangGraph's index config for the stores (the same embeddings
    everywhere in the process), or None when the store has no index."""
    config: dict[str, Any] | None = settings.AGENT_STORE_INDEX
    if not config:
        return None
    fields: Sequence[str] | None = config.get("fields")
    return _index(config["embed"], config["dims"], tuple(fields) if fields else None)


def texts_to_embed(value: dict[str, Any], paths: Sequence[str] | None) -> list[tuple[str, str]]:
    """(field name, text) of each text a write of `value` embeds: the
    index's fields, or the write's own `index` paths; a path that reaches
    several texts names each `path.i`. As LangGraph's stores name them."""
    index = store_index()
    if index is None:
        return []
    found: list[tuple[str, str]] = []
    for path in paths if paths is not None else index["fields"]:
        texts = get_text_at_path(value, "$" if path == "$" else tokenize_path(path))
        found.extend((f"{path}.{i}" if len(texts) > 1 else path, text) for i, text in enumerate(texts))
    return found
