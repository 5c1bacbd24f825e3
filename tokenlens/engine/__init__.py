"""Running vLLM: config objects, a worker subprocess, and the counters it reports.

The parent process never imports vLLM. :class:`~tokenlens.engine.runner.Engine` starts
``python -m tokenlens.engine.worker`` and talks to it over a local socket, so a user's
script needs no ``if __name__ == "__main__"`` guard (vLLM's spawned processes re-import
the *worker's* main module, not the user's) and a crashed engine cannot take the
caller down with it.
"""
