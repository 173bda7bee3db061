// The few Linux system interfaces that Glibc's Swift overlay does not import:
// inotify, copy_file_range, getrandom and struct ucred (SO_PEERCRED). Everything here is a thin
// pass-through so Swift code calls the kernel directly. Functions that need _GNU_SOURCE
// are defined in shim.c, so this header does not change the system headers' definitions
// (which would clash with other C modules, such as swift-system's).
#ifndef CFERRY_SYSTEM_H
#define CFERRY_SYSTEM_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/inotify.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/// fallocate(2) with mode 0: reserves `len` bytes of `fd` from offset 0. Returns 0 or -1 with
/// errno (EOPNOTSUPP where the filesystem cannot; unlike posix_fallocate, never writes zeros).
int cferry_fallocate(int fd, int64_t len);

/// memfd_create(2) with MFD_CLOEXEC: an anonymous in-memory file (a hook's standard input); where
/// that is refused, an unnamed file in /tmp (O_TMPFILE, else one created and unlinked).
int cferry_memfd(const char *name);

/// copy_file_range(2): copies `len` bytes from `fd_in` at `*off_in` to `fd_out` at `*off_out`
/// inside the kernel (reflinks on filesystems that support it).
ssize_t cferry_copy_file_range(int fd_in, int64_t *off_in, int fd_out, int64_t *off_out, size_t len);

/// getrandom(2) from the kernel's secure source (blocking only until it is seeded at boot).
static inline ssize_t cferry_getrandom(void *buffer, size_t length) { return getrandom(buffer, length, 0); }

static inline int cferry_inotify_init(void) { return inotify_init1(IN_CLOEXEC | IN_NONBLOCK); }

static inline int cferry_inotify_add_watch(int fd, const char *path, uint32_t mask) {
    return inotify_add_watch(fd, path, mask);
}

static inline int cferry_inotify_rm_watch(int fd, int wd) { return inotify_rm_watch(fd, wd); }

/// The inotify event masks Ferry uses, re-exported as plain constants.
static const uint32_t CFERRY_IN_MOVED_TO = IN_MOVED_TO;
static const uint32_t CFERRY_IN_MOVED_FROM = IN_MOVED_FROM;
static const uint32_t CFERRY_IN_CLOSE_WRITE = IN_CLOSE_WRITE;
static const uint32_t CFERRY_IN_CREATE = IN_CREATE;
static const uint32_t CFERRY_IN_MODIFY = IN_MODIFY;
static const uint32_t CFERRY_IN_DELETE = IN_DELETE;
static const uint32_t CFERRY_IN_DELETE_SELF = IN_DELETE_SELF;
static const uint32_t CFERRY_IN_MOVE_SELF = IN_MOVE_SELF;
static const uint32_t CFERRY_IN_ATTRIB = IN_ATTRIB;
static const uint32_t CFERRY_IN_Q_OVERFLOW = IN_Q_OVERFLOW;
static const uint32_t CFERRY_IN_IGNORED = IN_IGNORED;
static const uint32_t CFERRY_IN_ISDIR = IN_ISDIR;
static const uint32_t CFERRY_IN_ONLYDIR = IN_ONLYDIR;
static const uint32_t CFERRY_IN_DONT_FOLLOW = IN_DONT_FOLLOW;
static const uint32_t CFERRY_IN_EXCL_UNLINK = IN_EXCL_UNLINK;

/// The peer credentials of a connected Unix socket, laid out as `struct ucred` (which the system
/// headers only declare under _GNU_SOURCE), for getsockopt(SOL_SOCKET, SO_PEERCRED).
typedef struct {
    int32_t pid;
    uint32_t uid;
    uint32_t gid;
} cferry_ucred;
static const int CFERRY_SO_PEERCRED = SO_PEERCRED;

/// renameat2(2) with RENAME_NOREPLACE: fails with EEXIST instead of replacing an existing target.
int cferry_rename_noreplace(int olddirfd, const char *oldpath, int newdirfd, const char *newpath);

