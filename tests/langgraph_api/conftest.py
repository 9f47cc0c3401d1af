from tests.system.server import servers  # noqa: F401  (the fixture, for the SDK tests)
