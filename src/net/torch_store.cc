#include "net/torch_store.h"

#include <cstring>

#include "core/error.h"

namespace coil {
namespace {

// torch's QueryType values, and the answers we read.
enum class Query : uint8_t { kValidate = 0, kSet = 1, kGet = 3, kWait = 6, kNumKeys = 7 };
constexpr uint32_t kValidationMagic = 0x3C85F7CE;
constexpr uint8_t kStopWaiting = 0;
// A value we would never store: a larger length means we lost the framing.
constexpr uint64_t kMaxValueBytes = 1 << 20;
// More keys than a store of a job could hold: an answer this large to
// GETNUMKEYS did not come from a TCPStore.
constexpr int64_t kMaxKeys = int64_t{1} << 40;

// Builds one query in torch's framing (host byte order: torch writes its
// integers raw, and both ends of a store run little-endian machines).
class QueryBuilder {
 public:
  explicit QueryBuilder(Query type) { bytes_.push_back(static_cast<uint8_t>(type)); }
  template <typename T>
  QueryBuilder& value(T v) {
    append(&v, sizeof v);
    return *this;
  }
  QueryBuilder& bytes(const void* data, size_t n) {
    value<uint64_t>(n);
    append(data, n);
    return *this;
  }
  QueryBuilder& string(const std::string& s) { return bytes(s.data(), s.size()); }
  const std::vector<uint8_t>& done() const { return bytes_; }

 private:
  // resize + memcpy rather than vector::insert of a pointer range, which
  // GCC 12 misreads as an out-of-bounds copy (-Warray-bounds) once inlined.
  void append(const void* data, size_t n) {
    const size_t at = bytes_.size();
    bytes_.resize(at + n);
    if (n > 0) std::memcpy(bytes_.data() + at, data, n);
  }
  std::vector<uint8_t> bytes_;
};

}  // namespace

TorchStoreClient TorchStoreClient::connect(const SocketAddress& address,
                                           const Deadline& deadline) {
  TorchStoreClient client(Socket::connect(address, deadline), address);
  client.send(QueryBuilder(Query::kValidate).value(kValidationMagic).done(), deadline);
  // The first answer proves a TCPStore listens: GETNUMKEYS, which every torch
  // 2.x serves (PING came in 2.5; the store of torch 2.4 closes a connection
  // that sends one). A server that closes on the magic fails the receive.
  client.send(QueryBuilder(Query::kNumKeys).done(), deadline);
  int64_t keys = -1;
  client.receive(&keys, sizeof keys, deadline);
  if (keys < 0 || keys > kMaxKeys)
    fail(coilRemoteError, client.name(), " answered GETNUMKEYS with ", keys,
         ": it does not speak torch's TCPStore protocol (is MASTER_PORT the port of torchrun's "
         "store?); set COIL_COMM_ID=host:port to name a rendezvous root instead");
  return client;
}

void TorchStoreClient::set(const std::string& key, const std::vector<uint8_t>& value,
                           const Deadline& deadline) {
  send(QueryBuilder(Query::kSet).string(key).bytes(value.data(), value.size()).done(), deadline);
}

std::vector<uint8_t> TorchStoreClient::waitAndGet(const std::string& key,
                                                  const Deadline& deadline) {
  // WAIT answers once the key exists. At our deadline we just close the
  // connection: the server forgets the waits of a closed connection.
  send(QueryBuilder(Query::kWait).value<uint64_t>(1).string(key).done(), deadline);
  uint8_t answer = 0xff;
  try {
    receive(&answer, 1, deadline);
  } catch (const Error& e) {
    if (e.code() != coilTimeout) throw;
    fail(coilTimeout, "no rank set '", key, "' in ", name(), " within ", deadline.totalMs(),
         " ms (rank 0 publishes coil's unique id there: did it start, and call "
         "coilCommInitFromEnv as often as this rank?)");
  }
  if (answer != kStopWaiting)
    fail(coilRemoteError, name(), " answered WAIT for '", key, "' with ", int{answer});
  send(QueryBuilder(Query::kGet).string(key).done(), deadline);
  uint64_t length = 0;
  receive(&length, sizeof length, deadline);
  if (length > kMaxValueBytes)
    fail(coilRemoteError, name(), " sent a value of ", length, " bytes for '", key, "'");
  std::vector<uint8_t> value(length);
  receive(value.data(), value.size(), deadline);
  return value;
}

void TorchStoreClient::send(const std::vector<uint8_t>& query, const Deadline& deadline) {
  const std::string peer = name();
  socket_.sendAll(query.data(), query.size(), deadline, nullptr, peer.c_str());
}

void TorchStoreClient::receive(void* data, size_t bytes, const Deadline& deadline) {
  const std::string peer = name();
  socket_.recvAll(data, bytes, deadline, nullptr, peer.c_str());
}

}  // namespace coil
