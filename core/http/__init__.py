"""The HTTP front door shared by the ninja APIs and the Channels consumers:
the ASGI edge (body limit, Host, security headers), the server guard inside
daphne, JSON bodies (bounded, with the characters no database stores
refused), the SSE transport, and errors — every error response is rendered
by `errors`, in /api/'s dialect or the Agent Protocol's. Authentication
lives with the API keys (`sessions_app.auth`)."""
