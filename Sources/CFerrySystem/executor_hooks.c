// Swift Concurrency's global executor handed to a function of the caller's choosing, through the
// runtime's hook (swift/Runtime/ConcurrencyHooks.def). See cferry_install_enqueue_hook in
// CFerrySystem.h.
#include "CFerrySystem.h"

#define SWIFTCC __attribute__((swiftcall))

// A hook, when set, is called instead of the runtime's own implementation, which it receives as
// `original`. Hooks use the Swift calling convention.
typedef SWIFTCC void (*enqueue_original)(void *job);
extern SWIFTCC void (*swift_task_enqueueGlobal_hook)(void *job, enqueue_original original);

static cferry_enqueue_job enqueuer;

static SWIFTCC void enqueue_hook(void *job, enqueue_original original) {
    (void)original;
    enqueuer(job);
}

void cferry_install_enqueue_hook(cferry_enqueue_job enqueue) {
    enqueuer = enqueue;
    swift_task_enqueueGlobal_hook = enqueue_hook;
}
