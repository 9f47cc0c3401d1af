"""An owner's assistants and every version of each. The assistant row holds
its current version's values (what a run uses); a version row is never
changed, so `set latest` can go back to any of them."""

from __future__ import annotations

from django.db import models


class Assistant(models.Model):
    owner = models.CharField(max_length=150)
    # Unique per owner, not globally: an id another owner holds must not be
    # refused as taken, which would tell that it exists.
    assistant_id = models.UUIDField()
    graph_id = models.CharField(max_length=64)
    name = models.CharField(max_length=255, default="Untitled")
    description = models.TextField(null=True, blank=True)  # noqa: DJ001  (LangGraph answers null for none)
    config = models.JSONField(default=dict, blank=True)
    context = models.JSONField(default=dict, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    version = models.IntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "agent_assistants"
        constraints = [models.UniqueConstraint(fields=["owner", "assistant_id"], name="agent_assistant_per_owner")]
        indexes = [models.Index(fields=["owner", "-created_at"], name="agent_assistant_owner_new")]

    def __str__(self) -> str:
        return f"{self.name} ({self.graph_id}, v{self.version})"


class AssistantVersion(models.Model):
    assistant = models.ForeignKey(Assistant, on_delete=models.CASCADE, related_name="versions")
    version = models.IntegerField()
    graph_id = models.CharField(max_length=64)
    name = models.CharField(max_length=255)
    description = models.TextField(null=True, blank=True)  # noqa: DJ001  (LangGraph answers null for none)
    config = models.JSONField(default=dict, blank=True)
    context = models.JSONField(default=dict, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "agent_assistant_versions"
        constraints = [models.UniqueConstraint(fields=["assistant", "version"], name="agent_assistant_version")]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"
