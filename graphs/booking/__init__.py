"""The `booking` graph: a tool-calling agent that books tables.

It is the example of a graph whose tools have side effects — `book_table`
creates a `Booking` row, applied once with the turn's commit
(graphs.runtime.effects), and may call an outside reservation service with
a key that is stable across retries — and that asks a human before acting:
LangChain's `HumanInTheLoopMiddleware` pauses it for approval before
`book_table` runs, and the commit books only what still fits the slot.
"""
