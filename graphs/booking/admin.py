from django.contrib import admin

from graphs.booking.models import Booking


@admin.register(Booking)
class BookingAdmin(admin.ModelAdmin):
    """Read-only: bookings are made by committed turns, nothing else."""

    list_display = ("reference", "name", "date", "time", "party_size", "created_at")
    search_fields = ("reference", "name")
    ordering = ("-created_at",)
    show_full_result_count = False
    readonly_fields = (
        "reference",
        "name",
        "date",
        "time",
        "party_size",
        "session_id",
        "turn_id",
        "confirmation",
        "created_at",
    )
    fields = readonly_fields

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
