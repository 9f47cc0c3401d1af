# agentsite application image: the same image runs `migrate` (one-shot) and
# daphne (see docker-compose.yml).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    STATIC_ROOT=/app/staticfiles

WORKDIR /app

RUN groupadd --system agentsite \
    && useradd --system --gid agentsite --home-dir /app --no-create-home \
       --shell /usr/sbin/nologin agentsite

# Dependencies first, so code changes do not invalidate this layer.
# psycopg[binary] ships libpq, so no system packages are needed.
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt

COPY . .

# collectstatic needs settings to load; the key, database and data dir here are
# throwaway build-time values and never reach the running container.
# The app serves /static/ itself (WhiteNoise); collecting at build time gives
# it the gzip copies. The code stays root-owned; only data/ is writable by the
# service user.
RUN SECRET_KEY=build-only-not-a-secret DEBUG=false \
    DATABASE_URL=sqlite:////tmp/agentsite-build/build.sqlite3 \
    AGENT_DATA_DIR=/tmp/agentsite-build \
    sh -c 'mkdir -p /tmp/agentsite-build && python manage.py collectstatic --noinput -v 0' \
    && rm -rf /tmp/agentsite-build \
    && mkdir -p /app/data && chown agentsite:agentsite /app/data

USER agentsite
EXPOSE 8000

CMD ["daphne", "-b", "0.0.0.0", "-p", "8000", "agentsite.asgi:application"]
