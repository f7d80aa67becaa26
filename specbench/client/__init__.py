"""One streamed OpenAI-compatible request → ``RequestRecord``.

Timing is ``time.perf_counter()`` throughout. Over ``specbench.client.wire`` (plain http, the default)
a chunk's time is the kernel's receive time of the read that carried it; over aiohttp (TLS) it is
when the loop got the read; over the openai SDK (``sdk``, ``load.client: openai``) when the SDK
yielded the chunk. The client asks for cumulative usage on every chunk (vLLM's
``continuous_usage_stats``), so each chunk's token count is exact; when a server does not send
it, the record says which fallback was used.

Every value a server sends is checked where it enters: a wrong type fails that request
(``bad server value: …``), and token counts that contradict the stream are either replaced by a
source that agrees with it (``token_warning`` says so) or fail the request.

``request``: what is sent; ``send``: the transports and ``stream_request``; ``sdk``: the openai SDK one; ``sse``: SSE lines;
``stream``: one response's chunks parsed; ``tokens``: its counts settled; ``checks``: server values.
"""

from .checks import STATS_KEYS, TOKEN_CAP, BadValue
from .request import RequestSpec
from .send import Transport, close_transport, open_transport, stream_request, transport_clock
from .stream import ResponseStream
from .tokens import SOURCE_NONE, SOURCE_TOKEN_IDS, SOURCE_USAGE, SOURCE_USAGE_TOTAL

__all__ = [
    "SOURCE_NONE", "SOURCE_TOKEN_IDS", "SOURCE_USAGE", "SOURCE_USAGE_TOTAL", "STATS_KEYS", "TOKEN_CAP", "BadValue",
    "RequestSpec", "ResponseStream", "Transport", "close_transport", "open_transport", "stream_request", "transport_clock",
]
