// The sockets coil holds, listed so that a forked child lets go of them.
//
// fork() gives the child a copy of every descriptor, and a connection ends
// for its peer only when the last copy closes. A child that outlived its
// parent (a data-loader worker, a checkpoint writer, anything a rank forks
// after init) therefore kept a dead rank's connections open: its peers saw
// nothing until their timeout. And a child that called shutdown() on its
// copy (a communicator's teardown does) would have ended the parent's live
// connection. So a pthread_atfork child handler points every listed
// descriptor at /dev/null: in the child the number stays taken (the
// child's Socket objects close it one day, and nothing else may get that
// number meanwhile), and the connection is the parent's alone.
//
// Socket (socket.h) lists and unlists itself. A fork that falls between a
// socket() or accept4() and its listing leaves that one socket in the
// child, as before: a slower failure, never a wrong one.
#pragma once

namespace coil {

/// Lists `fd`, a socket this process just made or accepted.
void listSocket(int fd);
/// Unlists and closes `fd` in one step, so that no fork sees it listed but
/// closed, or unlisted but open.
void closeListedSocket(int fd);

}  // namespace coil
