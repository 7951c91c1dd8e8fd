/*
 * coil.h — the public C API of coil, a ring/tree all-reduce library.
 *
 * The shape follows NCCL's: porting NCCL host code is `s/nccl/coil/`.
 * Every function returns a coilResult_t; a failure also stores a readable
 * message, retrieved with coilGetLastError(comm).
 *
 * Buffers are host memory or, in a build with CUDA, device memory, found
 * per buffer. A call on host buffers takes a NULL stream and completes
 * before it returns. A call on device buffers is enqueued on its stream (a
 * cudaStream_t; NULL is the legacy default stream) and returns at once, as
 * in NCCL: the results are there once the stream gets past the call. One
 * call's buffers must all be host or all device memory.
 */
#ifndef COIL_H_
#define COIL_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version is the NCCL API level coil implements, numbered as NCCL
 * numbers its releases: 2.28.0 means "the host API of NCCL 2.28", so that
 * version checks in ported code (`#if NCCL_VERSION_CODE >= NCCL_VERSION(2,19,0)`
 * after s/NCCL/COIL/) take the branch written for the API coil has. It is
 * not coil's package version (pkg-config's, the library's soname): that
 * one counts coil's own releases. */
#define COIL_MAJOR 2
#define COIL_MINOR 28
#define COIL_PATCH 0
#define COIL_SUFFIX ""
/// A version as a comparable integer, in NCCL's encoding: X*10000 + Y*100 + Z
/// from 2.9 on, X*1000 + Y*100 + Z before (NCCL's older scheme), so that
/// comparisons with any NCCL version a program names come out right.
#define COIL_VERSION(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))
/// This header's version: COIL_VERSION(COIL_MAJOR, COIL_MINOR, COIL_PATCH),
/// 22800; coilGetVersion reports the library's, the same for a matching build.
#define COIL_VERSION_CODE COIL_VERSION(COIL_MAJOR, COIL_MINOR, COIL_PATCH)

/* In C++ coil's enums have int as their fixed underlying type, so any int
 * a C caller passes is a value of the type, and coil can reject a bad one
 * by value (without it, even loading 42 as a coilDataType_t would be
 * undefined behaviour). In C the enums are ints already. */
#ifdef __cplusplus
#define COIL_ENUM_BASE : int
#else
#define COIL_ENUM_BASE
#endif

/// Opaque communicator handle.
typedef struct coilComm* coilComm_t;

/// A cudaStream_t, for calls on device buffers. Host buffers take NULL.
typedef void* coilStream_t;

#define COIL_UNIQUE_ID_BYTES 128
/// Rendezvous token: the root's address and a 128-bit random secret.
/// Produce it once (coilGetUniqueId) and hand the same bytes to every rank.
typedef struct {
  char internal[COIL_UNIQUE_ID_BYTES];
} coilUniqueId;

/// Result codes. Values match NCCL's ncclResult_t.
typedef enum COIL_ENUM_BASE {
  coilSuccess = 0,
  coilUnhandledCudaError = 1,
  coilSystemError = 2,
  coilInternalError = 3,
  coilInvalidArgument = 4,
  coilInvalidUsage = 5,
  coilRemoteError = 6,
  coilInProgress = 7,
  coilTimeout = 8,
  coilNumResults = 9
} coilResult_t;

/// Element types. Values match NCCL's ncclDataType_t.
typedef enum COIL_ENUM_BASE {
  coilInt8 = 0,
  coilChar = 0,
  coilUint8 = 1,
  coilInt32 = 2,
  coilInt = 2,
  coilUint32 = 3,
  coilInt64 = 4,
  coilUint64 = 5,
  coilFloat16 = 6,
  coilHalf = 6,
  coilFloat32 = 7,
  coilFloat = 7,
  coilFloat64 = 8,
  coilDouble = 8,
  coilBfloat16 = 9,
  coilNumTypes = 10
} coilDataType_t;

