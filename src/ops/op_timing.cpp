// An op's forward timed by CUDA-graph replay (kjit/op_timing.hpp).
#include <kjit/op_timing.hpp>

#include <algorithm>

#include <kjit/driver.hpp>

namespace kjit {

double time_forward(const RuntimeOp& op, Runtime& runtime, const Stream& stream, const OpCall& call, int iters,
                    int calls_per_graph) {
    iters = std::max(1, iters);
    calls_per_graph = std::max(1, calls_per_graph);
    auto once = [&] { op.forward(runtime, stream, call); };
    once();  // compile or load
    const Graph graph = Graph::capture(stream, [&] {
        for (int i = 0; i < calls_per_graph; ++i) once();
    });
    graph.launch(stream);
    std::vector<Event> marks;
    for (int i = 0; i <= iters; ++i) marks.emplace_back(stream.device());
    marks[0].record(stream);
    for (int i = 1; i <= iters; ++i) {
        graph.launch(stream);
        marks[i].record(stream);
    }
    stream.synchronize();
    std::vector<double> us;
    for (int i = 1; i <= iters; ++i) us.push_back(1000.0 * Event::elapsed_ms(marks[i - 1], marks[i]) / calls_per_graph);
    std::ranges::nth_element(us, us.begin() + us.size() / 2);
    return us[us.size() / 2];
}

}  // namespace kjit
