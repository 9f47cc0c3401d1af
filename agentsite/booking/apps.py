from django.apps import AppConfig


class BookingConfig(AppConfig):
    name = "agentsite.booking"
    label = "booking"
    verbose_name = "Bookings (the booking graph)"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from agentsite.agent import effects, offline
        from agentsite.booking.offline import booking_answer
        from agentsite.booking.tools import EFFECT, create_booking

        effects.register(EFFECT, create_booking)
        offline.register_task("booking", booking_answer)
