"""Replay: the events of greedy speculative decoding for any k, without decoding again.

For greedy decoding the target's tokens do not depend on the drafter, so a traced run
(any method, including none) fixes every token the target emits. What a drafter would
have proposed at each step follows from those tokens: a draft model's proposal is its
own greedy continuation of the target's prefix (one teacher-forced vLLM pass gives its
argmax at every position), and vLLM's n-gram proposals are a function of the token
sequence. Stepping through vLLM's scheduling rules then gives, for every k, the events
a real trace would have recorded (docs/replay.md).

- :mod:`tokenlens.replay.source`: the run replayed from, checked and unpacked.
- :mod:`tokenlens.replay.steps`: vLLM's step rules, as a pure function of tokens.
- :mod:`tokenlens.replay.ngram`: vLLM's n-gram proposals over every prefix (the kernel
  itself runs in the engine room: :mod:`tokenlens.engine.ngram_kernel`).
- :mod:`tokenlens.replay.passes`: the vLLM passes (drafter, target look-ahead), each the
  engine's own ``greedy`` operation (:mod:`tokenlens.engine.passes`).
- :mod:`tokenlens.replay.predictions`: what the passes found (``predictions.parquet``).
- :mod:`tokenlens.replay.run`: ``tokenlens replay``: passes, steps, run directories.
- :mod:`tokenlens.replay.compare`: a replayed run against a traced one, row for row.
"""
