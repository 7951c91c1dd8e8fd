#include "algorithms/trace_executor.h"

#include <sstream>

namespace coil::algo {

const char* primitiveName(PrimitiveKind kind) {
  switch (kind) {
    case PrimitiveKind::Send: return "send";
    case PrimitiveKind::Recv: return "recv";
    case PrimitiveKind::RecvReduceSend: return "recvReduceSend";
    case PrimitiveKind::RecvReduceCopySend: return "recvReduceCopySend";
    case PrimitiveKind::RecvCopySend: return "recvCopySend";
    case PrimitiveKind::RecvReduceCopy: return "recvReduceCopy";
    case PrimitiveKind::RecvReduce: return "recvReduce";
    case PrimitiveKind::Copy: return "copy";
    case PrimitiveKind::SendRecv: return "sendRecv";
  }
  return "?";
}

std::string describe(const TraceStep& s, int rank) {
  std::ostringstream os;
  os << primitiveName(s.kind) << ' ';
  if (s.from >= 0) os << s.from << "->";
  os << rank;
  if (s.to >= 0) os << "->" << s.to;
  if (s.inOffset != SIZE_MAX) os << " [" << s.inOffset << "]=>";
  os << " [" << s.offset << ",+" << s.count << ")";
  return os.str();
}

void TraceExecutor::send(int to, size_t o, size_t c) { record(PrimitiveKind::Send, -1, to, o, c); }
void TraceExecutor::recv(int from, size_t o, size_t c) {
  record(PrimitiveKind::Recv, from, -1, o, c);
}
void TraceExecutor::recvReduceSend(int from, int to, size_t o, size_t c) {
  record(PrimitiveKind::RecvReduceSend, from, to, o, c);
}
void TraceExecutor::recvReduceCopySend(int from, int to, size_t o, size_t c) {
  record(PrimitiveKind::RecvReduceCopySend, from, to, o, c);
}
void TraceExecutor::recvCopySend(int from, int to, size_t o, size_t c) {
  record(PrimitiveKind::RecvCopySend, from, to, o, c);
}
void TraceExecutor::recvReduceCopy(int from, size_t o, size_t c) {
  record(PrimitiveKind::RecvReduceCopy, from, -1, o, c);
}
void TraceExecutor::recvReduce(int from, size_t o, size_t c) {
  record(PrimitiveKind::RecvReduce, from, -1, o, c);
}
void TraceExecutor::copy(size_t i, size_t o, size_t c) {
  record(PrimitiveKind::Copy, -1, -1, o, c, i);
}
void TraceExecutor::sendRecv(int to, size_t i, int from, size_t o, size_t c) {
  record(PrimitiveKind::SendRecv, from, to, o, c, i);
}

}  // namespace coil::algo
