#include "bootstrap/store_rendezvous.h"

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "net/torch_store.h"

namespace coil {

UniqueIdData uniqueIdThroughStore(const StoreRendezvous& store, int rank) {
  static std::atomic<uint64_t> calls{0};
  const std::string key = store.keyPrefix + "/" + std::to_string(calls.fetch_add(1));
  const Deadline deadline = Deadline::after(rootTimeoutMsFromEnv());
  TorchStoreClient client = TorchStoreClient::connect(store.store, deadline);
  if (rank == 0) {
    UniqueIdData id = makeUniqueId();
    const coilUniqueId bytes = encodeUniqueId(id);
    const auto* p = reinterpret_cast<const uint8_t*>(bytes.internal);
    client.set(key, std::vector<uint8_t>(p, p + sizeof bytes.internal), deadline);
    COIL_INFO(kBoot, "published the unique id (root ", id.root.toString(), ") as '", key,
              "' in torchrun's store at ", store.store.toString());
    return id;
  }
  const std::vector<uint8_t> value = client.waitAndGet(key, deadline);
  coilUniqueId bytes;
  if (value.size() != sizeof bytes.internal)
    fail(coilRemoteError, "'", key, "' in torchrun's store at ", store.store.toString(), " holds ",
         value.size(), " bytes, not a coil unique id (", sizeof bytes.internal, " bytes)");
  std::memcpy(bytes.internal, value.data(), value.size());
  COIL_INFO(kBoot, "read the unique id '", key, "' from torchrun's store at ",
            store.store.toString());
  return decodeUniqueId(bytes);
}

}  // namespace coil
