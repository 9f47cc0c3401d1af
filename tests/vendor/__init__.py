"""Test suites of other projects, vendored unmodified, and the harnesses that
run them against agentsite (docs/agent-protocol.md, "Conformance")."""
