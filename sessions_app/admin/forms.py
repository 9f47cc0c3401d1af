"""The forms of the session admin ("Set fields") and the API key admin (add)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from django import forms

from core.admin_display import display_value
from sessions_app.models import ApiKey

if TYPE_CHECKING:
    from sessions_app.models import AgentSession


class SetFieldsForm(forms.Form):
    """One input per form field, pre-filled with the current value; only the
    inputs the operator changed are sent, and an emptied input clears the
    field. `_expected_version` carries the version the operator saw (field
    names in a form spec start with a letter, so it cannot collide)."""

    VERSION = "_expected_version"

    def __init__(self, *args: Any, session: AgentSession, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields[self.VERSION] = forms.IntegerField(widget=forms.HiddenInput, initial=session.version)
        for spec in session.form:
            name, kind = spec["name"], spec["type"]
            label = f"{name}{' *' if spec.get('required') else ''}"
            help_text = f"{kind}: {spec.get('description') or ''}".rstrip(": ")
            current = session.fields.get(name)
            if kind == "enum":
                field: forms.Field = forms.ChoiceField(
                    choices=[("", "—")] + [(o, o) for o in spec.get("enum") or []],
                    required=False,
                )
            elif kind == "boolean":
                field = forms.ChoiceField(choices=[("", "—"), ("yes", "yes"), ("no", "no")], required=False)
            else:
                field = forms.CharField(required=False, strip=True)
                if kind == "date":
                    field.widget.attrs["placeholder"] = "YYYY-MM-DD"
            field.label = label
            field.help_text = help_text
            field.initial = "" if current is None else display_value(current)
            field.widget.attrs.setdefault("class", "vTextField")
            self.fields[name] = field

    def changed_values(self) -> dict[str, Any]:
        return {name: (self.cleaned_data[name] or None) for name in self.changed_data if name != self.VERSION}


class ApiKeyAddForm(forms.ModelForm):
    class Meta:
        model = ApiKey
        fields = ("owner",)
        help_texts: ClassVar = {"owner": "Sessions created with this key belong to this owner."}
