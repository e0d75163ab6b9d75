"""phaselens: cost and latency attribution for LLM inference, split into prefill and decode."""

__version__ = "0.1.0"
