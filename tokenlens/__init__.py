"""tokenlens: explain why speculative decoding speeds up some text and not other text.

The package is laid out as one-way stages (corpora -> trace/bench -> run directory ->
analyze -> tables -> report). Each stage reads the files of the previous one, so the
core install (analysis, reports) never needs vLLM or torch.
"""

__version__ = "0.1.0"
