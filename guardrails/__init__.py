"""Guardrails of upgrades and pins: the preview diff of a stack against its last render (``diff.py``),
the committed URN snapshots (``urns.py``), pin hygiene (``pins.py``) and the manifest gate every
render passes (``manifest_gate.py``). ``guardrails.py`` holds their ``python -m automation``
subcommands."""
