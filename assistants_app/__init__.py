"""Assistants: a registered graph with a configuration of its own (config,
context, metadata, name, description), owned by an API key's owner and
versioned, as LangGraph's server keeps them (docs/agent-protocol.md,
"Assistants"). The graph-named system assistants are not rows: one per
registered graph, the same for every owner.

    models.py     Assistant (table agent_assistants) and AssistantVersion
                  (agent_assistant_versions), one row per version
    services.py   create, patch (a new version), set latest, delete
    selectors.py  an owner's assistant by id, search and count (system
                  assistants merged in), versions
    admin.py      the assistants and their versions, read-only
"""
