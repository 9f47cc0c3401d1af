"""The store's semantic search set-up (docs/agent-protocol.md, "Store"), in
process where a server is not what is tested: the embeddings `store.index`
names load at start-up or refuse it in one line; on PostgreSQL without
pgvector the server refuses to start, naming it (a real start, cheap: it
stops before it serves); the offline `hashed` embeddings are the same in
every process; the store sweeps as `store.ttl.sweep_interval_minutes` says.
Ranking through the SDK is tests/langgraph_api/test_store.py's."""

from __future__ import annotations

import pytest
from django.db import connection

from graphs.runtime.embeddings import HashedEmbeddings, load_embeddings, store_index
from graphs.runtime.sqlite_vectors import distance_cosine
from tests.test_startup_errors import assert_refused, pg_url, timed
from turns_app import maintenance
from turns_app.store_tables import PGVECTOR_MISSING, SQL_PGVECTOR, store_problem

INDEX = {"embed": "graphs.runtime.embeddings:hashed", "dims": 32, "fields": ["text"]}
INDEX_JSON = '{"embed": "graphs.runtime.embeddings:hashed", "dims": 32}'


def pgvector_here() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(SQL_PGVECTOR)
        return bool(cursor.fetchone()[0])


def test_hashed_embeddings_are_deterministic_sized_and_near_for_shared_words():
    embeddings = load_embeddings("graphs.runtime.embeddings:hashed", 48)
    assert isinstance(embeddings, HashedEmbeddings) and embeddings.dims == 48
    soup, again, rocket = embeddings.embed_documents(["Tomato soup", "tomato SOUP", "rocket fuel"])
    assert soup == again and len(soup) == 48
    assert abs(sum(x * x for x in soup) - 1.0) < 1e-9
    near = embeddings.embed_query("a bowl of tomato soup")
    assert sum(a * b for a, b in zip(near, soup, strict=True)) > sum(a * b for a, b in zip(near, rocket, strict=True))
    # The SQLite distance where sqlite-vec cannot load: the same vectors, the same cosine.
    from sqlite_vec import serialize_float32  # type: ignore[import-untyped]

    assert distance_cosine(serialize_float32(soup), serialize_float32(soup)) == pytest.approx(0.0, abs=1e-6)
    assert distance_cosine(serialize_float32(soup), serialize_float32(soup[:8])) is None


def test_embeddings_by_file_and_function_and_refused_in_one_line(tmp_path, monkeypatch):
    (tmp_path / "emb.py").write_text("def embed(texts):\n    return [[float(len(t)), 1.0] for t in texts]\n")
    by_file = load_embeddings(f"{tmp_path / 'emb.py'}:embed", 2)
    assert by_file.embed_documents(["abc"]) == [[3.0, 1.0]]
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    for embed, fragment in [
        ("openai:text-embedding-3-small", "OPENAI_API_KEY"),
        ("nosuch:model", "not supported"),
        ("tests.fixtures.nowhere:embed", "cannot be imported"),
        ("graphs.runtime.embeddings:WORD", "neither an Embeddings nor a function"),
    ]:
        with pytest.raises(Exception, match=fragment) as refused:
            load_embeddings(embed, 8)
        assert "\n" not in str(refused.value) and "store.index.embed" in str(refused.value)


@pytest.mark.django_db
def test_store_problem_says_what_the_index_needs(settings):
    settings.AGENT_STORE_INDEX = None
    assert store_problem() is None
    settings.AGENT_STORE_INDEX = INDEX
    if connection.vendor == "postgresql" and not pgvector_here():
        assert store_problem() == PGVECTOR_MISSING
    else:
        assert store_problem() is None
        assert store_index()["text_fields"] == ["text"]
    settings.AGENT_STORE_INDEX = {**INDEX, "embed": "tests.fixtures.nowhere:embed"}
    problem = store_problem()
    assert problem is not None and ("cannot be imported" in problem or problem == PGVECTOR_MISSING)


@pytest.mark.postgres_only
def test_a_server_on_postgres_without_pgvector_refuses_store_index_at_start(transactional_db, tmp_path):
    if pgvector_here():
        pytest.skip("this PostgreSQL server has pgvector")
    result, _ = timed(
        ["-c", "import agentsite.asgi"], pg_url(connection.settings_dict["NAME"]), AGENT_STORE_INDEX=INDEX_JSON
    )
    assert_refused(result, "cannot start", "store.index", "pgvector")


def test_expired_items_are_swept_at_most_every_sweep_interval(settings, monkeypatch):
    monkeypatch.setattr(maintenance, "_last_sweeps", {})
    settings.AGENT_STORE_SWEEP_INTERVAL_MINUTES = 1
    assert [maintenance._store_sweep_due(now) for now in (1000.0, 1030.0, 1061.0, 1062.0)] == [True, False, True, False]
    settings.AGENT_STORE_SWEEP_INTERVAL_MINUTES = 0
    assert maintenance._store_sweep_due(1062.0)
    # Threads by TTL (checkpointer.ttl.sweep_interval_minutes), on a clock of their own.
    settings.AGENT_THREAD_TTL = {**settings.AGENT_THREAD_TTL, "sweep_interval_minutes": 2}
    assert [maintenance._thread_sweep_due(now) for now in (1000.0, 1061.0, 1121.0)] == [True, False, True]
