"""The performance instruments: the autoscaling simulator (``simulate/``), the streaming load tester
(``loadtest/``) and the statistics they share (``stats.py``). Reached through ``python -m automation
simulate`` and ``loadtest``; the component package imports nothing from here."""
