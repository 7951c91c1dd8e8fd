#include "transports/ib/verbs_api.h"

#include <dlfcn.h>

#include <mutex>

namespace coil::transport::ib {

namespace {

struct Loaded {
  VerbsApi api{};
  const VerbsApi* table = nullptr;
  std::string why;
};

template <typename Fn>
bool resolve(void* lib, const char* name, Fn* out, std::string* why) {
  *out = reinterpret_cast<Fn>(dlsym(lib, name));
  if (*out == nullptr) *why = std::string("libibverbs.so.1 has no ") + name;
  return *out != nullptr;
}

Loaded load() {
  Loaded l;
  // Never unloaded: provider libraries it loads keep pointers into it.
  void* lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* e = dlerror();
    l.why = std::string("cannot load libibverbs.so.1 (install rdma-core's libibverbs1): ") +
            (e ? e : "unknown error");
    return l;
  }
  VerbsApi& a = l.api;
  std::string& w = l.why;
  const bool ok = resolve(lib, "ibv_get_device_list", &a.getDeviceList, &w) &&
                  resolve(lib, "ibv_free_device_list", &a.freeDeviceList, &w) &&
                  resolve(lib, "ibv_get_device_name", &a.getDeviceName, &w) &&
                  resolve(lib, "ibv_open_device", &a.openDevice, &w) &&
                  resolve(lib, "ibv_close_device", &a.closeDevice, &w) &&
                  resolve(lib, "ibv_query_device", &a.queryDevice, &w) &&
                  resolve(lib, "ibv_query_port", &a.queryPortSymbol, &w) &&
                  resolve(lib, "ibv_query_gid", &a.queryGid, &w) &&
                  resolve(lib, "ibv_alloc_pd", &a.allocPd, &w) &&
                  resolve(lib, "ibv_dealloc_pd", &a.deallocPd, &w) &&
                  resolve(lib, "ibv_reg_mr", &a.regMr, &w) &&
                  resolve(lib, "ibv_dereg_mr", &a.deregMr, &w) &&
                  resolve(lib, "ibv_create_comp_channel", &a.createCompChannel, &w) &&
                  resolve(lib, "ibv_destroy_comp_channel", &a.destroyCompChannel, &w) &&
                  resolve(lib, "ibv_create_cq", &a.createCq, &w) &&
                  resolve(lib, "ibv_destroy_cq", &a.destroyCq, &w) &&
                  resolve(lib, "ibv_get_cq_event", &a.getCqEvent, &w) &&
                  resolve(lib, "ibv_ack_cq_events", &a.ackCqEvents, &w) &&
                  resolve(lib, "ibv_create_qp", &a.createQp, &w) &&
                  resolve(lib, "ibv_modify_qp", &a.modifyQp, &w) &&
                  resolve(lib, "ibv_destroy_qp", &a.destroyQp, &w) &&
                  resolve(lib, "ibv_get_async_event", &a.getAsyncEvent, &w) &&
                  resolve(lib, "ibv_ack_async_event", &a.ackAsyncEvent, &w) &&
                  resolve(lib, "ibv_wc_status_str", &a.wcStatusStr, &w) &&
                  resolve(lib, "ibv_event_type_str", &a.eventTypeStr, &w);
  if (ok) l.table = &l.api;
  return l;
}

}  // namespace

int VerbsApi::queryPort(ibv_context* context, uint8_t port, ibv_port_attr* attr) const {
  verbs_context* vctx = verbs_get_ctx_op(context, query_port);
  if (vctx != nullptr) return vctx->query_port(context, port, attr, sizeof *attr);
  *attr = ibv_port_attr{};
  return queryPortSymbol(context, port, reinterpret_cast<_compat_ibv_port_attr*>(attr));
}

const VerbsApi* VerbsApi::get(std::string* why) {
  static const Loaded loaded = load();
  if (loaded.table == nullptr && why != nullptr) *why = loaded.why;
  return loaded.table == nullptr ? nullptr : &loaded.api;
}

}  // namespace coil::transport::ib
