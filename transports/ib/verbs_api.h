// VerbsApi: libibverbs, loaded at run time.
//
// libcoil.so must load and run shm and tcp on a machine without rdma-core,
// so it does not link libibverbs: the ib transport opens libibverbs.so.1
// with dlopen the first time it is asked for, and resolves the few entry
// points it calls. The data-path calls (ibv_post_send, ibv_post_recv,
// ibv_poll_cq, ibv_req_notify_cq) are inline functions of verbs.h that go
// through the device context's own table, so they need no symbol.
//
// Only the classic calls are used: Debian 12's rdma-core 44 loses
// completions on rxe in the extended ibv_start_poll path and has bugs in
// ibv_wr_* (../shared/FACTS-ib-cuda-topology.md).
#pragma once

#include <infiniband/verbs.h>

#include <string>

namespace coil::transport::ib {

struct VerbsApi {
  decltype(&::ibv_get_device_list) getDeviceList;
  decltype(&::ibv_free_device_list) freeDeviceList;
  decltype(&::ibv_get_device_name) getDeviceName;
  decltype(&::ibv_open_device) openDevice;
  decltype(&::ibv_close_device) closeDevice;
  decltype(&::ibv_query_device) queryDevice;
  /// The exported symbol; call queryPort() below instead.
  int (*queryPortSymbol)(ibv_context*, uint8_t, _compat_ibv_port_attr*);
  decltype(&::ibv_query_gid) queryGid;
  decltype(&::ibv_alloc_pd) allocPd;
  decltype(&::ibv_dealloc_pd) deallocPd;
  decltype(&::ibv_reg_mr) regMr;
  decltype(&::ibv_dereg_mr) deregMr;
  decltype(&::ibv_create_comp_channel) createCompChannel;
  decltype(&::ibv_destroy_comp_channel) destroyCompChannel;
  decltype(&::ibv_create_cq) createCq;
  decltype(&::ibv_destroy_cq) destroyCq;
  decltype(&::ibv_get_cq_event) getCqEvent;
  decltype(&::ibv_ack_cq_events) ackCqEvents;
  decltype(&::ibv_create_qp) createQp;
  decltype(&::ibv_modify_qp) modifyQp;
  decltype(&::ibv_destroy_qp) destroyQp;
  decltype(&::ibv_get_async_event) getAsyncEvent;
  decltype(&::ibv_ack_async_event) ackAsyncEvent;
  decltype(&::ibv_wc_status_str) wcStatusStr;
  decltype(&::ibv_event_type_str) eventTypeStr;

  /// The process-wide table, loaded on first use; nullptr (and *why) when
  /// libibverbs.so.1 or one of its symbols is missing.
  static const VerbsApi* get(std::string* why);

  /// ibv_query_port as verbs.h's inline wrapper does it: the provider's
  /// sized query when it has one, else the exported compat entry point.
  int queryPort(ibv_context* context, uint8_t port, ibv_port_attr* attr) const;
};

}  // namespace coil::transport::ib