/// Tunes glibc malloc for a long-running streaming daemon: a fixed mmap threshold of 128 KiB (so
/// large transfer buffers are returned to the kernel when freed, instead of the threshold creeping up
/// and freed buffers piling up in heap arenas) and at most two arenas.
void cferry_tune_malloc(void);

/// Raises the soft limit on open files to the hard limit (at most 65536): a bundle keeps each of
/// its files open while its body is built. Returns the soft limit in force.
long cferry_raise_open_files_limit(void);

/// Drops this process's mappings of the executable's code pages (the read-only, executable mapping
/// that holds this function), so that code run only while starting, and the neighbours the kernel
/// mapped around each page it touched (fault-around, 64 KiB), stop counting in its resident set.
/// The pages stay in the page cache; code used later is mapped again on first use. Returns the
/// mapping's length, or -1 if it was not found, or not dropped because some of its pages are
/// private copies (`Anonymous` in /proc/self/smaps: text relocations, a debugger's breakpoints),
/// which dropping would replace with the file's bytes.
long cferry_release_text_pages(void);

/// memmem(3): the first occurrence of `needle` in `haystack`, or NULL.
void *cferry_memmem(const void *haystack, size_t haystacklen, const void *needle, size_t needlelen);

/// S_ISREG / S_ISDIR / S_ISLNK on a stat mode.
static inline int cferry_is_regular(mode_t mode) { return S_ISREG(mode); }
static inline int cferry_is_directory(mode_t mode) { return S_ISDIR(mode); }
static inline int cferry_is_symlink(mode_t mode) { return S_ISLNK(mode); }

/// Nanosecond modification time of a stat buffer.
static inline int64_t cferry_stat_mtime_ns(const struct stat *st) {
    return (int64_t)st->st_mtim.tv_sec * 1000000000LL + (int64_t)st->st_mtim.tv_nsec;
}

static inline int cferry_errno(void) { return errno; }

/// A close-on-exec Unix datagram socket (sd_notify). The SOCK_* names are spelled differently by
/// Glibc's Swift overlay in some builds (--static-swift-stdlib), so they are used from C.
static inline int cferry_unix_datagram_socket(void) { return socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0); }

/// journald's native protocol, for an entry too large for one datagram (journal.c): a memfd
/// (close-on-exec) holding `length` bytes, sealed against any change (F_SEAL_SHRINK, F_SEAL_GROW,
/// F_SEAL_WRITE, F_SEAL_SEAL) as journald requires. Returns the descriptor, or -1 with errno.
int cferry_sealed_memfd(const char *name, const void *bytes, size_t length);

/// Sends descriptor `fd` (SCM_RIGHTS) in an otherwise empty datagram from `socket` to `address`
/// (a sockaddr_un of `address_length` bytes). Returns 0, or -1 with errno.
int cferry_send_descriptor(int socket, const void *address, socklen_t address_length, int fd);

/// CRC-32C (Castagnoli) of `length` bytes continuing `crc` (0 to start): S3's x-amz-checksum-crc32c.
/// Uses the CPU's crc32 instruction where there is one.
uint32_t cferry_crc32c_update(uint32_t crc, const void *data, size_t length);

/// The same, always by table (to test the two against each other).
uint32_t cferry_crc32c_update_portable(uint32_t crc, const void *data, size_t length);

/// Runs a Swift Concurrency job (a `Job *`) on an executor of the caller's choosing.
typedef void (*cferry_enqueue_job)(void *job);

/// Makes `enqueue` Swift Concurrency's global executor for jobs to run now, through the runtime's
/// hook, instead of libdispatch's global queues. Delayed jobs (`Task.sleep`) still go to
/// libdispatch. Call once, before any job reaches the global executor.
void cferry_install_enqueue_hook(cferry_enqueue_job enqueue);

#endif
