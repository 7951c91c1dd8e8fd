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
    case PrimitiveKind::RecvBlock: return "recvBlock";
    case PrimitiveKind::WaitAll: return "waitAll";
    case PrimitiveKind::ReduceBlocks: return "reduceBlocks";
    case PrimitiveKind::PackExchange: return "pack";
    case PrimitiveKind::UnpackExchange: return "unpack";
    case PrimitiveKind::ReduceExchange: return "reduceExchange";
    case PrimitiveKind::Put: return "put";
    case PrimitiveKind::Post: return "post";
    case PrimitiveKind::Wait: return "wait";
    case PrimitiveKind::ReduceToOutput: return "reduceToOutput";
    case PrimitiveKind::ReduceToSlot: return "reduceToSlot";
    case PrimitiveKind::CopyOut: return "copyOut";
  }
  return "?";
}

namespace {

// "put in[0,+4) -> slot0[0]", "reduceToSlot slot0[2,+2) -> slot1", ...
std::string describeWindow(const TraceStep& s) {
  std::ostringstream os;
  os << primitiveName(s.kind) << ' ';
  auto span = [&](size_t at) { os << '[' << at << ",+" << s.count << ')'; };
  switch (s.kind) {
    case PrimitiveKind::Put:
      os << "in";
      span(s.inOffset);
      os << " -> slot" << s.slot << (s.inlined ? " inline" : "") << '[' << s.offset << ']';
      break;
    case PrimitiveKind::Post: os << s.step << " (slot" << s.slot << ')'; break;
    case PrimitiveKind::Wait: os << "all " << s.step; break;
    case PrimitiveKind::ReduceToOutput:
      os << "slot" << s.slot << (s.inlined ? " inline" : "");
      span(s.inOffset);
      os << (s.ownFromSlot ? "" : " (own: in)") << " -> out[" << s.offset << ']';
      break;
    case PrimitiveKind::ReduceToSlot:
      os << "slot" << s.slot;
      span(s.offset);
      os << " (own: in[" << s.inOffset << "]) -> slot" << s.toSlot;
      break;
    case PrimitiveKind::CopyOut:
      os << s.from << ":slot" << s.slot;
      span(s.inOffset);
      os << " -> out[" << s.offset << ']';
      break;
    default: break;
  }
  return os.str();
}

// "pack in[0,+4) -> ex[4]", "unpack ex[4,+4) -> out[0]", "reduceExchange
// ex n x [+4) -> out[0]".
std::string describeExchange(const TraceStep& s) {
  std::ostringstream os;
  os << primitiveName(s.kind) << ' ';
  switch (s.kind) {
    case PrimitiveKind::PackExchange:
      if (s.count == 0) return os.str() + "record";
      os << "in[" << s.inOffset << ",+" << s.count << ") -> ex[" << s.offset << ']';
      break;
    case PrimitiveKind::UnpackExchange:
      os << "ex[" << s.inOffset << ",+" << s.count << ") -> out[" << s.offset << ']';
      break;
    default: os << "ex n x [+" << s.count << ") -> out[" << s.offset << ']'; break;
  }
  return os.str();
}

}  // namespace

std::string describe(const TraceStep& s, int rank) {
  if (isWindowKind(s.kind)) return describeWindow(s);
  if (isExchangeKind(s.kind)) return describeExchange(s);
  if (s.kind == PrimitiveKind::WaitAll) return primitiveName(s.kind);  // no span of its own
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