/// Reduction operators. coilSum..coilAvg have NCCL's ncclRedOp_t values.
/// coilAvg is the sum divided by the rank count (integers truncate).
/// coilBand, coilBor and coilBxor (bitwise and, or, exclusive or) are coil's
/// own, as MPI's MPI_BAND/BOR/BXOR and gloo's: they take the integer types
/// only; with a float type a call is coilInvalidArgument.
typedef enum COIL_ENUM_BASE {
  coilSum = 0,
  coilProd = 1,
  coilMax = 2,
  coilMin = 3,
  coilAvg = 4,
  coilBand = 5,
  coilBor = 6,
  coilBxor = 7,
  coilNumOps = 8,
  /// The largest value an op can have (as NCCL's ncclMaxRedOp): it makes the
  /// enum as wide as an int, for the ops coilRedOpCreatePreMulSum returns
  /// (coilNumOps and up). Not an op itself: passing it is coilInvalidArgument.
  coilMaxRedOp = 0x7fffffff
} coilRedOp_t;

#define COIL_CONFIG_MAGIC 0xC0117C0Fu
#define COIL_CONFIG_VERSION 3
/// Communicator options. Always start from COIL_CONFIG_INITIALIZER, so the
/// struct can grow without breaking the ABI (size, magic and version are
/// checked). A field left at its "undefined" value takes the default.
typedef struct {
  size_t size;           ///< sizeof(coilConfig_t); set by the initializer
  unsigned int magic;    ///< COIL_CONFIG_MAGIC
  unsigned int version;  ///< COIL_CONFIG_VERSION
  int blocking;          ///< 1 (default): init blocks; 0: init returns coilInProgress
  int64_t timeoutMs;     ///< deadline of every wait; <=0: COIL_TIMEOUT_MS or 30 min
  const char* commName;  ///< label used in log lines; may be NULL
  /// Since version 2. Read by coilCommSplit: 1 makes the child use the
  /// parent's connections instead of opening its own (NCCL's splitShare):
  /// the split is cheaper and uses no new sockets, segments or threads, in
  /// exchange for the rules at coilCommSplit. 0: the child connects anew.
  /// Unset (COIL_CONFIG_UNDEF_INT): the parent's setting, else
  /// COIL_SPLIT_SHARE=0|1, else 0. The ranks of one child must agree.
  int splitShare;
  /* Since version 3: NCCL's names for the GPU kernels' shape. coil runs its
   * algorithms on host threads and launches no kernels, so it checks them
   * (CTA counts >= 1, minCTAs <= maxCTAs, a cluster size of 0..8 as on the
   * GPU) and otherwise does not use them: ported code that sets them works. */
  int cgaClusterSize;  ///< CTAs per cooperative group array; accepted, unused on the host
  int minCTAs;         ///< fewest CTAs per collective; accepted, unused on the host
  int maxCTAs;         ///< most CTAs per collective; accepted, unused on the host
  /// The network to use, by name, as NCCL's netName picks a network plugin.
  /// coil's transports: "shm", "tcp", "ib"; NCCL's names "Socket" (tcp) and
  /// "IB" (ib) are accepted too, in any case. Set, it forces that transport
  /// for every peer of this communicator, as COIL_TRANSPORT does for all
  /// (and replaces it). NULL: COIL_TRANSPORT, else coil's choice per peer.
  /// The ranks of one communicator must agree.
  const char* netName;
} coilConfig_t;

#define COIL_CONFIG_UNDEF_INT (-2147483647 - 1)
#define COIL_CONFIG_UNDEF_PTR NULL
#define COIL_CONFIG_INITIALIZER                                                   \
  {                                                                              \
    sizeof(coilConfig_t), COIL_CONFIG_MAGIC, COIL_CONFIG_VERSION,                \
        COIL_CONFIG_UNDEF_INT, 0, NULL, COIL_CONFIG_UNDEF_INT,                   \
        COIL_CONFIG_UNDEF_INT, COIL_CONFIG_UNDEF_INT, COIL_CONFIG_UNDEF_INT,     \
        COIL_CONFIG_UNDEF_PTR                                                    \
  }

/// Stores the library version (COIL_VERSION_CODE) in *version.
coilResult_t coilGetVersion(int* version);

