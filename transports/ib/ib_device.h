// IbDevice: the HCA port a communicator's ib transport uses, opened.
//
// Choosing it follows NCCL's variables:
//   COIL_IB_HCA        which devices and ports: "mlx5_0:1,mlx5_1" (prefixes),
//                      "=mlx5_0" (exact names), "^mlx5_2" (all but these);
//                      default: every device. The first listed device with an
//                      ACTIVE port is taken.
//   COIL_IB_GID_INDEX  the GID to use on RoCE; default: chosen (below).
// On RoCE (link layer Ethernet) the GID is picked automatically: RoCE v2 with
// an IPv4-mapped address first, then RoCE v2, then RoCE v1; link-local
// (fe80::) GIDs never, and zero GIDs never. On InfiniBand the port's LID
// addresses it.
//
// It also owns what every queue pair of the communicator shares: the
// protection domain, one completion queue and its event channel (so one
// poll() covers all peers), and the async event descriptor.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <string>

#include "transports/ib/registration_cache.h"
#include "transports/ib/verbs_api.h"

namespace coil::transport::ib {

/// What a rank publishes about its port (transport::Address bytes).
struct PortAddress {
  uint32_t magic;
  uint8_t linkLayer;  // IBV_LINK_LAYER_*
  uint8_t port;
  uint8_t activeMtu;  // enum ibv_mtu
  uint8_t gidIndex;
  uint16_t lid;
  uint16_t reserved;
  uint8_t gid[16];
  char device[32];
};
inline constexpr uint32_t kPortAddressMagic = 0x42494c43;  // "CLIB"

class IbDevice {
 public:
  /// Opens the device and port the variables select. nullptr and *why
  /// when there is none usable (no library, no device, no active port, no
  /// usable GID) — the transport is then unusable on this rank.
  static std::shared_ptr<IbDevice> open(std::string* why);
  ~IbDevice();
  IbDevice(const IbDevice&) = delete;
  IbDevice& operator=(const IbDevice&) = delete;

  const VerbsApi& api() const { return *api_; }
  ibv_context* context() const { return context_; }
  ibv_pd* pd() const { return pd_; }
  const PortAddress& address() const { return address_; }
  bool roce() const { return address_.linkLayer == IBV_LINK_LAYER_ETHERNET; }
  /// "rxe0 port 1, GID 1 (RoCE v2 ::ffff:10.0.0.1), MTU 1024": for logs.
  const std::string& description() const { return description_; }

  /// The completion queue and channel, created on first use with room for
  /// `entries` completions (a later, larger need is an error: connect runs
  /// once per transport).
  ibv_cq* completionQueue(int entries);
  ibv_comp_channel* completionChannel() const { return channel_; }
  /// Buffers the application registered (coilCommRegister).
  RegistrationCache& registrations() { return *registrations_; }

 private:
  IbDevice() = default;

  const VerbsApi* api_ = nullptr;
  ibv_context* context_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  int cqEntries_ = 0;
  std::unique_ptr<RegistrationCache> registrations_;  // before pd_ goes
  PortAddress address_{};
  std::string description_;
};

/// "1024" for IBV_MTU_1024.
int mtuBytes(uint8_t mtu);

}  // namespace coil::transport::ib
