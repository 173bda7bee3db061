import CFerrySystem
import NIOCore
import NIOPosix

/// Runs Swift Concurrency's jobs on NIO's event loops instead of libdispatch's global queues.
///
/// The uploads already run on `MultiThreadedEventLoopGroup.singleton`; with its threads as the
/// global executor, a task resumed by an answer runs where the answer arrived, with no hop to
/// another pool. And an idle ferryd sleeps: libdispatch starts a timer that wakes the process every
/// second, for good, as soon as one of its global queues has run a job (`_dispatch_workq_monitor_pools`
/// watches the pool it grows); its serial queues (GRDB's, the main queue) do not start it. The
/// daemon's own sleeps are event loop timers too (`EventLoopSleep`).
///
/// NIO's `unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor` does the same
/// but finds the hook with `dlsym`, so it does nothing in a binary with the Swift runtime linked in
/// statically, as ferryd is packaged; here the hook is linked directly.
enum EventLoopExecutor {
    /// Installs the event loops as the global executor. Call once, first thing in `main`, on the
    /// main actor, before any task runs elsewhere.
    static func install() {
        cferry_install_enqueue_hook { job in
            guard let job else { return }
            MultiThreadedEventLoopGroup.singleton.any().enqueue(ExecutorJob(unsafeBitCast(job, to: UnownedJob.self)))
        }
    }
}
