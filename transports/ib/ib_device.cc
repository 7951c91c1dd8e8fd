#include "transports/ib/ib_device.h"

#include "transports/ib/port_choice.h"

#include <arpa/inet.h>
#include <fcntl.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "topo/process_topology.h"

namespace coil::transport::ib {

namespace {

std::string readSysfs(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

// The NUMA node of an RDMA device's PCI function: from the topology (hwloc
// names the verbs devices under their NIC), else from sysfs (the fallback
// without hwloc); -1 when unknown (a software device such as rxe, or a
// machine whose firmware gives none).
int deviceNumaNode(const topo::Topology& machine, const std::string& name) {
  for (const topo::Nic& nic : machine.nics)
    for (const std::string& ib : nic.ibDevices)
      if (ib == name) return nic.where.numaNode;
  const std::string text = readSysfs("/sys/class/infiniband/" + name + "/device/numa_node");
  char* end = nullptr;
  const long node = std::strtol(text.c_str(), &end, 10);
  return !text.empty() && *end == '\0' && node >= 0 && node < (1 << 16) ? static_cast<int>(node)
                                                                        : -1;
}

std::string gidText(const ibv_gid& g) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, g.raw, buf, sizeof buf);
  return buf;
}

}  // namespace

int mtuBytes(uint8_t mtu) {
  switch (mtu) {
    case IBV_MTU_256: return 256;
    case IBV_MTU_512: return 512;
    case IBV_MTU_1024: return 1024;
    case IBV_MTU_2048: return 2048;
    case IBV_MTU_4096: return 4096;
  }
  return 0;
}

