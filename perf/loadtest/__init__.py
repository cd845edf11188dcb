"""Streaming load tester for OpenAI-compatible endpoints: ``python -m automation loadtest`` or
``asyncio.run(perf.loadtest.runner.run(LoadTestConfig(...)))``; see runner.py."""
