from django.apps import AppConfig


class TurnsAppConfig(AppConfig):
    name = "turns_app"
    verbose_name = "Turns"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from sessions_app.signals import session_deleting
        from turns_app.checkpoint_tables import upgrade_after_migrate
        from turns_app.services import session_turns_purge
        from turns_app.store_tables import register as register_store_writes
        from turns_app.store_tables import upgrade_after_migrate as upgrade_store

        session_deleting.connect(session_turns_purge, dispatch_uid="turns_app.purge")
        # Migration 0002 installs the checkpointer once; this applies the
        # schema migrations a newer LangGraph brings, on every `migrate`.
        post_migrate.connect(upgrade_after_migrate, sender=self, dispatch_uid="turns_app.checkpointer")
        post_migrate.connect(upgrade_store, sender=self, dispatch_uid="turns_app.store")
        # A graph's store writes are effects its turn's commit applies.
        register_store_writes()