std::shared_ptr<IbDevice> IbDevice::open(std::string* why) {
  if (env::getInt("COIL_IB_DISABLE", 0, 1).value_or(0) == 1) {
    *why = "COIL_IB_DISABLE=1";
    return nullptr;
  }
  const VerbsApi* api = VerbsApi::get(why);
  if (api == nullptr) return nullptr;
  const std::string spec = env::get("COIL_IB_HCA").value_or("");
  const HcaFilter filter = HcaFilter::parse(spec);
  const auto forcedGid = env::getInt("COIL_IB_GID_INDEX", 0, 255);

  int count = 0;
  ibv_device** list = api->getDeviceList(&count);
  if (list == nullptr || count == 0) {
    if (list) api->freeDeviceList(list);
    *why = "no RDMA device (ibv_get_device_list found none)";
    return nullptr;
  }
  // The device nearest the rank first, unless COIL_IB_HCA chose
  // (port_choice.h, deviceOrder).
  std::vector<std::string> names(static_cast<size_t>(count));
  std::vector<int> nodes(names.size());
  const topo::Topology& machine = topo::processTopologyWithDevices();
  for (size_t d = 0; d < names.size(); ++d) {
    names[d] = api->getDeviceName(list[d]);
    nodes[d] = deviceNumaNode(machine, names[d]);
  }
  const std::optional<unsigned> home = topo::homeNode(machine, topo::threadCpus());
  const int rankNode = home ? static_cast<int>(*home) : -1;
  std::shared_ptr<IbDevice> chosen;
  std::ostringstream skipped;
  for (const size_t d : deviceOrder(nodes, rankNode, !spec.empty())) {
    if (chosen) break;
    const std::string& name = names[d];
    ibv_context* ctx = api->openDevice(list[d]);
    if (ctx == nullptr) {
      skipped << name << ": cannot open; ";
      continue;
    }
    ibv_device_attr dattr{};
    if (api->queryDevice(ctx, &dattr) != 0) dattr.phys_port_cnt = 1;
    for (int port = 1; port <= dattr.phys_port_cnt && !chosen; ++port) {
      if (!filter.admits(name, port)) {
        skipped << name << ":" << port << ": not in COIL_IB_HCA; ";
        continue;
      }
      ibv_port_attr pattr{};
      if (api->queryPort(ctx, static_cast<uint8_t>(port), &pattr) != 0 ||
          pattr.state != IBV_PORT_ACTIVE) {
        skipped << name << ":" << port << ": port not active; ";
        continue;
      }
      PortAddress a{};
      a.magic = kPortAddressMagic;
      a.linkLayer = pattr.link_layer;
      a.port = static_cast<uint8_t>(port);
      a.activeMtu = static_cast<uint8_t>(pattr.active_mtu);
      a.lid = pattr.lid;
      std::snprintf(a.device, sizeof a.device, "%s", name.c_str());
      std::string gidDesc;
      if (pattr.link_layer == IBV_LINK_LAYER_ETHERNET) {
        int best = -1, bestScore = -1;
        ibv_gid bestGid{};
        std::string bestType;
        const std::string typeDir = "/sys/class/infiniband/" + name + "/ports/" +
                                    std::to_string(port) + "/gid_attrs/types/";
        for (int i = 0; i < pattr.gid_tbl_len; ++i) {
          if (forcedGid && *forcedGid != i) continue;
          ibv_gid g{};
          if (api->queryGid(ctx, static_cast<uint8_t>(port), i, &g) != 0) continue;
          const std::string type = readSysfs(typeDir + std::to_string(i));
          const int score = forcedGid ? (isZeroGid(g.raw) ? -1 : 4) : gidScore(g.raw, type);
          if (score > bestScore) best = i, bestScore = score, bestGid = g, bestType = type;
        }
        if (best < 0) {
          skipped << name << ":" << port << ": no usable GID"
                  << (forcedGid ? " at COIL_IB_GID_INDEX" : " (only link-local or empty)") << "; ";
          continue;
        }
        a.gidIndex = static_cast<uint8_t>(best);
        std::memcpy(a.gid, bestGid.raw, sizeof a.gid);
        gidDesc = "GID " + std::to_string(best) + " (" +
                  (bestType.empty() ? std::string("RoCE") : bestType) + " " + gidText(bestGid) +
                  ")";
      } else {
        gidDesc = "LID " + std::to_string(pattr.lid);
      }
      auto dev = std::shared_ptr<IbDevice>(new IbDevice());
      dev->api_ = api;
      dev->context_ = ctx;
      dev->address_ = a;
      dev->description_ = name + " port " + std::to_string(port) + ", " + gidDesc + ", MTU " +
                          std::to_string(mtuBytes(a.activeMtu));
      if (nodes[d] >= 0)
        dev->description_ += ", NUMA node " + std::to_string(nodes[d]) +
                             (nodes[d] == rankNode ? " (the rank's)" : "");
      dev->pd_ = api->allocPd(ctx);
      if (dev->pd_ == nullptr) {
        skipped << name << ": cannot allocate a protection domain; ";
        dev->context_ = nullptr;
        break;
      }
      dev->registrations_ = std::make_unique<RegistrationCache>(*api, dev->pd_);
      chosen = dev;
    }
    if (!chosen) api->closeDevice(ctx);
  }
  api->freeDeviceList(list);
  if (!chosen) {
    std::string s = skipped.str();
    if (s.size() >= 2) s.resize(s.size() - 2);
    *why = "no usable RDMA port" + (s.empty() ? std::string() : " (" + s + ")");
  }
  return chosen;
}

ibv_cq* IbDevice::completionQueue(int entries) {
  if (cq_ != nullptr) {
    if (entries > cqEntries_)
      fail(coilInternalError, "ib: completion queue of ", cqEntries_, " entries, ", entries,
           " needed");
    return cq_;
  }
  channel_ = api_->createCompChannel(context_);
  if (channel_ == nullptr) failErrno("ib: ibv_create_comp_channel", errno);
  // The proxy polls it: it must never block in ibv_get_cq_event.
  const int flags = fcntl(channel_->fd, F_GETFL);
  fcntl(channel_->fd, F_SETFL, flags | O_NONBLOCK);
  cq_ = api_->createCq(context_, entries, nullptr, channel_, 0);
  if (cq_ == nullptr) failErrno("ib: ibv_create_cq", errno);
  cqEntries_ = entries;
  const int aflags = fcntl(context_->async_fd, F_GETFL);
  fcntl(context_->async_fd, F_SETFL, aflags | O_NONBLOCK);
  return cq_;
}

IbDevice::~IbDevice() {
  registrations_.reset();
  if (cq_) api_->destroyCq(cq_);
  if (channel_) api_->destroyCompChannel(channel_);
  if (pd_) api_->deallocPd(pd_);
  if (context_) api_->closeDevice(context_);
}

}  // namespace coil::transport::ib
