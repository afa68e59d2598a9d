// CUDA graphs: stream capture, instantiation, replay.
#include <kjit/driver.hpp>

#include "cuda/driver_api.hpp"

namespace kjit {

void detail::destroy_graph_exec(CUgraphExec_st* exec) noexcept { release(&Driver::cuGraphExecDestroy, exec); }

void Graph::begin_capture(const Stream& stream) {
    stream.device().make_current();
    KJIT_CU(cuStreamBeginCapture, stream.handle(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
}

void Graph::abandon_capture(const Stream& stream) noexcept {
    try {
        CUgraph graph = nullptr;
        if (detail::driver().cuStreamEndCapture(stream.handle(), &graph) == CUDA_SUCCESS && graph)
            detail::driver().cuGraphDestroy(graph);
    } catch (...) {}
}

Graph Graph::end_capture(const Stream& stream) {
    CUgraph graph = nullptr;
    KJIT_CU(cuStreamEndCapture, stream.handle(), &graph);
    CUgraphExec exec = nullptr;
    const CUresult rc = detail::driver().cuGraphInstantiate(&exec, graph, 0);
    detail::driver().cuGraphDestroy(graph);
    detail::check(rc, "cuGraphInstantiate");
    return Graph(exec);
}

void Graph::launch(const Stream& stream) const { KJIT_CU(cuGraphLaunch, exec_.get(), stream.handle()); }

}  // namespace kjit
