// The OpenSHMEM C library's failures (docs/openshmem.md, "Bad input"): the one line a failure
// prints, the refusal a collective's failed check publishes first, and the end of the job.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "bindings/openshmem/library.h"

namespace hyper_parallel::shmem::openshmem {

void Report(std::string_view call, const Status& status) {
  std::fflush(stdout);
  // The operation is the call the program made (the Runtime names its own unit, a check of
  // this library's none).
  const Status named =
      status.Retagged(call, status.phase().empty() ? "validate" : status.phase());
  std::fprintf(stderr, "hyper_parallel_shmem: PE %d: %.*s: %s\n", Initialized() ? Runtime::Process().rank() : -1,
               static_cast<int>(call.size()), call.data(), named.ToString().c_str());
}

namespace {

// The team of the collective whose checks this thread is running (RefusalScope), if any.
struct PendingRefusal {
  bool armed = false;
  TeamHandle team;
};
thread_local PendingRefusal pending_refusal;

}  // namespace

RefusalScope::RefusalScope(const TeamHandle& team) { pending_refusal = {true, team}; }
RefusalScope::~RefusalScope() { pending_refusal.armed = false; }
void RefusalScope::Entered() { pending_refusal.armed = false; }

void Fail(std::string_view call, const Status& status) {
  if (pending_refusal.armed && Initialized()) {
    // A collective refused here: its place is taken first, so the others' call fails naming
    // this PE's reason (bounded by the Runtime's timeout) instead of waiting for it.
    pending_refusal.armed = false;
    (void)Runtime::Process().RefuseCollective(pending_refusal.team, call.substr(0, 15), status,
                                              kDefaultStream);
  }
  Report(call, status);
  GlobalExit(1);
}

void FailArgument(std::string_view call, std::string_view argument, std::string_view rule,
                  std::string_view given) {
  Fail(call, Status::Contract(ErrorCode::kInvalidArgument, std::string(call) + " " + std::string(argument),
                              rule, given));
}

void GlobalExit(int status) {
  std::fflush(nullptr);
  // The launcher's control pipe: it stops every other PE and exits with this status.
  if (const char* fd = std::getenv("HPS_OSHRUN_CONTROL_FD")) {
    const int code = status;
    const ssize_t written = ::write(std::atoi(fd), &code, sizeof(code));
    (void)written;
  }
  std::_Exit(status);
}

}  // namespace hyper_parallel::shmem::openshmem
