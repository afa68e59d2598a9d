# How the Python peers are timed, as kjit times its kernels: calls captured into a CUDA graph,
# the median of many replays, per call. One call a graph is what a call costs alone; BACK_TO_BACK
# calls a graph what it costs between its neighbours inside a network.
import torch

BACK_TO_BACK = 20


def median_us(fn, iterations, calls=1):
    """Captures `calls` calls of fn into a CUDA graph and times `iterations` replays (µs per call)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    for _ in range(3):
        graph.replay()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iterations)]
    stops = [torch.cuda.Event(enable_timing=True) for _ in range(iterations)]
    for start, stop in zip(starts, stops):
        start.record()
        graph.replay()
        stop.record()
    torch.cuda.synchronize()
    times = sorted(1000.0 * a.elapsed_time(b) / calls for a, b in zip(starts, stops))
    return times[len(times) // 2]
