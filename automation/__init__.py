"""Operations: the command line (``python -m automation``), the Automation API driver, preflight,
progress, the offline render and the weights bake. The performance instruments (perf/), the
guardrails (guardrails/) and the twin (twin/) are folders of their own; this one's CLI only
dispatches to their subcommands."""
