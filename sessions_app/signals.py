"""What sessions_app announces to the apps built on it."""

from django.dispatch import Signal

# Sent by `services.session_delete` (and `tombstones_remove`) inside its
# transaction, with the session row locked (`locked=`, a
# sessions_app.locking.LockedSession), before the tombstone is written. A
# receiver that raises rolls the whole delete back.
session_deleting = Signal()