/// Creates a rendezvous id. The calling process hosts the root of the
/// rendezvous (a background thread) until every rank has joined.
/// COIL_COMM_ID=host:port fixes the root's address; then only the process
/// whose address matches hosts the root (the rank-0 process, by convention).
coilResult_t coilGetUniqueId(coilUniqueId* uniqueId);

/// Creates the communicator of rank `rank` (0 <= rank < nranks). Every rank
/// must call it with the same id and nranks; it blocks until all have joined
/// or the timeout passes. Inside coilGroupStart/End the wait moves to
/// coilGroupEnd (see coilCommInitRankConfig).
coilResult_t coilCommInitRank(coilComm_t* comm, int nranks, coilUniqueId commId, int rank);

/// As coilCommInitRank, with options. config may be NULL (defaults).
/// With config->blocking == 0 it returns coilInProgress at once (the init
/// goes on in the background); poll coilCommGetAsyncError until it stops
/// saying coilInProgress, and use the comm once it says coilSuccess.
///
/// Inside coilGroupStart/coilGroupEnd (this one, coilCommInitRank and
/// coilCommInitRankScalable) an init only validates its arguments and hands
/// out the handle, returning coilSuccess; the inits of the group then run
/// together at the outermost coilGroupEnd. So one thread can create every
/// rank of a communicator:
///     coilGroupStart();
///     for (int r = 0; r < n; ++r) coilCommInitRank(&comms[r], n, id, r);
///     coilGroupEnd();
/// coilGroupEnd returns the first failed init's error (each handle's
/// coilCommGetAsyncError reports its own; destroy the handles either way),
/// or coilInProgress when the group holds non-blocking inits, which go on
/// in the background as above.
coilResult_t coilCommInitRankConfig(coilComm_t* comm, int nranks, coilUniqueId commId,
                                    int rank, coilConfig_t* config);

/// As coilCommInitRankConfig, with NCCL's scalable-init signature: nId
/// unique ids, the same array on every rank, each made by coilGetUniqueId
/// (typically on different ranks, so that no one root serves every rank).
/// coil's rendezvous root handles thousands of ranks, so every rank meets
/// at commIds[0]; a process that hosts the root of another of the ids stops
/// that root here, unused.
coilResult_t coilCommInitRankScalable(coilComm_t* newcomm, int nranks, int myrank, int nId,
                                      coilUniqueId* commIds, coilConfig_t* config);

/// Creates `ndev` communicators in this process, one rank each, connected
/// to each other (one thread per rank does the joining). Rank r's device
/// is devlist[r]; devlist NULL means devices 0 .. ndev-1 (wrapping around
/// when there are fewer). Unlike NCCL, several ranks may share a device
/// (devlist {0, 0, 0}). Without CUDA devices devlist is not used.
coilResult_t coilCommInitAll(coilComm_t* comms, int ndev, const int* devlist);

/// Creates a communicator from the launcher's environment:
///  - torchrun:  RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (under torchrun
///    itself the id travels through its agent's store);
///  - Open MPI:  OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE; on one host
///    MASTER_ADDR defaults to 127.0.0.1 and MASTER_PORT to a port from the
///    job id, across hosts MASTER_ADDR is needed;
///  - MPICH, Intel MPI (hydra): PMI_RANK, PMI_SIZE, MASTER_PORT; MASTER_ADDR
///    as under Open MPI;
///  - Slurm (srun): SLURM_PROCID, SLURM_NTASKS, SLURM_STEP_ID; MASTER_ADDR
///    defaults to the step's first node, MASTER_PORT to a port from the job
///    and step ids.
/// (COIL_COMM_ID=host:port may replace MASTER_ADDR/MASTER_PORT.)
/// Rank 0 hosts the rendezvous root at that address. A missing variable
/// gives coilInvalidUsage and a message naming it.
coilResult_t coilCommInitFromEnv(coilComm_t* comm);

/// Waits for outstanding work; the comm stays valid until destroyed.
coilResult_t coilCommFinalize(coilComm_t comm);

