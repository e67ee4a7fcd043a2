// Streams, events, synchronisation and CUDA graph capture.
#include <cstdint>
#include <utility>

#include <fmt/format.h>

#include "driver/cuda_driver.h"
#include "driver/driver_api.h"
#include "mlajit/error.h"

namespace mlajit::driver {

void stream_synchronize(CUstream stream) {
  check(detail::api().cuStreamSynchronize(stream), "cuStreamSynchronize");
}

void context_synchronize() {
  // cuCtxSynchronize_v2: a null context means the calling thread's current one.
  check(detail::api().cuCtxSynchronize(nullptr), "cuCtxSynchronize");
}

CUcontext stream_context(CUstream stream) {
  CUcontext context = nullptr;
  CUgreenCtx green = nullptr;  // cuStreamGetCtx_v2 also reports a green context, unused here
  check(detail::api().cuStreamGetCtx(stream, &context, &green), "cuStreamGetCtx");
  return context;
}

bool stream_on_device(CUstream stream, int ordinal) {
  const auto handle = reinterpret_cast<std::uintptr_t>(stream);
  if (handle <= 2) return true;  // CU_STREAM_LEGACY / CU_STREAM_PER_THREAD follow the current context
  return stream_context(stream) == detail::primary_context(ordinal);
}

Stream::Stream() {
  detail::ensure_current_context();
  // Non-blocking: no implicit synchronisation with the legacy default stream.
  check(detail::api().cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
}

Stream::~Stream() {
  if (!stream_) return;
  if (const detail::Api* cu = detail::api_if_loaded()) {
    warn_in_destructor(cu->cuStreamDestroy(stream_), "cuStreamDestroy");
  }
}

Event::Event() {
  detail::ensure_current_context();
  check(detail::api().cuEventCreate(&event_, CU_EVENT_DEFAULT), "cuEventCreate");
}

Event::~Event() {
  if (!event_) return;
  if (const detail::Api* cu = detail::api_if_loaded()) {
    warn_in_destructor(cu->cuEventDestroy(event_), "cuEventDestroy");
  }
}

void Event::record(CUstream stream) {
  check(detail::api().cuEventRecord(event_, stream), "cuEventRecord");
}

void Event::synchronize() const {
  check(detail::api().cuEventSynchronize(event_), "cuEventSynchronize");
}

float Event::elapsed_ms_since(const Event& start) const {
  const detail::Api& cu = detail::api();
  check(cu.cuEventSynchronize(event_), "cuEventSynchronize");
  float ms = 0.0f;
  check(cu.cuEventElapsedTime(&ms, start.event_, event_), "cuEventElapsedTime");
  return ms;
}

void Graph::begin_capture(CUstream stream) {
  check(detail::api().cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL),
        "cuStreamBeginCapture");
}

Graph Graph::end_capture(CUstream stream) {
  const detail::Api& cu = detail::api();
  Graph graph;
  check(cu.cuStreamEndCapture(stream, &graph.graph_), "cuStreamEndCapture");
  check(cu.cuGraphInstantiateWithFlags(&graph.exec_, graph.graph_, 0),
        "cuGraphInstantiateWithFlags");
  return graph;
}

Graph::~Graph() {
  const detail::Api* cu = detail::api_if_loaded();
  if (!cu) return;
  if (exec_) warn_in_destructor(cu->cuGraphExecDestroy(exec_), "cuGraphExecDestroy");
  if (graph_) warn_in_destructor(cu->cuGraphDestroy(graph_), "cuGraphDestroy");
}

Graph::Graph(Graph&& other) noexcept
    : graph_(std::exchange(other.graph_, nullptr)), exec_(std::exchange(other.exec_, nullptr)) {}

Graph& Graph::operator=(Graph&& other) noexcept {
  if (this == &other) return *this;
  Graph old(std::move(*this));  // destroys what this held
  graph_ = std::exchange(other.graph_, nullptr);
  exec_ = std::exchange(other.exec_, nullptr);
  return *this;
}

void Graph::launch(CUstream stream) const {
  if (!exec_) {
    throw Error(ErrorCode::kInvalidArgument,
                "launch of an empty Graph: build one with Graph::begin_capture/end_capture");
  }
  check(detail::api().cuGraphLaunch(exec_, stream), "cuGraphLaunch");
}

}  // namespace mlajit::driver
