"""specbench: how much faster is a speculative-decoding config than plain decoding, measured honestly."""

__version__ = "0.1.0"