/// Frees the communicator and its resources. NULL is accepted.
/// Call it (or coilCommFinalize) before the process ends. A send, or the
/// root's side of a rooted call, returns once coil holds the data; over tcp
/// and ib it leaves the process a moment later. At exit() (or a return from
/// main) coil waits up to 2 s for such data of every live communicator to
/// leave; _exit(), a fatal signal or Python's os._exit() skip that wait, and
/// the peers then fail with coilRemoteError.
///
/// Local, except where device memory is shared through CUDA's legacy IPC
/// between processes (the peer windows under COIL_PEER_IPC=legacy or a
/// driver without cuMem, or windows still registered): then it is
/// collective among the ranks, as NCCL's is within a node. It waits, up to
/// the communicator's timeout, until every process has closed what it
/// opened of this rank's memory, since CUDA forbids freeing it before;
/// where that cannot be confirmed (a peer died or aborted), coil's own
/// window stays allocated until exit, and a warning says so.
///
/// fork(): a child forked after init inherits the handle but none of
/// coil's threads or connections. Every call on it there returns
/// coilInvalidUsage, naming the fork; coilCommDestroy and coilCommAbort of
/// it there only forget it and return coilSuccess, leaving the parent's
/// communicator whole. Make a new communicator in the child instead.
coilResult_t coilCommDestroy(coilComm_t comm);

/// Marks the communicator failed and frees it. Safe to call from another
/// thread while a collective blocks on `comm`: that call returns an error
/// within 100 ms, and the free happens once it has returned. Peers see the
/// connection close and fail with coilRemoteError.
coilResult_t coilCommAbort(coilComm_t comm);

/// Marks the communicator failed without freeing it (as MPI ULFM's
/// MPIX_Comm_revoke; local, not collective). Safe to call from any thread:
/// a call blocked on `comm` returns an error within 100 ms, every later call
/// fails at once with a message saying it was revoked, and peers see the
/// connections close and fail with coilRemoteError. The handle stays valid
/// for coilGetLastError, coilCommGetAsyncError and coilCommDestroy, which
/// frees it. Unlike coilCommAbort, no thread can then be left holding a
/// freed handle: revoke, let the threads that use `comm` return, destroy.
coilResult_t coilCommRevoke(coilComm_t comm);

/// Number of ranks in the communicator.
coilResult_t coilCommCount(const coilComm_t comm, int* count);

/// This communicator's rank.
coilResult_t coilCommUserRank(const coilComm_t comm, int* rank);

/// The communicator's sticky error: coilSuccess, coilInProgress during a
/// non-blocking init, or the error that broke it (e.g. coilRemoteError).
coilResult_t coilCommGetAsyncError(coilComm_t comm, coilResult_t* asyncError);

/// Registers [buff, buff + size) with the communicator, as ncclCommRegister:
/// a transport that writes user memory directly (ib) registers it with its
/// devices once, here, so that point-to-point messages of at least
/// COIL_IB_DIRECT_BYTES from or into it travel without slots or copies and
/// without a registration per call. Buffers that were not registered work
/// as before, through the slots. Local (not collective); `*handle` is for
/// coilCommDeregister. The memory must stay allocated until then.
/// Registering on a communicator without such a transport succeeds and
/// does nothing.
coilResult_t coilCommRegister(const coilComm_t comm, void* buff, size_t size, void** handle);

/// Undoes one coilCommRegister. Not while an operation that uses the
/// buffer is in flight.
coilResult_t coilCommDeregister(const coilComm_t comm, void* handle);

/// A window: a device buffer that every rank of a communicator registered
/// together (coilCommWindowRegister).
typedef struct coilWindow* coilWindow_t;
/// coilCommWindowRegister's winFlags. coil treats every window as
/// symmetric (NCCL's NCCL_WIN_COLL_SYMMETRIC); both values are accepted.
#define COIL_WIN_DEFAULT 0x00
#define COIL_WIN_COLL_SYMMETRIC 0x01

