"""Settings for the test suite: the production settings plus the switches only
tests may flip."""

from agentsite.settings import *  # noqa: F403
from agentsite.settings import env_number

# Fault-injection hooks (turns_app.faults) are reachable only when this is on.
AGENT_FAULT_INJECTION = True
# Short by default so busy-session tests are quick; a server under test may raise it.
AGENT_SESSION_WAIT_SECONDS = env_number("AGENT_SESSION_WAIT_SECONDS", 2)
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
