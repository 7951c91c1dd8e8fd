// Exported collectives: argument validation, then the communicator.
#include "api/guard.h"
#include "reduce/reduce.h"

using coil::api::guarded;

namespace coil::api {
namespace {

/// Checks what every collective with a send and a receive buffer needs.
void checkBuffers(const void* sendbuff, size_t sendBytes, const void* recvbuff, size_t recvBytes,
                  coilStream_t stream) {
  if (stream != nullptr)
    fail(coilInvalidArgument,
         "stream must be NULL: this build moves host buffers and completes before returning");
  if (sendBytes > 0 && sendbuff == nullptr) fail(coilInvalidArgument, "sendbuff is NULL");
  if (recvBytes > 0 && recvbuff == nullptr) fail(coilInvalidArgument, "recvbuff is NULL");
  if (sendbuff == recvbuff || sendBytes == 0 || recvBytes == 0) return;  // in-place is fine
  auto s = reinterpret_cast<uintptr_t>(sendbuff);
  auto r = reinterpret_cast<uintptr_t>(recvbuff);
  if (s < r + recvBytes && r < s + sendBytes)
    fail(coilInvalidArgument, "sendbuff and recvbuff overlap partially (", sendbuff, " + ",
         sendBytes, " bytes vs ", recvbuff, " + ", recvBytes,
         " bytes); pass the same pointer for in-place");
}

size_t checkedBytes(size_t count, coilDataType_t type) {
  size_t size = reduce::typeSize(type);
  if (count > SIZE_MAX / size) fail(coilInvalidArgument, "count ", count, " overflows size_t bytes");
  return count * size;
}

void checkType(int type) {
  if (!reduce::validType(type)) fail(coilInvalidArgument, "invalid datatype ", type);
}

void checkOp(int op) {
  if (!reduce::validOp(op)) fail(coilInvalidArgument, "invalid reduction op ", op);
}

}  // namespace
}  // namespace coil::api

using namespace coil;

extern "C" coilResult_t coilAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                      coilDataType_t datatype, coilRedOp_t op, coilComm_t comm,
                                      coilStream_t stream) {
  return guarded("coilAllReduce", comm, [&] {
    Communicator& c = api::usable(comm);
    api::InFlight busy(comm);
    api::checkType(datatype);
    api::checkOp(op);
    size_t bytes = api::checkedBytes(count, datatype);
    api::checkBuffers(sendbuff, bytes, recvbuff, bytes, stream);
    c.allReduce(sendbuff, recvbuff, count, datatype, op);
  });
}