/// Registers [buff, buff + size) of device memory as a window, as
/// ncclCommWindowRegister. Collective: every rank calls it, in the same
/// order as its other calls on `comm`, with a buffer of the same size.
/// Where every rank is a GPU of one host, each maps the others' buffers
/// (CUDA IPC of memory from cudaMalloc or coilMemAlloc), and device calls
/// of at least COIL_PEER_MIN_BYTES read their peers' buffers in place, with
/// no copy into a slot and no staging: an all-reduce whose input and output
/// lie in windows, an all-gather or a broadcast whose output does, a
/// reduce-scatter, a reduce or an all-to-all whose input does (built-in
/// ops), at the same offsets on every rank (so an all-reduce in place on
/// every rank or on none). Gathers and scatters do not read windows in
/// place. Ranks that pass different places fail the call on
/// every rank (coilCommGetAsyncError), naming it; no rank reads past a
/// peer's window or writes to it. Communicators of more than 8 ranks do not
/// read windows in place yet. Elsewhere, or where a rank
/// cannot export or map its buffer, the window is registered, not mapped,
/// and calls on it work as before (INFO says why). A rank that passes a
/// bad buffer fails, and its peers fail naming it. The memory must stay
/// allocated until coilCommWindowDeregister.
coilResult_t coilCommWindowRegister(coilComm_t comm, void* buff, size_t size, coilWindow_t* win,
                                    int winFlags);

/// Collective: every rank deregisters its windows in the same order, after
/// the calls that use them were enqueued; it waits for them to finish, and
/// for every other process to close the buffer: it may be freed once this
/// returns.
coilResult_t coilCommWindowDeregister(coilComm_t comm, coilWindow_t win);

/// Allocates `size` bytes of device memory on the current CUDA device.
/// coilInvalidUsage (with the reason) where no device is usable.
coilResult_t coilMemAlloc(void** ptr, size_t size);

/// Frees memory from coilMemAlloc. NULL is accepted.
coilResult_t coilMemFree(void* ptr);

/// The CUDA device of the communicator: the current device when it was
/// created (for coilCommInitAll, its devlist entry); -1 without CUDA.
coilResult_t coilCommCuDevice(const coilComm_t comm, int* device);

/// A static description of a result code.
const char* coilGetErrorString(coilResult_t result);

/// The message of the last failure: of `comm`, or of this thread's last
/// call when comm is NULL (or was never created). Never NULL.
const char* coilGetLastError(coilComm_t comm);

/// Reads COIL_DEBUG, COIL_DEBUG_SUBSYS and COIL_DEBUG_FILE again (NCCL's
/// ncclResetDebugInit): later log lines follow their new values, and a log
/// file opened until now is closed. coil otherwise reads them once, at its
/// first log line.
void coilResetDebugInit(void);

/// Reduces `count` elements of `datatype` from every rank's sendbuff with
/// `op`, and leaves the result in every rank's recvbuff. sendbuff ==
/// recvbuff is in-place; partially overlapping buffers are rejected.
/// count == 0 is a successful no-op. The result is bitwise identical on
/// every rank and from run to run (same inputs, ranks and algorithm).
coilResult_t coilAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           coilDataType_t datatype, coilRedOp_t op, coilComm_t comm,
                           coilStream_t stream);


/* ------------------------------------------------------------------------ */
/* More collectives (NCCL's argument order and meaning).                     */
/* All take host buffers, complete before returning (stream must be NULL),  */
/* accept count == 0 as a no-op, and allow in-place use where NCCL does.    */
/* ------------------------------------------------------------------------ */

/// Copies `count` elements from the root's sendbuff to every rank's
/// recvbuff. sendbuff is only read on the root. In-place: sendbuff == recvbuff.
coilResult_t coilBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           coilDataType_t datatype, int root, coilComm_t comm,
                           coilStream_t stream);

/// In-place broadcast (NCCL's older form): coilBroadcast(buff, buff, ...).
coilResult_t coilBcast(void* buff, size_t count, coilDataType_t datatype, int root,
                       coilComm_t comm, coilStream_t stream);

