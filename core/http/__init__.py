"""The HTTP front door shared by the ninja API and the Channels consumers:
JSON bodies (bounded, with the characters no database stores refused),
validation-error shape, and the SSE transport. Authentication lives with the
API keys (`sessions_app.auth`)."""
