from django.apps import AppConfig


class BookingConfig(AppConfig):
    name = "graphs.booking"
    label = "booking"
    verbose_name = "Bookings (the booking graph)"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from graphs.booking.offline import booking_answer
        from graphs.booking.tools import EFFECT, create_booking
        from graphs.intake import offline
        from graphs.runtime import effects

        effects.register(EFFECT, create_booking)
        offline.register_task("booking", booking_answer)