/// Reduces every rank's sendbuff with `op` into the root's recvbuff
/// (recvbuff is only written, and only needed, on the root).
coilResult_t coilReduce(const void* sendbuff, void* recvbuff, size_t count,
                        coilDataType_t datatype, coilRedOp_t op, int root, coilComm_t comm,
                        coilStream_t stream);

/// Gathers `sendcount` elements from every rank into every rank's recvbuff
/// (nranks * sendcount elements, rank r's block at r * sendcount).
/// In-place: sendbuff == recvbuff + rank * sendcount.
coilResult_t coilAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           coilDataType_t datatype, coilComm_t comm, coilStream_t stream);

/// Reduces nranks * recvcount elements across ranks and leaves block r
/// (recvcount elements) on rank r. In-place: recvbuff == sendbuff + rank * recvcount.
coilResult_t coilReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               coilDataType_t datatype, coilRedOp_t op, coilComm_t comm,
                               coilStream_t stream);

/// Sends block p (count elements at p * count) of sendbuff to rank p, and
/// receives rank p's block into recvbuff at p * count. Not in-place.
coilResult_t coilAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          coilDataType_t datatype, coilComm_t comm, coilStream_t stream);

/// Gathers `sendcount` elements from every rank into the root's recvbuff
/// (rank r's block at r * sendcount).
coilResult_t coilGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                        coilDataType_t datatype, int root, coilComm_t comm, coilStream_t stream);

/// Sends block r (recvcount elements at r * recvcount) of the root's
/// sendbuff to rank r's recvbuff.
coilResult_t coilScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                         coilDataType_t datatype, int root, coilComm_t comm, coilStream_t stream);

/// Point-to-point. Sends are matched with receives in order, per pair of
/// ranks. Outside a group each call blocks until done, so a cycle of sends
/// can deadlock; inside coilGroupStart/End it cannot.
coilResult_t coilSend(const void* sendbuff, size_t count, coilDataType_t datatype, int peer,
                      coilComm_t comm, coilStream_t stream);
coilResult_t coilRecv(void* recvbuff, size_t count, coilDataType_t datatype, int peer,
                      coilComm_t comm, coilStream_t stream);

/// Returns once every rank of the communicator has called it.
coilResult_t coilBarrier(coilComm_t comm, coilStream_t stream);

/// Groups: calls between coilGroupStart and coilGroupEnd (on this thread)
/// are queued and issued together at coilGroupEnd. Sends and receives in a
/// group progress concurrently, so no order of them deadlocks; operations on
/// several communicators (coilCommInitAll) run concurrently too. Groups nest;
/// only the outermost coilGroupEnd issues. Errors of queued calls are
/// returned by coilGroupEnd. Inits and splits made in the group run first,
/// together (coilCommInitRankConfig, coilCommSplit); coilGroupEnd returns
/// coilInProgress when some of them are non-blocking and still running.
coilResult_t coilGroupStart(void);
coilResult_t coilGroupEnd(void);

#define COIL_SIM_INFO_MAGIC 0xC0115133u
/// What coilGroupSimulateEnd reports. Start from COIL_SIM_INFO_INITIALIZER.
typedef struct {
  size_t size;          ///< sizeof(coilSimInfo_t); set by the initializer
  unsigned int magic;   ///< COIL_SIM_INFO_MAGIC
  unsigned int version; ///< COIL_VERSION_CODE
  float estimatedTime;  ///< µs the group's operations are predicted to take
} coilSimInfo_t;
#define COIL_SIM_INFO_INITIALIZER \
  { sizeof(coilSimInfo_t), COIL_SIM_INFO_MAGIC, COIL_VERSION_CODE, 0.0f }

/// Ends the group as coilGroupEnd would, except that its operations are not
/// run: they are dropped, and simInfo->estimatedTime receives the time coil's
/// cost model predicts for them (the same model that picks the algorithms;
/// docs/performance.md), with the communicators of the group running side
/// by side. Inits made in the group do run, as at coilGroupEnd. Local: no
/// other rank takes part.
coilResult_t coilGroupSimulateEnd(coilSimInfo_t* simInfo);

