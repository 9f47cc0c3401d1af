from tests.system import report


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not report.ROWS:
        return
    terminalreporter.section("failure-window report")
    terminalreporter.write_line(report.table())
    path = report.write()
    if path:
        terminalreporter.write_line(f"(written to {path.relative_to(report.ROOT)})")
