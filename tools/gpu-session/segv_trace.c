// LD_PRELOAD'ed into a GPU check whose process dies of a signal with no
// native stack (Python's faulthandler shows only Python frames, and only
// Python threads): prints the faulting thread's native stack, as
// "library(+offset)" lines that addr2line resolves against the same build.
// Python's faulthandler, installed later, re-raises the signal after its own
// dump with the handler it found, this one.
#define _GNU_SOURCE
#include <execinfo.h>
#include <stdio.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static void say(const char* s) { (void)!write(2, s, strlen(s)); }

static void onFatal(int sig, siginfo_t* info, void* context) {
  (void)context;
  char line[160];
  void* frames[64];
  int n = backtrace(frames, 64);
  snprintf(line, sizeof line, "\n== segv_trace: signal %d, address %p, thread %ld, native stack:\n", sig,
           info->si_addr, (long)syscall(SYS_gettid));
  say(line);
  backtrace_symbols_fd(frames, n, 2);
  say("== segv_trace: end\n");
  signal(sig, SIG_DFL);
  raise(sig);
}

__attribute__((constructor)) static void install(void) {
  void* warm[2];
  backtrace(warm, 2);  // loads libgcc_s now, not inside the handler
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = onFatal;
  sa.sa_flags = SA_SIGINFO;
  sigaction(SIGSEGV, &sa, NULL);
  sigaction(SIGBUS, &sa, NULL);
  sigaction(SIGILL, &sa, NULL);
  sigaction(SIGFPE, &sa, NULL);
}