/// Where coilRedOpCreatePreMulSum's scalar lives.
typedef enum COIL_ENUM_BASE {
  coilScalarDevice = 0,        ///< scalar points to memory read at call time
  coilScalarHostImmediate = 1  ///< *scalar is read once, at creation
} coilScalarResidence_t;

/// Creates an op that multiplies each rank's input by *scalar (of
/// `datatype`) before summing. Valid on `comm` only, with that datatype.
coilResult_t coilRedOpCreatePreMulSum(coilRedOp_t* op, void* scalar, coilDataType_t datatype,
                                      coilScalarResidence_t residence, coilComm_t comm);
/// Destroys an op made by coilRedOpCreatePreMulSum.
coilResult_t coilRedOpDestroy(coilRedOp_t op, coilComm_t comm);

#define COIL_SPLIT_NOCOLOR (-1)
/// Collective over `comm`: ranks with the same color form a new
/// communicator, ordered by key (ties: parent rank). color ==
/// COIL_SPLIT_NOCOLOR gives *newcomm = NULL. config may be NULL. With
/// config->blocking == 0 it returns coilInProgress while the child joins
/// (poll coilCommGetAsyncError on *newcomm, as after a non-blocking init).
///
/// Inside coilGroupStart/End the split checks its arguments, sets *newcomm
/// to NULL and runs at the outermost coilGroupEnd, together with the
/// group's other splits and inits, which then writes *newcomm (so it must
/// stay valid until then). One thread can split every rank's communicator.
///
/// With splitShare = 1 (see coilConfig_t) the child sends over the
/// parent's connections. Then:
///  - The child must not run an operation while the parent, or another
///    communicator sharing links to the same peers (a sibling or a child
///    from another shared split), runs one on this rank. Sequential use, from
///    any threads, is fine; children over disjoint peers (an odd/even split)
///    may run at the same time. A violation is detected, not silently mixed:
///    the operation that finds a link in use fails with coilInvalidUsage
///    (and breaks, so its peers fail too instead of waiting).
///  - Shared links share fate: when one communicator breaks or is aborted,
///    the links it used close, and the others fail on them (coilRemoteError).
///  - Parent and child may be destroyed in either order; the connections
///    stay open until the last communicator using them is destroyed.
coilResult_t coilCommSplit(coilComm_t comm, int color, int key, coilComm_t* newcomm,
                           coilConfig_t* config);

/// coilCommShrink's flags.
#define COIL_SHRINK_DEFAULT 0x00  ///< the parent is healthy and idle
#define COIL_SHRINK_ABORT 0x01    ///< first end whatever the parent is running
/// Creates a communicator of the parent's ranks less the
/// excludeRanksCount ranks listed in excludeRanksList (parent ranks, in any
/// order). Collective over the ranks that remain, and only them: a listed
/// rank does not call it. New ranks keep the parent's order. config may be
/// NULL (the parent's timeout, name and splitShare-free connections).
///
/// COIL_SHRINK_DEFAULT: the parent must be usable and no operation may be in
/// flight on it; the remaining ranks meet over the parent's connections.
/// COIL_SHRINK_ABORT: for a parent that failed (a rank died, a peer broke
/// it) or whose operations must be abandoned: coil first revokes the parent
/// (as coilCommRevoke: a call blocked on it returns, later calls fail), then
/// the remaining ranks meet without a word between them: each derives the
/// same rendezvous from the parent (hosted by the lowest remaining rank at
/// the address its bootstrap listener had, with a secret only the parent's
/// ranks can compute). Should another socket have taken that port since,
/// the lowest rank fails with coilSystemError and the others at their
/// timeout. In both modes the parent stays valid for coilCommDestroy.
/// Non-blocking configs work as for coilCommSplit (coilInProgress).
coilResult_t coilCommShrink(coilComm_t comm, int* excludeRanksList, int excludeRanksCount,
                            coilComm_t* newcomm, coilConfig_t* config, int shrinkFlags);

#ifdef __cplusplus
}
#endif

#endif  // COIL_H_
