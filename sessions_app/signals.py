"""What sessions_app announces to the apps built on it."""

from django.dispatch import Signal

# Sent by `services.session_delete` inside its transaction, with the session
# row locked (`session=`), before the tombstone is written. A receiver that
# raises rolls the whole delete back.
session_deleting = Signal()
